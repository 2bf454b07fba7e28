/* cuBLASLt, opened at run time like libcuda (dlopen libcublasLt.so.13, then .12): only what
 * one GEMM needs. Used for prefill (M > 1) only: its kernels bypass the launcher, so it must
 * never run inside the recorded decode step. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "cuda/cuda_abi.h"
#include "cuda/lt_cache.h"
#include "err.h"

/* What a GEMM's algorithm is chosen from (ZrGemm without its pointers and scalars): the
 * heuristic sees nothing else, so one choice per shape is the choice every call would make. */
typedef struct ZrLtShape {
    int64_t trans_a, trans_b, m, n, k, type_a, lda, type_b, ldb, type_d, ldd, workspace_bytes;
    int64_t batch, stride_a, stride_b, stride_d;
} ZrLtShape;
/* a plan cache entry (cuda/lt_cache.h) is a shape and an algorithm, word for word */
_Static_assert(sizeof(ZrLtShape) == sizeof(int64_t) * ZR_LT_CACHE_SHAPE_WORDS, "ZrLtShape: the cache's shape words");
_Static_assert(sizeof(cublasLtMatmulAlgo_t) == sizeof(uint64_t) * ZR_LT_CACHE_ALGO_WORDS, "the cache's algo words");

/* The algorithm of a GEMM is chosen per bucket of its n (the prompt's rows: 1..8, 9..16, 17..32,
 * .. powers of two), by the heuristic for the bucket's largest n, and reused for every n in it
 * (checked with cublasLtMatmulAlgoCheck): so a prompt of a new length costs no heuristic and
 * loads no new kernel once its bucket was warmed (cuda/warm.h), and the buckets are few. */
#define ZR_LT_BUCKET_MIN 8
/* The bucket of n: its largest n (ZR_LT_BUCKET_MIN, then powers of two). */
int64_t zr_cublaslt_bucket(int64_t n);

/* Where a plan's algorithm came from. */
typedef enum ZrLtFrom { ZR_LT_FROM_BUCKET, ZR_LT_FROM_HEURISTIC, ZR_LT_FROM_CACHE } ZrLtFrom;

/* A shape's descriptors and algorithm, made at its first GEMM and kept until close: a bucket's
 * own (n = the bucket's largest) from the plan cache or the heuristic, any other n's from its
 * bucket's. */
typedef struct ZrLtPlan {
    ZrLtShape shape;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;
    ZrLtFrom from;
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
    int n_heuristics;  /* heuristic calls: one per bucket and shape not served by the plan cache, plus
                        * the n_fallbacks not served by it */
    int n_fallbacks;   /* exact n whose bucket's algorithm did not pass the check: chosen for that n alone */
    ZrLtCache cache;   /* the plan cache's entries (zr_cublaslt_cache_load), empty without one */
    bool borrowed;     /* lib is another ZrCublasLt's (zr_cublaslt_fork): not closed with this one */
    int n_cached;      /* plans whose algorithm came from it (each passed cublasLtMatmulAlgoCheck) */
    int n_cache_refused; /* its entries of a shape planned whose algorithm failed the check: the heuristic's instead */
} ZrCublasLt;

/* Opens the library and creates a handle (needs a current CUDA context: cuBLASLt uses the
 * primary context, which ZrCuda makes current). ZR_E_NODEV when the library is missing. The
 * backend opens it on the warm-up's thread (cuda/warm.h) while the weights go up. */
int zr_cublaslt_open(ZrCublasLt *lt, ZrError *err);
/* The library mapped ahead of zr_cublaslt_open (which then finds it loaded, and only makes its
 * handle): a reference for zr_cublaslt_unload, or NULL (not found: zr_cublaslt_open says so). */
void *zr_cublaslt_preload(void);
void zr_cublaslt_unload(void *lib);
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

/* A second handle on src's library (which must stay open while dst is: dst borrows it), with no
 * plans, for another thread: its plan cache is src's entries with the algorithms src's
 * heuristic chose (so dst's save loses none of them). */
int zr_cublaslt_fork(const ZrCublasLt *src, ZrCublasLt *dst, ZrError *err);
/* src's plans of shapes dst has not planned moved into dst (plans are not tied to a handle), its
 * counts added to dst's; src is closed (zeroed) either way. */
int zr_cublaslt_adopt(ZrCublasLt *dst, ZrCublasLt *src, ZrError *err);

/* The plan cache on disk (cuda/lt_cache.h). Load: the file at path for key (its lt_version set
 * here to this library's) is what later plans look up before the heuristic, each entry taken
 * only after cublasLtMatmulAlgoCheck passes for its shape (n_cached; else the heuristic runs,
 * n_cache_refused). A file that is missing or refused leaves lt as it was, with err saying why:
 * an error of the cache, not of the run. */
int zr_cublaslt_cache_load(ZrCublasLt *lt, const char *path, const ZrLtCacheKey *key, ZrError *err);
/* Save: the entries loaded and every algorithm the heuristic chose since (bucket plans and
 * fallbacks), merged (the new first, at most ZR_LT_CACHE_MAX), written to path for key; *n_out
 * (may be NULL): the entries written. */
int zr_cublaslt_cache_save(const ZrCublasLt *lt, const char *path, const ZrLtCacheKey *key, int *n_out, ZrError *err);
