/* Each GPU kernel against a CPU computation. Matrix-vector products of every weight type are
 * compared with the CPU oracle zr_dot_row (src/quant.c) on random rows of real sizes, with
 *     |gpu - ref| <= atol + rtol*|ref|,  rtol = 1e-5,  atol = 1e-5 * sum_i |w_i x_i|
 * (both sides accumulate in F32 in different orders; the rounding error of an F32 dot product
 * scales with the sum of the magnitudes of its terms, not with the result). A wrong block layout,
 * scale or nibble order gives errors of the order of the terms themselves, 10^4..10^5 times the
 * bound. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/ops.h"
#include "cuda/klaunch.h"
#include "cuda/pick.h"
#include "cuda/weights.h"
#include "gpu_env.h"
#include "gpu_weights.h"
#include "quant.h"
#include "zt_kattrs.h"
#include "sampler.h"
#include "zt.h"

static const uint32_t all_types[] = {ZR_TYPE_F32,  ZR_TYPE_F16,  ZR_TYPE_BF16, ZR_TYPE_Q8_0, ZR_TYPE_Q4_0,
                                     ZR_TYPE_Q4_1, ZR_TYPE_Q5_0, ZR_TYPE_Q5_1, ZR_TYPE_Q2_K, ZR_TYPE_Q3_K,
                                     ZR_TYPE_Q4_K, ZR_TYPE_Q5_K, ZR_TYPE_Q6_K};

/* One matrix-vector case: W[n_in, n_out], y += W x' when add, x' by mode (ZR_CUF_MV_*; GLU:
 * y[i] = silu(row i . x') * (row n_out/2 + i . x')); groups == 0: the forward pass's launch
 * shape, else that shape (blocks > 0: the tall kernel on that many blocks). */
typedef struct MvCase {
    int n_in, n_out, add, mode, groups, split, blocks;
} MvCase;

/* gemma's GELU (tanh form), in double */
static double gelu_tanh(double a) {
    return 0.5 * a * (1.0 + tanh(0.79788456080286535587989211986876 * a * (1.0 + 0.044715 * a * a)));
}

/* Runs one matrix-vector product and checks it; returns the worst |diff| / (atol + rtol|ref|)
 * (> 1 fails), or -1 when the quantizer refused the type. The reference normalizes with
 * zr_cpu_rmsnorm or gates with zr_cpu_swiglu first. GLU bounds the gated value through the
 * two dot products' bounds: |silu'| <= 1.1 times the gate's error times |up|, plus |silu(gate)|
 * times the up's error. */
static double matvec_case_x(uint32_t type, MvCase c, bool wide) {
    GpuEnv *g = gpu_env();
    const int n_in = c.n_in, n_out = c.n_out, in_mode = c.mode & 3;
    const bool glu = (c.mode & ZR_CUF_MV_GLU) != 0, with_add = c.add && !glu, gelu = (c.mode & ZR_CUF_MV_GELU) != 0;
    uint64_t s = 0x1234567ull + type * 7919ull + (uint64_t)n_in * 31 + n_out + c.mode;
    uint8_t *w = gpu_random_matrix(type, n_in, n_out, &s);
    if (!w) return -1;
    const size_t rb = zr_row_bytes(type, n_in);
    const int nx = in_mode == ZR_CUF_MV_SWIGLU ? 2 * n_in : n_in, ny = glu ? n_out / 2 : n_out;
    float *x = malloc(sizeof(float) * nx), *xr = malloc(sizeof(float) * n_in), *deq = malloc(sizeof(float) * n_in);
    float *gw = malloc(sizeof(float) * n_in);
    float *add = malloc(sizeof(float) * n_out), *y = malloc(sizeof(float) * n_out);
    double *ref = malloc(sizeof(double) * n_out), *tol = malloc(sizeof(double) * n_out);
    for (int i = 0; i < nx; i++) x[i] = (in_mode == ZR_CUF_MV_SWIGLU ? 4.0f : 1.0f) * gpu_rand(&s);
    if (wide) /* x over 7 decades (|x| from 1e-4 to 1e3), not within 1 */
        for (int i = 0; i < nx; i++) x[i] *= powf(10.0f, 3.0f - 7.0f * (0.5f + 0.5f * gpu_rand(&s)));
    for (int i = 0; i < n_in; i++) gw[i] = 1.0f + 0.2f * gpu_rand(&s);
    for (int r = 0; r < n_out; r++) add[r] = with_add ? 10.0f * gpu_rand(&s) : 0.0f;
    const float eps = 1e-5f;
    if (in_mode == ZR_CUF_MV_RMSNORM) zr_cpu_rmsnorm(xr, x, gw, n_in, eps);
    else if (in_mode == ZR_CUF_MV_SWIGLU && gelu)
        for (int i = 0; i < n_in; i++) xr[i] = (float)(gelu_tanh(x[i]) * x[n_in + i]);
    else if (in_mode == ZR_CUF_MV_SWIGLU) zr_cpu_swiglu(xr, x, x + n_in, n_in);
    else memcpy(xr, x, sizeof(float) * n_in);
    for (int r = 0; r < n_out; r++) {
        ref[r] = zr_dot_row(type, w + rb * r, xr, n_in) + add[r];
        zr_dequant_row(type, w + rb * r, deq, n_in);
        double mag = fabs(add[r]);
        for (int i = 0; i < n_in; i++) mag += fabs((double)deq[i] * xr[i]);
        tol[r] = 1e-5 * mag + 1e-5 * fabs(ref[r]);
    }
    ZrCuWeight dw = gpu_upload_weight(g, type, w, n_in, n_out);
    CUdeviceptr dx = gpu_upload(g, x, sizeof(float) * nx), dg = gpu_upload(g, gw, sizeof(float) * n_in);
    /* y = W x + y, in place; a GLU output starts as NaN (poison), so an unwritten value fails */
    CUdeviceptr dy = glu ? gpu_alloc(g, sizeof(float) * ny) : gpu_upload(g, add, sizeof(float) * n_out);
    ZrError e = {0};
    const CUdeviceptr dadd = with_add ? dy : 0, dnorm = in_mode == ZR_CUF_MV_RMSNORM ? dg : 0;
    const ZrMvShape shape = {.groups = c.groups, .split = c.split, .blocks = c.blocks};
    int rc;
    if (c.groups)
        rc = zr_cuf_matvec_shaped(&g->l, &g->k, &dw, dx, dy, dadd, dnorm, eps, c.mode, shape, &e);
    else
        rc = zr_cuf_matvec(&g->l, &g->k, &dw, dx, dy, dadd, dnorm, eps, c.mode, &e);
    if (rc) fprintf(stderr, "  %s\n", e.msg);
    double worst = rc ? 1e30 : 0.0;
    if (!rc) {
        gpu_download(g, y, dy, sizeof(float) * ny);
        for (int r = 0; r < ny; r++) {
            double want = ref[r], t = tol[r];
            if (glu) {
                /* |silu'| <= 1.1, |gelu_tanh'| <= 1.13 */
                const double gt = ref[r], up = ref[ny + r], sg = gelu ? gelu_tanh(gt) : gt / (1.0 + exp(-gt));
                want = sg * up;
                t = (gelu ? 1.2 : 1.1) * tol[r] * fabs(up) + fabs(sg) * tol[ny + r] + 1e-6 * fabs(want);
            }
            const double q = isfinite(y[r]) ? fabs((double)y[r] - want) / t : 1e30;
            if (q > worst) worst = q;
            if (q > 1.0 && worst == q)
                fprintf(stderr, "  %s [%d x %d] row %d: gpu %.9g cpu %.9g (tol %.3g)\n", zr_type_name(type), n_in,
                        n_out, r, y[r], want, t);
        }
    }
    gpu_free(g, dw.main);
    gpu_free(g, dw.side);
    gpu_free(g, dx);
    gpu_free(g, dg);
    gpu_free(g, dy);
    free(w);
    free(x);
    free(xr);
    free(gw);
    free(deq);
    free(add);
    free(y);
    free(ref);
    free(tol);
    return worst;
}

static double matvec_case(uint32_t type, MvCase c) { return matvec_case_x(type, c, false); }

static void print_case(uint32_t type, MvCase c, double q) {
    const char *mode_name[] = {"", " rmsnorm", " swiglu", " addnorm"};
    fprintf(stderr, "  matvec %-5s [%5d x %4d]%s%s%s%s", zr_type_name(type), c.n_in, c.n_out, c.add ? " +add" : "",
            mode_name[c.mode & 3], c.mode & ZR_CUF_MV_GLU ? " glu" : "", c.mode & ZR_CUF_MV_GELU ? " gelu" : "");
    if (c.groups) fprintf(stderr, " shape %dx%d", c.groups, c.split);
    if (c.blocks) fprintf(stderr, " tall on %d blocks", c.blocks);
    fprintf(stderr, ": worst |diff|/tol = %.3g\n", q);
}

static void matvec_type(uint32_t type) {
    if (!gpu_env()) return;
    const bool flt = type == ZR_TYPE_F32 || type == ZR_TYPE_F16 || type == ZR_TYPE_BF16;
    /* (n_in, n_out, add, mode[, groups, split]): the brief's 4096 x 1024, odd row counts (a
     * partial last warp), a row longer than 48 KiB of shared memory (14336: the 8B FFN), the
     * fused input norm and SwiGLU, the gated output (stacked gate|up, odd halves too), every
     * launch shape (split-K 1..8, 1..8 row groups per block, a partial last block), the tall
     * kernel (several tiles per block, a partial last tile, split-K and GLU), and for float types
     * rows that are not a multiple of the 16-byte item (stories260K's 172, also through the fused
     * paths and split, and tall) and an odd length */
    const int R = ZR_CUF_MV_RMSNORM, S = ZR_CUF_MV_SWIGLU, GL = ZR_CUF_MV_GLU, GE = ZR_CUF_MV_GELU;
    const MvCase cases[] = {{4096, 1024, 1, 0, 0, 0, 0},  {2048, 37, 0, 0, 0, 0, 0},   {14336, 40, 1, S, 0, 0, 0},
                            {4096, 96, 1, R, 0, 0, 0},    {256, 5, 0, 0, 0, 0, 0},     {512, 33, 0, S, 0, 0, 0},
                            {4096, 200, 0, R | GL, 0, 0, 0}, {2048, 74, 0, GL, 0, 0, 0}, {4096, 1000, 1, R, 1, 8, 0},
                            {4096, 333, 1, 0, 2, 4, 0},   {4096, 1000, 0, R | GL, 4, 2, 0}, {2048, 130, 1, 0, 8, 1, 0},
                            {8192, 300, 1, 0, 16, 1, 0},  {4096, 90, 0, R, 2, 8, 0},   {14336, 66, 1, 0, 4, 4, 0},
                            /* tall: 63 tiles on 5 blocks, 32 on 3 with split-K, 21 with GLU on 2 */
                            {2560, 1000, 1, R, 8, 1, 5}, {4096, 250, 1, 0, 4, 2, 3}, {2048, 330, 0, R | GL, 8, 1, 2},
                            /* gemma's GeGLU: gated output and gated staging (issue 14) */
                            {4096, 200, 0, R | GL | GE, 0, 0, 0}, {2048, 74, 0, GL | GE, 2, 2, 0}, {10240, 40, 1, S | GE, 0, 0, 0},
                            {172, 64, 1, 0, 0, 0, 0},     {4099, 33, 0, 0, 0, 0, 0},   {172, 24, 0, R, 0, 0, 0},
                            {172, 20, 1, S, 0, 0, 0},     {172, 30, 1, 0, 1, 4, 0},    {4099, 50, 0, R | GL, 2, 2, 0},
                            {172, 300, 1, R, 4, 1, 3}};
    const int n_cases = sizeof cases / sizeof cases[0] - (flt ? 0 : 7);
    double worst = 0;
    for (int i = 0; i < n_cases; i++) {
        const double q = matvec_case(type, cases[i]);
        ZT_CHECKF(q >= 0, "the quantizer refused %s", zr_type_name(type));
        print_case(type, cases[i], q);
        if (q > worst) worst = q;
    }
    ZT_CHECKF(worst <= 1.0, "%s: worst |diff|/tol %.3g", zr_type_name(type), worst);
    /* blocks of 1024 threads (split downs and wo, session 19) in every type whose kernel holds them
     * (every type since session 29: Q5_0 and Q5_1 at 64 registers); a kernel of more registers (the
     * driver's block limit under 1024) is refused before launch */
    const MvCase big[] = {{14336, 66, 1, 0, 16, 2, 0}, {4096, 200, 0, R, 32, 1, 0}, {2048, 330, 0, R | GL, 16, 2, 0}};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        const double q = matvec_case(type, big[i]);
        print_case(type, big[i], q);
        if (zr_cuf_kernel_max_threads(&gpu_env()->k.mv[type]) >= 1024) ZT_CHECKF(q >= 0 && q <= 1.0, "%s, 1024 threads: worst |diff|/tol %.3g", zr_type_name(type), q);
        else ZT_CHECKF(q >= 1e30, "%s: a block of 1024 threads launched (%.3g)", zr_type_name(type), q);
    }
    /* row groups that are no power of two (a block per tile finds its rows by a multiply, session
     * 40): Gemma-3-4B's wo as the forward pass launches it (128 blocks of 10), a partial last block
     * of 3, 9 with the SwiGLU staging, 5 unsplit with GLU */
    const MvCase odd[] = {{2048, 2560, 1, 0, 10, 2, 0}, {4096, 333, 1, 0, 3, 2, 0}, {2304, 250, 0, S, 9, 2, 0},
                          {2048, 202, 0, R | GL, 5, 1, 0}};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        const double q = matvec_case(type, odd[i]);
        print_case(type, odd[i], q);
        ZT_CHECKF(q >= 0 && q <= 1.0, "%s, %d row groups a block: worst |diff|/tol %.3g", zr_type_name(type), odd[i].groups, q);
    }
    /* the forward pass's pick for Llama-3.2-1B's gate|up (8192 results of 2048 values: tall from
     * 2 items a lane since session 40, but in Q6_K and Q3_K) */
    const MvCase gu = {2048, 2 * 8192, 0, R | GL, 0, 0, 0};
    const double q = matvec_case(type, gu);
    print_case(type, gu, q);
    ZT_CHECKF(q >= 0 && q <= 1.0, "%s, llama3.2-1b gate|up: worst |diff|/tol %.3g", zr_type_name(type), q);
}

/* ZR_CUF_MV_ADDNORM (gemma's post norm folded into the next product): y = W RMSNorm(x') * norm_w
 * with x' = x + RMSNorm(r) * post_w, which block 0 writes to x_out (r's sum of squares from the
 * pieces after it, gpu_upload_post_r's, as a product with SSQ leaves them); the CPU computes x' and the
 * product as rmsnorm_add_f32 + matvec RMSNORM would (the tolerance of matvec_case on y, x'
 * within 1e-5 of its terms: the sums of squares run in another order); x and r untouched. With GLU | GELU: gemma's gate|up. Returns the worst
 * |diff| / tol (> 1 fails), -1 when the quantizer refused the type. */
static double matvec_post_case(uint32_t type, int n_in, int n_out, int mode) {
    GpuEnv *g = gpu_env();
    const bool glu = (mode & ZR_CUF_MV_GLU) != 0, gelu = (mode & ZR_CUF_MV_GELU) != 0;
    uint64_t s = 0x7654321ull + type * 131ull + (uint64_t)n_in * 7 + n_out + mode;
    uint8_t *w = gpu_random_matrix(type, n_in, n_out, &s);
    if (!w) return -1;
    const size_t rb = zr_row_bytes(type, n_in);
    const int ny = glu ? n_out / 2 : n_out;
    float *x = malloc(sizeof(float) * n_in), *r = malloc(sizeof(float) * n_in), *pw = malloc(sizeof(float) * n_in);
    float *nw = malloc(sizeof(float) * n_in), *xp = malloc(sizeof(float) * n_in), *xr = malloc(sizeof(float) * n_in);
    float *deq = malloc(sizeof(float) * n_in), *y = malloc(sizeof(float) * ny), *got_x = malloc(sizeof(float) * n_in);
    float *back = malloc(sizeof(float) * n_in);
    double *ref = malloc(sizeof(double) * n_out), *tol = malloc(sizeof(double) * n_out);
    for (int i = 0; i < n_in; i++) {
        x[i] = 3.0f * gpu_rand(&s);
        r[i] = 20.0f * gpu_rand(&s);
        pw[i] = 1.0f + 0.3f * gpu_rand(&s);
        nw[i] = 1.0f + 0.2f * gpu_rand(&s);
    }
    const float eps = 1e-6f;
    zr_cpu_rmsnorm(xp, r, pw, n_in, eps);
    for (int i = 0; i < n_in; i++) xp[i] += x[i];
    zr_cpu_rmsnorm(xr, xp, nw, n_in, eps);
    for (int o = 0; o < n_out; o++) {
        ref[o] = zr_dot_row(type, w + rb * o, xr, n_in);
        zr_dequant_row(type, w + rb * o, deq, n_in);
        double mag = 0;
        for (int i = 0; i < n_in; i++) mag += fabs((double)deq[i] * xr[i]);
        tol[o] = 1e-5 * mag + 1e-5 * fabs(ref[o]);
    }
    ZrCuWeight dw = gpu_upload_weight(g, type, w, n_in, n_out);
    int n_ss = 0;
    CUdeviceptr dx = gpu_upload(g, x, sizeof(float) * n_in), dr = gpu_upload_post_r(g, r, n_in, &n_ss);
    CUdeviceptr dpw = gpu_upload(g, pw, sizeof(float) * n_in), dnw = gpu_upload(g, nw, sizeof(float) * n_in);
    CUdeviceptr dy = gpu_alloc(g, sizeof(float) * ny), dxo = gpu_alloc(g, sizeof(float) * n_in);
    ZrError e = {0};
    const ZrMvPost p = {.r = dr, .post_w = dpw, .x_out = dxo, .n_ss = n_ss};
    const int rc = zr_cuf_matvec_post(&g->l, &g->k, &dw, dx, &p, dy, dnw, eps, mode, &e);
    if (rc) fprintf(stderr, "  %s\n", e.msg);
    double worst = rc ? 1e30 : 0.0;
    if (!rc) {
        gpu_download(g, y, dy, sizeof(float) * ny);
        gpu_download(g, got_x, dxo, sizeof(float) * n_in);
        for (int i = 0; i < n_in; i++) { /* relative to the terms: x and the normed r */
            const double tx = 1e-5 * (fabs(x[i]) + fabs(xp[i] - x[i])) + 1e-7;
            const double q = isfinite(got_x[i]) ? fabs(got_x[i] - xp[i]) / tx : 1e30;
            if (q > worst) worst = q;
        }
        gpu_download(g, back, dx, sizeof(float) * n_in);
        if (memcmp(back, x, sizeof(float) * n_in)) worst = 1e30;
        gpu_download(g, back, dr, sizeof(float) * n_in);
        if (memcmp(back, r, sizeof(float) * n_in)) worst = 1e30;
        for (int o = 0; o < ny; o++) {
            double want = ref[o], t = tol[o];
            if (glu) {
                const double gt = ref[o], up = ref[ny + o], sg = gelu ? gelu_tanh(gt) : gt / (1.0 + exp(-gt));
                want = sg * up;
                t = (gelu ? 1.2 : 1.1) * tol[o] * fabs(up) + fabs(sg) * tol[ny + o] + 1e-6 * fabs(want);
            }
            const double q = isfinite(y[o]) ? fabs((double)y[o] - want) / t : 1e30;
            if (q > worst) worst = q;
        }
    }
    CUdeviceptr bufs[] = {dw.main, dw.side, dx, dr, dpw, dnw, dy, dxo};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) gpu_free(g, bufs[i]);
    free(w), free(x), free(r), free(pw), free(nw), free(xp), free(xr), free(deq), free(y), free(got_x), free(back);
    free(ref), free(tol);
    return worst;
}

