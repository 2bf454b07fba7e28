// The draw over the whole vocabulary (neither top-k nor top-p: src/sampler.c draw_all), on the
// device, to the bit: the weights zr_exp((l - max) / temp) of every id (0 for one below the min-p
// floor or at -inf), zr_tree_sum's tree over them kept whole, and the descent of that tree with
// the CPU's operations (src/zr_exp.h zr_tree_go_right, zr_tree_leaf). The scratch and the
// kernel's shape: src/cuda/sample_full_scratch.h. Launch shape depends on n only.
#include <limits.h>

#include "common.cuh"
#include "pick.cuh"
#include "sample_state.cuh"
#include "../src/cuda/sample_scratch.h"
#include "../src/cuda/sample_full_scratch.h"
#include "../src/zr_exp.h"

// The weight of id i as src/sampler.c draw_all computes it; *cand: whether i is a candidate.
__device__ __forceinline__ double sample_full_weight(const float *work, int i, float max, float floor_l,
                                                     double inv_t, bool *cand) {
    const float l = work[i];
    *cand = l > -INFINITY && l >= floor_l;
    return *cand ? zr_exp(__dmul_rn(__dsub_rn((double)l, (double)max), inv_t)) : 0.0;
}

// Levels 1..lb of block b's subtree by one warp, from its chunk sums in s_node[0..64): level l
// at s_node[128 - (128 >> l)], node k of it the tree's node (b * 64 >> l) + k at level l, computed
// where it exists (k below the level's size, off: zr_tree_levels).
__device__ __forceinline__ void sample_full_block_levels(double *s_node, int b, int lb, const int *off) {
    const int lane = threadIdx.x & 31;
    for (int l = 1; l <= lb; l++) {
        __syncwarp();
        const int k = lane, j = (b * ZR_SAMPLE_FULL_CHUNKS >> l) + k, below = off[l] - off[l - 1];
        const double *c = s_node + 2 * ZR_SAMPLE_FULL_CHUNKS - (2 * ZR_SAMPLE_FULL_CHUNKS >> (l - 1));
        if (k < (ZR_SAMPLE_FULL_CHUNKS >> l) && j < off[l + 1] - off[l])
            s_node[2 * ZR_SAMPLE_FULL_CHUNKS - (2 * ZR_SAMPLE_FULL_CHUNKS >> l) + k] =
                2 * j + 1 < below ? __dadd_rn(c[2 * k], c[2 * k + 1]) : c[2 * k];
    }
    __syncwarp();
}

// grid ceil(n / ZR_SAMPLE_FULL_IDS) (<= ZR_SAMPLE_MAX_BLOCKS), block ZR_SAMPLE_FULL_THREADS.
// work, sc: as sample_prep_f32 leaves them; fs: this kernel's scratch (chunk and block sums at
// ZR_SAMPLE_FULL_NODES_AT); lmp: logf(min_p), or -inf when min-p is off; temp > 0.
// The tree's levels: 0 (chunks) to lb = min(6, top) inside a block, each block's level-lb node
// its block sum; above, in the last block. Every node is computed as zr_tree_draw computes it
// (left + right, or left alone where the right is past its level), so a level recomputed from
// the one below is the same bits: the descent rebuilds the chosen block's levels in shared memory
// from its 64 chunk sums instead of storing them all.
// sample_prep_f32's partials reduced (cu/sample.cu)
__device__ void sample_prep_result(const ZrSampleScratch *sc, int n, unsigned long long *key, int *bad);

