/* The decode step's tails on the device (src/cuda/sample.h) against the CPU sampler, step after
 * step with the history and the generator carried on the device: the sampling chain
 * (cu/sample.cu) must pick exactly zr_sampler_sample's token, write the same generator into the
 * record, leave the same state bytes (zr_sampler_get_state), and advance tok_pos; where it
 * cannot finish exactly it must say ZR_PICK_HOST and change nothing (the host then samples, as
 * the decode loop does). The greedy tail (cu/argmax.cu argmax_pick_f32) likewise against
 * zr_sampler_argmax. Last, the chain's time per step (median of 200, cuEvents around each step
 * while the stream is kept busy so no host gap counts), and per stage from the %globaltimer
 * stamps the kernels leave in the scratch (ZR_SAMPLE_T_*), beside the period of steps queued
 * back to back as the device sees it (the records' t_end), PDL on as in the decode graph. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/pick.h"
#include "cuda/sample.h"
#include "cuda/sample_scratch.h"
#include "gpu_env.h"
#include "gpu_pick.h"
#include "gpu_steps.h"
#include "sampler.h"
#include "zt.h"

#define N_SLOTS 8

/* ---- logits ---- */

enum {
    L_PEAKED,  /* an LLM-like row: a few dozen ids (the same every step) well above a bulk in [-3, 3] */
    L_SPREAD,  /* uniform over [-10, 10): thousands of ids in top-p's set */
    L_TIES,    /* 11 distinct values, a few hundred ids at the top: top-k ends inside a run of equal logits */
    L_FLAT,    /* every logit equal */
    L_HUGE,    /* one logit of 1e4 (all other weights underflow to 0) */
    L_TIED,    /* one logit ~600 above a bulk of std ~13: the row of zrun-synth's tied Gemma, whose
                  input token's own logit stands out (the 40th ~600 below it, where the levels
                  step by 256 and 768: the first holding 40 ids holds the whole vocabulary) */
    L_KINDS
};
static const char *const kind_name[] = {"peaked", "spread", "ties", "flat", "huge", "tied"};

static void fill(float *v, int n, int kind, int step, uint64_t *s) {
    for (int i = 0; i < n; i++) {
        const float a = gpu_rand(s), b = gpu_rand(s);
        switch (kind) {
        case L_PEAKED: v[i] = i % 4099 == 17 ? 14.0f + 2.0f * a : 1.5f * (a + b); break;
        case L_SPREAD: v[i] = 10.0f * a; break;
        case L_TIES: v[i] = floorf(4.0f * a) + (i % 200 == 3 ? 3.0f : 0.0f); break;
        case L_FLAT: v[i] = 0.5f; break;
        case L_TIED: v[i] = 15.0f * (a + b + gpu_rand(s)); break;
        default: v[i] = a; break;
        }
    }
    if (kind == L_HUGE) v[(step * 7919 + 5) % n] = 1e4f;
    if (kind == L_TIED) v[(step * 7919 + 5) % n] = 640.0f + 4.0f * (float)step;
}

/* ---- one sequence of steps ---- */

typedef struct Case {
    const char *name;
    ZrSamplerParams p;
    int n_vocab, n_cand, kind, steps;
    int n_ban;
    int host; /* 0: every step exact on the device; 1: ZR_PICK_HOST allowed; 2: required on every step */
} Case;

/* The CPU's view of the device's logits: padding rows and banned ids at -inf (src/app/run.c). */
static void host_view(float *h, const float *v, const Case *c, const int32_t *ban) {
    memcpy(h, v, sizeof(float) * c->n_vocab);
    for (int i = c->n_cand; i < c->n_vocab; i++) h[i] = -INFINITY;
    for (int i = 0; i < c->n_ban; i++) h[ban[i]] = -INFINITY;
}

/* Runs c, adding the steps the device left to the host to *host_steps; the first difference
 * fails the test (and ends the case). */