/* The launch shapes read each decode product's block limit and registers from the driver
 * (ZrKernel.max_threads, .regs; cuda/mv_shape.c); the shape tests without a GPU take sm_90's from
 * zt_kernel_attrs. Both give every rule the same answers: the largest block under 1024 or not, and
 * the blocks an SM holds of 256, 512 and 1024 threads, for every type's matvec, _tall, _tall_rn,
 * matvec_id and _flat kernel. */
ZT_TEST(the_loaded_kernels_report_the_block_limits_and_registers_the_shape_tests_assume) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    ZrCuKernels fake = g->k;
    zt_kernel_attrs(&fake);
    int differ = 0, checked = 0;
    for (uint32_t t = 0; t < ZR_TYPE_COUNT; t++) {
        const ZrKernel *real[5] = {g->k.has_mv[t] ? &g->k.mv[t] : NULL, g->k.has_mvt[t] ? &g->k.mvt[t] : NULL,
                                   g->k.has_mvt_rn[t] ? &g->k.mvt_rn[t] : NULL,
                                   g->k.has_mv_id[t] ? &g->k.mv_id[t] : NULL,
                                   g->k.has_mv_idflat[t] ? &g->k.mv_idflat[t] : NULL};
        const ZrKernel *want[5] = {&fake.mv[t], &fake.mvt[t], &fake.mvt_rn[t], &fake.mv_id[t], &fake.mv_idflat[t]};
        for (int i = 0; i < 5; i++) {
            if (!real[i]) continue;
            checked++;
            bool same = real[i]->regs > 0 && real[i]->max_threads > 0 &&
                        (zr_cuf_kernel_max_threads(real[i]) < 1024) == (zr_cuf_kernel_max_threads(want[i]) < 1024);
            for (int threads = 256; threads <= 1024; threads *= 2)
                same = same && zr_cuf_kernel_blocks_per_sm(real[i], threads) == zr_cuf_kernel_blocks_per_sm(want[i], threads);
            if (!same) {
                differ++;
                fprintf(stderr, "  %s: %d registers, blocks of at most %d threads; the shape tests assume %d, %d\n", real[i]->name,
                        real[i]->regs, real[i]->max_threads, want[i]->regs, want[i]->max_threads);
            }
        }
    }
    fprintf(stderr, "  %d decode product kernels: %d answer a shape rule otherwise than zt_kernel_attrs%s\n", checked, differ,
            differ ? "  FAIL" : "  PASS");
    ZT_CHECK(checked >= 40 && differ == 0);
}

ZT_TEST(matvec_addnorm_folds_the_post_norm_and_writes_the_residual) {
    if (!gpu_env()) return;
    const uint32_t types[] = {ZR_TYPE_F32, ZR_TYPE_F16, ZR_TYPE_Q8_0, ZR_TYPE_Q4_K, ZR_TYPE_Q6_K, ZR_TYPE_Q5_K, ZR_TYPE_Q3_K, ZR_TYPE_Q2_K};
    const int GL = ZR_CUF_MV_GLU, GE = ZR_CUF_MV_GELU;
    /* (n_in, n_out, mode): Gemma-3-4B's QKV and gate|up rows (2560), 12B's (3840), a short row */
    const int cases[][3] = {{2560, 300, 0}, {3840, 200, GL | GE}, {2560, 64, GL | GE}, {256, 40, 0}};
    double worst = 0;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            const double q = matvec_post_case(types[t], cases[c][0], cases[c][1], cases[c][2]);
            ZT_CHECKF(q >= 0, "the quantizer refused %s", zr_type_name(types[t]));
            fprintf(stderr, "  matvec addnorm %-5s [%5d x %4d]%s: worst |diff|/tol = %.3g\n", zr_type_name(types[t]),
                    cases[c][0], cases[c][1], cases[c][2] ? " glu gelu" : "", q);
            if (q > worst) worst = q;
        }
    ZT_CHECKF(worst <= 1.0, "addnorm: worst |diff|/tol %.3g", worst);
}

/* ZR_CUF_MV_SSQ (the product before a gemma post norm): the results are the bits of the same
 * product without it, and after them come zr_cuf_mv_grid floats, block b's being the sum of the
 * squares of the results its warps wrote: per warp (row group) its rows' squares added, then per
 * block the warps in order. The host repeats that order on the results the
 * GPU wrote (a warp's squares are one or two nonzero lanes of a butterfly: its sum is exact to
 * repeat), so the pieces must match bit for bit; nothing past them is written. */
static int ssq_case(GpuEnv *g, uint32_t type, int n_in, int n_out, int mode, ZrMvShape shape, const char *what) {
    uint64_t s = 0xabcdefull + type * 31ull + (uint64_t)n_in * 3 + n_out + mode;
    uint8_t *w = gpu_random_matrix(type, n_in, n_out, &s);
    if (!w) return -1;
    ZrCuWeight dw = gpu_upload_weight(g, type, w, n_in, n_out);
    const bool glu = (mode & ZR_CUF_MV_GLU) != 0;
    const int nx = (mode & 3) == ZR_CUF_MV_SWIGLU ? 2 * n_in : n_in, n_res = glu ? n_out / 2 : n_out;
    if (!shape.groups) shape = zr_cuf_mv_shape(&g->k, &dw, mode);
    const int n_pieces = (int)zr_cuf_mv_grid(&dw, mode, shape), guard = 64;
    float *x = malloc(sizeof(float) * nx), *nw = malloc(sizeof(float) * n_in);
    float *y0 = malloc(sizeof(float) * n_res), *y1 = malloc(sizeof(float) * (n_res + n_pieces + guard));
    for (int i = 0; i < nx; i++) x[i] = gpu_rand(&s);
    for (int i = 0; i < n_in; i++) nw[i] = 1.0f + 0.2f * gpu_rand(&s);
    CUdeviceptr dx = gpu_upload(g, x, sizeof(float) * nx), dn = gpu_upload(g, nw, sizeof(float) * n_in);
    CUdeviceptr dy0 = gpu_alloc(g, sizeof(float) * n_res), dy1 = gpu_alloc(g, sizeof(float) * (n_res + n_pieces + guard));
    ZrError e = {0};
    int rc = zr_cuf_matvec_shaped(&g->l, &g->k, &dw, dx, dy0, 0, dn, 1e-5f, mode, shape, &e);
    if (!rc) rc = zr_cuf_matvec_shaped(&g->l, &g->k, &dw, dx, dy1, 0, dn, 1e-5f, mode | ZR_CUF_MV_SSQ, shape, &e);
    int bad = 0;
    if (rc) {
        fprintf(stderr, "  %s\n", e.msg);
        bad = 1;
    } else {
        gpu_download(g, y0, dy0, sizeof(float) * n_res);
        gpu_download(g, y1, dy1, sizeof(float) * (n_res + n_pieces + guard));
        if (memcmp(y0, y1, sizeof(float) * n_res)) bad = 1;
        const int per = glu ? zr_cuf_mv_rows_per_warp(type) / 2 : zr_cuf_mv_rows_per_warp(type), G = shape.groups;
        for (int b = 0; b < n_pieces; b++) {
            float t = 0.f;
            for (int gi = 0; gi < G; gi++) {
                float wsq = 0.f;
                for (int r = 0; r < per; r++) {
                    const int o = (b * G + gi) * per + r;
                    if (o < n_res) {
                        const float sq = y1[o] * y1[o];
                        wsq += sq;
                    }
                }
                t += wsq;
            }
            if (memcmp(&t, &y1[n_res + b], sizeof t)) {
                if (!bad) fprintf(stderr, "  piece %d of %d: %.9g, the host's %.9g\n", b, n_pieces, y1[n_res + b], t);
                bad = 1;
            }
        }
        for (int i = 0; i < guard; i++) bad |= !isnan(y1[n_res + n_pieces + i]); /* gpu_alloc's NaN poison */
    }
    fprintf(stderr, "  matvec ssq %-5s [%5d x %4d] %s (%dx%d%s, %d pieces): %s\n", zr_type_name(type), n_in, n_out, what,
            shape.groups, shape.split, shape.blocks ? ", tall" : "", n_pieces, bad ? "FAIL" : "ok");
    const CUdeviceptr bufs[] = {dw.main, dw.side, dx, dn, dy0, dy1};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) gpu_free(g, bufs[i]);
    free(w), free(x), free(nw), free(y0), free(y1);
    return bad;
}

ZT_TEST(matvec_ssq_writes_each_blocks_sum_of_squares_after_its_results) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    const uint32_t types[] = {ZR_TYPE_F32, ZR_TYPE_F16, ZR_TYPE_Q8_0, ZR_TYPE_Q4_K, ZR_TYPE_Q6_K, ZR_TYPE_Q5_K};
    const int S = ZR_CUF_MV_SWIGLU, GL = ZR_CUF_MV_GLU, GE = ZR_CUF_MV_GELU;
    /* Gemma-3-4B's wo and down (GeGLU staged: gate|up as two matrices), 12B's wo, split-K with a
     * partial last block, GLU, a partial last row group (the tall kernel refuses SSQ) */
    const struct {
        int n_in, n_out, mode;
        ZrMvShape shape;
        const char *what;
    } cases[] = {{2048, 2560, 0, {0}, "g3-4b wo"},       {10240, 2560, S | GE, {0}, "g3-4b down"},
                 {4096, 3840, 0, {0}, "g3-12b wo"},      {4096, 1000, 0, {4, 2, 0, 0}, "split-K"},
                 {2048, 202, GL, {2, 2, 0, 0}, "glu"},      {2560, 1000, 0, {8, 1, 0, 0}, "partial last warp"}};
    int failed = 0;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            const int r = ssq_case(g, types[t], cases[c].n_in, cases[c].n_out, cases[c].mode, cases[c].shape, cases[c].what);
            ZT_CHECKF(r >= 0, "the quantizer refused %s", zr_type_name(types[t]));
            failed += r > 0;
        }
    ZT_CHECKF(failed == 0, "%d ssq cases differ", failed);
}

/* The tall kernel (several tiles of rows per block, x staged once) gives every row the bits of a
 * block per tile; the forward pass's pick (zr_cuf_mv_shape) takes it for a matrix of 32 tiles of
 * 16 rows per multiprocessor and more (gemma3's 262144-row output), through which the plain,
 * RMSNORM (on the kernel built for it, _tall_rn, in the K-quants, Q4_1 and Q8_0) and ADDNORM
 * (gemma's pending post norm) products stay within matvec_case's bounds
 * (Q6_K's rows of 256 values, 8 items, take the tensor-core product there: zr_cuf_mv_mma_takes). */
ZT_TEST(matvec_tall_is_bit_equal_and_takes_vocabulary_outputs) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    const uint32_t types[] = {ZR_TYPE_F16,  ZR_TYPE_Q8_0, ZR_TYPE_Q4_K, ZR_TYPE_Q6_K,
                              ZR_TYPE_Q5_K, ZR_TYPE_Q3_K, ZR_TYPE_Q2_K, ZR_TYPE_Q4_1};
    const int n_in = 256, n_out = 16 * 32 * g->k.sm_count + 37, R = ZR_CUF_MV_RMSNORM; /* a partial last tile */
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const uint32_t type = types[t];
        uint64_t s = 0xfeedull + type;
        uint8_t *w = gpu_random_matrix(type, n_in, n_out, &s);
        ZT_CHECKF(w != NULL, "the quantizer refused %s", zr_type_name(type));
        if (!w) return;
        ZrCuWeight dw = gpu_upload_weight(g, type, w, n_in, n_out);
        const ZrMvShape tall = zr_cuf_mv_shape(&g->k, &dw, R), one = {.groups = tall.groups, .split = tall.split};
        const int tiles = (n_out / 2 + 1 + tall.groups - 1) / tall.groups;
        ZT_CHECKF(tall.blocks > 0 && tall.blocks < tiles, "%s [%d x %d]: the pick is %dx%d on %d blocks, not tall",
                  zr_type_name(type), n_in, n_out, tall.groups, tall.split, tall.blocks);
        float *x = malloc(sizeof(float) * n_in), *nw = malloc(sizeof(float) * n_in);
        float *y1 = malloc(sizeof(float) * n_out), *y2 = malloc(sizeof(float) * n_out);
        for (int i = 0; i < n_in; i++) {
            x[i] = gpu_rand(&s);
            nw[i] = 1.0f + 0.2f * gpu_rand(&s);
        }
        CUdeviceptr dx = gpu_upload(g, x, sizeof(float) * n_in), dn = gpu_upload(g, nw, sizeof(float) * n_in);
        CUdeviceptr dy1 = gpu_alloc(g, sizeof(float) * n_out), dy2 = gpu_alloc(g, sizeof(float) * n_out);
        ZrError e = {0};
        int rc = zr_cuf_matvec_shaped(&g->l, &g->k, &dw, dx, dy1, 0, dn, 1e-5f, R, one, &e);
        if (!rc) rc = zr_cuf_matvec_shaped(&g->l, &g->k, &dw, dx, dy2, 0, dn, 1e-5f, R, tall, &e);
        ZT_CHECKF(!rc, "%s", e.msg);
        gpu_download(g, y1, dy1, sizeof(float) * n_out);
        gpu_download(g, y2, dy2, sizeof(float) * n_out);
        int differ = 0;
        for (int r = 0; r < n_out; r++) differ += memcmp(&y1[r], &y2[r], sizeof(float)) != 0;
        ZT_CHECKF(!rc && differ == 0, "%s [%d x %d]: %d rows of the tall kernel (%d blocks) differ from a block per tile",
                  zr_type_name(type), n_in, n_out, differ, tall.blocks);
        fprintf(stderr, "  matvec tall %-5s [%d x %d] on %d blocks of %dx%d: %d of %d rows differ from a block per tile\n",
                zr_type_name(type), n_in, n_out, tall.blocks, tall.groups, tall.split, differ, n_out);
        const CUdeviceptr bufs[] = {dw.main, dw.side, dx, dn, dy1, dy2};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) gpu_free(g, bufs[i]);
        free(w), free(x), free(nw), free(y1), free(y2);
        const MvCase cases[] = {{n_in, n_out, 1, 0, 0, 0, 0}, {n_in, n_out, 0, R, 0, 0, 0}};
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            const double q = matvec_case(type, cases[c]);
            print_case(type, cases[c], q);
            ZT_CHECKF(q >= 0 && q <= 1.0, "%s tall: worst |diff|/tol %.3g", zr_type_name(type), q);
        }
        const double q = matvec_post_case(type, n_in, n_out, 0);
        fprintf(stderr, "  matvec addnorm %-5s [%d x %d] (tall): worst |diff|/tol = %.3g\n", zr_type_name(type), n_in,
                n_out, q);
        ZT_CHECKF(q >= 0 && q <= 1.0, "%s tall addnorm: worst |diff|/tol %.3g", zr_type_name(type), q);
    }
}

/* Q6_K's tall products with rows of items that leave lanes of the float product idle
 * (Gemma-3-4B's vocabulary output: 2560 values, 80 items; gemma2-2b's 2304, 72) take the
 * tensor-core kernel (cu/matvec_mma.cu): x' as two halves, each group of 16 summed by the mma. It
 * stays within matvec_case's bounds as the float kernel does (both printed), with x over 7
 * decades (the hi/lo split after the block's power-of-two scale), with an addend, normed and
 * after gemma's pending post norm, and a partial last tile of 16 rows. Rows of 120 and 128 items
 * (Gemma-3-12B's, Llama-3-8B's) keep the float kernel. */
