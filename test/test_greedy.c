/* The greedy pick: the sampler's rule (zr_sampler_argmax, and when sampling is that rule), the
 * CPU backend's decode_run against the host loop (forward + zr_decode_pick_host) for every sampling, and zrun's greedy text through the
 * backend's pick (a lost context included: the pick path goes on in a new process too). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "model.h"
#include "sampler.h"
#include "zt.h"
#include "zt_decode.h"
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

/* ---- the CPU backend's decode loop ---- */

static bool open_model(ZrModel *m, const char *path) {
    ZrError err;
    if (zr_model_load(m, path, &err)) {
        fprintf(stderr, "  %s\n", err.msg);
        return false;
    }
    return true;
}

static ZrBackend *cpu(const ZrModel *m, int n_ctx) {
    ZrError err;
    ZrBackendOptions o = {.n_ctx = n_ctx, .n_threads = 2};
    ZrBackend *be = zr_cpu_backend_create(m, &o, &err);
    if (!be) fprintf(stderr, "  %s\n", err.msg);
    return be;
}

/* decode_run and the reference loop on two backends: the same tokens, steps and sampler state. */
static void loops_agree(const ZrModel *m, const ZtDecode *d, const char *what) {
    ZrBackend *a = cpu(m, d->n_prompt + d->n + 1), *b = cpu(m, d->n_prompt + d->n + 1);
    ZT_CHECK(a && b && b->decode_run);
    ZtDecode ref = *d;
    ref.reference = true;
    ZtDecoded want, got;
    ZrError err;
    ZT_CHECKF(zt_decode(a, m->hp.n_vocab, &ref, &want, &err) == 0, "%s: %s", what, err.msg);
    ZT_CHECKF(zt_decode(b, m->hp.n_vocab, d, &got, &err) == 0, "%s: %s", what, err.msg);
    ZT_CHECKF(got.n_tokens == want.n_tokens && got.steps == want.steps, "%s: %d tokens in %d steps, the host loop %d in %d",
              what, got.n_tokens, got.steps, want.n_tokens, want.steps);
    for (int i = 0; i < want.n_tokens; i++)
        ZT_CHECKF(got.tokens[i] == want.tokens[i], "%s: token %d: %d, the host loop %d", what, i, got.tokens[i],
                  want.tokens[i]);
    ZT_CHECKF(got.state_len == want.state_len && !memcmp(got.state, want.state, want.state_len),
              "%s: the sampler's state differs from the host loop's", what);
    zt_decoded_free(&want);
    zt_decoded_free(&got);
    a->destroy(a);
    b->destroy(b);
}

static const int32_t k_prompt[] = {1, 403, 407, 261, 378};

ZT_TEST(cpu_decode_run_picks_the_tokens_of_the_host_loop_for_every_setting) {
    const char *path = zt_shared_model("models/stories260K.gguf");
    if (!path) return;
    ZrModel m;
    ZT_CHECK(open_model(&m, path));
    for (uint64_t seed = 1; seed <= 3; seed++) {
        ZtSampling smp[ZT_N_SAMPLINGS];
        zt_samplings(smp, seed);
        for (int i = 0; i < ZT_N_SAMPLINGS; i++) {
            ZtDecode d = {.sp = &smp[i].sp, .n_cand = m.hp.n_vocab, .prompt = k_prompt, .n_prompt = 5, .n = 32};
            char what[64];
            snprintf(what, sizeof what, "%s, seed %llu", smp[i].name, (unsigned long long)seed);
            loops_agree(&m, &d, what);
        }
    }
    zr_model_free(&m);
}

/* Ids past n_cand (padding rows of the output matrix) and banned ids are never picked. */
ZT_TEST(cpu_decode_run_picks_among_the_first_n_cand_ids_and_never_a_banned_one) {
    const char *path = zt_shared_model("models/stories260K.gguf");
    if (!path) return;
    ZrModel m;
    ZT_CHECK(open_model(&m, path));
    ZtSampling smp[ZT_N_SAMPLINGS];
    zt_samplings(smp, 7);
    /* what greedy picks unbanned: banned, the picks must change */
    ZrBackend *be = cpu(&m, 64);
    ZT_CHECK(be);
    ZtDecode d = {.sp = &smp[0].sp, .n_cand = m.hp.n_vocab - 200, .prompt = k_prompt, .n_prompt = 5, .n = 24};
    ZtDecoded free_run;
    ZrError err;
    ZT_CHECKF(zt_decode(be, m.hp.n_vocab, &d, &free_run, &err) == 0, "%s", err.msg);
    const int32_t ban[2] = {free_run.tokens[0], free_run.tokens[3]};
    be->destroy(be);
    for (int i = 0; i < ZT_N_SAMPLINGS; i += 1) {
        d.sp = &smp[i].sp;
        d.ban = ban;
        d.n_ban = 2;
        loops_agree(&m, &d, smp[i].name);
        ZT_CHECK((be = cpu(&m, 64)) != NULL);
        ZtDecoded got;
        ZT_CHECKF(zt_decode(be, m.hp.n_vocab, &d, &got, &err) == 0, "%s", err.msg);
        for (int k = 0; k < got.n_tokens; k++)
            ZT_CHECKF(got.tokens[k] < d.n_cand && got.tokens[k] != ban[0] && got.tokens[k] != ban[1],
                      "%s: token %d is %d (candidates below %d, banned %d and %d)", smp[i].name, k, got.tokens[k],
                      d.n_cand, ban[0], ban[1]);
        zt_decoded_free(&got);
        be->destroy(be);
    }
    zt_decoded_free(&free_run);
    zr_model_free(&m);
}

