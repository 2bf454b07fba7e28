#include "test_launch_toy.h"

#include <string.h>

int32_t toy_token(int k) { return (int32_t)((k * 7 + 3) % 50); }

static int load_kernels(Toy *t, ZrError *err) {
    int rc;
    if ((rc = zr_cuda_kernel(&t->cuda, "zr_selftest_embed", NULL, 0, &t->embed, err))) return rc;
    if ((rc = zr_cuda_kernel(&t->cuda, "zr_selftest_attend", NULL, 0, &t->attend, err))) return rc;
    if ((rc = zr_cuda_kernel(&t->cuda, "zr_selftest_attend_pv", NULL, 0, &t->attend_pv, err))) return rc;
    return zr_cuda_kernel(&t->cuda, "zr_selftest_scale", NULL, 0, &t->scale, err);
}

static int alloc_buffers(Toy *t, ZrError *err) {
    int rc;
    if ((rc = zr_cuda_alloc(&t->cuda, &t->d_io, 2 * sizeof(int32_t), "toy io", err))) return rc;
    if ((rc = zr_cuda_alloc(&t->cuda, &t->d_kv, (size_t)t->n_ctx * sizeof(float), "toy kv", err))) return rc;
    if ((rc = zr_cuda_alloc(&t->cuda, &t->d_logits, (size_t)t->n_vocab * sizeof(float), "toy logits", err)))
        return rc;
    return zr_cuda_memset8(&t->cuda, t->d_kv, 0, (size_t)t->n_ctx * sizeof(float), err);
}

static void bind_io(Toy *t) {
    t->io.cuda = &t->cuda;
    t->io.launcher = &t->l;
    t->io.d_token = t->d_io;
    t->io.d_pos = t->d_io + sizeof(int32_t);
    t->io.d_logits = t->d_logits;
    t->io.n_vocab = t->n_vocab;
    t->io.epoch++;
}

int toy_open(Toy *t, const ZrCuDriver *drv, const void *image, int n_ctx, int n_vocab, ZrError *err) {
    memset(t, 0, sizeof *t);
    t->drv = drv;
    t->image = image;
    t->n_ctx = n_ctx;
    t->n_vocab = n_vocab;
    int rc;
    if ((rc = zr_cuda_open(drv, 0, &t->cuda, err))) return rc;
    if ((rc = zr_cuda_load_module(&t->cuda, image, err))) return rc;
    if ((rc = load_kernels(t, err))) return rc;
    if ((rc = alloc_buffers(t, err))) return rc;
    zr_launcher_init(&t->l, drv, t->cuda.stream);
    bind_io(t);
    return ZR_OK;
}

void toy_close(Toy *t) {
    zr_cuda_free(&t->cuda, t->d_io);
    zr_cuda_free(&t->cuda, t->d_kv);
    zr_cuda_free(&t->cuda, t->d_logits);
    zr_launcher_free(&t->l);
    zr_cuda_close(&t->cuda);
}

int toy_move_buffers(Toy *t, ZrError *err) {
    CUdeviceptr old_io = t->d_io, old_kv = t->d_kv, old_logits = t->d_logits;
    int rc;
    if ((rc = alloc_buffers(t, err))) return rc;
    if ((rc = zr_cuda_d2d(&t->cuda, t->d_kv, old_kv, (size_t)t->n_ctx * sizeof(float), err))) return rc;
    if ((rc = zr_cuda_sync(&t->cuda, err))) return rc;
    zr_cuda_free(&t->cuda, old_io);
    zr_cuda_free(&t->cuda, old_kv);
    zr_cuda_free(&t->cuda, old_logits);
    bind_io(t);
    return ZR_OK;
}

static int eager_step(void *ctx, ZrError *err) {
    Toy *t = ctx;
    int n = t->n_vocab, rc;
    float half = 0.5f, three = 3.0f;
    unsigned blocks = (unsigned)(n + 63) / 64;
    if ((rc = ZR_LAUNCH(&t->l, &t->embed, ZR_DIM1(1), ZR_DIM1(32), 0, err, &t->d_kv, &t->d_io))) return rc;
    if (t->pos_by_value)
        rc = ZR_LAUNCH(&t->l, &t->attend_pv, ZR_DIM1(blocks), ZR_DIM1(64), 0, err, &t->d_logits, &t->d_kv,
                       &t->cur_pos, &n);
    else
        rc = ZR_LAUNCH(&t->l, &t->attend, ZR_DIM1(blocks), ZR_DIM1(64), 0, err, &t->d_logits, &t->d_kv, &t->d_io, &n);
    if (rc) return rc;
    if ((rc = ZR_LAUNCH(&t->l, &t->scale, ZR_DIM1(blocks), ZR_DIM1(64), 0, err, &t->d_logits, &half, &n))) return rc;
    return ZR_LAUNCH(&t->l, &t->scale, ZR_DIM1(blocks), ZR_DIM1(64), 0, err, &t->d_logits, &three, &n);
}

/* What a backend does: new context, weights (none here), buffers, re-prefill the history. */
static int recover(void *ctx, int n_past, ZrError *err) {
    Toy *t = ctx;
    t->recover_calls++;
    int rc;
    if ((rc = zr_cuda_reset(&t->cuda, t->image, err))) return rc;
    if ((rc = load_kernels(t, err))) return rc;
    if ((rc = alloc_buffers(t, err))) return rc;
    t->l.stream = t->cuda.stream;
    bind_io(t);
    for (int p = 0; p < n_past; p++) {
        int32_t v[2] = {t->history[p], p};
        if ((rc = zr_cuda_h2d(&t->cuda, t->d_io, v, sizeof v, err))) return rc;
        if ((rc = ZR_LAUNCH(&t->l, &t->embed, ZR_DIM1(1), ZR_DIM1(32), 0, err, &t->d_kv, &t->d_io))) return rc;
    }
    return zr_cuda_sync(&t->cuda, err);
}

int toy_run(Toy *t, const ZrDecodeOptions *o, int n_steps, float *logits, int move_at, ZrDecodeStats *stats,
            ZrError *err) {
    ZrDecodeGraph g;
    ZrDecodeHooks hooks = {.ctx = t, .eager_step = eager_step, .recover = recover};
    int rc = zr_graph_decode_init(&g, &t->io, &hooks, o, err);
    if (rc) return rc;
    t->n_hist = 0;
    for (int k = 0; k < n_steps && !rc; k++) {
        t->cur_pos = k;
        rc = zr_graph_decode_step(&g, toy_token(k), k, logits + (size_t)k * t->n_vocab, err);
        if (!rc) t->history[t->n_hist++] = toy_token(k);
        if (!rc && k == move_at) rc = toy_move_buffers(t, err);
    }
    zr_graph_decode_stats(&g, stats);
    zr_graph_decode_free(&g);
    return rc;
}
