#include "cuda/cublaslt.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/driver.h"

static const char *status_name(const ZrCublasLt *lt, cublasStatus_t s) {
    const char *n = lt->status_name ? lt->status_name(s) : NULL;
    return n ? n : "CUBLAS_STATUS (unnamed)";
}

#define LT_TRY(lt, err, call, ...)                                                                   \
    do {                                                                                             \
        cublasStatus_t s_ = (call);                                                                  \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                           \
            char what_[256];                                                                         \
            snprintf(what_, sizeof what_, __VA_ARGS__);                                              \
            rc = zr_err(err, ZR_E_CUDA, "cuBLASLt: %s: %s (%d)", what_, status_name(lt, s_), s_);    \
            goto done;                                                                               \
        }                                                                                            \
    } while (0)

int zr_cublaslt_open(ZrCublasLt *lt, ZrError *err) {
    memset(lt, 0, sizeof *lt);
    /* The toolkit's lib64 is not always on the loader path (it is for pip/distro installs). */
    static const char *const names[] = {
        "libcublasLt.so.13", "libcublasLt.so.12", "/usr/local/cuda/lib64/libcublasLt.so.13",
        "/usr/local/cuda/lib64/libcublasLt.so.12",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !lt->lib; i++)
        lt->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!lt->lib) {
        const char *why = dlerror();
        return zr_err(err, ZR_E_NODEV, "cuBLASLt not found: dlopen(libcublasLt.so.13 / .12) failed (%s); install the "
                      "CUDA toolkit's libcublas", why ? why : "not found");
    }
    struct { const char *name; void **dst; bool optional; } syms[] = {
        {"cublasLtCreate", (void **)&lt->create, false},
        {"cublasLtDestroy", (void **)&lt->destroy, false},
        {"cublasLtGetStatusName", (void **)&lt->status_name, true},
        {"cublasLtGetVersion", (void **)&lt->get_version, false},
        {"cublasLtMatmulDescCreate", (void **)&lt->desc_create, false},
        {"cublasLtMatmulDescDestroy", (void **)&lt->desc_destroy, false},
        {"cublasLtMatmulDescSetAttribute", (void **)&lt->desc_set, false},
        {"cublasLtMatrixLayoutCreate", (void **)&lt->layout_create, false},
        {"cublasLtMatrixLayoutDestroy", (void **)&lt->layout_destroy, false},
        {"cublasLtMatrixLayoutSetAttribute", (void **)&lt->layout_set, true},
        {"cublasLtMatmulPreferenceCreate", (void **)&lt->pref_create, false},
        {"cublasLtMatmulPreferenceDestroy", (void **)&lt->pref_destroy, false},
        {"cublasLtMatmulPreferenceSetAttribute", (void **)&lt->pref_set, false},
        {"cublasLtMatmulAlgoGetHeuristic", (void **)&lt->heuristic, false},
        {"cublasLtMatmul", (void **)&lt->matmul, false},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].dst = dlsym(lt->lib, syms[i].name);
        if (!*syms[i].dst && !syms[i].optional) {
            zr_err(err, ZR_E_NODEV, "cuBLASLt: symbol %s missing from the library", syms[i].name);
            zr_cublaslt_close(lt);
            return ZR_E_NODEV;
        }
    }
    lt->version = lt->get_version();
    cublasStatus_t s = lt->create(&lt->handle);
    if (s != CUBLAS_STATUS_SUCCESS) {
        zr_err(err, ZR_E_CUDA, "cuBLASLt: cublasLtCreate: %s (%d)", status_name(lt, s), s);
        lt->handle = NULL;
        zr_cublaslt_close(lt);
        return ZR_E_CUDA;
    }
    return ZR_OK;
}

static void plan_free(const ZrCublasLt *lt, ZrLtPlan *p) {
    if (p->ld) lt->layout_destroy(p->ld);
    if (p->lb) lt->layout_destroy(p->lb);
    if (p->la) lt->layout_destroy(p->la);
    if (p->op) lt->desc_destroy(p->op);
    memset(p, 0, sizeof *p);
}

