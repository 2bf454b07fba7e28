// The sampling chain on the device (src/cuda/sample.h): the token src/sampler.c picks for the same
// logits and state, to the bit. The stages and the scratch they share are described in
// src/cuda/sample_scratch.h. What makes the device pick exactly the CPU's token:
//   - the same candidates: every selection compares logits as the CPU does (penalties with the
//     same float operations, __f*_rn so nvcc fuses nothing; NaN as -inf; the total order
//     logit desc / id asc as a 64-bit key, cu/pick.cuh), and every candidate set the device
//     sorts is a prefix of that order holding the CPU's result (top-k: at least k ids; top-p:
//     its mass reaches top_p with a margin, or it is the whole min-p set, as the CPU's passes);
//   - the same float operations: zr_exp and zr_tree_sum (src/zr_exp.h) for weights and totals,
//     and the running sums of top-p and the draw walked by one thread, in order, as the CPU
//     (their terms, top-p's quotients w / total included, computed in parallel before);
//   - the same generator: xoshiro256** in the state bytes of zr_sampler_get_state.
// Integer atomics only (counts, fixed-point masses, gather slots): the gathered order is
// undone by the sort, so every launch gives the same bits. Launch shapes depend on n only.
#include <limits.h>

#include "common.cuh"
#include "pick.cuh"
#include "sample_state.cuh"
#include "../src/cuda/sample_scratch.h"
#include "../src/zr_exp.h"

// max and min of a block's keys / first bad ids, in thread 0 (blockDim.x a multiple of 32, <= 1024).
__device__ __forceinline__ void sample_block_reduce(unsigned long long *key, int *bad) {
    __shared__ unsigned long long s_key[32];
    __shared__ int s_bad[32];
    unsigned long long k = *key;
    int m = *bad;
    zr_warp_key_bad(k, m);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) {
        s_key[warp] = k;
        s_bad[warp] = m;
    }
    __syncthreads();
    if (warp == 0) { // the warps' partials by warp 0's lanes and a butterfly, not one thread's loop
        const bool on = lane < (int)(blockDim.x >> 5);
        k = on ? s_key[lane] : 0;
        m = on ? s_bad[lane] : INT_MAX;
        zr_warp_key_bad(k, m);
        if (lane == 0) {
            *key = k;
            *bad = m;
        }
    }
    __syncthreads();
}

// Sets bit (id - base) of a block's map of ZR_SAMPLE_PREP_IDS ids for each id of ids[0..n) in it.
__device__ __forceinline__ void sample_mark(unsigned *map, const int *ids, int n, int base, int limit) {
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        const int id = ids[j];
        if (id >= base && id < base + ZR_SAMPLE_PREP_IDS && id < limit)
            atomicOr(&map[(id - base) >> 5], 1u << ((id - base) & 31));
    }
}

// grid ceil(n / ZR_SAMPLE_PREP_IDS), block ZR_SAMPLE_PREP_THREADS. work[i] for i < n: the logit
// src/sampler.c samples from, -inf past n_cand (padding rows) and for banned ids; pen: the
// penalties are on (penalties_off is false), r, fp, pp their parameters.
ZR_KERNEL void __launch_bounds__(ZR_SAMPLE_PREP_THREADS)
    sample_prep_f32(const float *__restrict__ logits, float *__restrict__ work, const ZrSampleState *st,
                    ZrSampleScratch *sc, const int *ban, int n_ban, int n, int n_cand, int pen, float r, float fp,
                    float pp) {
    zr_grid_enter();
    __shared__ unsigned s_hist[ZR_SAMPLE_PREP_IDS / 32], s_ban[ZR_SAMPLE_PREP_IDS / 32];
    if (blockIdx.x == 0 && threadIdx.x == 0) sc->t_stage[ZR_SAMPLE_T_PREP] = zr_globaltimer();
    enum { PER = ZR_SAMPLE_PREP_IDS / ZR_SAMPLE_PREP_THREADS };
    const int base = blockIdx.x * ZR_SAMPLE_PREP_IDS;
    // every load in flight at once, while the maps are built
    float raws[PER];
#pragma unroll
    for (int u = 0; u < PER; u++) {
        const int i = base + u * ZR_SAMPLE_PREP_THREADS + threadIdx.x;
        raws[u] = i < n_cand ? logits[i] : -INFINITY;
    }
    for (int w = threadIdx.x; w < ZR_SAMPLE_PREP_IDS / 32; w += blockDim.x) s_hist[w] = s_ban[w] = 0;
    __syncthreads();
    const int n_hist = pen ? st->n_hist : 0;
    sample_mark(s_hist, st->hist, n_hist, base, n);
    sample_mark(s_ban, ban, n_ban, base, n);
    __syncthreads();
    unsigned long long key = 0;
    int bad = INT_MAX;
#pragma unroll
    for (int u = 0; u < PER; u++) {
        const int j = u * ZR_SAMPLE_PREP_THREADS + threadIdx.x, i = base + j;
        if (i >= n) break;
        const float raw = raws[u];
        if (i < n_cand && !isfinite(raw) && i < bad) bad = i;
        float v = isnan(raw) ? -INFINITY : raw;
        const unsigned bit = 1u << (j & 31);
        if (s_ban[j >> 5] & bit) {
            v = -INFINITY;
        } else if (s_hist[j >> 5] & bit) {
            // src/sampler.c apply_penalty, once for the id however often it occurs
            int count = 0;
            for (int h = 0; h < n_hist; h++) count += st->hist[h] == i;
            v = v <= 0.0f ? __fmul_rn(v, r) : __fdiv_rn(v, r);
            v = __fsub_rn(v, __fadd_rn(__fmul_rn((float)count, fp), pp));
            if (isnan(v)) v = -INFINITY;
        }
        work[i] = v;
        const unsigned long long k = argmax_key(v, i);
        key = k > key ? k : key;
    }
    sample_block_reduce(&key, &bad);
    if (threadIdx.x == 0) {
        sc->prep_key[blockIdx.x] = key;
        sc->prep_bad[blockIdx.x] = bad;
        // the stage ends with its last block (stamps only grow: no reset needed)
        atomicMax((unsigned long long *)&sc->t_stage[ZR_SAMPLE_T_PREP_END], zr_globaltimer());
    }
}

