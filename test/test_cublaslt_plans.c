/* cuBLASLt's plans (src/cuda/cublaslt.h) over a fake library, on the CPU: the algorithm is chosen
 * once per bucket of n (8, 16, 32, .. powers of two) by the heuristic for the bucket's largest n
 * and reused for every n of the bucket; an n whose check refuses its bucket's algorithm gets one
 * of its own; a shape seen before asks nothing, however many shapes there are. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cublaslt.h"
#include "zt.h"

/* The fake's state: a layout stores its rows and cols; the heuristic's algorithm says which n
 * (the B layout's cols) it was chosen for; the check refuses n == refuse_n. */
static int g_heuristics, g_checks, g_matmuls;
static int64_t g_refuse_n = -1, g_last_algo_n;
static cublasLtMatmulDescOpaque_t g_desc;

static cublasStatus_t f_desc_create(cublasLtMatmulDesc_t *d, int ct, int st) {
    (void)ct, (void)st;
    *d = &g_desc;
    return CUBLAS_STATUS_SUCCESS;
}
static cublasStatus_t f_desc_destroy(cublasLtMatmulDesc_t d) { return (void)d, CUBLAS_STATUS_SUCCESS; }
static cublasStatus_t f_desc_set(cublasLtMatmulDesc_t d, int a, const void *b, size_t n) {
    return (void)d, (void)a, (void)b, (void)n, CUBLAS_STATUS_SUCCESS;
}
static cublasStatus_t f_layout_create(cublasLtMatrixLayout_t *l, int type, uint64_t rows, uint64_t cols, int64_t ld) {
    (void)type, (void)ld;
    *l = calloc(1, sizeof **l);
    (*l)->data[0] = rows;
    (*l)->data[1] = cols;
    return CUBLAS_STATUS_SUCCESS;
}
static cublasStatus_t f_layout_destroy(cublasLtMatrixLayout_t l) {
    free(l);
    return CUBLAS_STATUS_SUCCESS;
}
static cublasStatus_t f_pref_create(cublasLtMatmulPreference_t *p) {
    static cublasLtMatmulPreferenceOpaque_t pref;
    *p = &pref;
    return CUBLAS_STATUS_SUCCESS;
}
static cublasStatus_t f_pref_destroy(cublasLtMatmulPreference_t p) { return (void)p, CUBLAS_STATUS_SUCCESS; }
static cublasStatus_t f_pref_set(cublasLtMatmulPreference_t p, int a, const void *b, size_t n) {
    return (void)p, (void)a, (void)b, (void)n, CUBLAS_STATUS_SUCCESS;
}
/* B is k x n (not transposed): its cols are the GEMM's n */
static cublasStatus_t f_heuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                                  cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                  cublasLtMatmulPreference_t pref, int req, cublasLtMatmulHeuristicResult_t *r, int *got) {
    (void)h, (void)op, (void)a, (void)c, (void)d, (void)pref, (void)req;
    g_heuristics++;
    memset(r, 0, sizeof *r);
    r->algo.data[0] = b->data[1];
    *got = 1;
    return CUBLAS_STATUS_SUCCESS;
}
static cublasStatus_t f_check(cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                              const cublasLtMatmulAlgo_t *algo, cublasLtMatmulHeuristicResult_t *r) {
    (void)h, (void)op, (void)a, (void)c, (void)d, (void)algo;
    g_checks++;
    r->workspaceSize = 0;
    return (int64_t)b->data[1] == g_refuse_n ? CUBLAS_STATUS_NOT_SUPPORTED : CUBLAS_STATUS_SUCCESS;
}
static cublasStatus_t f_matmul(cublasLtHandle_t h, cublasLtMatmulDesc_t op, const void *alpha, const void *A,
                               cublasLtMatrixLayout_t a, const void *B, cublasLtMatrixLayout_t b, const void *beta,
                               const void *C, cublasLtMatrixLayout_t c, void *D, cublasLtMatrixLayout_t d,
                               const cublasLtMatmulAlgo_t *algo, void *ws, size_t wsb, CUstream s) {
    (void)h, (void)op, (void)alpha, (void)A, (void)a, (void)B, (void)b, (void)beta, (void)C, (void)c, (void)D, (void)d;
    (void)ws, (void)wsb, (void)s;
    g_matmuls++;
    g_last_algo_n = (int64_t)algo->data[0];
    return CUBLAS_STATUS_SUCCESS;
}