ZT_TEST(matvec_q6_k_tall_products_take_the_tensor_cores) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    const int n_out = 16 * 32 * g->k.sm_count + 37, R = ZR_CUF_MV_RMSNORM;
    const int float_rows[] = {3840, 4096};
    for (size_t i = 0; i < sizeof float_rows / sizeof float_rows[0]; i++) {
        const ZrCuWeight w = {.type = ZR_TYPE_Q6_K, .n_in = float_rows[i], .n_out = n_out};
        ZT_CHECKF(!zr_cuf_mv_mma_takes(&g->k, &w, R, zr_cuf_mv_shape(&g->k, &w, R)),
                  "q6_K [%d x %d] went to the tensor cores", float_rows[i], n_out);
    }
    const MvCase cases[] = {{2560, n_out, 1, 0, 0, 0, 0}, {2560, n_out, 0, R, 0, 0, 0}, {2304, n_out, 0, R, 0, 0, 0}};
    const bool wide[] = {false, true, false};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const ZrCuWeight probe = {.type = ZR_TYPE_Q6_K, .n_in = cases[c].n_in, .n_out = n_out};
        const ZrMvShape tall = zr_cuf_mv_shape(&g->k, &probe, cases[c].mode);
        ZT_CHECKF(zr_cuf_mv_mma_takes(&g->k, &probe, cases[c].mode, tall), "q6_K [%d x %d]: not on the tensor cores",
                  cases[c].n_in, n_out);
        const double q = matvec_case_x(ZR_TYPE_Q6_K, cases[c], wide[c]);
        MvCase fl = cases[c]; /* the float tall kernel on the same product, for comparison */
        fl.groups = tall.groups, fl.split = tall.split, fl.blocks = tall.blocks;
        const double qf = matvec_case_x(ZR_TYPE_Q6_K, fl, wide[c]);
        fprintf(stderr, "  matvec q6_K [%d x %d]%s%s%s: worst |diff|/tol %.3g on the tensor cores, %.3g in floats\n",
                cases[c].n_in, n_out, cases[c].add ? " +add" : "", cases[c].mode == R ? " rmsnorm" : "",
                wide[c] ? " wide x" : "", q, qf);
        ZT_CHECKF(q >= 0 && q <= 1.0, "q6_K mma [%d x %d]: worst |diff|/tol %.3g", cases[c].n_in, n_out, q);
    }
    const double q = matvec_post_case(ZR_TYPE_Q6_K, 2560, n_out, 0);
    fprintf(stderr, "  matvec addnorm q6_K [2560 x %d] (tensor cores): worst |diff|/tol = %.3g\n", n_out, q);
    ZT_CHECKF(q >= 0 && q <= 1.0, "q6_K mma addnorm: worst |diff|/tol %.3g", q);
}

/* The flat gate|up product (cu/matvec_glu_flat.cu) takes Q4_K's Gemma-3-4B shape (10240 results
 * of 80 items: 2.42 results a warp of the tall product, its lanes idle in a third of the steps),
 * also with an odd count of results (runs cut across results everywhere), and is held to
 * matvec_case's bounds with the tall float product's figure beside it; full rows keep the tall
 * product: Llama-3.2-3B's 96 items, Llama-3-8B's 128, and Q8_0 (160 items of 16 values). */
ZT_TEST(matvec_glu_flat_cuts_results_across_warps) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    const int R = ZR_CUF_MV_RMSNORM, GL = ZR_CUF_MV_GLU, GE = ZR_CUF_MV_GELU;
    const ZrCuWeight tall[] = {{.type = ZR_TYPE_Q4_K, .n_in = 3072, .n_out = 2 * 8192},
                               {.type = ZR_TYPE_Q4_K, .n_in = 4096, .n_out = 2 * 14336},
                               {.type = ZR_TYPE_Q8_0, .n_in = 2560, .n_out = 2 * 10240}};
    for (size_t i = 0; i < sizeof tall / sizeof tall[0]; i++)
        ZT_CHECKF(!zr_cuf_mv_flat_takes(&g->k, &tall[i], R | GL, zr_cuf_mv_shape(&g->k, &tall[i], R | GL)),
                  "%s [%d x %d] took the flat product", zr_type_name(tall[i].type), tall[i].n_in, tall[i].n_out);
    const MvCase cases[] = {{2560, 2 * 10240, 0, R | GL | GE, 0, 0, 0}, {2560, 2 * 10241, 0, R | GL, 0, 0, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const ZrCuWeight probe = {.type = ZR_TYPE_Q4_K, .n_in = cases[c].n_in, .n_out = cases[c].n_out};
        const ZrMvShape shape = zr_cuf_mv_shape(&g->k, &probe, cases[c].mode);
        ZT_CHECKF(zr_cuf_mv_flat_takes(&g->k, &probe, cases[c].mode, shape), "q4_K [%d x %d]: not the flat product",
                  cases[c].n_in, cases[c].n_out);
        const double q = matvec_case(ZR_TYPE_Q4_K, cases[c]);
        MvCase fl = cases[c]; /* the tall float product on the same product, for comparison */
        fl.groups = shape.groups, fl.split = shape.split, fl.blocks = shape.blocks;
        const double qf = matvec_case(ZR_TYPE_Q4_K, fl);
        fprintf(stderr, "  matvec q4_K [%d x %d]%s: worst |diff|/tol %.3g flat, %.3g tall\n", cases[c].n_in,
                cases[c].n_out, cases[c].mode & GE ? " gelu" : "", q, qf);
        ZT_CHECKF(q >= 0 && q <= 1.0, "q4_K flat [%d x %d]: worst |diff|/tol %.3g", cases[c].n_in, cases[c].n_out, q);
    }
    const double q = matvec_post_case(ZR_TYPE_Q4_K, 2560, 2 * 10240, GL | GE);
    fprintf(stderr, "  matvec addnorm q4_K [2560 x %d] glu gelu (flat): worst |diff|/tol = %.3g\n", 2 * 10240, q);
    ZT_CHECKF(q >= 0 && q <= 1.0, "q4_K flat addnorm: worst |diff|/tol %.3g", q);
}

/* The balanced gate|up product against the tall one on the same GLU product (RMSNORM, GELU): each
 * block's whole rounds of a result a warp (cu/matvec_glu_bal.cu) give the tall product's bits, and
 * the remainder's rows are counted; returns the rows of whole rounds that differ (all of them
 * when a launch failed), -1 when the quantizer refused the type */
static int bal_rounds_differ(GpuEnv *g, uint32_t type, int n_in, int n_res, int *n_rem) {
    const int mode = ZR_CUF_MV_RMSNORM | ZR_CUF_MV_GLU | ZR_CUF_MV_GELU, n_out = 2 * n_res;
    uint64_t s = 0xba1ull + type;
    uint8_t *w = gpu_random_matrix(type, n_in, n_out, &s);
    if (!w) return -1;
    ZrCuWeight dw = gpu_upload_weight(g, type, w, n_in, n_out);
    float *x = malloc(sizeof(float) * n_in), *nw = malloc(sizeof(float) * n_in);
    float *y1 = malloc(sizeof(float) * n_res), *y2 = malloc(sizeof(float) * n_res);
    for (int i = 0; i < n_in; i++) {
        x[i] = gpu_rand(&s);
        nw[i] = 1.0f + 0.2f * gpu_rand(&s);
    }
    CUdeviceptr dx = gpu_upload(g, x, sizeof(float) * n_in), dn = gpu_upload(g, nw, sizeof(float) * n_in);
    CUdeviceptr dy1 = gpu_alloc(g, sizeof(float) * n_res), dy2 = gpu_alloc(g, sizeof(float) * n_res);
    ZrError e = {0};
    const ZrMvShape tall = zr_cuf_mv_shape(&g->k, &dw, mode);
    int rc = zr_cuf_matvec_shaped(&g->l, &g->k, &dw, dx, dy1, 0, dn, 1e-5f, mode, tall, &e);
    if (!rc) rc = zr_cuf_matvec(&g->l, &g->k, &dw, dx, dy2, 0, dn, 1e-5f, mode, &e);
    if (rc) fprintf(stderr, "  %s\n", e.msg);
    gpu_download(g, y1, dy1, sizeof(float) * n_res);
    gpu_download(g, y2, dy2, sizeof(float) * n_res);
    /* the kernel's cut: one wave of blocks, block b's results [b U / B, (b + 1) U / B) */
    const ZrKernel *kern = zr_cuf_mv_bal_kernel(&g->k, type, mode);
    long blocks = (long)g->k.sm_count * zr_cuf_kernel_blocks_per_sm(kern, ZR_CUF_MV_BAL_THREADS);
    if (blocks > n_res) blocks = n_res;
    int differ = rc ? n_res : 0;
    *n_rem = 0;
    for (long b = 0; b < blocks; b++) {
        const long lo = b * n_res / blocks, hi = (b + 1) * n_res / blocks, whole = lo + (hi - lo) / 16 * 16;
        for (long r = lo; r < whole; r++) differ += memcmp(&y1[r], &y2[r], sizeof(float)) != 0;
        *n_rem += (int)(hi - whole);
    }
    const CUdeviceptr bufs[] = {dw.main, dw.side, dx, dn, dy1, dy2};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) gpu_free(g, bufs[i]);
    free(w), free(x), free(nw), free(y1), free(y2);
    return differ;
}

/* The balanced gate|up product (cu/matvec_glu_bal.cu) takes the GLU products whose tiles of 16
 * results leave the tall product's last round to some of its blocks: Llama-3-8B's Q4_K (14336
 * results of 4096 values: 3.39 a warp), Q8_0, Q4_0, Q4_1 and Q5_K, Gemma-3-4B's Q8_0,
 * Gemma-3-12B's Q4_K and Q8_0 (30 steps against 32), a 14B's Q2_K (Gemma-3-4B's Q4_K takes the flat
 * product, before it), Q5_0's and Q5_1's (session 29); not Llama-3.2-3B's 8192 results (2 rounds
 * either way), nor Q6_K (no such kernel). Its whole rounds give the tall product's bits; the whole
 * product stays within matvec_case's bounds, the tall one's figure beside it, and after gemma's
 * pending post norm. */
ZT_TEST(matvec_glu_bal_deals_the_last_round_by_steps) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    const int R = ZR_CUF_MV_RMSNORM, GL = ZR_CUF_MV_GLU, GE = ZR_CUF_MV_GELU;
    const ZrCuWeight takes[] = {{.type = ZR_TYPE_Q4_K, .n_in = 4096, .n_out = 2 * 14336},
                                {.type = ZR_TYPE_Q8_0, .n_in = 2560, .n_out = 2 * 10240},
                                {.type = ZR_TYPE_Q8_0, .n_in = 4096, .n_out = 2 * 14336},
                                {.type = ZR_TYPE_Q4_K, .n_in = 3840, .n_out = 2 * 15360},
                                {.type = ZR_TYPE_Q8_0, .n_in = 3840, .n_out = 2 * 15360},
                                {.type = ZR_TYPE_Q4_0, .n_in = 4096, .n_out = 2 * 14336},
                                {.type = ZR_TYPE_Q4_1, .n_in = 4096, .n_out = 2 * 14336},
                                {.type = ZR_TYPE_Q5_K, .n_in = 4096, .n_out = 2 * 14336},
                                {.type = ZR_TYPE_Q2_K, .n_in = 5120, .n_out = 2 * 13824},
                                {.type = ZR_TYPE_Q5_0, .n_in = 4096, .n_out = 2 * 14336},
                                {.type = ZR_TYPE_Q5_1, .n_in = 4096, .n_out = 2 * 14336}};
    const ZrCuWeight keeps[] = {{.type = ZR_TYPE_Q4_K, .n_in = 3072, .n_out = 2 * 8192},
                                {.type = ZR_TYPE_Q8_0, .n_in = 3072, .n_out = 2 * 8192},
                                {.type = ZR_TYPE_Q6_K, .n_in = 4096, .n_out = 2 * 14336}};
    for (size_t i = 0; i < sizeof takes / sizeof takes[0]; i++)
        ZT_CHECKF(zr_cuf_mv_bal_takes(&g->k, &takes[i], R | GL, zr_cuf_mv_shape(&g->k, &takes[i], R | GL)),
                  "%s [%d x %d]: not the balanced product", zr_type_name(takes[i].type), takes[i].n_in, takes[i].n_out);
    for (size_t i = 0; i < sizeof keeps / sizeof keeps[0]; i++)
        ZT_CHECKF(!zr_cuf_mv_bal_takes(&g->k, &keeps[i], R | GL, zr_cuf_mv_shape(&g->k, &keeps[i], R | GL)),
                  "%s [%d x %d] took the balanced product", zr_type_name(keeps[i].type), keeps[i].n_in, keeps[i].n_out);
    /* Q4_K: rows of 96 items (3 steps, on the tall shape from 4 tiles of 16 results a multiprocessor)
     * and 2.25 tiles a block of the wave plus an odd few results */
    const int q4_res = 16 * 2 * g->k.sm_count * 9 / 4 + 5;
    const struct { uint32_t type; int n_in, n_res; } bits[] = {{ZR_TYPE_Q8_0, 2560, 10240}, {ZR_TYPE_Q4_K, 3072, q4_res},
                                                               {ZR_TYPE_Q4_0, 4096, 14336}, {ZR_TYPE_Q5_K, 4096, 14336},
                                                               {ZR_TYPE_Q4_1, 2560, 10240}, {ZR_TYPE_Q2_K, 5120, 13824},
                                                               {ZR_TYPE_Q5_0, 4096, 14336}, {ZR_TYPE_Q5_1, 2560, 10240}};
    for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++) {
        int n_rem = 0;
        const ZrCuWeight probe = {.type = bits[i].type, .n_in = bits[i].n_in, .n_out = 2 * bits[i].n_res};
        ZT_CHECKF(zr_cuf_mv_bal_takes(&g->k, &probe, R | GL | GE, zr_cuf_mv_shape(&g->k, &probe, R | GL | GE)),
                  "%s [%d x %d]: not the balanced product", zr_type_name(probe.type), probe.n_in, probe.n_out);
        const int differ = bal_rounds_differ(g, bits[i].type, bits[i].n_in, bits[i].n_res, &n_rem);
        fprintf(stderr, "  matvec glu bal %-5s [%d x %d]: %d rows of whole rounds differ from the tall product, %d in remainders\n",
                zr_type_name(bits[i].type), bits[i].n_in, 2 * bits[i].n_res, differ, n_rem);
        ZT_CHECKF(differ == 0 && n_rem > 0, "%s bal: %d rows of whole rounds differ (%d in remainders)",
                  zr_type_name(bits[i].type), differ, n_rem);
        const MvCase c = {bits[i].n_in, 2 * bits[i].n_res, 0, R | GL | GE, 0, 0, 0};
        const double q = matvec_case(bits[i].type, c);
        MvCase tl = c; /* the tall product on the same product, for comparison */
        const ZrMvShape shape = zr_cuf_mv_shape(&g->k, &probe, c.mode);
        tl.groups = shape.groups, tl.split = shape.split, tl.blocks = shape.blocks;
        const double qt = matvec_case(bits[i].type, tl);
        fprintf(stderr, "  matvec %s [%d x %d] glu gelu: worst |diff|/tol %.3g balanced, %.3g tall\n",
                zr_type_name(bits[i].type), c.n_in, c.n_out, q, qt);
        ZT_CHECKF(q >= 0 && q <= 1.0, "%s bal: worst |diff|/tol %.3g", zr_type_name(bits[i].type), q);
        const double qp = matvec_post_case(bits[i].type, bits[i].n_in, 2 * bits[i].n_res, GL | GE);
        fprintf(stderr, "  matvec addnorm %s [%d x %d] glu gelu (balanced): worst |diff|/tol = %.3g\n",
                zr_type_name(bits[i].type), bits[i].n_in, 2 * bits[i].n_res, qp);
        ZT_CHECKF(qp >= 0 && qp <= 1.0, "%s bal addnorm: worst |diff|/tol %.3g", zr_type_name(bits[i].type), qp);
    }
}

