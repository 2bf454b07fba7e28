// Other shapes of the F16 / Q8_0 / Q4_0 matrix-vector kernels (rows per warp, pipeline stages,
// register cap), named mvx_TYPE_rRpP (q4_0s: the subtraction-free Q4_0 dot, ZrMvQ4_0s): not used
// by the forward pass; tools/mv_bench.c times them against the production kernels (cu/PERF.md
// records which won) and test_kernels checks them.
#include "matvec.cuh"

ZR_MATVEC(mvx_f16_r2p3, ZrMvF16, 2, 3, 80)
ZR_MATVEC(mvx_f16_r4p3, ZrMvF16, 4, 3, 128)
ZR_MATVEC(mvx_f16_r2p2, ZrMvF16, 2, 2, 64)
ZR_MATVEC(mvx_q8_0_r2p3, ZrMvQ8_0, 2, 3, 80)
ZR_MATVEC(mvx_q8_0_r4p2, ZrMvQ8_0, 4, 2, 96)
ZR_MATVEC(mvx_q8_0_r2p2, ZrMvQ8_0, 2, 2, 64)
ZR_MATVEC(mvx_q4_0_r2p3, ZrMvQ4x<ZR_T_Q4_0>, 2, 3, 80)
ZR_MATVEC(mvx_q4_0_r4p2, ZrMvQ4x<ZR_T_Q4_0>, 4, 2, 96)
ZR_MATVEC(mvx_q4_0_r2p2, ZrMvQ4x<ZR_T_Q4_0>, 2, 2, 64)
ZR_MATVEC(mvx_q4_0s_r4p3, ZrMvQ4_0s, 4, 3, 128)
ZR_MATVEC(mvx_q4_0s_r2p3, ZrMvQ4_0s, 2, 3, 80)