/* The opening thread: its own ZrCublasLt, handed over whole at the join. */
struct ZrLtOpener {
    pthread_t th;
    const ZrCuDriver *drv;
    CUcontext ctx;
    ZrCublasLt lt;
    int rc;
    ZrError err;
};

static void *opener_main(void *arg) {
    struct ZrLtOpener *o = arg;
    CUresult r = o->drv->cuCtxSetCurrent(o->ctx);
    if (r != CUDA_SUCCESS) o->rc = zr_driver_err(o->drv, &o->err, r, "cuBLASLt: cuCtxSetCurrent on its opening thread");
    else o->rc = zr_cublaslt_open(&o->lt, &o->err);
    return NULL;
}

int zr_cublaslt_open_start(ZrCublasLt *lt, const void *drv, CUcontext ctx, ZrError *err) {
    memset(lt, 0, sizeof *lt);
    struct ZrLtOpener *o = calloc(1, sizeof *o);
    if (!o) return zr_err(err, ZR_E_NOMEM, "cuBLASLt: out of host memory");
    o->drv = drv;
    o->ctx = ctx;
    if (pthread_create(&o->th, NULL, opener_main, o)) {
        free(o);
        return zr_err(err, ZR_E_NOMEM, "cuBLASLt: cannot start the thread that opens it");
    }
    lt->opener = o;
    return ZR_OK;
}

int zr_cublaslt_open_wait(ZrCublasLt *lt, ZrError *err) {
    struct ZrLtOpener *o = lt->opener;
    if (!o) return ZR_OK;
    pthread_join(o->th, NULL);
    const int rc = o->rc;
    if (rc) {
        *err = o->err;
        memset(lt, 0, sizeof *lt);
    } else {
        *lt = o->lt; /* its opener is NULL */
    }
    free(o);
    return rc;
}

void zr_cublaslt_close(ZrCublasLt *lt) {
    if (lt->opener) {
        ZrError e = {0};
        if (zr_cublaslt_open_wait(lt, &e)) return; /* nothing was opened */
    }
    for (int i = 0; i < lt->n_plans; i++) plan_free(lt, &lt->plans[i]);
    free(lt->plans);
    if (lt->handle && lt->destroy) lt->destroy(lt->handle);
    if (lt->lib) dlclose(lt->lib);
    memset(lt, 0, sizeof *lt);
}

