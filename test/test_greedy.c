/* The greedy pick: the sampler's rule (zr_sampler_argmax, and when sampling is that rule), the
 * CPU backend's decode_greedy against forward + the rule, and zrun's greedy text through the
 * backend's pick (a lost context included: the pick path goes on in a new process too). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "model.h"
#include "sampler.h"
#include "zt.h"
#include "zt_proc.h"

/* ---- the rule ---- */

ZT_TEST(argmax_takes_the_first_of_equal_maxima) {
    const float v[6] = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f, 3.0f};
    ZT_CHECK(zr_sampler_argmax(v, 6) == 1);
}

ZT_TEST(argmax_finds_the_maximum_at_the_first_and_at_the_last_index) {
    const float a[5] = {9.0f, 1.0f, 2.0f, 3.0f, 4.0f}, b[5] = {-5.0f, -4.0f, -3.0f, -2.0f, -1.0f};
    ZT_CHECK(zr_sampler_argmax(a, 5) == 0);
    ZT_CHECK(zr_sampler_argmax(b, 5) == 4);
}

ZT_TEST(argmax_counts_nan_as_minus_infinity) {
    const float a[4] = {NAN, 1.0f, NAN, 2.0f}, b[3] = {NAN, -INFINITY, -1e30f};
    ZT_CHECK(zr_sampler_argmax(a, 4) == 3);
    ZT_CHECK(zr_sampler_argmax(b, 3) == 2);
}

ZT_TEST(argmax_of_nothing_possible_is_zero) {
    const float a[4] = {-INFINITY, NAN, -INFINITY, NAN}, b[3] = {NAN, NAN, NAN};
    ZT_CHECK(zr_sampler_argmax(a, 4) == 0);
    ZT_CHECK(zr_sampler_argmax(b, 3) == 0);
}

ZT_TEST(argmax_ties_minus_zero_with_plus_zero) {
    const float a[3] = {-1.0f, -0.0f, 0.0f}, b[3] = {-1.0f, 0.0f, -0.0f};
    ZT_CHECK(zr_sampler_argmax(a, 3) == 1);
    ZT_CHECK(zr_sampler_argmax(b, 3) == 1);
}

ZT_TEST(sampling_is_greedy_at_temperature_zero_without_a_penalty_in_effect) {
    ZrSamplerParams p = zr_sampler_defaults();
    ZT_CHECK(!zr_sampler_is_greedy(&p)); /* 0.8 */
    p.temp = 0.0f;
    ZT_CHECK(zr_sampler_is_greedy(&p));
    p.repeat_penalty = 1.1f;
    ZT_CHECK(!zr_sampler_is_greedy(&p));
    p.repeat_last_n = 0; /* a penalty over no tokens */
    ZT_CHECK(zr_sampler_is_greedy(&p));
}

/* Whenever the sampler says it is greedy, sampling is the argmax of the logits as they come. */
ZT_TEST(a_greedy_sampler_samples_the_argmax) {
    ZrSamplerParams p = zr_sampler_defaults();
    p.temp = 0.0f;
    p.top_k = 3;
    ZrError err;
    enum { N = 1000 };
    ZrSampler *s = zr_sampler_create(&p, N, &err);
    ZT_CHECK(s);
    static float v[N], w[N];
    uint64_t x = 88172645463325252ull;
    for (int r = 0; r < 50; r++) {
        for (int i = 0; i < N; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            const int q = (int)(x % 64); /* few distinct values: ties everywhere */
            v[i] = q == 0 ? NAN : q == 1 ? -INFINITY : (float)(q % 8);
        }
        memcpy(w, v, sizeof v);
        const int32_t want = zr_sampler_argmax(v, N);
        const int32_t got = zr_sampler_sample(s, w);
        ZT_CHECKF(got == want, "round %d: sampled %d, argmax %d", r, got, want);
        zr_sampler_accept(s, got);
    }
    zr_sampler_free(s);
}

/* ---- the CPU backend ---- */

typedef struct Two {
    ZrModel m;
    ZrBackend *a, *b; /* a: forward + the rule; b: decode_greedy */
} Two;

static bool open_two(Two *t, const char *path, int n_ctx) {
    ZrError err;
    if (zr_model_load(&t->m, path, &err)) {
        fprintf(stderr, "  %s\n", err.msg);
        return false;
    }
    ZrBackendOptions o = {.n_ctx = n_ctx, .n_threads = 2};
    t->a = zr_cpu_backend_create(&t->m, &o, &err);
    t->b = t->a ? zr_cpu_backend_create(&t->m, &o, &err) : NULL;
    if (!t->b) {
        fprintf(stderr, "  %s\n", err.msg);
        if (t->a) t->a->destroy(t->a);
        zr_model_free(&t->m);
        return false;
    }
    return true;
}

static void close_two(Two *t) {
    t->a->destroy(t->a);
    t->b->destroy(t->b);
    zr_model_free(&t->m);
}

/* From `first`, n_steps greedy steps on both backends over ids [0, n_cand); every pick equals
 * the rule on a's logits, and b's logits (asked for every third step) are a's bit for bit. */
