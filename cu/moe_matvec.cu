// The experts' decode matrix-vector products (issue 15): cu/matvec.cuh's product over the rows
// of the experts the router chose, which it reads from device memory, so the launch (and the
// recorded decode graph) is the same for every token.
//
// W is one expert tensor uploaded as a stacked matrix of n_total rows: expert e's matrix is rows
// [e n_rows, (e + 1) n_rows) (with GLU: its n_rows/2 gate rows, then its n_rows/2 up rows). Block
// row (blockIdx.y = slot j < n_used = gridDim.y) computes expert ids[j]'s rows on x + j x_stride
// into y + j y_stride; everything else (modes, split-K, launch shape, shared memory) is
// zr_matvec's: grid (row-group blocks of one expert, n_used). ids are read after the grid
// wait, so no weight load is issued before the router has written them; an id outside
// 0..n_total/n_rows-1 is clamped (never read out of bounds).
//
// Two fusions take the routing and the mix out of launches of their own (a decode MoE FFN is
// three launches: router matvec, gate|up, down):
//  - logits != NULL (the gate|up launch): every block routes for itself (cu/moe_topk.cuh, warp
//    0, n_used <= 32, n_expert <= 256) from the router's logits [n_expert] instead of reading ids, and block
//    (0, 0) writes the ids and weights [n_used] for the down launch. The routing costs each block
//    a few hundred cycles after the logits' load, less than a launch between two kernels.
//  - mix_x != NULL (the down launch, no GLU): the blocks of one row group (one per slot) count
//    themselves in done[blockIdx.x] (an atomic add after a fence), and the last of them adds
//    sum_j weights[j] y[j][row] (slots in order, each product rounded before its add, as
//    moe_combine_f32) into mix_x[row] and sets the count back to 0 for the next launch: the same
//    bits as the separate combine, whichever block comes last.
#include "moe_topk.cuh"
#include "matvec.cuh"

// The chosen expert's first row and the stacked matrix's row count, for ZrMvExpert::row (set by
// thread 0 of each block before zr_matvec, which computes its rows after a barrier).
__shared__ int zr_moe_row0, zr_moe_rows;

// A per-type item (cu/matvec.cuh) seen through the expert's row range of the stacked matrix: the
// side streams of the legacy quants are laid out by the stacked matrix's row count, so rows are
// found through the whole matrix rather than through pointers moved to the expert.
template <class T> struct ZrMvExpert {
    static constexpr int EPI = T::EPI;
    using Row = typename T::Row;
    using F = typename T::F;
    __device__ static Row row(const uint8_t *w, const uint8_t *ws, int n_in, int, int r) {
        return T::row(w, ws, n_in, zr_moe_rows, zr_moe_row0 + r);
    }
    __device__ static void load(const Row &rw, int it, F &f) { T::load(rw, it, f); }
    template <int R> __device__ static void comp(const F (&f)[R], int it, const float *xs, float (&acc)[R]) {
        T::template comp<R>(f, it, xs, acc);
    }
    __device__ static float elem(const Row &rw, int e) { return T::elem(rw, e); }
};
template <class T> struct ZrMvXsum<ZrMvExpert<T>> {
    static constexpr bool value = ZrMvXsum<T>::value;
};
template <class T> struct ZrMvXq<ZrMvExpert<T>> {
    static constexpr int value = ZrMvXq<T>::value;
};

template <class T, int R, int P>
__device__ __forceinline__ void zr_matvec_id(const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws,
                                             const float *x, int x_stride, float *y, int y_stride,
                                             const float *__restrict__ norm_w, float eps, int n_in, int n_rows, int mode,
                                             int split, int *ids, int n_total, const float *logits, int n_expert_route,
                                             float *weights, float *mix_x, unsigned *done) {
    __shared__ int route_ids[32];
    __shared__ float route_w[32];
    __shared__ bool mix_last;
    zr_grid_enter();
    const int j = blockIdx.y, n_used = gridDim.y;
    if (logits) {
        if (threadIdx.x < 32) zr_moe_topk_256(logits, n_expert_route, n_used, route_ids, route_w);
        __syncthreads();
        if (blockIdx.x == 0 && j == 0 && threadIdx.x < n_used) {
            ids[threadIdx.x] = route_ids[threadIdx.x];
            weights[threadIdx.x] = route_w[threadIdx.x];
        }
    }
    if (threadIdx.x == 0) {
        const int n_expert = n_total / n_rows;
        int e = logits ? route_ids[j] : ids[j];
        e = e < 0 ? 0 : e >= n_expert ? n_expert - 1 : e;
        zr_moe_row0 = e * n_rows;
        zr_moe_rows = n_total;
    }
    __syncthreads();
    zr_matvec<ZrMvExpert<T>, R, P, false, false>(w, ws, x + (size_t)j * x_stride, y + (size_t)j * y_stride, nullptr,
                                                 norm_w, eps, n_in, n_rows, mode, split, nullptr, nullptr, nullptr);
    if (!mix_x) return;
    // this block's rows: zr_matvec's row groups blockIdx.x G .. + G of R rows each
    const int G = (blockDim.x >> 5) / split, row0 = blockIdx.x * G * R;
    __threadfence(); // this block's y before its count
    __syncthreads();
    if (threadIdx.x == 0) {
        mix_last = atomicAdd(done + blockIdx.x, 1u) == (unsigned)n_used - 1;
        if (mix_last) atomicExch(done + blockIdx.x, 0u);
    }
    __syncthreads();
    if (!mix_last) return;
    __threadfence(); // the other slots' y after their counts
    for (int r = row0 + threadIdx.x; r < row0 + G * R && r < n_rows; r += blockDim.x) {
        float acc = __fmul_rn(__ldcg(y + r), __ldcg(weights));
        for (int s = 1; s < n_used; s++) acc = __fadd_rn(acc, __fmul_rn(__ldcg(y + (size_t)s * y_stride + r), __ldcg(weights + s)));
        mix_x[r] += acc;
    }
}