static ZrCublasLt fake(void) {
    g_heuristics = g_checks = g_matmuls = 0;
    g_refuse_n = -1;
    return (ZrCublasLt){.desc_create = f_desc_create, .desc_destroy = f_desc_destroy, .desc_set = f_desc_set,
                        .layout_create = f_layout_create, .layout_destroy = f_layout_destroy,
                        .pref_create = f_pref_create, .pref_destroy = f_pref_destroy, .pref_set = f_pref_set,
                        .heuristic = f_heuristic, .algo_check = f_check, .matmul = f_matmul};
}

/* A weight [k = 256, m] times n rows, as forward.c's gemm makes it. */
static ZrGemm gemm(uint64_t m, uint64_t n) {
    return (ZrGemm){.trans_a = 1, .m = m, .n = n, .k = 256, .type_a = CUDA_R_16F, .lda = 256, .type_b = CUDA_R_16F,
                    .ldb = 256, .type_d = CUDA_R_32F, .ldd = (int64_t)m, .alpha = 1.0f, .workspace_bytes = 1 << 20};
}

/* The algorithm the GEMM ran with (-1: it failed). */
static int64_t algo_for(ZrCublasLt *lt, uint64_t m, uint64_t n) {
    ZrError err = {0};
    const ZrGemm g = gemm(m, n);
    if (zr_cublaslt_gemm(lt, NULL, &g, &err)) {
        fprintf(stderr, "  m=%llu n=%llu: %s\n", (unsigned long long)m, (unsigned long long)n, err.msg);
        return -1;
    }
    return g_last_algo_n;
}

ZT_TEST(buckets_are_8_then_powers_of_two) {
    ZT_CHECK(zr_cublaslt_bucket(1) == 8 && zr_cublaslt_bucket(8) == 8 && zr_cublaslt_bucket(9) == 16);
    ZT_CHECK(zr_cublaslt_bucket(37) == 64 && zr_cublaslt_bucket(256) == 256 && zr_cublaslt_bucket(257) == 512);
    ZT_CHECK(zr_cublaslt_bucket(512) == 512);
}

ZT_TEST(every_n_of_a_bucket_runs_the_algorithm_chosen_for_its_largest) {
    ZrCublasLt lt = fake();
    ZT_CHECK(algo_for(&lt, 64, 5) == 8 && g_heuristics == 1);
    ZT_CHECK(algo_for(&lt, 64, 2) == 8 && algo_for(&lt, 64, 8) == 8 && g_heuristics == 1);
    ZT_CHECK(algo_for(&lt, 64, 37) == 64 && algo_for(&lt, 64, 33) == 64 && g_heuristics == 2);
    ZT_CHECK(algo_for(&lt, 64, 300) == 512 && algo_for(&lt, 64, 512) == 512 && g_heuristics == 3);
    ZT_CHECK(lt.n_fallbacks == 0 && g_matmuls == 7);
    zr_cublaslt_close(&lt);
}

ZT_TEST(a_planned_bucket_serves_its_ns_without_the_heuristic) {
    ZrCublasLt lt = fake();
    ZrError err = {0};
    for (uint64_t b = 8; b <= 512; b *= 2) {
        const ZrGemm g = gemm(96, b);
        ZT_CHECKF(zr_cublaslt_plan(&lt, &g, &err) == 0, "%s", err.msg);
    }
    ZT_CHECK(g_heuristics == 7 && g_matmuls == 0);
    for (uint64_t n = 1; n <= 512; n++) ZT_CHECK(algo_for(&lt, 96, n) == zr_cublaslt_bucket((int64_t)n));
    ZT_CHECK(g_heuristics == 7 && g_checks == 512 - 7); /* each n once, a bucket's own n none */
    for (uint64_t n = 1; n <= 512; n++) algo_for(&lt, 96, n);
    ZT_CHECK(g_heuristics == 7 && g_checks == 512 - 7 && g_matmuls == 1024);
    zr_cublaslt_close(&lt);
}

ZT_TEST(an_n_that_refuses_its_buckets_algorithm_gets_its_own) {
    ZrCublasLt lt = fake();
    g_refuse_n = 37;
    ZT_CHECK(algo_for(&lt, 64, 37) == 37 && g_heuristics == 2 && lt.n_fallbacks == 1 && lt.n_heuristics == 2);
    ZT_CHECK(algo_for(&lt, 64, 40) == 64 && g_heuristics == 2);
    ZT_CHECK(algo_for(&lt, 64, 37) == 37 && g_heuristics == 2);
    zr_cublaslt_close(&lt);
}

