// Decode matrix-vector products for the 256-element super-block K-quants (Q2_K .. Q6_K).
// (rows per warp R, pipeline stages P, register cap): the host mirrors R in forward.c
// (zr_cuf_mv_rows_per_warp).
#include "matvec.cuh"

ZR_MATVEC(matvec_q2_k, ZrMvQ23K<ZR_T_Q2_K>, 2, 2, 128)
ZR_MATVEC(matvec_q3_k, ZrMvQ23K<ZR_T_Q3_K>, 2, 2, 128)
ZR_MATVEC(matvec_q4_k, ZrMvQ4K, 2, 2, 64)
ZR_MATVEC(matvec_q5_k, ZrMvQ5K, 2, 2, 128)
ZR_MATVEC(matvec_q6_k, ZrMvQ6K, 2, 2, 64)