static void greedy_steps_agree(const char *path, int n_cand_less, int n_steps) {
    Two t;
    ZT_CHECK(open_two(&t, path, n_steps + 1));
    const int V = t.m.hp.n_vocab, n_cand = V - n_cand_less;
    float *la = malloc(sizeof(float) * V), *lb = malloc(sizeof(float) * V);
    ZT_CHECK(la && lb && t.b->decode_greedy);
    ZrError err;
    int32_t ta = 1, tb = 1;
    for (int s = 0; s < n_steps; s++) {
        ZT_CHECKF(t.a->forward(t.a, &ta, 1, s, la, false, &err) == 0, "%s", err.msg);
        ZrGreedy g = {-7, -7};
        const bool want_logits = s % 3 == 0;
        ZT_CHECKF(t.b->decode_greedy(t.b, tb, s, n_cand, want_logits ? lb : NULL, &g, &err) == 0, "%s", err.msg);
        ta = zr_sampler_argmax(la, n_cand);
        ZT_CHECKF(g.token == ta && g.nonfinite_at == -1, "step %d: picked %d (non-finite at %d), the rule on the logits %d", s,
                  g.token, g.nonfinite_at, ta);
        if (want_logits) ZT_CHECKF(!memcmp(la, lb, sizeof(float) * V), "step %d: the logits differ", s);
        tb = g.token;
    }
    free(la);
    free(lb);
    close_two(&t);
}

ZT_TEST(cpu_decode_greedy_picks_what_the_rule_picks_from_the_logits) {
    const char *m = zt_shared_model("models/stories260K.gguf");
    if (!m) return;
    greedy_steps_agree(m, 0, 24);
}

/* Ids past n_cand (padding rows of the output matrix) are never picked. */
ZT_TEST(cpu_decode_greedy_picks_among_the_first_n_cand_ids_only) {
    const char *m = zt_shared_model("models/stories260K.gguf");
    if (!m) return;
    greedy_steps_agree(m, 200, 24);
}

ZT_TEST(cpu_decode_greedy_refuses_a_pick_among_no_ids_or_too_many) {
    const char *m = zt_shared_model("models/stories260K.gguf");
    if (!m) return;
    Two t;
    ZT_CHECK(open_two(&t, m, 8));
    ZrError err;
    ZrGreedy g;
    ZT_CHECK(t.b->decode_greedy(t.b, 1, 0, 0, NULL, &g, &err) == ZR_E_INTERNAL);
    ZT_CHECK(t.b->decode_greedy(t.b, 1, 0, t.m.hp.n_vocab + 1, NULL, &g, &err) == ZR_E_INTERNAL);
    ZT_CHECKF(t.b->decode_greedy(t.b, 1, 0, t.m.hp.n_vocab, NULL, &g, &err) == 0, "%s", err.msg);
    close_two(&t);
}

/* ---- zrun ---- */

#define GREEDY(m) "-m", m, "-p", "One day", "-n", "40", "--temp", "0", "--device", "cpu"

static ZtProc run(const char *fault, const char *const *args) {
    ZtProcOpts o = {.fault = fault};
    return zt_proc_zrun(NULL, args, &o);
}

/* --temp 0 picks through the backend; top-k 1 at temperature 0.5 is not greedy to
 * zr_sampler_is_greedy, so it picks on the host through the whole sampling chain: the same
 * argmax, so the same text. */
ZT_TEST(greedy_text_through_the_backend_pick_equals_the_host_pick) {
    const char *m = zt_shared_model("models/stories260K.gguf");
    if (!m) return;
    ZtProc g = run(NULL, (const char *const[]){GREEDY(m), NULL});
    ZtProc h = run(NULL, (const char *const[]){"-m", m, "-p", "One day", "-n", "40", "--temp", "0.5", "--top-k",
                                               "1", "--device", "cpu", NULL});
    ZT_CHECKF(g.status == 0 && h.status == 0, "exit %d / %d: %s %s", g.status, h.status, g.err, h.err);
    ZT_CHECKF(strlen(g.out) > 40 && !strcmp(g.out, h.out), "the texts differ:\n%s\n---\n%s", g.out, h.out);
    zt_proc_free(&g);
    zt_proc_free(&h);
}

ZT_TEST(greedy_text_after_a_lost_context_is_the_text_without_the_loss) {
    const char *m = zt_shared_model("models/stories260K.gguf");
    if (!m) return;
    ZtProc e = run(NULL, (const char *const[]){GREEDY(m), NULL});
    ZT_CHECKF(e.status == 0, "exit %d: %s", e.status, e.err);
    static const char *const faults[] = {"context-lost:0", "context-lost:5", "context-lost:38"};
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
        ZtProc f = run(faults[i], (const char *const[]){GREEDY(m), NULL});
        ZT_CHECKF(f.status == 0, "%s: exit %d: %s", faults[i], f.status, f.err);
        ZT_CHECKF(!strcmp(e.out, f.out), "%s: the text differs:\n%s\n---\n%s", faults[i], e.out, f.out);
        ZT_CHECKF(strstr(f.err, "the run went on in a new process"), "%s: %s", faults[i], f.err);
        zt_proc_free(&f);
    }
    zt_proc_free(&e);
}

int main(void) { return zt_run(); }