// The largest key of work[] and the first non-finite id (or -1) from sample_prep_f32's partials,
// in every thread: each later kernel reduces them itself (a load round trip, as reading one
// result would be) instead of the prep's last block (a fence, an atomic and a reduction more).
__device__ void sample_prep_result(const ZrSampleScratch *sc, int n, unsigned long long *key, int *bad) {
    __shared__ unsigned long long s_k;
    __shared__ int s_b;
    const int nb = (n + ZR_SAMPLE_PREP_IDS - 1) / ZR_SAMPLE_PREP_IDS;
    unsigned long long k = 0;
    int m = INT_MAX;
    for (int b = threadIdx.x; b < nb; b += blockDim.x) {
        const unsigned long long kb = sc->prep_key[b];
        const int mb = sc->prep_bad[b];
        k = kb > k ? kb : k;
        m = mb < m ? mb : m;
    }
    sample_block_reduce(&k, &m);
    if (threadIdx.x == 0) {
        s_k = k;
        s_b = m;
    }
    __syncthreads();
    *key = s_k;
    *bad = s_b == INT_MAX ? -1 : s_b;
}

// Level j's threshold below the largest logit (src/cuda/sample_scratch.h), computed the same way
// wherever a set is counted or gathered.
// The coarse offsets in constant memory (a local array indexed by a variable lived on the stack,
// stored again at every use in the count kernel).
static __constant__ float sample_tail_off[ZR_SAMPLE_TAIL] = ZR_SAMPLE_TAIL_OFFSETS;

__device__ __forceinline__ float sample_thr(int j, float max) {
    // j / 8 as j * 0.125: the same bits (exact either way), without a division's instruction sequence
    return __fsub_rn(max, j < ZR_SAMPLE_FINE ? __fmul_rn((float)j, 1.0f / ZR_SAMPLE_FINE_PER)
                                             : sample_tail_off[j - ZR_SAMPLE_FINE]);
}

// The first level j with l >= sample_thr(j) (thresholds never increase with j), for a finite l <= max.
__device__ __forceinline__ int sample_level(float l, float max) {
    const float d = __fsub_rn(max, l);
    int j = d < 64.0f ? (int)(d * ZR_SAMPLE_FINE_PER) : ZR_SAMPLE_FINE; // a guess, then exact
    if (j > ZR_SAMPLE_FINE) j = ZR_SAMPLE_FINE;
    while (j < ZR_SAMPLE_LEVELS - 1 && l < sample_thr(j, max)) j++;
    while (j > 0 && l >= sample_thr(j - 1, max)) j--;
    return j;
}

// A crowded top-k range [lo, hi) in ZR_SAMPLE_SUB sub-levels: the scale, and the sub-level of l,
// clamped to [0, ZR_SAMPLE_SUB) (so l >= hi lands in the last). Monotone in l, computed the same
// way wherever a sub-level is compared: a set {sub-level >= b} is a prefix of the total order.
__device__ __forceinline__ float sample_sub_scale(float lo, float hi) {
    return __fdiv_rn((float)ZR_SAMPLE_SUB, __fsub_rn(hi, lo));
}
__device__ __forceinline__ int sample_sub_level(float l, float lo, float scale) {
    const float s = __fmul_rn(__fsub_rn(l, lo), scale);
    return s >= (float)(ZR_SAMPLE_SUB - 1) ? ZR_SAMPLE_SUB - 1 : s > 0.0f ? (int)s : 0;
}

// Of counts by sub-level h[0..ZR_SAMPLE_SUB) (shared memory), with `above` ids decided above
// them: the largest sub-level b where above + the ids at sub-levels >= b reach k, by the whole
// block (ZR_SAMPLE_SUB / blockDim.x sub-levels a thread, taken from the top, so a prefix over
// threads is a suffix over sub-levels; integers: exact in any order). Every thread gets b (-1:
// none), *at: the ids at or above b, *over: the ids above b.
__device__ void sample_sub_suffix(const unsigned *h, unsigned above, unsigned k, int *b_out, unsigned *at_out,
                                  unsigned *over_out) {
    __shared__ unsigned s_warp[32];
    __shared__ int s_p;
    __shared__ unsigned s_at, s_over;
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5, n_warps = blockDim.x >> 5;
    const int per = ZR_SAMPLE_SUB / blockDim.x, top = ZR_SAMPLE_SUB - 1 - per * t; // top, top - 1, ...
    unsigned x = 0;
    for (int i = 0; i < per; i++) x += h[top - i];
    const unsigned mine = x;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const unsigned y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) s_warp[warp] = x;
    if (t == 0) s_p = INT_MAX;
    __syncthreads();
    if (warp == 0) {
        unsigned w = lane < n_warps ? s_warp[lane] : 0u;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const unsigned y = __shfl_up_sync(0xffffffffu, w, o);
            if (lane >= o) w += y;
        }
        if (lane < n_warps) s_warp[lane] = w;
    }
    __syncthreads();
    unsigned c = above + (warp ? s_warp[warp - 1] : 0u) + x - mine; // ids above this thread's sub-levels
    for (int i = 0; i < per; i++) {
        const unsigned c_next = c + h[top - i];
        if (c_next >= k) {
            atomicMin(&s_p, per * t + i);
            break;
        }
        c = c_next;
    }
    __syncthreads();
    const int p = s_p;
    if (p != INT_MAX && p / per == t) {
        s_over = c;
        s_at = c + h[ZR_SAMPLE_SUB - 1 - p];
    }
    __syncthreads();
    *b_out = p == INT_MAX ? -1 : ZR_SAMPLE_SUB - 1 - p;
    *at_out = s_at;
    *over_out = s_over;
}

// Where l (>= the range's low end) stands after rounds 0..r-1 of sample_refine: 1 above their
// choice (in the set), -1 below (out), 0 at every round's chosen sub-level (undecided).
__device__ __forceinline__ int sample_sub_decide(float l, const float *lo, const float *scale, const int *b, int r) {
    for (int q = 0; q < r; q++) {
        const int s = sample_sub_level(l, lo[q], scale[q]);
        if (s != b[q]) return s > b[q] ? 1 : -1;
    }
    return 0;
}

