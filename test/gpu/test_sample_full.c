/* The draw over the whole vocabulary on the device (cu/sample_full.cu, src/cuda/sample_full.h):
 * with neither top-k nor top-p, zr_sample_launch must pick exactly zr_sampler_sample's token at
 * every vocabulary (no step left to the host), write the same generator into the record, leave
 * the same state bytes and advance tok_pos; over temperatures, min-p off and on, the penalties,
 * banned ids, padding rows and adversarial rows (ties, -inf, one huge logit, one candidate).
 * Last, its time per step (median of 200, cuEvents between steps queued behind a busy kernel). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/sample.h"
#include "cuda/sample_full.h"
#include "gpu_env.h"
#include "gpu_pick.h"
#include "gpu_steps.h"
#include "sampler.h"
#include "zt.h"

#define N_SLOTS 8

enum {
    L_PEAKED,  /* a few dozen ids well above a bulk in [-3, 3] */
    L_SPREAD,  /* uniform over [-10, 10) */
    L_TIES,    /* 4 distinct values (and a few hundred 3 above): long runs of equal weights */
    L_FLAT,    /* every logit equal */
    L_HUGE,    /* one logit of 1e4: every other weight underflows to 0 */
    L_HOLES,   /* every other run of 1000 ids at -1e30: whole chunks and subtrees of weight 0 */
    L_ONE,     /* one logit far above the rest (at -1e30): one weight, the others 0 */
    L_KINDS
};
static const char *const kind_name[] = {"peaked", "spread", "ties", "flat", "huge", "holes", "one"};

/* Weights of 0 come from logits so far below the maximum that zr_exp underflows to 0 (and below
 * any min-p floor): a -inf among the candidates is a non-finite logit, which the chain reports
 * (ZR_PICK_NONFINITE; test_sample.c checks it), as the backend fails such a step. */
#define HOLE (-1e30f)

static void fill(float *v, int n, int kind, int step, uint64_t *s) {
    for (int i = 0; i < n; i++) {
        const float a = gpu_rand(s), b = gpu_rand(s);
        switch (kind) {
        case L_PEAKED: v[i] = i % 4099 == 17 ? 14.0f + 2.0f * a : 1.5f * (a + b); break;
        case L_SPREAD: v[i] = 10.0f * a; break;
        case L_TIES: v[i] = floorf(4.0f * a) + (i % 200 == 3 ? 3.0f : 0.0f); break;
        case L_FLAT: v[i] = 0.5f; break;
        case L_HOLES: v[i] = (i / 1000) % 2 ? HOLE : 3.0f * a; break;
        case L_ONE: v[i] = HOLE; break;
        default: v[i] = a; break;
        }
    }
    if (kind == L_HUGE) v[(step * 7919 + 5) % n] = 1e4f;
    if (kind == L_ONE) v[(step * 7919 + 5) % n] = 2.0f;
}

/* The CPU's view of the device's logits: padding rows and banned ids at -inf (src/app/run.c). */
static void host_view(float *h, const float *v, int nv, int n_cand, const int32_t *ban, int n_ban) {
    memcpy(h, v, sizeof(float) * nv);
    for (int i = n_cand; i < nv; i++) h[i] = -INFINITY;
    for (int i = 0; i < n_ban; i++) h[ban[i]] = -INFINITY;
}

/* steps of p over nv ids (n_cand of them real) and rows of `kind`, each added to *checked once
 * equal to the CPU's; the first difference fails the test (and ends it). */
