// Decode matrix-vector products for the 256-element super-block K-quants (Q2_K .. Q6_K).
#include "matvec.cuh"

#define ZR_MATVEC(NAME, TRAITS, R)                                                                 \
    ZR_KERNEL void __launch_bounds__(ZR_MV_THREADS)                                                \
        NAME(const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws, const float *__restrict__ x, \
             float *y, const float *add, int n_in, int n_out) {                                    \
        zr_matvec<TRAITS, R>(w, ws, x, y, add, n_in, n_out);                                       \
    }

ZR_MATVEC(matvec_q2_k, ZrMvQ23K<ZR_T_Q2_K>, 4)
ZR_MATVEC(matvec_q3_k, ZrMvQ23K<ZR_T_Q3_K>, 4)
ZR_MATVEC(matvec_q4_k, ZrMvQ45K<ZR_T_Q4_K>, 4)
ZR_MATVEC(matvec_q5_k, ZrMvQ45K<ZR_T_Q5_K>, 4)
ZR_MATVEC(matvec_q6_k, ZrMvQ6K, 2)
