/* cuBLASLt, opened at run time like libcuda (dlopen libcublasLt.so.13, then .12): only what
 * one GEMM needs. Used for prefill (M > 1) only: its kernels bypass the launcher, so it must
 * never run inside the recorded decode step. */
#pragma once
#include <stdint.h>

#include "cuda/cuda_abi.h"
#include "err.h"

/* What a GEMM's algorithm is chosen from (ZrGemm without its pointers and scalars): the
 * heuristic sees nothing else, so one choice per shape is the choice every call would make. */
typedef struct ZrLtShape {
    int64_t trans_a, trans_b, m, n, k, type_a, lda, type_b, ldb, type_d, ldd, workspace_bytes;
    int64_t batch, stride_a, stride_b, stride_d;
} ZrLtShape;

/* A shape's descriptors and algorithm, made at its first GEMM and kept until close. */
typedef struct ZrLtPlan {
    ZrLtShape shape;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;
} ZrLtPlan;

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
    PFN_cublasLtMatrixLayoutSetAttribute layout_set; /* may be NULL: no batched GEMMs */
    PFN_cublasLtMatmulPreferenceCreate pref_create;
    PFN_cublasLtMatmulPreferenceDestroy pref_destroy;
    PFN_cublasLtMatmulPreferenceSetAttribute pref_set;
    PFN_cublasLtMatmulAlgoGetHeuristic heuristic;
    PFN_cublasLtMatmul matmul;
    ZrLtPlan *plans;   /* [n_plans]: one per shape seen (a model's prefill has a handful per prompt length) */
    int n_plans, cap_plans;
    double plan_ms;    /* host time spent making them (the heuristic's first call initializes it) */
    struct ZrLtOpener *opener; /* zr_cublaslt_open_start's thread until zr_cublaslt_open_wait, else NULL */
} ZrCublasLt;

/* Opens the library and creates a handle (needs a current CUDA context: cuBLASLt uses the
 * primary context, which ZrCuda makes current). ZR_E_NODEV when the library is missing. */
int zr_cublaslt_open(ZrCublasLt *lt, ZrError *err);
/* The same, on a thread of its own while the caller goes on (the upload: loading the library
 * and creating the handle take a while and need no weights), in the context ctx of drv (a
 * const ZrCuDriver *). zr_cublaslt_open_wait joins it and returns zr_cublaslt_open's result;
 * until then lt must not be used (zr_cublaslt_close joins it too). ZR_E_NOMEM when no thread
 * can be started. */
int zr_cublaslt_open_start(ZrCublasLt *lt, const void *drv, CUcontext ctx, ZrError *err);
int zr_cublaslt_open_wait(ZrCublasLt *lt, ZrError *err);
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
    /* batch > 1: that many GEMMs of this shape, matrix i at a + i stride_a, b + i stride_b,
     * d + i stride_d (strides in elements); 0 or 1: one */
    int batch; int64_t stride_a, stride_b, stride_d;
} ZrGemm;
/* The first GEMM of a shape creates its descriptors and asks the heuristic once (ZrLtPlan); later
 * ones of that shape reuse them, so a prompt pays no host set-up per GEMM. */
int zr_cublaslt_gemm(ZrCublasLt *lt, CUstream stream, const ZrGemm *g, ZrError *err);