static void run_case(GpuEnv *g, const Case *c, uint64_t seed, int *host_steps) {
    ZrError e = {0};
    ZrSamplerParams p = c->p;
    p.seed = seed;
    const int nv = c->n_vocab;
    int32_t ban[4] = {1, nv / 2, nv - 1, 7};
    ZrSampler *cpu = zr_sampler_create(&p, nv, &e);
    ZT_CHECKF(cpu, "%s", e.msg);
    ZrSampleDev d;
    ZT_CHECKF(!zr_sample_dev_init(&g->cuda, &p, nv, ban, c->n_ban, &d, &e), "%s", e.msg);
    if (!cpu || !d.state) return;
    /* a prompt in the history, moved to the device with set_state */
    for (int i = 0; i < 12; i++) zr_sampler_accept(cpu, (int32_t)((i * 4099 + 17) % nv));
    const size_t sb = zr_sampler_state_size(cpu);
    ZT_CHECK(sb == d.state_bytes);
    unsigned char *want = malloc(sb), *got = malloc(sb);
    zr_sampler_get_state(cpu, want);
    ZT_CHECKF(!zr_sample_dev_set_state(&g->cuda, &d, want, sb, &e), "%s", e.msg);
    float *v = malloc(sizeof(float) * nv), *h = malloc(sizeof(float) * nv);
    ZtPick dv = zt_pick_open(g, nv, c->n_cand, N_SLOTS);
    int32_t tp[2] = {5, 100};
    ZT_CHECK(!zr_cuda_h2d(&g->cuda, dv.tok_pos, tp, sizeof tp, &e));
    uint64_t rs = seed * 0x9e3779b97f4a7c15ull + (uint64_t)c->kind;
    for (int step = 0; step < c->steps; step++) {
        fill(v, c->n_cand, c->kind, step, &rs);
        for (int i = c->n_cand; i < nv; i++) v[i] = NAN; /* padding rows: never read */
        ZT_CHECK(!zr_cuda_h2d(&g->cuda, dv.logits, v, sizeof(float) * nv, &e));
        ZT_CHECKF(!zr_sample_launch(&g->l, &g->k, &d, &dv.io, &e), "%s", e.msg);
        ZrPickRecord rec;
        int32_t tp2[2];
        zt_pick_read(g, &dv, tp[1], &rec, tp2);
        host_view(h, v, c, ban);
        const int32_t tok = zr_sampler_sample(cpu, h);
        zr_sampler_accept(cpu, tok);
        zr_sampler_get_state(cpu, want);
        if (rec.status == ZR_PICK_HOST) {
            (*host_steps)++;
            ZT_CHECKF(c->host, "%s (%s, vocab %d of %d) seed %llu step %d: ZR_PICK_HOST where the device must finish",
                      c->name, kind_name[c->kind], c->n_cand, nv, (unsigned long long)seed, step);
            /* nothing moved: tok_pos as it was, the state as before the step */
            ZT_CHECK(rec.token == -1 && tp2[0] == tp[0] && tp2[1] == tp[1] && rec.pos == tp[1]);
            /* the host samples (as the decode loop does) and hands the state back */
            ZT_CHECKF(!zr_sample_dev_set_state(&g->cuda, &d, want, sb, &e), "%s", e.msg);
            tp[0] = tok;
            tp[1]++;
            ZT_CHECK(!zr_cuda_h2d(&g->cuda, dv.tok_pos, tp, sizeof tp, &e));
            continue;
        }
        ZT_CHECKF(c->host != 2, "%s (%s, vocab %d of %d) seed %llu step %d: status %d where ZR_PICK_HOST is the only exact answer",
                  c->name, kind_name[c->kind], c->n_cand, nv, (unsigned long long)seed, step, rec.status);
        ZT_CHECK(!zr_sample_dev_get_state(&g->cuda, &d, got, sb, &e));
        const bool same = rec.status == ZR_PICK_OK && rec.token == tok && rec.pos == tp[1] && rec.nonfinite_at == -1 &&
                          tp2[0] == tok && tp2[1] == tp[1] + 1 && !memcmp(rec.rng, want, 32) && !memcmp(got, want, sb);
        ZT_CHECKF(same,
                  "%s (%s, vocab %d of %d, seed %llu) step %d: device status %d token %d (tok_pos %d %d, pos %d), "
                  "CPU token %d; state %s",
                  c->name, kind_name[c->kind], c->n_cand, nv, (unsigned long long)seed, step, rec.status, rec.token,
                  tp2[0], tp2[1], rec.pos, tok, memcmp(got, want, sb) ? "differs" : "equal");
        tp[0] = tp2[0];
        tp[1] = tp2[1];
    }
    zt_pick_close(g, &dv);
    zr_sample_dev_free(&g->cuda, &d);
    zr_sampler_free(cpu);
    free(v);
    free(h);
    free(want);
    free(got);
}

