// The experts' down product fused with their mix (issue 15): the decode's
//   mix_x[r] += sum over slots j < n_used (in order) of weights[j] * (W_ids[j] x_j)[r]
// in one launch that writes no per-slot output and keeps no counts.
//
// Why it is shaped like this: matvec_id's down launch (cu/moe_matvec.cu) gives each (row group,
// slot) pair a warp. On Qwen3-30B-A3B's down (2048 rows of 768 values, 8 slots) that is 8192
// warps of one 16-byte item a lane (24 of 32 lanes busy), ~2 waves of 256-thread blocks at 32
// warps an SM, each block waiting on the ids, then on one DRAM round trip, then on a fence and
// an atomic count so that the last slot's block mixes. Here a warp owns one output row for
// every slot: right after the ids it requests its first P-1 (slot, item) pairs (a row's items
// of every slot, slot by slot, spread over the 32 lanes: lane l takes pairs l, l + 32, ...), so
// the launch is 2048 warps in one wave, every lane busy (Qwen3-30B-A3B: 6 pairs a lane), and the
// warp adds the weighted sum of its slots into mix_x itself.
//
// x: the slots' inputs, contiguous [n_used][n_in] with n_in % 32 == 0, staged once for all slots
// as one row of n_used n_in values (zr_cuf_mv_smem(n_used n_in) bytes of dynamic shared memory),
// so slot s's item it is that row's item s items + it: the floats' pads and staged sums, and the
// integer planes' blocks of 32, are the slot's (a super-block of 256 may span two slots: Q8_0 and
// the 32-value block types need only n_in % 32 == 0). n_in > 0: a lane's walk over the pairs
// steps by whole rows. Block 32 G threads: warp g of block b computes row b G + g (n_rows rows of
// one expert); n_used <= 32; an id outside 0..n_total/n_rows-1 is clamped (as matvec_id's).
// Arithmetic: each item's value (cu/matvec.cuh's comp on a zero sum) times its slot's weight,
// added in the lane's pair order, then one warp sum; equal to matvec_id's rows then moe_combine_f32 within the CPU's bound, not
// bit for bit (the same bits launch after launch).
#include "matvec.cuh"

template <class T, int P>
__device__ __forceinline__ void zr_matvec_id_mix(const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws,
                                                 const float *x, int n_in, int n_rows, const int *ids, int n_used,
                                                 int n_total, const float *weights, float *mix_x) {
    static_assert(P >= 2, "at least one load in flight while one is computed");
    extern __shared__ float4 zr_mv_smem[];
    __shared__ int row0[32];  // each slot's first row in the stacked matrix
    __shared__ float wt[32];  // each slot's weight
    float *xs = (float *)zr_mv_smem;
    const int tid = threadIdx.x, lane = tid & 31, nthr = blockDim.x;
    const int row = blockIdx.x * (nthr >> 5) + (tid >> 5);
    const bool live = row < n_rows;
    zr_grid_enter(); // the ids, the weights and x come from the kernels before
    // the row's value of mix_x, requested first (at the store it was a round trip of its own after
    // the sums)
    const float mix_v = live && lane == 0 ? mix_x[row] : 0.f;
    if (tid < n_used) {
        const int n_expert = n_total / n_rows;
        int e = ids[tid];
        e = e < 0 ? 0 : e >= n_expert ? n_expert - 1 : e;
        row0[tid] = e * n_rows;
        wt[tid] = weights[tid];
    }
    __syncthreads();
    // The warp's (slot, item) pairs, slot by slot, spread over its lanes: lane l computes pairs
    // l, l + 32, ... (Qwen3-30B-A3B's 8 slots of 24 items: 6 pairs a lane, every lane busy, where
    // a slot a step left 8 lanes idle), each item's value weighted by its slot's weight into one
    // sum, and one warp sum at the end.
    const int items = n_in / T::EPI, pairs = n_used * items, n_f = (pairs + 31) >> 5;
    int ls = 0, li = lane; // the next load's slot and item
    while (li >= items) li -= items, ls++;
    typename T::F buf[P][1];
    int bs[P], bi[P]; // each buffer's slot (n_used: past the pairs) and item
    auto load = [&](int q) {
        bs[q] = ls < n_used ? ls : n_used;
        bi[q] = li;
        if (ls < n_used) T::load(T::row(w, ws, n_in, n_total, row0[ls] + row), li, buf[q][0]);
        li += 32;
        while (li >= items) li -= items, ls++;
    };
    // the first P-1 pairs requested before x is staged, so the two latencies overlap
#pragma unroll
    for (int q = 0; q < P - 1; q++)
        if (live && q < n_f) load(q);
    zr_mv_stage_x<ZrMvXsum<T>::value, false, ZrMvXq<T>::value>(x, nullptr, xs, n_used * n_in, ZR_MV_PLAIN, tid, nthr);
    __syncthreads();
    if (!live) return;
    float acc = 0.f;
    // unrolled by P so every buffer index is a compile-time constant (cu/matvec.cuh's pipeline)
    for (int f0 = 0; f0 < n_f; f0 += P) {
#pragma unroll
        for (int q = 0; q < P; q++) {
            const int f = f0 + q;
            if (f < n_f) {
                if (f + P - 1 < n_f) load((q + P - 1) % P);
                const int s = bs[q];
                if (s < n_used) {
                    float a[1] = {0.f};
                    T::template comp<1>(buf[q], s * items + bi[q], xs, a);
                    acc = fmaf(wt[s], a[0], acc);
                }
            }
        }
    }
    acc = zr_warp_sum(acc);
    if (lane == 0) mix_x[row] = mix_v + acc;
}

