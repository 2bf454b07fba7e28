// Other shapes of the F16 / Q8_0 matrix-vector kernels (rows per warp, pipeline stages, register
// cap), named mvx_TYPE_rRpP: not used by the forward pass; tools/mv_bench.c times them against
// the production kernels (cu/PERF.md run 3: F16 R=4 P=3 is 3-5% faster on the largest 8B
// matrices, slower on the small ones) and test_kernels checks them.
#include "matvec.cuh"

ZR_MATVEC(mvx_f16_r4p3, ZrMvF16, 4, 3, 128)
ZR_MATVEC(mvx_f16_r4p2, ZrMvF16, 4, 2, 80)
ZR_MATVEC(mvx_q8_0_r4p3, ZrMvQ8_0, 4, 3, 128)
ZR_MATVEC(mvx_q8_0_r2p3, ZrMvQ8_0, 2, 3, 80)
