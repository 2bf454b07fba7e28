/* The prefill's small-batch product (cu/matmul_small.cu, issue 19) against a CPU reference, and
 * the prefill of a few tokens through the backend against llama.cpp's logits.
 *
 * Product: Y[t][o] = sum_k W[o][k] X[t][k] + beta Y0[t][o] for every weight type, n = 1..8 rows,
 * rows of lengths that are not a multiple of the 2048-value chunk, row counts that are not a
 * multiple of a block's, every launch shape; the reference dequantizes W (src/quant.c) and adds
 * in double, with the decode matvec's tolerance (test_kernels.c)
 *     |gpu - ref| <= 1e-5 * (sum_k |w_k x_k| + |beta y0|) + 1e-5 * |ref|.
 * A Y0 poisoned with NaN and beta 0 must not be read; values of Y outside [n][n_out] (a wider
 * row stride: the fused Q/K/V's) must stay as they were. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cuda/klaunch.h"
#include "cuda/mm_small.h"
#include "cuda/weights.h"
#include "gpu_env.h"
#include "gpu_weights.h"
#include "model.h"
#include "quant.h"
#include "zt_fixtures.h"
#include "zt.h"

static const uint32_t all_types[] = {ZR_TYPE_F32,  ZR_TYPE_F16,  ZR_TYPE_BF16, ZR_TYPE_Q8_0, ZR_TYPE_Q4_0,
                                     ZR_TYPE_Q4_1, ZR_TYPE_Q5_0, ZR_TYPE_Q5_1, ZR_TYPE_Q2_K, ZR_TYPE_Q3_K,
                                     ZR_TYPE_Q4_K, ZR_TYPE_Q5_K, ZR_TYPE_Q6_K};
#define N_TYPES (int)(sizeof all_types / sizeof all_types[0])

/* One matrix with its dequantized rows on the host and on the device. */
typedef struct Mat {
    uint32_t type;
    int n_in, n_out;
    float *deq; /* [n_out][n_in] */
    ZrCuWeight dw;
} Mat;

static bool mat_make(Mat *m, uint32_t type, int n_in, int n_out) {
    GpuEnv *g = gpu_env();
    uint64_t s = 0x9e3779b97f4a7c15ull ^ (type * 7919ull + (uint64_t)n_in * 31 + (uint64_t)n_out);
    uint8_t *w = gpu_random_matrix(type, n_in, n_out, &s);
    if (!w) return false;
    m->type = type, m->n_in = n_in, m->n_out = n_out;
    m->deq = malloc(sizeof(float) * (size_t)n_in * n_out);
    const size_t rb = zr_row_bytes(type, n_in);
    for (int r = 0; r < n_out; r++) zr_dequant_row(type, w + rb * r, m->deq + (size_t)r * n_in, n_in);
    m->dw = gpu_upload_weight(g, type, w, n_in, n_out);
    free(w);
    return true;
}

static void mat_free(Mat *m) {
    GpuEnv *g = gpu_env();
    gpu_free(g, m->dw.main);
    gpu_free(g, m->dw.side);
    free(m->deq);
}

/* Runs Y = X W^T + beta Y0 for n rows (shape: {0}: the forward pass's, else that one) and
 * returns the worst |diff| / tol (> 1 fails; 1e30 for a failed launch, a NaN, or a value
 * written outside [n][n_out]). */
