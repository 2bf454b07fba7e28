/* The staged upload (src/cuda/stage.c) and the GPU repack (cu/repack.cu) against the host's
 * repack (zr_cuw_repack_row, the reference the CPU tests pin): for every weight type the bytes
 * on the device are the host's, byte for byte, main and side stream, padding included, for
 * matrices stacked two at a time and large enough to cross chunks. The repack only moves bits,
 * so random bytes are as good a test input as quantized weights. The device buffers start as
 * 0x5A: a byte the kernel forgets to write differs from the host's. */
#include <stdlib.h>
#include <string.h>

#include "cuda/stage.h"
#include "cuda/weights.h"
#include "gpu_env.h"
#include "quant.h"
#include "zt.h"

static const uint32_t all_types[] = {ZR_TYPE_F32,  ZR_TYPE_F16,  ZR_TYPE_BF16, ZR_TYPE_Q8_0, ZR_TYPE_Q4_0,
                                     ZR_TYPE_Q4_1, ZR_TYPE_Q5_0, ZR_TYPE_Q5_1, ZR_TYPE_Q2_K, ZR_TYPE_Q3_K,
                                     ZR_TYPE_Q4_K, ZR_TYPE_Q5_K, ZR_TYPE_Q6_K};

static void random_bytes(uint8_t *p, size_t n, uint64_t *s) {
    for (size_t i = 0; i < n; i++) {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        p[i] = (uint8_t)(*s >> 32);
    }
}

/* Two matrices [n_in, n_a] and [n_in, n_b] of `type` stacked, through the stager (chunks as they
 * come) and through the host: no byte differs. */
static void compare_repack(GpuEnv *g, ZrStage *st, uint32_t type, int n_in, int n_a, int n_b, uint64_t *seed) {
    const int N = n_a + n_b;
    const size_t raw = zr_row_bytes(type, n_in), rb = zr_cuw_main_row_bytes(type, n_in),
                 mb = rb * (size_t)N, sb = zr_cuw_side_bytes(type, n_in, N);
    uint8_t *w = malloc(raw * N), *hm = calloc(1, mb), *hs = calloc(1, sb ? sb : 1), *dm = malloc(mb),
            *ds = malloc(sb ? sb : 1);
    ZT_CHECK(w && hm && hs && dm && ds);
    random_bytes(w, raw * N, seed);
    for (int r = 0; r < N; r++) zr_cuw_repack_row(type, w + raw * r, n_in, r, N, hm, hs);
    CUdeviceptr m = gpu_alloc(g, mb), s = sb ? gpu_alloc(g, sb) : 0;
    ZrError err = {0};
    ZT_CHECK(zr_cuda_memset8(&g->cuda, m, 0x5A, mb, &err) == ZR_OK);
    if (sb) ZT_CHECK(zr_cuda_memset8(&g->cuda, s, 0x5A, sb, &err) == ZR_OK);
    ZT_CHECK(zr_cuda_sync(&g->cuda, &err) == ZR_OK);
    const ZrTypeInfo *ti = zr_type_info(type);
    int rc;
    if (ti->block == 1 && raw == rb) { /* the upload copies these as they are */
        rc = zr_stage_copy(st, m, w, raw * N, &err);
    } else {
        rc = zr_stage_repack(st, type, w, n_in, 0, n_a, N, m, s, &err);
        if (!rc) rc = zr_stage_repack(st, type, w + raw * n_a, n_in, n_a, n_b, N, m, s, &err);
    }
    if (!rc) rc = zr_stage_finish(st, &err);
    ZT_CHECKF(rc == ZR_OK, "%s: %s", ti->name, err.msg);
    gpu_download(g, dm, m, mb);
    if (sb) gpu_download(g, ds, s, sb);
    size_t diff = 0, first = SIZE_MAX;
    for (size_t i = 0; i < mb; i++)
        if (dm[i] != hm[i] && diff++ == 0) first = i;
    for (size_t i = 0; i < sb; i++)
        if (ds[i] != hs[i] && diff++ == 0) first = mb + i;
    printf("%s %-5s [%d, %d + %d]: %zu main + %zu side bytes, %zu differ%s", diff ? "FAIL" : "PASS", ti->name, n_in,
           n_a, n_b, mb, sb, diff, diff ? "" : "\n");
    if (diff) printf(" (first at %s byte %zu)\n", first < mb ? "main" : "side", first < mb ? first : first - mb);
    gpu_free(g, m);
    if (s) gpu_free(g, s);
    free(w);
    free(hm);
    free(hs);
    free(dm);
    free(ds);
    ZT_CHECKF(diff == 0, "%s: %zu bytes differ", ti->name, diff);
}

ZT_TEST(gpu_repack_gives_the_host_repack_bytes_for_every_type) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    ZrStage st;
    ZrError err = {0};
    ZT_CHECKF(zr_stage_open(&st, &g->cuda, 256u << 20, 0, NULL, &err) == ZR_OK, "%s", err.msg);
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < sizeof all_types / sizeof all_types[0]; i++) {
        const uint32_t t = all_types[i];
        const int block = (int)zr_type_info(t)->block;
        /* small: a few rows; rows of 100 floats pad to 16 bytes (the kernel writes the padding) */
        compare_repack(g, &st, t, block == 1 ? 100 : 512, 7, 5, &seed);
        /* real sizes, across chunk boundaries: 8B's FFN rows (n_in 14336 is 56 K-blocks) */
        compare_repack(g, &st, t, block == 1 ? 4096 : 14336, 2500, 1597, &seed);
    }
    zr_stage_close(&st);
}

/* A copy longer than several chunks, starting at an odd address, arrives whole. */
ZT_TEST(staged_copy_crosses_chunks_intact) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    ZrStage st;
    ZrError err = {0};
    ZT_CHECKF(zr_stage_open(&st, &g->cuda, 256u << 20, 0, NULL, &err) == ZR_OK, "%s", err.msg);
    const size_t n = 3 * (size_t)ZR_STAGE_CHUNK + 12345;
    uint8_t *h = malloc(n + 1), *back = malloc(n);
    ZT_CHECK(h && back);
    uint64_t seed = 7;
    random_bytes(h, n + 1, &seed);
    CUdeviceptr d = gpu_alloc(g, n);
    ZT_CHECK(zr_stage_copy(&st, d, h + 1, n, &err) == ZR_OK);
    ZT_CHECKF(zr_stage_finish(&st, &err) == ZR_OK, "%s", err.msg);
    gpu_download(g, back, d, n);
    ZT_CHECK(!memcmp(back, h + 1, n));
    double gbps = 0;
    ZT_CHECKF(zr_stage_measure_h2d(&st, &gbps, &err) == ZR_OK, "%s", err.msg);
    printf("PASS staged copy of %zu bytes; page-locked host-to-device %.1f GB/s, %d gathering threads\n", n, gbps,
           st.n_threads);
    ZT_CHECK(gbps > 1.0);
    gpu_free(g, d);
    free(h);
    free(back);
    zr_stage_close(&st);
}

int main(void) { return gpu_main(); }
