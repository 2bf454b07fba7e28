/* The CUDA backend behind the ZrBackend interface: opens the driver, the context, the embedded
 * kernels and cuBLASLt, uploads the model once (forward.c), then runs prefills through
 * cuBLASLt and decode steps through zrun's own kernels, handed to the decode-graph controller
 * (graph.c), which runs them eagerly or records them once and replays them as a CUDA graph.
 *
 * It keeps the shape of every forward call it was given (the token history), so that after a
 * poisoned context it can rebuild the KV cache with the very same launches: a prefill chunk is
 * prefilled again, a decode step decoded again, and the cache is bit for bit what it was. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "cuda/bwprobe.h"
#include "cuda/cublaslt.h"
#include "cuda/driver.h"
#include "cuda/forward.h"
#include "cuda/graph.h"
#include "cuda/launch.h"
#include "cuda/module.h"
#include "cuda/profile.h"
#include "cuda/warm.h"
#include "logits_check.h"

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
    ZrDecodeIO io;
    ZrDecodeGraph graph;
    bool graph_init;
    int pick_n;       /* > 0: decode steps end with the greedy pick over logits [0, pick_n) */
    int n_past;       /* tokens in the KV cache */
    int32_t *hist;    /* [n_ctx] the tokens fed so far */
    int32_t *calls;   /* [n_ctx] calls[p] = tokens of the forward call that started at position p (0 inside one) */
} CudaBackend;

/* The decode step the controller runs (eagerly, or once while recording the graph). */
static int eager_step(void *ctx, ZrError *err) {
    CudaBackend *c = ctx;
    return zr_cuf_decode_step(&c->f, err);
}

static void wire_io(CudaBackend *c) {
    c->io.cuda = &c->cuda;
    c->io.launcher = &c->launcher;
    c->io.d_token = c->f.d_tok;
    c->io.d_pos = c->f.d_pos;
    c->io.d_logits = c->f.logits;
    c->io.d_pick = c->f.d_pick;
    c->io.n_vocab = c->f.n_vocab;
    c->f.pick_n = c->pick_n;
}

/* The context is poisoned: a new context, the kernels, cuBLASLt, the weights and buffers again,
 * then the first n_past tokens fed again exactly as they were (same chunks, same kernels). */
static int recover(void *ctx, int n_past, ZrError *err) {
    CudaBackend *c = ctx;
    int rc;
    zr_cuf_forget(&c->f);
    c->f_init = false;
    if (c->lt_open) zr_cublaslt_close(&c->lt);
    c->lt_open = false;
    if ((rc = zr_cuda_reset(&c->cuda, zr_cuda_kernels_image(), err))) return rc;
    c->launcher.stream = c->cuda.stream;
    const ZrHparams *hp = &c->m->hp;
    int max_n_in = hp->n_embd;
    if (hp->n_ff > max_n_in) max_n_in = hp->n_ff;
    if (hp->n_head * hp->head_dim > max_n_in) max_n_in = hp->n_head * hp->head_dim;
    if ((rc = zr_cuf_kernels_load(&c->cuda, c->k, max_n_in, err))) return rc;
    if ((rc = zr_cublaslt_open(&c->lt, err))) return rc;
    c->lt_open = true;
    if ((rc = zr_cuf_init(&c->f, c->m, &c->cuda, &c->launcher, &c->lt, c->k, c->be.n_ctx, NULL, err))) return rc;
    c->f_init = true;
    wire_io(c);
    c->io.epoch++;
    for (int p = 0; p < n_past;) {
        int n = c->calls[p] > 0 ? c->calls[p] : 1;
        if (p + n > n_past) n = n_past - p;
        if (n == 1) {
            const int32_t v[2] = {c->hist[p], p};
            if ((rc = zr_cuda_h2d(&c->cuda, c->f.d_tok, v, sizeof v, err))) return rc;
            if ((rc = zr_cuf_decode_step(&c->f, err))) return rc;
        } else {
            for (int c0 = 0; c0 < n; c0 += ZR_CUF_UBATCH) {
                const int nc = n - c0 < ZR_CUF_UBATCH ? n - c0 : ZR_CUF_UBATCH;
                if ((rc = zr_cuf_prefill(&c->f, c->hist + p + c0, nc, p + c0, NULL, false, err))) return rc;
            }
        }
        p += n;
    }
    return zr_cuda_sync(&c->cuda, err);
}