/* The descriptors and the heuristic's algorithm for g's shape -> *p. */
static int plan_make(const ZrCublasLt *lt, const ZrGemm *g, ZrLtPlan *p, ZrError *err) {
    int rc = ZR_OK;
    cublasLtMatmulPreference_t pref = NULL;
    int32_t ta = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    uint64_t ws = g->workspace_bytes;
    LT_TRY(lt, err, lt->desc_create(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "MatmulDescCreate");
    LT_TRY(lt, err, lt->desc_set(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "set TRANSA");
    LT_TRY(lt, err, lt->desc_set(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "set TRANSB");
    /* layouts describe the stored matrices: A is m x k, or k x m when transposed */
    LT_TRY(lt, err, lt->layout_create(&p->la, g->type_a, g->trans_a ? g->k : g->m, g->trans_a ? g->m : g->k, g->lda),
           "layout A");
    LT_TRY(lt, err, lt->layout_create(&p->lb, g->type_b, g->trans_b ? g->n : g->k, g->trans_b ? g->k : g->n, g->ldb),
           "layout B");
    LT_TRY(lt, err, lt->layout_create(&p->ld, g->type_d, g->m, g->n, g->ldd), "layout D");
    if (g->batch > 1) {
        const int32_t nb = g->batch;
        if (!lt->layout_set) {
            rc = zr_err(err, ZR_E_UNSUPPORTED, "cuBLASLt: no cublasLtMatrixLayoutSetAttribute for a batched GEMM");
            goto done;
        }
        cublasLtMatrixLayout_t ls[3] = {p->la, p->lb, p->ld};
        const int64_t strides[3] = {g->stride_a, g->stride_b, g->stride_d};
        for (int i = 0; i < 3; i++) {
            LT_TRY(lt, err, lt->layout_set(ls[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &nb, sizeof nb), "set BATCH_COUNT");
            LT_TRY(lt, err, lt->layout_set(ls[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i], sizeof strides[i]),
                   "set STRIDED_BATCH_OFFSET");
        }
    }
    LT_TRY(lt, err, lt->pref_create(&pref), "MatmulPreferenceCreate");
    LT_TRY(lt, err, lt->pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws), "set workspace");
    cublasLtMatmulHeuristicResult_t h;
    int found = 0;
    LT_TRY(lt, err, lt->heuristic(lt->handle, p->op, p->la, p->lb, p->ld, p->ld, pref, 1, &h, &found),
           "no algorithm for m=%llu n=%llu k=%llu", (unsigned long long)g->m, (unsigned long long)g->n,
           (unsigned long long)g->k);
    if (found < 1) {
        rc = zr_err(err, ZR_E_CUDA, "cuBLASLt: no algorithm for m=%llu n=%llu k=%llu", (unsigned long long)g->m,
                    (unsigned long long)g->n, (unsigned long long)g->k);
        goto done;
    }
    p->algo = h.algo;
done:
    if (pref) lt->pref_destroy(pref);
    if (rc) plan_free(lt, p);
    return rc;
}

static ZrLtShape shape_of(const ZrGemm *g) {
    const bool batched = g->batch > 1;
    return (ZrLtShape){g->trans_a, g->trans_b, (int64_t)g->m, (int64_t)g->n, (int64_t)g->k, g->type_a, g->lda,
                       g->type_b, g->ldb, g->type_d, g->ldd, (int64_t)g->workspace_bytes, batched ? g->batch : 1,
                       batched ? g->stride_a : 0, batched ? g->stride_b : 0, batched ? g->stride_d : 0};
}

/* g's plan: found, or made and added. */
static int plan_get(ZrCublasLt *lt, const ZrGemm *g, const ZrLtPlan **out, ZrError *err) {
    const ZrLtShape sh = shape_of(g);
    for (int i = lt->n_plans - 1; i >= 0; i--)
        if (!memcmp(&lt->plans[i].shape, &sh, sizeof sh)) {
            *out = &lt->plans[i];
            return ZR_OK;
        }
    if (lt->n_plans == lt->cap_plans) {
        int cap = lt->cap_plans ? 2 * lt->cap_plans : 32;
        ZrLtPlan *p = realloc(lt->plans, sizeof *p * cap);
        if (!p) return zr_err(err, ZR_E_NOMEM, "cuBLASLt: out of host memory");
        lt->plans = p;
        lt->cap_plans = cap;
    }
    ZrLtPlan *p = &lt->plans[lt->n_plans];
    memset(p, 0, sizeof *p);
    p->shape = sh;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = plan_make(lt, g, p, err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    lt->plan_ms += (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    if (rc) return rc;
    lt->n_plans++;
    *out = p;
    return ZR_OK;
}

int zr_cublaslt_gemm(ZrCublasLt *lt, CUstream stream, const ZrGemm *g, ZrError *err) {
    int rc = ZR_OK;
    const ZrLtPlan *p = NULL;
    if ((rc = plan_get(lt, g, &p, err))) return rc;
    LT_TRY(lt, err,
           lt->matmul(lt->handle, p->op, &g->alpha, (const void *)(uintptr_t)g->a, p->la, (const void *)(uintptr_t)g->b,
                      p->lb, &g->beta, (const void *)(uintptr_t)g->d, p->ld, (void *)(uintptr_t)g->d, p->ld, &p->algo,
                      (void *)(uintptr_t)g->workspace, g->workspace_bytes, stream),
           "cublasLtMatmul m=%llu n=%llu k=%llu", (unsigned long long)g->m, (unsigned long long)g->n,
           (unsigned long long)g->k);
done:
    return rc;
}
