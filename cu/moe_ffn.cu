// The MoE FFN of one decode step's layer in ONE persistent launch (issue 15): the router, the
// chosen experts' gate|up and their down mixed into the residual, three launches before
// (matvec_f32 with the norm fused; matvec_id_<type>_flat routing for itself; matvec_id_mix_<type>).
//
// Why: at batch 1 a Qwen3-30B-A3B layer's MoE FFN reads ~22 MB (~7 us at the bandwidth) but took
// ~3 launches of ~5 us of latency each, and programmatic dependent launch overlapped nothing: the
// gate|up and down kernels cannot load a weight before the routing is known, and each grid fills
// the GPU. Here the boundaries are grid-wide barriers (cu/grid_barrier.cuh, ~1 us), the router's
// weights are requested before the grid wait, and no block is launched, scheduled or re-stages
// its shared state between the phases beyond what each phase needs.
//
// Phases (every block of the grid; the grid is at most the blocks resident at once, proven by the
// host with the occupancy API, src/cuda/moe.c):
//   1. router logits [n_expert] = W_r RMSNorm(x) * norm_w: tiles of 2 rows over the blocks,
//      each computed as the router's own launch (matvec_f32 in blocks of 32 split threads,
//      src/cuda/moe.c router_shape) computes it (zr_mv_rows_as_split, below): the same bits.
//   -- barrier --
//   2. every block routes (cu/moe_topk.cuh, from the logits through L2) and computes its tiles of
//      the flat gate|up product (cu/moe_matvec.cu zr_matvec_id_flat_rows: matvec_id_<type>_flat's
//      tiling and arithmetic, blocks of 256 threads as its launch) into ff [n_used][n_ff]; block 0
//      writes ids and weights.
//   -- barrier --
//   3. down + mix: cu/moe_matvec_mix.cu's warp per output row over every slot (its arithmetic),
//      ff staged through L2; rows taken in passes of the grid's warps.
// The kernel lets the next one be scheduled (griddepcontrol.launch_dependents) only in phase 3:
// by then every block of this grid is resident (the trigger fires once all blocks have run it).
// Shapes: x, norm_w [n_in]; router rows n_expert <= 256, F32; gate|up stacked [n_expert 2 n_ff]
// of n_in (expert e: its n_ff gate rows, then its n_ff up rows); down stacked [n_expert n_in] of
// n_ff; n_used <= 32, n_ff % 32 == 0 and n_used n_ff staged floats within the dynamic shared
// memory; block 256 threads.
#include "grid_barrier.cuh"
#include "moe_matvec.cu"
#include "moe_matvec_mix.cu"

#define ZR_MOE_FFN_THREADS 256

