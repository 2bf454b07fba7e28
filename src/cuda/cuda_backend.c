/* The CUDA backend behind the ZrBackend interface: opens the driver, the context, the embedded
 * kernels and cuBLASLt, uploads the model once (forward.c), then runs prefills through
 * cuBLASLt and decode steps through zrun's own kernels, handed to the decode-graph controller
 * (graph.c), which runs them eagerly or records them once and replays them as a CUDA graph.
 *
 * It keeps the shape of every forward call it was given (the token history), so that after a
 * poisoned context it can rebuild the KV cache with the very same launches: a prefill chunk is
 * prefilled again, a decode step decoded again, and the cache is bit for bit what it was.
 *
 * decode_run is the free-running loop (issue 12): the decode step ends with a tail on the device
 * (cuda/sample.h: the argmax, or the sampling chain with the host sampler's state uploaded) that
 * writes the step's record into a ring of mapped pinned memory and advances tok/pos in place, so
 * the host queues steps ahead with nothing to write between them, waits on one event per step,
 * and hands each token over as its record arrives. */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "cuda/attn.h"
#include "cuda/bwprobe.h"
#include "cuda/cublaslt.h"
#include "cuda/driver.h"
#include "cuda/early.h"
#include "cuda/forward.h"
#include "cuda/graph.h"
#include "cuda/launch.h"
#include "cuda/module.h"
#include "cuda/profile.h"
#include "cuda/stage.h"
#include "cuda/timeline.h"
#include "cuda/upload.h"
#include "cuda/warm.h"
#include "logits_check.h"
#include "sampler.h"
#include "zr_clock.h"
#include "zr_thread.h"

/* Steps one graph launch runs in the free-running loop: the ~2.5 us a launch leaves the GPU idle
 * (H100, between two replays) is paid once per launch, the steps inside one are joined like the
 * kernels of a step (programmatic edges: a kernel-to-kernel gap). 4 leaves a quarter of it per
 * step; more saves less than 0.4 us a step while the graph grows by a step's nodes each. */
#define ZR_GRAPH_STEPS 4
#define ZR_GRAPH_STEPS_MAX 8
#define ZR_RUN_AHEAD_MIN 6    /* steps queued beyond the one the host waits for: at least, and 2 launches */
#define ZR_RING_SLOTS 32      /* record slots (> 2 ZR_GRAPH_STEPS_MAX: a slot is read before a step reuses it) */
#define ZR_MEMHOSTALLOC_DEVICEMAP 0x02 /* CU_MEMHOSTALLOC_DEVICEMAP */
#define ZR_GAP_CAP 65536      /* idle gaps kept for the statistics */

typedef struct CudaBackend {
    ZrBackend be; /* first: the interface the callers hold */
    const ZrModel *m;
    ZrBackendOptions opt;
    const ZrCuDriver *drv;
    ZrCuda cuda;
    bool cuda_open;
    ZrCublasLt lt;
    bool lt_open;
    void *lt_lib; /* cuBLASLt's library, mapped while the context was made (zr_cublaslt_preload) */
    ZrCuWarm *warm;   /* the warm-up's thread, from the context's creation until a prompt needs cuBLASLt
                       * (or the end): c->lt is its until then (warm_join) */
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
    float *host_logits; /* [2][n_vocab] host-sampled decode steps: the logits, the sampler's copy (allocated once) */
    /* the free-running decode loop (decode_run with a tail on the device) */
    ZrTail tail;        /* what ends a decode step now (f.tail follows it; NONE while re-prefilling) */
    int tail_n_cand;
    ZrPickRecord *ring; /* [ZR_RING_SLOTS] mapped pinned host memory the tail writes (same address on the device: UVA) */
    ZrSampleDev sdev;   /* ZR_TAIL_SAMPLE: the chain's parameters, state, scratch */
    bool sdev_init;
    ZrSamplerParams sdev_p; /* what sdev was made for (kept here: a context reset takes sdev with it) */
    int32_t *sdev_ban;
    int sdev_n_ban;
    CUdeviceptr d_snap; /* the checked replay's snapshot of tok/pos and the sampler state */
    size_t snap_bytes;
    ZrSampler *mirror;  /* while decode_run runs: the caller's sampler, the device state's source */
    uint8_t *state_buf; /* [state_cap] a sampler state on its way to the device */
    int run_ahead;      /* steps queued at most beyond the one the host waits for (two launches) */
    double *gaps;       /* [ZR_GAP_CAP] idle gaps between queued steps, µs (a ring once full) */
    uint64_t n_gaps;
    size_t state_cap;
    uint64_t host_steps;/* decode_run steps sampled on the host */
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
    /* the tail, and what a checked replay snapshots and compares */
    c->f.tail = c->tail;
    c->f.tail_sample = c->tail == ZR_TAIL_SAMPLE ? &c->sdev : NULL;
    c->f.tail_io = (ZrPickIO){.logits = c->f.logits, .n_cand = c->tail_n_cand, .tok_pos = c->f.d_tok,
                              .ring = (CUdeviceptr)(uintptr_t)c->ring, .n_slots = ZR_RING_SLOTS};
    c->io.n_adv = 0;
    c->io.ring = 0;
    if (c->tail != ZR_TAIL_NONE) {
        c->io.adv[c->io.n_adv] = c->f.d_tok; /* token, position */
        c->io.adv_bytes[c->io.n_adv++] = 2 * sizeof(int32_t);
        if (c->tail == ZR_TAIL_SAMPLE) {
            c->io.adv[c->io.n_adv] = c->sdev.state;
            c->io.adv_bytes[c->io.n_adv++] = c->sdev.state_bytes;
        }
        c->io.d_snap = c->d_snap;
        c->io.ring = (CUdeviceptr)(uintptr_t)c->ring;
        c->io.n_slots = ZR_RING_SLOTS;
        c->io.slot_bytes = sizeof(ZrPickRecord);
        c->io.record_cmp = offsetof(ZrPickRecord, t_begin);
        c->io.ring_host = true;
    }
}

/* The host sampler's state bytes in c->state_buf (grown as needed), their count in *n. */
static int host_state(CudaBackend *c, const ZrSampler *smp, size_t *n, ZrError *err) {
    *n = zr_sampler_state_size(smp);
    if (*n > c->state_cap) {
        uint8_t *p = realloc(c->state_buf, *n);
        if (!p) return zr_err(err, ZR_E_NOMEM, "cuda decode run: out of host memory for a sampler state of %zu bytes", *n);
        c->state_buf = p;
        c->state_cap = *n;
    }
    zr_sampler_get_state(smp, c->state_buf);
    return ZR_OK;
}

