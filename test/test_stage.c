/* The staged upload's bookkeeping (src/cuda/stage.c) on the driver double (no GPU needed): pieces
 * packed into chunks and split across them (copies anywhere, repacks at row boundaries, a chunk
 * sent early when its pieces run out), gathered by several threads, copied to the right places,
 * and repack launches given the right rows, row offsets and stacked height. The double's
 * repack_rows runs the host's zr_cuw_repack_row, so these tests pin what the stager asks for; the
 * GPU kernel's bytes against the host's are test/gpu/test_repack.c's. */
#include <stdlib.h>
#include <string.h>

#include "cuda/stage.h"
#include "cuda/weights.h"
#include "quant.h"
#include "test_launch_double.h"
#include "zt.h"

static int repack_launches, repack_rows_seen;

/* repack_rows on the host: src, main, side, type, n_in, row0, n_rows, n_out */
static void fake_repack(void **p) {
    const uint8_t *src = *(const uint8_t **)p[0];
    uint8_t *main = *(uint8_t **)p[1], *side = *(uint8_t **)p[2];
    const int type = *(int *)p[3], n_in = *(int *)p[4], row0 = *(int *)p[5], n_rows = *(int *)p[6], n_out = *(int *)p[7];
    const size_t raw = zr_row_bytes((uint32_t)type, n_in);
    for (int r = 0; r < n_rows; r++) zr_cuw_repack_row((uint32_t)type, src + raw * r, n_in, row0 + r, n_out, main, side);
    repack_launches++;
    repack_rows_seen += n_rows;
}
static const FakeKernel kernels[] = {{"repack_rows", 8, {8, 8, 8, 4, 4, 4, 4, 4}, fake_repack}};

typedef struct Fix {
    ZrCuda cuda;
    ZrStage st;
} Fix;

static bool fix_open(Fix *f, int threads) {
    ZrError err = {0};
    const ZrCuDriver *drv = fake_driver(kernels, 1, false);
    repack_launches = repack_rows_seen = 0;
    if (zr_cuda_open(drv, 0, &f->cuda, &err) || zr_cuda_load_module(&f->cuda, "image", &err) ||
        zr_stage_open(&f->st, &f->cuda, 1ull << 32, threads, NULL, &err)) {
        fprintf(stderr, "  %s\n", err.msg);
        return false;
    }
    return true;
}

static void fix_close(Fix *f) {
    zr_stage_close(&f->st);
    zr_cuda_close(&f->cuda);
}

static uint8_t *random_bytes(size_t n, uint32_t seed) {
    uint8_t *p = malloc(n);
    for (size_t i = 0; p && i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (uint8_t)(seed >> 24);
    }
    return p;
}

/* The host's repack of a stacked [n_in, a + b] matrix from its raw rows. */
static void host_repack(uint32_t type, const uint8_t *w, int n_in, int N, uint8_t *m, uint8_t *s) {
    const size_t raw = zr_row_bytes(type, n_in);
    for (int r = 0; r < N; r++) zr_cuw_repack_row(type, w + raw * r, n_in, r, N, m, s);
}

ZT_TEST(copies_and_repacks_split_across_chunks_arrive_where_they_belong) {
    Fix f;
    ZT_CHECK(fix_open(&f, 3));
    ZT_CHECK(f.st.n_buf == ZR_STAGE_BUFS && f.st.n_threads == 3);
    ZrError err = {0};
    /* a copy that leaves less than two Q6_K rows free in the first chunk */
    const size_t n1 = ZR_STAGE_CHUNK - 3000;
    uint8_t *a = random_bytes(n1, 1), *da = calloc(1, n1);
    ZT_CHECK(a && da);
    ZT_CHECK(zr_stage_copy(&f.st, (CUdeviceptr)(uintptr_t)da, a, n1, &err) == ZR_OK);
    /* Q6_K [2048, 40 + 24] stacked: 1 row still fits in the first chunk, the rest go to the next */
    const uint32_t t = ZR_TYPE_Q6_K;
    const int n_in = 2048, na = 40, nb = 24, N = na + nb;
    const size_t raw = zr_row_bytes(t, n_in), mb = zr_cuw_main_row_bytes(t, n_in) * N, sb = zr_cuw_side_bytes(t, n_in, N);
    uint8_t *w = random_bytes(raw * N, 2), *hm = calloc(1, mb), *hs = calloc(1, sb), *dm = calloc(1, mb),
            *ds = calloc(1, sb);
    ZT_CHECK(w && hm && hs && dm && ds);
    host_repack(t, w, n_in, N, hm, hs);
    ZT_CHECK(zr_stage_repack(&f.st, t, w, n_in, 0, na, N, (CUdeviceptr)(uintptr_t)dm, (CUdeviceptr)(uintptr_t)ds,
                             &err) == ZR_OK);
    ZT_CHECK(zr_stage_repack(&f.st, t, w + raw * na, n_in, na, nb, N, (CUdeviceptr)(uintptr_t)dm,
                             (CUdeviceptr)(uintptr_t)ds, &err) == ZR_OK);
    /* a copy of two and a bit chunks from an odd address */
    const size_t n2 = 2 * (size_t)ZR_STAGE_CHUNK + 77;
    uint8_t *b = random_bytes(n2 + 1, 3), *db = calloc(1, n2);
    ZT_CHECK(b && db);
    ZT_CHECK(zr_stage_copy(&f.st, (CUdeviceptr)(uintptr_t)db, b + 1, n2, &err) == ZR_OK);
    ZT_CHECKF(zr_stage_finish(&f.st, &err) == ZR_OK, "%s", err.msg);
    ZT_CHECK(!memcmp(da, a, n1));
    ZT_CHECK(!memcmp(db, b + 1, n2));
    ZT_CHECK(!memcmp(dm, hm, mb) && !memcmp(ds, hs, sb));
    /* the first matrix in two pieces (1 row, then 39), the second in one */
    ZT_CHECKF(repack_launches == 3 && repack_rows_seen == N, "%d launches, %d rows", repack_launches, repack_rows_seen);
    ZT_CHECKF(f.st.bytes == n1 + raw * N + n2, "%llu bytes sent", (unsigned long long)f.st.bytes);
    fix_close(&f);
    free(a), free(da), free(b), free(db), free(w), free(hm), free(hs), free(dm), free(ds);
}

