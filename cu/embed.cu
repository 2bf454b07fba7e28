// Embedding lookup for every weight type: out[i][:] = dequant(row tok[i] of W[n_embd, n_vocab])
// * scale (gemma's sqrt(n_embd), one rounding: x * s; 1: the rows as they are,
// bit for bit).
// Token ids are read from device memory (the decode graph never changes per token); an id
// outside [0, n_vocab) reads row 0 rather than out of bounds (the host validates ids first).
// grid (ceil(n_embd / 256), M), block 256.
// The decode step's first kernel also stamps when the step began (issue 12's idle gap): with
// t_begin0 not NULL (the t_begin field of record 0 of the decode ring, records 8 u64 apart),
// thread 0 of block 0 writes %globaltimer into the record of position tok[1] (decode: d_pos
// follows d_tok); the rows it writes are the same either way.
#include "kernels.cuh"
#include "quant.cuh"

template <int TYPE>
__device__ __forceinline__ void zr_embed(const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws,
                                         const int *__restrict__ tok, float *__restrict__ out, int n_embd, int n_vocab,
                                         unsigned long long *t_begin0, int n_slots, float scale) {
    zr_grid_enter();
    if (t_begin0 && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) {
        unsigned long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        t_begin0[(size_t)((unsigned)tok[1] % (unsigned)n_slots) * 8] = t;
    }
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= n_embd) return;
    int r = tok[blockIdx.y];
    if (r < 0 || r >= n_vocab) r = 0;
    out[(size_t)blockIdx.y * n_embd + e] = zr_dq<TYPE>(w, ws, n_embd, n_vocab, r, e) * scale;
}

#define ZR_EMBED(NAME, TYPE)                                                                            \
    ZR_KERNEL void __launch_bounds__(256) NAME(const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws, \
                                               const int *__restrict__ tok, float *__restrict__ out, int n_embd, \
                                               int n_vocab, unsigned long long *t_begin0, int n_slots, \
                                               float scale) {                                          \
        zr_embed<TYPE>(w, ws, tok, out, n_embd, n_vocab, t_begin0, n_slots, scale);                    \
    }                                                                                                   \
    ZR_KCHECK_FAMILY(embed, NAME);

// embed_<kernel> for every type with kernels in the type table
#define ZR_TYPE(id, E, name, block, bytes, kernel, item, main, side) ZR_EMBED(embed_##kernel, ZR_T_##E)
#include "../src/zr_types.def"