/* The host sampler's state onto the device (the sampling chain's). */
static int push_state(CudaBackend *c, const ZrSampler *smp, ZrError *err) {
    size_t n;
    const int rc = host_state(c, smp, &n, err);
    return rc ? rc : zr_sample_dev_set_state(&c->cuda, &c->sdev, c->state_buf, n, err);
}

/* The tail's buffers in this context: the ring, the chain's state (for
 * c->sdev_p), the snapshot; then the wiring. Called when the tail changes and after a reset. */
static int tail_buffers(CudaBackend *c, ZrError *err) {
    const ZrCuDriver *d = c->cuda.drv;
    if (!c->ring) {
        void *p = NULL;
        ZR_CU_TRY(d, err, d->cuMemHostAlloc(&p, ZR_RING_SLOTS * sizeof(ZrPickRecord), ZR_MEMHOSTALLOC_DEVICEMAP),
                  "cuMemHostAlloc(%zu bytes, mapped) for the decode records", ZR_RING_SLOTS * sizeof(ZrPickRecord));
        memset(p, 0, ZR_RING_SLOTS * sizeof(ZrPickRecord));
        c->ring = p;
    }
    if (c->tail == ZR_TAIL_SAMPLE && !c->sdev_init) {
        int rc = zr_sample_dev_init(&c->cuda, &c->sdev_p, c->m->hp.n_vocab, c->sdev_ban, c->sdev_n_ban, &c->sdev, err);
        if (rc) return rc;
        c->sdev_init = true;
    }
    const size_t snap = 2 * sizeof(int32_t) + (c->sdev_init ? c->sdev.state_bytes : 0);
    if (snap > c->snap_bytes) {
        int rc = zr_cuf_dalloc(&c->f, &c->d_snap, snap, "the checked replay's snapshot", err);
        if (rc) return rc;
        c->snap_bytes = snap;
    }
    wire_io(c);
    return ZR_OK;
}

/* After a context reset: what belonged to the old context is gone with it. */
static void tail_forget(CudaBackend *c) {
    c->ring = NULL;
    c->sdev_init = false;
    free(c->sdev.ban); /* its host copy; the device memory went with the context */
    memset(&c->sdev, 0, sizeof c->sdev);
    c->d_snap = 0;
    c->snap_bytes = 0;
}

/* Every kernel looked up in the loaded module, the matrix-vector kernels let stage rows as long
 * as the model's longest input (zr_cuf_kernels_load). */
static int kernels_lookup(CudaBackend *c, ZrError *err) {
    const ZrHparams *hp = &c->m->hp;
    int max_n_in = hp->n_embd;
    if (hp->n_ff > max_n_in) max_n_in = hp->n_ff;
    if (hp->n_head * hp->head_dim > max_n_in) max_n_in = hp->n_head * hp->head_dim;
    return zr_cuf_kernels_load(&c->cuda, c->k, max_n_in, err);
}

/* The warm-up's thread joined (its rest done) and its cuBLASLt taken over: before a prompt that
 * needs cuBLASLt, and before the context is reset. */
static int warm_join(CudaBackend *c, ZrError *err) {
    if (!c->warm) return ZR_OK;
    const double t0 = zr_clock_ms();
    ZrCuWarmStats ws;
    const int rc = zr_cuf_warm_wait(c->warm, &c->lt, &ws, err);
    c->warm = NULL;
    const double join_ms = zr_clock_ms() - t0;
    c->lt_open = c->lt.handle != NULL;
    if (rc) return rc;
    if (!c->opt.quiet)
        fprintf(stderr, "zrun: cuda: the prefill warm-up's rest (%d GEMM plans, %d run, in %.0f ms after the first "
                        "prompt) joined: this prompt waited %.1f ms for it\n", ws.n_rest, ws.n_rest_run, ws.rest_ms, join_ms);
    return ZR_OK;
}

/* The context is poisoned: a new context, the kernels, cuBLASLt, the weights and buffers again,
 * then the first n_past tokens fed again exactly as they were (same chunks, same kernels). */
