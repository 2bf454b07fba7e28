// Decode matrix-vector products for float weights (F32, F16, BF16): y = W x (+ add).
// Two rows per warp: one 16-byte weight load per row per lane in flight, x reused twice.
#include "matvec.cuh"

#define ZR_MATVEC(NAME, TRAITS, R)                                                                 \
    ZR_KERNEL void __launch_bounds__(ZR_MV_THREADS)                                                \
        NAME(const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws, const float *__restrict__ x, \
             float *y, const float *add, int n_in, int n_out) {                                    \
        zr_matvec<TRAITS, R>(w, ws, x, y, add, n_in, n_out);                                       \
    }

ZR_MATVEC(matvec_f32, ZrMvF32, 2)
ZR_MATVEC(matvec_f16, ZrMvF16, 2)
ZR_MATVEC(matvec_bf16, ZrMvBF16, 2)