#define MATVEC_TEST(T, ID) \
    ZT_TEST(matvec_##T##_matches_cpu_dot_row) { matvec_type(ID); }
MATVEC_TEST(f32, ZR_TYPE_F32)
MATVEC_TEST(f16, ZR_TYPE_F16)
MATVEC_TEST(bf16, ZR_TYPE_BF16)
MATVEC_TEST(q8_0, ZR_TYPE_Q8_0)
MATVEC_TEST(q4_0, ZR_TYPE_Q4_0)
MATVEC_TEST(q4_1, ZR_TYPE_Q4_1)
MATVEC_TEST(q5_0, ZR_TYPE_Q5_0)
MATVEC_TEST(q5_1, ZR_TYPE_Q5_1)
MATVEC_TEST(q2_k, ZR_TYPE_Q2_K)
MATVEC_TEST(q3_k, ZR_TYPE_Q3_K)
MATVEC_TEST(q4_k, ZR_TYPE_Q4_K)
MATVEC_TEST(q5_k, ZR_TYPE_Q5_K)
MATVEC_TEST(q6_k, ZR_TYPE_Q6_K)

/* Dequantization to F16 (prefill) and embedding rows: every type against zr_dequant_row. */
ZT_TEST(dequant_f16_and_embed_match_zr_dequant_row_for_every_type) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    for (size_t ti = 0; ti < sizeof all_types / sizeof all_types[0]; ti++) {
        const uint32_t type = all_types[ti];
        const bool flt = type == ZR_TYPE_F32 || type == ZR_TYPE_F16 || type == ZR_TYPE_BF16;
        const int n_in = flt ? 172 : 512, n_out = 17, row0 = 3, n_rows = 11;
        uint64_t s = 99 + type;
        uint8_t *w = gpu_random_matrix(type, n_in, n_out, &s);
        ZT_CHECK(w != NULL);
        const size_t rb = zr_row_bytes(type, n_in);
        ZrCuWeight dw = gpu_upload_weight(g, type, w, n_in, n_out);
        float *ref = malloc(sizeof(float) * n_in), *emb = malloc(sizeof(float) * 3 * n_in);
        uint16_t *h = malloc(2 * (size_t)n_rows * n_in);
        ZrError e = {0};
        if (type != ZR_TYPE_F16) {
            CUdeviceptr out = gpu_alloc(g, 2 * (size_t)n_rows * n_in);
            const unsigned blocks = (unsigned)(((size_t)n_rows * ((n_in + 7) / 8) + 255) / 256);
            ZT_CHECKF(!ZR_LAUNCH(&g->l, &g->k.dq[type], ZR_DIM1(blocks), ZR_DIM1(256), 0, &e, &dw.main, &dw.side, &out,
                                 (void *)&n_in, (void *)&n_out, (void *)&row0, (void *)&n_rows),
                      "%s", e.msg);
            gpu_download(g, h, out, 2 * (size_t)n_rows * n_in);
            gpu_free(g, out);
            for (int r = 0; r < n_rows; r++) {
                zr_dequant_row(type, w + rb * (row0 + r), ref, n_in);
                for (int i = 0; i < n_in; i++) {
                    const float a = zr_f16_to_f32(h[(size_t)r * n_in + i]), b = zr_f16_to_f32(zr_f32_to_f16(ref[i]));
                    ZT_CHECKF(fabsf(a - b) <= 1e-3f * fabsf(b) + 6e-8f, "dequant %s row %d [%d]: %g vs %g",
                              zr_type_name(type), row0 + r, i, a, b);
                }
            }
        }
        const int32_t tok[3] = {7, 16, 0};
        CUdeviceptr dt = gpu_upload(g, tok, sizeof tok), de = gpu_alloc(g, sizeof(float) * 3 * n_in);
        ZT_CHECKF(!ZR_LAUNCH(&g->l, &g->k.embed[type], ZR_DIM3((n_in + 255) / 256, 3, 1), ZR_DIM1(256), 0, &e, &dw.main,
                             &dw.side, &dt, &de, (void *)&n_in, (void *)&n_out, &(CUdeviceptr){0}, &(int){1},
                             &(float){1.0f}),
                  "%s", e.msg);
        gpu_download(g, emb, de, sizeof(float) * 3 * n_in);
        for (int t = 0; t < 3; t++) {
            zr_dequant_row(type, w + rb * tok[t], ref, n_in);
            float amax = 0;
            for (int i = 0; i < n_in; i++) amax = fmaxf(amax, fabsf(ref[i]));
            for (int i = 0; i < n_in; i++)
                ZT_CHECKF(fabsf(emb[(size_t)t * n_in + i] - ref[i]) <= 1e-6f * amax, "embed %s token %d [%d]: %g vs %g",
                          zr_type_name(type), tok[t], i, emb[(size_t)t * n_in + i], ref[i]);
        }
        /* gemma's scale in the lookup: each value times it, one rounding (x * s) */
        const float sc = sqrtf(2560.0f);
        float *emb_s = malloc(sizeof(float) * 3 * n_in);
        ZT_CHECKF(!zr_k_embed(&g->l, &g->k, &dw, dt, de, n_in, n_out, 3, sc, &e), "%s", e.msg);
        gpu_download(g, emb_s, de, sizeof(float) * 3 * n_in);
        int scaled_off = 0;
        for (int i = 0; i < 3 * n_in; i++) {
            const float want = emb[i] * sc;
            scaled_off += memcmp(&emb_s[i], &want, sizeof want) != 0;
        }
        ZT_CHECKF(scaled_off == 0, "embed %s times %g: %d values are not the unscaled row times the scale", zr_type_name(type),
                  (double)sc, scaled_off);
        free(emb_s);
        gpu_free(g, dt);
        gpu_free(g, de);
        gpu_free(g, dw.main);
        gpu_free(g, dw.side);
        free(w);
        free(ref);
        free(emb);
        free(h);
    }
}

ZT_TEST(rmsnorm_matches_cpu_for_rows_and_per_head_pieces) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    uint64_t s = 5;
    const int rows = 3, stride = 4096 + 64, n = 4096;
    float *x = malloc(sizeof(float) * rows * stride), *w = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * rows * stride);
    float *ref = malloc(sizeof(float) * n);
    for (int i = 0; i < rows * stride; i++) x[i] = 3.0f * gpu_rand(&s);
    for (int i = 0; i < n; i++) w[i] = 1.0f + 0.1f * gpu_rand(&s);
    CUdeviceptr dx = gpu_upload(g, x, sizeof(float) * rows * stride), dw = gpu_upload(g, w, sizeof(float) * n);
    CUdeviceptr dy = gpu_alloc(g, sizeof(float) * rows * stride);
    const float eps = 1e-5f;
    ZrError e = {0};
    /* whole rows */
    int one = 1;
    ZT_CHECKF(!ZR_LAUNCH(&g->l, &g->k.rmsnorm, ZR_DIM3(one, rows, 1), ZR_DIM1(256), 0, &e, &dx, (void *)&stride, &dw, &dy,
                         (void *)&stride, (void *)&n, (void *)&eps),
              "%s", e.msg);
    gpu_download(g, y, dy, sizeof(float) * rows * stride);
    for (int r = 0; r < rows; r++) {
        zr_cpu_rmsnorm(ref, x + r * stride, w, n, eps);
        for (int i = 0; i < n; i++) ZT_NEAR(y[r * stride + i], ref[i], 2e-6 * fabs(ref[i]) + 1e-6);
    }
    /* qwen3 style: 8 heads of 128 in each row, one weight vector for all heads, in place */
    const int hd = 128, heads = 8;
    ZT_CHECKF(!ZR_LAUNCH(&g->l, &g->k.rmsnorm, ZR_DIM3(heads, rows, 1), ZR_DIM1(256), 0, &e, &dx, (void *)&stride, &dw,
                         &dx, (void *)&stride, (void *)&hd, (void *)&eps),
              "%s", e.msg);
    gpu_download(g, y, dx, sizeof(float) * rows * stride);
    for (int r = 0; r < rows; r++)
        for (int h = 0; h < heads + 1; h++) {
            const float *src = x + r * stride + h * hd;
            if (h < heads) {
                zr_cpu_rmsnorm(ref, src, w, hd, eps);
                for (int i = 0; i < hd; i++) ZT_NEAR(y[r * stride + h * hd + i], ref[i], 2e-6 * fabs(ref[i]) + 1e-6);
            } else {
                for (int i = 0; i < hd; i++) ZT_CHECK(y[r * stride + h * hd + i] == src[i]); /* past the heads: untouched */
            }
        }
    gpu_free(g, dx);
    gpu_free(g, dw);
    gpu_free(g, dy);
    free(x);
    free(w);
    free(y);
    free(ref);
}

/* rope_kv_f32: Q rotated in place, K rotated in place and into the cache with V, at the rows
 * of the device position; the rest of the cache untouched. */
static void rope_case(int neox, int rope_dim, bool factors, int pos0) {
    GpuEnv *g = gpu_env();
    uint64_t s = 17 + neox + rope_dim;
    const int rows = 3, hd = 128, n_head = 8, n_kv = 4, kv_dim = n_kv * hd, q_dim = n_head * hd;
    const int stride = q_dim + 2 * kv_dim + 64, n_ctx = pos0 + rows + 2;
    const float theta = 500000.0f, freq_scale = factors ? 0.5f : 1.0f;
    float *x = malloc(sizeof(float) * rows * stride), *y = malloc(sizeof(float) * rows * stride), ff[64];
    float *kc = malloc(sizeof(float) * n_ctx * kv_dim), *vc = malloc(sizeof(float) * n_ctx * kv_dim);
    double freq[64];
    for (int i = 0; i < rows * stride; i++) x[i] = gpu_rand(&s);
    for (int i = 0; i < rope_dim / 2; i++) {
        ff[i] = 1.0f + 3.5f * (gpu_rand(&s) + 1.0f);
        freq[i] = (double)freq_scale * pow((double)theta, -2.0 * i / rope_dim) / (factors ? ff[i] : 1.0);
    }
    CUdeviceptr dx = gpu_upload(g, x, sizeof(float) * rows * stride), df = gpu_upload(g, freq, sizeof freq);
    CUdeviceptr dp = gpu_upload(g, &pos0, sizeof pos0);
    CUdeviceptr dk = gpu_alloc(g, sizeof(float) * n_ctx * kv_dim), dv = gpu_alloc(g, sizeof(float) * n_ctx * kv_dim);
    ZrError e = {0};
    const int threads = (n_head + n_kv) * rope_dim / 2 + kv_dim + n_kv * (hd - rope_dim);
    ZT_CHECKF(!ZR_LAUNCH(&g->l, &g->k.rope_kv, ZR_DIM3((threads + 127) / 128, rows, 1), ZR_DIM1(128), 0, &e, &dx,
                         (void *)&stride, (void *)&n_head, (void *)&n_kv, (void *)&hd, (void *)&rope_dim, (void *)&neox,
                         &df, &dp, &dk, &dv),
              "%s", e.msg);
    gpu_download(g, y, dx, sizeof(float) * rows * stride);
    gpu_download(g, kc, dk, sizeof(float) * n_ctx * kv_dim);
    gpu_download(g, vc, dv, sizeof(float) * n_ctx * kv_dim);
    for (int r = 0; r < rows; r++) {
        float *v = x + r * stride;
        zr_cpu_rope(v, n_head, hd, rope_dim, pos0 + r, theta, freq_scale, factors ? ff : NULL, neox);
        zr_cpu_rope(v + q_dim, n_kv, hd, rope_dim, pos0 + r, theta, freq_scale, factors ? ff : NULL, neox);
        for (int i = 0; i < stride; i++)
            ZT_CHECKF(fabsf(y[r * stride + i] - v[i]) <= 2e-6f, "neox %d rope_dim %d row %d [%d]: %g vs %g", neox,
                      rope_dim, r, i, y[r * stride + i], v[i]);
        for (int d = 0; d < kv_dim; d++) {
            ZT_CHECKF(kc[(size_t)(pos0 + r) * kv_dim + d] == y[r * stride + q_dim + d], "k cache row %d [%d]", pos0 + r, d);
            ZT_CHECKF(vc[(size_t)(pos0 + r) * kv_dim + d] == x[r * stride + q_dim + kv_dim + d], "v cache row %d [%d]",
                      pos0 + r, d);
        }
    }
    for (int p = 0; p < n_ctx; p++)
        if (p < pos0 || p >= pos0 + rows)
            for (int d = 0; d < kv_dim; d++) ZT_CHECK(isnan(kc[(size_t)p * kv_dim + d]) && isnan(vc[(size_t)p * kv_dim + d]));
    gpu_free(g, dx);
    gpu_free(g, df);
    gpu_free(g, dp);
    gpu_free(g, dk);
    gpu_free(g, dv);
    free(x);
    free(y);
    free(kc);
    free(vc);
}

ZT_TEST(rope_kv_rotates_q_and_k_and_writes_the_cache_at_the_device_position) {
    if (!gpu_env()) return;
    rope_case(0, 128, false, 33);
    rope_case(1, 128, true, 1000);
    rope_case(0, 64, true, 77777); /* rope over half the head: K's tail copied unrotated */
    rope_case(1, 64, false, 5);
}

/* Attention of `rows` queries at positions pos0.. (causal) over a random cache, split in
 * chunks, against a double-precision CPU computation. */
static void attention_case(int n_head, int n_kv, int hd, int n_ctx, int pos0, int rows, int chunk) {
    GpuEnv *g = gpu_env();
    uint64_t s = 11 + hd + pos0;
    const int kv_dim = n_kv * hd, q_stride = n_head * hd + 2 * kv_dim, n_chunks = (n_ctx + chunk - 1) / chunk;
    float *q = malloc(sizeof(float) * rows * q_stride), *kc = malloc(sizeof(float) * n_ctx * kv_dim),
          *vc = malloc(sizeof(float) * n_ctx * kv_dim), *out = malloc(sizeof(float) * rows * n_head * hd);
    for (int i = 0; i < rows * q_stride; i++) q[i] = 2.0f * gpu_rand(&s);
    for (int i = 0; i < n_ctx * kv_dim; i++) kc[i] = gpu_rand(&s), vc[i] = gpu_rand(&s);
    CUdeviceptr dq = gpu_upload(g, q, sizeof(float) * rows * q_stride), dk = gpu_upload(g, kc, sizeof(float) * n_ctx * kv_dim);
    CUdeviceptr dv = gpu_upload(g, vc, sizeof(float) * n_ctx * kv_dim), dp = gpu_upload(g, &pos0, sizeof pos0);
    CUdeviceptr part = gpu_alloc(g, sizeof(float) * rows * n_head * n_chunks * (hd + 2));
    CUdeviceptr dout = gpu_alloc(g, sizeof(float) * rows * n_head * hd);
    const float scale = 1.0f / sqrtf((float)hd);
    const int out_stride = n_head * hd, zero_i = 0; /* no window */
    const float zero_f = 0.0f;                       /* no soft-cap */
    ZrError e = {0};
    ZT_CHECKF(!ZR_LAUNCH(&g->l, &g->k.attn_part, ZR_DIM3(n_head, n_chunks, rows), ZR_DIM1(128),
                         (unsigned)((hd + chunk + 128) * sizeof(float)), &e, &dq, (void *)&q_stride, &dk, &dv, &part, &dp,
                         (void *)&n_head, (void *)&n_kv, (void *)&hd, (void *)&chunk, (void *)&n_chunks, (void *)&scale,
                         (void *)&zero_i, (void *)&zero_f),
              "%s", e.msg);
    ZT_CHECKF(!ZR_LAUNCH(&g->l, &g->k.attn_combine, ZR_DIM3(n_head, rows, 1), ZR_DIM1(128), 0, &e, &part, &dout,
                         (void *)&out_stride, &dp, (void *)&n_head, (void *)&hd, (void *)&chunk, (void *)&n_chunks),
              "%s", e.msg);
    gpu_download(g, out, dout, sizeof(float) * rows * n_head * hd);
    double *sc = malloc(sizeof(double) * n_ctx);
    for (int i = 0; i < rows; i++)
        for (int h = 0; h < n_head; h++) {
            const int n_keys = pos0 + i + 1, kvh = h / (n_head / n_kv);
            double mx = -1e300, sum = 0;
            for (int p = 0; p < n_keys; p++) {
                double d = 0;
                for (int j = 0; j < hd; j++) d += (double)q[i * q_stride + h * hd + j] * kc[p * kv_dim + kvh * hd + j];
                sc[p] = d * scale;
                if (sc[p] > mx) mx = sc[p];
            }
            for (int p = 0; p < n_keys; p++) sum += (sc[p] = exp(sc[p] - mx));
            for (int j = 0; j < hd; j++) {
                double o = 0;
                for (int p = 0; p < n_keys; p++) o += sc[p] * vc[p * kv_dim + kvh * hd + j];
                o /= sum;
                ZT_CHECKF(fabs(out[(i * n_head + h) * hd + j] - o) <= 2e-6 + 1e-5 * fabs(o),
                          "heads %d/%d hd %d pos %d row %d head %d [%d]: %g vs %g", n_head, n_kv, hd, pos0, i, h, j,
                          out[(i * n_head + h) * hd + j], o);
            }
        }
    gpu_free(g, dq);
    gpu_free(g, dk);
    gpu_free(g, dv);
    gpu_free(g, dp);
    gpu_free(g, part);
    gpu_free(g, dout);
    free(q);
    free(kc);
    free(vc);
    free(out);
    free(sc);
}

ZT_TEST(attention_decode_split_over_the_sequence_matches_cpu) {
    if (!gpu_env()) return;
    attention_case(8, 2, 128, 1100, 1050, 1, 256); /* 5 live chunks of 256, GQA 4:1 */
    attention_case(8, 4, 8, 64, 40, 1, 16);        /* stories260K's head_dim 8 */
    attention_case(4, 4, 256, 300, 0, 1, 256);     /* one key; head_dim above the block size */
}

/* The KV cache as the kernels hold it: floats, or with kv16 halves (cu/kv.cuh). The tests keep
 * float host copies: kv_round makes each one the value its half holds (NaN stays NaN), so a copy
 * downloaded and widened compares with memcmp. */
static void kv_round(float *x, size_t n, bool kv16) {
    if (kv16)
        for (size_t i = 0; i < n; i++) x[i] = zr_f16_to_f32(zr_f32_to_f16(x[i]));
}

static CUdeviceptr kv_upload(GpuEnv *g, const float *x, size_t n, bool kv16) {
    if (!kv16) return gpu_upload(g, x, sizeof(float) * n);
    uint16_t *h = malloc(sizeof(uint16_t) * n);
    for (size_t i = 0; i < n; i++) h[i] = zr_f32_to_f16(x[i]);
    const CUdeviceptr d = gpu_upload(g, h, sizeof(uint16_t) * n);
    free(h);
    return d;
}

