/* The CUDA backend behind the ZrBackend interface: opens the driver, the context, the embedded
 * kernels and cuBLASLt, uploads the model once (forward.c), then runs prefills through
 * cuBLASLt and decode steps through zrun's own kernels. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "cuda/cublaslt.h"
#include "cuda/driver.h"
#include "cuda/forward.h"
#include "cuda/launch.h"
#include "cuda/module.h"
#include "cuda/profile.h"

typedef struct CudaBackend {
    ZrBackend be; /* first: the interface the callers hold */
    const ZrModel *m;
    ZrBackendOptions opt;
    const ZrCuDriver *drv;
    ZrCuda cuda;
    bool cuda_open;
    ZrCublasLt lt;
    bool lt_open;
    ZrLauncher launcher;
    bool launcher_init;
    ZrProfile prof;
    bool profiling;
    ZrCuKernels *k;
    ZrCuForward f;
    bool f_init;
    int n_past;       /* tokens in the KV cache */
    uint64_t kernels_per_token;
    double host_us_sum;
    uint64_t steps;
    bool logged;      /* --log-launches printed */
} CudaBackend;

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* One decode step, eager: token and position into their device buffers (same stream), the
 * launches, the logits back. */
static int decode_eager(CudaBackend *c, int32_t token, int pos, float *logits, ZrError *err) {
    ZrCuForward *f = &c->f;
    int rc;
    const int32_t p = pos;
    const double t0 = now_us();
    if ((rc = zr_cuda_h2d(&c->cuda, f->d_tok, &token, sizeof token, err))) return rc;
    if ((rc = zr_cuda_h2d(&c->cuda, f->d_pos, &p, sizeof p, err))) return rc;
    const bool record = c->opt.log_launches && !c->logged;
    if (record) zr_launcher_record_begin(&c->launcher);
    const uint64_t n0 = c->launcher.n_launches;
    rc = zr_cuf_decode_step(f, err);
    if (record) {
        zr_launcher_record_end(&c->launcher);
        zr_recording_print(&c->launcher.rec, stderr);
        c->logged = true;
    }
    if (rc) return rc;
    c->kernels_per_token = c->launcher.n_launches - n0;
    c->host_us_sum += now_us() - t0;
    c->steps++;
    if ((rc = zr_cuda_d2h(&c->cuda, logits, f->logits, sizeof(float) * f->n_vocab, err))) return rc;
    return zr_cuda_sync(&c->cuda, err);
}

