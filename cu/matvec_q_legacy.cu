// Decode matrix-vector products for the 32-element block types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1).
// (rows per warp R, pipeline stages P, register cap): the host mirrors R in forward.c
// (zr_cuf_mv_rows_per_warp). Q8_0/Q4_0 use ~120 registers: 2 blocks of 256 threads per SM, each
// lane with 2 steps of R 16-byte loads in flight while it computes a third.
#include "matvec.cuh"

ZR_MATVEC(matvec_q8_0, ZrMvQ8_0, 4, 3, 128)
ZR_MATVEC(matvec_q4_0, ZrMvQ4x<ZR_T_Q4_0>, 4, 3, 128)
ZR_MATVEC(matvec_q4_1, ZrMvQ4x<ZR_T_Q4_1>, 4, 2, 96)
ZR_MATVEC(matvec_q5_0, ZrMvQ4x<ZR_T_Q5_0>, 2, 2, 128)
ZR_MATVEC(matvec_q5_1, ZrMvQ4x<ZR_T_Q5_1>, 2, 2, 128)