/* When on_token says stop, the loop stops there: the steps counted fed exactly the tokens before
 * the refused one, so the next forward goes at the position after them. */
ZT_TEST(decode_run_stops_where_on_token_says_and_the_cache_holds_what_was_fed) {
    const char *path = zt_shared_model("models/stories260K.gguf");
    if (!path) return;
    ZrModel m;
    ZT_CHECK(open_model(&m, path));
    ZtSampling smp[ZT_N_SAMPLINGS];
    zt_samplings(smp, 3);
    ZrBackend *be = cpu(&m, 64);
    ZT_CHECK(be);
    ZtDecode d = {.sp = &smp[1].sp, .n_cand = m.hp.n_vocab, .prompt = k_prompt, .n_prompt = 5, .n = 40, .stop_after = 6};
    ZtDecoded got;
    ZrError err;
    ZT_CHECKF(zt_decode(be, m.hp.n_vocab, &d, &got, &err) == 0, "%s", err.msg);
    ZT_CHECKF(got.steps == 6 && got.n_tokens == 7, "%d steps, %d tokens (6 and 7 expected)", got.steps, got.n_tokens);
    float *logits = malloc(sizeof(float) * (size_t)m.hp.n_vocab);
    int32_t t = got.tokens[6];
    ZT_CHECK(logits);
    ZT_CHECKF(be->forward(be, &t, 1, 5 + 6, logits, false, &err) == 0, "the cache does not end at 11: %s", err.msg);
    loops_agree(&m, &d, "stop after 6");
    free(logits);
    zt_decoded_free(&got);
    be->destroy(be);
    zr_model_free(&m);
}

static bool go_on(void *ctx, int32_t token) {
    (void)ctx;
    (void)token;
    return true;
}

ZT_TEST(decode_run_refuses_a_pick_among_no_ids_or_too_many_or_no_steps) {
    const char *path = zt_shared_model("models/stories260K.gguf");
    if (!path) return;
    ZrModel m;
    ZT_CHECK(open_model(&m, path));
    ZrBackend *be = cpu(&m, 8);
    ZT_CHECK(be);
    ZrSamplerParams sp = zr_sampler_defaults();
    ZrError err;
    ZrSampler *smp = zr_sampler_create(&sp, m.hp.n_vocab, &err);
    ZT_CHECK(smp);
    ZrDecodeLoop L = {.sp = &sp, .host = smp, .n_cand = 0, .token = 1, .max_steps = 1, .on_token = go_on};
    ZT_CHECK(be->decode_run(be, &L, &err) == ZR_E_INTERNAL);
    ZrDecodeLoop bad[3];
    for (int i = 0; i < 3; i++) bad[i] = L;
    bad[0].on_token = NULL;
    bad[0].n_cand = m.hp.n_vocab;
    bad[1].n_cand = m.hp.n_vocab + 1;
    bad[2].n_cand = m.hp.n_vocab;
    bad[2].max_steps = 0;
    for (int i = 0; i < 3; i++) {
        ZT_CHECKF(be->decode_run(be, &bad[i], &err) == ZR_E_INTERNAL, "case %d", i);
        ZT_CHECKF(strstr(err.msg, "decode run"), "case %d: %s", i, err.msg);
    }
    zr_sampler_free(smp);
    be->destroy(be);
    zr_model_free(&m);
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

/* The same with sampling on (penalties and banned ids too): the state the first process hands on
 * is the sampler's after the tokens printed, wherever in decode_run's loop the loss fell. */
ZT_TEST(sampled_text_after_a_lost_context_is_the_text_without_the_loss) {
    const char *m = zt_shared_model("models/stories260K.gguf");
    if (!m) return;
#define SAMPLED(m) "-m", m, "-p", "One day", "-n", "60", "--seed", "9", "--repeat-penalty", "1.2", \
                   "--presence-penalty", "0.3", "--ignore-eos", "--device", "cpu"
    ZtProc e = run(NULL, (const char *const[]){SAMPLED(m), NULL});
    ZT_CHECKF(e.status == 0, "exit %d: %s", e.status, e.err);
    static const char *const faults[] = {"context-lost:0", "context-lost:1", "context-lost:30", "context-lost:58"};
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
        ZtProc f = run(faults[i], (const char *const[]){SAMPLED(m), NULL});
        ZT_CHECKF(f.status == 0, "%s: exit %d: %s", faults[i], f.status, f.err);
        ZT_CHECKF(!strcmp(e.out, f.out), "%s: the text differs:\n%s\n---\n%s", faults[i], e.out, f.out);
        ZT_CHECKF(strstr(f.err, "the run went on in a new process"), "%s: %s", faults[i], f.err);
        zt_proc_free(&f);
    }
    zt_proc_free(&e);
#undef SAMPLED
}

int main(void) { return zt_run(); }
