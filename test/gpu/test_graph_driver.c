/* The layer beneath the graph on a real GPU: driver table, memory, kernel parameter layout
 * from cuFuncGetParamInfo, the launcher's profile, and a cuBLASLt GEMM (checks our ABI copy of
 * its structs against the real library). Exits 77 without a GPU or kernels. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cuda/cublaslt.h"
#include "cuda/launch.h"
#include "cuda/module.h"
#include "gpu_env.h"
#include "zt.h"

static int open_gpu(ZrCuda *c) {
    const ZrCuDriver *d = gpu_driver();
    if (!d) {
        zt_skip(gpu_absent());
        return 77;
    }
    ZrError err = {0};
    int rc;
    if ((rc = zr_cuda_open(d, 0, c, &err)) || (rc = zr_cuda_load_kernels(c, &err)))
        fprintf(stderr, "  %s\n", err.msg);
    return rc;
}

ZT_TEST(kernel_parameter_layout_comes_from_the_module) {
    ZrCuda c;
    int rc = open_gpu(&c);
    if (rc == 77) return;
    ZT_CHECK(rc == 0);
    ZrError err = {0};
    ZrKernel k;
    const size_t sizes[] = {8, 4, 4};
    ZT_CHECKF(zr_cuda_kernel(&c, "zr_selftest_scale", sizes, 3, &k, &err) == 0, "%s", err.msg);
    ZT_CHECK(k.n_params == 3 && k.offset[0] == 0 && k.offset[1] == 8 && k.offset[2] == 12);
    const size_t wrong[] = {8, 8, 4};
    ZT_CHECK(zr_cuda_kernel(&c, "zr_selftest_scale", wrong, 3, &k, &err) == ZR_E_INTERNAL);
    ZT_CHECK(zr_cuda_kernel(&c, "read_bw_probe", NULL, 0, &k, &err) == 0 && k.n_params == 3);
    ZT_CHECK(zr_cuda_kernel(&c, "no_such_kernel", NULL, 0, &k, &err) == ZR_E_CUDA);
    ZT_CHECKF(strstr(err.msg, "CUDA_ERROR_NOT_FOUND"), "%s", err.msg);
    zr_cuda_close(&c);
}

ZT_TEST(out_of_memory_is_a_clear_error) {
    ZrCuda c;
    int rc = open_gpu(&c);
    if (rc == 77) return;
    ZT_CHECK(rc == 0);
    ZrError err = {0};
    CUdeviceptr p;
    ZT_CHECK(zr_cuda_alloc(&c, &p, (size_t)1 << 50, "a petabyte", &err) == ZR_E_NOMEM);
    ZT_CHECKF(strstr(err.msg, "a petabyte") && strstr(err.msg, "MiB free of"), "%s", err.msg);
    fprintf(stderr, "  %s\n", err.msg);
    zr_cuda_close(&c);
}

ZT_TEST(profile_times_each_kernel_and_launch_copies_round_trip) {
    ZrCuda c;
    int rc = open_gpu(&c);
    if (rc == 77) return;
    ZT_CHECK(rc == 0);
    ZrError err = {0};
    ZrKernel k;
    ZT_CHECK(zr_cuda_kernel(&c, "zr_selftest_scale", NULL, 0, &k, &err) == 0);
    enum { N = 1 << 20 };
    float *h = malloc(N * sizeof *h);
    for (int i = 0; i < N; i++) h[i] = (float)i;
    CUdeviceptr d;
    ZT_CHECK(zr_cuda_alloc(&c, &d, N * sizeof *h, "x", &err) == 0);
    ZT_CHECK(zr_cuda_h2d(&c, d, h, N * sizeof *h, &err) == 0);
    ZrLauncher l;
    ZrProfile prof;
    zr_launcher_init(&l, c.drv, c.stream);
    zr_profile_init(&prof, c.drv);
    l.profile = &prof;
    float s = 2.0f;
    int n = N;
    for (int i = 0; i < 10; i++) ZT_CHECK(ZR_LAUNCH(&l, &k, ZR_DIM1(N / 256), ZR_DIM1(256), 0, &err, &d, &s, &n) == 0);
    ZT_CHECK(zr_profile_collect(&prof, &err) == 0);
    ZT_CHECK(prof.n_rows == 1 && prof.rows[0].calls == 10 && prof.rows[0].total_ms > 0);
    zr_profile_print(&prof, stderr);
    ZT_CHECK(zr_cuda_d2h(&c, h, d, N * sizeof *h, &err) == 0 && zr_cuda_sync(&c, &err) == 0);
    ZT_CHECK(h[3] == 3.0f * 1024.0f && h[N - 1] == (float)(N - 1) * 1024.0f);
    zr_profile_free(&prof);
    zr_launcher_free(&l);
    zr_cuda_free(&c, d);
    free(h);
    zr_cuda_close(&c);
}

ZT_TEST(cublaslt_gemm_matches_the_cpu) {
    ZrCuda c;
    int rc = open_gpu(&c);
    if (rc == 77) return;
    ZT_CHECK(rc == 0);
    ZrError err = {0};
    ZrCublasLt lt;
    rc = zr_cublaslt_open(&lt, &err);
    if (rc == ZR_E_NODEV) {
        zt_skip(err.msg);
        zr_cuda_close(&c);
        return;
    }
    ZT_CHECKF(rc == 0, "%s", err.msg);
    /* Y[n_tok][n_out] = X[n_tok][n_in] . W[n_out][n_in]^T, row-major, as the header describes */
    enum { NT = 37, NI = 64, NO = 48 };
    float *w = malloc(NO * NI * sizeof *w), *x = malloc(NT * NI * sizeof *x), *y = malloc(NT * NO * sizeof *y);
    for (int i = 0; i < NO * NI; i++) w[i] = (float)((i * 7) % 13) * 0.25f - 1.5f;
    for (int i = 0; i < NT * NI; i++) x[i] = (float)((i * 5) % 11) * 0.125f - 0.5f;
    CUdeviceptr dw, dx, dy, ws;
    ZT_CHECK(zr_cuda_alloc(&c, &dw, sizeof(float) * NO * NI, "w", &err) == 0);
    ZT_CHECK(zr_cuda_alloc(&c, &dx, sizeof(float) * NT * NI, "x", &err) == 0);
    ZT_CHECK(zr_cuda_alloc(&c, &dy, sizeof(float) * NT * NO, "y", &err) == 0);
    ZT_CHECK(zr_cuda_alloc(&c, &ws, 4 << 20, "workspace", &err) == 0);
    ZT_CHECK(zr_cuda_h2d(&c, dw, w, sizeof(float) * NO * NI, &err) == 0);
    ZT_CHECK(zr_cuda_h2d(&c, dx, x, sizeof(float) * NT * NI, &err) == 0);
    ZrGemm g = {.trans_a = 1, .trans_b = 0, .m = NO, .n = NT, .k = NI,
                .a = dw, .type_a = CUDA_R_32F, .lda = NI, .b = dx, .type_b = CUDA_R_32F, .ldb = NI,
                .d = dy, .type_d = CUDA_R_32F, .ldd = NO, .alpha = 1.0f, .beta = 0.0f,
                .workspace = ws, .workspace_bytes = 4 << 20};
    ZT_CHECKF(zr_cublaslt_gemm(&lt, c.stream, &g, &err) == 0, "%s", err.msg);
    ZT_CHECK(zr_cuda_d2h(&c, y, dy, sizeof(float) * NT * NO, &err) == 0 && zr_cuda_sync(&c, &err) == 0);
    for (int t = 0; t < NT; t++)
        for (int o = 0; o < NO; o++) {
            double ref = 0;
            for (int i = 0; i < NI; i++) ref += (double)x[t * NI + i] * w[o * NI + i];
            ZT_NEAR(y[t * NO + o], ref, 1e-3 + 1e-4 * fabs(ref));
        }
    fprintf(stderr, "  cuBLASLt version %zu\n", lt.version);
    zr_cublaslt_close(&lt);
    free(w); free(x); free(y);
    zr_cuda_free(&c, dw); zr_cuda_free(&c, dx); zr_cuda_free(&c, dy); zr_cuda_free(&c, ws);
    zr_cuda_close(&c);
}

