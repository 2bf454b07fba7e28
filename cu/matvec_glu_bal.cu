// The FFN's gate|up product (ZR_MV_GLU: y[i] = gate(g_i . x') * (u_i . x'), W = [gate; up]) with a
// block's results cut into whole rounds of one result a warp and a remainder cut into steps:
// y[n_out / 2] from W[n_out, n_in] and x' as the tall product stages it (RMSNorm, or gemma's ADDNORM).
//
// Why: the tall product (zr_matvec, TALL) deals tiles of 16 results to a wave of B blocks x 16
// warps, tile b, b + B, ...: where the tiles are not a multiple of B, the blocks that take one
// tile more set the time. Llama-3-8B's gate|up (14336 results of 4096 values) on 264 blocks is
// 3.39 results a warp: the warps with 4 take 4 x 4 steps of 32 Q4_K items where the work is 13.6;
// Gemma-3-4B's Q8_0 gate|up (10240 results of 160 items of 16 values) 2.42 results a warp: 3 x 5
// steps where the work is 12.1.
// Here block b takes the results [b U / B, (b + 1) U / B) (U results): warp v takes results v,
// v + 16, ... of its block's whole rounds of 16 exactly as the tall product does (its lanes over
// the items, the same sums in the same order: the same bits), and the rest of the block's results
// (fewer than 16) are cut into steps of 32 items, chunk c of the remainder = (result c / S, step
// c % S) for S steps a result, warp v taking chunks v, v + 16, ...: the 8B's warps take 3 x 4 + 2
// steps, Gemma-3-4B Q8_0's 2 x 5 + 3. Each chunk's gate and up sums are summed over the warp and
// stored in shared memory; thread i adds remainder result i's chunks in step order: deterministic,
// the same order in every launch (the remainder's bits differ from the tall product's: another
// order of the sums; test_kernels holds them to the same bounds).
//
// Launch: grid B blocks (one wave), block 512 threads, dynamic shared memory as the tall product's
// (x' staged); the host (zr_cuf_mv_bal_takes, src/cuda/mv_shape.c) checks that a block's remainder
// chunks fit ZR_MVB_CHUNKS and that items >= 32.
#include "matvec.cuh"

#define ZR_MVB_THREADS 512
#define ZR_MVB_WARPS (ZR_MVB_THREADS / 32)
#define ZR_MVB_CHUNKS 512 // a block's remainder chunks: fewer than 16 results x their steps

// The kernel of every mode clears the mode's SWIGLU bit: it takes only PLAIN or RMSNORM input (the
// host sends ADDNORM to the _an_ kernels, SWIGLU to none), so the compiler drops those two modes'
// code, but in the types of ZrMvBalAllModes. ptxas sm_90, bytes spilled: q4_K 8 -> 0, q5_K 12 -> 0,
// q4_1 20 -> 0, q2_K 20 -> 8, q5_0 32 -> 28, q5_1 84 -> 80. H200 tg128, Llama-3-8B (cu/PERF.md
// sessions 43, 44): Q4_K_M +1.4%, Q5_K_M +3.4%, Q4_1 +3.5%, Q5_0 +2.2%, Q5_1 +2.8%, Q2_K +0.3%. Not
// q4_0 (0 -> 8 bytes, Q4_0 -1.0%) nor q8_0 (62 -> 64 registers, Q8_0 +0.06%): they keep every mode's.
template <class T> struct ZrMvBalAllModes : std::false_type {};
template <> struct ZrMvBalAllModes<ZrMvQ4xi<ZR_T_Q4_0>> : std::true_type {};
template <> struct ZrMvBalAllModes<ZrMvQ8i> : std::true_type {};