static double product_case(const Mat *m, int n, float beta, ZrMmShape shape) {
    GpuEnv *g = gpu_env();
    const int n_in = m->n_in, n_out = m->n_out, ldx = n_in + 4, ldy = n_out + 3;
    uint64_t s = 0x51ed27ull + (uint64_t)n * 131 + (uint64_t)n_out;
    float *x = malloc(sizeof(float) * (size_t)n * ldx), *y0 = malloc(sizeof(float) * (size_t)n * ldy);
    float *y = malloc(sizeof(float) * (size_t)n * ldy);
    for (int i = 0; i < n * ldx; i++) x[i] = gpu_rand(&s);
    for (int i = 0; i < n * ldy; i++) y0[i] = beta != 0.0f || i % ldy >= n_out ? 10.0f * gpu_rand(&s) : NAN;
    CUdeviceptr dx = gpu_upload(g, x, sizeof(float) * (size_t)n * ldx), dy = gpu_upload(g, y0, sizeof(float) * (size_t)n * ldy);
    ZrError e = {0};
    int rc;
    if (shape.groups)
        rc = zr_k_matmul_small(&g->l, &g->k.mm[m->type], &m->dw, dx, ldx, dy, ldy, beta, n, shape,
                               zr_cuf_mm_smem(shape, n), &e);
    else
        rc = zr_cuf_mm_small(&g->l, &g->k, &m->dw, dx, ldx, dy, ldy, beta, n, &e);
    if (rc) fprintf(stderr, "  %s\n", e.msg);
    double worst = rc ? 1e30 : 0.0;
    if (!rc) {
        gpu_download(g, y, dy, sizeof(float) * (size_t)n * ldy);
        for (int t = 0; t < n && worst < 1e30; t++) {
            for (int o = 0; o < ldy; o++) {
                const size_t i = (size_t)t * ldy + o;
                if (o >= n_out) {
                    if (memcmp(&y[i], &y0[i], sizeof(float))) {
                        fprintf(stderr, "  %s row %d: value %d past %d written\n", zr_type_name(m->type), t, o, n_out);
                        worst = 1e30;
                    }
                    continue;
                }
                const float *wr = m->deq + (size_t)o * n_in, *xr = x + (size_t)t * ldx;
                double ref = beta != 0.0f ? (double)beta * y0[i] : 0.0, mag = fabs(ref);
                for (int k = 0; k < n_in; k++) {
                    ref += (double)wr[k] * xr[k];
                    mag += fabs((double)wr[k] * xr[k]);
                }
                const double tol = 1e-5 * mag + 1e-5 * fabs(ref);
                const double q = isfinite(y[i]) ? fabs((double)y[i] - ref) / tol : 1e30;
                if (q > worst) {
                    worst = q;
                    if (q > 1.0)
                        fprintf(stderr, "  %s [%d x %d] n %d row %d out %d: gpu %.9g cpu %.9g (tol %.3g)\n",
                                zr_type_name(m->type), n_in, n_out, n, t, o, y[i], ref, tol);
                }
            }
        }
    }
    gpu_free(g, dx);
    gpu_free(g, dy);
    free(x);
    free(y0);
    free(y);
    return worst;
}

/* Every n = 1..8, with and without the residual, as the forward pass launches them (n = 1: the
 * decode's matrix-vector product; every_launch_shape_gives_the_product runs the kernel at n = 1). */
static void type_case(uint32_t type, int n_in, int n_out) {
    Mat m;
    if (!mat_make(&m, type, n_in, n_out)) {
        fprintf(stderr, "  %s: the quantizer has no %s, skipped\n", zr_type_name(type), zr_type_name(type));
        return;
    }
    double worst = 0.0;
    for (int n = 1; n <= ZR_CUF_MM_COLS; n++)
        for (int b = 0; b < 2; b++) {
            const double q = product_case(&m, n, b ? 1.0f : 0.0f, (ZrMmShape){0});
            if (q > worst) worst = q;
        }
    fprintf(stderr, "  matmul_small %-5s [%5d x %4d] n 1..%d, beta 0 and 1: worst |diff|/tol = %.3g%s\n",
            zr_type_name(type), n_in, n_out, ZR_CUF_MM_COLS, worst, worst <= 1.0 ? "  PASS" : "  FAIL");
    ZT_CHECKF(worst <= 1.0, "%s [%d x %d]: worst |diff|/tol %.3g", zr_type_name(type), n_in, n_out, worst);
    mat_free(&m);
}