// The flat gate|up launch (matvec_id_flat_<type>): the chosen experts' stacked gate|up rows seen
// as one matrix of n_used n_rows rows, whose results are slot j's n_rows/2 gated outputs one after
// the other (y's slots n_rows/2 apart), through zr_matvec's TALL loop: a grid of at most one wave,
// each block routing (or reading the ids) and staging x once for all of its tiles of (slot, row
// group), and requesting its next tile's items as soon as it has written the current one's. The
// 2-D launch above gives every (row group, slot) a block: Qwen3-30B-A3B's 96 x 8 = 768 blocks of
// 256 threads are ~1.5 waves at 32 warps an SM, and the second wave's blocks route and stage again
// before their first load. x is shared by every slot (the normed row). A row's arithmetic is the
// 2-D launch's (the same shape for one expert: zr_matvec's rows do not depend on the grid).
__shared__ int zr_moe_flat_row0[32]; // each slot's first row in the stacked matrix
__shared__ int zr_moe_flat_half, zr_moe_flat_res; // results per slot (n_rows/2), results in all

template <class T> struct ZrMvExpertFlat {
    static constexpr int EPI = T::EPI;
    using Row = typename T::Row;
    using F = typename T::F;
    // r < results: result r's gate row, else result r - results' up row; result r is row r % half
    // of slot r / half's expert
    __device__ static Row row(const uint8_t *w, const uint8_t *ws, int n_in, int, int r) {
        const int half = zr_moe_flat_half, n_res = zr_moe_flat_res, up = r >= n_res ? half : 0;
        if (up) r -= n_res;
        const int s = r / half;
        return T::row(w, ws, n_in, zr_moe_rows, zr_moe_flat_row0[s] + up + (r - s * half));
    }
    __device__ static void load(const Row &rw, int it, F &f) { T::load(rw, it, f); }
    template <int R> __device__ static void comp(const F (&f)[R], int it, const float *xs, float (&acc)[R]) {
        T::template comp<R>(f, it, xs, acc);
    }
    __device__ static float elem(const Row &rw, int e) { return T::elem(rw, e); }
};
template <class T> struct ZrMvXsum<ZrMvExpertFlat<T>> {
    static constexpr bool value = ZrMvXsum<T>::value;
};
template <class T> struct ZrMvXq<ZrMvExpertFlat<T>> {
    static constexpr int value = ZrMvXq<T>::value;
};

// mode: GLU (| RMSNORM / GELU); n_used <= 32; logits != NULL: route as matvec_id does (block 0
// writes the ids and weights).
template <class T, int R, int P>
__device__ __forceinline__ void zr_matvec_id_flat(const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws,
                                                  const float *x, float *y, const float *__restrict__ norm_w, float eps,
                                                  int n_in, int n_rows, int mode, int split, int *ids, int n_used,
                                                  int n_total, const float *logits, int n_expert_route, float *weights) {
    __shared__ int route_ids[32];
    __shared__ float route_w[32];
    zr_grid_enter();
    if (logits) {
        if (threadIdx.x < 32) zr_moe_topk_256(logits, n_expert_route, n_used, route_ids, route_w);
        __syncthreads();
        if (blockIdx.x == 0 && threadIdx.x < n_used) {
            ids[threadIdx.x] = route_ids[threadIdx.x];
            weights[threadIdx.x] = route_w[threadIdx.x];
        }
    }
    if (threadIdx.x < n_used) {
        const int n_expert = n_total / n_rows;
        int e = logits ? route_ids[threadIdx.x] : ids[threadIdx.x];
        e = e < 0 ? 0 : e >= n_expert ? n_expert - 1 : e;
        zr_moe_flat_row0[threadIdx.x] = e * n_rows;
    }
    if (threadIdx.x == 0) {
        zr_moe_rows = n_total;
        zr_moe_flat_half = n_rows / 2;
        zr_moe_flat_res = n_used * (n_rows / 2);
    }
    __syncthreads();
    zr_matvec<ZrMvExpertFlat<T>, R, P, true, false>(w, ws, x, y, nullptr, norm_w, eps, n_in, n_used * n_rows, mode, split,
                                                     nullptr, nullptr, nullptr);
}

