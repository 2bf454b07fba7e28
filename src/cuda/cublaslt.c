#include "cuda/cublaslt.h"
#include "zr_clock.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static void *lt_dlopen(void) {
    /* The toolkit's lib64 is not always on the loader path (it is for pip/distro installs). */
    static const char *const names[] = {
        "libcublasLt.so.13", "libcublasLt.so.12", "/usr/local/cuda/lib64/libcublasLt.so.13",
        "/usr/local/cuda/lib64/libcublasLt.so.12",
    };
    void *lib = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !lib; i++) lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    return lib;
}

void *zr_cublaslt_preload(void) { return lt_dlopen(); }

void zr_cublaslt_unload(void *lib) {
    if (lib) dlclose(lib);
}

int zr_cublaslt_open(ZrCublasLt *lt, ZrError *err) {
    memset(lt, 0, sizeof *lt);
    lt->lib = lt_dlopen();
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
        {"cublasLtMatmulAlgoCheck", (void **)&lt->algo_check, false},
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

void zr_cublaslt_close(ZrCublasLt *lt) {
    for (int i = 0; i < lt->n_plans; i++) plan_free(lt, &lt->plans[i]);
    free(lt->plans);
    free(lt->index);
    zr_lt_cache_free(&lt->cache);
    if (lt->handle && lt->destroy) lt->destroy(lt->handle);
    if (lt->lib && !lt->borrowed) dlclose(lt->lib);
    memset(lt, 0, sizeof *lt);
}

/* The descriptors of shape sh -> *p (no algorithm yet). */
static int plan_descs(const ZrCublasLt *lt, const ZrLtShape *sh, ZrLtPlan *p, ZrError *err) {
    int rc = ZR_OK;
    int32_t ta = sh->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = sh->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const uint64_t m = (uint64_t)sh->m, n = (uint64_t)sh->n, k = (uint64_t)sh->k;
    LT_TRY(lt, err, lt->desc_create(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "MatmulDescCreate");
    LT_TRY(lt, err, lt->desc_set(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "set TRANSA");
    LT_TRY(lt, err, lt->desc_set(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "set TRANSB");
    /* layouts describe the stored matrices: A is m x k, or k x m when transposed */
    LT_TRY(lt, err, lt->layout_create(&p->la, (int)sh->type_a, sh->trans_a ? k : m, sh->trans_a ? m : k, sh->lda),
           "layout A");
    LT_TRY(lt, err, lt->layout_create(&p->lb, (int)sh->type_b, sh->trans_b ? n : k, sh->trans_b ? k : n, sh->ldb),
           "layout B");
    LT_TRY(lt, err, lt->layout_create(&p->ld, (int)sh->type_d, m, n, sh->ldd), "layout D");
    if (sh->batch > 1) {
        const int32_t nb = (int32_t)sh->batch;
        if (!lt->layout_set) {
            rc = zr_err(err, ZR_E_UNSUPPORTED, "cuBLASLt: no cublasLtMatrixLayoutSetAttribute for a batched GEMM");
            goto done;
        }
        cublasLtMatrixLayout_t ls[3] = {p->la, p->lb, p->ld};
        const int64_t strides[3] = {sh->stride_a, sh->stride_b, sh->stride_d};
        for (int i = 0; i < 3; i++) {
            LT_TRY(lt, err, lt->layout_set(ls[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &nb, sizeof nb), "set BATCH_COUNT");
            LT_TRY(lt, err, lt->layout_set(ls[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i], sizeof strides[i]),
                   "set STRIDED_BATCH_OFFSET");
        }
    }
done:
    return rc;
}

/* The heuristic's algorithm for p's shape -> p->algo. */
static int plan_heuristic(ZrCublasLt *lt, ZrLtPlan *p, ZrError *err) {
    int rc = ZR_OK;
    cublasLtMatmulPreference_t pref = NULL;
    uint64_t ws = (uint64_t)p->shape.workspace_bytes;
    const unsigned long long m = (unsigned long long)p->shape.m, n = (unsigned long long)p->shape.n,
                             k = (unsigned long long)p->shape.k;
    lt->n_heuristics++;
    LT_TRY(lt, err, lt->pref_create(&pref), "MatmulPreferenceCreate");
    LT_TRY(lt, err, lt->pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws), "set workspace");
    cublasLtMatmulHeuristicResult_t h;
    int found = 0;
    LT_TRY(lt, err, lt->heuristic(lt->handle, p->op, p->la, p->lb, p->ld, p->ld, pref, 1, &h, &found),
           "no algorithm for m=%llu n=%llu k=%llu", m, n, k);
    if (found < 1) {
        rc = zr_err(err, ZR_E_CUDA, "cuBLASLt: no algorithm for m=%llu n=%llu k=%llu", m, n, k);
        goto done;
    }
    p->algo = h.algo;
done:
    if (pref) lt->pref_destroy(pref);
    return rc;
}

/* True when algo runs p's shape within its workspace. */
static bool algo_fits(const ZrCublasLt *lt, const ZrLtPlan *p, const cublasLtMatmulAlgo_t *algo) {
    cublasLtMatmulHeuristicResult_t r;
    memset(&r, 0, sizeof r);
    return lt->algo_check(lt->handle, p->op, p->la, p->lb, p->ld, p->ld, algo, &r) == CUBLAS_STATUS_SUCCESS &&
           r.workspaceSize <= (size_t)p->shape.workspace_bytes;
}

static ZrLtShape shape_of(const ZrGemm *g) {
    const bool batched = g->batch > 1;
    return (ZrLtShape){g->trans_a, g->trans_b, (int64_t)g->m, (int64_t)g->n, (int64_t)g->k, g->type_a, g->lda,
                       g->type_b, g->ldb, g->type_d, g->ldd, (int64_t)g->workspace_bytes, batched ? g->batch : 1,
                       batched ? g->stride_a : 0, batched ? g->stride_b : 0, batched ? g->stride_d : 0};
}

int64_t zr_cublaslt_bucket(int64_t n) {
    int64_t b = ZR_LT_BUCKET_MIN;
    while (b < n) b *= 2;
    return b;
}

/* FNV-1a over the shape's bytes (a prefill looks its plan up per GEMM: hundreds per prompt). */
static uint32_t shape_hash(const ZrLtShape *sh) {
    const unsigned char *b = (const unsigned char *)sh;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < sizeof *sh; i++) h = (h ^ b[i]) * 16777619u;
    return h;
}

static const ZrLtPlan *plan_find(const ZrCublasLt *lt, const ZrLtShape *sh) {
    if (!lt->index) return NULL;
    const uint32_t mask = 2 * (uint32_t)lt->cap_plans - 1;
    for (uint32_t i = shape_hash(sh) & mask; lt->index[i]; i = (i + 1) & mask)
        if (!memcmp(&lt->plans[lt->index[i] - 1].shape, sh, sizeof *sh)) return &lt->plans[lt->index[i] - 1];
    return NULL;
}

static void index_add(ZrCublasLt *lt, int plan) {
    const uint32_t mask = 2 * (uint32_t)lt->cap_plans - 1;
    uint32_t i = shape_hash(&lt->plans[plan].shape) & mask;
    while (lt->index[i]) i = (i + 1) & mask;
    lt->index[i] = plan + 1;
}

/* Room for one more plan: twice the plans, and the index again (at most half full). */
static int plan_room(ZrCublasLt *lt, ZrError *err) {
    if (lt->n_plans < lt->cap_plans) return ZR_OK;
    const int cap = lt->cap_plans ? 2 * lt->cap_plans : 32;
    ZrLtPlan *p = realloc(lt->plans, sizeof *p * cap);
    if (!p) return zr_err(err, ZR_E_NOMEM, "cuBLASLt: out of host memory");
    lt->plans = p;
    int32_t *ix = calloc(2 * (size_t)cap, sizeof *ix);
    if (!ix) return zr_err(err, ZR_E_NOMEM, "cuBLASLt: out of host memory");
    free(lt->index);
    lt->index = ix;
    lt->cap_plans = cap;
    for (int i = 0; i < lt->n_plans; i++) index_add(lt, i);
    return ZR_OK;
}

/* sh's plan: found, or made (its bucket's first) and added. */
static int plan_get(ZrCublasLt *lt, const ZrLtShape *sh, const ZrLtPlan **out, ZrError *err) {
    if ((*out = plan_find(lt, sh))) return ZR_OK;
    /* the bucket's plan first: its algorithm is this one's */
    const ZrLtPlan *bucket = NULL;
    ZrLtShape bs = *sh;
    bs.n = zr_cublaslt_bucket(sh->n);
    if (sh->batch > 1) { /* a batch's B and D matrices are n rows apart: the bucket's too */
        bs.stride_b = bs.n * sh->ldb;
        bs.stride_d = bs.n * sh->ldd;
    }
    int rc;
    if (bs.n != sh->n && (rc = plan_get(lt, &bs, &bucket, err))) return rc;
    cublasLtMatmulAlgo_t algo = {{0}};
    if (bucket) algo = bucket->algo; /* copied: adding a plan may move the array */
    if ((rc = plan_room(lt, err))) return rc;
    ZrLtPlan *p = &lt->plans[lt->n_plans];
    memset(p, 0, sizeof *p);
    p->shape = *sh;
    const double t0 = zr_clock_ms();
    rc = plan_descs(lt, sh, p, err);
    if (!rc && bucket && algo_fits(lt, p, &algo)) {
        p->algo = algo;
        p->from = ZR_LT_FROM_BUCKET;
    } else if (!rc) {
        if (bucket) lt->n_fallbacks++;
        /* an algorithm of its own: the plan cache's if the check takes it, else the heuristic's */
        int64_t words[ZR_LT_CACHE_SHAPE_WORDS];
        memcpy(words, sh, sizeof words);
        const ZrLtCacheEntry *ce = zr_lt_cache_find(&lt->cache, words);
        if (ce) memcpy(&algo, ce->algo, sizeof algo);
        if (ce && algo_fits(lt, p, &algo)) {
            p->algo = algo;
            p->from = ZR_LT_FROM_CACHE;
            lt->n_cached++;
        } else {
            lt->n_cache_refused += ce != NULL;
            p->from = ZR_LT_FROM_HEURISTIC;
            rc = plan_heuristic(lt, p, err);
        }
    }
    lt->plan_ms += zr_clock_ms() - t0;
    if (rc) {
        plan_free(lt, p);
        return rc;
    }
    index_add(lt, lt->n_plans++);
    *out = p;
    return ZR_OK;
}

int zr_cublaslt_plan(ZrCublasLt *lt, const ZrGemm *g, ZrError *err) {
    const ZrLtPlan *p = NULL;
    const ZrLtShape sh = shape_of(g);
    return plan_get(lt, &sh, &p, err);
}

int zr_cublaslt_gemm(ZrCublasLt *lt, CUstream stream, const ZrGemm *g, ZrError *err) {
    int rc = ZR_OK;
    const ZrLtPlan *p = NULL;
    const ZrLtShape sh = shape_of(g);
    if ((rc = plan_get(lt, &sh, &p, err))) return rc;
    LT_TRY(lt, err,
           lt->matmul(lt->handle, p->op, &g->alpha, (const void *)(uintptr_t)g->a, p->la, (const void *)(uintptr_t)g->b,
                      p->lb, &g->beta, (const void *)(uintptr_t)g->d, p->ld, (void *)(uintptr_t)g->d, p->ld, &p->algo,
                      (void *)(uintptr_t)g->workspace, g->workspace_bytes, stream),
           "cublasLtMatmul m=%llu n=%llu k=%llu", (unsigned long long)g->m, (unsigned long long)g->n,
           (unsigned long long)g->k);
done:
    return rc;
}

int zr_cublaslt_cache_load(ZrCublasLt *lt, const char *path, const ZrLtCacheKey *key, ZrError *err) {
    ZrLtCacheKey k = *key;
    k.lt_version = lt->version;
    ZrLtCache c;
    const int rc = zr_lt_cache_read(path, &k, &c, err);
    if (rc) return rc;
    zr_lt_cache_free(&lt->cache);
    lt->cache = c;
    return ZR_OK;
}

/* lt's cache entries with the algorithms its heuristic chose since (a bucket-derived plan's is
 * its bucket's, a cached one's is in the cache already) -> *all. */
static int cache_with_fresh(const ZrCublasLt *lt, ZrLtCache *all, ZrError *err) {
    ZrLtCacheEntry *fresh = malloc(sizeof *fresh * (size_t)(lt->n_plans ? lt->n_plans : 1));
    if (!fresh) return zr_err(err, ZR_E_NOMEM, "plan cache: out of host memory for %d entries", lt->n_plans);
    int n = 0;
    for (int i = 0; i < lt->n_plans; i++) {
        const ZrLtPlan *p = &lt->plans[i];
        if (p->from != ZR_LT_FROM_HEURISTIC) continue;
        memcpy(fresh[n].shape, &p->shape, sizeof fresh[n].shape);
        memcpy(fresh[n].algo, &p->algo, sizeof fresh[n].algo);
        n++;
    }
    const int rc = zr_lt_cache_merge(&lt->cache, fresh, n, all, err);
    free(fresh);
    return rc;
}

int zr_cublaslt_fork(const ZrCublasLt *src, ZrCublasLt *dst, ZrError *err) {
    *dst = *src; /* the library's functions and version */
    dst->borrowed = true;
    dst->handle = NULL;
    dst->plans = NULL;
    dst->index = NULL;
    dst->n_plans = dst->cap_plans = 0;
    dst->plan_ms = 0.0;
    dst->n_heuristics = dst->n_fallbacks = dst->n_cached = dst->n_cache_refused = 0;
    memset(&dst->cache, 0, sizeof dst->cache);
    int rc = cache_with_fresh(src, &dst->cache, err);
    if (rc) {
        memset(dst, 0, sizeof *dst);
        return rc;
    }
    const cublasStatus_t st = dst->create(&dst->handle);
    if (st != CUBLAS_STATUS_SUCCESS) {
        rc = zr_err(err, ZR_E_CUDA, "cuBLASLt: cublasLtCreate (a second handle): %s (%d)", status_name(dst, st), st);
        dst->handle = NULL;
        zr_cublaslt_close(dst);
    }
    return rc;
}

int zr_cublaslt_adopt(ZrCublasLt *dst, ZrCublasLt *src, ZrError *err) {
    int rc = ZR_OK;
    for (int i = 0; i < src->n_plans; i++) {
        ZrLtPlan *p = &src->plans[i];
        if (!rc && !plan_find(dst, &p->shape) && !(rc = plan_room(dst, err))) {
            dst->plans[dst->n_plans] = *p; /* its descriptors move: no handle of their own */
            index_add(dst, dst->n_plans++);
            memset(p, 0, sizeof *p);
        }
    }
    dst->plan_ms += src->plan_ms;
    dst->n_heuristics += src->n_heuristics;
    dst->n_fallbacks += src->n_fallbacks;
    dst->n_cached += src->n_cached;
    dst->n_cache_refused += src->n_cache_refused;
    zr_cublaslt_close(src); /* the plans not moved (none unless out of memory), its handle */
    return rc;
}

int zr_cublaslt_cache_save(const ZrCublasLt *lt, const char *path, const ZrLtCacheKey *key, int *n_out, ZrError *err) {
    ZrLtCacheKey k = *key;
    k.lt_version = lt->version;
    if (n_out) *n_out = 0;
    ZrLtCache all;
    int rc = cache_with_fresh(lt, &all, err);
    if (rc) return rc;
    rc = zr_lt_cache_write(path, &k, all.e, all.n, err);
    if (!rc && n_out) *n_out = all.n;
    zr_lt_cache_free(&all);
    return rc;
}