// Appends (id, l) where take, by the whole warp with one atomic on *count (global or shared
// memory): the lanes' slots follow the warp's base in lane order; slots at or past cap are
// counted but not written (the count then tells the reader some were lost).
__device__ __forceinline__ void sample_warp_append(bool take, int id, float l, unsigned *count, int *ids, float *ls,
                                                   unsigned cap) {
    const unsigned mask = __ballot_sync(0xffffffffu, take);
    if (!mask) return;
    const int lane = threadIdx.x & 31, leader = __ffs(mask) - 1;
    unsigned slot = 0;
    if (lane == leader) slot = atomicAdd(count, (unsigned)__popc(mask));
    slot = __shfl_sync(0xffffffffu, slot, leader) + __popc(mask & ((1u << lane) - 1));
    if (take && slot < cap) {
        ids[slot] = id;
        ls[slot] = l;
    }
}

// Inclusive prefix sums of v[0..n) in place by the block (integers: exact in any order).
template <class T> __device__ void sample_block_scan(T *v, int n) {
    __shared__ T s_part[ZR_SAMPLE_COUNT_THREADS];
    const int per = (n + blockDim.x - 1) / blockDim.x, lo = threadIdx.x * per, hi = min(lo + per, n);
    T acc = 0;
    for (int i = lo; i < hi; i++) acc += v[i];
    s_part[threadIdx.x] = acc;
    for (int s = 1; s < (int)blockDim.x; s *= 2) {
        __syncthreads();
        const T add = threadIdx.x >= (unsigned)s ? s_part[threadIdx.x - s] : 0;
        __syncthreads();
        s_part[threadIdx.x] += add;
    }
    __syncthreads();
    acc = threadIdx.x ? s_part[threadIdx.x - 1] : 0;
    for (int i = lo; i < hi; i++) v[i] = acc += v[i];
    __syncthreads();
}

// The set the pick sorts, chosen by every block of sample_gather_f32 (the same in each) from the
// per-level counts and masses (cnt, mass: [ZR_SAMPLE_BINS], per level, then the min-p set, in
// shared memory), with the whole block (top-k: warp 0 alone); thread 0 writes the choice to *host,
// *cut, *refine, *thr, *hi.
// As the CPU's passes: top-k, the first level holding k ids; top-p, the first level whose mass
// surely reaches top_p (a margin far above the rounding of the running sum), or the min-p set
// once a level reaches the min-p floor; and a set past ZR_SAMPLE_CAP is ZR_PICK_HOST, but for
// top-k's (*refine_out: the pick narrows it between *thr_out and *hi_out, sample_refine).
__device__ __forceinline__ void sample_choose_set(unsigned *cnt, unsigned long long *mass, double total, float max,
                                                  float floor_l, int mode, int k, float top_p, int *host_out,
                                                  int *cut_out, int *refine_out, float *thr_out, float *hi_out) {
    __shared__ int s_first;
    __shared__ unsigned s_cum;
    unsigned floor_cnt = 0;
    if (mode == ZR_SAMPLE_TOP_K) {
        // the first level holding k ids, by warp 0 alone: 32 levels a round, their running counts
        // by a warp scan on the rounds' carry, until a level reaches k (a peaked row's first round,
        // where the block's scan of every level took ~20 barriers)
        if (threadIdx.x < 32) {
            const int lane = threadIdx.x;
            unsigned v = 0, hit = 0, carry = 0;
            int b = 0;
            for (; b < ZR_SAMPLE_LEVELS; b += 32) {
                const int j = b + lane;
                v = j < ZR_SAMPLE_LEVELS ? cnt[j] : 0u;
#pragma unroll
                for (int o = 1; o < 32; o <<= 1) {
                    const unsigned u = __shfl_up_sync(0xffffffffu, v, o);
                    if (lane >= o) v += u;
                }
                v += carry;
                hit = __ballot_sync(0xffffffffu, j < ZR_SAMPLE_LEVELS && v >= (unsigned)k);
                if (hit) break;
                carry = __shfl_sync(0xffffffffu, v, 31);
            }
            // none: every finite id, the last level (lane 31 of the last round holds their count)
            const int at = hit ? __ffs(hit) - 1 : 31;
            const unsigned cj = __shfl_sync(0xffffffffu, v, at);
            if (lane == 0) {
                s_first = hit ? b + at : ZR_SAMPLE_LEVELS - 1;
                s_cum = cj;
            }
        }
        __syncthreads();
        if (threadIdx.x != 0) return;
    } else {
        sample_block_scan(cnt, ZR_SAMPLE_LEVELS);
        if (mode == ZR_SAMPLE_TOP_P) sample_block_scan(mass, ZR_SAMPLE_LEVELS); // the only mode that reads masses
        // without min-p the min-p set is every finite logit: the last level
        floor_cnt = floor_l > -INFINITY ? cnt[ZR_SAMPLE_LEVELS] : cnt[ZR_SAMPLE_LEVELS - 1];
        if (threadIdx.x == 0) s_first = ZR_SAMPLE_LEVELS - 1;
        __syncthreads();
        const double need = __dmul_rn(__dadd_rn((double)top_p, 1e-9), total) * 0x1.0p32;
        // the first level where the mode's condition holds (it holds at every later level too)
        for (int j = threadIdx.x; j < ZR_SAMPLE_LEVELS; j += blockDim.x) {
            bool stop;
            if (mode == ZR_SAMPLE_TOP_P)
                stop = sample_thr(j, max) <= floor_l || cnt[j] > ZR_SAMPLE_CAP || (double)mass[j] >= need;
            else stop = true;
            if (stop) atomicMin(&s_first, j);
        }
        __syncthreads();
        if (threadIdx.x != 0) return;
        s_cum = cnt[s_first];
    }
    const int j = s_first;
    const unsigned cj = s_cum; // the ids at level j or above
    const float t = sample_thr(j, max);
    int host = 1, cut = 0, refine = 0;
    float thr = -INFINITY, hi = INFINITY;
    if (mode == ZR_SAMPLE_TOP_K) {
        if (cj <= ZR_SAMPLE_CAP) {
            host = 0;
            thr = t;
        } else if (j > 0 && k <= ZR_SAMPLE_CAP) {
            // fewer than k ids at or above the level before: the k-th lies in [t, hi)
            hi = sample_thr(j - 1, max);
            if (t > -INFINITY && hi > t && isfinite(sample_sub_scale(t, hi))) {
                host = 0;
                refine = 1;
                thr = t;
            }
        }
    } else if (mode != ZR_SAMPLE_TOP_P || t <= floor_l) {
        if (floor_cnt <= ZR_SAMPLE_CAP) {
            host = 0;
            cut = 1;
            thr = floor_l;
        }
    } else if (cj <= ZR_SAMPLE_CAP) {
        host = 0; // its mass reaches top_p
        thr = t;
    }
    *host_out = host;
    *cut_out = cut;
    *refine_out = refine;
    *thr_out = thr;
    *hi_out = hi;
}