// Rows y[n_out] = W RMSNorm(x) * norm_w of zr_matvec<T, R, ..> launched in blocks of V = 32 split
// threads with one row group a block (split <= 16 warps a row), computed by this block of
// ZR_MOE_FFN_THREADS as that launch computes them: x staged by "virtual thread" vt < V exactly as
// thread vt of a V-thread block stages it (zr_mv_stage_x with (vt, V): the same float4s, the same
// sum of squares in the same order, then a warp sum per virtual warp and their sum in order), warp
// w computing the virtual warps w, w + 8 (each its items ks 32 + lane + j 32 split in order, then
// a warp sum), the split's partial sums added in order, times 1/rms, + 0 as zr_matvec's y = out +
// 0. Tiles of R rows: blockIdx.x, + gridDim.x, ...; the first tile's weights are requested before
// the grid wait, which every block passes here (blocks without a tile too). Needs n_in % EPI == 0.
template <class T, int R>
__device__ __forceinline__ void zr_mv_rows_as_split(const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws,
                                                    const float *__restrict__ x, const float *__restrict__ norm_w,
                                                    float eps, int n_in, int n_out, int split, float *y) {
    constexpr int NW = ZR_MOE_FFN_THREADS / 32, VW = 16 / NW; // real warps; virtual warps a real warp
    extern __shared__ float4 zr_mv_smem[];
    __shared__ float part[16][R]; // [virtual warp][row] partial sums
    __shared__ float red[16];     // [virtual warp] sums of squares
    float *xs = (float *)zr_mv_smem;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int S = split, V = 32 * S, items = n_in / T::EPI, step = 32 * S, n_tiles = (n_out + R - 1) / R;
    typename T::Row rw[R];
    typename T::F buf[VW][R];
    auto begin_tile = [&](int t) {
#pragma unroll
        for (int r = 0; r < R; r++) rw[r] = T::row(w, ws, n_in, n_out, min(t * R + r, n_out - 1));
#pragma unroll
        for (int v = 0; v < VW; v++) {
            const int ks = warp + NW * v, it = ks * 32 + lane;
            if (ks < S && it < items) {
#pragma unroll
                for (int r = 0; r < R; r++) T::load(rw[r], it, buf[v][r]);
            }
        }
    };
    int tile = blockIdx.x;
    if (tile < n_tiles) begin_tile(tile);
    zr_grid_wait_after_loads(w); // x and norm_w's producers; the weights above are constant (and stay in flight)
    if (tile >= n_tiles) return;
    float ss[VW];
#pragma unroll
    for (int v = 0; v < VW; v++) {
        const int vt = tid + ZR_MOE_FFN_THREADS * v;
        ss[v] = vt < V ? zr_mv_stage_x<false>(x, norm_w, xs, n_in, ZR_MV_RMSNORM, vt, V) : 0.f;
    }
#pragma unroll
    for (int v = 0; v < VW; v++) {
        const float t = zr_warp_sum(ss[v]);
        if (lane == 0 && warp + NW * v < S) red[warp + NW * v] = t;
    }
    __syncthreads();
    for (; tile < n_tiles; tile += gridDim.x) { // block-uniform
        if (tile != (int)blockIdx.x) begin_tile(tile);
#pragma unroll
        for (int v = 0; v < VW; v++) {
            const int ks = warp + NW * v;
            if (ks < S) {
                float acc[R];
#pragma unroll
                for (int r = 0; r < R; r++) acc[r] = 0.f;
                for (int it = ks * 32 + lane; it < items; it += step) {
                    if (it != ks * 32 + lane) {
#pragma unroll
                        for (int r = 0; r < R; r++) T::load(rw[r], it, buf[v][r]);
                    }
                    T::template comp<R>(buf[v], it, xs, acc);
                }
                float out = 0.f; // lane r: row r's sum over this virtual warp's items
#pragma unroll
                for (int r = 0; r < R; r++) {
                    const float s = zr_warp_sum(acc[r]);
                    if (lane == r) out = s;
                }
                if (lane < R) part[ks][lane] = out;
            }
        }
        __syncthreads();
        if (tid < R && tile * R + tid < n_out) {
            float t = part[0][tid];
            if (S > 1) {
                t = 0.f;
                for (int k = 0; k < S; k++) t += part[k][tid];
            }
            float tot = 0.f;
            for (int k = 0; k < S; k++) tot += red[k];
            t *= 1.0f / sqrtf(tot / (float)n_in + eps);
            y[tile * R + tid] = t + 0.f;
        }
        __syncthreads(); // part is written again by the next tile
    }
}