static void kv_download(GpuEnv *g, float *x, CUdeviceptr d, size_t n, bool kv16) {
    if (!kv16) {
        gpu_download(g, x, d, sizeof(float) * n);
        return;
    }
    uint16_t *h = malloc(sizeof(uint16_t) * n);
    gpu_download(g, h, d, sizeof(uint16_t) * n);
    for (size_t i = 0; i < n; i++) x[i] = zr_f16_to_f32(h[i]);
    free(h);
}

/* What a layer adds to the plain decode attention (gemma2/gemma3/qwen3): a sliding window (the
 * last `window` positions, 0: all), soft-capped scores (0: not), q/k head norms (norm true). */
typedef struct DecodeExtras {
    int window;
    float cap;
    bool norm;
    int split; /* blocks per group of qg heads (ZrCuAttnDecode.n_split; 0: one a chunk) */
    int qg;    /* query heads a block (ZrCuAttnDecode.qg; 0: one) */
    bool kv16; /* an F16 cache (the _kvh kernels, the split path's too) */
    bool mma;  /* the tensor-core kernel, a block per KV head (ZrCuAttnDecode.mma; with kv16) */
} DecodeExtras;

/* attn_decode_f32(_d256) (norms + rope + KV write + split attention + merge in one launch) at
 * one position, against the split path the decode took before (rmsnorm_f32 of the q/k heads,
 * rope_kv_f32, attn_part_f32 + attn_combine_f32, all on copies):
 * - the K/V cache row pos equals, bit for bit, what rope_kv_f32 writes from the same qkv row
 *   (with head norms: within 2e-6 + 4e-6 |v|, the norm's sum runs in another order), every
 *   other cache row is untouched, the qkv row is not modified;
 * - the output matches a double-precision attention over the cache the split path wrote, with
 *   q as it rotated it, over the rows the window keeps and with the soft-cap, |diff| <= 2e-6 +
 *   1e-5 |ref| (norms or cap: 4e-6 + 2e-5 |ref|), and the split path's output within the same;
 * - the chunk counters are zero afterwards, and a second launch gives the same bits.
 * Cache rows past pos hold NaN (a read of them poisons the output), as do, with a window, the
 * rows before it (a local layer reads only its window, however long the context), and the output
 * and the partials before the launch. Raises *worst to this case's worst |diff| / tol.
 * With x.kv16 both paths keep an F16 cache: row pos is the half of rope_kv's value (with head
 * norms within one half's rounding of it: 2^-10 |v|), the reference reads the cache as the fused
 * kernel left it (its row pos included, which the kernel used as rounded), and the tolerances
 * are the same: the attention's own arithmetic is still F32. */
static void decode_case(int n_head, int n_kv, int hd, int rope_dim, int neox, int n_ctx, int chunk, int pos,
                        DecodeExtras x, double *worst) {
    GpuEnv *g = gpu_env();
    uint64_t s = 1000003ull * (uint64_t)pos + 7919ull * hd + 131ull * n_head + 17ull * n_kv + 3ull * rope_dim + neox +
                 101ull * x.window + x.norm;
    const int kv_dim = n_kv * hd, q_dim = n_head * hd, qkv_dim = q_dim + 2 * kv_dim, n_chunks = (n_ctx + chunk - 1) / chunk;
    const size_t cache = (size_t)n_ctx * kv_dim;
    float *qkv = malloc(sizeof(float) * qkv_dim), *rot = malloc(sizeof(float) * qkv_dim);
    float *kc = malloc(sizeof(float) * cache), *vc = malloc(sizeof(float) * cache);
    float *kg = malloc(sizeof(float) * cache), *vg = malloc(sizeof(float) * cache);
    float *kr = malloc(sizeof(float) * cache), *vr = malloc(sizeof(float) * cache);
    float *out = malloc(sizeof(float) * q_dim), *out2 = malloc(sizeof(float) * q_dim), *back = malloc(sizeof(float) * qkv_dim);
    float *outs = malloc(sizeof(float) * q_dim), qn[256], kn[256];
    double freq[128], *sc = malloc(sizeof(double) * n_ctx);
    int32_t count[64];
    for (int i = 0; i < qkv_dim; i++) qkv[i] = 2.0f * gpu_rand(&s);
    for (int i = 0; i < hd; i++) qn[i] = 1.0f + 0.5f * gpu_rand(&s), kn[i] = 1.0f + 0.5f * gpu_rand(&s);
    const int first = x.window > 0 && pos + 1 > x.window ? pos + 1 - x.window : 0; /* the window's first row */
    for (size_t i = 0; i < cache; i++) {
        const bool used = (int)(i / kv_dim) < pos && (int)(i / kv_dim) >= first;
        kc[i] = used ? gpu_rand(&s) : NAN;
        vc[i] = used ? gpu_rand(&s) : NAN;
    }
    kv_round(kc, cache, x.kv16);
    kv_round(vc, cache, x.kv16);
    for (int i = 0; i < rope_dim / 2; i++) freq[i] = pow(500000.0, -2.0 * i / rope_dim) / (1.0 + 0.5 * (gpu_rand(&s) + 1.0));
    CUdeviceptr dqkv = gpu_upload(g, qkv, sizeof(float) * qkv_dim), df = gpu_upload(g, freq, sizeof freq);
    CUdeviceptr dp = gpu_upload(g, &pos, sizeof pos), dk = kv_upload(g, kc, cache, x.kv16);
    CUdeviceptr dv = kv_upload(g, vc, cache, x.kv16), dkr = kv_upload(g, kc, cache, x.kv16);
    CUdeviceptr dvr = kv_upload(g, vc, cache, x.kv16), drot = gpu_upload(g, qkv, sizeof(float) * qkv_dim);
    CUdeviceptr dqn = gpu_upload(g, qn, sizeof(float) * hd), dkn = gpu_upload(g, kn, sizeof(float) * hd);
    CUdeviceptr part = gpu_alloc(g, sizeof(float) * n_head * n_chunks * (hd + 2)), dout = gpu_alloc(g, sizeof(float) * q_dim);
    CUdeviceptr douts = gpu_alloc(g, sizeof(float) * q_dim);
    memset(count, 0, sizeof count);
    CUdeviceptr dcount = gpu_upload(g, count, sizeof count);
    ZrError e = {0};
    const float eps = 1e-6f, scale = 1.0f / sqrtf((float)hd);
    /* the old path's head norms, rope + cache write and split attention, on copies */
    if (x.norm) {
        ZT_CHECKF(!zr_k_rmsnorm(&g->l, &g->k, drot, qkv_dim, dqn, drot, qkv_dim, hd, eps, n_head, 1, &e), "%s", e.msg);
        ZT_CHECKF(!zr_k_rmsnorm(&g->l, &g->k, drot + sizeof(float) * q_dim, qkv_dim, dkn, drot + sizeof(float) * q_dim,
                                qkv_dim, hd, eps, n_kv, 1, &e),
                  "%s", e.msg);
    }
    ZT_CHECKF(!zr_k_rope_kv(&g->l, &g->k, x.kv16, drot, qkv_dim, n_head, n_kv, hd, rope_dim, neox, df, dp, dkr, dvr, 1, &e),
              "%s", e.msg);
    ZT_CHECKF(!zr_k_attn_split(&g->l, &g->k, x.kv16, drot, qkv_dim, dkr, dvr, part, dp, douts, q_dim, n_head, n_kv, hd, scale,
                               x.window, x.cap, chunk, n_chunks, 1, &e),
              "%s", e.msg);
    const ZrCuAttnDecode a = {.qkv = dqkv, .kc = dk, .vc = dv, .part = part, .count = dcount, .out = dout, .freq = df,
                              .pos = dp, .q_norm = x.norm ? dqn : 0, .k_norm = x.norm ? dkn : 0, .n_head = n_head,
                              .n_kv = n_kv, .head_dim = hd, .rope_dim = rope_dim, .neox = neox, .chunk = chunk,
                              .n_chunks = n_chunks, .n_split = x.split, .window = x.window, .scale = scale, .eps = eps,
                              .softcap = x.cap, .qg = x.qg, .kv16 = x.kv16, .mma = x.mma};
    ZT_CHECKF(!zr_k_attn_decode(&g->l, &g->k, &a, &e), "%s", e.msg);
    gpu_download(g, out, dout, sizeof(float) * q_dim);
    gpu_download(g, outs, douts, sizeof(float) * q_dim);
    kv_download(g, kg, dk, cache, x.kv16);
    kv_download(g, vg, dv, cache, x.kv16);
    kv_download(g, kr, dkr, cache, x.kv16);
    kv_download(g, vr, dvr, cache, x.kv16);
    gpu_download(g, rot, drot, sizeof(float) * qkv_dim);
    gpu_download(g, back, dqkv, sizeof(float) * qkv_dim);
    gpu_download(g, count, dcount, sizeof(int32_t) * n_head);
    for (int i = 0; i < n_head; i++) ZT_CHECKF(count[i] == 0, "pos %d: counter %d left at %d", pos, i, count[i]);
    ZT_CHECKF(!memcmp(back, qkv, sizeof(float) * qkv_dim), "pos %d: the qkv row changed", pos);
    size_t bad = 0;
    for (size_t i = 0; i < cache; i++) {
        const bool row = (int)(i / kv_dim) == pos;
        const float wk = row ? kr[i] : kc[i], wv = row ? vr[i] : vc[i];
        if (row && x.norm) {
            const float rel = x.kv16 ? 1.0f / 1024 : 4e-6f; /* kv16: the two sums may round to neighbouring halves */
            if (!(fabsf(kg[i] - wk) <= 2e-6f + rel * fabsf(wk)) || memcmp(&vg[i], &wv, 4)) bad++;
        } else if (memcmp(&kg[i], &wk, 4) || memcmp(&vg[i], &wv, 4)) {
            bad++;
        }
    }
    ZT_CHECKF(bad == 0, "pos %d: %zu cache values differ from rope_kv_f32's cache", pos, bad);
    /* reference: double precision over the cache rope_kv_f32 wrote (kv16: as the fused kernel
     * left it), q as rope_kv_f32 rotated it */
    const float *kref = x.kv16 ? kg : kr, *vref = x.kv16 ? vg : vr;
    const double at = x.norm || x.cap > 0 ? 4e-6 : 2e-6, rt = x.norm || x.cap > 0 ? 2e-5 : 1e-5;
    double wq = 0;
    for (int h = 0; h < n_head; h++) {
        const int kvh = h / (n_head / n_kv);
        double mx = -1e300, sum = 0;
        for (int p = first; p <= pos; p++) {
            double d = 0;
            for (int j = 0; j < hd; j++) d += (double)(rot[h * hd + j] * scale) * kref[(size_t)p * kv_dim + kvh * hd + j];
            if (x.cap > 0) d = tanh(d / x.cap) * x.cap;
            sc[p] = d;
            if (d > mx) mx = d;
        }
        for (int p = first; p <= pos; p++) sum += (sc[p] = exp(sc[p] - mx));
        for (int j = 0; j < hd; j++) {
            double o = 0;
            for (int p = first; p <= pos; p++) o += sc[p] * vref[(size_t)p * kv_dim + kvh * hd + j];
            o /= sum;
            const float got = out[h * hd + j];
            const double q = isfinite(got) ? fabs(got - o) / (at + rt * fabs(o)) : 1e30;
            /* two float computations, each within the tolerance of the reference */
            const double qs = isfinite(got) ? fabs(got - outs[h * hd + j]) / (2 * (at + rt * fabs(o))) : 1e30;
            if (q > wq || qs > wq) wq = q > qs ? q : qs;
            if ((q > 1.0 || qs > 1.0) && (q == wq || qs == wq))
                fprintf(stderr, "  heads %d/%d hd %d rope %d%s window %d cap %g%s%s pos %d head %d [%d]: %g vs %g (split %g)\n",
                        n_head, n_kv, hd, rope_dim, neox ? " neox" : "", x.window, (double)x.cap, x.norm ? " norms" : "",
                        x.kv16 ? " kv16" : "", pos, h, j, got, o, outs[h * hd + j]);
        }
    }
    /* again, from the state the first launch left (counters, cache row pos): the same bits */
    ZT_CHECKF(!zr_k_attn_decode(&g->l, &g->k, &a, &e), "%s", e.msg);
    gpu_download(g, out2, dout, sizeof(float) * q_dim);
    ZT_CHECKF(!memcmp(out, out2, sizeof(float) * q_dim), "pos %d: a second launch gave other bits", pos);
    gpu_download(g, count, dcount, sizeof(int32_t) * n_head);
    for (int i = 0; i < n_head; i++) ZT_CHECKF(count[i] == 0, "pos %d: counter %d left at %d", pos, i, count[i]);
    CUdeviceptr bufs[] = {dqkv, df, dp, dk, dv, dkr, dvr, drot, dqn, dkn, part, dout, douts, dcount};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) gpu_free(g, bufs[i]);
    free(qkv), free(rot), free(kc), free(vc), free(kg), free(vg), free(kr), free(vr);
    free(out), free(out2), free(outs), free(back), free(sc);
    if (wq > *worst) *worst = wq;
}

static void decode_positions_x(int n_head, int n_kv, int hd, int rope_dim, int neox, int n_ctx, int chunk,
                               DecodeExtras x) {
    ZT_CHECK(zr_cuf_attn_decode_fits(n_head, n_kv, hd, rope_dim, chunk));
    /* the first rows, either side of the first chunk boundaries, several chunks, the last row;
     * with a window also either side of its end (the first position that drops a row) and of
     * the first chunk it leaves wholly behind */
    const int w = x.window;
    const int pos[] = {0, 1, chunk - 1, chunk, chunk + 1, 2 * chunk + 3, n_ctx / 2, n_ctx - 1,
                       w > 0 ? w - 1 : 0, w > 0 ? w : 1, w > 0 ? w + 1 : 2, w > 0 ? w + chunk : 3, w > 0 ? w + chunk + 1 : 4};
    double worst = 0;
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++) {
        if (pos[i] >= n_ctx) continue;
        decode_case(n_head, n_kv, hd, rope_dim, neox, n_ctx, chunk, pos[i], x, &worst);
    }
    fprintf(stderr, "  attn_decode heads %d/%d hd %d rope %d%s n_ctx %d chunk %d split %d qg %d window %d cap %g%s%s%s: worst |diff|/tol = %.3g\n",
            n_head, n_kv, hd, rope_dim, neox ? " neox" : "", n_ctx, chunk, x.split, x.qg, x.window, (double)x.cap,
            x.norm ? " norms" : "", x.kv16 ? " kv16" : "", x.mma ? " mma" : "", worst);
    ZT_CHECKF(worst <= 1.0, "heads %d/%d hd %d window %d cap %g: worst |diff|/tol %.3g", n_head, n_kv, hd, x.window,
              (double)x.cap, worst);
}

static void decode_positions(int n_head, int n_kv, int hd, int rope_dim, int neox, int n_ctx, int chunk) {
    decode_positions_x(n_head, n_kv, hd, rope_dim, neox, n_ctx, chunk, (DecodeExtras){0});
}

ZT_TEST(attention_decode_fused_matches_rope_kv_and_cpu_at_every_chunk_boundary) {
    if (!gpu_env()) return;
    decode_positions(8, 2, 128, 128, 0, 200, 32);  /* GQA 4:1, the 8B head */
    decode_positions(8, 8, 128, 128, 1, 200, 32);  /* GQA 1:1, neox */
    decode_positions(8, 2, 64, 64, 1, 160, 32);    /* the 1B head */
    decode_positions(4, 4, 64, 64, 0, 100, 32);    /* 1:1 */
    decode_positions(8, 2, 64, 32, 1, 1100, 256);  /* rope over half the head; the longest chunks */
    decode_positions(8, 2, 128, 64, 0, 300, 64);   /* rope over half the head, normal pairs */
    decode_positions(16, 2, 128, 128, 0, 130, 40); /* GQA 8:1; a chunk that is no multiple of the row batch */
    decode_positions(8, 4, 8, 8, 0, 64, 32);       /* stories260K: head_dim 8, GQA 2:1 */
    decode_positions(32, 8, 128, 128, 0, 129, 128); /* zrun bench tg128 on 8B: the fused chunks of n_ctx 129 */
    decode_positions(32, 8, 64, 64, 1, 129, 128);   /* ... and on 1B */
    decode_positions(4, 1, 128, 128, 0, 600, 256);  /* two row batches per chunk (online softmax), GQA 4:1 */
    decode_positions(4, 2, 64, 64, 0, 700, 300);    /* two batches, a chunk no multiple of the batch */
}

/* gemma's layers in the fused kernel (issue 14): windows (past them, a window inside a chunk,
 * wider than the sequence), soft-capped scores, q/k head norms (gemma3, qwen3), heads of 256
 * (attn_decode_f32_d256) and of 128 with all of it */