// grid ceil(n / ZR_SAMPLE_COUNT_IDS), block ZR_SAMPLE_COUNT_THREADS. lmp: logf(min_p), or -inf
// when min-p is off. Only top-p without top-k reads a total over the vocabulary (top-k's top-p
// renormalizes over the k, in the pick), so the other modes count levels and no weight at all.
// A block's ids are ZR_SAMPLE_COUNT_CHUNKS chunks (a power of two: a subtree of zr_tree_sum);
// their weights are computed by every thread (8 ids each, coalesced) into shared memory, then
// one thread a chunk adds its chunk left to right.
ZR_KERNEL void __launch_bounds__(ZR_SAMPLE_COUNT_THREADS)
    sample_count_f32(const float *__restrict__ work, ZrSampleScratch *sc, int n, int mode, int k, float top_p,
                     float lmp) {
    zr_grid_enter();
    enum { PER = ZR_SAMPLE_COUNT_IDS / ZR_SAMPLE_COUNT_THREADS };
    __shared__ double s_w[ZR_SAMPLE_COUNT_CHUNKS][ZR_SUM_CHUNK + 1]; // +1: a chunk a thread, no bank conflicts
    __shared__ double s_sum[ZR_SAMPLE_COUNT_CHUNKS];
    __shared__ unsigned s_cnt[ZR_SAMPLE_BINS];
    __shared__ unsigned long long s_mass[ZR_SAMPLE_BINS];
    if (blockIdx.x == 0 && threadIdx.x == 0) sc->t_stage[ZR_SAMPLE_T_COUNT] = zr_globaltimer();
    const bool top_p_mode = mode == ZR_SAMPLE_TOP_P;
    // the block's logits in flight while the maximum is reduced
    const int base = blockIdx.x * ZR_SAMPLE_COUNT_IDS;
    float l[PER];
#pragma unroll
    for (int u = 0; u < PER; u++) {
        const int i = base + u * ZR_SAMPLE_COUNT_THREADS + threadIdx.x;
        l[u] = i < n ? work[i] : -INFINITY;
    }
    for (int j = threadIdx.x; j < ZR_SAMPLE_BINS; j += blockDim.x) {
        s_cnt[j] = 0;
        s_mass[j] = 0;
    }
    unsigned long long best_key;
    int bad;
    sample_prep_result(sc, n, &best_key, &bad);
    const float max = argmax_key_value(best_key); // work[best] (cu/pick.cuh: -0 as +0 changes nothing here)
    const float floor_l = __fadd_rn(max, lmp);
    const bool min_p_set = mode != ZR_SAMPLE_TOP_K && floor_l > -INFINITY; // only where the choice reads it
    __syncthreads();
#pragma unroll
    for (int u = 0; u < PER; u++) {
        const int j = u * ZR_SAMPLE_COUNT_THREADS + threadIdx.x;
        double w = 0.0;
        if (top_p_mode) s_w[j / ZR_SUM_CHUNK][j % ZR_SUM_CHUNK] = w = zr_exp(__dsub_rn((double)l[u], (double)max));
        if (!(l[u] > -INFINITY)) continue;
        const int lv = sample_level(l[u], max);
        atomicAdd(&s_cnt[lv], 1u);
        if (top_p_mode) atomicAdd(&s_mass[lv], (unsigned long long)(w * 0x1.0p32));
        if (min_p_set && l[u] >= floor_l) atomicAdd(&s_cnt[ZR_SAMPLE_LEVELS], 1u);
    }
    __syncthreads();
    if (top_p_mode) {
        // the block's subtree of zr_tree_sum: its chunks left to right, then the halving rule
        const int n_chunks = (n + ZR_SUM_CHUNK - 1) / ZR_SUM_CHUNK;
        const int m = min(ZR_SAMPLE_COUNT_CHUNKS, n_chunks - (int)blockIdx.x * ZR_SAMPLE_COUNT_CHUNKS);
        const int t = threadIdx.x;
        if (t < m) {
            const int first = base + t * ZR_SUM_CHUNK;
            double acc = s_w[t][0];
            for (int e = 1; e < ZR_SUM_CHUNK && first + e < n; e++) acc = __dadd_rn(acc, s_w[t][e]);
            s_sum[t] = acc;
        }
        for (int s = 1; s < ZR_SAMPLE_COUNT_CHUNKS; s *= 2) {
            __syncthreads();
            if (t % (2 * s) == 0 && t + s < m) s_sum[t] = __dadd_rn(s_sum[t], s_sum[t + s]);
        }
        __syncthreads();
        if (threadIdx.x == 0) sc->block_sum[blockIdx.x] = s_sum[0];
    }
    for (int j = threadIdx.x; j < ZR_SAMPLE_BINS; j += blockDim.x) {
        if (s_cnt[j]) {
            atomicAdd(&sc->bin_count[j], s_cnt[j]);
            if (top_p_mode) atomicAdd((unsigned long long *)&sc->bin_mass[j], s_mass[j]);
        }
    }
    // the stage ends with its last block (stamps only grow: no reset needed)
    __syncthreads();
    if (threadIdx.x == 0) atomicMax((unsigned long long *)&sc->t_stage[ZR_SAMPLE_T_COUNT_END], zr_globaltimer());
}