/* rows of two and a half chunks (K-quants: a 256-multiple), an odd number of rows */
ZT_TEST(every_type_matches_the_dequantized_double_product_for_1_to_8_rows) {
    if (!gpu_env()) return;
    for (int i = 0; i < N_TYPES; i++) type_case(all_types[i], 5 * ZR_CUF_MM_UNIT / 2 + 256, 77);
}

/* one super-block per row, fewer rows than one warp's pair in the last block */
ZT_TEST(every_type_takes_short_rows_and_a_row_count_off_the_block) {
    if (!gpu_env()) return;
    for (int i = 0; i < N_TYPES; i++) type_case(all_types[i], 256, 33);
}

/* F32 / F16 / BF16 rows of any length (a tail after the last whole item, no float4 staging) */
ZT_TEST(float_types_take_rows_that_are_not_a_multiple_of_the_item) {
    if (!gpu_env()) return;
    const uint32_t t[] = {ZR_TYPE_F32, ZR_TYPE_F16, ZR_TYPE_BF16};
    for (int i = 0; i < 3; i++) type_case(t[i], ZR_CUF_MM_UNIT + 3, 19);
}

/* Every split and chunk a launch may take gives the product (the forward pass picks one). */
ZT_TEST(every_launch_shape_gives_the_product) {
    if (!gpu_env()) return;
    const uint32_t types[] = {ZR_TYPE_Q4_0, ZR_TYPE_Q4_K, ZR_TYPE_Q6_K, ZR_TYPE_F16, ZR_TYPE_Q2_K};
    const int shapes[][2] = {{8, 1}, {4, 2}, {2, 4}, {1, 8}, {16, 1}, {1, 16}};
    for (int i = 0; i < 5; i++) {
        Mat m;
        if (!mat_make(&m, types[i], 3 * ZR_CUF_MM_UNIT + 512, 45)) continue;
        double worst = 0.0;
        for (int sh = 0; sh < 6; sh++)
            for (int c = 1; c <= 2; c++) {
                const int ns[] = {1, 3, c == 1 ? 8 : 4};
                for (int j = 0; j < 3; j++) {
                    const ZrMmShape s = {.groups = shapes[sh][0], .split = shapes[sh][1], .chunk = c * ZR_CUF_MM_UNIT};
                    const double q = product_case(&m, ns[j], j == 1 ? 1.0f : 0.0f, s);
                    if (q > 1.0)
                        fprintf(stderr, "  %s shape %dx%d chunk %d n %d: worst |diff|/tol %.3g\n", zr_type_name(types[i]),
                                s.groups, s.split, s.chunk, ns[j], q);
                    if (q > worst) worst = q;
                }
            }
        fprintf(stderr, "  matmul_small %-5s every shape and chunk: worst |diff|/tol = %.3g%s\n", zr_type_name(types[i]),
                worst, worst <= 1.0 ? "  PASS" : "  FAIL");
        ZT_CHECKF(worst <= 1.0, "%s: worst |diff|/tol %.3g", zr_type_name(types[i]), worst);
        mat_free(&m);
    }
}

/* Each column of the product is the decode's matrix-vector product of that row of x, bit for bit,
 * when the lanes take the same items in the same order as the matvec's with the same split: within
 * one chunk, and over several chunks when a chunk's first item (c0 / EPI) is a multiple of the
 * 32 * split items a warp's lanes step by (every type but q2_K / q3_K, 64 values an item, at
 * split 2). T::comp_n (ZrMvCompN types: each item decoded once for all columns, in one pass or
 * two) keeps T::comp's arithmetic per column, as the other types' per-column T::comp does, and
 * q4_K / q5_K's item-ordered staging moves the same values and 16-value sums. n = 1..8 (one kernel
 * copy per n), 77 rows (an odd last group), splits 1 and 2, chunks of ZR_CUF_MM_UNIT values.
 * False (and a line saying which values) when a value differs or a launch fails. */
