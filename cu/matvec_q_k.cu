// Decode matrix-vector products for the 256-element super-block K-quants (Q2_K .. Q6_K).
// (rows per warp R, pipeline stages P, register cap): the host mirrors R in mv_shape.c
// (zr_cuf_mv_rows_per_warp). Q4_K / Q6_K: R=2 P=2 at 64 registers (61 / 63 used, no spills;
// 32 warps per SM as Q4_0's), measured in cu/PERF.md (kquant); Q2_K / Q3_K / Q5_K the same since
// their repacked layouts (cu/PERF.md session 5; they ran at 128 before).
#include "matvec.cuh"

ZR_MATVEC(matvec_q2_k, ZrMvQ2Ki, 2, 2, 64)  // integer dot products (session 31); _tall spills 12 B
ZR_MATVEC(matvec_q3_k, ZrMvQ23K<ZR_T_Q3_K>, 2, 2, 64)  // 64 registers, no spills (_tall: 4 B)
ZR_MATVEC(matvec_q4_k, ZrMvQ4Ki, 2, 2, 64)  // integer dot products (session 14); _tall spills 12 B
ZR_MATVEC(matvec_q5_k, ZrMvQ5Ki, 2, 2, 64)  // integer dot products (session 29); _tall spills 12 B
ZR_MATVEC(matvec_q6_k, ZrMvQ6K, 2, 2, 64)