/* The five settings of the issue, top-p over the full vocabulary, the penalties at temperature 0,
 * and top-p with min-p (the set may be min-p's). */
enum { S_GREEDY, S_DEFAULT, S_TOP_K, S_TOP_P, S_PENALTIES, S_FULL_TOP_P, S_GREEDY_PENALTIES, S_TOP_P_MIN_P, S_COUNT };
static const char *const setting_name[] = {"greedy",    "default",           "top-k 40",         "top-p 0.9",
                                           "penalties", "top-k 0 top-p .95", "temp 0 penalties", "top-p .9 min-p .05"};

static ZrSamplerParams setting(int s) {
    ZrSamplerParams p = zr_sampler_defaults();
    switch (s) {
    case S_GREEDY: p.temp = 0.0f; break;
    case S_TOP_K: p.top_p = 1.0f; p.min_p = 0.0f; break;
    case S_TOP_P: p.top_k = 0; p.top_p = 0.9f; p.min_p = 0.0f; break;
    case S_PENALTIES: p.repeat_penalty = 1.3f; p.presence_penalty = 0.5f; p.frequency_penalty = 0.3f; break;
    case S_FULL_TOP_P: p.top_k = 0; p.top_p = 0.95f; p.min_p = 0.0f; break;
    case S_GREEDY_PENALTIES: p.temp = 0.0f; p.repeat_penalty = 1.3f; p.presence_penalty = 0.5f; break;
    case S_TOP_P_MIN_P: p.top_k = 0; p.top_p = 0.9f; break;
    default: break;
    }
    return p;
}

/* Whether the device may (1) or must (2) hand a step of this setting and kind to the host. */
static int host_expected(int s, int kind, int n_cand) {
    const bool top_p = s == S_TOP_P || s == S_FULL_TOP_P || s == S_TOP_P_MIN_P;
    if (s == S_GREEDY || s == S_GREEDY_PENALTIES || kind == L_PEAKED || n_cand <= ZR_SAMPLE_CAP) return 0;
    if (kind == L_FLAT) return 2; /* every candidate set is the whole vocabulary, tied */
    /* huge, tied: top-k's crowded level is narrowed by the pick (sample_refine); top-p's set is
     * the one huge logit */
    if (kind == L_HUGE || kind == L_TIED) return 0;
    return top_p ? 1 : 0; /* spread, ties: top-p's set may pass the buffer */
}

ZT_TEST(the_sampling_chain_picks_the_cpu_samplers_tokens_step_after_step) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    static const int vocab[][2] = {{1000, 1000}, {32000, 32000}, {128256, 128256}, {128256, 128000}, {152064, 151646},
                                   {262144, 262144}};
    int cases = 0, steps = 0, host = 0;
    for (size_t vi = 0; vi < sizeof vocab / sizeof vocab[0]; vi++)
        for (int s = 0; s < S_COUNT; s++)
            for (int kind = 0; kind < L_KINDS; kind++) {
                const int nc = vocab[vi][1];
                Case c = {.name = setting_name[s], .p = setting(s), .n_vocab = vocab[vi][0], .n_cand = nc,
                          .kind = kind, .steps = kind == L_PEAKED ? 24 : 6, .n_ban = vi % 2 ? 4 : 0,
                          .host = host_expected(s, kind, nc)};
                const int seeds = kind == L_PEAKED ? 8 : 2;
                for (int seed = 1; seed <= seeds; seed++) {
                    run_case(g, &c, (uint64_t)seed, &host);
                    cases++;
                    steps += c.steps;
                }
            }
    fprintf(stderr, "  %d sequences, %d steps, %d left to the host\n", cases, steps, host);
}

/* (cu/sample_full.cu draws over every id: test/gpu/test_sample_full.c has the rest) */
ZT_TEST(the_chain_without_top_k_or_top_p_is_exact_on_the_device_at_any_vocabulary) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    ZrSamplerParams p = zr_sampler_defaults();
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    Case big = {.name = "all ids", .p = p, .n_vocab = 32000, .n_cand = 32000, .kind = L_PEAKED, .steps = 4, .host = 0};
    int host = 0;
    run_case(g, &big, 3, &host);
    Case small = {.name = "all ids", .p = p, .n_vocab = 4000, .n_cand = 4000, .kind = L_SPREAD, .steps = 8, .host = 0};
    run_case(g, &small, 3, &host);
    p.min_p = 0.05f;
    Case minp = {.name = "min-p only", .p = p, .n_vocab = 128256, .n_cand = 128256, .kind = L_PEAKED, .steps = 8, .host = 0};
    run_case(g, &minp, 3, &host);
    ZT_CHECK(host == 0);
}