static void run_case(GpuEnv *g, const ZrSamplerParams *p, int nv, int n_cand, int n_ban, int kind, int steps,
                     int *checked) {
    ZrError e = {0};
    int32_t ban[4] = {1, nv / 2, nv - 1, 7};
    ZrSampler *cpu = zr_sampler_create(p, nv, &e);
    ZT_CHECKF(cpu, "%s", e.msg);
    ZrSampleDev d;
    ZT_CHECKF(!zr_sample_dev_init(&g->cuda, p, nv, ban, n_ban, &d, &e), "%s", e.msg);
    if (!cpu || !d.state) return;
    ZT_CHECK(zr_sample_full_mode(p, nv));
    for (int i = 0; i < 12; i++) zr_sampler_accept(cpu, (int32_t)((i * 4099 + 17) % nv)); /* a prompt */
    const size_t sb = zr_sampler_state_size(cpu);
    unsigned char *want = malloc(sb), *got = malloc(sb);
    zr_sampler_get_state(cpu, want);
    ZT_CHECKF(!zr_sample_dev_set_state(&g->cuda, &d, want, sb, &e), "%s", e.msg);
    float *v = malloc(sizeof(float) * nv), *h = malloc(sizeof(float) * nv);
    ZtPick dv = zt_pick_open(g, nv, n_cand, N_SLOTS);
    int32_t tp[2] = {5, 100};
    ZT_CHECK(!zr_cuda_h2d(&g->cuda, dv.tok_pos, tp, sizeof tp, &e));
    uint64_t rs = p->seed * 0x9e3779b97f4a7c15ull + (uint64_t)kind;
    for (int step = 0; step < steps; step++) {
        fill(v, n_cand, kind, step, &rs);
        for (int i = n_cand; i < nv; i++) v[i] = NAN; /* padding rows: never read */
        ZT_CHECK(!zr_cuda_h2d(&g->cuda, dv.logits, v, sizeof(float) * nv, &e));
        ZT_CHECKF(!zr_sample_launch(&g->l, &g->k, &d, &dv.io, &e), "%s", e.msg);
        ZrPickRecord rec;
        int32_t tp2[2];
        zt_pick_read(g, &dv, tp[1], &rec, tp2);
        host_view(h, v, nv, n_cand, ban, n_ban);
        const int32_t tok = zr_sampler_sample(cpu, h);
        zr_sampler_accept(cpu, tok);
        zr_sampler_get_state(cpu, want);
        ZT_CHECK(!zr_sample_dev_get_state(&g->cuda, &d, got, sb, &e));
        const bool same = rec.status == ZR_PICK_OK && rec.token == tok && rec.pos == tp[1] && rec.nonfinite_at == -1 &&
                          tp2[0] == tok && tp2[1] == tp[1] + 1 && !memcmp(rec.rng, want, 32) && !memcmp(got, want, sb);
        ZT_CHECKF(same,
                  "vocab %d of %d, temp %g, min-p %g, penalty %g, %s, seed %llu, step %d: device status %d token %d "
                  "(tok_pos %d %d, pos %d), CPU token %d; generator %s, state %s",
                  n_cand, nv, (double)p->temp, (double)p->min_p, (double)p->repeat_penalty, kind_name[kind],
                  (unsigned long long)p->seed, step, rec.status, rec.token, tp2[0], tp2[1], rec.pos, tok,
                  memcmp(rec.rng, want, 32) ? "differs" : "equal", memcmp(got, want, sb) ? "differs" : "equal");
        tp[0] = tp2[0];
        tp[1] = tp2[1];
        (*checked)++;
    }
    zt_pick_close(g, &dv);
    zr_sample_dev_free(&g->cuda, &d);
    zr_sampler_free(cpu);
    free(v);
    free(h);
    free(want);
    free(got);
}

static ZrSamplerParams full(float temp, float min_p, bool penalties, uint64_t seed) {
    ZrSamplerParams p = zr_sampler_defaults();
    p.top_k = 0;
    p.top_p = 1.0f;
    p.temp = temp;
    p.min_p = min_p;
    p.seed = seed;
    if (penalties) {
        p.repeat_penalty = 1.3f;
        p.presence_penalty = 0.5f;
        p.frequency_penalty = 0.3f;
    }
    return p;
}