ZT_TEST(attention_decode_fused_window_softcap_and_head_norms_match_the_split_path_and_cpu) {
    if (!gpu_env()) return;
    decode_positions_x(8, 4, 256, 256, 1, 300, 128, (DecodeExtras){.window = 40, .norm = true});  /* gemma3 local */
    decode_positions_x(8, 4, 256, 256, 1, 300, 128, (DecodeExtras){.norm = true});                /* gemma3 global */
    decode_positions_x(8, 4, 256, 256, 1, 600, 128, (DecodeExtras){.window = 200});               /* several chunks left behind */
    decode_positions_x(8, 4, 256, 256, 1, 2000, 128, (DecodeExtras){.window = 200, .norm = true}); /* 16 chunks, 3 blocks per head */
    decode_positions_x(8, 4, 256, 256, 1, 300, 128, (DecodeExtras){.window = 48, .cap = 0.5f});   /* gemma2 local, a cap that bites */
    decode_positions_x(8, 4, 256, 256, 1, 300, 128, (DecodeExtras){.cap = 5.0f});                 /* gemma2 global, a mild cap */
    decode_positions_x(4, 2, 128, 128, 1, 700, 256, (DecodeExtras){.window = 300, .cap = 3.0f, .norm = true});
    decode_positions_x(4, 1, 64, 64, 0, 200, 32, (DecodeExtras){.window = 16});                  /* short chunks, many left behind */
    decode_positions_x(4, 2, 64, 64, 1, 64, 32, (DecodeExtras){.window = 100});                  /* wider than the sequence */
    decode_positions_x(16, 8, 128, 128, 1, 300, 128, (DecodeExtras){.norm = true});              /* qwen3's norms */
    decode_positions_x(4, 4, 192, 96, 0, 300, 128, (DecodeExtras){.window = 33, .norm = true});   /* 192: half the lanes' second float4 */
    decode_positions_x(4, 2, 256, 256, 1, 1100, 128, (DecodeExtras){.window = 1024, .norm = true}); /* gemma3's window of 1024 */
    /* heads of 256 on the forward pass's chunks of 64 (one row batch, cuda/attn.c): merges from
     * position 64, gemma3 global and local (a window of 1024: 17 blocks a head) */
    decode_positions_x(8, 4, 256, 256, 1, 300, 64, (DecodeExtras){.norm = true});
    decode_positions_x(8, 4, 256, 256, 1, 1100, 64, (DecodeExtras){.window = 1024, .norm = true});
    decode_positions_x(8, 4, 256, 256, 1, 300, 64, (DecodeExtras){.window = 40, .cap = 0.5f});
}

/* Fewer blocks a head than chunks (the forward pass's grid, sized to the GPU: cuda/attn.c): each
 * block runs one online softmax over every n_split-th chunk, the one holding pos included where it
 * falls to it; one block a head (no merge at any position), 2 and 3 (chunks that do not divide
 * evenly), with two row batches a chunk, a window and its chunks left behind, norms and caps,
 * heads of 256. */
ZT_TEST(attention_decode_fused_blocks_loop_over_their_chunks) {
    if (!gpu_env()) return;
    decode_positions_x(8, 2, 128, 128, 0, 1100, 128, (DecodeExtras){.split = 1});
    decode_positions_x(8, 2, 128, 128, 0, 1100, 128, (DecodeExtras){.split = 3});
    decode_positions_x(32, 8, 64, 64, 1, 900, 128, (DecodeExtras){.split = 2});
    decode_positions_x(4, 1, 128, 128, 0, 1300, 256, (DecodeExtras){.split = 2});  /* two row batches a chunk */
    decode_positions_x(8, 4, 256, 256, 1, 2000, 64, (DecodeExtras){.window = 200, .norm = true, .split = 2});
    decode_positions_x(8, 4, 256, 256, 1, 1100, 64, (DecodeExtras){.window = 1024, .norm = true, .split = 5});
    decode_positions_x(4, 2, 128, 128, 1, 700, 128, (DecodeExtras){.window = 300, .cap = 3.0f, .norm = true, .split = 2});
    decode_positions_x(8, 8, 128, 128, 1, 600, 32, (DecodeExtras){.norm = true, .split = 7});
}

/* Blocks of 2 or 4 query heads of one KV head (each row a lane loads serves every head of the
 * block): every layer kind of the single-head tests, one block a group and several, heads of 8,
 * 64, 96 (heads that are no multiple of 32) and 128, norms, windows and caps, two row batches a
 * chunk, the forward pass's chunks of 128. */
ZT_TEST(attention_decode_fused_query_head_groups_match_the_split_path_and_cpu) {
    if (!gpu_env()) return;
    decode_positions_x(8, 2, 128, 128, 0, 1100, 128, (DecodeExtras){.qg = 4, .split = 3}); /* the 8B head */
    decode_positions_x(8, 2, 128, 128, 0, 200, 128, (DecodeExtras){.qg = 2});
    decode_positions_x(32, 8, 64, 64, 1, 900, 128, (DecodeExtras){.qg = 4, .split = 2}); /* the 1B head */
    decode_positions_x(16, 2, 128, 128, 1, 700, 128, (DecodeExtras){.qg = 4, .norm = true, .split = 4}); /* qwen3 8:1 */
    decode_positions_x(16, 2, 128, 128, 1, 300, 128, (DecodeExtras){.qg = 2, .norm = true});
    decode_positions_x(8, 4, 128, 128, 1, 1100, 64, (DecodeExtras){.qg = 2, .window = 1024, .norm = true, .split = 5});
    decode_positions_x(8, 4, 128, 128, 1, 300, 64, (DecodeExtras){.qg = 2, .window = 40, .cap = 0.5f});
    decode_positions_x(4, 1, 128, 128, 0, 1300, 256, (DecodeExtras){.qg = 4, .split = 2}); /* two row batches a chunk */
    decode_positions_x(4, 2, 128, 128, 1, 700, 128, (DecodeExtras){.qg = 2, .window = 300, .cap = 3.0f, .norm = true, .split = 2});
    decode_positions_x(8, 2, 96, 96, 0, 500, 128, (DecodeExtras){.qg = 4, .norm = true, .split = 2}); /* heads of 96 */
    decode_positions_x(8, 2, 64, 32, 1, 600, 128, (DecodeExtras){.qg = 4, .window = 100});             /* half-rotated heads */
    decode_positions_x(8, 4, 8, 8, 0, 64, 32, (DecodeExtras){.qg = 2});                              /* head_dim 8 */
    /* groups that do not divide the KV head's query heads, groups of heads of 256, 3: refused by name */
    GpuEnv *g = gpu_env();
    const ZrCuAttnDecode bad[] = {{.n_head = 8, .n_kv = 4, .head_dim = 128, .rope_dim = 128, .chunk = 128, .qg = 4},
                                  {.n_head = 8, .n_kv = 2, .head_dim = 256, .rope_dim = 256, .chunk = 64, .qg = 2},
                                  {.n_head = 12, .n_kv = 2, .head_dim = 128, .rope_dim = 128, .chunk = 128, .qg = 3},
                                  /* an F16 cache's groups take slots of 8 halves */
                                  {.n_head = 8, .n_kv = 4, .head_dim = 12, .rope_dim = 12, .chunk = 128, .qg = 2, .kv16 = true}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ZrError e = {0};
        ZT_CHECK(zr_k_attn_decode(&g->l, &g->k, &bad[i], &e) == ZR_E_INTERNAL);
        ZT_CHECKF(strstr(e.msg, "query heads a block") != NULL, "%s", e.msg);
    }
}

/* An F16 cache (llama.cpp's default; the _kvh kernels): single heads and groups of 2 and 4, heads
 * of 8, 64, 96, 128 and 256, norms, windows, caps, split grids, two row batches a chunk. Each
 * case as above: the cache row bit for bit the half of rope_kv's, the output against a double
 * reference over the rounded cache and against the F16 split path. */
ZT_TEST(attention_decode_fused_on_an_f16_cache_matches_the_split_path_and_cpu) {
    if (!gpu_env()) return;
    decode_positions_x(8, 2, 128, 128, 0, 200, 32, (DecodeExtras){.kv16 = true});
    decode_positions_x(32, 8, 128, 128, 0, 129, 128, (DecodeExtras){.kv16 = true}); /* tg128 on the 8B */
    decode_positions_x(4, 1, 128, 128, 0, 600, 256, (DecodeExtras){.kv16 = true});  /* two row batches a chunk */
    decode_positions_x(8, 4, 8, 8, 0, 64, 32, (DecodeExtras){.kv16 = true});        /* head_dim 8 */
    decode_positions_x(8, 2, 128, 128, 0, 1100, 128, (DecodeExtras){.kv16 = true, .split = 3});
    decode_positions_x(8, 2, 128, 128, 0, 1100, 128, (DecodeExtras){.kv16 = true, .qg = 4, .split = 3});
    decode_positions_x(16, 2, 128, 128, 1, 700, 128, (DecodeExtras){.kv16 = true, .qg = 4, .norm = true, .split = 4});
    decode_positions_x(8, 4, 128, 128, 1, 300, 64, (DecodeExtras){.kv16 = true, .qg = 2, .window = 40, .cap = 0.5f});
    decode_positions_x(8, 2, 96, 96, 0, 500, 128, (DecodeExtras){.kv16 = true, .qg = 4, .norm = true, .split = 2});
    decode_positions_x(4, 1, 128, 128, 0, 1300, 256, (DecodeExtras){.kv16 = true, .qg = 4, .split = 2});
    decode_positions_x(8, 4, 256, 256, 1, 1100, 64, (DecodeExtras){.kv16 = true, .window = 1024, .norm = true, .split = 5});
    decode_positions_x(8, 4, 256, 256, 1, 300, 128, (DecodeExtras){.kv16 = true, .window = 48, .cap = 0.5f});
    decode_positions_x(4, 4, 192, 96, 0, 300, 128, (DecodeExtras){.kv16 = true, .window = 33, .norm = true});
    decode_positions_x(8, 2, 64, 32, 1, 600, 128, (DecodeExtras){.kv16 = true, .qg = 4, .window = 100});
    decode_positions_x(8, 4, 8, 8, 0, 64, 32, (DecodeExtras){.kv16 = true, .qg = 2});  /* head_dim 8: one lane a row */
    decode_positions_x(8, 4, 40, 40, 1, 300, 64, (DecodeExtras){.kv16 = true, .qg = 2, .norm = true, .split = 2}); /* 5 slots */
}

/* The tensor-core kernel (attn_decode_mma_d64/_d128_kvh, a block per KV head serving all its query
 * heads as the rows of its mma.sync): held to the CUDA-core kernels' tolerances against the double
 * reference and the F16 split path (its Q and P each split into two halves: F32's precision).
 * Groups of 2, 3 (Llama-3.2-3B), 4 (the 8B), 7 (Qwen2.5-7B), 8 (Qwen3-30B-A3B) and 16; heads of 64
 * and 128; one block and several (tiles that do not divide evenly; more blocks than tiles at the
 * first positions); norms, windows (tiles from the window's first row), caps; a long context. */
ZT_TEST(attention_decode_mma_matches_the_split_path_and_cpu) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    if (!g->k.has_attn_decode_mma) {
        fprintf(stderr, "  skipped: this GPU does not allow the tensor-core decode attention's shared memory\n");
        return;
    }
    decode_positions_x(8, 2, 128, 128, 0, 1100, 128, (DecodeExtras){.kv16 = true, .mma = true, .split = 3});
    decode_positions_x(8, 2, 128, 128, 0, 200, 128, (DecodeExtras){.kv16 = true, .mma = true, .split = 1});
    decode_positions_x(32, 8, 64, 64, 1, 900, 128, (DecodeExtras){.kv16 = true, .mma = true, .split = 16});
    decode_positions_x(24, 8, 128, 128, 1, 700, 128, (DecodeExtras){.kv16 = true, .mma = true, .split = 5}); /* 3 a KV head */
    decode_positions_x(28, 4, 128, 128, 1, 500, 128, (DecodeExtras){.kv16 = true, .mma = true, .split = 4}); /* 7 */
    decode_positions_x(16, 2, 128, 128, 1, 700, 128, (DecodeExtras){.kv16 = true, .mma = true, .norm = true, .split = 33});
    decode_positions_x(16, 1, 128, 128, 0, 600, 128, (DecodeExtras){.kv16 = true, .mma = true, .norm = true, .split = 2});
    decode_positions_x(8, 4, 128, 128, 1, 300, 64, (DecodeExtras){.kv16 = true, .mma = true, .window = 40, .cap = 0.5f, .split = 4});
    decode_positions_x(8, 4, 128, 128, 1, 1100, 64, (DecodeExtras){.kv16 = true, .mma = true, .window = 1024, .norm = true, .split = 5});
    decode_positions_x(4, 2, 128, 128, 1, 700, 128, (DecodeExtras){.kv16 = true, .mma = true, .window = 300, .cap = 3.0f, .norm = true, .split = 2});
    decode_positions_x(8, 2, 64, 32, 1, 600, 128, (DecodeExtras){.kv16 = true, .mma = true, .window = 100, .split = 3}); /* half-rotated */
    decode_positions_x(32, 8, 128, 128, 0, 5000, 128, (DecodeExtras){.kv16 = true, .mma = true, .split = 16}); /* the 8B past 4096 */
    /* an F32 cache and heads of 96 or 256 have no such kernel: refused by name */
    const ZrCuAttnDecode bad[] = {{.n_head = 8, .n_kv = 2, .head_dim = 128, .rope_dim = 128, .chunk = 128, .mma = true},
                                  {.n_head = 8, .n_kv = 2, .head_dim = 96, .rope_dim = 96, .chunk = 128, .mma = true, .kv16 = true},
                                  {.n_head = 8, .n_kv = 4, .head_dim = 256, .rope_dim = 256, .chunk = 64, .mma = true, .kv16 = true},
                                  {.n_head = 34, .n_kv = 2, .head_dim = 128, .rope_dim = 128, .chunk = 64, .mma = true, .kv16 = true}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ZrError e = {0};
        ZT_CHECK(zr_k_attn_decode(&g->l, &g->k, &bad[i], &e) == ZR_E_INTERNAL);
        ZT_CHECKF(strstr(e.msg, "attn_decode_mma: no kernel") != NULL, "%s", e.msg);
    }
}

ZT_TEST(attention_decode_fused_refuses_shapes_it_does_not_handle) {
    ZT_CHECK(!zr_cuf_attn_decode_fits(12, 8, 128, 128, 128)); /* query heads no multiple of the KV heads */
    ZT_CHECK(!zr_cuf_attn_decode_fits(8, 8, 512, 512, 128));  /* head_dim above 256 */
    ZT_CHECK(zr_cuf_attn_decode_fits(8, 4, 256, 256, 128));   /* gemma's heads of 256 */
    ZT_CHECK(!zr_cuf_attn_decode_fits(8, 8, 66, 66, 128));    /* head_dim not a multiple of 4 */
    ZT_CHECK(!zr_cuf_attn_decode_fits(8, 8, 128, 130, 128));  /* rope wider than the head */
    ZT_CHECK(zr_cuf_attn_decode_fits(32, 8, 128, 128, 256));
    ZT_CHECK(zr_cuf_attn_decode_fits(32, 2, 128, 128, 8192)); /* 16 query heads per KV head, long chunks */
}

ZT_TEST(attention_causal_prefill_matches_cpu) {
    if (!gpu_env()) return;
    attention_case(4, 2, 64, 512, 290, 6, 128);
    attention_case(4, 2, 64, 64, 0, 33, 64); /* the fixtures' shape: 33 rows from position 0 */
}

/* attn_prefill_f16_d* through zr_k_attn_prefill: M query rows at positions pos0.. over a cache
 * whose rows past pos0 + M - 1 are NaN (not yet written: the kernel must not let them in) and
 * whose output starts as NaN with one row more (rows < M written, row M untouched), against
 * double precision. window > 0: query p sees keys p + 1 - window .. p, and the cache rows before
 * the oldest key any query sees are NaN too (the kernel must skip them); cap > 0: scores
 * cap tanh(s / cap) (gemma2). The kernel rounds Q (scaled), K, V and the probabilities to F16
 * (unit roundoff u = 2^-11), so per output value (natural-log scores s_j, weights p_j / l):
 *     |err| <= max_j |ds_j| * sum_j p_j |v_j - o| / l  +  2u * sum_j p_j |v_j| / l,
 *     |ds_j| <= 2u * scale * sum_d |q_d k_jd|   (F32 accumulation and exp2 add ~1e-6 relative;
 *     the cap's tanh has a slope of at most 1, so a capped score's error is no larger);
 * the test allows 1.5 times that plus 1e-6. A key let in or left out past the causal edge or the
 * window, a wrong fragment or a wrong head moves values by a fair fraction of |v| (0.3..1): 10..100x it.
 * The kernel's F16-cache twin (_kvh) on the halves of the same cache gives the same bits: its
 * tiles are the halves the F32 kernel rounds its rows to. */