ZT_TEST(a_nan_or_inf_logit_fails_the_step_and_changes_nothing) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    ZrError e = {0};
    const int nv = 32000;
    const ZrSamplerParams p = zr_sampler_defaults();
    ZrSampleDev d;
    ZT_CHECKF(!zr_sample_dev_init(&g->cuda, &p, nv, NULL, 0, &d, &e), "%s", e.msg);
    float *v = malloc(sizeof(float) * nv);
    uint64_t s = 11;
    ZtPick dv = zt_pick_open(g, nv, nv, N_SLOTS);
    const float bad[] = {NAN, INFINITY, -INFINITY};
    unsigned char *before = malloc(d.state_bytes), *after = malloc(d.state_bytes);
    for (int b = 0; b < 3; b++) {
        fill(v, nv, L_PEAKED, 0, &s);
        v[nv - 3] = bad[b];
        v[20000 + b] = bad[(b + 1) % 3];
        const int32_t tp[2] = {9, 41 + b};
        ZT_CHECK(!zr_cuda_h2d(&g->cuda, dv.tok_pos, tp, sizeof tp, &e) && !zr_cuda_h2d(&g->cuda, dv.logits, v, sizeof(float) * nv, &e));
        ZT_CHECK(!zr_sample_dev_get_state(&g->cuda, &d, before, d.state_bytes, &e));
        ZT_CHECKF(!zr_sample_launch(&g->l, &g->k, &d, &dv.io, &e), "%s", e.msg);
        ZrPickRecord rec;
        int32_t tp2[2];
        zt_pick_read(g, &dv, tp[1], &rec, tp2);
        ZT_CHECK(!zr_sample_dev_get_state(&g->cuda, &d, after, d.state_bytes, &e));
        ZT_CHECKF(rec.status == ZR_PICK_NONFINITE && rec.nonfinite_at == 20000 + b && rec.token == -1 && rec.pos == tp[1],
                  "status %d at %d token %d", rec.status, rec.nonfinite_at, rec.token);
        ZT_CHECK(tp2[0] == tp[0] && tp2[1] == tp[1] && !memcmp(before, after, d.state_bytes));
    }
    zt_pick_close(g, &dv);
    zr_sample_dev_free(&g->cuda, &d);
    free(v);
    free(before);
    free(after);
}

/* A crowded top-k step (tied logits: the pick narrows the set from the gather blocks' counts and
 * offers) that fails on a non-finite logit must not leave those counts behind: the next crowded
 * step is exact on the device (stale counts were a set short of the CPU's: ZR_PICK_HOST or
 * worse). */
ZT_TEST(a_crowded_step_after_a_non_finite_one_is_still_exact_on_the_device) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    ZrError e = {0};
    const int nv = 262144;
    const ZrSamplerParams p = zr_sampler_defaults();
    ZrSampleDev d;
    ZT_CHECKF(!zr_sample_dev_init(&g->cuda, &p, nv, NULL, 0, &d, &e), "%s", e.msg);
    ZrSampler *cpu = zr_sampler_create(&p, nv, &e);
    ZT_CHECKF(cpu, "%s", e.msg);
    float *v = malloc(sizeof(float) * nv), *h = malloc(sizeof(float) * nv);
    ZtPick dv = zt_pick_open(g, nv, nv, N_SLOTS);
    const int32_t tp[2] = {9, 41};
    ZT_CHECK(!zr_cuda_h2d(&g->cuda, dv.tok_pos, tp, sizeof tp, &e));
    uint64_t s = 23;
    for (int step = 0; step < 3; step++) {
        fill(v, nv, L_TIED, step, &s);
        if (step < 2) v[nv / 3 + step] = NAN; /* two failed steps: counts twice over if kept */
        ZT_CHECK(!zr_cuda_h2d(&g->cuda, dv.logits, v, sizeof(float) * nv, &e));
        ZT_CHECKF(!zr_sample_launch(&g->l, &g->k, &d, &dv.io, &e), "%s", e.msg);
        ZrPickRecord rec;
        int32_t tp2[2];
        zt_pick_read(g, &dv, tp[1], &rec, tp2);
        if (step < 2) {
            ZT_CHECKF(rec.status == ZR_PICK_NONFINITE && rec.nonfinite_at == nv / 3 + step, "step %d: status %d at %d", step,
                      rec.status, rec.nonfinite_at);
            continue;
        }
        memcpy(h, v, sizeof(float) * nv);
        const int32_t want = zr_sampler_sample(cpu, h);
        ZT_CHECKF(rec.status == ZR_PICK_OK && rec.token == want, "after two failed steps: status %d token %d, CPU token %d",
                  rec.status, rec.token, want);
    }
    zt_pick_close(g, &dv);
    zr_sample_dev_free(&g->cuda, &d);
    zr_sampler_free(cpu);
    free(v);
    free(h);
}