static int recover(void *ctx, int n_past, ZrError *err) {
    CudaBackend *c = ctx;
    int rc;
    zr_cuf_forget(&c->f);
    c->f_init = false;
    tail_forget(c);
    const ZrTail tail = c->tail;
    c->tail = ZR_TAIL_NONE; /* the re-prefill's decode steps must not advance a sampler */
    if ((rc = warm_join(c, err))) return rc;
    if (c->lt_open) zr_cublaslt_close(&c->lt);
    c->lt_open = false;
    if ((rc = zr_cuda_reset(&c->cuda, zr_cuda_kernels_image(), err))) return rc;
    c->launcher.stream = c->cuda.stream;
    if ((rc = kernels_lookup(c, err))) return rc;
    if ((rc = zr_cublaslt_open(&c->lt, err))) return rc;
    c->lt_open = true;
    if ((rc = zr_cuf_init(&c->f, c->m, &c->cuda, &c->launcher, &c->lt, c->k, c->be.n_ctx, c->opt.kv_type == ZR_KV_F16,
                          NULL, err)))
        return rc;
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
    if ((rc = zr_cuda_sync(&c->cuda, err))) return rc;
    if (tail == ZR_TAIL_NONE) return ZR_OK;
    /* the tail again, its state from the host's sampler (the tokens consumed so far) */
    c->tail = tail;
    if ((rc = tail_buffers(c, err))) return rc;
    if (tail == ZR_TAIL_SAMPLE && c->mirror && (rc = push_state(c, c->mirror, err))) return rc;
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

/* The decode attention's kernel for a step at pos (cuda/attn.h): where it changes, the step
 * launches another kernel than the recorded graph, so the epoch moves (recorded again, once). */
static void attn_kernel_at(CudaBackend *c, int pos) {
    if (zr_cuf_attn_group_at(&c->f, pos, c->opt.attn_group_pos)) c->io.epoch++;
}

static int forward_(CudaBackend *c, const int32_t *tokens, int n, int pos, float *logits, bool all_logits,
                    ZrError *err) {
    const int n_vocab = c->m->hp.n_vocab;
    int rc = accept_call(c, tokens, n, pos, err);
    if (rc) return rc;
    if (n == 1) {
        attn_kernel_at(c, pos);
        if ((rc = zr_graph_decode_step(&c->graph, tokens[0], pos, logits, err))) return rc;
        c->n_past = pos + 1;
        /* the row is on the host: checked there */
        return logits ? zr_logits_check(c->m->gguf.path, logits, 1, n_vocab, pos, err) : ZR_OK;
    }
    /* a prompt with a GEMM the load did not make ready waits for the warm-up's rest */
    if (c->warm && zr_cuf_warm_joins(c->warm, n, c->lt_open) && (rc = warm_join(c, err))) return rc;
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

static int cuda_forward(ZrBackend *be, const int32_t *tokens, int n, int pos, float *logits, bool all_logits,
                        ZrError *err) {
    CudaBackend *c = (CudaBackend *)be;
    const int rc = forward_(c, tokens, n, pos, logits, all_logits, err);
    if (c->warm) zr_cuf_warm_release(c->warm); /* the first prompt is done: the warm-up's rest may go on */
    return rc;
}

/* A decode step of token at pos ending with the greedy pick over logits [0, n_cand) on the
 * device, so only the token comes back (the logits too when logits is not NULL). The pick joins
 * the decode step the first time it is asked for (and again if n_cand changes): the epoch tells
 * the graph controller to record the step again, once. */
static int step_greedy(CudaBackend *c, int32_t token, int pos, int n_cand, float *logits, int32_t *next,
                       ZrError *err) {
    int rc = accept_call(c, &token, 1, pos, err);
    if (rc) return rc;
    if (c->pick_n != n_cand) {
        c->pick_n = c->f.pick_n = n_cand;
        c->io.epoch++;
    }
    attn_kernel_at(c, pos);
    int32_t pick[2];
    if ((rc = zr_graph_decode_step_out(&c->graph, token, pos, logits, pick, err))) return rc;
    c->n_past = pos + 1;
    if (pick[0] < 0 || pick[0] >= n_cand || pick[1] < -1 || pick[1] >= n_cand)
        return zr_err(err, ZR_E_INTERNAL, "cuda greedy decode at position %d: the device picked %d (non-finite at %d) among %d ids",
                      pos, pick[0], pick[1], n_cand);
    /* the pick kernel (cu/argmax.cu) reports the first NaN or +-inf id */
    if (pick[1] >= 0)
        return zr_logits_nonfinite_error(c->m->gguf.path, pos, pick[1], logits ? logits + pick[1] : NULL, err);
    *next = pick[0];
    return ZR_OK;
}

/* The decode loop one step at a time, where profiling times each step: greedy without banned
 * ids picks on the device with the argmax pick (the token alone comes back); any other sampling
 * brings the logits back each step and samples on the host (counted in host_steps). */
static int run_stepwise(CudaBackend *c, ZrDecodeLoop *L, ZrError *err) {
    ZrBackend *be = &c->be;
    const int n_vocab = c->m->hp.n_vocab;
    int rc;
    if (c->tail != ZR_TAIL_NONE) { /* the argmax pick or the logits alone end the step again */
        c->tail = ZR_TAIL_NONE;
        wire_io(c);
        c->io.epoch++;
    }
    const bool device_pick = zr_sampler_is_greedy(L->sp) && L->n_ban == 0;
    if (!device_pick && !c->host_logits) {
        /* [2][n_vocab]: a step's logits, and the copy the sampler works on */
        if (!(c->host_logits = malloc((size_t)2 * n_vocab * sizeof *c->host_logits)))
            return zr_err(err, ZR_E_NOMEM, "cuda decode run: out of host memory for %d logits", 2 * n_vocab);
    }
    int32_t tok = L->token;
    for (;;) {
        const int pos = L->pos + L->steps;
        int32_t next = 0;
        if (device_pick) {
            if ((rc = step_greedy(c, tok, pos, L->n_cand, NULL, &next, err))) return rc;
            zr_sampler_accept(L->host, next);
        } else {
            float *row = c->host_logits, *work = c->host_logits + n_vocab;
            if ((rc = cuda_forward(be, &tok, 1, pos, row, false, err))) return rc;
            memcpy(work, row, (size_t)n_vocab * sizeof *work);
            next = zr_decode_pick_host(L, work, n_vocab);
            L->host_steps++;
            c->host_steps++;
        }
        L->steps++;
        if (!L->on_token(L->ctx, next) || L->steps >= L->max_steps) break;
        tok = next;
    }
    if (!L->logits) return ZR_OK;
    if (!device_pick) {
        memcpy(L->logits, c->host_logits, (size_t)n_vocab * sizeof *L->logits);
        return ZR_OK;
    }
    /* the last step's logits are still in the device buffer: no step was queued after it */
    if ((rc = zr_cuda_d2h(&c->cuda, L->logits, c->f.logits, (size_t)n_vocab * sizeof(float), err))) return rc;
    return zr_cuda_sync(&c->cuda, err);
}

/* The tail a loop needs (greedy without banned ids: the argmax tail; else the chain for its
 * parameters and banned ids), in place with the host sampler's state on the device. A changed
 * tail or candidate count moves the epoch: the graph is recorded again, once. */
static int tail_setup(CudaBackend *c, const ZrDecodeLoop *L, ZrError *err) {
    const ZrTail want = zr_sampler_is_greedy(L->sp) && L->n_ban == 0 ? ZR_TAIL_GREEDY : ZR_TAIL_SAMPLE;
    bool moved = want != c->tail || L->n_cand != c->tail_n_cand;
    if (want == ZR_TAIL_SAMPLE &&
        (!c->sdev_init || memcmp(&c->sdev_p, L->sp, sizeof *L->sp) || c->sdev_n_ban != L->n_ban ||
         (L->n_ban && memcmp(c->sdev_ban, L->ban, sizeof(int32_t) * (size_t)L->n_ban)))) {
        if (c->sdev_init) zr_sample_dev_free(&c->cuda, &c->sdev);
        c->sdev_init = false;
        int32_t *ban = realloc(c->sdev_ban, sizeof(int32_t) * (size_t)(L->n_ban ? L->n_ban : 1));
        if (!ban) return zr_err(err, ZR_E_NOMEM, "cuda decode run: out of host memory for %d banned ids", L->n_ban);
        if (L->n_ban) memcpy(ban, L->ban, sizeof(int32_t) * (size_t)L->n_ban);
        c->sdev_ban = ban;
        c->sdev_n_ban = L->n_ban;
        c->sdev_p = *L->sp;
        moved = true; /* new state and scratch pointers */
    }
    c->tail = want;
    c->tail_n_cand = L->n_cand;
    int rc = tail_buffers(c, err);
    if (rc) return rc;
    if (moved) c->io.epoch++;
    return want == ZR_TAIL_SAMPLE ? push_state(c, L->host, err) : ZR_OK;
}

/* The generator in a record into the host sampler (the state's first 32 bytes: sampler.c). */
static int take_rng(CudaBackend *c, ZrSampler *smp, const uint64_t rng[4], ZrError *err) {
    size_t n;
    const int rc = host_state(c, smp, &n, err);
    if (rc) return rc;
    memcpy(c->state_buf, rng, 4 * sizeof(uint64_t));
    return zr_sampler_set_state(smp, c->state_buf, n, err);
}

/* Waits until the record of the queued step at pos is in the ring: its pos field, written last
 * after a system-wide fence (and set to -1 before the step was queued), says so. The host spins
 * on the mapped ring, so each token is handed over as soon as its step is done (not when the
 * launch that holds it is), asking the stream between two looks whether it failed or ended. */
static int wait_record(CudaBackend *c, int pos, CUresult *bad, ZrError *err) {
    const ZrCuDriver *d = c->cuda.drv;
    const volatile int32_t *at = &c->ring[pos % ZR_RING_SLOTS].pos;
    while (*at != pos) {
        const CUresult r = d->cuStreamQuery(c->cuda.stream);
        if (r == CUDA_ERROR_NOT_READY) continue;
        if (r == CUDA_SUCCESS) {
            if (*at == pos) break;
            return zr_err(err, ZR_E_INTERNAL, "cuda decode run: the steps queued ended without the record of position %d",
                          pos);
        }
        *bad = r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED || zr_driver_error_is_sticky(r) ? r : CUDA_SUCCESS;
        return zr_driver_err(d, err, r, "decode step at position %d", pos);
    }
    atomic_thread_fence(memory_order_acquire); /* the record's other fields after its pos */
    return ZR_OK;
}

/* Waits for whatever is queued (steps past the last one consumed are discarded). */
static CUresult drain(CudaBackend *c) { return zr_cuda_sync_result(&c->cuda); }

/* The free-running decode loop. The tail on the device picks each step's token and advances
 * tok/pos in place, so the host queues up to run_ahead steps (graph launches of ZR_GRAPH_STEPS
 * steps each where they fit, or the eager launches) with nothing written between them, and reads
 * each step's record from the mapped ring as soon as it lands there (wait_record): the GPU never
 * waits for the host, and no event or copy stands between two steps. The first steps go through
 * the graph controller one at a time (recording, the checked replays); the rest are queued
 * (zr_graph_decode_issue_n). The steps past the limit (-n, the context) are never queued: the
 * last ones before it go one a launch. A step the device cannot finish exactly (ZR_PICK_HOST or
 * ZR_PICK_NONFINITE) leaves tok/pos as they were, so the steps queued after it, in its own launch
 * too, recompute it (the same record, the same cache rows). ZR_PICK_HOST is then
 * sampled on the host from its logits, the host's state pushed back to the device; a poisoned
 * context is recreated with the consumed tokens re-prefilled. When on_token says stop, the steps
 * queued past it are waited for and discarded: the cache holds the consumed tokens (n_past), and
 * the next loop starts from the host's sampler state again. */
static int cuda_decode_run(ZrBackend *be, ZrDecodeLoop *L, ZrError *err) {
    CudaBackend *c = (CudaBackend *)be;
    const ZrCuDriver *d = c->cuda.drv;
    const int n_vocab = c->m->hp.n_vocab;
    L->steps = 0;
    if (L->host_pick) return zr_decode_run_host(be, n_vocab, L, err);
    int rc = zr_decode_run_check(be, n_vocab, L, err);
    if (rc) return rc;
    if (c->opt.profile) return run_stepwise(c, L, err);
    const int pos0 = L->pos;
    if (pos0 != c->n_past)
        return zr_err(err, ZR_E_INTERNAL, "cuda decode run: position %d given, but %d tokens are in the cache", pos0, c->n_past);
    if (L->token < 0 || L->token >= n_vocab)
        return zr_err(err, ZR_E_RANGE, "cuda decode run: token id %d at position %d is outside the vocabulary 0..%d",
                      L->token, pos0, n_vocab - 1);
    /* steps that fit the context */
    const int limit = L->max_steps < be->n_ctx - pos0 ? L->max_steps : be->n_ctx - pos0;
    if (limit < 1)
        return zr_err(err, ZR_E_RANGE, "cuda decode run: position %d does not fit the context of %d tokens (use a larger -c)",
                      pos0, be->n_ctx);
    if ((rc = tail_setup(c, L, err))) {
        if (rc != ZR_E_UNSUPPORTED) return rc;
        /* a chain the device does not run (zr_sample_dev_init says why): the host samples */
        if (!c->opt.quiet) fprintf(stderr, "zrun: cuda: sampling on the host: %s\n", err->msg);
        return run_stepwise(c, L, err);
    }
    if (!c->gaps && !(c->gaps = malloc(ZR_GAP_CAP * sizeof *c->gaps)))
        return zr_err(err, ZR_E_NOMEM, "cuda decode run: out of host memory");
    c->mirror = L->host;
    int32_t tok = L->token; /* what the step at pos0 + L->steps feeds */
    int queued = 0;         /* steps issued: positions pos0 .. pos0 + queued - 1 */
    bool stop = false;
    uint64_t prev_end = 0;  /* the last consumed step's t_end when it was queued (0: it was not) */
    int ahead = c->run_ahead; /* 1 after a step the host sampled (the steps queued after it only repeat it) */
    while (!stop && L->steps < limit) {
        const int pos = pos0 + L->steps;
        const int slot = pos % ZR_RING_SLOTS;
        CUresult bad = CUDA_SUCCESS;
        bool synced = false;
        if (queued == L->steps) {
            /* nothing queued past this step: the attention may change kernels here (the graph is
             * recorded again) */
            attn_kernel_at(c, pos);
            if (!zr_graph_decode_steady(&c->graph)) {
                /* recording, a checked replay, or a launch log: the controller's own step (it recovers) */
                if ((rc = zr_graph_decode_step_out(&c->graph, tok, pos, NULL, NULL, err))) break;
                queued++;
                synced = true;
            } else {
                const int32_t v[2] = {tok, pos};
                if ((rc = zr_cuda_h2d(&c->cuda, c->f.d_tok, v, sizeof v, err))) {
                    bad = zr_cuda_sync_result(&c->cuda);
                    goto failed;
                }
            }
        }
        /* no step queued at or past the position where the attention changes kernels */
        const int sw = zr_cuf_attn_group_next(&c->f, pos0 + queued, c->opt.attn_group_pos);
        const int qlimit = sw - pos0 < limit ? sw - pos0 : limit;
        for (;;) {
            /* a launch of several steps where they all fit the limit (never a step past the
             * context) and the window, else one step */
            int n = synced ? 0 : zr_graph_decode_batch(&c->graph);
            if (n > 1 && (queued + n > qlimit || n > ahead)) n = 1;
            if (n == 0 || queued + n > L->steps + ahead || queued >= qlimit) break;
            for (int i = 0; i < n; i++) c->ring[(pos0 + queued + i) % ZR_RING_SLOTS].pos = -1; /* not yet written */
            if ((rc = zr_graph_decode_issue_n(&c->graph, n, &bad, err))) goto failed;
            queued += n;
        }
        if (!synced && (rc = wait_record(c, pos, &bad, err))) goto failed;
        ZrPickRecord rec;
        memcpy(&rec, (const void *)&c->ring[slot], sizeof rec); /* complete: its pos, written last, is there */
        if (rec.pos != pos) {
            rc = zr_err(err, ZR_E_INTERNAL, "cuda decode run: the record for position %d says position %d (status %d)",
                        pos, rec.pos, rec.status);
            break;
        }
        int32_t next;
        if (rec.status == ZR_PICK_OK) {
            next = rec.token;
            if (next < 0 || next >= L->n_cand) {
                rc = zr_err(err, ZR_E_INTERNAL, "cuda decode run at position %d: the device picked %d among %d ids", pos,
                            next, L->n_cand);
                break;
            }
            if (c->tail == ZR_TAIL_SAMPLE && (rc = take_rng(c, L->host, rec.rng, err))) break;
            zr_sampler_accept(L->host, next);
            if (ahead < c->run_ahead) ahead++;
        } else if (rec.status == ZR_PICK_HOST) {
            /* the steps queued after it recomputed this one (tok/pos unchanged): wait, then the host picks */
            CUresult r = drain(c);
            float *row = c->host_logits, *work = c->host_logits ? c->host_logits + n_vocab : NULL;
            if (r != CUDA_SUCCESS) {
                rc = zr_driver_err(d, err, r, "decode step at position %d", pos);
                bad = zr_driver_error_is_sticky(r) ? r : CUDA_SUCCESS;
                goto failed;
            }
            if (!row) {
                if (!(c->host_logits = malloc((size_t)2 * n_vocab * sizeof *c->host_logits))) {
                    rc = zr_err(err, ZR_E_NOMEM, "cuda decode run: out of host memory for %d logits", 2 * n_vocab);
                    break;
                }
                row = c->host_logits;
                work = row + n_vocab;
            }
            if ((rc = zr_cuda_d2h(&c->cuda, row, c->f.logits, (size_t)n_vocab * sizeof(float), err)) ||
                (rc = zr_cuda_sync(&c->cuda, err)) ||
                (rc = zr_logits_check(c->m->gguf.path, row, 1, n_vocab, pos, err)))
                break;
            memcpy(work, row, (size_t)n_vocab * sizeof *work);
            next = zr_decode_pick_host(L, work, n_vocab);
            if ((rc = push_state(c, L->host, err))) break;
            queued = L->steps + 1;
            ahead = 1;
            L->host_steps++;
            c->host_steps++;
        } else if (rec.status == ZR_PICK_NONFINITE) {
            rc = zr_logits_nonfinite_error(c->m->gguf.path, pos, rec.nonfinite_at, NULL, err);
            break;
        } else {
            rc = zr_err(err, ZR_E_INTERNAL, "cuda decode run at position %d: a record with status %d", pos, rec.status);
            break;
        }
        /* the idle gap before this step, when both it and the one before were queued */
        if (prev_end && !synced && rec.status == ZR_PICK_OK && rec.t_begin >= prev_end && c->gaps)
            c->gaps[c->n_gaps++ % ZR_GAP_CAP] = (double)(rec.t_begin - prev_end) / 1e3;
        prev_end = !synced && rec.status == ZR_PICK_OK ? rec.t_end : 0;
        c->hist[pos] = tok; /* consumed: a recovery re-prefills it */
        c->calls[pos] = 1;
        c->n_past = pos + 1;
        L->steps++;
        tok = next;
        if (!L->on_token(L->ctx, next)) stop = true;
        continue;
    failed:
        /* the step could not be queued or did not finish: recreate a poisoned context with the
         * consumed tokens and go on from there (eagerly); anything else ends the loop */
        drain(c);
        if (bad == CUDA_SUCCESS) break;
        if ((rc = zr_graph_decode_recover(&c->graph, bad, pos, err))) break;
        queued = L->steps;
        prev_end = 0;
    }
    if (!rc && !stop && L->steps == limit && limit < L->max_steps)
        rc = zr_err(err, ZR_E_RANGE, "cuda decode run: %d steps from position %d do not fit the context of %d tokens "
                                     "(use a larger -c)", L->max_steps, pos0, be->n_ctx);
    if (queued > L->steps) drain(c); /* computed past the end: discarded (a sticky error shows at the next call) */
    if (!rc && L->logits && L->steps > 0) {
        if (queued > L->steps) {
            /* the logits buffer holds a later step's: the last consumed step again, eagerly (it
             * rewrites the same KV entries; the tail's advance is undone at the next loop) */
            const int32_t v[2] = {c->hist[pos0 + L->steps - 1], pos0 + L->steps - 1};
            if (!(rc = zr_cuda_h2d(&c->cuda, c->f.d_tok, v, sizeof v, err))) rc = zr_cuf_decode_step(&c->f, err);
        }
        if (!rc) rc = zr_cuda_d2h(&c->cuda, L->logits, c->f.logits, (size_t)n_vocab * sizeof(float), err);
        if (!rc) rc = zr_cuda_sync(&c->cuda, err);
    }
    c->mirror = NULL;
    return rc;
}

static void cuda_truncate(ZrBackend *be, int pos) {
    CudaBackend *c = (CudaBackend *)be;
    if (pos < 0) pos = 0;
    if (pos < c->n_past) c->n_past = pos;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Min, median and mean of the gaps kept. */
static void gap_stats(const CudaBackend *c, ZrBackendStats *out) {
    const size_t n = c->n_gaps < ZR_GAP_CAP ? (size_t)c->n_gaps : ZR_GAP_CAP;
    out->gap_samples = n;
    if (!n) return;
    double *v = malloc(n * sizeof *v);
    if (!v) return;
    memcpy(v, c->gaps, n * sizeof *v);
    qsort(v, n, sizeof *v, cmp_double);
    out->gap_us_min = v[0];
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += v[i];
    out->gap_us_mean = sum / (double)n; /* a launch's own gap counts once per launch, the steps in it at theirs */
    out->gap_us_median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    free(v);
}

static void cuda_stats(const ZrBackend *be, ZrBackendStats *out) {
    const CudaBackend *c = (const CudaBackend *)be;
    ZrDecodeStats st;
    memset(out, 0, sizeof *out);
    out->gemm_plans = c->lt.n_plans;
    out->gemm_heuristics = c->lt.n_heuristics;
    out->gemm_plans_cached = c->lt.n_cached;
    if (!c->graph_init) return;
    zr_graph_decode_stats(&c->graph, &st);
    out->kernels_per_token = st.kernels_per_token;
    out->graph_build_ms = st.graph_build_ms;
    out->graph_active = st.graph_active;
    out->graph_rebuilds = (int)st.rebuilds;
    out->pdl = st.graph_active ? st.pdl : c->launcher.pdl;
    out->host_steps = c->host_steps;
    out->graph_steps_per_launch = st.multi_launches ? st.multi_steps : st.graph_steps ? 1 : 0;
    gap_stats(c, out);
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

/* ZrBackendOptions.timeline: the stamps of the last decode steps, beside the launches of the
 * step the graph replays (cuda/timeline.h); a failure is reported, the backend still closes. */
static void write_timeline(CudaBackend *c) {
    ZrError e = {0};
    FILE *f = fopen(c->opt.timeline, "w");
    if (!f) {
        fprintf(stderr, "zrun: timeline: cannot write %s\n", c->opt.timeline);
        return;
    }
    const int rc = zr_cuda_timeline_write(&c->cuda, c->graph_init && c->graph.rec.n ? &c->graph.rec : NULL, f, &e);
    if (fclose(f) && !rc) zr_err(&e, ZR_E_IO, "closing the file failed");
    if (e.code) fprintf(stderr, "zrun: timeline: %s: %s\n", c->opt.timeline, e.msg);
}

static void cuda_destroy(ZrBackend *be) {
    CudaBackend *c = (CudaBackend *)be;
    if (!c) return;
    if (c->warm) { /* a failed start-up, or the rest of the warm-up not joined: it stops, its cuBLASLt goes with it */
        ZrError e = {0};
        zr_cuf_warm_buffers(c->warm, NULL); /* no GEMM more, those launched done */
        zr_cuf_warm_wait(c->warm, &c->lt, NULL, &e); /* closed below with the rest */
        c->warm = NULL;
        c->lt_open = c->lt.handle != NULL;
    }
    if (c->opt.timeline && c->cuda_open && zr_cuda_timeline_built(&c->cuda)) write_timeline(c);
    if (c->graph_init) zr_graph_decode_free(&c->graph);
    if (c->profiling) {
        ZrError e = {0};
        if (zr_profile_collect(&c->prof, &e) == ZR_OK) zr_profile_print(&c->prof, stderr);
        c->launcher.profile = NULL;
        zr_profile_free(&c->prof);
    }
    if (c->cuda_open) {
        if (c->sdev_init) zr_sample_dev_free(&c->cuda, &c->sdev);
        zr_cuda_host_free(&c->cuda, c->ring);
    }
    free(c->sdev_ban);
    free(c->state_buf);
    free(c->gaps);
    if (c->f_init) zr_cuf_free(&c->f);
    if (c->launcher_init) zr_launcher_free(&c->launcher);
    if (c->lt_open) zr_cublaslt_close(&c->lt);
    zr_cublaslt_unload(c->lt_lib);
    if (c->cuda_open) zr_cuda_close(&c->cuda);
    free(c->k);
    free(c->hist);
    free(c->calls);
    free(c->host_logits);
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

/* The plan cache at path for this GPU (the key's library part is filled in once cuBLASLt opens). */
static ZrCuWarmCache plan_cache(const ZrCudaProps *p, const char *path) {
    ZrCuWarmCache c = {.path = path,
                       .key = {.cuda_driver = p->driver_version, .cc_major = p->cc_major, .cc_minor = p->cc_minor,
                               .sm_count = p->sm_count}};
    snprintf(c.key.gpu, sizeof c.key.gpu, "%s", p->name);
    return c;
}

/* The heuristic calls and what the plan cache did at load, for the start-up line: "0 heuristic
 * calls, 25 from the plan cache FILE (25 entries read in 0.1 ms)", with its notes. */
static void plan_cache_note(const char *path, const ZrCuWarmStats *ws, char *buf, size_t cap) {
    if (!path) {
        snprintf(buf, cap, "%d heuristic calls; no plan cache", ws->n_heuristics);
        return;
    }
    int n = snprintf(buf, cap, "%d heuristic calls, %d from the plan cache %s (%d entries read in %.1f ms", ws->n_heuristics,
                     ws->n_cached, path, ws->n_cache_read, ws->cache_load_ms);
    if (n > 0 && (size_t)n < cap && ws->n_cache_refused)
        n += snprintf(buf + n, cap - (size_t)n, ", %d refused by cuBLASLt's check", ws->n_cache_refused);
    if (n > 0 && (size_t)n < cap && ws->n_cache_written)
        n += snprintf(buf + n, cap - (size_t)n, "; %d written in %.1f ms", ws->n_cache_written, ws->cache_save_ms);
    if (n > 0 && (size_t)n < cap && ws->cache_note[0]) n += snprintf(buf + n, cap - (size_t)n, "; %s", ws->cache_note);
    if (n > 0 && (size_t)n < cap) snprintf(buf + n, cap - (size_t)n, ")");
}

/* The kernels ready for the first launch: the module the early thread loads (joined once, at
 * the upload's first repack that finds it loaded, or waited for: ZrCuProgress.module), then
 * every kernel looked up (zr_cuf_kernels_load, 10-16 ms on the H100) on a thread of their own
 * beside the rest of the upload, joined after it (kernels_ready). */
typedef struct KernelsReady {
    CudaBackend *c;
    ZrCudaEarly **early_th; /* NULL'd when joined */
    ZrCudaEarlyTimes *early_t;
    bool module_done, done;
    pthread_t th;           /* the lookups */
    bool th_started;
    int th_rc;
    ZrError th_err;
    double ms;              /* the main thread's wait for the module and the lookups */
} KernelsReady;

static void *lookups_main(void *arg) {
    KernelsReady *kr = arg;
    CudaBackend *c = kr->c;
    const CUresult r = c->drv->cuCtxSetCurrent(c->cuda.ctx);
    kr->th_rc = r != CUDA_SUCCESS ? zr_driver_err(c->drv, &kr->th_err, r, "cuCtxSetCurrent (the kernels' lookups)")
                                  : kernels_lookup(c, &kr->th_err);
    return NULL;
}

static int kernels_module(void *ctx, ZrError *err) {
    KernelsReady *kr = ctx;
    if (kr->module_done) return ZR_OK;
    CudaBackend *c = kr->c;
    const double t0 = zr_clock_ms();
    if (*kr->early_th) {
        const int rc = zr_cuda_early_finish(*kr->early_th, &c->cuda.mod, kr->early_t, err);
        *kr->early_th = NULL;
        if (rc) return rc;
    }
    if (!c->cuda.mod && zr_cuda_load_kernels(&c->cuda, err)) return err->code;
    kr->module_done = true;
    /* without a thread the lookups run in kernels_ready */
    kr->th_started = zr_thread_start(&kr->th, lookups_main, kr);
    kr->ms += zr_clock_ms() - t0;
    return ZR_OK;
}

static bool kernels_module_loaded(void *ctx) {
    KernelsReady *kr = ctx;
    return kr->module_done || !*kr->early_th || zr_cuda_early_loaded(*kr->early_th);
}

/* Joins the lookups' thread, if one runs (err NULL: on a failure path, the result dropped). */
static int kernels_join(KernelsReady *kr, ZrError *err) {
    if (!kr->th_started) return ZR_OK;
    pthread_join(kr->th, NULL);
    kr->th_started = false;
    if (kr->th_rc && err) *err = kr->th_err;
    return kr->th_rc;
}

static int kernels_ready(KernelsReady *kr, ZrError *err) {
    if (kr->done) return ZR_OK;
    int rc = kernels_module(kr, err);
    if (rc) return rc;
    const double t0 = zr_clock_ms();
    rc = kr->th_started ? kernels_join(kr, err) : kernels_lookup(kr->c, err);
    kr->ms += zr_clock_ms() - t0;
    kr->done = !rc;
    return rc;
}

ZrBackend *zr_cuda_backend_create(const ZrModel *m, const ZrBackendOptions *o, ZrError *err) {
    double t[5]; /* start-up phases' ends (ms): start, context, the warm-up started, weights and buffers (the kernels
                  * among them: KernelsReady), the first prompt's warm-up */
    t[0] = zr_clock_ms();
    const ZrCuDriver *drv = NULL;
    KernelsReady kr = {0};
    /* while the thread still opens the driver and context: cuBLASLt's library mapped (the
     * warm-up's thread opens it from the context on) and the upload's host chunks made */
    void *lt_lib = zr_cublaslt_preload();
    ZrStageHost staging;
    zr_stage_host_prepare(&staging, zr_cuf_upload_bytes(m));
    /* the driver and context opened on a thread since the command started it (beside the model's
     * parse), which goes on loading the kernels' module into the context; else here */
    ZrCudaEarly *early_th = o->cuda_early;
    ZrCuda early;
    ZrCudaEarlyTimes early_t = {0};
    const bool have_early = early_th != NULL;
    if (have_early ? zr_cuda_early_context(early_th, &drv, &early, err) : zr_driver_open(&drv, err)) {
        if (have_early) zr_cuda_early_finish(early_th, &early.mod, NULL, &(ZrError){0});
        return NULL;
    }
    if (!zr_cuda_have_kernels()) {
        zr_err(err, ZR_E_NODEV, "no usable GPU path: this zrun was built without CUDA kernels (no nvcc at build time)");
        goto fail_early;
    }
    if (o->n_ctx < 1) {
        zr_err(err, ZR_E_USAGE, "cuda backend: a context of %d positions; expected >= 1 (zr_backend_default_ctx)", o->n_ctx);
        goto fail_early;
    }
    if (o->kv_type != ZR_KV_F32 && o->kv_type != ZR_KV_F16) {
        zr_err(err, ZR_E_USAGE, "cuda backend: KV cache type %d; expected F32 (%d) or F16 (%d)", (int)o->kv_type, ZR_KV_F32,
               ZR_KV_F16);
        goto fail_early;
    }
    const int n_ctx = o->n_ctx;
    if (o->graph_steps < 0 || o->graph_steps > ZR_GRAPH_STEPS_MAX) {
        zr_err(err, ZR_E_USAGE, "cuda backend: %d decode steps per graph launch; expected 1..%d (0: %d)", o->graph_steps,
               ZR_GRAPH_STEPS_MAX, ZR_GRAPH_STEPS);
        goto fail_early;
    }
    if (zr_model_check_facts(m, err) || refuse_facts(m, err)) goto fail_early;
    CudaBackend *c = calloc(1, sizeof *c);
    if (!c || !(c->k = calloc(1, sizeof *c->k)) || !(c->hist = calloc(n_ctx, sizeof *c->hist)) ||
        !(c->calls = calloc(n_ctx, sizeof *c->calls))) {
        if (c) {
            free(c->k);
            free(c->hist);
        }
        free(c);
        zr_err(err, ZR_E_NOMEM, "cuda backend: out of host memory");
        goto fail_early;
    }
    c->be = (ZrBackend){.name = "cuda", .n_ctx = n_ctx, .forward = cuda_forward,
                        .decode_run = cuda_decode_run, .truncate = cuda_truncate,
                        .stats = cuda_stats, .read_bandwidth = cuda_read_bandwidth, .destroy = cuda_destroy};
    c->m = m;
    c->lt_lib = lt_lib;
    lt_lib = NULL; /* c's from here */
    c->opt = *o;
    c->opt.cuda_early = NULL; /* taken: early_th is joined below */
    c->opt.plan_cache = NULL; /* the command's string, read during the start-up only */
    c->drv = drv;
    const int graph_steps = o->graph_steps ? o->graph_steps : ZR_GRAPH_STEPS;
    c->run_ahead = 2 * graph_steps > ZR_RUN_AHEAD_MIN ? 2 * graph_steps : ZR_RUN_AHEAD_MIN;
    if (have_early) c->cuda = early;
    else if (zr_cuda_open(drv, 0, &c->cuda, err)) goto fail;
    c->cuda_open = true;
    t[1] = zr_clock_ms();
    /* cuBLASLt opens, and the prefill's GEMMs are planned and run once, on a thread of its own
     * while the kernels load and the weights go up (cuda/warm.h) */
    const ZrCuWarmCache cache = plan_cache(&c->cuda.props, o->plan_cache);
    const int wrc0 = zr_cuf_warm_start(&c->warm, drv, c->cuda.ctx, c->cuda.props.sm_count, c->cuda.props.max_smem_optin,
                                       m, n_ctx, o->all_logits, o->first_rows, &cache, err);
    if (wrc0) goto fail;
    /* the kernels (the module the early thread loads beside the warm-up's cuBLASLt, then their
     * lookups) are waited for at the upload's first repack, after the buffers and the staging
     * chunks are set up (ZrCuProgress.kernels), or below */
    kr = (KernelsReady){.c = c, .early_th = &early_th, .early_t = &early_t};
    t[2] = zr_clock_ms();
    zr_launcher_init(&c->launcher, drv, c->cuda.stream);
    /* programmatic dependent launch wherever it is supported (sm_90+, cuLaunchKernelEx): +18%
     * tg128 on the H100 (cu/PERF.md); the decode graph's edges follow the same rule (graph.c) */
    zr_launcher_set_pdl(&c->launcher, zr_launch_pdl_supported(&c->cuda));
    /* the decode products in clusters of two blocks (zr_launch_cluster_of; the same bits) */
    zr_launcher_set_clusters(&c->launcher, zr_launch_clusters_supported(&c->cuda));
    c->launcher_init = true;
    if (o->profile) {
        zr_profile_init(&c->prof, drv);
        c->launcher.profile = &c->prof;
        c->profiling = true;
    }
    const ZrCuProgress prog = {.fn = o->progress, .ctx = o->progress_ctx, .buffers = zr_cuf_warm_buffers,
                               .buffers_ctx = c->warm, .module = kernels_module, .module_loaded = kernels_module_loaded,
                               .kernels_ctx = &kr, .staging = &staging};
    const int irc = zr_cuf_init(&c->f, m, &c->cuda, &c->launcher, &c->lt, c->k, n_ctx, o->kv_type == ZR_KV_F16, &prog, err);
    zr_stage_host_release(&staging);
    if (irc) goto fail;
    c->f_init = true;
    if (kernels_ready(&kr, err)) goto fail; /* no repack took them (F32/F16/BF16 weights) */
    if (zr_cuf_warm_copies(&c->f, !c->profiling, err)) goto fail; /* while the warm-up's thread finishes */
    t[3] = zr_clock_ms();
    ZrCuWarmStats ws;
    if (zr_cuf_warm_ready(c->warm, &ws, &c->lt)) { /* all of it done (or failed): joined now */
        const int wrc = zr_cuf_warm_wait(c->warm, &c->lt, &ws, err);
        c->warm = NULL;
        c->lt_open = c->lt.handle != NULL;
        if (wrc) goto fail;
    } else {
        c->lt_open = c->lt.handle != NULL; /* the first prompt's plans (none: it joins the rest) */
    }
    t[4] = zr_clock_ms();
    if (o->timeline && !zr_cuda_timeline_built(&c->cuda)) {
        zr_err(err, ZR_E_UNSUPPORTED, "a timeline needs kernels that stamp their grid waits (meson -Dtimeline=true)");
        goto fail;
    }
    wire_io(c);
    c->io.epoch = 1;
    ZrDecodeOptions dopt = {.graph = o->graph, .verify = o->verify_graph, .profile = o->profile,
                            .log_launches = o->log_launches, .dot_path = o->graph_dot, .multi_steps = graph_steps};
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
        char early_note[256] = "";
        if (have_early)
            snprintf(early_note, sizeof early_note,
                     " (waited for; opened on a thread beside the model's parse: driver %.0f, context %.0f, then "
                     "the kernels' module %.0f beside the warm-up's cuBLASLt)",
                     early_t.driver, early_t.context, early_t.kernels);
        char cache_note[1024];
        plan_cache_note(o->plan_cache, &ws, cache_note, sizeof cache_note);
        fprintf(stderr, "zrun: cuda: upload %.2f GB in %.2f s, %.1f GB/s (page-locked host-to-device %.1f GB/s, %d threads, "
                        "staging set up in %.0f ms%s, %d chunks of rows waited for the kernels' module, gathered in %.0f ms, %.0f ms "
                        "waiting for chunks, %.0f ms in cuMemAlloc); start-up %.0f ms: driver and context %.0f%s, weights and "
                        "buffers %.0f (of it %.0f for the kernels: the module waited for, their lookups), then waiting for the prefill warm-up %.0f (on its own thread from the context on: "
                        "cuBLASLt opened in %.0f ms, %d GEMM plans for prompts of 1..%d tokens made in %.0f ms ("
                        "%s), %d of them run in %.0f ms once the buffers came, %.0f ms after the plans%s)\n",
                c->f.upload_bytes / 1e9, c->f.upload_s, c->f.upload_s > 0 ? c->f.upload_bytes / 1e9 / c->f.upload_s : 0.0,
                c->f.upload_h2d_gbps, c->f.upload_threads, c->f.upload_setup_s * 1e3,
                c->f.upload_prepared ? " (host chunks made before the context)" : "", c->f.upload_waiting,
                c->f.upload_gather_ms, c->f.upload_wait_ms, c->f.alloc_ms, t[4] - t[0], t[1] - t[0], early_note,
                t[3] - t[2], kr.ms, t[4] - t[3], ws.open_ms, ws.n_listed, ws.max_rows, ws.plan_ms,
                cache_note, ws.n_gemms, ws.gemm_ms, ws.wait_ms,
                !c->warm ? ""
                : o->first_rows == ZR_FIRST_ROWS_LATER ? "; every GEMM planned and run while no prompt is there"
                : "; those for the first prompt, the rest planned and run once it is done, beside the decode");
    }
    return &c->be;
fail:
    kernels_join(&kr, NULL);
    zr_stage_host_release(&staging);
    if (early_th) zr_cuda_early_finish(early_th, &c->cuda.mod, NULL, &(ZrError){0}); /* the module goes with c */
    cuda_destroy(&c->be);
    return NULL;
fail_early:
    zr_stage_host_release(&staging);
    zr_cublaslt_unload(lt_lib);
    if (have_early) {
        zr_cuda_early_finish(early_th, &early.mod, NULL, &(ZrError){0});
        zr_cuda_close(&early);
    }
    return NULL;
}