static double attention_prefill_case(int n_head, int n_kv, int hd, int M, int pos0, int window, float cap) {
    GpuEnv *g = gpu_env();
    uint64_t s = 1000 + 7 * hd + 3 * M + pos0 + n_kv + 11 * window;
    const int kv_dim = n_kv * hd, q_dim = n_head * hd, q_stride = q_dim + 2 * kv_dim, n_ctx = pos0 + M + 70;
    float *q = malloc(sizeof(float) * M * q_stride), *kc = malloc(sizeof(float) * n_ctx * kv_dim),
          *vc = malloc(sizeof(float) * n_ctx * kv_dim), *out = malloc(sizeof(float) * (M + 1) * q_dim);
    for (int i = 0; i < M * q_stride; i++) q[i] = 2.0f * gpu_rand(&s);
    const int oldest = window > 0 && pos0 + 1 > window ? pos0 + 1 - window : 0; /* row 0's oldest key */
    for (int i = 0; i < n_ctx * kv_dim; i++) {
        const bool live = i / kv_dim < pos0 + M && i / kv_dim >= oldest;
        kc[i] = live ? gpu_rand(&s) : NAN;
        vc[i] = live ? gpu_rand(&s) + 0.25f : NAN; /* an offset: a dropped normalization shows */
    }
    for (int i = 0; i < (M + 1) * q_dim; i++) out[i] = NAN;
    CUdeviceptr dq = gpu_upload(g, q, sizeof(float) * M * q_stride), dk = gpu_upload(g, kc, sizeof(float) * n_ctx * kv_dim);
    CUdeviceptr dv = gpu_upload(g, vc, sizeof(float) * n_ctx * kv_dim), dp = gpu_upload(g, &pos0, sizeof pos0);
    CUdeviceptr dout = gpu_upload(g, out, sizeof(float) * (M + 1) * q_dim);
    const double scale = 1.0 / sqrt((double)hd);
    ZrError e = {0};
    double *sc = malloc(sizeof(double) * n_ctx), *ds = malloc(sizeof(double) * n_ctx), worst = 0;
    if (zr_k_attn_prefill(&g->l, &g->k, false, dq, q_stride, dk, dv, dout, q_dim, dp, n_head, n_kv, hd, (float)scale, window,
                          cap, M, &e)) {
        fprintf(stderr, "  %s\n", e.msg);
        worst = 1e30;
    }
    gpu_download(g, out, dout, sizeof(float) * (M + 1) * q_dim);
    {
        float *out16 = malloc(sizeof(float) * (M + 1) * q_dim);
        for (int i = 0; i < (M + 1) * q_dim; i++) out16[i] = NAN;
        CUdeviceptr dk16 = kv_upload(g, kc, (size_t)n_ctx * kv_dim, true), dv16 = kv_upload(g, vc, (size_t)n_ctx * kv_dim, true);
        CUdeviceptr dout16 = gpu_upload(g, out16, sizeof(float) * (M + 1) * q_dim);
        if (zr_k_attn_prefill(&g->l, &g->k, true, dq, q_stride, dk16, dv16, dout16, q_dim, dp, n_head, n_kv, hd,
                              (float)scale, window, cap, M, &e)) {
            fprintf(stderr, "  kv16: %s\n", e.msg);
            worst = 1e30;
        }
        gpu_download(g, out16, dout16, sizeof(float) * (M + 1) * q_dim);
        if (memcmp(out16, out, sizeof(float) * (M + 1) * q_dim)) {
            fprintf(stderr, "  heads %d/%d hd %d M %d pos0 %d window %d cap %g: the F16 cache gave other bits\n", n_head,
                    n_kv, hd, M, pos0, window, (double)cap);
            worst = 1e30;
        }
        gpu_free(g, dk16);
        gpu_free(g, dv16);
        gpu_free(g, dout16);
        free(out16);
    }
    const double u = 1.0 / 2048;
    for (int i = 0; i < M; i++)
        for (int h = 0; h < n_head; h++) {
            const int n_keys = pos0 + i + 1, kvh = h / (n_head / n_kv);
            const int first = window > 0 && n_keys > window ? n_keys - window : 0;
            const float *qi = q + (size_t)i * q_stride + (size_t)h * hd;
            double mx = -1e300, l = 0, ds_max = 0;
            for (int p = first; p < n_keys; p++) {
                const float *kp = kc + (size_t)p * kv_dim + (size_t)kvh * hd;
                double d = 0, mag = 0;
                for (int j = 0; j < hd; j++) d += (double)qi[j] * kp[j], mag += fabs((double)qi[j] * kp[j]);
                sc[p] = cap > 0 ? cap * tanh(d * scale / cap) : d * scale;
                ds[p] = 2 * u * scale * mag;
                if (sc[p] > mx) mx = sc[p];
                if (ds[p] > ds_max) ds_max = ds[p];
            }
            for (int p = first; p < n_keys; p++) l += (sc[p] = exp(sc[p] - mx));
            for (int j = 0; j < hd; j++) {
                double o = 0, vabs = 0, vdev = 0;
                for (int p = first; p < n_keys; p++) {
                    const double v = vc[(size_t)p * kv_dim + (size_t)kvh * hd + j];
                    o += sc[p] * v;
                    vabs += sc[p] * fabs(v);
                }
                o /= l;
                for (int p = first; p < n_keys; p++) vdev += sc[p] * fabs(vc[(size_t)p * kv_dim + (size_t)kvh * hd + j] - o);
                const double tol = 1.5 * (ds_max * vdev / l + 2 * u * vabs / l) + 1e-6;
                const float got = out[(size_t)i * q_dim + (size_t)h * hd + j];
                const double r = isfinite(got) ? fabs(got - o) / tol : 1e30;
                if (r > worst) worst = r;
                if (r > 1.0 && r == worst)
                    fprintf(stderr, "  heads %d/%d hd %d M %d pos0 %d window %d cap %g row %d head %d [%d]: %.7g vs %.7g (tol %.3g)\n",
                            n_head, n_kv, hd, M, pos0, window, cap, i, h, j, got, o, tol);
            }
        }
    for (int j = 0; j < q_dim; j++)
        if (!isnan(out[(size_t)M * q_dim + j])) {
            fprintf(stderr, "  hd %d M %d pos0 %d: row M written at [%d]\n", hd, M, pos0, j);
            worst = 1e30;
            break;
        }
    gpu_free(g, dq);
    gpu_free(g, dk);
    gpu_free(g, dv);
    gpu_free(g, dp);
    gpu_free(g, dout);
    free(q);
    free(kc);
    free(vc);
    free(out);
    free(sc);
    free(ds);
    return worst;
}

ZT_TEST(attention_prefill_tiled_matches_cpu_within_its_f16_bound) {
    if (!gpu_env()) return;
    static const int Ms[] = {1, 2, 63, 64, 65, 200}, pos0s[] = {0, 37};
    static const int heads[][2] = {{4, 4}, {8, 2}}; /* GQA 1 and 4 */
    double worst = 0;
    static const int hds[] = {64, 128, 96, 256}; /* 96: Phi-3's heads; 256: gemma's */
    for (int hdi = 0; hdi < 4; hdi++)
        for (int gi = 0; gi < 2; gi++)
            for (size_t pi = 0; pi < sizeof pos0s / sizeof pos0s[0]; pi++)
                for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
                    const int hd = hds[hdi];
                    const double r = attention_prefill_case(heads[gi][0], heads[gi][1], hd, Ms[mi], pos0s[pi], 0, 0.0f);
                    fprintf(stderr, "  attn_prefill hd %3d heads %d/%d M %3d pos0 %2d: worst |diff|/tol %.3g\n", hd,
                            heads[gi][0], heads[gi][1], Ms[mi], pos0s[pi], r);
                    if (r > worst) worst = r;
                }
    ZT_CHECKF(worst <= 1.0, "attn_prefill: worst |diff|/tol %.3g", worst);
}

/* The sliding window (gemma2/gemma3) and the soft cap (gemma2) in the heads of 128 and 256:
 * windows shorter than a key tile, across tiles and longer than the context; prefills that start
 * past the window (the oldest keys NaN: skipped); rows whose first tile holds no key of theirs. */
ZT_TEST(attention_prefill_tiled_window_and_cap_match_cpu) {
    if (!gpu_env()) return;
    static const struct { int M, pos0, window; float cap; } cs[] = {
        {200, 0, 16, 0.0f}, {200, 0, 50, 0.0f}, {130, 37, 64, 0.0f}, {65, 300, 100, 0.0f}, {64, 0, 1, 0.0f},
        {150, 20, 4096, 0.0f}, {200, 0, 0, 30.0f}, {130, 37, 50, 20.0f}, {1, 500, 33, 0.0f}, {96, 129, 97, 50.0f},
    };
    static const int hds[] = {128, 256};
    double worst = 0;
    for (int hdi = 0; hdi < 2; hdi++)
        for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
            const double r = attention_prefill_case(8, 2, hds[hdi], cs[i].M, cs[i].pos0, cs[i].window, cs[i].cap);
            fprintf(stderr, "  attn_prefill hd %3d heads 8/2 M %3d pos0 %3d window %4d cap %4.1f: worst |diff|/tol %.3g\n",
                    hds[hdi], cs[i].M, cs[i].pos0, cs[i].window, (double)cs[i].cap, r);
            if (r > worst) worst = r;
        }
    ZT_CHECKF(worst <= 1.0, "attn_prefill with a window or a cap: worst |diff|/tol %.3g", worst);
}

/* rmsnorm_f32_f16 and swiglu_f32_f16 (the prefill's F16 GEMM operands written directly) give
 * the bits of rmsnorm_f32 / swiglu_f32 followed by convert_f32_f16 (which the tests above hold
 * to the CPU), on every value, with an output stride and poisoned outputs. */
ZT_TEST(prefill_f16_operands_equal_the_f32_kernels_then_convert) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    uint64_t s = 77;
    const int rows = 5, n = 4096, stride = 2 * n + 32, n_ff = 1000, gstride = 2 * n_ff + 8;
    float *x = malloc(sizeof(float) * rows * stride), *w = malloc(sizeof(float) * n);
    float *gu = malloc(sizeof(float) * rows * gstride);
    uint16_t *a = malloc(2 * (size_t)rows * stride), *b = malloc(2 * (size_t)rows * stride);
    for (int i = 0; i < rows * stride; i++) x[i] = 3.0f * gpu_rand(&s);
    for (int i = 0; i < n; i++) w[i] = 1.0f + 0.1f * gpu_rand(&s);
    for (int i = 0; i < rows * gstride; i++) gu[i] = 6.0f * gpu_rand(&s);
    for (int i = 0; i < rows * stride; i++) a[i] = b[i] = 0x7e00; /* F16 NaN */
    CUdeviceptr dx = gpu_upload(g, x, sizeof(float) * rows * stride), dw = gpu_upload(g, w, sizeof(float) * n);
    CUdeviceptr dgu = gpu_upload(g, gu, sizeof(float) * rows * gstride), dy = gpu_alloc(g, sizeof(float) * rows * stride);
    CUdeviceptr ha = gpu_upload(g, a, 2 * (size_t)rows * stride), hb = gpu_upload(g, b, 2 * (size_t)rows * stride);
    const float eps = 1e-5f;
    int one = 1;
    ZrError e = {0};
    /* rmsnorm: rows of n from stride `stride` into F16 rows of stride `stride` */
    ZT_CHECKF(!ZR_LAUNCH(&g->l, &g->k.rmsnorm, ZR_DIM3(one, rows, 1), ZR_DIM1(256), 0, &e, &dx, (void *)&stride, &dw, &dy,
                         (void *)&n, (void *)&n, (void *)&eps),
              "%s", e.msg);
    ZT_CHECKF(!ZR_LAUNCH(&g->l, &g->k.convert, ZR_DIM3((n + 255) / 256, rows, 1), ZR_DIM1(256), 0, &e, &dy, (void *)&n,
                         &ha, (void *)&stride, (void *)&n),
              "%s", e.msg);
    ZT_CHECKF(!ZR_LAUNCH(&g->l, &g->k.rmsnorm_f16, ZR_DIM3(one, rows, 1), ZR_DIM1(256), 0, &e, &dx, (void *)&stride, &dw,
                         &hb, (void *)&stride, (void *)&n, (void *)&eps),
              "%s", e.msg);
    gpu_download(g, a, ha, 2 * (size_t)rows * stride);
    gpu_download(g, b, hb, 2 * (size_t)rows * stride);
    int diff = 0, poisoned = 0;
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < stride; i++) {
            if (i < n) diff += a[r * stride + i] != b[r * stride + i] || b[r * stride + i] == 0x7e00;
            else poisoned += b[r * stride + i] == 0x7e00;
        }
    ZT_CHECKF(diff == 0, "rmsnorm_f32_f16: %d values differ from rmsnorm_f32 + convert", diff);
    ZT_CHECKF(poisoned == rows * (stride - n), "rmsnorm_f32_f16 wrote past its rows");
    /* swiglu: gate|up rows of stride gstride into packed F16 rows of n_ff */
    const unsigned gx = (n_ff + 255) / 256;
    ZT_CHECKF(!ZR_LAUNCH(&g->l, &g->k.swiglu, ZR_DIM3(gx, rows, 1), ZR_DIM1(256), 0, &e, &dgu, (void *)&gstride, &dy,
                         (void *)&n_ff),
              "%s", e.msg);
    ZT_CHECKF(!ZR_LAUNCH(&g->l, &g->k.convert, ZR_DIM3(gx, rows, 1), ZR_DIM1(256), 0, &e, &dy, (void *)&n_ff, &ha,
                         (void *)&n_ff, (void *)&n_ff),
              "%s", e.msg);
    ZT_CHECKF(!ZR_LAUNCH(&g->l, &g->k.swiglu_f16, ZR_DIM3(gx, rows, 1), ZR_DIM1(256), 0, &e, &dgu, (void *)&gstride, &hb,
                         (void *)&n_ff),
              "%s", e.msg);
    gpu_download(g, a, ha, 2 * (size_t)rows * n_ff);
    gpu_download(g, b, hb, 2 * (size_t)rows * n_ff);
    diff = 0;
    for (int i = 0; i < rows * n_ff; i++) diff += a[i] != b[i] || b[i] == 0x7e00;
    ZT_CHECKF(diff == 0, "swiglu_f32_f16: %d values differ from swiglu_f32 + convert", diff);
    gpu_free(g, dx);
    gpu_free(g, dw);
    gpu_free(g, dgu);
    gpu_free(g, dy);
    gpu_free(g, ha);
    gpu_free(g, hb);
    free(x);
    free(w);
    free(gu);
    free(a);
    free(b);
}

ZT_TEST(swiglu_add_and_f16_convert_match_cpu) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    const int n = 1000, rows = 2, stride = 2 * n;
    uint64_t s = 8;
    float *gu = malloc(sizeof(float) * rows * stride), *out = malloc(sizeof(float) * rows * stride),
          *ref = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n);
    uint16_t *h = malloc(2 * (size_t)rows * n);
    for (int i = 0; i < rows * stride; i++) gu[i] = 6.0f * gpu_rand(&s);
    for (int i = 0; i < n; i++) b[i] = gpu_rand(&s);
    CUdeviceptr dg = gpu_upload(g, gu, sizeof(float) * rows * stride), dout = gpu_alloc(g, sizeof(float) * rows * n);
    CUdeviceptr db = gpu_upload(g, b, sizeof(float) * n), dh = gpu_alloc(g, 2 * (size_t)rows * n);
    ZrError e = {0};
    const unsigned gx = (n + 255) / 256;
    ZT_CHECKF(!ZR_LAUNCH(&g->l, &g->k.swiglu, ZR_DIM3(gx, rows, 1), ZR_DIM1(256), 0, &e, &dg, (void *)&stride, &dout,
                         (void *)&n),
              "%s", e.msg);
    gpu_download(g, out, dout, sizeof(float) * rows * n);
    for (int r = 0; r < rows; r++) {
        zr_cpu_swiglu(ref, gu + r * stride, gu + r * stride + n, n);
        for (int i = 0; i < n; i++) ZT_NEAR(out[r * n + i], ref[i], 1e-6 * fabs(ref[i]) + 1e-7);
    }
    /* add_rows: bias on every row of the gate|up rows (stride 2n, n values) */
    ZT_CHECKF(!ZR_LAUNCH(&g->l, &g->k.add_rows, ZR_DIM3(gx, rows, 1), ZR_DIM1(256), 0, &e, &dg, (void *)&stride, &db,
                         (void *)&n),
              "%s", e.msg);
    /* add: the residual */
    const int total = rows * n;
    ZT_CHECKF(!ZR_LAUNCH(&g->l, &g->k.add, ZR_DIM1((total + 255) / 256), ZR_DIM1(256), 0, &e, &dout, &dg, (void *)&total),
              "%s", e.msg);
    float *got = malloc(sizeof(float) * rows * stride);
    gpu_download(g, got, dg, sizeof(float) * rows * stride);
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < stride; i++) ZT_CHECK(got[r * stride + i] == gu[r * stride + i] + (i < n ? b[i] : 0.0f));
    float *o2 = malloc(sizeof(float) * rows * n);
    gpu_download(g, o2, dout, sizeof(float) * rows * n);
    for (int i = 0; i < total; i++) ZT_CHECK(o2[i] == out[i] + got[i]); /* add reads y[i] += a[i] from flat memory */
    /* convert: rows of n from stride 2n into a packed F16 matrix */
    ZT_CHECKF(!ZR_LAUNCH(&g->l, &g->k.convert, ZR_DIM3(gx, rows, 1), ZR_DIM1(256), 0, &e, &dg, (void *)&stride, &dh,
                         (void *)&n, (void *)&n),
              "%s", e.msg);
    gpu_download(g, h, dh, 2 * (size_t)rows * n);
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < n; i++) ZT_CHECK(h[r * n + i] == zr_f32_to_f16(got[r * stride + i]));
    gpu_free(g, dg);
    gpu_free(g, dout);
    gpu_free(g, db);
    gpu_free(g, dh);
    free(gu);
    free(out);
    free(ref);
    free(b);
    free(h);
    free(got);
    free(o2);
}

/* ---- the greedy pick (cu/argmax.cu) against zr_sampler_argmax and a scan for the first NaN or inf ---- */

enum { PICK_RANDOM, PICK_AT_FIRST, PICK_AT_LAST, PICK_TIES, PICK_NANS, PICK_ALL_NAN_OR_INF, PICK_ZEROS, PICK_INFS, PICK_KINDS };