ZT_TEST(the_greedy_tail_writes_the_argmax_record_and_advances_tok_pos) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    ZrError e = {0};
    static const int sizes[] = {1, 5, 4099, 32000, 128256, 262144};
    const int max_n = 262144;
    float *v = malloc(sizeof(float) * max_n);
    ZtPick dv = zt_pick_open(g, max_n, max_n, 3);
    CUdeviceptr scratch = gpu_alloc(g, ZR_PICK_BYTES);
    ZT_CHECK(!zr_cuda_memset8(&g->cuda, scratch, 0, ZR_PICK_BYTES, &e));
    uint64_t s = 5;
    int32_t tp[2] = {0, 7};
    ZT_CHECK(!zr_cuda_h2d(&g->cuda, dv.tok_pos, tp, sizeof tp, &e));
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (int kind = 0; kind < 3; kind++) {
            const int n = sizes[si];
            fill(v, n, kind == 2 ? L_TIES : L_PEAKED, 0, &s);
            if (kind == 1) v[n / 3] = NAN; /* the record says so; tok_pos stays */
            ZT_CHECK(!zr_cuda_h2d(&g->cuda, dv.logits, v, sizeof(float) * n, &e));
            dv.io.n_cand = n;
            ZT_CHECKF(!zr_pick_greedy_launch(&g->l, &g->k, &dv.io, scratch, &e), "%s", e.msg);
            ZrPickRecord rec;
            int32_t tp2[2];
            zt_pick_read(g, &dv, tp[1], &rec, tp2);
            const int32_t want = zr_sampler_argmax(v, n);
            if (kind == 1) {
                ZT_CHECKF(rec.status == ZR_PICK_NONFINITE && rec.nonfinite_at == n / 3 && rec.token == -1 &&
                              tp2[0] == tp[0] && tp2[1] == tp[1],
                          "n %d: status %d at %d", n, rec.status, rec.nonfinite_at);
                continue;
            }
            ZT_CHECKF(rec.status == ZR_PICK_OK && rec.token == want && rec.pos == tp[1] && rec.nonfinite_at == -1 &&
                          tp2[0] == want && tp2[1] == tp[1] + 1 && rec.t_end != 0,
                      "n %d: token %d (status %d, pos %d), tok_pos %d %d; expected %d at %d", n, rec.token, rec.status,
                      rec.pos, tp2[0], tp2[1], want, tp[1]);
            tp[0] = tp2[0];
            tp[1] = tp2[1];
        }
    zt_pick_close(g, &dv);
    gpu_free(g, scratch);
    free(v);
}

/* ---- time per step ---- */

/* Steps timed by zt_gpu_step_us (test/support/gpu_steps.h). */
typedef struct TimeCtx {
    const ZrSampleDev *d;
    ZrPickIO io;
    CUdeviceptr scratch;
} TimeCtx;

static int step_chain(GpuEnv *g, void *ctx, ZrError *e) {
    TimeCtx *t = ctx;
    return zr_sample_launch(&g->l, &g->k, t->d, &t->io, e);
}

static int step_greedy(GpuEnv *g, void *ctx, ZrError *e) {
    TimeCtx *t = ctx;
    return zr_pick_greedy_launch(&g->l, &g->k, &t->io, t->scratch, e);
}

