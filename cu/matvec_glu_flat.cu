// The FFN's gate|up product of Q4_K (ZR_MV_GLU: y[i] = gate(g_i . x') * (u_i . x'), W = [gate; up])
// with each warp's work a flat run of (result, item) pairs instead of whole results:
// y[n_out / 2] from W[n_out, n_in] and x' as the tall product stages it (RMSNorm, or gemma's ADDNORM:
// matvec_glu_flat_an_q4_k).
//
// Why: the tall product (zr_matvec, TALL) gives a warp a result at a time, its 32 lanes over the
// result's items. Gemma-3-4B's gate|up (10240 results of 2560 values: 80 Q4_K items) on one wave of
// 264 blocks x 16 warps is 2.42 results a warp, so the warps that take 3 results set the time: 3
// results x 3 steps of 32 items (the third half idle) = 9 steps where the work is 6.06 steps a lane.
// In the graph (timeline build, H200) it ran 18.2 us a layer for 29.5 MB (1.62 TB/s) against
// Llama-3.2-3B's 13.3 us for 28.3 MB (2.13 TB/s: 1.94 results a warp of 96 items, 6 steps).
// Here block b takes the results [b U / B, (b + 1) U / B) (U results, B blocks), its run of
// results x items is cut into 16 runs, one a warp, at multiples of 32 pairs, and lane l of a warp
// takes the run's pairs l, l + 32, ...: Gemma's 7 steps a lane instead of 9, no lane idle but in a
// run's last step. Cut at v nf / 16 itself (the first version), a quarter warp's 8 items straddled
// two super-blocks: 6x the shared-memory bank conflicts on x's integer planes (ncu, Llama-3.2-3B's
// gate|up), and Gemma-3-4B lost 0.7% in tg128 where this gains 2.6%.
// H200 tg128 (cu/PERF.md session 26): Gemma-3-4B Q4_K_M +2.6%; where the tall product's lanes are
// full it is slower (each step moves a cursor and finds its rows again): the host takes it only
// where lanes idle (src/cuda/mv_shape.c).
//
// A lane's pairs move through the results in order; it sums each result's gate and up items in
// registers (T::comp<2>, the tall product's arithmetic an item) and stores those sums into its slot
// in shared memory when the result ends (slot k: the k-th result of its warp's run, at most KMAX;
// in registers they made ptxas spill). Then each slot is summed over the warp (a butterfly), and
// thread i adds result i's warp sums in warp order (a result spans at most two warps' runs where
// a run is longer than a result): deterministic, the same order in every launch. The bits differ
// from the tall product's (another order of the sums); test_kernels holds both to the same bounds.
//
// Launch: grid B blocks (one wave), block 512 threads, dynamic shared memory as the tall product's
// (x' staged); the host (zr_cuf_mv_flat_takes, src/cuda/mv_shape.c) checks that a warp's run spans
// at most KMAX results and that items >= 32 (a step crosses at most one result's end).
#include "matvec.cuh"

#define ZR_MVF_THREADS 512
#define ZR_MVF_WARPS (ZR_MVF_THREADS / 32)
#define ZR_MVF_KMAX 4

// Where warp v's run of a block's nf pairs starts: v nf / 16 rounded down to a multiple of 32
// (nf itself for v = 16).
__device__ __forceinline__ int zr_mvf_cut(int v, int nf) {
    return v >= ZR_MVF_WARPS ? nf : (int)(((long long)v * nf / ZR_MVF_WARPS) & ~31LL);
}

