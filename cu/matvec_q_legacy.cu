// Decode matrix-vector products for the 32-element block types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1).
// Rows per warp (the host mirrors them in forward.c): Q8_0/Q4_0/Q4_1 4, Q5_0/Q5_1 2 (registers).
#include "matvec.cuh"

ZR_MATVEC(matvec_q8_0, ZrMvQ8_0, 4)
ZR_MATVEC(matvec_q4_0, ZrMvQ4x<ZR_T_Q4_0>, 4)
ZR_MATVEC(matvec_q4_1, ZrMvQ4x<ZR_T_Q4_1>, 4)
ZR_MATVEC(matvec_q5_0, ZrMvQ4x<ZR_T_Q5_0>, 2)
ZR_MATVEC(matvec_q5_1, ZrMvQ4x<ZR_T_Q5_1>, 2)
