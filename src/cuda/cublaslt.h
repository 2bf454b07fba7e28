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

/* The algorithm of a GEMM is chosen per bucket of its n (the prompt's rows: 1..8, 9..16, 17..32,
 * .. powers of two), by the heuristic for the bucket's largest n, and reused for every n in it
 * (checked with cublasLtMatmulAlgoCheck): so a prompt of a new length costs no heuristic and
 * loads no new kernel once its bucket was warmed (cuda/warm.h), and the buckets are few. */
#define ZR_LT_BUCKET_MIN 8
/* The bucket of n: its largest n (ZR_LT_BUCKET_MIN, then powers of two). */
int64_t zr_cublaslt_bucket(int64_t n);

/* A shape's descriptors and algorithm, made at its first GEMM and kept until close: a bucket's
 * own (n = the bucket's largest) from the heuristic, any other n's from its bucket's. */
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
    PFN_cublasLtMatmulAlgoCheck algo_check;
    ZrLtPlan *plans;   /* [n_plans]: one per shape seen (a model's prefill has a handful per prompt length) */
    int n_plans, cap_plans;
    int32_t *index;    /* [2 cap_plans] open addressing by the shape's hash: plan + 1, 0 = empty */
    double plan_ms;    /* host time spent making them (the heuristic's first calls load cuBLASLt's kernels) */
    int n_heuristics;  /* heuristic calls: one per bucket and shape, plus n_fallbacks */
    int n_fallbacks;   /* exact n whose bucket's algorithm did not pass the check: chosen for that n alone */
} ZrCublasLt;

/* Opens the library and creates a handle (needs a current CUDA context: cuBLASLt uses the
 * primary context, which ZrCuda makes current). ZR_E_NODEV when the library is missing. The
 * backend opens it on the warm-up's thread (cuda/warm.h) while the weights go up. */
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
    /* batch > 1: that many GEMMs of this shape, matrix i at a + i stride_a, b + i stride_b,
     * d + i stride_d (strides in elements); 0 or 1: one */
    int batch; int64_t stride_a, stride_b, stride_d;
} ZrGemm;
/* The first GEMM of a shape creates its descriptors and takes its bucket's algorithm (asking the
 * heuristic once per bucket: ZrLtPlan); later ones of that shape reuse them, so a prompt pays no
 * host set-up per GEMM. */
int zr_cublaslt_gemm(ZrCublasLt *lt, CUstream stream, const ZrGemm *g, ZrError *err);
/* The plan of g's shape made now, without a GEMM (its pointers are not read). */
int zr_cublaslt_plan(ZrCublasLt *lt, const ZrGemm *g, ZrError *err);
