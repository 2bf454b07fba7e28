// Other shapes of the F16 / Q8_0 / Q4_0 matrix-vector kernels (rows per warp, pipeline stages,
// register cap), named mvx_TYPE_rRpP (mvx_q4_0p: the plain Q4_0 dot with one subtraction per
// weight, ZrMvQ4x): not used by the forward pass; tools/mv_bench.c times them against the
// production kernels (cu/PERF.md records the figures) and test_kernels checks them.
#include "matvec.cuh"

ZR_MATVEC(mvx_f16_r4p3, ZrMvF16, 4, 3, 128)
ZR_MATVEC(mvx_f16_r4p2, ZrMvF16, 4, 2, 80)
ZR_MATVEC(mvx_q8_0_r4p3, ZrMvQ8_0, 4, 3, 128)
ZR_MATVEC(mvx_q8_0_r2p3, ZrMvQ8_0, 2, 3, 80)
ZR_MATVEC(mvx_q4_0p_r2p2, ZrMvQ4x<ZR_T_Q4_0>, 2, 2, 64)
ZR_MATVEC(mvx_q4_0_r4p3, ZrMvQ4_0s, 4, 3, 128)
