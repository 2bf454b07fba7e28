// One decode launch for the products of up to 3 matrices of two weight types that share x: a
// layer's Q/K/V where llama-quantize's mix gives V another type than Q and K (Q4_K_M: Q4_K q|k,
// Q6_K v in some layers), which the upload stacks as two matrices (src/cuda/upload.c) and which
// were two launches, each paying the ~3 us before its first weight arrives (cu/PERF.md).
//
// Launch (src/cuda/mv_shape.c zr_cuf_mv_mix_plan picks it, src/cuda/klaunch.c launches it): grid
// tiles_0 + tiles_1 + tiles_2 (every part's tiles, part 0's first), block 32*G_p*S_p threads for
// every part p (the same count); block b runs part p's tile b - (the tiles of the parts before
// p) with zr_matvec<T> of its part's type exactly as that part's own matvec_<type> launch would
// (same R, split S_p, items in the same order, and the same block size, which fixes the order of
// RMSNorm's sum of squares): the outputs equal the per-type launches bit for bit. Only block 0
// (part 0's tile 0) writes ADDNORM's x_out. The grid was (the largest part's tiles, parts)
// until session 38, the smaller parts' extra blocks returning at once; but those blocks took a
// block's place until then, and where the grid passed one wave of places (Gemma-3-4B's, 384
// blocks of 512 threads for 256 tiles) they were placed only as the first products finished,
// so the launch's last block released the attention after it only then (the timeline build: in
// those layers the attention's blocks now wait early, its wait returns ~1 us sooner). H200
// tg128: Llama-3-8B Q4_K_M +0.37%, the Gemma rows unchanged (cu/PERF.md, session 38).
#include "matvec.cuh"

// The (traits, rows per warp R, stages P, register cap) of each type, as its ZR_MATVEC line in
// cu/matvec_q_k.cu / cu/matvec_q_legacy.cu (R must be mv_shape.c's zr_cuf_mv_rows_per_warp: the
// GPU test holds every pair to the per-type kernels bit for bit, which catches a drift of R; a
// drift of P or the cap changes the speed only).
#define ZR_MVMIX_q8_0 ZrMvQ8i, 2, 2, 64
#define ZR_MVMIX_q5_0 ZrMvQ4xi<ZR_T_Q5_0>, 2, 2, 64
#define ZR_MVMIX_q5_1 ZrMvQ4xi<ZR_T_Q5_1>, 2, 2, 64
#define ZR_MVMIX_q2_k ZrMvQ2Ki, 2, 2, 64
#define ZR_MVMIX_q3_k ZrMvQ23K<ZR_T_Q3_K>, 2, 2, 64
#define ZR_MVMIX_q4_k ZrMvQ4Ki, 2, 2, 64
#define ZR_MVMIX_q5_k ZrMvQ5Ki, 2, 2, 64
#define ZR_MVMIX_q6_k ZrMvQ6K, 2, 2, 64

#define ZR_MVMIX_MAX(a, b) ((a) > (b) ? (a) : (b))

// part p's value of a parameter (block-uniform selects: an array indexed by p would live in
// local memory)
template <class V> __device__ __forceinline__ V zr_mvmix_sel(int p, V a, V b, V c) { return p == 0 ? a : p == 1 ? b : c; }

// The kernel: block b runs tile b - (the earlier parts' tiles) of the part p it falls in. The two
// types' bodies are branches on a block-uniform value; the kernel's registers are the larger
// body's (the cap is the larger of the two types' caps).
#define ZR_MATVEC_MIX_(A, B, TA, RA, PA, NA, TB, RB, PB, NB)                                                        \
    ZR_KERNEL void __maxnreg__(ZR_MVMIX_MAX(NA, NB)) matvec_mix_##A##_##B(                                          \
        const uint8_t *w0, const uint8_t *ws0, float *y0, const float *add0, int n_out0, int split0, int tiles0,    \
        const uint8_t *w1, const uint8_t *ws1, float *y1, const float *add1, int n_out1, int split1, int tiles1,    \
        const uint8_t *w2, const uint8_t *ws2, float *y2, const float *add2, int n_out2, int split2, int tiles2,    \
        const float *__restrict__ x, const float *__restrict__ norm_w, float eps, int n_in, int mode,               \
        const float *__restrict__ post_r, const float *__restrict__ post_w, float *x_out, int b_mask) {             \
        ZR_TL_EXIT;                                                                                                 \
        const int b = blockIdx.x, p = b < tiles0 ? 0 : b < tiles0 + tiles1 ? 1 : 2;                                 \
        const int tile = b - zr_mvmix_sel(p, 0, tiles0, tiles0 + tiles1);                                           \
        const uint8_t *w = zr_mvmix_sel(p, w0, w1, w2), *ws = zr_mvmix_sel(p, ws0, ws1, ws2);                       \
        float *y = zr_mvmix_sel(p, y0, y1, y2);                                                                     \
        const float *add = zr_mvmix_sel(p, add0, add1, add2);                                                       \
        const int n_out = zr_mvmix_sel(p, n_out0, n_out1, n_out2), split = zr_mvmix_sel(p, split0, split1, split2); \
        float *xo = p == 0 ? x_out : nullptr;                                                                       \
        constexpr bool AE = ZrMvAddFirst<TA>::value && ZrMvAddFirst<TB>::value; /* else spills: cu/matvec.cuh */  \
        if ((b_mask >> p) & 1)                                                                                      \
            zr_matvec<TB, RB, PB, false, true, AE>(w, ws, x, y, add, norm_w, eps, n_in, n_out, mode, split, post_r,   \
                                                   post_w, xo, tile);                                               \
        else                                                                                                        \
            zr_matvec<TA, RA, PA, false, true, AE>(w, ws, x, y, add, norm_w, eps, n_in, n_out, mode, split, post_r,   \
                                                   post_w, xo, tile);                                               \
    }
// expands each type's table entry into its four arguments
#define ZR_MATVEC_MIX_X(A, B, ...) ZR_MATVEC_MIX_(A, B, __VA_ARGS__)
#define ZR_MATVEC_MIX(A, B) ZR_MATVEC_MIX_X(A, B, ZR_MVMIX_##A, ZR_MVMIX_##B)

// every pair of cu/kernels.def, its parameters checked against its line there
#define ZR_KMIX(a, b, params) \
    ZR_MATVEC_MIX(a, b)       \
    ZR_KCHECK(matvec_mix_##a##_##b, params);
#include "kernels.def"
