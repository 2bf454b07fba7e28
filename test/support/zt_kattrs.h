/* The block limits and registers the driver reports for the decode products' kernels on sm_90
 * (ptxas of cu/matvec_*.cu and cu/moe_matvec.cu), for the shape tests that run without a GPU:
 * zt_kernel_attrs fills them into a ZrCuKernels of no loaded kernels. test_kernels checks on the GPU
 * that the loaded kernels give every shape rule the same answers (zr_cuf_kernel_max_threads and
 * zr_cuf_kernel_blocks_per_sm). */
#pragma once
#include "cuda/kreg.h"

void zt_kernel_attrs(ZrCuKernels *k);

/* A ZrCuKernels of no loaded kernels as sm_90 has them for a GPU of sm_count multiprocessors: the
 * dense products of every computed type (has_mv, has_mvt, and has_mvt_rn where cu/kernels.def's
 * ZR_KTYPES_TALL_RN says) with zt_kernel_attrs's registers and block limits. */
ZrCuKernels zt_kernels(int sm_count);