/* Q5_0's side stream puts every block's d after all rows' qh: a stacked matrix sent in pieces
 * must be told the whole height (n_out), not the piece's. Many small pieces also force chunks
 * out before they are full (ZR_STAGE_MAX_PIECES). */
ZT_TEST(many_small_pieces_and_the_stacked_height_of_split_side_streams) {
    Fix f;
    ZT_CHECK(fix_open(&f, 1));
    ZrError err = {0};
    const uint32_t t = ZR_TYPE_Q5_0;
    const int n_in = 64, N = 300;
    const size_t raw = zr_row_bytes(t, n_in), mb = zr_cuw_main_row_bytes(t, n_in) * N, sb = zr_cuw_side_bytes(t, n_in, N);
    uint8_t *w = random_bytes(raw * N, 4), *hm = calloc(1, mb), *hs = calloc(1, sb), *dm = calloc(1, mb),
            *ds = calloc(1, sb);
    ZT_CHECK(w && hm && hs && dm && ds);
    host_repack(t, w, n_in, N, hm, hs);
    for (int r = 0; r < N; r++) /* one row per piece: 300 pieces, more than one chunk holds */
        ZT_CHECK(zr_stage_repack(&f.st, t, w + raw * r, n_in, r, 1, N, (CUdeviceptr)(uintptr_t)dm,
                                 (CUdeviceptr)(uintptr_t)ds, &err) == ZR_OK);
    ZT_CHECKF(zr_stage_finish(&f.st, &err) == ZR_OK, "%s", err.msg);
    ZT_CHECK(!memcmp(dm, hm, mb) && !memcmp(ds, hs, sb));
    ZT_CHECK(repack_launches == N);
    fix_close(&f);
    free(w), free(hm), free(hs), free(dm), free(ds);
}

/* The kernels' module still loading (kernels_loaded false for the first five chunks): the raw
 * rows wait in device chunks of their own instead of holding the upload up, the module is waited
 * for once, and every row still lands where it belongs. */
static int polls, module_waits;
static bool fake_loaded(void *ctx) {
    (void)ctx;
    return ++polls > 5;
}
static int fake_module(void *ctx, ZrError *err) {
    (void)ctx, (void)err;
    module_waits++;
    return ZR_OK;
}

ZT_TEST(rows_wait_in_device_chunks_of_their_own_while_the_kernels_load) {
    Fix f;
    ZT_CHECK(fix_open(&f, 2));
    f.st.need_kernels = fake_module;
    f.st.kernels_loaded = fake_loaded;
    f.st.need_kernels_ctx = &f;
    polls = module_waits = 0;
    ZrError err = {0};
    const uint32_t t = ZR_TYPE_Q4_0;
    const int n_in = 64, N = 1000; /* a row a piece: a chunk goes every ZR_STAGE_MAX_PIECES rows */
    const size_t raw = zr_row_bytes(t, n_in), mb = zr_cuw_main_row_bytes(t, n_in) * N, sb = zr_cuw_side_bytes(t, n_in, N);
    uint8_t *w = random_bytes(raw * N, 5), *hm = calloc(1, mb), *hs = calloc(1, sb), *dm = calloc(1, mb),
            *ds = calloc(1, sb ? sb : 1);
    ZT_CHECK(w && hm && dm && ds && (hs || !sb));
    host_repack(t, w, n_in, N, hm, hs);
    for (int r = 0; r < N; r++)
        ZT_CHECK(zr_stage_repack(&f.st, t, w + raw * r, n_in, r, 1, N, (CUdeviceptr)(uintptr_t)dm,
                                 (CUdeviceptr)(uintptr_t)ds, &err) == ZR_OK);
    ZT_CHECKF(zr_stage_finish(&f.st, &err) == ZR_OK, "%s", err.msg);
    ZT_CHECK(!memcmp(dm, hm, mb) && (!sb || !memcmp(ds, hs, sb)));
    ZT_CHECK(repack_launches == N);
    /* chunks 1..6 sent before the sixth ask found the module: 6 device chunks, 2 more than the 4 made at open */
    ZT_CHECKF(f.st.n_dev == 6 && f.st.max_waiting == 6, "%d device chunks, at most %d waiting", f.st.n_dev,
              f.st.max_waiting);
    ZT_CHECKF(module_waits == 1, "the module waited for %d times", module_waits);
    fix_close(&f);
    free(w), free(hm), free(hs), free(dm), free(ds);
}

ZT_TEST(a_row_larger_than_a_chunk_is_refused_by_name) {
    Fix f;
    ZT_CHECK(fix_open(&f, 1));
    ZrError err = {0};
    const int n_in = (int)(ZR_STAGE_CHUNK / 4) + 64; /* an F32 row of more than a chunk */
    ZT_CHECK(zr_stage_repack(&f.st, ZR_TYPE_F32, "", n_in, 0, 1, 1, 0, 0, &err) == ZR_E_UNSUPPORTED);
    ZT_CHECKF(strstr(err.msg, "f32 row") && strstr(err.msg, "larger than a chunk"), "%s", err.msg);
    fix_close(&f);
}

int main(void) { return zt_run(); }