// The same R, P and register cap as each type's matvec (cu/matvec_float.cu, matvec_q_legacy.cu,
// matvec_q_k.cu); NAME##_flat: FLAT_NREG, 72 where the TALL loop spilled at 64 (q4_1 12 bytes,
// q3_k 4, q5_k 8, q6_k 4, as their dense _tall kernels'; q4_k 16, q4_0 24 and q2_k 12 on integer
// dot products), so none of them spills; q3_k at 80, where 72 still spilled 4 (blocks of 256: 3 an
// SM at 72 and at 80). H200 tg128, Qwen3-30B-A3B (cu/PERF.md session 31): Q2_K mix +3.5%, Q6_K
// +4.8%, Q3_K_M +0.4%. The host sizes the flat grids by each kernel's registers as the driver
// reports them at load (src/cuda/mv_shape.c zr_cuf_mv_flat_blocks), so a cap may change without the
// host.
#define ZR_MATVEC_ID(NAME, TRAITS, R, P, NREG, FLAT_NREG)                                                        \
    ZR_KERNEL void __maxnreg__(NREG)                                                                             \
        NAME(const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws, const float *x, int x_stride, float *y, \
             int y_stride, const float *__restrict__ norm_w, float eps, int n_in, int n_rows, int mode, int split,  \
             int *ids, int n_total, const float *logits, int n_expert, float *weights, float *mix_x,             \
             unsigned *done) {                                                                                   \
        ZR_TL_EXIT;                                                                                              \
        zr_matvec_id<TRAITS, R, P>(w, ws, x, x_stride, y, y_stride, norm_w, eps, n_in, n_rows, mode, split, ids,  \
                                   n_total, logits, n_expert, weights, mix_x, done);                             \
    }                                                                                                            \
    ZR_KCHECK_FAMILY(mv_id, NAME);                                                                               \
    ZR_KERNEL void __maxnreg__(FLAT_NREG)                                                                        \
        NAME##_flat(const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws, const float *x, float *y,        \
                    const float *__restrict__ norm_w, float eps, int n_in, int n_rows, int mode, int split, int *ids, \
                    int n_used, int n_total, const float *logits, int n_expert, float *weights) {                  \
        ZR_TL_EXIT;                                                                                              \
        zr_matvec_id_flat<TRAITS, R, P>(w, ws, x, y, norm_w, eps, n_in, n_rows, mode, split, ids, n_used, n_total, \
                                        logits, n_expert, weights);                                              \
    }                                                                                                            \
    ZR_KCHECK_FAMILY(mv_idflat, NAME##_flat);

// Q8_0, the 32-value block types and Q4_K/Q5_K on the dense products' integer planes (ZrMvQ8i,
// ZrMvQ4xi, ZrMvQ4Ki, ZrMvQ5Ki: H200 tg128, Qwen3-30B-A3B Q8_0 +1.8%, Q4_0 +0.5%, Q5_K_M +3.7%,
// cu/PERF.md session 30); ptxas sm_90: q4_1 spills 8 bytes at 64 (the floats none); q4_0_flat
// spilled 24 at 64, none at 72 (Qwen3-30B-A3B Q4_0 +4.9% more). Q2_K's too since session 31
// (ZrMvQ2Ki: Qwen3-30B-A3B Q2_K mix +3.3%, +3.5% more with its flat kernel at 72).
ZR_MATVEC_ID(matvec_id_f32, ZrMvF32, 2, 2, 64, 64)
ZR_MATVEC_ID(matvec_id_f16, ZrMvF16, 2, 2, 64, 64)
ZR_MATVEC_ID(matvec_id_bf16, ZrMvBF16, 2, 2, 64, 64)
ZR_MATVEC_ID(matvec_id_q8_0, ZrMvQ8i, 2, 2, 64, 64)
ZR_MATVEC_ID(matvec_id_q4_0, ZrMvQ4xi<ZR_T_Q4_0>, 2, 2, 64, 72)
ZR_MATVEC_ID(matvec_id_q4_1, ZrMvQ4xi<ZR_T_Q4_1>, 2, 2, 64, 72)
ZR_MATVEC_ID(matvec_id_q5_0, ZrMvQ4xi<ZR_T_Q5_0>, 2, 2, 80, 80)
ZR_MATVEC_ID(matvec_id_q5_1, ZrMvQ4xi<ZR_T_Q5_1>, 2, 2, 128, 128)
ZR_MATVEC_ID(matvec_id_q2_k, ZrMvQ2Ki, 2, 2, 64, 72)
ZR_MATVEC_ID(matvec_id_q3_k, ZrMvQ23K<ZR_T_Q3_K>, 2, 2, 64, 80)
ZR_MATVEC_ID(matvec_id_q4_k, ZrMvQ4Ki, 2, 2, 64, 72)
ZR_MATVEC_ID(matvec_id_q5_k, ZrMvQ5Ki, 2, 2, 64, 72)
ZR_MATVEC_ID(matvec_id_q6_k, ZrMvQ6K, 2, 2, 64, 72)