static bool columns_equal_the_matvec(uint32_t type, int n_in) {
    GpuEnv *g = gpu_env();
    const int n_out = 77;
    Mat m;
    if (!mat_make(&m, type, n_in, n_out)) return true; /* the quantizer has no such type */
    uint64_t s = 0xc0ffeeull + type + (uint64_t)n_in;
    float *x = malloc(sizeof(float) * ZR_CUF_MM_COLS * n_in), *y = malloc(sizeof(float) * ZR_CUF_MM_COLS * n_out);
    float *ym = malloc(sizeof(float) * n_out);
    for (int j = 0; j < ZR_CUF_MM_COLS * n_in; j++) x[j] = gpu_rand(&s);
    const CUdeviceptr dx = gpu_upload(g, x, sizeof(float) * ZR_CUF_MM_COLS * n_in),
                      dy = gpu_alloc(g, sizeof(float) * ZR_CUF_MM_COLS * n_out),
                      dm = gpu_alloc(g, sizeof(float) * n_out);
    int differ = 0, failed = 0;
    for (int split = 1; split <= 2; split++) {
        /* the matvec of every row of x with the same split */
        float *ref = malloc(sizeof(float) * ZR_CUF_MM_COLS * n_out);
        for (int t = 0; t < ZR_CUF_MM_COLS && !failed; t++) {
            ZrError e = {0};
            const ZrMvShape ms = {.groups = 8 / split, .split = split, .blocks = 0};
            if (zr_cuf_matvec_shaped(&g->l, &g->k, &m.dw, dx + sizeof(float) * (size_t)t * n_in, dm, 0, 0, 0.0f,
                                     ZR_CUF_MV_PLAIN, ms, &e)) {
                fprintf(stderr, "  %s matvec: %s\n", zr_type_name(m.type), e.msg);
                failed = 1;
                break;
            }
            gpu_download(g, ym, dm, sizeof(float) * n_out);
            memcpy(ref + (size_t)t * n_out, ym, sizeof(float) * n_out);
        }
        for (int n = 1; n <= ZR_CUF_MM_COLS && !failed; n++) {
            ZrError e = {0};
            const ZrMmShape sh = {.groups = ZR_CUF_MM_WARPS / split, .split = split, .chunk = ZR_CUF_MM_UNIT};
            if (zr_k_matmul_small(&g->l, &g->k.mm[m.type], &m.dw, dx, n_in, dy, n_out, 0.0f, n, sh,
                                  zr_cuf_mm_smem(sh, n), &e)) {
                fprintf(stderr, "  %s n %d: %s\n", zr_type_name(m.type), n, e.msg);
                failed = 1;
                break;
            }
            gpu_download(g, y, dy, sizeof(float) * (size_t)n * n_out);
            for (int j = 0; j < n * n_out; j++)
                if (!(y[j] == ref[j])) {
                    if (differ++ < 3)
                        fprintf(stderr, "  %s split %d n %d row %d out %d: %.9g, matvec %.9g\n",
                                zr_type_name(m.type), split, n, j / n_out, j % n_out, y[j], ref[j]);
                }
        }
        free(ref);
    }
    const bool ok = !failed && differ == 0;
    fprintf(stderr, "  matmul_small %-5s [%5d] n 1..%d, splits 1 and 2: %d values differ from the matvec%s%s\n",
            zr_type_name(m.type), n_in, ZR_CUF_MM_COLS, differ, failed ? " (a launch failed)" : "", ok ? "  PASS" : "  FAIL");
    gpu_free(g, dx);
    gpu_free(g, dy);
    gpu_free(g, dm);
    free(x);
    free(y);
    free(ym);
    mat_free(&m);
    return ok;
}