// grid ceil(n / ZR_SAMPLE_GATHER_IDS), block ZR_SAMPLE_COUNT_THREADS: the ids of the chosen set and
// their logits, in any order. Every block chooses the set itself from sample_count_f32's bins
// (the same bits in each, so the same set; block 0 writes the choice and top-p's total for the
// pick): no last block of the count kernel between the two (a fence, an atomic and a round trip).
// mode, k, top_p, lmp as sample_count_f32. Launch bounds of one block a multiprocessor: ptxas's
// default for 256 threads, 32 registers, spilled in top-k's choice; at its 57 four blocks still fit.
ZR_KERNEL void __launch_bounds__(ZR_SAMPLE_COUNT_THREADS, 1)
    sample_gather_f32(const float *__restrict__ work, ZrSampleScratch *sc, int n, int mode, int k, float top_p,
                      float lmp) {
    zr_grid_enter();
    enum { PER = ZR_SAMPLE_GATHER_IDS / ZR_SAMPLE_COUNT_THREADS };
    __shared__ unsigned s_cnt[ZR_SAMPLE_BINS];
    __shared__ unsigned long long s_mass[ZR_SAMPLE_BINS];
    __shared__ double s_sum[ZR_SAMPLE_MAX_BLOCKS];
    __shared__ int s_host, s_cut, s_refine;
    __shared__ float s_thr, s_hi;
    __shared__ unsigned s_sub[ZR_SAMPLE_SUB];
    if (blockIdx.x == 0 && threadIdx.x == 0) sc->t_stage[ZR_SAMPLE_T_GATHER] = zr_globaltimer();
    const bool top_p_mode = mode == ZR_SAMPLE_TOP_P;
    const int base = blockIdx.x * ZR_SAMPLE_GATHER_IDS;
    float l[PER];
#pragma unroll
    for (int u = 0; u < PER; u++) {
        const int i = base + u * ZR_SAMPLE_COUNT_THREADS + threadIdx.x;
        l[u] = i < n ? work[i] : -INFINITY;
    }
    // the count's atomics and block sums, from L2
    const int nb = (n + ZR_SAMPLE_COUNT_IDS - 1) / ZR_SAMPLE_COUNT_IDS;
    for (int j = threadIdx.x; j < ZR_SAMPLE_BINS; j += blockDim.x) {
        s_cnt[j] = __ldcg((const unsigned *)&sc->bin_count[j]);
        s_mass[j] = top_p_mode ? __ldcg((const unsigned long long *)&sc->bin_mass[j]) : 0;
    }
    if (top_p_mode)
        for (int b = threadIdx.x; b < nb; b += blockDim.x) s_sum[b] = __ldcg(&sc->block_sum[b]);
    unsigned long long best_key;
    int bad;
    sample_prep_result(sc, n, &best_key, &bad); // ends with a barrier: the loads above are in place
    const float max = argmax_key_value(best_key);
    const float floor_l = __fadd_rn(max, lmp);
    double total = 0.0;
    if (top_p_mode) {
        // the tree above the count's blocks: the halving rule over the block sums
        for (int s = 1; s < nb; s *= 2) {
            __syncthreads();
            for (int t = threadIdx.x; t < nb; t += blockDim.x)
                if (t % (2 * s) == 0 && t + s < nb) s_sum[t] = __dadd_rn(s_sum[t], s_sum[t + s]);
        }
        __syncthreads();
        total = s_sum[0];
    }
    sample_choose_set(s_cnt, s_mass, total, max, floor_l, mode, k, top_p, &s_host, &s_cut, &s_refine, &s_thr, &s_hi);
    __syncthreads();
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        sc->set_host = s_host;
        sc->set_cut = s_cut;
        sc->set_refine = s_refine;
        sc->set_thr = s_thr;
        sc->set_hi = s_hi;
        if (top_p_mode) sc->total = total;
    }
    if (s_host) return;
    const float thr = s_thr;
    if (s_refine) {
        // the first round of sample_refine: the block's ids >= thr by sub-level of [thr, hi)
        const float scale = sample_sub_scale(thr, s_hi);
        for (int j = threadIdx.x; j < ZR_SAMPLE_SUB; j += blockDim.x) s_sub[j] = 0;
        __syncthreads();
#pragma unroll
        for (int u = 0; u < PER; u++)
            if (l[u] >= thr) atomicAdd(&s_sub[sample_sub_level(l[u], thr, scale)], 1u);
        __syncthreads();
        for (int j = threadIdx.x; j < ZR_SAMPLE_SUB; j += blockDim.x)
            if (s_sub[j]) atomicAdd(&sc->sub_count[j], s_sub[j]);
        // the block's offer: its ids at or above its own k-th's sub-level (all of them >= thr where
        // it has fewer than k). The k-th overall lies no lower, so every id of the set the pick
        // keeps is offered (sample_refine)
        int b;
        unsigned at, over;
        sample_sub_suffix(s_sub, 0, (unsigned)k, &b, &at, &over);
        if (b < 0) b = 0;
#pragma unroll
        for (int u = 0; u < PER; u++)
            sample_warp_append(l[u] >= thr && sample_sub_level(l[u], thr, scale) >= b,
                               base + u * ZR_SAMPLE_COUNT_THREADS + threadIdx.x, l[u], &sc->n_union, sc->union_id,
                               sc->union_l, ZR_SAMPLE_UNION);
        return;
    }
#pragma unroll
    for (int u = 0; u < PER; u++)
        sample_warp_append(l[u] >= thr && l[u] > -INFINITY, base + u * ZR_SAMPLE_COUNT_THREADS + threadIdx.x, l[u],
                           &sc->n_set, sc->cand, sc->cand_l, ZR_SAMPLE_CAP);
}

// zr_tree_sum of w[0..n) (n <= ZR_SAMPLE_CAP) by the whole block; every thread gets the result.
__device__ double sample_block_tree(const double *w, int n) {
    __shared__ double s_c[ZR_SAMPLE_CAP / ZR_SUM_CHUNK];
    __shared__ double s_total;
    const int m = (n + ZR_SUM_CHUNK - 1) / ZR_SUM_CHUNK;
    for (int c = threadIdx.x; c < m; c += blockDim.x) {
        double acc = w[c * ZR_SUM_CHUNK];
        for (int i = c * ZR_SUM_CHUNK + 1; i < (c + 1) * ZR_SUM_CHUNK && i < n; i++) acc = __dadd_rn(acc, w[i]);
        s_c[c] = acc;
    }
    for (int s = 1; s < m; s *= 2) {
        __syncthreads();
        for (int t = threadIdx.x; t < m; t += blockDim.x)
            if (t % (2 * s) == 0 && t + s < m) s_c[t] = __dadd_rn(s_c[t], s_c[t + s]);
    }
    __syncthreads();
    if (threadIdx.x == 0) s_total = s_c[0];
    __syncthreads();
    return s_total;
}

