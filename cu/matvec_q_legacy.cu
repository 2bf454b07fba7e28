// Decode matrix-vector products for the 32-element block types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1).
// (rows per warp R, pipeline stages P, register cap): the host mirrors R in mv_shape.c
// (zr_cuf_mv_rows_per_warp). R=2, P=2 at 64 registers: 4 blocks of 256 threads per SM (cu/PERF.md,
// run 3). All five on integer dot products (Q8_0 since session 27, the others since session 29).
// At 64 registers the tall products spill a little (ptxas sm_90: q4_0 4 bytes, q4_1 28, q5_0 68,
// q5_1 84; the float products held Q5_0 at 80 and Q5_1 at 128, one block of 512 an SM): two blocks
// an SM and the balanced gate|up won more than the spills cost (H200 tg128, cu/PERF.md session 29:
// Llama-3-8B Q5_0 398.6 -> 440.6 t/s without the balanced product, 466.7 with it).
// Q8_0 and Q4_1 have a tall product built for RMSNORM input alone (ZR_MATVEC_RN: q8_0 61 registers,
// q4_1 28 -> 16 bytes spilled; H200 tg128, cu/PERF.md session 44: Llama-3.2-1B Q8_0 +1.4%,
// Llama-3-8B Q8_0 0.0%, Q4_1 +0.4%); Q5_0's and Q5_1's spilled more (68 -> 76, 84 -> 92 bytes) and
// lost 0.3% and 0.2% on Llama-3-8B. Q4_0's (4 bytes, as before) serves its gate|up products alone
// (cu/kernels.def ZR_KTYPES_TALL_RN_GLU): H200 tg128, cu/PERF.md session 45, Llama-3.2-1B Q4_0
// +1.3%, Llama-3.2-3B +0.7%; on Llama-3-8B's vocabulary output it had lost 0.17% (session 44).
#include "matvec.cuh"

ZR_MATVEC_RN(matvec_q8_0, ZrMvQ8i, 2, 2, 64)
ZR_MATVEC_RN(matvec_q4_0, ZrMvQ4xi<ZR_T_Q4_0>, 2, 2, 64)
ZR_MATVEC_RN(matvec_q4_1, ZrMvQ4xi<ZR_T_Q4_1>, 2, 2, 64)
ZR_MATVEC(matvec_q5_0, ZrMvQ4xi<ZR_T_Q5_0>, 2, 2, 64)
ZR_MATVEC(matvec_q5_1, ZrMvQ4xi<ZR_T_Q5_1>, 2, 2, 64)
