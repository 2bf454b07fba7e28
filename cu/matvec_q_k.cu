// Decode matrix-vector products for the 256-element super-block K-quants (Q2_K .. Q6_K).
// (rows per warp R, pipeline stages P, register cap): the host mirrors R in forward.c
// (zr_cuf_mv_rows_per_warp). Q4_K / Q6_K: R=2 P=2 at 64 registers (61 / 63 used, no spills;
// 32 warps per SM as Q4_0's), measured in cu/PERF.md (kquant).
#include "matvec.cuh"

ZR_MATVEC(matvec_q2_k, ZrMvQ23K<ZR_T_Q2_K>, 2, 2, 128)
ZR_MATVEC(matvec_q3_k, ZrMvQ23K<ZR_T_Q3_K>, 2, 2, 128)
ZR_MATVEC(matvec_q4_k, ZrMvQ4KF, 2, 2, 64)  // the xf arithmetic: H100 8B Q4_K_M 327.0 -> 337.4 t/s
ZR_MATVEC(matvec_q5_k, ZrMvQ5K, 2, 2, 128)
ZR_MATVEC(matvec_q6_k, ZrMvQ6K, 2, 2, 64)

// Other shapes of the Q4_K / Q6_K kernels, named mvx_TYPE_rRpP: not used by the forward pass;
// tools/mv_bench.c (-t q4_k,q6_k) times them against the production kernels and test_kernels
// checks them. Two steps in flight per lane at 24 warps per SM with blocks of 256 (80 registers;
// since the L2 prefetch mode q4_k spills 4 bytes at 72, q6_k 4 bytes at 80).
ZR_MATVEC(mvx_q4_k_r2p3, ZrMvQ4K, 2, 3, 80)
ZR_MATVEC(mvx_q6_k_r2p3, ZrMvQ6K, 2, 3, 80)

// Q4_K with the x sums of every 16 values staged once per block (ZrMvQ4KX): the candidate for
// matvec_q4_k once zrun-mv-bench -t q4_k has timed it against the production kernel.
ZR_MATVEC(mvx_q4_k_xs, ZrMvQ4KX, 2, 2, 64)
ZR_MATVEC(mvx_q4_k_xs_p3, ZrMvQ4KX, 2, 3, 80)
// ... and with each nibble read as 1 + q/16 (ZrMvQ4KF: PRMT + FFMA per weight, no FADD)
ZR_MATVEC(mvx_q4_k_plain, ZrMvQ4K, 2, 2, 64)  // the kernel before: x sums added per item
// ... and with the side data of an item in one load per row (ZrMvQ4KFS: lane pairs swap words);
// at P=3 it spills 4 bytes at 72 registers, none at 80
ZR_MATVEC(mvx_q4_k_xfs, ZrMvQ4KFS, 2, 2, 64)
ZR_MATVEC(mvx_q4_k_xfs_p3, ZrMvQ4KFS, 2, 3, 80)