// The walk of a running sum by one thread, as the CPU's loop: cum += v[i] in order from 0, and
// the first i where cum >= goal (the sum's values are the CPU's bits; only the loads are ahead).
// Returns -1 when no prefix reaches it.
__device__ __forceinline__ int sample_walk_reach(const double *v, int n, double goal) {
    double cum = 0.0;
#pragma unroll 8
    for (int i = 0; i < n; i++) {
        cum = __dadd_rn(cum, v[i]);
        if (cum >= goal) return i;
    }
    return -1;
}

// A candidate's sort key: the total order (cu/pick.cuh), or in ZR_SAMPLE_ALL ids ascending.
__device__ __forceinline__ unsigned long long sample_set_key(float v, int id, int mode) {
    return mode == ZR_SAMPLE_ALL ? (0xffffffff00000000ull | (unsigned)~(unsigned)id) : argmax_key(v, id);
}

// Candidate i (id, its logit v) of a set the rank sort takes: its key into s_key[i], v into the
// sort's input logits s_l[ZR_SAMPLE_RANK_MAX + i] (sample_sort_set).
__device__ __forceinline__ void sample_set_put(unsigned long long *s_key, float *s_l, int i, int id, float v, int mode) {
    s_key[i] = sample_set_key(v, id, mode);
    s_l[ZR_SAMPLE_RANK_MAX + i] = v;
}

// Sorts the set's keys s_key[0..n0) descending (the total order) with the logits s_l beside
// them, by the whole block. Keys are distinct (the id is in them). Up to ZR_SAMPLE_RANK_MAX: a
// rank sort (a key's place is the number of keys above it; g threads a key, g >= 4), which
// needs no barrier per step; above, a bitonic sort and the logits loaded after it.
// s_tmp: ZR_SAMPLE_CAP u64 of scratch. pre: a set of at most ZR_SAMPLE_RANK_MAX the caller put in
// place already (sample_set_put).
__device__ void sample_sort_set(const float *__restrict__ work, const ZrSampleScratch *sc, int n0, int mode,
                                unsigned long long *s_key, unsigned long long *s_tmp, float *s_l, bool pre) {
    const int tid = threadIdx.x;
    int p2 = 1;
    while (p2 < n0) p2 *= 2;
    if (n0 <= ZR_SAMPLE_RANK_MAX) {
        const float *s_l_in = s_l + ZR_SAMPLE_RANK_MAX; // the logits in gathered order (sample_set_put)
        if (!pre)
            for (int i = tid; i < n0; i += blockDim.x) // cand, cand_l written by other multiprocessors: from L2
                sample_set_put(s_key, s_l, i, __ldcg(&sc->cand[i]), __ldcg(&sc->cand_l[i]), mode);
        __syncthreads();
        const int g = min(32, ZR_SAMPLE_PICK_THREADS / p2); // a power of two dividing 32: groups within warps
        const int c = tid / g, part = tid % g;
        const unsigned long long key = c < n0 ? s_key[c] : 0;
        int rank = 0;
        if (c < n0)
            for (int j = part; j < n0; j += g) rank += s_key[j] > key;
        for (int o = g / 2; o > 0; o >>= 1) rank += __shfl_xor_sync(0xffffffffu, rank, o);
        if (c < n0 && part == 0) {
            s_tmp[rank] = key;
            s_l[rank] = s_l_in[c];
        }
        __syncthreads();
        for (int i = tid; i < n0; i += blockDim.x) s_key[i] = s_tmp[i];
        __syncthreads();
        return;
    }
    for (int i = tid; i < p2; i += blockDim.x) {
        unsigned long long key = 0; // below every candidate
        if (i < n0) {
            const int id = __ldcg(&sc->cand[i]);
            key = sample_set_key(work[id], id, mode);
        }
        s_key[i] = key;
    }
    // bitonic sort, descending: the total order (or ids ascending in ZR_SAMPLE_ALL)
    for (int size = 2; size <= p2; size *= 2)
        for (int stride = size / 2; stride > 0; stride /= 2) {
            __syncthreads();
            for (int i = tid; i < p2; i += blockDim.x) {
                const int j = i ^ stride;
                if (j > i) {
                    const unsigned long long a = s_key[i], b = s_key[j];
                    if ((i & size) == 0 ? a < b : a > b) {
                        s_key[i] = b;
                        s_key[j] = a;
                    }
                }
            }
        }
    __syncthreads();
    for (int i = tid; i < n0; i += blockDim.x) s_l[i] = work[argmax_key_id(s_key[i])];
    __syncthreads();
}

