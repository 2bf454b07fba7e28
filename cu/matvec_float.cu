// Decode matrix-vector products for float weights (F32, F16, BF16): y = W x (+ add).
// (rows per warp R, pipeline stages P, register cap): the host mirrors R in mv_shape.c
// (zr_cuf_mv_rows_per_warp). R=2, P=2 at 64 registers: 4 blocks of 256 threads per SM; more
// warps beat deeper register pipelines here (cu/PERF.md, run 3).
#include "matvec.cuh"

ZR_MATVEC(matvec_f32, ZrMvF32, 2, 2, 64)
ZR_MATVEC(matvec_f16, ZrMvF16, 2, 2, 64)
ZR_MATVEC(matvec_bf16, ZrMvBF16, 2, 2, 64)