// P: loads a lane keeps in flight (8: Qwen3-30B-A3B's 6 pairs a lane, all at once);
// the register cap leaves 16 warps an SM (one block of 512 threads: src/cuda/klaunch.c), the
// launch's one wave.
#define ZR_MATVEC_ID_MIX(NAME, TRAITS, P, NREG)                                                                   \
    ZR_KERNEL void __maxnreg__(NREG)                                                                             \
        NAME(const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws, const float *x, int n_in, int n_rows, \
             const int *ids, int n_used, int n_total, const float *weights, float *mix_x) {                      \
        zr_matvec_id_mix<TRAITS, P>(w, ws, x, n_in, n_rows, ids, n_used, n_total, weights, mix_x);              \
    }                                                                                                            \
    ZR_KCHECK_FAMILY(mv_idmix, NAME);

ZR_MATVEC_ID_MIX(matvec_id_mix_f32, ZrMvF32, 8, 128)
ZR_MATVEC_ID_MIX(matvec_id_mix_f16, ZrMvF16, 8, 128)
ZR_MATVEC_ID_MIX(matvec_id_mix_bf16, ZrMvBF16, 8, 128)
ZR_MATVEC_ID_MIX(matvec_id_mix_q8_0, ZrMvQ8i, 8, 128)
ZR_MATVEC_ID_MIX(matvec_id_mix_q4_0, ZrMvQ4xi<ZR_T_Q4_0>, 8, 128)
ZR_MATVEC_ID_MIX(matvec_id_mix_q4_1, ZrMvQ4xi<ZR_T_Q4_1>, 8, 128)
ZR_MATVEC_ID_MIX(matvec_id_mix_q5_0, ZrMvQ4xi<ZR_T_Q5_0>, 8, 128)
ZR_MATVEC_ID_MIX(matvec_id_mix_q5_1, ZrMvQ4xi<ZR_T_Q5_1>, 8, 128)
ZR_MATVEC_ID_MIX(matvec_id_mix_q2_k, ZrMvQ2Ki, 8, 128)
ZR_MATVEC_ID_MIX(matvec_id_mix_q3_k, ZrMvQ23K<ZR_T_Q3_K>, 8, 128)
ZR_MATVEC_ID_MIX(matvec_id_mix_q4_k, ZrMvQ4Ki, 8, 128)
ZR_MATVEC_ID_MIX(matvec_id_mix_q5_k, ZrMvQ5Ki, 8, 128)
ZR_MATVEC_ID_MIX(matvec_id_mix_q6_k, ZrMvQ6K, 8, 128)