ZR_KERNEL void __launch_bounds__(ZR_SAMPLE_FULL_THREADS)
    sample_full_f32(const float *__restrict__ work, ZrSampleState *st, const ZrSampleScratch *sc,
                    ZrSampleFullScratch *fs, int *tok_pos, ZrPickRecord *ring, int n_slots, int n, float lmp,
                    float temp) {
    zr_grid_enter();
    // the block's weights, a chunk a row, padded (no bank conflicts); in the last block later the
    // levels above the blocks, then the leaf chunk's weights
    __shared__ double s_w[ZR_SAMPLE_FULL_CHUNKS * (ZR_SUM_CHUNK + 1)];
    __shared__ double s_node[2 * ZR_SAMPLE_FULL_CHUNKS]; // a block's levels: level l at 128 - (128 >> l)
    __shared__ int s_count, s_first;
    __shared__ bool s_last;
    const int tid = threadIdx.x;
    unsigned long long best_key;
    int bad; // the first non-finite id, or -1
    sample_prep_result(sc, n, &best_key, &bad); // every thread (cu/sample.cu)
    const int best = argmax_key_id(best_key);
    const float max = work[best];
    // src/sampler.c: floor_logit = max + logf(min_p) with min-p on, else -inf
    const float floor_l = lmp > -INFINITY ? __fadd_rn(max, lmp) : -INFINITY;
    const double inv_t = __ddiv_rn(1.0, (double)temp);
    const int m = (n + ZR_SUM_CHUNK - 1) / ZR_SUM_CHUNK, nb = gridDim.x;
    double *chunk_sum = (double *)((char *)fs + ZR_SAMPLE_FULL_NODES_AT); // [m]
    double *block_sum = chunk_sum + m;                                    // [nb]
    int off[ZR_TREE_MAX_LEVELS + 1];
    const int top = zr_tree_levels(m, off) - 1, lb = min(ZR_SAMPLE_FULL_LEVELS, top);
    if (tid == 0) {
        s_count = 0;
        s_first = INT_MAX;
    }
    __syncthreads();

    const int base = blockIdx.x * ZR_SAMPLE_FULL_IDS;
    int count = 0, first = INT_MAX;
#pragma unroll 4
    for (int u = 0; u < ZR_SAMPLE_FULL_IDS / ZR_SAMPLE_FULL_THREADS; u++) {
        const int j = u * ZR_SAMPLE_FULL_THREADS + tid, i = base + j;
        double w = 0.0; // past n: x + 0 == x, the chunk sum is unchanged
        if (i < n) {
            bool cand;
            w = sample_full_weight(work, i, max, floor_l, inv_t, &cand);
            if (cand) {
                count++;
                first = min(first, i);
            }
        }
        s_w[(j / ZR_SUM_CHUNK) * (ZR_SUM_CHUNK + 1) + j % ZR_SUM_CHUNK] = w;
    }
    count = __reduce_add_sync(0xffffffffu, count);
    first = (int)__reduce_min_sync(0xffffffffu, (unsigned)first);
    if ((tid & 31) == 0) {
        atomicAdd(&s_count, count);
        atomicMin(&s_first, first);
    }
    __syncthreads();
    // level 0: the chunk sums, left to right (zr_tree_sum)
    const int c0 = blockIdx.x * ZR_SAMPLE_FULL_CHUNKS;
    if (tid < ZR_SAMPLE_FULL_CHUNKS && c0 + tid < m) {
        const double *w = s_w + tid * (ZR_SUM_CHUNK + 1);
        double acc = w[0];
        for (int e = 1; e < ZR_SUM_CHUNK; e++) acc = __dadd_rn(acc, w[e]);
        s_node[tid] = acc;
        chunk_sum[c0 + tid] = acc;
    }
    // levels 1..lb of the block's subtree, the same rule (warp 0)
    __syncthreads();
    if (tid < 32) sample_full_block_levels(s_node, blockIdx.x, lb, off);
    __threadfence(); // every thread's sums, before the count that lets the last block read them
    __syncthreads();
    if (tid == 0) {
        block_sum[blockIdx.x] = s_node[2 * ZR_SAMPLE_FULL_CHUNKS - (2 * ZR_SAMPLE_FULL_CHUNKS >> lb)];
        fs->block_count[blockIdx.x] = s_count;
        fs->block_first[blockIdx.x] = s_first;
        __threadfence();
        s_last = atomicAdd(&fs->done, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!s_last) return;
    __threadfence();

    // the last block: the levels above the blocks in shared memory, level L at off[L] - off[lb]
    double *s_up = s_w;
    for (int b = tid; b < nb; b += blockDim.x) s_up[b] = __ldcg(&block_sum[b]);
    for (int L = lb + 1; L <= top; L++) {
        __syncthreads();
        const int below = off[L] - off[L - 1];
        const double *c = s_up + off[L - 1] - off[lb];
        for (int j = tid; j < off[L + 1] - off[L]; j += blockDim.x)
            s_up[off[L] - off[lb] + j] = 2 * j + 1 < below ? __dadd_rn(c[2 * j], c[2 * j + 1]) : c[2 * j];
    }
    // every block's candidates
    count = 0;
    first = INT_MAX;
    for (int b = tid; b < nb; b += blockDim.x) {
        count += __ldcg(&fs->block_count[b]);
        first = min(first, __ldcg(&fs->block_first[b]));
    }
    count = __reduce_add_sync(0xffffffffu, count);
    first = (int)__reduce_min_sync(0xffffffffu, (unsigned)first);
    __syncthreads(); // s_count, s_first: read above by thread 0; the levels above are done
    if (tid == 0) {
        s_count = 0;
        s_first = INT_MAX;
    }
    __syncthreads();
    if ((tid & 31) == 0) {
        atomicAdd(&s_count, count);
        atomicMin(&s_first, first);
    }
    __syncthreads();
    if (tid >= 32) return;

    // warp 0: thread 0 decides and descends to a block, the warp rebuilds that block's levels,
    // thread 0 descends to a chunk, the warp weighs it, thread 0 walks it
    __shared__ int s_status, s_token, s_at;
    __shared__ double s_u;
    __shared__ unsigned long long s_rng[4];
    if (tid == 0) {
        unsigned long long rng[4] = {st->rng[0], st->rng[1], st->rng[2], st->rng[3]};
        int status = ZR_PICK_OK, token = -1, at = -1;
        double u = 0.0;
        if (bad >= 0) status = ZR_PICK_NONFINITE;
        else if (max == -INFINITY) token = 0; // nothing is possible: src/sampler.c picks 0
        else if (s_count == 0) token = best;
        else if (s_count == 1) token = s_first;
        else {
            const double uniform = sample_uniform(rng);
            const double total = s_up[off[top] - off[lb]];
            if (!(total > 0.0)) {
                token = s_first;
            } else {
                u = __dmul_rn(uniform, total);
                int j = 0;
                for (int L = top; L > lb; L--) {
                    const double *c = s_up + off[L - 1] - off[lb] + 2 * j;
                    j = 2 * j + zr_tree_go_right(&u, c[0], 2 * j + 1 < off[L] - off[L - 1] ? c[1] : 0.0);
                }
                at = j; // the block
            }
        }
        s_status = status;
        s_token = token;
        s_at = at;
        s_u = u;
        for (int i = 0; i < 4; i++) s_rng[i] = rng[i];
    }
    __syncwarp();
    const int blk = s_at;
    if (blk >= 0) {
        const int cb = blk * ZR_SAMPLE_FULL_CHUNKS;
        for (int k = tid; k < ZR_SAMPLE_FULL_CHUNKS; k += 32)
            if (cb + k < m) s_node[k] = __ldcg(&chunk_sum[cb + k]);
        __syncwarp();
        sample_full_block_levels(s_node, blk, lb, off);
        if (tid == 0) {
            double u = s_u;
            int j = 0; // within the block, at level l: global node (cb >> l) + j
            for (int l = lb; l > 0; l--) {
                const double *c = s_node + 2 * ZR_SAMPLE_FULL_CHUNKS - (2 * ZR_SAMPLE_FULL_CHUNKS >> (l - 1)) + 2 * j;
                const bool has_r = (cb >> (l - 1)) + 2 * j + 1 < off[l] - off[l - 1];
                j = 2 * j + zr_tree_go_right(&u, c[0], has_r ? c[1] : 0.0);
            }
            s_at = cb + j; // the chunk
            s_u = u;
        }
        __syncwarp();
        const int chunk = s_at, i = chunk * ZR_SUM_CHUNK + tid;
        bool cand;
        s_w[tid] = i < n ? sample_full_weight(work, i, max, floor_l, inv_t, &cand) : 0.0;
        __syncwarp();
        if (tid == 0) s_token = chunk * ZR_SUM_CHUNK + zr_tree_leaf(s_w, min(ZR_SUM_CHUNK, n - chunk * ZR_SUM_CHUNK), s_u);
        __syncwarp();
    }
    if (tid != 0) return;
    const int pos = tok_pos[1], status = s_status, token = s_token;
    ZrPickRecord *rec = ring + (unsigned)pos % (unsigned)n_slots;
    // s_rng: advanced only by a draw
    sample_step_end(st, rec, tok_pos, pos, status, token, bad, s_rng, st->repeat_last_n, st->hist_head, st->n_hist);
    fs->done = 0;
    rec->t_end = zr_globaltimer();
    zr_record_publish(rec, pos);
}