/* The decode matvecs of q2_K, q4_K, q5_K, q8_0 and the 32-value block types run on integer dot
 * products with x in 23-bit integers (cu/matvec.cuh ZrMvQ2Ki, ZrMvQ4Ki, ZrMvQ5Ki, ZrMvQ8i,
 * ZrMvQ4xi), the small product on the floats (ZrMvQ2K, ZrMvQ4K, ZrMvQ5K, ZrMvQ8_0, ZrMvQ4x): both
 * within the tolerance above, not the same bits. */
static bool decode_matvec_is_float(uint32_t type) {
    if (type != ZR_TYPE_Q2_K && type != ZR_TYPE_Q4_K && type != ZR_TYPE_Q5_K && type != ZR_TYPE_Q8_0 &&
        type != ZR_TYPE_Q4_0 && type != ZR_TYPE_Q4_1 && type != ZR_TYPE_Q5_0 && type != ZR_TYPE_Q5_1)
        return true;
    fprintf(stderr, "  %s: not compared bit for bit (the decode matvec's integer dot products)\n", zr_type_name(type));
    return false;
}

ZT_TEST(every_column_equals_the_decode_matvec_of_its_row_bit_for_bit) {
    if (!gpu_env()) return;
    for (int i = 0; i < N_TYPES; i++)
        if (decode_matvec_is_float(all_types[i]))
            ZT_CHECKF(columns_equal_the_matvec(all_types[i], ZR_CUF_MM_UNIT),
                      "%s: values differ from the decode matvec", zr_type_name(all_types[i]));
}

/* Rows of two and a half chunks (5120 values: 2048, 2048, 1024): the items of every chunk after
 * the first, with q4_K / q5_K's item order restarting at each chunk, in the matvec's order. */
ZT_TEST(every_column_equals_the_decode_matvec_over_several_chunks) {
    if (!gpu_env()) return;
    for (int i = 0; i < N_TYPES; i++) {
        if (all_types[i] == ZR_TYPE_Q2_K || all_types[i] == ZR_TYPE_Q3_K || !decode_matvec_is_float(all_types[i])) continue;
        ZT_CHECKF(columns_equal_the_matvec(all_types[i], 5 * ZR_CUF_MM_UNIT / 2), "%s: values differ from the decode matvec",
                  zr_type_name(all_types[i]));
    }
}

/* The forward pass's product of one row is the decode's matvec itself (mm_small.c hands it over):
 * bit for bit, with and without the residual. */
ZT_TEST(one_row_is_the_decode_matvec_bit_for_bit) {
    if (!gpu_env()) return;
    GpuEnv *g = gpu_env();
    const uint32_t types[] = {ZR_TYPE_Q4_0, ZR_TYPE_Q8_0, ZR_TYPE_Q4_K, ZR_TYPE_Q6_K};
    const int n_in = 4096, n_out = 1024;
    for (int i = 0; i < 4; i++) {
        Mat m;
        if (!mat_make(&m, types[i], n_in, n_out)) continue;
        uint64_t s = 0xbeefull + types[i];
        float *x = malloc(sizeof(float) * n_in), *y0 = malloc(sizeof(float) * n_out);
        float *a = malloc(sizeof(float) * n_out), *b = malloc(sizeof(float) * n_out);
        for (int j = 0; j < n_in; j++) x[j] = gpu_rand(&s);
        for (int j = 0; j < n_out; j++) y0[j] = gpu_rand(&s);
        const CUdeviceptr dx = gpu_upload(g, x, sizeof(float) * n_in), da = gpu_upload(g, y0, sizeof(float) * n_out),
                          db = gpu_upload(g, y0, sizeof(float) * n_out);
        int differ = 0, rc = 0;
        for (int beta = 0; beta <= 1 && !rc; beta++) {
            ZrError e = {0};
            rc = zr_cuf_mm_small(&g->l, &g->k, &m.dw, dx, n_in, da, n_out, (float)beta, 1, &e) ||
                 zr_cuf_matvec(&g->l, &g->k, &m.dw, dx, db, beta ? db : 0, 0, 0.0f, ZR_CUF_MV_PLAIN, &e);
            if (rc) fprintf(stderr, "  %s: %s\n", zr_type_name(m.type), e.msg);
            gpu_download(g, a, da, sizeof(float) * n_out);
            gpu_download(g, b, db, sizeof(float) * n_out);
            for (int j = 0; j < n_out; j++) differ += memcmp(&a[j], &b[j], sizeof(float)) != 0;
        }
        fprintf(stderr, "  matmul_small %-5s n 1, beta 0 and 1: %d values differ from the matvec%s\n",
                zr_type_name(m.type), differ, !rc && !differ ? "  PASS" : "  FAIL");
        ZT_CHECKF(!rc && !differ, "%s: %d values differ", zr_type_name(m.type), differ);
        gpu_free(g, dx);
        gpu_free(g, da);
        gpu_free(g, db);
        free(x), free(y0), free(a), free(b);
        mat_free(&m);
    }
}

