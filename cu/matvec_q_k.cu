// Decode matrix-vector products for the 256-element super-block K-quants (Q2_K .. Q6_K).
// (rows per warp R, pipeline stages P, register cap): the host mirrors R in mv_shape.c
// (zr_cuf_mv_rows_per_warp). Q4_K / Q6_K: R=2 P=2 at 64 registers (61 / 63 used, no spills;
// 32 warps per SM as Q4_0's), measured in cu/PERF.md (kquant); Q2_K / Q3_K / Q5_K the same since
// their repacked layouts (cu/PERF.md session 5; they ran at 128 before). Each with a tall product
// built for RMSNORM input alone (ZR_MATVEC_RN), spilling less than the one of every mode (ptxas
// sm_90, bytes: q2_K 12 -> 0, q3_K 8 -> 0, q4_K 8 -> 4, q5_K 12 -> 0, q6_K 12 -> 0); H200 tg128
// (cu/PERF.md session 44) Llama-3.2-1B Q4_K_M +1.0-1.3%, Llama-3-8B Q4_K_M +0.2-0.9%, Q3_K_M +0.9%,
// Q5_K_M +0.5%, a Llama-3.2-3B Q2_K file +0.07%, Gemma-3-12B Q4_K_M -0.05% (noise).
#include "matvec.cuh"

ZR_MATVEC_RN(matvec_q2_k, ZrMvQ2Ki, 2, 2, 64)  // integer dot products (session 31)
ZR_MATVEC_RN(matvec_q3_k, ZrMvQ23K<ZR_T_Q3_K>, 2, 2, 64)  // 64 registers, no spills (_tall: 8 B)
ZR_MATVEC_RN(matvec_q4_k, ZrMvQ4Ki, 2, 2, 64)  // integer dot products (session 14)
ZR_MATVEC_RN(matvec_q5_k, ZrMvQ5Ki, 2, 2, 64)  // integer dot products (session 29)
ZR_MATVEC_RN(matvec_q6_k, ZrMvQ6K, 2, 2, 64)
