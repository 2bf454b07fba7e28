// Decode matrix-vector products for the 32-element block types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1).
// Four rows per warp: four 16-byte weight loads per lane in flight, x reused four times.
#include "matvec.cuh"

#define ZR_MATVEC(NAME, TRAITS, R)                                                                 \
    ZR_KERNEL void __launch_bounds__(ZR_MV_THREADS)                                                \
        NAME(const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws, const float *__restrict__ x, \
             float *y, const float *add, int n_in, int n_out) {                                    \
        zr_matvec<TRAITS, R>(w, ws, x, y, add, n_in, n_out);                                       \
    }

ZR_MATVEC(matvec_q8_0, ZrMvQ8_0, 4)
ZR_MATVEC(matvec_q4_0, ZrMvQ4x<ZR_T_Q4_0>, 4)
ZR_MATVEC(matvec_q4_1, ZrMvQ4x<ZR_T_Q4_1>, 4)
ZR_MATVEC(matvec_q5_0, ZrMvQ4x<ZR_T_Q5_0>, 4)
ZR_MATVEC(matvec_q5_1, ZrMvQ4x<ZR_T_Q5_1>, 4)