template <class T, bool AN>
__device__ __forceinline__ void zr_matvec_glu_bal(const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws,
                                                  const float *__restrict__ x, float *y,
                                                  const float *__restrict__ norm_w, float eps, int n_in, int n_out,
                                                  int mode, const float *__restrict__ post_r,
                                                  const float *__restrict__ post_w, float *x_out) {
    extern __shared__ float4 zr_mv_smem[];
    __shared__ float red_ss[ZR_MVB_WARPS];
    __shared__ float red_inv[ZR_MVB_WARPS];     // RMSNorm: each warp's 1/rms (once a warp)
    __shared__ float2 part[ZR_MVB_CHUNKS];      // the remainder's chunk sums (gate, up)
    float *xs = (float *)zr_mv_smem;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    // AN (the _an_ twins): gemma's ADDNORM input alone, the mode's input bits taken as ADDNORM (no
    // code of the other modes), x' staged as a one-tile product stages it (post_r's pieces in one
    // batch, a float4 of x, norm_w, post_r and post_w a round: zr_mv_stage_x); the others stage as
    // the tall product does (an ADDNORM round there takes two round trips, the pieces one at a time)
    if (AN) mode = (mode & ~ZR_MV_IN) | ZR_MV_ADDNORM;
    else if (!ZrMvBalAllModes<T>::value) mode &= ~ZR_MV_SWIGLU;
    const int in_mode = mode & ZR_MV_IN;
    const bool gelu = (mode & ZR_MV_GELU) != 0;
    const int n_res = n_out >> 1, items = n_in / T::EPI, steps = (items + 31) >> 5;
    // this block's results [r_lo, r_hi): rounds whole rounds of 16, then nrem results in nch chunks
    const int r_lo = (int)((long long)blockIdx.x * n_res / gridDim.x);
    const int r_hi = (int)((long long)(blockIdx.x + 1) * n_res / gridDim.x);
    const int rounds = (r_hi - r_lo) >> 4, r_rem = r_lo + (rounds << 4), nch = (r_hi - r_rem) * steps;

    typename T::F buf[2][2];
    // the first items of round j's result (lane's item: lane; items >= 32), or of chunk c
    auto load_round = [&](int j, typename T::F (&dst)[2]) {
        const int r = r_lo + (j << 4) + warp;
        T::load(T::row(w, ws, n_in, n_out, r), lane, dst[0]);
        T::load(T::row(w, ws, n_in, n_out, n_res + r), lane, dst[1]);
    };
    auto load_chunk = [&](int c, typename T::F (&dst)[2]) {
        const int k = c / steps, it = ((c - k * steps) << 5) + lane;
        if (it < items) {
            T::load(T::row(w, ws, n_in, n_out, r_rem + k), it, dst[0]);
            T::load(T::row(w, ws, n_in, n_out, n_res + r_rem + k), it, dst[1]);
        }
    };
    if (rounds > 0) load_round(0, buf[0]);
    else if (warp < nch) load_chunk(warp, buf[0]);
    // everything above reads weights only
    zr_grid_enter_after_loads(w);

    zr_mv_glu_stage<T, !AN>(x, norm_w, xs, n_in, mode, ZR_MVB_THREADS, post_r, post_w, x_out, eps, red_ss);
    if (zr_mv_normed(in_mode)) {
        // 1/rms once a warp, as the tall product's (the same sum in the same order)
        const float inv = zr_mv_inv_rms(red_ss, ZR_MVB_WARPS, n_in, eps);
        if (lane == 0) red_inv[warp] = inv;
        __syncwarp();
    }
    ZR_TL_MARK(0); // x staged

    for (int j = 0; j < rounds; j++) {
        // the tall product's loop for one result (R = 2: its gate and up rows), P = 2
        const int r = r_lo + (j << 4) + warp;
        typename T::Row rw[2] = {T::row(w, ws, n_in, n_out, r), T::row(w, ws, n_in, n_out, n_res + r)};
        float acc[2] = {0.f, 0.f};
        for (int it = lane; it < items; it += 64) {
            if (it + 32 < items) {
                T::load(rw[0], it + 32, buf[1][0]);
                T::load(rw[1], it + 32, buf[1][1]);
            }
            T::template comp<2>(buf[0], it, xs, acc);
            if (it + 32 < items) {
                if (it + 64 < items) {
                    T::load(rw[0], it + 64, buf[0][0]);
                    T::load(rw[1], it + 64, buf[0][1]);
                }
                T::template comp<2>(buf[1], it + 32, xs, acc);
            }
        }
        // buf[0] is free: the next round's first items, or the warp's first chunk
        if (j + 1 < rounds) load_round(j + 1, buf[0]);
        else if (warp < nch) load_chunk(warp, buf[0]);
        float g = zr_warp_sum(acc[0]), u = zr_warp_sum(acc[1]);
        if (lane == 0) {
            if (zr_mv_normed(in_mode)) {
                g *= red_inv[warp];
                u *= red_inv[warp];
            }
            y[r] = zr_mv_gate(g, gelu) * u;
        }
    }
    ZR_TL_MARK(1); // the whole rounds summed (warp 0)

    // the remainder: chunk c's sums from cb, the next chunk's loads into nb issued first (the two
    // buffers named, not indexed, so they stay in registers)
    auto chunk = [&](int c, typename T::F (&cb)[2], typename T::F (&nb)[2]) {
        if (c + ZR_MVB_WARPS < nch) load_chunk(c + ZR_MVB_WARPS, nb);
        const int k = c / steps, it = ((c - k * steps) << 5) + lane;
        float acc[2] = {0.f, 0.f};
        if (it < items) T::template comp<2>(cb, it, xs, acc);
        const float g = zr_warp_sum(acc[0]), u = zr_warp_sum(acc[1]);
        if (lane == 0) part[c] = make_float2(g, u);
    };
    for (int c = warp; c < nch; c += 2 * ZR_MVB_WARPS) {
        chunk(c, buf[0], buf[1]);
        if (c + ZR_MVB_WARPS < nch) chunk(c + ZR_MVB_WARPS, buf[1], buf[0]);
    }
    if (nch == 0) return; // block-uniform
    __syncthreads();
    // thread i: remainder result i from its chunks in step order
    for (int i = tid; i < r_hi - r_rem; i += ZR_MVB_THREADS) {
        float g = 0.f, u = 0.f;
        for (int s = 0; s < steps; s++) {
            const float2 p = part[i * steps + s];
            g += p.x;
            u += p.y;
        }
        if (zr_mv_normed(in_mode)) {
            const float inv = red_inv[0];
            g *= inv;
            u *= inv;
        }
        y[r_rem + i] = zr_mv_gate(g, gelu) * u;
    }
}

