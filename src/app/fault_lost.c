#include "fault_lost.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/fault.h"

#define MAX_STEPS 16

typedef struct LostBackend {
    ZrBackend be; /* first: the interface the callers hold */
    ZrBackend *inner;
    char spec[64];
    int steps[MAX_STEPS];
    int n_steps;
    int n_prompt, after_step;
} LostBackend;

bool zr_fault_lost_is(const char *spec) {
    const size_t n = strlen(ZR_FAULT_CONTEXT_LOST_NAME);
    return spec && !strncmp(spec, ZR_FAULT_CONTEXT_LOST_NAME, n) && (spec[n] == 0 || spec[n] == ':');
}

/* A decode step (n == 1) at pos that the spec says to lose. */
static int lost_here(const LostBackend *w, int n, int pos, ZrError *err) {
    const int step = pos - w->n_prompt;
    if (n == 1 && step >= 0 && step > w->after_step)
        for (int i = 0; i < w->n_steps; i++)
            if (w->steps[i] == step)
                return zr_err(err, ZR_E_CONTEXT_LOST,
                              "the CUDA context was lost (ZRUN_FAULT=%s): injected at decode step %d (position %d), "
                              "in front of the %s backend",
                              w->spec, step, pos, w->inner->name);
    return ZR_OK;
}

static int lost_forward(ZrBackend *be, const int32_t *tokens, int n, int pos, float *logits, bool all_logits,
                        ZrError *err) {
    LostBackend *w = (LostBackend *)be;
    int rc = lost_here(w, n, pos, err);
    return rc ? rc : w->inner->forward(w->inner, tokens, n, pos, logits, all_logits, err);
}

/* The inner loop's on_token, remembering its last answer. */
typedef struct LostLoop {
    const ZrDecodeLoop *outer;
    bool go_on;
} LostLoop;

static bool lost_on_token(void *ctx, int32_t token) {
    LostLoop *x = ctx;
    return x->go_on = x->outer->on_token(x->outer->ctx, token);
}

/* The inner backend's loop up to the first step to lose, then that step's loss. */
static int lost_decode_run(ZrBackend *be, ZrDecodeLoop *L, ZrError *err) {
    LostBackend *w = (LostBackend *)be;
    ZrError lost = {0};
    int ok = 0; /* steps before the first one to lose */
    while (ok < L->max_steps && lost_here(w, 1, L->pos + ok, &lost) == ZR_OK) ok++;
    L->steps = 0;
    if (ok > 0) {
        LostLoop x = {L, true};
        ZrDecodeLoop in = *L;
        in.max_steps = ok;
        in.on_token = lost_on_token;
        in.ctx = &x;
        int rc = w->inner->decode_run(w->inner, &in, err);
        L->steps = in.steps;
        L->host_steps = in.host_steps;
        if (rc || !x.go_on || ok == L->max_steps) return rc;
    }
    *err = lost;
    return lost.code;
}

static void lost_truncate(ZrBackend *be, int pos) {
    LostBackend *w = (LostBackend *)be;
    w->inner->truncate(w->inner, pos);
}

static void lost_stats(const ZrBackend *be, ZrBackendStats *out) {
    const LostBackend *w = (const LostBackend *)be;
    if (w->inner->stats)
        w->inner->stats(w->inner, out);
    else
        memset(out, 0, sizeof *out);
}

static int lost_read_bandwidth(ZrBackend *be, size_t bytes, int reps, ZrBandwidth *out, ZrError *err) {
    LostBackend *w = (LostBackend *)be;
    return w->inner->read_bandwidth(w->inner, bytes, reps, out, err);
}

static void lost_destroy(ZrBackend *be) {
    LostBackend *w = (LostBackend *)be;
    w->inner->destroy(w->inner);
    free(w);
}

int zr_fault_lost_wrap(ZrBackend **be, const char *spec, int n_prompt, int after_step, ZrError *err) {
    if (!zr_fault_lost_is(spec)) return ZR_OK;
    LostBackend *w = calloc(1, sizeof *w);
    if (!w) return zr_err(err, ZR_E_NOMEM, "ZRUN_FAULT: out of memory");
    snprintf(w->spec, sizeof w->spec, "%s", spec);
    const char *p = spec + strlen(ZR_FAULT_CONTEXT_LOST_NAME);
    if (*p == 0) {
        w->steps[w->n_steps++] = 1;
    } else {
        for (p++;;) {
            char *end = NULL;
            errno = 0;
            long v = strtol(p, &end, 10);
            if (end == p || (*end && *end != ',') || errno || v < 0 || v > 1000000000L || w->n_steps == MAX_STEPS) {
                free(w);
                return zr_err(err, ZR_E_USAGE,
                              "ZRUN_FAULT=%s: expected context-lost:TOKEN[,TOKEN...] with at most %d decode step "
                              "numbers >= 0",
                              spec, MAX_STEPS);
            }
            w->steps[w->n_steps++] = (int)v;
            if (!*end) break;
            p = end + 1;
        }
    }
    w->inner = *be;
    w->n_prompt = n_prompt;
    w->after_step = after_step;
    w->be = (ZrBackend){.name = w->inner->name, .n_ctx = w->inner->n_ctx, .forward = lost_forward,
                        .decode_run = w->inner->decode_run ? lost_decode_run : NULL,
                        .truncate = lost_truncate, .stats = lost_stats,
                        .read_bandwidth = w->inner->read_bandwidth ? lost_read_bandwidth : NULL,
                        .destroy = lost_destroy};
    *be = &w->be;
    return ZR_OK;
}