ZT_TEST(time_per_step_of_the_chain_by_setting_and_vocabulary) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    ZrError e = {0};
    static const int vocab[] = {32000, 128256, 152064, 262144};
    const size_t busy_bytes = (size_t)1 << 30;
    CUdeviceptr busy = gpu_alloc(g, busy_bytes), sink = gpu_alloc(g, 4096 * 4);
    ZT_CHECK(!zr_cuda_memset8(&g->cuda, busy, 1, busy_bytes, &e));
    fprintf(stderr, "  µs per step (median of 200, peaked logits; H2D of the logits not included)\n");
    fprintf(stderr, "  %-8s %10s", "vocab", "greedy");
    for (int s = 1; s < S_COUNT; s++) fprintf(stderr, " %18s", setting_name[s]);
    fprintf(stderr, "\n");
    for (size_t vi = 0; vi < sizeof vocab / sizeof vocab[0]; vi++) {
        const int nv = vocab[vi];
        float *v = malloc(sizeof(float) * nv);
        uint64_t rs = 99;
        fill(v, nv, L_PEAKED, 0, &rs);
        ZtPick dv = zt_pick_open(g, nv, nv, N_SLOTS);
        CUdeviceptr scratch = gpu_alloc(g, ZR_PICK_BYTES);
        ZT_CHECK(!zr_cuda_h2d(&g->cuda, dv.logits, v, sizeof(float) * nv, &e) &&
                 !zr_cuda_memset8(&g->cuda, scratch, 0, ZR_PICK_BYTES, &e) && !zr_cuda_memset8(&g->cuda, dv.tok_pos, 0, 8, &e));
        TimeCtx t = {.io = dv.io, .scratch = scratch};
        const float greedy_us = zt_gpu_step_us(g, step_greedy, &t, busy, busy_bytes, sink);
        ZT_CHECK(greedy_us >= 0.0f);
        fprintf(stderr, "  %-8d %10.2f", nv, (double)greedy_us);
        for (int s = 1; s < S_COUNT; s++) {
            const ZrSamplerParams p = setting(s);
            ZrSampleDev d;
            ZT_CHECKF(!zr_sample_dev_init(&g->cuda, &p, nv, NULL, 0, &d, &e), "%s", e.msg);
            t.d = &d;
            const float us = zt_gpu_step_us(g, step_chain, &t, busy, busy_bytes, sink);
            zr_sample_dev_free(&g->cuda, &d);
            ZT_CHECK(us >= 0.0f);
            fprintf(stderr, " %18.2f", (double)us);
        }
        fprintf(stderr, "\n");
        zt_pick_close(g, &dv);
        gpu_free(g, scratch);
        free(v);
    }
    gpu_free(g, busy);
    gpu_free(g, sink);
}

/* ---- time per stage ---- */