// The pick's own gather of a crowded top-k set (set_refine: the k-th id lies in [lo, hi), the set
// {work >= lo} is too large to sort), by the whole block. Each round has the undecided ids
// (sample_sub_decide) by sub-level of its range (the first round: sample_gather_f32's sub_count;
// later ones counted by this block over the whole vocabulary) and keeps the largest sub-level b
// where the ids decided above plus those at >= b reach k (sample_sub_suffix). Once those fit
// ZR_SAMPLE_CAP they are taken from the gather blocks' offers, or where the offers overflowed, by
// one pass over the vocabulary, into cand[] and cand_l[], and their number is returned (to every
// thread); else the next round splits sub-level b. Sub-levels are monotone in the logit, so the
// set is a prefix of the total order: it holds the k best ids. -1, for ZR_PICK_HOST: still
// crowded after ZR_SAMPLE_ROUNDS rounds (ties), or a set whose size is not the counts' (never
// seen; a guard, never a guess). work: 16-byte aligned (src/cuda/sample.c). s_h: ZR_SAMPLE_SUB unsigned of scratch.
__device__ int sample_refine(const float *__restrict__ work, ZrSampleScratch *sc, int n, int k, float lo, float hi,
                             unsigned *s_h) {
    // loads in flight per thread in a later round (ptxas sm_90, 64 registers: 16, 4, 6 and 7 do
    // not spill; 8 spills 8 bytes)
    enum { U = 16 };
    __shared__ float s_lo[ZR_SAMPLE_ROUNDS], s_scale[ZR_SAMPLE_ROUNDS];
    __shared__ int s_b[ZR_SAMPLE_ROUNDS];
    __shared__ unsigned s_n, s_at;
    const int tid = threadIdx.x, nt = blockDim.x;
    float rlo = lo, scale = sample_sub_scale(lo, hi);
    unsigned above = 0;
    int rounds = 0;
    // the gather blocks' counts and offers (added by other multiprocessors: from L2; the pick
    // zeroes them for the next step once it is done with them, whether or not it came here)
    for (int j = tid; j < ZR_SAMPLE_SUB; j += nt) s_h[j] = __ldcg(&sc->sub_count[j]);
    const unsigned n_union = __ldcg(&sc->n_union);
    for (;;) {
        const int r = rounds;
        if (tid == 0) {
            s_lo[r] = rlo;
            s_scale[r] = scale;
        }
        __syncthreads();
        if (r > 0) {
            for (int i0 = tid; i0 < n; i0 += U * nt) {
                float l[U];
#pragma unroll
                for (int u = 0; u < U; u++) l[u] = i0 + u * nt < n ? work[i0 + u * nt] : -INFINITY;
#pragma unroll
                for (int u = 0; u < U; u++)
                    if (l[u] >= lo && sample_sub_decide(l[u], s_lo, s_scale, s_b, r) == 0)
                        atomicAdd(&s_h[sample_sub_level(l[u], s_lo[r], s_scale[r])], 1u);
            }
            __syncthreads();
        }
        int b;
        unsigned at, over;
        sample_sub_suffix(s_h, above, (unsigned)k, &b, &at, &over);
        if (b < 0) return -1; // fewer than k ids at or above lo: cannot happen
        if (tid == 0) s_b[r] = b;
        rounds = r + 1;
        if (r == 0 && at <= ZR_SAMPLE_CAP && n_union <= ZR_SAMPLE_UNION) {
            // the set from the gather blocks' offers (each holds every id of the set in its block)
            if (tid == 0) s_n = 0;
            __syncthreads();
            for (int i0 = 0; i0 < (int)n_union; i0 += nt) {
                const int i = i0 + tid;
                const bool in = i < (int)n_union;
                const float l = in ? __ldcg(&sc->union_l[i]) : -INFINITY;
                sample_warp_append(l >= lo && sample_sub_level(l, lo, scale) >= b, in ? __ldcg(&sc->union_id[i]) : 0, l,
                                   &s_n, sc->cand, sc->cand_l, ZR_SAMPLE_CAP);
            }
            __syncthreads();
            return s_n == at ? (int)s_n : -1; // an offer short of the set: cannot happen, but never guess
        }
        if (at <= ZR_SAMPLE_CAP) {
            if (tid == 0) s_at = at; // in shared memory: a register live over the gather spilled
            break;
        }
        // the next round splits sub-level b
        above = over;
        rlo = __fadd_rn(rlo, __fdiv_rn((float)b, scale));
        scale = __fmul_rn(scale, (float)ZR_SAMPLE_SUB);
        if (rounds == ZR_SAMPLE_ROUNDS || !isfinite(scale)) return -1;
        for (int j = tid; j < ZR_SAMPLE_SUB; j += nt) s_h[j] = 0; // read by every thread in the suffix
    }
    if (tid == 0) s_n = 0;
    __syncthreads(); // s_b[rounds - 1], s_n
    // the gather: four ids a thread a load, each of the four taken in its own ballot
    const float4 *w4 = (const float4 *)work;
    for (int q0 = 0; q0 < (n + 3) / 4; q0 += nt) {
        const int q = q0 + tid;
        float4 x = make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
        if (4 * q + 3 < n) x = w4[q];
        else if (4 * q < n) {
            x.x = work[4 * q];
            if (4 * q + 1 < n) x.y = work[4 * q + 1];
            if (4 * q + 2 < n) x.z = work[4 * q + 2];
        }
        const float v[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
        for (int c = 0; c < 4; c++)
            sample_warp_append(v[c] >= lo && sample_sub_decide(v[c], s_lo, s_scale, s_b, rounds) >= 0, 4 * q + c, v[c],
                               &s_n, sc->cand, sc->cand_l, ZR_SAMPLE_CAP);
    }
    __syncthreads();
    return s_n == s_at ? (int)s_n : -1; // a count that does not match the set: never guess
}

// One block of ZR_SAMPLE_PICK_THREADS, ZR_SAMPLE_PICK_SMEM bytes of dynamic shared memory.
// temp > 0 unless mode is ZR_SAMPLE_GREEDY; k as the mode needs it; lmp as sample_count_f32.
// What thread 0 needs at the end (the position, the generator, the history's head) is loaded
// first, so its latency overlaps the sort.
ZR_KERNEL void __launch_bounds__(ZR_SAMPLE_PICK_THREADS)
    sample_pick_f32(const float *__restrict__ work, ZrSampleState *st, ZrSampleScratch *sc, int *tok_pos,
                    ZrPickRecord *ring, int n_slots, int n, int mode, int k, float top_p, float lmp, float temp) {
    zr_grid_enter();
    extern __shared__ unsigned long long s_key[];           // [ZR_SAMPLE_CAP]
    double *s_w = (double *)(s_key + ZR_SAMPLE_CAP);        // [ZR_SAMPLE_CAP]
    float *s_l = (float *)(s_w + ZR_SAMPLE_CAP);            // [ZR_SAMPLE_CAP]
    __shared__ int s_status, s_token, s_n, s_done;
    const int tid = threadIdx.x;
    // thread 0's, in shared memory rather than registers (every thread would hold them, at the
    // 64 registers of a 1024-thread block, across the sort and sample_refine)
    __shared__ int s_pos, s_rn, s_nh, s_head;
    __shared__ unsigned long long s_rng[4];
    if (tid == 0) {
        sc->t_stage[ZR_SAMPLE_T_PICK] = zr_globaltimer();
        s_pos = tok_pos[1];
        s_rn = st->repeat_last_n;
        s_nh = st->n_hist;
        s_head = st->hist_head;
        for (int i = 0; i < 4; i++) s_rng[i] = st->rng[i];
    }
    // what count and gather left, loaded beside the prep's partials (one round trip for both)
    const int set_host = sc->set_host, set_cut = sc->set_cut, set_refine = sc->set_refine;
    const float set_lo = sc->set_thr, set_hi = sc->set_hi;
    const double vocab_total = sc->total; // top-p without top-k
    int n0 = min((int)__ldcg(&sc->n_set), ZR_SAMPLE_CAP);
    // a set the rank sort takes, loaded beside the rest before its size is known (the gather's
    // slots past n_set hold stale values, which the sort never reads): its round trip overlaps theirs
    int pre_id = 0;
    float pre_l = 0.f;
    if (tid < ZR_SAMPLE_RANK_MAX) {
        pre_id = __ldcg(&sc->cand[tid]);
        pre_l = __ldcg(&sc->cand_l[tid]);
    }
    unsigned long long best_key;
    int bad;
    sample_prep_result(sc, n, &best_key, &bad);
    if (tid < ZR_SAMPLE_RANK_MAX) sample_set_put(s_key, s_l, tid, pre_id, pre_l, mode);
    const int best = argmax_key_id(best_key);
    const float max = argmax_key_value(best_key); // work[best] (cu/pick.cuh: -0 as +0 changes nothing here)
    if (tid == 0) {
        s_status = ZR_PICK_OK;
        s_token = -1;
        s_done = 1;
        if (bad >= 0) s_status = ZR_PICK_NONFINITE;
        else if (mode == ZR_SAMPLE_GREEDY) s_token = best;
        else if (max == -INFINITY) s_token = 0; // nothing is possible: src/sampler.c picks 0
        else if (set_host) s_status = ZR_PICK_HOST;
        else s_done = 0;
    }
    __syncthreads();
    if (!s_done && set_refine) {
        n0 = sample_refine(work, sc, n, k, set_lo, set_hi, (unsigned *)s_w); // the same in every thread
        if (n0 < 0) {
            if (tid == 0) {
                s_status = ZR_PICK_HOST;
                s_done = 1;
            }
            __syncthreads();
        }
    }
    if (!s_done) {
        sample_sort_set(work, sc, n0, mode, s_key, (unsigned long long *)s_w, s_l, !set_refine);
        if (tid == 0) sc->t_stage[ZR_SAMPLE_T_PICK_SORTED] = zr_globaltimer();
        int cnt = mode == ZR_SAMPLE_TOP_K ? min(k, n0) : n0;
        if (mode == ZR_SAMPLE_TOP_P || (mode == ZR_SAMPLE_TOP_K && top_p < 1.0f)) {
            for (int i = tid; i < cnt; i += blockDim.x) s_w[i] = zr_exp(__dsub_rn((double)s_l[i], (double)max));
            __syncthreads();
            // top-p renormalizes over the top-k survivors; without top-k over the whole vocabulary
            const double total = mode == ZR_SAMPLE_TOP_K ? sample_block_tree(s_w, cnt) : vocab_total;
            // the CPU adds w / total in order: the quotients in parallel, only the sum walked
            for (int i = tid; i < cnt; i += blockDim.x) s_w[i] = __ddiv_rn(s_w[i], total);
            __syncthreads();
            if (tid == 0) {
                const int at = sample_walk_reach(s_w, cnt, (double)top_p);
                s_n = at >= 0 ? at + 1 : cnt;
                if (mode == ZR_SAMPLE_TOP_P && at < 0 && !set_cut) {
                    s_status = ZR_PICK_HOST; // the set held less than the CPU's pass: cannot happen
                    s_done = 1;              // with the mass margin, but never guess
                }
            }
            __syncthreads();
            cnt = s_n;
        }
        if (!s_done) {
            // min-p (and -inf) on what is left: a prefix of the sorted candidates
            const float floor_l = __fadd_rn(max, lmp);
            __syncthreads(); // every thread has read s_n
            if (tid == 0) s_n = 0;
            __syncthreads();
            int keep = 0;
            for (int i = tid; i < cnt; i += blockDim.x) keep += s_l[i] >= floor_l && s_l[i] > -INFINITY;
            if (keep) atomicAdd(&s_n, keep);
            __syncthreads();
            cnt = s_n;
            if (tid == 0) sc->t_stage[ZR_SAMPLE_T_PICK_CUT] = zr_globaltimer();
            if (cnt == 0) {
                if (tid == 0) s_token = best;
            } else if (cnt == 1) {
                if (tid == 0) s_token = argmax_key_id(s_key[0]);
            } else {
                // temperature -> softmax -> draw, as src/sampler.c
                const double inv_t = __ddiv_rn(1.0, (double)temp);
                for (int i = tid; i < cnt; i += blockDim.x)
                    s_w[i] = zr_exp(__dmul_rn(__dsub_rn((double)s_l[i], (double)max), inv_t));
                __syncthreads();
                const double total = sample_block_tree(s_w, cnt);
                if (tid == 0) {
                    unsigned long long rng[4] = {s_rng[0], s_rng[1], s_rng[2], s_rng[3]};
                    const double u = __dmul_rn(sample_uniform(rng), total);
                    for (int i = 0; i < 4; i++) s_rng[i] = rng[i];
                    double cum = 0.0;
                    int last = 0, pick = -1;
#pragma unroll 8
                    for (int i = 0; i < cnt; i++) {
                        const double w = s_w[i];
                        if (w <= 0.0) continue;
                        last = i;
                        cum = __dadd_rn(cum, w);
                        if (u < cum) {
                            pick = i;
                            break;
                        }
                    }
                    s_token = argmax_key_id(s_key[pick >= 0 ? pick : last]);
                }
            }
        }
    }
    // the count's bins, ready for the next step (every gather block has read them), and a crowded
    // set's sub-level counts and offers (read by sample_refine above, or never: a non-finite step)
    for (int j = tid; j < ZR_SAMPLE_BINS; j += blockDim.x) {
        sc->bin_count[j] = 0;
        sc->bin_mass[j] = 0;
    }
    if (sc->set_refine) { // loaded again: a register live over the whole pick spilled
        for (int j = tid; j < ZR_SAMPLE_SUB; j += blockDim.x) sc->sub_count[j] = 0;
        if (tid == 0) sc->n_union = 0;
    }
    __syncthreads();
    if (tid != 0) return;
    const int status = s_status, token = s_token;
    const int pos = s_pos;
    unsigned long long rng[4] = {s_rng[0], s_rng[1], s_rng[2], s_rng[3]}; // as loaded unless a draw advanced it
    ZrPickRecord *rec = ring + (unsigned)pos % (unsigned)n_slots;
    sample_step_end(st, rec, tok_pos, pos, status, token, bad, rng, s_rn, s_head, s_nh);
    sc->n_set = 0;
    const unsigned long long t_end = zr_globaltimer();
    sc->t_stage[ZR_SAMPLE_T_PICK_END] = t_end;
    rec->t_end = t_end;
    zr_record_publish(rec, pos);
}
