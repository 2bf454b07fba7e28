/* The block limits and registers the driver reports for the decode products' kernels on sm_90
 * (ptxas of cu/matvec_*.cu and cu/moe_matvec.cu), for the shape tests that run without a GPU:
 * zt_kernel_attrs fills them into a ZrCuKernels of no loaded kernels. test_kernels checks on the GPU
 * that the loaded kernels give every shape rule the same answers (zr_cuf_kernel_max_threads and
 * zr_cuf_kernel_blocks_per_sm). */
#pragma once
#include "cuda/kreg.h"

void zt_kernel_attrs(ZrCuKernels *k);