// RG, PG, PD: the gate|up phase's rows a warp and loads in flight, the down phase's loads in
// flight (a row's arithmetic depends on none of them: cu/matvec.cuh computes each row of a warp's
// R on its own; the flat kernel's R 2 / P 2 at 64 registers, the mix kernel's P 8 at 128). Here the
// cap is 128 registers (phase 3's), so PG covers a Qwen3 row's steps at once: Q4_K rows of 2048
// are 2 steps a lane (PG 3), Q8_0's 4 (PG 4). RG 2 as the flat kernel: 4 rows a warp (Qwen3's 768
// tiles of 8 warps in 384, at most 2 a block of the 264 instead of 3) spilled 4 bytes in Q4_K
// beside phase 3's loads held across the barrier (Q5_K / Q6_K: 12 / 68 bytes), and those loads are
// worth more (the down weights' DRAM latency under the barrier, ~1 us a layer). PD 8 (Qwen3's 8 slots of one item a lane at once), 7 for Q6_K
// down (8 spilled 8 bytes beside the other phases; the 8th slot's load goes out one slot later).
// Phase 3 stages ff (Qwen3: 8 x 768 floats, 6 float4s a thread) 3 float4s a round: 2 L2 round
// trips instead of matvec_id_mix's 3 (6 a round: 8-20 bytes spilled).
template <class TG, int RG, int PG, class TD, int PD>
__device__ __forceinline__ void zr_moe_ffn(const uint8_t *__restrict__ wr, const uint8_t *__restrict__ wsr, int n_expert,
                                           int split_r, float *x, const float *__restrict__ norm_w, float eps, int n_in,
                                           float *logits, int *ids, float *weights, const uint8_t *__restrict__ wg,
                                           const uint8_t *__restrict__ wsg, int n_ff, int n_total_g, float *ff,
                                           const uint8_t *__restrict__ wd, const uint8_t *__restrict__ wsd, int n_total_d,
                                           int n_used, unsigned *bar) {
    __shared__ float lg[256];      // the router's logits, read once through L2
    __shared__ int route_ids[32];  // the block's routing
    __shared__ float route_w[32];
    __shared__ int row0d[32];      // each slot's first down row in the stacked matrix
    __shared__ float wtd[32];
    const int tid = threadIdx.x, warp = tid >> 5;
    // 1. the router's logits (the grid wait is in there)
    zr_mv_rows_as_split<ZrMvF32, 2>(wr, wsr, x, norm_w, eps, n_in, n_expert, split_r, logits);
    zr_grid_barrier(bar);
    // 2. the routing, in every block, then the gate|up tiles of this block
    if (tid < 32) {
        for (int e = tid; e < n_expert; e += 32) lg[e] = __ldcg(logits + e);
        __syncwarp();
        zr_moe_topk_256(lg, n_expert, n_used, route_ids, route_w);
    }
    __syncthreads();
    if (blockIdx.x == 0 && tid < n_used) {
        ids[tid] = route_ids[tid];
        weights[tid] = route_w[tid];
    }
    zr_matvec_id_flat_rows<TG, RG, PG, false>(wg, wsg, x, ff, norm_w, eps, n_in, 2 * n_ff, ZR_MV_RMSNORM | ZR_MV_GLU, 1,
                                             route_ids, n_used, n_total_g);
    // 3. down + mix into the residual, a warp per row, passes of the grid's warps. The slots are
    // known, so the first pass requests its down weights before the barrier (they are constant)
    // and waits for the other blocks' activations with those loads in flight
    if (tid < n_used) {
        const int n_expert_d = n_total_d / n_in;
        int e = route_ids[tid];
        e = e < 0 ? 0 : e >= n_expert_d ? n_expert_d - 1 : e;
        row0d[tid] = e * n_in;
        wtd[tid] = route_w[tid];
    }
    __syncthreads();
    const int nw = blockDim.x >> 5;
    int row = blockIdx.x * nw + warp;
    zr_matvec_id_mix_row<TD, PD, true, 3>(wd, wsd, ff, n_ff, n_in, row0d, wtd, n_used, n_total_d, x, row, [&] {
        zr_grid_barrier(bar);
        zr_grid_release();
    });
    __syncthreads(); // ff is staged again for the next pass
    // (row - warp: the pass's first row, block-uniform; one loop register, the row the body keeps)
    for (row += gridDim.x * nw; row - warp < n_in; row += gridDim.x * nw) {
        zr_matvec_id_mix_row<TD, PD, true, 3>(wd, wsd, ff, n_ff, n_in, row0d, wtd, n_used, n_total_d, x, row);
        __syncthreads();
    }
}

// Each type's (traits, RG, PG, PD) as above: RG and PG where it is the gate|up type, PD where it
// is the down's.
#define ZR_MOEFFN_q4_k ZrMvQ4K, 2, 3, 8
#define ZR_MOEFFN_q5_k ZrMvQ5K, 2, 3, 8
#define ZR_MOEFFN_q6_k ZrMvQ6K, 2, 3, 7
#define ZR_MOEFFN_q8_0 ZrMvQ8_0, 2, 4, 8

#define ZR_MOE_FFN_(G, D, TG, RG, PG, PDG, TD, RGD, PGD, PD)                                                  \
    ZR_KERNEL void __launch_bounds__(ZR_MOE_FFN_THREADS, 2) moe_ffn_##G##_##D(                                     \
        const uint8_t *__restrict__ wr, const uint8_t *__restrict__ wsr, int n_expert, int split_r, float *x,      \
        const float *__restrict__ norm_w, float eps, int n_in, float *logits, int *ids, float *weights,            \
        const uint8_t *__restrict__ wg, const uint8_t *__restrict__ wsg, int n_ff, int n_total_g, float *ff,       \
        const uint8_t *__restrict__ wd, const uint8_t *__restrict__ wsd, int n_total_d, int n_used, unsigned *bar) { \
        zr_moe_ffn<TG, RG, PG, TD, PD>(wr, wsr, n_expert, split_r, x, norm_w, eps, n_in, logits, ids, weights, wg, wsg, n_ff, \
                               n_total_g, ff, wd, wsd, n_total_d, n_used, bar);                                    \
    }
#define ZR_MOE_FFN_X(G, D, ...) ZR_MOE_FFN_(G, D, __VA_ARGS__)
#define ZR_MOE_FFN(G, D) ZR_MOE_FFN_X(G, D, ZR_MOEFFN_##G, ZR_MOEFFN_##D)

// every pair of cu/kernels.def, its parameters checked against its line there
#define ZR_KMOE(g, d, params) \
    ZR_MOE_FFN(g, d)          \
    ZR_KCHECK(moe_ffn_##g##_##d, params);
#include "kernels.def"