static int cuda_forward(ZrBackend *be, const int32_t *tokens, int n, int pos, float *logits, bool all_logits,
                        ZrError *err) {
    CudaBackend *c = (CudaBackend *)be;
    const int n_vocab = c->m->hp.n_vocab;
    if (n < 1) return zr_err(err, ZR_E_INTERNAL, "cuda forward: %d tokens given (at least 1 expected)", n);
    if (pos != c->n_past)
        return zr_err(err, ZR_E_INTERNAL, "cuda forward: position %d given, but %d tokens are in the cache", pos, c->n_past);
    if ((int64_t)pos + n > be->n_ctx)
        return zr_err(err, ZR_E_RANGE,
                      "cuda forward: %d tokens at positions %d..%d do not fit the context of %d tokens (use a larger -c)",
                      n, pos, pos + n - 1, be->n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return zr_err(err, ZR_E_RANGE, "cuda forward: token id %d at position %d is outside the vocabulary 0..%d",
                          tokens[i], pos + i, n_vocab - 1);
    int rc;
    if (n == 1) {
        float *out = logits;
        float *tmp = NULL;
        if (!out) {
            tmp = malloc(sizeof(float) * n_vocab);
            if (!tmp) return zr_err(err, ZR_E_NOMEM, "cuda forward: out of host memory");
            out = tmp;
        }
        rc = decode_eager(c, tokens[0], pos, out, err);
        free(tmp);
        if (rc) return rc;
        c->n_past = pos + 1;
        return ZR_OK;
    }
    for (int c0 = 0; c0 < n; c0 += ZR_CUF_UBATCH) {
        const int nc = n - c0 < ZR_CUF_UBATCH ? n - c0 : ZR_CUF_UBATCH;
        const bool last = c0 + nc == n;
        float *out = !logits ? NULL : all_logits ? logits + (size_t)c0 * n_vocab : last ? logits : NULL;
        if ((rc = zr_cuf_prefill(&c->f, tokens + c0, nc, pos + c0, out, all_logits, err))) return rc;
        c->n_past = pos + c0 + nc;
    }
    return ZR_OK;
}

static void cuda_truncate(ZrBackend *be, int pos) {
    CudaBackend *c = (CudaBackend *)be;
    if (pos < 0) pos = 0;
    if (pos < c->n_past) c->n_past = pos;
}

static void cuda_stats(const ZrBackend *be, ZrBackendStats *out) {
    const CudaBackend *c = (const CudaBackend *)be;
    memset(out, 0, sizeof *out);
    out->kernels_per_token = c->kernels_per_token;
    out->host_us_per_token = c->steps ? c->host_us_sum / c->steps : 0.0;
}

static void cuda_destroy(ZrBackend *be) {
    CudaBackend *c = (CudaBackend *)be;
    if (!c) return;
    if (c->profiling) {
        ZrError e = {0};
        if (zr_profile_collect(&c->prof, &e) == ZR_OK) zr_profile_print(&c->prof, stderr);
        c->launcher.profile = NULL;
        zr_profile_free(&c->prof);
    }
    if (c->f_init) zr_cuf_free(&c->f);
    if (c->launcher_init) zr_launcher_free(&c->launcher);
    if (c->lt_open) zr_cublaslt_close(&c->lt);
    if (c->cuda_open) zr_cuda_close(&c->cuda);
    free(c->k);
    free(c);
}

ZrBackend *zr_cuda_backend_create(const ZrModel *m, const ZrBackendOptions *o, ZrError *err) {
    const ZrHparams *hp = &m->hp;
    const ZrCuDriver *drv = NULL;
    if (zr_driver_open(&drv, err)) return NULL;
    if (!zr_cuda_have_kernels()) {
        zr_err(err, ZR_E_NODEV, "no usable GPU path: this zrun was built without CUDA kernels (no nvcc at build time)");
        return NULL;
    }
    CudaBackend *c = calloc(1, sizeof *c);
    if (!c || !(c->k = calloc(1, sizeof *c->k))) {
        free(c);
        zr_err(err, ZR_E_NOMEM, "cuda backend: out of host memory");
        return NULL;
    }
    const int n_ctx = o->n_ctx > 0 ? o->n_ctx : (hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096);
    c->be = (ZrBackend){.name = "cuda", .n_ctx = n_ctx, .forward = cuda_forward, .truncate = cuda_truncate,
                        .stats = cuda_stats, .destroy = cuda_destroy};
    c->m = m;
    c->opt = *o;
    c->drv = drv;
    if (zr_cuda_open(drv, 0, &c->cuda, err)) goto fail;
    c->cuda_open = true;
    if (zr_cuda_load_kernels(&c->cuda, err)) goto fail;
    int max_n_in = hp->n_embd;
    if (hp->n_ff > max_n_in) max_n_in = hp->n_ff;
    if (hp->n_head * hp->head_dim > max_n_in) max_n_in = hp->n_head * hp->head_dim;
    if (zr_cuf_kernels_load(&c->cuda, c->k, max_n_in, err)) goto fail;
    if (zr_cublaslt_open(&c->lt, err)) goto fail;
    c->lt_open = true;
    zr_launcher_init(&c->launcher, drv, c->cuda.stream);
    c->launcher_init = true;
    if (o->profile) {
        zr_profile_init(&c->prof, drv);
        c->launcher.profile = &c->prof;
        c->profiling = true;
    }
    if (zr_cuf_init(&c->f, m, &c->cuda, &c->launcher, &c->lt, c->k, n_ctx, err)) goto fail;
    c->f_init = true;
    if (!o->quiet) {
        char desc[512];
        zr_cuda_describe(&c->cuda, desc, sizeof desc);
        fprintf(stderr, "zrun: cuda: %s; weights %.1f MiB, KV cache %d tokens\n", desc, c->f.weight_bytes / 1048576.0,
                n_ctx);
    }
    return &c->be;
fail:
    cuda_destroy(&c->be);
    return NULL;
}