// AN: the kernel built for ADDNORM input alone (gemma's gate|up, the block's pending post norm
// folded in), staging it as the tall product does; else for RMSNORM alone (the host sends neither
// PLAIN nor SWIGLU here), so neither carries another mode's code (PLAIN beside RMSNORM spilled 40
// bytes).
template <class T, bool AN>
__device__ __forceinline__ void zr_matvec_glu_flat(const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws,
                                                   const float *__restrict__ x, float *y,
                                                   const float *__restrict__ norm_w, float eps, int n_in, int n_out,
                                                   int mode, const float *__restrict__ post_r,
                                                   const float *__restrict__ post_w, float *x_out) {
    extern __shared__ float4 zr_mv_smem[];
    __shared__ float red_ss[ZR_MVF_WARPS];
    __shared__ float part[ZR_MVF_WARPS][ZR_MVF_KMAX][2]; // each warp's slots: gate, up
    __shared__ float2 lsum[ZR_MVF_WARPS][ZR_MVF_KMAX][32]; // each lane's slots (gate, up)
    float *xs = (float *)zr_mv_smem;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    mode = (mode & ~ZR_MV_IN) | (AN ? ZR_MV_ADDNORM : ZR_MV_RMSNORM);
    const int in_mode = mode & ZR_MV_IN;
    const bool gelu = (mode & ZR_MV_GELU) != 0;
    const int n_res = n_out >> 1, items = n_in / T::EPI;
    // this block's results [r_lo, r_hi) and this warp's run [f0, f1) of the block's pairs
    const int r_lo = (int)((long long)blockIdx.x * n_res / gridDim.x);
    const int r_hi = (int)((long long)(blockIdx.x + 1) * n_res / gridDim.x);
    const int nf = (r_hi - r_lo) * items;
    // (cut at multiples of 32 pairs: a quarter warp's 8 items then start on a multiple of 8 where
    // items % 8 == 0, the staged x's banks and the weights' lines as the tall product's)
    const int f0 = zr_mvf_cut(warp, nf), f1 = zr_mvf_cut(warp + 1, nf);
    const int k0 = f0 / items; // the run's first result (block-relative): slot 0

    // a lane's cursor: result lk (block-relative) and item lit of its next pair f; each step adds
    // 32 pairs (items >= 32: at most one result boundary a step)
    int f = f0 + lane;
    int lk = f / items, lit = f - lk * items;
    typename T::F buf[2][2];
    auto load = [&](typename T::F (&dst)[2]) {
        T::load(T::row(w, ws, n_in, n_out, r_lo + lk), lit, dst[0]);
        T::load(T::row(w, ws, n_in, n_out, n_res + r_lo + lk), lit, dst[1]);
    };
    if (f < f1) load(buf[0]);
    // everything above reads weights only
    zr_grid_enter_after_loads(w);

    zr_mv_glu_stage<T>(x, norm_w, xs, n_in, mode, ZR_MVF_THREADS, post_r, post_w, x_out, eps, red_ss);
    ZR_TL_MARK(0); // x staged

#pragma unroll
    for (int k = 0; k < ZR_MVF_KMAX; k++) lsum[warp][k][lane] = make_float2(0.f, 0.f);
    float cur[2] = {0.f, 0.f}; // the sums of the lane's current result
    // cur into result k's slot (k - k0 < KMAX: the host's rule)
    auto flush = [&](int k) {
        const int d = k - k0;
        if (d < ZR_MVF_KMAX) lsum[warp][d][lane] = make_float2(cur[0], cur[1]);
        cur[0] = cur[1] = 0.f;
    };
    // one step: the cursor moved on and the next step's loads issued into nb, then this step's
    // sums from cb (the two buffers named, not indexed, so they stay in registers)
    auto step = [&](typename T::F (&cb)[2], typename T::F (&nb)[2]) {
        const int k = lk, it = lit;
        lit += 32;
        if (lit >= items) {
            lit -= items;
            lk++;
        }
        if (f + 32 < f1) load(nb);
        T::template comp<2>(cb, it, xs, cur);
        if (lk != k) flush(k);
        f += 32;
    };
    while (f < f1) {
        step(buf[0], buf[1]);
        if (f < f1) step(buf[1], buf[0]);
    }
    flush(lk);
    ZR_TL_MARK(1); // the items summed (warp 0)

#pragma unroll
    for (int k = 0; k < ZR_MVF_KMAX; k++) {
        const float2 a = lsum[warp][k][lane];
        const float g = zr_warp_sum(a.x), u = zr_warp_sum(a.y);
        if (lane == 0) {
            part[warp][k][0] = g;
            part[warp][k][1] = u;
        }
    }
    __syncthreads();
    // thread i: result r_lo + i, from the slots of the warps whose runs hold its pairs, in warp order
    for (int i = tid; i < r_hi - r_lo; i += ZR_MVF_THREADS) {
        float g = 0.f, u = 0.f;
        for (int v = 0; v < ZR_MVF_WARPS; v++) {
            const int a = zr_mvf_cut(v, nf), b = zr_mvf_cut(v + 1, nf);
            if (a < b && a < (i + 1) * items && b > i * items) {
                g += part[v][i - a / items][0];
                u += part[v][i - a / items][1];
            }
        }
        if (zr_mv_normed(in_mode)) {
            const float inv = zr_mv_inv_rms(red_ss, ZR_MVF_WARPS, n_in, eps);
            g *= inv;
            u *= inv;
        }
        y[r_lo + i] = zr_mv_gate(g, gelu) * u;
    }
}

// 64 registers; 12 bytes spilled (RMSNORM) and 16 (the ADDNORM twin), where the kernel of
// every mode spilled 24 (the tall Q4_K product: 8). H200 tg128 against it (cu/PERF.md session 44):
// Gemma-3-4B Q4_K_M +0.4%, the Qwen3-4B shape +0.3%. An ADDNORM twin staged as a one-tile product
// stages it lost 2.7% on Gemma-3-4B (session 43). A Q8_0 flat product (ZrMvQ8_0, no spill) measured
// slower on every row it took, Gemma-3-4B's 160 items too (5 full steps: no lane idle in the tall
// product): -0.3 to -6% (cu/PERF.md session 26), deleted.
ZR_MV_GLU_KERNEL(matvec_glu_flat_q4_k, ZR_MVF_THREADS, zr_matvec_glu_flat<ZrMvQ4Ki, false>)
ZR_MV_GLU_KERNEL(matvec_glu_flat_an_q4_k, ZR_MVF_THREADS, zr_matvec_glu_flat<ZrMvQ4Ki, true>)