/* The prefill of n <= 8 tokens (the small product for every quantized matrix) against
 * llama.cpp's exact logits, with test_cuda_backend's prefill tolerance (F16 attention operands
 * remain); every row of the prompt is compared. Each prompt starts at position 0 of an emptied
 * cache (truncate), and a forward that fails counts as a failure. */
ZT_TEST(a_prefill_of_1_to_8_tokens_matches_llama_cpp_exact_logits) {
    if (!gpu_env()) return;
    static ZtFixture fx[ZT_MAX_FIXTURES];
    const int nf = zt_fixtures(fx, ZT_MAX_FIXTURES);
    if (!nf) return;
    int failed = 0;
    for (int i = 0; i < nf; i++) {
        char path[4200];
        int n_ids = 0;
        size_t n_exact = 0;
        ZrModel m;
        ZrError err = {0};
        snprintf(path, sizeof path, "%s.tokens", fx[i].base);
        int32_t *ids = zt_read_ids(path, &n_ids);
        snprintf(path, sizeof path, "%s.exact.f32", fx[i].base);
        float *exact = zt_read_f32(path, &n_exact);
        if (!ids || !exact || zr_model_load(&m, fx[i].gguf, &err)) {
            fprintf(stderr, "  %s: cannot load: %s\n", fx[i].name, err.msg);
            free(ids), free(exact);
            failed++;
            continue;
        }
        const int V = m.hp.n_vocab;
        ZrBackendOptions o = {.n_ctx = 64, .quiet = true};
        ZrBackend *be = zr_cuda_backend_create(&m, &o, &err);
        if (!be) fprintf(stderr, "  %s: cuda backend: %s\n", fx[i].name, err.msg);
        float *lg = malloc(sizeof(float) * (size_t)ZR_CUF_MM_COLS * V);
        const int ns[] = {1, 2, 5, ZR_CUF_MM_COLS};
        for (int j = 0; be && j < 4; j++) {
            const int n = ns[j] < n_ids ? ns[j] : n_ids;
            be->truncate(be, 0);
            const int rc = be->forward(be, ids, n, 0, lg, true, &err);
            if (rc) fprintf(stderr, "  %s: %s\n", fx[i].name, err.msg);
            const ZtLogitsDiff d = zt_compare_logits(lg, exact, n, V);
            const bool ok = !rc && d.worst_rel <= 1e-2;
            fprintf(stderr, "  prefill %-20s %d tokens: max|diff|/std %.3g  argmax %d/%d%s\n", fx[i].name, n, d.worst_rel,
                    d.argmax_equal, n, ok ? "  PASS" : "  FAIL");
            failed += !ok;
        }
        failed += !be;
        if (be) be->destroy(be);
        free(lg);
        free(ids);
        free(exact);
        zr_model_free(&m);
    }
    ZT_CHECKF(failed == 0, "%d prefills over tolerance", failed);
}

int main(void) { return gpu_main(); }