static int cmp_u64(const void *a, const void *b) {
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* µs of the median of v[0..n) (ns), or -1 when n is 0. */
static double median_us(uint64_t *v, int n) {
    if (n == 0) return -1.0;
    qsort(v, (size_t)n, sizeof v[0], cmp_u64);
    return (double)v[n / 2] / 1000.0;
}

enum { RING_SLOTS = 256, PERIOD_STEPS = 200, STAGE_STEPS = 31 };

/* Median µs between the t_end of consecutive steps of `fn`, PERIOD_STEPS queued back to back
 * behind a busy kernel (the host queues them all before the first runs): the time a step costs
 * the device, launch gaps included, events excluded. t->io.ring has RING_SLOTS records. */
static double device_period(GpuEnv *g, ZtStepFn fn, TimeCtx *t, CUdeviceptr busy, size_t busy_bytes, CUdeviceptr sink) {
    ZrError e = {0};
    ZrKernel probe;
    const size_t sizes[3] = {8, 8, 8};
    if (zr_cuda_kernel(&g->cuda, "read_bw_probe", sizes, 3, &probe, &e)) return -1.0;
    int32_t tp[2];
    gpu_download(g, tp, t->io.tok_pos, sizeof tp);
    uint64_t n_vec = busy_bytes / 16;
    for (int r = 0; r < 40; r++)
        ZR_LAUNCH(&g->l, &probe, ZR_DIM1((unsigned)(g->cuda.props.sm_count * 4)), ZR_DIM1(512), 0, &e, &busy, &n_vec, &sink);
    for (int i = 0; i < PERIOD_STEPS; i++)
        if (fn(g, t, &e)) return -1.0;
    static ZrPickRecord rec[RING_SLOTS];
    gpu_download(g, rec, t->io.ring, sizeof rec);
    static uint64_t d[PERIOD_STEPS];
    int n = 0;
    for (int i = 0; i + 1 < PERIOD_STEPS; i++) {
        const ZrPickRecord *a = &rec[(tp[1] + i) % RING_SLOTS], *b = &rec[(tp[1] + i + 1) % RING_SLOTS];
        if (a->pos == tp[1] + i && b->pos == tp[1] + i + 1 && b->t_end >= a->t_end) d[n++] = b->t_end - a->t_end;
    }
    return n == PERIOD_STEPS - 1 ? median_us(d, n) : -1.0; /* a step that did not advance: no period */
}

/* The columns of the stage table: from one stamp to another. */
static const struct {
    const char *name;
    int from, to;
} stage_col[] = {
    {"prep", ZR_SAMPLE_T_PREP, ZR_SAMPLE_T_PREP_END},
    {">count", ZR_SAMPLE_T_PREP_END, ZR_SAMPLE_T_COUNT},
    {"count", ZR_SAMPLE_T_COUNT, ZR_SAMPLE_T_COUNT_END},
    {">gather", ZR_SAMPLE_T_COUNT_END, ZR_SAMPLE_T_GATHER},
    {"gather>pick", ZR_SAMPLE_T_GATHER, ZR_SAMPLE_T_PICK},
    {"sort", ZR_SAMPLE_T_PICK, ZR_SAMPLE_T_PICK_SORTED},
    {"top-p,min-p", ZR_SAMPLE_T_PICK_SORTED, ZR_SAMPLE_T_PICK_CUT},
    {"draw,record", ZR_SAMPLE_T_PICK_CUT, ZR_SAMPLE_T_PICK_END},
    {"total", ZR_SAMPLE_T_PREP, ZR_SAMPLE_T_PICK_END},
};
#define N_STAGE_COLS ((int)(sizeof stage_col / sizeof stage_col[0]))

/* Prints the median µs of each stage column over STAGE_STEPS steps, each queued behind a short
 * busy kernel and run alone (stamps zeroed before it, so a stage the step skips shows "-"). */
static void print_stages(GpuEnv *g, TimeCtx *t, CUdeviceptr busy, CUdeviceptr sink) {
    ZrError e = {0};
    ZrKernel probe;
    const size_t sizes[3] = {8, 8, 8};
    ZT_CHECKF(!zr_cuda_kernel(&g->cuda, "read_bw_probe", sizes, 3, &probe, &e), "%s", e.msg);
    static uint64_t d[N_STAGE_COLS][STAGE_STEPS];
    int n[N_STAGE_COLS] = {0};
    const CUdeviceptr stamps = t->d->scratch + offsetof(ZrSampleScratch, t_stage);
    uint64_t n_vec = ((size_t)64 << 20) / 16; /* ~25 µs of reads: the step is queued meanwhile */
    for (int i = 0; i < STAGE_STEPS; i++) {
        ZT_CHECK(!zr_cuda_memset8(&g->cuda, stamps, 0, sizeof(uint64_t) * ZR_SAMPLE_T_COUNT_ALL, &e));
        ZR_LAUNCH(&g->l, &probe, ZR_DIM1((unsigned)(g->cuda.props.sm_count * 4)), ZR_DIM1(512), 0, &e, &busy, &n_vec, &sink);
        ZT_CHECKF(!zr_sample_launch(&g->l, &g->k, t->d, &t->io, &e), "%s", e.msg);
        uint64_t ts[ZR_SAMPLE_T_COUNT_ALL];
        gpu_download(g, ts, stamps, sizeof ts);
        for (int c = 0; c < N_STAGE_COLS; c++) {
            const uint64_t a = ts[stage_col[c].from], b = ts[stage_col[c].to];
            if (a && b && b >= a) d[c][n[c]++] = b - a;
        }
    }
    for (int c = 0; c < N_STAGE_COLS; c++) {
        const double us = median_us(d[c], n[c]);
        if (us < 0.0) fprintf(stderr, " %11s", "-");
        else fprintf(stderr, " %11.2f", us);
    }
}

ZT_TEST(time_of_each_stage_of_the_chain_and_of_steps_back_to_back) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    ZrError e = {0};
    static const int vocab[] = {32000, 128256, 152064, 262144};
    const size_t busy_bytes = (size_t)1 << 30;
    CUdeviceptr busy = gpu_alloc(g, busy_bytes), sink = gpu_alloc(g, 4096 * 4);
    ZT_CHECK(!zr_cuda_memset8(&g->cuda, busy, 1, busy_bytes, &e));
    const bool sync_each = g->l.sync_each;
    g->l.sync_each = false;
    const bool pdl = zr_launcher_set_pdl(&g->l, zr_launch_pdl_supported(&g->cuda));
    fprintf(stderr, "  µs per stage (median of %d steps, %%globaltimer stamps; PDL %s; peaked logits, but the last row's:\n"
                    "  tied, top-k's level crowded); 'step' = the period of %d steps queued back to back (records'\n"
                    "  t_end), the time a step costs the device\n",
            STAGE_STEPS, pdl ? "on" : "off", PERIOD_STEPS);
    for (size_t vi = 0; vi < sizeof vocab / sizeof vocab[0]; vi++) {
        const int nv = vocab[vi];
        float *v = malloc(sizeof(float) * nv);
        uint64_t rs = 99;
        fill(v, nv, L_PEAKED, 0, &rs);
        ZtPick dv = zt_pick_open(g, nv, nv, RING_SLOTS);
        CUdeviceptr scratch = gpu_alloc(g, ZR_PICK_BYTES);
        ZT_CHECK(!zr_cuda_h2d(&g->cuda, dv.logits, v, sizeof(float) * nv, &e) &&
                 !zr_cuda_memset8(&g->cuda, scratch, 0, ZR_PICK_BYTES, &e) && !zr_cuda_memset8(&g->cuda, dv.tok_pos, 0, 8, &e) &&
                 !zr_cuda_memset8(&g->cuda, dv.ring, 0, sizeof(ZrPickRecord) * RING_SLOTS, &e));
        TimeCtx t = {.io = dv.io, .scratch = scratch};
        fprintf(stderr, "  vocab %d\n  %-20s", nv, "setting");
        for (int c = 0; c < N_STAGE_COLS; c++) fprintf(stderr, " %11s", stage_col[c].name);
        fprintf(stderr, " %11s\n  %-20s", "step", "greedy (argmax)");
        for (int c = 0; c < N_STAGE_COLS; c++) fprintf(stderr, " %11s", "-");
        const double greedy_us = device_period(g, step_greedy, &t, busy, busy_bytes, sink);
        ZT_CHECK(greedy_us >= 0.0);
        fprintf(stderr, " %11.2f\n", greedy_us);
        for (int s = 1; s < S_COUNT; s++) {
            const ZrSamplerParams p = setting(s);
            ZrSampleDev d;
            ZT_CHECKF(!zr_sample_dev_init(&g->cuda, &p, nv, NULL, 0, &d, &e), "%s", e.msg);
            t.d = &d;
            fprintf(stderr, "  %-20s", setting_name[s]);
            print_stages(g, &t, busy, sink);
            const double us = device_period(g, step_chain, &t, busy, busy_bytes, sink);
            ZT_CHECK(us >= 0.0);
            fprintf(stderr, " %11.2f\n", us);
            zr_sample_dev_free(&g->cuda, &d);
        }
        /* the default chain where top-k's level is crowded (tied logits): the pick narrows it */
        fill(v, nv, L_TIED, 0, &rs);
        ZT_CHECK(!zr_cuda_h2d(&g->cuda, dv.logits, v, sizeof(float) * nv, &e));
        const ZrSamplerParams p = setting(S_DEFAULT);
        ZrSampleDev d;
        ZT_CHECKF(!zr_sample_dev_init(&g->cuda, &p, nv, NULL, 0, &d, &e), "%s", e.msg);
        t.d = &d;
        fprintf(stderr, "  %-20s", "default, tied logits");
        print_stages(g, &t, busy, sink);
        const double tied_us = device_period(g, step_chain, &t, busy, busy_bytes, sink);
        ZT_CHECK(tied_us >= 0.0);
        fprintf(stderr, " %11.2f\n", tied_us);
        zr_sample_dev_free(&g->cuda, &d);
        zt_pick_close(g, &dv);
        gpu_free(g, scratch);
        free(v);
    }
    zr_launcher_set_pdl(&g->l, false);
    g->l.sync_each = sync_each;
    gpu_free(g, busy);
    gpu_free(g, sink);
}

int main(void) { return gpu_main(); }
