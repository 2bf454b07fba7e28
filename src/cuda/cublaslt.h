/* cuBLASLt, opened at run time like libcuda (dlopen libcublasLt.so.13, then .12): only what
 * one GEMM needs. Used for prefill (M > 1) only: its kernels bypass the launcher, so it must
 * never run inside the recorded decode step. */
#pragma once
#include <stdint.h>

#include "cuda/cuda_abi.h"
#include "err.h"

typedef struct ZrCublasLt {
    void *lib;
    cublasLtHandle_t handle;
    size_t version; /* cublasLtGetVersion(), e.g. 130000 */
    PFN_cublasLtCreate create;
    PFN_cublasLtDestroy destroy;
    PFN_cublasLtGetStatusName status_name; /* may be NULL */
    PFN_cublasLtGetVersion get_version;
    PFN_cublasLtMatmulDescCreate desc_create;
    PFN_cublasLtMatmulDescDestroy desc_destroy;
    PFN_cublasLtMatmulDescSetAttribute desc_set;
    PFN_cublasLtMatrixLayoutCreate layout_create;
    PFN_cublasLtMatrixLayoutDestroy layout_destroy;
    PFN_cublasLtMatmulPreferenceCreate pref_create;
    PFN_cublasLtMatmulPreferenceDestroy pref_destroy;
    PFN_cublasLtMatmulPreferenceSetAttribute pref_set;
    PFN_cublasLtMatmulAlgoGetHeuristic heuristic;
    PFN_cublasLtMatmul matmul;
} ZrCublasLt;

/* Opens the library and creates a handle (needs a current CUDA context: cuBLASLt uses the
 * primary context, which ZrCuda makes current). ZR_E_NODEV when the library is missing. */
int zr_cublaslt_open(ZrCublasLt *lt, ZrError *err);
void zr_cublaslt_close(ZrCublasLt *lt);

/* D = alpha * op(A) * op(B) + beta * C with C == D, column-major as cuBLAS counts:
 * op(A) is m x k, op(B) is k x n, D is m x n with leading dimension ldd. A row-major weight W
 * [n_out, n_in] times row-major activations X [n_tok, n_in] giving Y [n_tok, n_out] is
 * m = n_out, n = n_tok, k = n_in, A = W with trans_a = 1 (lda = n_in), B = X with trans_b = 0
 * (ldb = n_in), D = Y (ldd = n_out). Types: CUDA_R_16F, CUDA_R_16BF or CUDA_R_32F; compute in
 * F32. Workspace: a device buffer the caller allocated once (32 MiB is plenty). */
typedef struct ZrGemm {
    int trans_a, trans_b;
    uint64_t m, n, k;
    CUdeviceptr a; int type_a; int64_t lda;
    CUdeviceptr b; int type_b; int64_t ldb;
    CUdeviceptr d; int type_d; int64_t ldd;
    float alpha, beta;
    CUdeviceptr workspace; size_t workspace_bytes;
} ZrGemm;
int zr_cublaslt_gemm(const ZrCublasLt *lt, CUstream stream, const ZrGemm *g, ZrError *err);