/* A forward call's tokens and positions, checked and entered into the history. */
static int accept_call(CudaBackend *c, const int32_t *tokens, int n, int pos, ZrError *err) {
    const ZrBackend *be = &c->be;
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
    memcpy(c->hist + pos, tokens, sizeof(int32_t) * n);
    c->calls[pos] = n;
    for (int i = 1; i < n; i++) c->calls[pos + i] = 0;
    return ZR_OK;
}

static int cuda_forward(ZrBackend *be, const int32_t *tokens, int n, int pos, float *logits, bool all_logits,
                        ZrError *err) {
    CudaBackend *c = (CudaBackend *)be;
    const int n_vocab = c->m->hp.n_vocab;
    int rc = accept_call(c, tokens, n, pos, err);
    if (rc) return rc;
    if (n == 1) {
        if ((rc = zr_graph_decode_step(&c->graph, tokens[0], pos, logits, err))) return rc;
        c->n_past = pos + 1;
        /* the row is on the host: checked there */
        return logits ? zr_logits_check(c->m->gguf.path, logits, 1, n_vocab, pos, err) : ZR_OK;
    }
    for (int c0 = 0; c0 < n; c0 += ZR_CUF_UBATCH) {
        /* Ctrl-C is heard between chunks (each at most a few tens of ms on the GPU); the chunks
         * done so far stay in the cache */
        if (c0 > 0 && c->opt.stop && c->opt.stop(c->opt.stop_ctx))
            return zr_err(err, ZR_E_INTERRUPTED, "cuda forward: stopped after %d of %d tokens", c0, n);
        const int nc = n - c0 < ZR_CUF_UBATCH ? n - c0 : ZR_CUF_UBATCH;
        const bool last = c0 + nc == n;
        float *out = !logits ? NULL : all_logits ? logits + (size_t)c0 * n_vocab : last ? logits : NULL;
        if ((rc = zr_cuf_prefill(&c->f, tokens + c0, nc, pos + c0, out, all_logits, err))) return rc;
        c->n_past = pos + c0 + nc;
        if (out && (rc = zr_logits_check(c->m->gguf.path, out, all_logits ? nc : 1, n_vocab, all_logits ? pos + c0 : pos + n - 1, err)))
            return rc;
    }
    return ZR_OK;
}

/* The pick joins the decode step the first time it is asked for (and again if n_cand changes):
 * the epoch tells the graph controller to record the step again, once. */
static int cuda_decode_greedy(ZrBackend *be, int32_t token, int pos, int n_cand, float *logits, ZrGreedy *out,
                              ZrError *err) {
    CudaBackend *c = (CudaBackend *)be;
    if (n_cand < 1 || n_cand > c->m->hp.n_vocab)
        return zr_err(err, ZR_E_INTERNAL, "cuda greedy decode: a pick among %d ids (1..%d expected)", n_cand,
                      c->m->hp.n_vocab);
    int rc = accept_call(c, &token, 1, pos, err);
    if (rc) return rc;
    if (c->pick_n != n_cand) {
        c->pick_n = c->f.pick_n = n_cand;
        c->io.epoch++;
    }
    int32_t pick[2];
    if ((rc = zr_graph_decode_step_out(&c->graph, token, pos, logits, pick, err))) return rc;
    c->n_past = pos + 1;
    if (pick[0] < 0 || pick[0] >= n_cand || pick[1] < -1 || pick[1] >= n_cand)
        return zr_err(err, ZR_E_INTERNAL, "cuda greedy decode at position %d: the device picked %d (non-finite at %d) among %d ids",
                      pos, pick[0], pick[1], n_cand);
    out->token = pick[0];
    out->nonfinite_at = pick[1];
    /* the pick kernel (cu/argmax.cu) reports the first NaN or +-inf id */
    if (pick[1] >= 0)
        return zr_logits_nonfinite_error(c->m->gguf.path, pos, pick[1], logits ? logits + pick[1] : NULL, err);
    return ZR_OK;
}

static void cuda_truncate(ZrBackend *be, int pos) {
    CudaBackend *c = (CudaBackend *)be;
    if (pos < 0) pos = 0;
    if (pos < c->n_past) c->n_past = pos;
}

