// Decode matrix-vector products for the 32-element block types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1).
// (rows per warp R, pipeline stages P, register cap): the host mirrors R in mv_shape.c
// (zr_cuf_mv_rows_per_warp). R=2, P=2 at 64 registers where it fits without spilling: 4 blocks
// of 256 threads per SM (cu/PERF.md, run 3).
#include "matvec.cuh"

ZR_MATVEC(matvec_q8_0, ZrMvQ8i, 2, 2, 64) // integer dot products (session 27)
ZR_MATVEC(matvec_q4_0, ZrMvQ4x<ZR_T_Q4_0>, 2, 2, 64)
ZR_MATVEC(matvec_q4_1, ZrMvQ4x<ZR_T_Q4_1>, 2, 2, 64)
ZR_MATVEC(matvec_q5_0, ZrMvQ4x<ZR_T_Q5_0>, 2, 2, 80)
ZR_MATVEC(matvec_q5_1, ZrMvQ4x<ZR_T_Q5_1>, 2, 2, 128)
