// Decode matrix-vector products for the 256-element super-block K-quants (Q2_K .. Q6_K).
// Rows per warp (the host mirrors them in forward.c): Q4_K 4, the others 2 (registers).
#include "matvec.cuh"

ZR_MATVEC(matvec_q2_k, ZrMvQ23K<ZR_T_Q2_K>, 2)
ZR_MATVEC(matvec_q3_k, ZrMvQ23K<ZR_T_Q3_K>, 2)
ZR_MATVEC(matvec_q4_k, ZrMvQ45K<ZR_T_Q4_K>, 4)
ZR_MATVEC(matvec_q5_k, ZrMvQ45K<ZR_T_Q5_K>, 2)
ZR_MATVEC(matvec_q6_k, ZrMvQ6K, 2)