// The kernels of every mode (ptxas sm_90): 64 registers, none spilled in q4_K, q5_K, q4_1 and q4_0,
// 28 bytes in q5_0, 80 in q5_1 and 8 in q2_K (integer planes, sessions 29 and 31; ZrMvBalAllModes
// above), q8_0 62, none. Q5_0's and Q5_1's came with their tall products' 64 registers (session 29:
// +5.9% and +5.2% on Llama-3-8B against the tall product; on the floats, at 79 registers and one
// block of 512 an SM, Q5_0's lost 0.4%: cu/PERF.md session 28).
// Each type's kernel of every mode and its ADDNORM twin (AN above)
#define ZR_MV_GLU_BAL(SUF, TRAITS)                                                                        \
    ZR_MV_GLU_KERNEL(matvec_glu_bal_##SUF, ZR_MVB_THREADS, zr_matvec_glu_bal<TRAITS, false>)             \
    ZR_MV_GLU_KERNEL(matvec_glu_bal_an_##SUF, ZR_MVB_THREADS, zr_matvec_glu_bal<TRAITS, true>)
// The ADDNORM twins: 62 registers (q4_K), 56 (q8_0), 64 with 4 bytes spilled
// (q5_1), 64 and none (the others). H200 tg128 against the kernels of every mode (cu/PERF.md session
// 43): Gemma-3-12B Q4_K_M +2.05%, Gemma-3-4B Q5_K_M +2.0%, Q4_0 +1.3%, Q8_0 +0.07%. The same staging
// in the kernels of every mode lost 0.5% on Llama-3-8B Q4_K_M (RMSNorm: their loops' code moved).
ZR_MV_GLU_BAL(q4_k, ZrMvQ4Ki)
ZR_MV_GLU_BAL(q8_0, ZrMvQ8i)
ZR_MV_GLU_BAL(q4_0, ZrMvQ4xi<ZR_T_Q4_0>)
ZR_MV_GLU_BAL(q4_1, ZrMvQ4xi<ZR_T_Q4_1>)
ZR_MV_GLU_BAL(q5_0, ZrMvQ4xi<ZR_T_Q5_0>)
ZR_MV_GLU_BAL(q5_1, ZrMvQ4xi<ZR_T_Q5_1>)
ZR_MV_GLU_BAL(q5_k, ZrMvQ5Ki)
ZR_MV_GLU_BAL(q2_k, ZrMvQ2Ki)
