// Decode matrix-vector products for float weights (F32, F16, BF16): y = W x (+ add).
// Rows per warp (the host mirrors them in forward.c): F32 2, F16/BF16 4.
#include "matvec.cuh"

ZR_MATVEC(matvec_f32, ZrMvF32, 2)
ZR_MATVEC(matvec_f16, ZrMvF16, 4)
ZR_MATVEC(matvec_bf16, ZrMvBF16, 4)
