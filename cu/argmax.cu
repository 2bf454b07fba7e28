// The greedy pick on the device, the last kernel of a decode step: only 8 bytes (the token and
// the first non-finite id) go back to the host instead of n_vocab logits.
//
// argmax_f32: pick->token = the first id of the largest of logits[0..n), NaN counting as -inf
// (0 when none is above -inf), and pick->nonfinite_at = the first id whose logit is NaN or
// +-inf, or -1 (the host refuses such logits: src/logits_check.h). The token is
// exactly src/sampler.c's greedy rule (zr_sampler_argmax), which compares floats, so -0 and
// +0 tie and the lower id wins.
//
// One pass, one launch: every block reduces a grid-strided share to one (key, first
// non-finite id), the block that finishes last (a counter in the pick buffer, reset by that block) reduces the
// partials. Each candidate is a 64-bit key, order-preserving float bits above the complemented
// id, so "largest key" is "largest logit, then lowest id": a total order, whatever the block
// and thread that saw it, hence the same pick on every run, eager or graph.
// grid 1..ZR_ARGMAX_MAX_BLOCKS, block ZR_ARGMAX_THREADS; logits 16-byte aligned; 1 <= n.
// argmax_pick_f32 is the same pick as the decode step's greedy tail (src/cuda/sample.h).
#include <limits.h>

#include "common.cuh"
#include "pick.cuh"

#define ZR_ARGMAX_THREADS 256
#define ZR_ARGMAX_MAX_BLOCKS 256 // src/cuda/pick.h ZR_PICK_MAX_BLOCKS

// The pick buffer (src/cuda/pick.h ZR_PICK_BYTES): zeroed once when allocated.
struct ZrPick {
    int token;                                    // out
    int nonfinite_at;                             // out
    unsigned int done;                            // blocks finished in this launch
    unsigned int pad;
    unsigned long long key[ZR_ARGMAX_MAX_BLOCKS]; // per block: its best key
    int bad[ZR_ARGMAX_MAX_BLOCKS];                // per block: its first non-finite id, or INT_MAX
};

__device__ __forceinline__ void argmax_take(float v, int i, unsigned long long *key, int *bad) {
    const unsigned long long k = argmax_key(v, i);
    *key = k > *key ? k : *key;
    if (!isfinite(v) && i < *bad) *bad = i; // NaN or +-inf: the host stops with an error
}

// The block's best key and first non-finite id, in thread 0.
__device__ __forceinline__ void argmax_block(unsigned long long *key, int *bad) {
    __shared__ unsigned long long s_key[ZR_ARGMAX_THREADS / 32];
    __shared__ int s_bad[ZR_ARGMAX_THREADS / 32];
    unsigned long long k = *key;
    int m = *bad;
    zr_warp_key_bad(k, m);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) {
        s_key[warp] = k;
        s_bad[warp] = m;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < ZR_ARGMAX_THREADS / 32; w++) {
            k = s_key[w] > k ? s_key[w] : k;
            m = s_bad[w] < m ? s_bad[w] : m;
        }
        *key = k;
        *bad = m;
    }
}

// The pass and the reduction of the partials: returns true in thread 0 of the block that finished
// last, with *token and *nonfinite_at set (the counter is reset for the next launch).
__device__ __forceinline__ bool argmax_run(const float *__restrict__ logits, int n, ZrPick *pick, int *token,
                                           int *nonfinite_at) {
    unsigned long long key = 0; // below every real key (the -inf key is 0x007fffff...)
    int bad = INT_MAX;
    const int stride = gridDim.x * ZR_ARGMAX_THREADS;
    const int t = blockIdx.x * ZR_ARGMAX_THREADS + threadIdx.x;
    const int n4 = n >> 2;
    const float4 *l4 = reinterpret_cast<const float4 *>(logits);
    // four loads in flight before any is used (the host sizes the grid so one round covers n)
    for (int j0 = t; j0 < n4; j0 += 4 * stride) {
        float4 q[4];
#pragma unroll
        for (int u = 0; u < 4; u++)
            if (j0 + u * stride < n4) q[u] = l4[j0 + u * stride];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const int j = j0 + u * stride;
            if (j < n4) {
                argmax_take(q[u].x, 4 * j, &key, &bad);
                argmax_take(q[u].y, 4 * j + 1, &key, &bad);
                argmax_take(q[u].z, 4 * j + 2, &key, &bad);
                argmax_take(q[u].w, 4 * j + 3, &key, &bad);
            }
        }
    }
    if (t < n - 4 * n4) argmax_take(logits[4 * n4 + t], 4 * n4 + t, &key, &bad);
    argmax_block(&key, &bad);

    __shared__ bool s_last;
    if (threadIdx.x == 0) {
        pick->key[blockIdx.x] = key;
        pick->bad[blockIdx.x] = bad;
        __threadfence(); // the partial is visible before the count says so
        s_last = atomicAdd(&pick->done, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!s_last) return false;
    __threadfence();
    key = 0;
    bad = INT_MAX;
    for (int b = threadIdx.x; b < (int)gridDim.x; b += ZR_ARGMAX_THREADS) {
        // L2 reads: the partials come from other multiprocessors
        const unsigned long long k = __ldcg(&pick->key[b]);
        const int m = __ldcg(&pick->bad[b]);
        key = k > key ? k : key;
        bad = m < bad ? m : bad;
    }
    argmax_block(&key, &bad);
    if (threadIdx.x != 0) return false;
    *token = (int)~(unsigned int)(key & 0xffffffffu);
    *nonfinite_at = bad == INT_MAX ? -1 : bad;
    pick->done = 0; // ready for the next launch
    return true;
}

ZR_KERNEL void __launch_bounds__(ZR_ARGMAX_THREADS) argmax_f32(const float *__restrict__ logits, int n, ZrPick *pick) {
    zr_grid_enter();
    int token, bad;
    if (!argmax_run(logits, n, pick, &token, &bad)) return;
    pick->token = token;
    pick->nonfinite_at = bad;
}

// The greedy tail of a decode step (src/cuda/sample.h): the same pick, written as the step's
// ZrPickRecord into ring[pos % n_slots]; when every logit is finite, tok_pos = {token, pos + 1}
// so the next replay decodes it. Greedy leaves the record's generator at zero.
ZR_KERNEL void __launch_bounds__(ZR_ARGMAX_THREADS) argmax_pick_f32(const float *__restrict__ logits, int n, ZrPick *pick,
                                                                    int *tok_pos, ZrPickRecord *ring, int n_slots) {
    zr_grid_enter();
    const int pos = threadIdx.x == 0 ? tok_pos[1] : 0; // loaded now, used after the reduction (last block)
    int token, bad;
    if (!argmax_run(logits, n, pick, &token, &bad)) return;
    ZrPickRecord *r = ring + (unsigned)pos % (unsigned)n_slots;
    r->token = bad < 0 ? token : -1;
    r->status = bad < 0 ? ZR_PICK_OK : ZR_PICK_NONFINITE;
    r->nonfinite_at = bad;
    for (int i = 0; i < 4; i++) r->rng[i] = 0;
    if (bad < 0) {
        tok_pos[0] = token;
        tok_pos[1] = pos + 1;
    }
    r->t_end = zr_globaltimer();
    zr_record_publish(r, pos);
}
