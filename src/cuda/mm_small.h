/* The prefill's product for a few rows (issue 19): Y[t][o] = sum_k W[o][k] X[t][k] (+ beta Y)
 * for t < n <= ZR_CUF_MM_COLS, reading each weight byte once for all n rows (cu/matmul_small.cu)
 * instead of dequantizing W to F16 for a cuBLASLt GEMM (~3x the weights' bytes plus the GEMM).
 * Its launch shape is chosen here, on the host, from the device's multiprocessors. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "cuda/kreg.h"
#include "cuda/launch.h"
#include "cuda/weights.h"

/* Rows of X at most (cu/matmul_small.cu ZR_MM_COLS). Why 8: per matrix the F16 path moves
 * the quantized bytes + 2 B per weight written + 2 B read by the GEMM (Q4_K: 0.56 B + 4 B, ~8x),
 * the small product the quantized bytes once plus n staged rows of x per block from L2; but its
 * FMAs and shared-memory reads grow with n (and, for types without T::comp_n, the item's
 * decoding: T::comp per row), and its accumulators (n x 2 per lane) with it: at 8 the comp_n
 * copies fit 128 registers with at most a few spilled words (q5_1's 40 B at n = 8 the most, the
 * K-quants' 8 B at n = 8; cu/PERF.md ttft6). Measured before comp_n (H100, all-Q6_K 8B): n 1 3.6 ms per prefill, n 5 10.6,
 * n 8 15.5 (tools/mm_bench.c times every n against every split). */
#define ZR_CUF_MM_COLS 8
/* Chunk granularity in values (cu/matmul_small.cu ZR_MM_UNIT): a multiple of every type's
 * 32 items per warp and of the 256-value super-block, so no item crosses a chunk. */
#define ZR_CUF_MM_UNIT 2048
/* Warps per block (cu/matmul_small.cu: at most ZR_MM_MAX_WARPS). */
#define ZR_CUF_MM_WARPS 8
/* Shared memory a block may stage x in before the chunks get smaller: 3-4 blocks per
 * multiprocessor on an H100 (227 KiB). */
#define ZR_CUF_MM_SMEM_BUDGET (56 * 1024)

/* A launch: blocks of `groups` row groups (2 rows each), each row split over `split` warps
 * along its values; x staged `chunk` values at a time (a multiple of ZR_CUF_MM_UNIT). */
typedef struct ZrMmShape {
    int groups, split, chunk;
} ZrMmShape;

/* The shape for a matrix of n_out rows of n_in values (item: values per 16-byte item of its
 * type, zr_type_info()->item) times n rows of x on sm_count multiprocessors. */
ZrMmShape zr_cuf_mm_shape(int sm_count, int n_in, int n_out, int item, int n);
/* Dynamic shared memory of that launch: n staged rows of `chunk` values, padded (cu/matvec.cuh
 * zr_xpad: 4 floats after every 32). */
size_t zr_cuf_mm_smem(ZrMmShape s, int n);
/* The most any shape asks for (the kernels' shared memory limit is raised to it at load). */
size_t zr_cuf_mm_smem_max(void);
/* The shared memory the small products may take on a GPU that lets a block opt in to
 * max_smem_optin bytes: zr_cuf_mm_smem_max() where it fits, else the default 47 KiB (the
 * kernels' limit, cuda/kreg.c; ZrCuKernels.mm_smem). */
size_t zr_cuf_mm_smem_limit(int max_smem_optin);
/* True when the prefill computes a matrix of `type` (n_out rows of n_in values) times n rows
 * with the small product on sm_count multiprocessors whose launches may take smem_limit bytes:
 * n <= ZR_CUF_MM_COLS, the type quantized or BF16 (F32 and F16 weights are cuBLASLt's operands
 * as they are: read once) and the launch's shared memory within the limit. Needs no kernels:
 * the warm-up (cuda/warm.c) asks it before they load. */
bool zr_cuf_mm_fits(int sm_count, size_t smem_limit, uint32_t type, int n_in, int n_out, int n);
/* zr_cuf_mm_fits for W on k's GPU, where k has the type's kernel. */
bool zr_cuf_mm_takes(const ZrCuKernels *k, const ZrCuWeight *w, int n);
/* Y[n][ldy] (+ beta Y) = X[n][ldx] W^T, x F32 (16-byte aligned rows for the fast staging); one
 * row with beta 0 or 1 is the decode's matrix-vector product (zr_cuf_matvec). */
int zr_cuf_mm_small(ZrLauncher *l, const ZrCuKernels *k, const ZrCuWeight *w, CUdeviceptr x, int ldx, CUdeviceptr y,
                    int ldy, float beta, int n, ZrError *err);
