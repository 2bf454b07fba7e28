// Decode matrix-vector products for float weights (F32, F16, BF16): y = W x (+ add).
// (rows per warp R, pipeline stages P, register cap): the host mirrors R in forward.c
// (zr_cuf_mv_rows_per_warp); F16/BF16 at 80 registers fit 3 blocks of 256 threads per SM.
#include "matvec.cuh"

ZR_MATVEC(matvec_f32, ZrMvF32, 2, 2, 128)
ZR_MATVEC(matvec_f16, ZrMvF16, 4, 2, 80)
ZR_MATVEC(matvec_bf16, ZrMvBF16, 4, 2, 80)