/* A strided batch (the MoE prefill's runs of experts): matrix i of each operand at i strides. */
ZT_TEST(cublaslt_batched_gemm_matches_the_cpu) {
    ZrCuda c;
    int rc = open_gpu(&c);
    if (rc == 77) return;
    ZT_CHECK(rc == 0);
    ZrError err = {0};
    ZrCublasLt lt;
    rc = zr_cublaslt_open(&lt, &err);
    if (rc == ZR_E_NODEV) {
        zt_skip(err.msg);
        zr_cuda_close(&c);
        return;
    }
    ZT_CHECKF(rc == 0, "%s", err.msg);
    enum { NB = 3, NT = 32, NI = 64, NO = 48 };
    float *w = malloc(NB * NO * NI * sizeof *w), *x = malloc(NB * NT * NI * sizeof *x), *y = malloc(NB * NT * NO * sizeof *y);
    for (int i = 0; i < NB * NO * NI; i++) w[i] = (float)((i * 7) % 13) * 0.25f - 1.5f;
    for (int i = 0; i < NB * NT * NI; i++) x[i] = (float)((i * 5) % 11) * 0.125f - 0.5f;
    CUdeviceptr dw, dx, dy, ws;
    ZT_CHECK(zr_cuda_alloc(&c, &dw, sizeof(float) * NB * NO * NI, "w", &err) == 0);
    ZT_CHECK(zr_cuda_alloc(&c, &dx, sizeof(float) * NB * NT * NI, "x", &err) == 0);
    ZT_CHECK(zr_cuda_alloc(&c, &dy, sizeof(float) * NB * NT * NO, "y", &err) == 0);
    ZT_CHECK(zr_cuda_alloc(&c, &ws, 4 << 20, "workspace", &err) == 0);
    ZT_CHECK(zr_cuda_h2d(&c, dw, w, sizeof(float) * NB * NO * NI, &err) == 0);
    ZT_CHECK(zr_cuda_h2d(&c, dx, x, sizeof(float) * NB * NT * NI, &err) == 0);
    ZrGemm g = {.trans_a = 1, .trans_b = 0, .m = NO, .n = NT, .k = NI,
                .a = dw, .type_a = CUDA_R_32F, .lda = NI, .b = dx, .type_b = CUDA_R_32F, .ldb = NI,
                .d = dy, .type_d = CUDA_R_32F, .ldd = NO, .alpha = 1.0f, .beta = 0.0f,
                .workspace = ws, .workspace_bytes = 4 << 20, .batch = NB, .stride_a = NO * NI, .stride_b = NT * NI,
                .stride_d = NT * NO};
    ZT_CHECKF(zr_cublaslt_gemm(&lt, c.stream, &g, &err) == 0, "%s", err.msg);
    ZT_CHECK(zr_cuda_d2h(&c, y, dy, sizeof(float) * NB * NT * NO, &err) == 0 && zr_cuda_sync(&c, &err) == 0);
    int bad = 0;
    for (int b = 0; b < NB; b++)
        for (int t = 0; t < NT; t++)
            for (int o = 0; o < NO; o++) {
                double ref = 0;
                for (int i = 0; i < NI; i++) ref += (double)x[(b * NT + t) * NI + i] * w[(b * NO + o) * NI + i];
                bad += !(fabs(y[(b * NT + t) * NO + o] - ref) <= 1e-3 + 1e-4 * fabs(ref));
            }
    fprintf(stderr, "  batched GEMM (%d of %dx%dx%d): %d values off%s\n", NB, NO, NT, NI, bad, bad ? "  FAIL" : "  PASS");
    ZT_CHECK(bad == 0);
    zr_cublaslt_close(&lt);
    free(w); free(x); free(y);
    zr_cuda_free(&c, dw); zr_cuda_free(&c, dx); zr_cuda_free(&c, dy); zr_cuda_free(&c, ws);
    zr_cuda_close(&c);
}

int main(void) { return gpu_main(); }