/* v[n] of the kind; values past n (v has n + 64) are larger than any inside, which must not count. */
static void pick_values(float *v, int n, int kind, uint64_t *s) {
    for (int i = 0; i < n; i++) v[i] = 10.0f * gpu_rand(s);
    for (int i = n; i < n + 64; i++) v[i] = 1e30f;
    const int a = (int)((*s >> 11) % (uint64_t)n); /* a random id */
    switch (kind) {
    case PICK_AT_FIRST: v[0] = 100.0f; break;
    case PICK_AT_LAST: v[n - 1] = 100.0f; break;
    case PICK_TIES: /* the maximum three times, and a near miss before them */
        for (int k = 0; k < 3; k++) v[(a + k * 7919) % n] = 50.0f;
        v[a / 2] = nextafterf(50.0f, 0.0f);
        break;
    case PICK_NANS: /* NaN above everything and at the start: never picked, the first reported */
        for (int k = 0; k < 5; k++) v[(a + k * 104729) % n] = NAN;
        v[0] = NAN;
        v[n - 1] = INFINITY;
        break;
    case PICK_ALL_NAN_OR_INF: /* nothing possible: id 0 */
        for (int i = 0; i < n; i++) v[i] = i % 3 ? -INFINITY : NAN;
        break;
    case PICK_INFS: /* +inf and -inf, no NaN: +inf is picked, the first of either reported */
        v[(a + 3) % n] = INFINITY;
        v[a] = -INFINITY;
        break;
    case PICK_ZEROS: /* the maximum is zero, -0 first, then +0: they tie, the first wins */
        for (int i = 0; i < n; i++) v[i] = -1.0f - fabsf(v[i]);
        v[a] = -0.0f;
        v[(a + 1) % n] = 0.0f;
        break;
    default: break;
    }
}

ZT_TEST(argmax_picks_the_first_maximum_ignoring_nan_and_reports_the_first_nan_or_inf) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    /* 1..3: less than a float4; 4099 and 128259: n not a multiple of 4 or of a block's 4096
     * values; 128256 the Llama 3 vocabulary; 2000003: more than 256 blocks' worth (grid-stride) */
    static const int sizes[] = {1, 2, 3, 4, 5, 255, 4096, 4099, 128256, 128259, 2000003};
    const int max_n = 2000003;
    float *v = malloc(sizeof(float) * (max_n + 64));
    CUdeviceptr dv = gpu_alloc(g, sizeof(float) * (max_n + 64)), dp = gpu_alloc(g, ZR_PICK_BYTES);
    ZrError e = {0};
    ZT_CHECK(v && !zr_cuda_memset8(&g->cuda, dp, 0, ZR_PICK_BYTES, &e));
    uint64_t s = 0x5eed1234u;
    int cases = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (int kind = 0; kind < PICK_KINDS; kind++) {
            const int n = sizes[si];
            pick_values(v, n, kind, &s);
            gpu_free(g, dv); /* fresh buffers each case: nothing left over from the one before */
            dv = gpu_upload(g, v, sizeof(float) * (n + 64));
            const int32_t poison[2] = {0x7f7f7f7f, 0x7f7f7f7f};
            ZT_CHECK(!zr_cuda_h2d(&g->cuda, dp, poison, sizeof poison, &e)); /* the counter stays as the last launch left it */
            ZT_CHECKF(!zr_pick_launch(&g->l, &g->k.argmax, dv, n, dp, &e), "%s", e.msg);
            int32_t got[2];
            gpu_download(g, got, dp, sizeof got);
            const int32_t want = zr_sampler_argmax(v, n);
            int32_t bad_at = -1;
            for (int i = 0; i < n && bad_at < 0; i++)
                if (!isfinite(v[i])) bad_at = i;
            ZT_CHECKF(got[0] == want && got[1] == bad_at, "n %d, case %d: picked %d (non-finite at %d), expected %d (non-finite at %d)",
                      n, kind, got[0], got[1], want, bad_at);
            cases++;
        }
    /* the block counter is back at 0 after every launch */
    uint32_t done;
    gpu_download(g, &done, dp + 8, sizeof done);
    ZT_CHECK(done == 0);
    fprintf(stderr, "  %d cases\n", cases);
    gpu_free(g, dv);
    gpu_free(g, dp);
    free(v);
}

/* ---- gemma's kernels (issue 14) ---- */

/* softcap_f32 and geglu_f32 are the CPU reference's formulas (tanhf
 * on both sides: a few ulps); geglu_f32_f16 is geglu_f32 rounded to F16; rmsnorm_add_f32 is
 * zr_cpu_rmsnorm then the add. */
ZT_TEST(gemma_elementwise_kernels_match_the_cpu_reference) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    const int n = 1000, rows = 3, stride = 2 * n;
    uint64_t s = 21;
    float *x = malloc(sizeof(float) * rows * stride), *got = malloc(sizeof(float) * rows * stride),
          *ref = malloc(sizeof(float) * rows * stride), *w = malloc(sizeof(float) * n);
    uint16_t *h = malloc(2 * (size_t)rows * n);
    for (int i = 0; i < rows * stride; i++) x[i] = 8.0f * gpu_rand(&s);
    for (int i = 0; i < n; i++) w[i] = 1.0f + 0.3f * gpu_rand(&s);
    ZrError e = {0};
    /* softcap */
    CUdeviceptr dx = gpu_upload(g, x, sizeof(float) * rows * stride);
    ZT_CHECKF(!zr_k_softcap(&g->l, &g->k, dx, 5.0f, rows * stride, &e), "%s", e.msg);
    gpu_download(g, got, dx, sizeof(float) * rows * stride);
    memcpy(ref, x, sizeof(float) * rows * stride);
    zr_cpu_softcap(ref, 5.0f, (int64_t)rows * stride);
    for (int i = 0; i < rows * stride; i++) ZT_NEAR(got[i], ref[i], 2e-6 * fabs(ref[i]) + 1e-7);
    /* geglu, F32 and F16 out */
    gpu_free(g, dx);
    dx = gpu_upload(g, x, sizeof(float) * rows * stride);
    CUdeviceptr dout = gpu_alloc(g, sizeof(float) * rows * n), dh = gpu_alloc(g, 2 * (size_t)rows * n);
    ZT_CHECKF(!zr_k_geglu(&g->l, &g->k, false, dx, stride, dout, n, rows, &e), "%s", e.msg);
    ZT_CHECKF(!zr_k_geglu(&g->l, &g->k, true, dx, stride, dh, n, rows, &e), "%s", e.msg);
    gpu_download(g, got, dout, sizeof(float) * rows * n);
    gpu_download(g, h, dh, 2 * (size_t)rows * n);
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < n; i++) {
            const float a = x[r * stride + i], u = x[r * stride + n + i];
            const double gl = 0.5 * a * (1.0 + tanh(0.79788456080286535587989211986876 * a * (1.0 + 0.044715 * a * a)));
            const double want = gl * u;
            ZT_NEAR(got[r * n + i], want, 3e-6 * fabs(want) + 1e-6);
            ZT_NEAR(zr_f16_to_f32(h[r * n + i]), got[r * n + i], 1e-3 * fabs(got[r * n + i]) + 1e-7);
        }
    /* rmsnorm_add: y[r] += RMSNorm(x[r]) w over rows of n (x: the first rows*n values) */
    float *y = malloc(sizeof(float) * rows * n);
    for (int i = 0; i < rows * n; i++) y[i] = gpu_rand(&s);
    CUdeviceptr dy = gpu_upload(g, y, sizeof(float) * rows * n), dw = gpu_upload(g, w, sizeof(float) * n);
    gpu_free(g, dx);
    dx = gpu_upload(g, x, sizeof(float) * rows * n);
    ZT_CHECKF(!zr_k_rmsnorm_add(&g->l, &g->k, dx, dw, dy, n, 1e-6f, rows, &e), "%s", e.msg);
    gpu_download(g, got, dy, sizeof(float) * rows * n);
    for (int r = 0; r < rows; r++) {
        zr_cpu_rmsnorm(ref, x + r * n, w, n, 1e-6f);
        for (int i = 0; i < n; i++) ZT_NEAR(got[r * n + i], y[r * n + i] + ref[i], 1e-5 * (fabs(ref[i]) + fabs(y[r * n + i])) + 1e-6);
    }
    gpu_free(g, dx);
    gpu_free(g, dy);
    gpu_free(g, dw);
    gpu_free(g, dout);
    gpu_free(g, dh);
    free(x);
    free(got);
    free(ref);
    free(w);
    free(h);
    free(y);
}

/* attn_part_f32 + attn_combine_f32: `rows` queries at positions pos0.. over the cache, keys
 * restricted to the last `window` positions (0: all), scores soft-capped (0: not), against a
 * double-precision CPU computation. Chunks wholly before the window must merge as nothing.
 * kv16: attn_part_f32_kvh over the halves of the cache (the reference reads the same values). */
static void swa_case_kv(int n_head, int n_kv, int hd, int n_ctx, int pos0, int rows, int chunk, int window, float cap,
                        bool kv16) {
    GpuEnv *g = gpu_env();
    uint64_t s = 31 + hd + pos0 + window;
    const int kv_dim = n_kv * hd, q_stride = n_head * hd + 2 * kv_dim, n_chunks = (n_ctx + chunk - 1) / chunk;
    float *q = malloc(sizeof(float) * rows * q_stride), *kc = malloc(sizeof(float) * n_ctx * kv_dim),
          *vc = malloc(sizeof(float) * n_ctx * kv_dim), *out = malloc(sizeof(float) * rows * n_head * hd);
    for (int i = 0; i < rows * q_stride; i++) q[i] = 4.0f * gpu_rand(&s);
    for (int i = 0; i < n_ctx * kv_dim; i++) kc[i] = gpu_rand(&s), vc[i] = gpu_rand(&s);
    kv_round(kc, (size_t)n_ctx * kv_dim, kv16);
    kv_round(vc, (size_t)n_ctx * kv_dim, kv16);
    CUdeviceptr dq = gpu_upload(g, q, sizeof(float) * rows * q_stride), dk = kv_upload(g, kc, (size_t)n_ctx * kv_dim, kv16);
    CUdeviceptr dv = kv_upload(g, vc, (size_t)n_ctx * kv_dim, kv16), dp = gpu_upload(g, &pos0, sizeof pos0);
    CUdeviceptr part = gpu_alloc(g, sizeof(float) * rows * n_head * n_chunks * (hd + 2));
    CUdeviceptr dout = gpu_alloc(g, sizeof(float) * rows * n_head * hd);
    const float scale = 1.0f / sqrtf((float)hd);
    ZrError e = {0};
    ZT_CHECKF(!zr_k_attn_split(&g->l, &g->k, kv16, dq, q_stride, dk, dv, part, dp, dout, n_head * hd, n_head, n_kv, hd, scale,
                               window, cap, chunk, n_chunks, rows, &e),
              "%s", e.msg);
    gpu_download(g, out, dout, sizeof(float) * rows * n_head * hd);
    double *sc = malloc(sizeof(double) * n_ctx);
    for (int i = 0; i < rows; i++)
        for (int h = 0; h < n_head; h++) {
            const int n_keys = pos0 + i + 1, kvh = h / (n_head / n_kv);
            const int first = window > 0 && n_keys > window ? n_keys - window : 0;
            double mx = -1e300, sum = 0;
            for (int p = first; p < n_keys; p++) {
                double d = 0;
                for (int j = 0; j < hd; j++) d += (double)q[i * q_stride + h * hd + j] * kc[p * kv_dim + kvh * hd + j];
                sc[p] = d * scale;
                if (cap > 0) sc[p] = tanh(sc[p] / cap) * cap;
                if (sc[p] > mx) mx = sc[p];
            }
            for (int p = first; p < n_keys; p++) sum += (sc[p] = exp(sc[p] - mx));
            for (int j = 0; j < hd; j++) {
                double o = 0;
                for (int p = first; p < n_keys; p++) o += sc[p] * vc[p * kv_dim + kvh * hd + j];
                o /= sum;
                ZT_CHECKF(fabs(out[(i * n_head + h) * hd + j] - o) <= 4e-6 + 2e-5 * fabs(o),
                          "window %d cap %g hd %d%s pos %d row %d head %d [%d]: %g vs %g", window, (double)cap, hd,
                          kv16 ? " kv16" : "", pos0, i, h, j, out[(i * n_head + h) * hd + j], o);
            }
        }
    gpu_free(g, dq);
    gpu_free(g, dk);
    gpu_free(g, dv);
    gpu_free(g, dp);
    gpu_free(g, part);
    gpu_free(g, dout);
    free(q);
    free(kc);
    free(vc);
    free(out);
    free(sc);
}

static void swa_case(int n_head, int n_kv, int hd, int n_ctx, int pos0, int rows, int chunk, int window, float cap) {
    swa_case_kv(n_head, n_kv, hd, n_ctx, pos0, rows, chunk, window, cap, false);
}

ZT_TEST(sliding_window_and_soft_capped_attention_match_the_cpu_past_the_window) {
    if (!gpu_env()) return;
    swa_case(4, 2, 64, 256, 100, 1, 32, 16, 0.0f);    /* decode: chunks 0..2 wholly before the window */
    swa_case(4, 2, 64, 256, 100, 1, 32, 40, 0.0f);    /* the window starts inside a chunk */
    swa_case(8, 4, 256, 256, 200, 1, 64, 16, 50.0f);  /* gemma's head of 256, window and cap */
    swa_case(4, 1, 128, 128, 0, 60, 128, 16, 0.0f);   /* prefill from 0, rows past the window */
    swa_case(4, 2, 64, 512, 30, 70, 32, 24, 30.0f);   /* prefill after a prefix, many chunks */
    swa_case(2, 2, 64, 64, 10, 1, 32, 0, 50.0f);      /* soft-cap alone (gemma2's global layers) */
    swa_case(2, 1, 64, 64, 5, 1, 32, 100, 0.0f);      /* a window wider than the sequence */
}

/* The split path on an F16 cache (attn_part_f32_kvh): decode and prefill rows, windows, caps,
 * heads of 64, 128, 256 and one that is no multiple of 4 (the scalar loads). */
ZT_TEST(split_attention_on_an_f16_cache_matches_the_cpu) {
    if (!gpu_env()) return;
    swa_case_kv(4, 2, 64, 256, 100, 1, 32, 40, 0.0f, true);
    swa_case_kv(8, 4, 256, 256, 200, 1, 64, 16, 50.0f, true);
    swa_case_kv(4, 1, 128, 128, 0, 60, 128, 0, 0.0f, true);
    swa_case_kv(4, 2, 64, 512, 30, 70, 32, 24, 30.0f, true);
    swa_case_kv(2, 2, 6, 64, 10, 3, 32, 0, 0.0f, true);
}

/* rope_scale_f32 multiplies exactly the rotated values of Q (rows of qkv) by the factor, and
 * writes the K rows at pos[0].. of the cache as qkv's (rotated) K values times the factor, over
 * the rotated values only; every other value stays. kv16: the cache holds halves, each the half
 * of the scaled value (one rounding). */
static void rope_scale_case(bool kv16) {
    GpuEnv *g = gpu_env();
    const int n_head = 4, n_kv = 2, hd = 64, rd = 48, rows = 3, pos0 = 5, n_ctx = 16;
    const int kv_dim = n_kv * hd, stride = n_head * hd + 2 * kv_dim;
    const float factor = 1.19f;
    uint64_t s = 41;
    float *qkv = malloc(sizeof(float) * rows * stride), *kc = malloc(sizeof(float) * n_ctx * kv_dim);
    float *q2 = malloc(sizeof(float) * rows * stride), *k2 = malloc(sizeof(float) * n_ctx * kv_dim);
    for (int i = 0; i < rows * stride; i++) qkv[i] = gpu_rand(&s);
    for (int i = 0; i < n_ctx * kv_dim; i++) kc[i] = gpu_rand(&s);
    kv_round(kc, (size_t)n_ctx * kv_dim, kv16);
    CUdeviceptr dq = gpu_upload(g, qkv, sizeof(float) * rows * stride), dk = kv_upload(g, kc, (size_t)n_ctx * kv_dim, kv16);
    CUdeviceptr dp = gpu_upload(g, &pos0, sizeof pos0);
    ZrError e = {0};
    ZT_CHECKF(!zr_k_rope_scale(&g->l, &g->k, kv16, dq, stride, n_head, n_kv, hd, rd, factor, dp, dk, rows, &e), "%s", e.msg);
    gpu_download(g, q2, dq, sizeof(float) * rows * stride);
    kv_download(g, k2, dk, (size_t)n_ctx * kv_dim, kv16);
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < stride; i++) {
            const bool rotated_q = i < n_head * hd && i % hd < rd;
            ZT_CHECK(q2[r * stride + i] == (rotated_q ? qkv[r * stride + i] * factor : qkv[r * stride + i]));
        }
    for (int p = 0; p < n_ctx; p++)
        for (int i = 0; i < kv_dim; i++) {
            const bool scaled = p >= pos0 && p < pos0 + rows && i % hd < rd;
            float want = scaled ? qkv[(p - pos0) * stride + n_head * hd + i] * factor : kc[p * kv_dim + i];
            kv_round(&want, 1, kv16);
            ZT_CHECKF(!memcmp(&k2[p * kv_dim + i], &want, 4), "%s row %d [%d]: %g vs %g", kv16 ? "kv16" : "f32", p, i,
                      (double)k2[p * kv_dim + i], (double)want);
        }
    gpu_free(g, dq);
    gpu_free(g, dk);
    gpu_free(g, dp);
    free(qkv);
    free(kc);
    free(q2);
    free(k2);
}

ZT_TEST(rope_scale_scales_the_rotated_values_of_q_and_the_new_k_rows_only) {
    if (!gpu_env()) return;
    rope_scale_case(false);
    rope_scale_case(true);
}

int main(void) { return gpu_main(); }