static void cuda_stats(const ZrBackend *be, ZrBackendStats *out) {
    const CudaBackend *c = (const CudaBackend *)be;
    ZrDecodeStats st;
    memset(out, 0, sizeof *out);
    if (!c->graph_init) return;
    zr_graph_decode_stats(&c->graph, &st);
    out->kernels_per_token = st.kernels_per_token;
    out->graph_build_ms = st.graph_build_ms;
    out->graph_active = st.graph_active;
    out->pdl = st.graph_active ? st.pdl : c->launcher.pdl;
    out->host_us_per_token = st.graph_active && st.graph_steps ? st.graph_host_us : st.eager_host_us;
}

/* On the backend's own context, so the measurement is of the device the weights are on and costs
 * no second context. */
static int cuda_read_bandwidth(ZrBackend *be, size_t bytes, int reps, ZrBandwidth *out, ZrError *err) {
    CudaBackend *c = (CudaBackend *)be;
    ZrBwProbe p;
    memset(out, 0, sizeof *out);
    int rc = zr_cuda_bwprobe(&c->cuda, bytes, reps, &p, err);
    if (rc) return rc;
    snprintf(out->device, sizeof out->device, "%s", p.gpu);
    snprintf(out->driver, sizeof out->driver, "%s", p.driver);
    out->cuda_version = p.cuda_version;
    out->gbps = p.gbps;
    out->peak_gbps = p.peak_gbps;
    if (p.bytes)
        snprintf(out->how, sizeof out->how,
                 "read_bw_probe over %.2f GiB, median of %d, %d x %d threads; spread %.1f..%.1f; nominal peak %.0f GB/s",
                 (double)p.bytes / (double)(1u << 30), p.reps, p.blocks, p.threads, p.gbps_min, p.gbps_max, p.peak_gbps);
    else
        snprintf(out->how, sizeof out->how, "not measured");
    return ZR_OK;
}

static void cuda_destroy(ZrBackend *be) {
    CudaBackend *c = (CudaBackend *)be;
    if (!c) return;
    if (c->graph_init) zr_graph_decode_free(&c->graph);
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
    free(c->hist);
    free(c->calls);
    free(c);
}

/* The facts the CPU reference computes that this backend has no kernel for, refused by name.
 * It runs llama's block (NORM or NEOX rope, biases, q/k norms, rope bases per layer, frequency
 * factors) and gemma's (scaled embedding, GeGLU, norms after the blocks, sliding windows,
 * soft-caps: issue 14) and phi3's (the rope attention factor of LongRoPE: cuda/attn.c). */
static int refuse_facts(const ZrModel *m, ZrError *err) {
    const ZrHparams *hp = &m->hp;
    for (int il = 0; il < hp->n_layer; il++) {
        const ZrLayerFacts *f = &m->layers[il].facts;
        if (f->post_ffn_norm && f->act != ZR_ACT_GELU_TANH)
            return zr_err(err, ZR_E_UNSUPPORTED, "%s: layer %d: the CUDA backend has no kernel yet for a norm after a %s FFN (use --device cpu)",
                          hp->arch_name, il, zr_act_name(f->act));
    }
    return 0;
}

static double ms_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