ZT_TEST(many_shapes_are_each_planned_once) {
    ZrCublasLt lt = fake();
    for (int rep = 0; rep < 2; rep++)
        for (uint64_t m = 1; m <= 200; m++) ZT_CHECK(algo_for(&lt, m, 5) == 8);
    ZT_CHECK(g_heuristics == 200 && lt.n_plans == 400 && lt.n_heuristics == 200);
    zr_cublaslt_close(&lt);
}

/* The plan cache (cuda/lt_cache.h): a second process's plans of the shapes a first one saved
 * take the saved algorithms after the check, and ask the heuristic nothing. */
static const char *cache_path(const char *name) {
    static char p[4200];
    snprintf(p, sizeof p, "%s/%s", zt_tmpdir(), name);
    return p;
}

static const ZrLtCacheKey cache_key = {.cuda_driver = 13000, .cc_major = 9, .sm_count = 132, .gpu = "fake"};

/* Buckets 8..512 of m = 64 and m = 96 planned (14 heuristic calls) and saved to path. */
static int plan_and_save(const char *path) {
    ZrCublasLt lt = fake();
    ZrError err = {0};
    for (uint64_t m = 64; m <= 96; m += 32)
        for (uint64_t b = 8; b <= 512; b *= 2) {
            const ZrGemm g = gemm(m, b);
            if (zr_cublaslt_plan(&lt, &g, &err)) return -1;
        }
    int n = 0;
    const int rc = zr_cublaslt_cache_save(&lt, path, &cache_key, &n, &err);
    if (rc) fprintf(stderr, "  %s\n", err.msg);
    zr_cublaslt_close(&lt);
    return rc ? -1 : n;
}

/* A fresh handle with the cache that plan_and_save wrote to tmp/name loaded (14 entries). */
static bool saved_and_loaded(const char *name, ZrCublasLt *lt) {
    const char *path = cache_path(name);
    if (plan_and_save(path) != 14) return false;
    *lt = fake();
    ZrError err = {0};
    if (!zr_cublaslt_cache_load(lt, path, &cache_key, &err)) return true;
    fprintf(stderr, "  %s\n", err.msg);
    return false;
}

ZT_TEST(plans_of_the_shapes_in_a_loaded_cache_ask_the_heuristic_nothing) {
    ZrCublasLt lt;
    ZT_CHECK(saved_and_loaded("plans.bin", &lt));
    for (uint64_t n = 1; n <= 512; n++) {
        ZT_CHECK(algo_for(&lt, 64, n) == zr_cublaslt_bucket((int64_t)n));
        ZT_CHECK(algo_for(&lt, 96, n) == zr_cublaslt_bucket((int64_t)n));
    }
    ZT_CHECK(g_heuristics == 0 && lt.n_heuristics == 0 && lt.n_cached == 14 && lt.n_cache_refused == 0);
    /* a shape the file does not hold still asks */
    ZT_CHECK(algo_for(&lt, 128, 5) == 8 && g_heuristics == 1 && lt.n_cached == 14);
    zr_cublaslt_close(&lt);
}

ZT_TEST(a_cached_algorithm_that_fails_the_check_is_replaced_by_the_heuristics) {
    ZrCublasLt lt;
    ZT_CHECK(saved_and_loaded("refused.bin", &lt));
    g_refuse_n = 64; /* the check refuses every algorithm for n = 64: the cached one of bucket 64 too */
    ZT_CHECK(algo_for(&lt, 64, 64) == 64);
    ZT_CHECK(g_heuristics == 1 && lt.n_cache_refused == 1 && lt.n_cached == 0);
    ZT_CHECK(algo_for(&lt, 64, 8) == 8 && g_heuristics == 1 && lt.n_cached == 1);
    /* saved again: the new algorithm of bucket 64 with the other 13 entries */
    int n = 0;
    ZrError err = {0};
    ZT_CHECKF(!zr_cublaslt_cache_save(&lt, cache_path("refused.bin"), &cache_key, &n, &err), "%s", err.msg);
    ZT_CHECK(n == 14);
    zr_cublaslt_close(&lt);
}

ZT_TEST(a_cache_of_another_gpu_is_not_loaded) {
    const char *path = cache_path("other.bin");
    ZT_CHECK(plan_and_save(path) == 14);
    ZrCublasLt lt = fake();
    ZrError err = {0};
    ZrLtCacheKey other = cache_key;
    other.sm_count = 114;
    ZT_CHECK(zr_cublaslt_cache_load(&lt, path, &other, &err) == ZR_E_UNSUPPORTED && lt.cache.n == 0);
    ZT_CHECK(algo_for(&lt, 64, 5) == 8 && g_heuristics == 1 && lt.n_cached == 0);
    zr_cublaslt_close(&lt);
}

int main(void) { return zt_run(); }