ZT_TEST(the_draw_over_every_id_picks_the_cpu_samplers_tokens_at_every_vocabulary) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    static const int vocab[][2] = {{32000, 32000}, {128256, 128256}, {128256, 128000}, {152064, 151646}, {262144, 262144}};
    static const float temps[] = {0.8f, 1.5f, 0.3f};
    int sequences = 0, steps = 0;
    for (size_t vi = 0; vi < sizeof vocab / sizeof vocab[0]; vi++)
        for (int kind = 0; kind < L_KINDS; kind++)
            for (int ti = 0; ti < 3; ti++)
                for (int mp = 0; mp < 2; mp++) {
                    const int seeds = kind == L_PEAKED || kind == L_SPREAD ? 3 : 1;
                    for (int seed = 1; seed <= seeds; seed++) {
                        const ZrSamplerParams p = full(temps[ti], mp ? 0.05f : 0.0f, (seed + ti) % 2 == 0, (uint64_t)seed);
                        run_case(g, &p, vocab[vi][0], vocab[vi][1], vi % 2 ? 4 : 0, kind, 8, &steps);
                        sequences++;
                    }
                }
    fprintf(stderr, "  %d sequences, %d steps equal to the CPU's\n", sequences, steps);
}

ZT_TEST(the_draw_over_every_id_is_exact_at_small_and_odd_vocabularies) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    static const int vocab[] = {1, 2, 31, 33, 1000, 2048, 2049, 4000, 65537};
    int steps = 0;
    for (size_t vi = 0; vi < sizeof vocab / sizeof vocab[0]; vi++)
        for (int kind = 0; kind < L_KINDS; kind++) {
            const int nv = vocab[vi];
            const ZrSamplerParams p = full(1.0f, kind % 2 ? 0.05f : 0.0f, kind % 3 == 0, 7);
            run_case(g, &p, nv, nv, nv >= 8 && vi % 2 ? 4 : 0, kind, 6, &steps);
        }
    fprintf(stderr, "  %d steps equal to the CPU's\n", steps);
}

/* ---- time per step ---- */

typedef struct FullStep {
    const ZrSampleDev *d;
    const ZrPickIO *io;
} FullStep;

/* One draw over every id: the step zt_gpu_step_us times (test/support/gpu_steps.h). */
static int step_full(GpuEnv *g, void *ctx, ZrError *e) {
    const FullStep *f = ctx;
    return zr_sample_launch(&g->l, &g->k, f->d, f->io, e);
}

ZT_TEST(time_per_step_of_the_draw_over_every_id) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    ZrError e = {0};
    static const int vocab[] = {32000, 128256, 152064, 262144};
    const size_t busy_bytes = (size_t)1 << 30;
    CUdeviceptr busy = gpu_alloc(g, busy_bytes), sink = gpu_alloc(g, 4096 * 4);
    ZT_CHECK(!zr_cuda_memset8(&g->cuda, busy, 1, busy_bytes, &e));
    fprintf(stderr, "  µs per step, prep + draw (median of 200, peaked logits; target < 15 at 152064)\n");
    fprintf(stderr, "  %-8s %12s %12s %12s\n", "vocab", "min-p 0", "min-p 0.05", "penalties");
    for (size_t vi = 0; vi < sizeof vocab / sizeof vocab[0]; vi++) {
        const int nv = vocab[vi];
        float *v = malloc(sizeof(float) * nv);
        uint64_t rs = 99;
        fill(v, nv, L_PEAKED, 0, &rs);
        ZtPick dv = zt_pick_open(g, nv, nv, N_SLOTS);
        ZT_CHECK(!zr_cuda_h2d(&g->cuda, dv.logits, v, sizeof(float) * nv, &e) && !zr_cuda_memset8(&g->cuda, dv.tok_pos, 0, 8, &e));
        fprintf(stderr, "  %-8d", nv);
        for (int s = 0; s < 3; s++) {
            const ZrSamplerParams p = full(0.8f, s == 1 ? 0.05f : 0.0f, s == 2, 1);
            ZrSampleDev d;
            ZT_CHECKF(!zr_sample_dev_init(&g->cuda, &p, nv, NULL, 0, &d, &e), "%s", e.msg);
            FullStep f = {&d, &dv.io};
            const float us = zt_gpu_step_us(g, step_full, &f, busy, busy_bytes, sink);
            zr_sample_dev_free(&g->cuda, &d);
            ZT_CHECK(us >= 0.0f);
            fprintf(stderr, " %12.2f", (double)us);
        }
        fprintf(stderr, "\n");
        zt_pick_close(g, &dv);
        free(v);
    }
    gpu_free(g, busy);
    gpu_free(g, sink);
}

int main(void) { return gpu_main(); }