ZrBackend *zr_cuda_backend_create(const ZrModel *m, const ZrBackendOptions *o, ZrError *err) {
    const ZrHparams *hp = &m->hp;
    double t[6]; /* start-up phases' ends (ms): start, context, kernels, weights and buffers, cuBLASLt, warm-up */
    t[0] = ms_now();
    const ZrCuDriver *drv = NULL;
    if (zr_driver_open(&drv, err)) return NULL;
    if (!zr_cuda_have_kernels()) {
        zr_err(err, ZR_E_NODEV, "no usable GPU path: this zrun was built without CUDA kernels (no nvcc at build time)");
        return NULL;
    }
    if (o->n_ctx < 1) {
        zr_err(err, ZR_E_USAGE, "cuda backend: a context of %d positions; expected >= 1 (zr_backend_default_ctx)", o->n_ctx);
        return NULL;
    }
    const int n_ctx = o->n_ctx;
    if (zr_model_check_facts(m, err) || refuse_facts(m, err)) return NULL;
    CudaBackend *c = calloc(1, sizeof *c);
    if (!c || !(c->k = calloc(1, sizeof *c->k)) || !(c->hist = calloc(n_ctx, sizeof *c->hist)) ||
        !(c->calls = calloc(n_ctx, sizeof *c->calls))) {
        if (c) {
            free(c->k);
            free(c->hist);
        }
        free(c);
        zr_err(err, ZR_E_NOMEM, "cuda backend: out of host memory");
        return NULL;
    }
    c->be = (ZrBackend){.name = "cuda", .n_ctx = n_ctx, .forward = cuda_forward,
                        .decode_greedy = cuda_decode_greedy, .truncate = cuda_truncate,
                        .stats = cuda_stats, .read_bandwidth = cuda_read_bandwidth, .destroy = cuda_destroy};
    c->m = m;
    c->opt = *o;
    c->drv = drv;
    if (zr_cuda_open(drv, 0, &c->cuda, err)) goto fail;
    c->cuda_open = true;
    t[1] = ms_now();
    /* cuBLASLt opens on a thread of its own while the kernels load and the weights go up: it
     * needs none of them */
    if (zr_cublaslt_open_start(&c->lt, drv, c->cuda.ctx, err)) goto fail;
    c->lt_open = true;
    if (zr_cuda_load_kernels(&c->cuda, err)) goto fail;
    int max_n_in = hp->n_embd;
    if (hp->n_ff > max_n_in) max_n_in = hp->n_ff;
    if (hp->n_head * hp->head_dim > max_n_in) max_n_in = hp->n_head * hp->head_dim;
    if (zr_cuf_kernels_load(&c->cuda, c->k, max_n_in, err)) goto fail;
    t[2] = ms_now();
    zr_launcher_init(&c->launcher, drv, c->cuda.stream);
    /* programmatic dependent launch wherever it is supported (sm_90+, cuLaunchKernelEx): +18%
     * tg128 on the H100 (cu/PERF.md); the decode graph's edges follow the same rule (graph.c) */
    zr_launcher_set_pdl(&c->launcher, zr_launch_pdl_supported(&c->cuda));
    c->launcher_init = true;
    if (o->profile) {
        zr_profile_init(&c->prof, drv);
        c->launcher.profile = &c->prof;
        c->profiling = true;
    }
    const ZrCuProgress prog = {o->progress, o->progress_ctx};
    if (zr_cuf_init(&c->f, m, &c->cuda, &c->launcher, &c->lt, c->k, n_ctx, &prog, err)) goto fail;
    c->f_init = true;
    t[3] = ms_now();
    if (zr_cublaslt_open_wait(&c->lt, err)) goto fail;
    t[4] = ms_now();
    double warm_ms = 0; /* not while profiling: the profile counts only what the user ran */
    if (!o->profile && zr_cuf_warm(&c->f, &warm_ms, err)) goto fail;
    t[5] = ms_now();
    wire_io(c);
    c->io.epoch = 1;
    ZrDecodeOptions dopt = {.graph = o->graph, .verify = o->verify_graph, .profile = o->profile,
                            .log_launches = o->log_launches, .dot_path = o->graph_dot};
    if (zr_fault_parse(o->fault, &dopt.fault, err)) goto fail;
    const ZrDecodeHooks hooks = {c, eager_step, recover};
    if (zr_graph_decode_init(&c->graph, &c->io, &hooks, &dopt, err)) goto fail;
    c->graph_init = true;
    if (!o->quiet) {
        char desc[512];
        zr_cuda_describe(&c->cuda, desc, sizeof desc);
        fprintf(stderr, "zrun: cuda: %s; weights %.1f MiB, KV cache %d tokens\n", desc, c->f.weight_bytes / 1048576.0,
                n_ctx);
        /* issue 19: where the start-up goes, and the upload against the machine's copy rate */
        fprintf(stderr, "zrun: cuda: upload %.2f GB in %.2f s, %.1f GB/s (page-locked host-to-device %.1f GB/s, %d threads, "
                        "staging set up in %.0f ms); start-up %.0f ms: driver and context %.0f, kernels %.0f, weights and "
                        "buffers %.0f, then waiting for cuBLASLt %.0f, prefill warm-up %.0f (of which %d cuBLASLt plans "
                        "%.1f)\n",
                c->f.upload_bytes / 1e9, c->f.upload_s, c->f.upload_s > 0 ? c->f.upload_bytes / 1e9 / c->f.upload_s : 0.0,
                c->f.upload_h2d_gbps, c->f.upload_threads, c->f.upload_setup_s * 1e3, t[5] - t[0], t[1] - t[0],
                t[2] - t[1], t[3] - t[2], t[4] - t[3], t[5] - t[4], c->lt.n_plans, c->lt.plan_ms);
    }
    return &c->be;
fail:
    cuda_destroy(&c->be);
    return NULL;
}
