/* The CUDA backend's decode loop (ZrBackend.decode_run, issue 12): the free-running loop with
 * the tail on the device picks exactly the tokens of the host loop (forward + the host sampler
 * on the same GPU's logits), eager and through the graph, for 8 seeds x 5 settings x 128 tokens
 * on stories260K and every fixture; a stop discards the steps computed past it (the next loop
 * goes on as if it had never run ahead); graph launches of 1 to 8 steps pick the same tokens and
 * stop exactly, a full context included, and so do steps handed to the host amid them; and zrun's
 * text with every ZRUN_FAULT equals the text of a plain eager run, greedy and sampled. */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "gpu_env.h"
#include "model.h"
#include "zt.h"
#include "zt_decode.h"
#include "zt_fixtures.h"
#include "zt_proc.h"

#define N_TOKENS 128
#define N_SEEDS 8

typedef struct Three {
    ZrModel m;
    ZrBackend *ref, *eager, *graph; /* ref: forward + the host sampler; the others: decode_run */
} Three;

static bool open_three(Three *t, const char *path) {
    ZrError err = {0};
    memset(t, 0, sizeof *t);
    if (zr_model_load(&t->m, path, &err)) {
        fprintf(stderr, "  %s: %s\n", path, err.msg);
        return false;
    }
    ZrBackendOptions oe = {.n_ctx = 256, .quiet = true}, og = {.n_ctx = 256, .graph = true, .verify_graph = 2, .quiet = true};
    t->ref = zr_cuda_backend_create(&t->m, &oe, &err);
    t->eager = t->ref ? zr_cuda_backend_create(&t->m, &oe, &err) : NULL;
    t->graph = t->eager ? zr_cuda_backend_create(&t->m, &og, &err) : NULL;
    if (!t->graph) fprintf(stderr, "  %s: %s\n", path, err.msg);
    return t->graph != NULL;
}

static void close_three(Three *t) {
    if (t->ref) t->ref->destroy(t->ref);
    if (t->eager) t->eager->destroy(t->eager);
    if (t->graph) t->graph->destroy(t->graph);
    zr_model_free(&t->m);
}

/* d on be (cache emptied first; n_vocab the model's) against want: the same tokens and sampler state. */
static bool same_as(ZrBackend *be, int n_vocab, const ZtDecode *d, const ZtDecoded *want, const char *what,
                    uint64_t *host_steps) {
    ZtDecoded got;
    ZrError err = {0};
    be->truncate(be, 0);
    if (zt_decode(be, n_vocab, d, &got, &err)) {
        fprintf(stderr, "  %s: %s\n", what, err.msg);
        zt_decoded_free(&got);
        return false;
    }
    int first = -1;
    for (int i = 0; i < want->n_tokens && first < 0; i++)
        if (i >= got.n_tokens || got.tokens[i] != want->tokens[i]) first = i;
    const bool state = got.state_len == want->state_len && !memcmp(got.state, want->state, want->state_len);
    /* which part: the generator (the first 32 bytes: sampler.c) or the counts and history */
    const bool rng = got.state_len >= 32 && want->state_len >= 32 && !memcmp(got.state, want->state, 32);
    if (first >= 0 || got.n_tokens != want->n_tokens || !state)
        fprintf(stderr, "  %s: %d tokens (host loop %d), first difference at %d (%d vs %d), sampler state %s\n", what,
                got.n_tokens, want->n_tokens, first, first >= 0 && first < got.n_tokens ? got.tokens[first] : -1,
                first >= 0 ? want->tokens[first] : -1,
                state ? "equal" : rng ? "DIFFERS (history)" : "DIFFERS (generator)");
    *host_steps += got.host_steps;
    const bool ok = first < 0 && got.n_tokens == want->n_tokens && state;
    zt_decoded_free(&got);
    return ok;
}

/* 8 seeds x 5 settings x 128 tokens on one model: eager and graph decode_run == the host loop. */
static int model_agrees(const char *name, const char *path, const int32_t *prompt, int n_prompt) {
    Three t;
    if (!open_three(&t, path)) {
        close_three(&t);
        return 1;
    }
    int bad = 0, runs = 0;
    uint64_t host_steps = 0;
    for (uint64_t seed = 1; seed <= N_SEEDS; seed++) {
        ZtSampling smp[ZT_N_SAMPLINGS];
        zt_samplings(smp, seed);
        for (int i = 0; i < ZT_N_SAMPLINGS; i++) {
            ZtDecode d = {.sp = &smp[i].sp, .n_cand = t.m.hp.n_vocab, .prompt = prompt, .n_prompt = n_prompt,
                          .n = N_TOKENS, .reference = true};
            ZtDecoded want;
            ZrError err = {0};
            t.ref->truncate(t.ref, 0);
            if (zt_decode(t.ref, t.m.hp.n_vocab, &d, &want, &err)) {
                fprintf(stderr, "  %s %s seed %llu: host loop: %s\n", name, smp[i].name, (unsigned long long)seed, err.msg);
                bad++;
                continue;
            }
            d.reference = false;
            char what[160];
            snprintf(what, sizeof what, "%s %s seed %llu eager", name, smp[i].name, (unsigned long long)seed);
            bad += !same_as(t.eager, t.m.hp.n_vocab, &d, &want, what, &host_steps);
            snprintf(what, sizeof what, "%s %s seed %llu graph", name, smp[i].name, (unsigned long long)seed);
            bad += !same_as(t.graph, t.m.hp.n_vocab, &d, &want, what, &host_steps);
            runs += 2;
            zt_decoded_free(&want);
        }
    }
    ZrBackendStats st;
    t.graph->stats(t.graph, &st);
    fprintf(stderr, "  %-22s %s: %d of %d runs == the host loop (%d tokens each); graph %s, %llu kernels/token, "
                    "%llu steps sampled on the host\n",
            name, bad ? "FAIL" : "PASS", runs - bad, runs, N_TOKENS, st.graph_active ? "on" : "OFF",
            (unsigned long long)st.kernels_per_token, (unsigned long long)host_steps);
    if (!st.graph_active) bad++;
    close_three(&t);
    return bad;
}

static const int32_t k_prompt[] = {1, 403, 407, 261, 378, 300, 280, 301};

/* d's tokens by the host loop on ref (forward + the host sampler; the cache emptied first) into
 * want; false (said on stderr) when it fails. */
static bool host_loop(ZrBackend *ref, int n_vocab, const ZtDecode *d, ZtDecoded *want) {
    ZtDecode r = *d;
    ZrError err = {0};
    r.reference = true;
    ref->truncate(ref, 0);
    if (zt_decode(ref, n_vocab, &r, want, &err) == 0) return true;
    fprintf(stderr, "    host loop: %s\n", err.msg);
    return false;
}

ZT_TEST(decode_run_picks_the_host_loops_tokens_on_stories260K_eager_and_graph) {
    if (!gpu_env()) return;
    const char *m = zt_shared_model("models/stories260K.gguf");
    if (!m) return;
    ZT_CHECK(model_agrees("stories260K", m, k_prompt, 8) == 0);
}

ZT_TEST(decode_run_picks_the_host_loops_tokens_on_every_fixture_eager_and_graph) {
    if (!gpu_env()) return;
    static ZtFixture fx[ZT_MAX_FIXTURES];
    const int nf = zt_fixtures(fx, ZT_MAX_FIXTURES);
    if (!nf) return;
    int failed = 0;
    for (int i = 0; i < nf; i++) {
        int n = 0;
        char tpath[4200];
        snprintf(tpath, sizeof tpath, "%s.tokens", fx[i].base);
        int32_t *ids = zt_read_ids(tpath, &n);
        if (!ids || n < 8) {
            fprintf(stderr, "  %s: no prompt ids in %s\n", fx[i].name, tpath);
            failed++;
            free(ids);
            continue;
        }
        failed += model_agrees(fx[i].name, fx[i].gguf, ids, 8) != 0;
        free(ids);
    }
    ZT_CHECKF(failed == 0, "%d of %d fixtures differ", failed, nf);
}

/* A loop stopped at its 7th token after running ahead, then a second loop from there: together
 * they pick what one uninterrupted host loop picks (the steps run past the stop left no trace:
 * neither in the cache nor in the sampler state), graph and eager. */
ZT_TEST(a_stopped_loop_leaves_no_trace_of_the_steps_it_ran_ahead) {
    if (!gpu_env()) return;
    const char *path = zt_shared_model("models/stories260K.gguf");
    if (!path) return;
    Three t;
    ZT_CHECK(open_three(&t, path));
    const int V = t.m.hp.n_vocab;
    for (int s = 0; s < ZT_N_SAMPLINGS; s++) {
        ZtSampling smp[ZT_N_SAMPLINGS];
        zt_samplings(smp, 11);
        ZtDecode d = {.sp = &smp[s].sp, .n_cand = V, .prompt = k_prompt, .n_prompt = 8, .n = 48, .reference = true};
        ZtDecoded want;
        ZrError err = {0};
        ZT_CHECKF(zt_decode(t.ref, V, &d, &want, &err) == 0, "%s", err.msg);
        t.ref->truncate(t.ref, 0);
        ZrBackend *bes[2] = {t.eager, t.graph};
        for (int b = 0; b < 2; b++) {
            ZrBackend *be = bes[b];
            be->truncate(be, 0);
            /* the first loop: tokens 0..7, the 7th refused (picked, not fed) */
            ZtDecode d1 = d;
            d1.reference = false;
            d1.stop_after = 7;
            ZtDecoded got;
            ZT_CHECKF(zt_decode(be, V, &d1, &got, &err) == 0, "%s", err.msg);
            ZT_CHECKF(got.n_tokens == 8 && got.steps == 7, "%d tokens in %d steps", got.n_tokens, got.steps);
            /* the second loop goes on with a sampler in the host loop's state after those 8 picks */
            ZrSampler *smp2 = zr_sampler_create(d.sp, V, &err);
            ZT_CHECK(smp2 && zr_sampler_set_state(smp2, got.state, got.state_len, &err) == 0);
            int32_t more[40], *dst = more;
            int n_more = 0;
            ZrDecodeLoop L = {.sp = d.sp, .host = smp2, .n_cand = V, .token = got.tokens[7], .pos = 8 + 7,
                              .max_steps = 40, .on_token = zt_collect_into, .ctx = &dst};
            ZT_CHECKF(be->decode_run(be, &L, &err) == 0, "%s", err.msg);
            n_more = (int)(dst - more);
            int first = -1;
            for (int i = 0; i < 8 && first < 0; i++)
                if (got.tokens[i] != want.tokens[i]) first = i;
            for (int i = 0; i < n_more && first < 0; i++)
                if (more[i] != want.tokens[8 + i]) first = 8 + i;
            fprintf(stderr, "  stop and go on, %s %s: %s\n", smp[s].name, b ? "graph" : "eager",
                    first < 0 && n_more == 40 ? "PASS" : "FAIL");
            ZT_CHECKF(first < 0 && n_more == 40, "%s %s: first difference at token %d (%d more tokens)", smp[s].name,
                      b ? "graph" : "eager", first, n_more);
            zr_sampler_free(smp2);
            zt_decoded_free(&got);
        }
        zt_decoded_free(&want);
    }
    close_three(&t);
}

/* The graph launches of several steps (ZrBackendOptions.graph_steps 1, 2, 3, 5, 8): the tokens
 * and sampler state of the host loop, for every setting and two seeds, in a context the decode
 * fills to its last position (36 steps at positions 8..43 of 44: the launches that would run past
 * it go one step each); a loop stopped after 1 and 6 tokens picks the host loop's first tokens
 * and leaves the backend decoding the host loop's text again. */
ZT_TEST(graph_launches_of_several_steps_pick_the_host_loops_tokens_and_stop_exactly) {
    if (!gpu_env()) return;
    const char *path = zt_shared_model("models/stories260K.gguf");
    if (!path) return;
    enum { N = 37, CTX = 8 + N - 1 };
    static const int steps[] = {1, 2, 3, 5, 8};
    ZrModel m;
    ZrError err = {0};
    ZT_CHECKF(zr_model_load(&m, path, &err) == 0, "%s", err.msg);
    const int V = m.hp.n_vocab;
    ZrBackendOptions oe = {.n_ctx = CTX, .quiet = true};
    ZrBackend *ref = zr_cuda_backend_create(&m, &oe, &err);
    ZT_CHECKF(ref != NULL, "%s", err.msg);
    int failed = 0;
    for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
        ZrBackendOptions og = {.n_ctx = CTX, .graph = true, .verify_graph = 1, .graph_steps = steps[k], .quiet = true};
        ZrBackend *g = zr_cuda_backend_create(&m, &og, &err);
        ZT_CHECKF(g != NULL, "graph_steps %d: %s", steps[k], err.msg);
        int bad = 0, runs = 0;
        for (uint64_t seed = 1; seed <= 2; seed++) {
            ZtSampling smp[ZT_N_SAMPLINGS];
            zt_samplings(smp, seed);
            for (int i = 0; i < ZT_N_SAMPLINGS; i++) {
                ZtDecode d = {.sp = &smp[i].sp, .n_cand = V, .prompt = k_prompt, .n_prompt = 8, .n = N};
                ZtDecoded want;
                if (!host_loop(ref, V, &d, &want)) {
                    bad++;
                    continue;
                }
                uint64_t host_steps = 0;
                char what[160];
                for (int stop = 1; stop <= 6; stop += 5) {
                    ZtDecode ds = d;
                    ds.stop_after = stop;
                    ZtDecoded got;
                    g->truncate(g, 0);
                    const bool ran = zt_decode(g, V, &ds, &got, &err) == 0;
                    bool ok = ran && got.n_tokens == stop + 1 && got.steps == stop;
                    for (int j = 0; ok && j < got.n_tokens; j++) ok = got.tokens[j] == want.tokens[j];
                    if (!ok)
                        fprintf(stderr, "    %d steps a launch, %s seed %llu, stopped at %d: %s (%d tokens, %d steps)\n",
                                steps[k], smp[i].name, (unsigned long long)seed, stop, ran ? "differs" : err.msg,
                                ran ? got.n_tokens : 0, ran ? got.steps : 0);
                    bad += !ok;
                    runs++;
                    zt_decoded_free(&got);
                }
                snprintf(what, sizeof what, "    %d steps a launch, %s seed %llu", steps[k], smp[i].name,
                         (unsigned long long)seed);
                bad += !same_as(g, V, &d, &want, what, &host_steps);
                runs++;
                zt_decoded_free(&want);
            }
        }
        ZrBackendStats st;
        g->stats(g, &st);
        const bool used = st.graph_active && st.graph_steps_per_launch == steps[k];
        fprintf(stderr, "  %d steps a launch: %s: %d of %d runs == the host loop; graph %s, launches of %d steps; "
                        "GPU idle between steps: min %.2f us, median %.2f us (%llu pairs)\n",
                steps[k], bad || !used ? "FAIL" : "PASS", runs - bad, runs, st.graph_active ? "on" : "OFF",
                st.graph_steps_per_launch, st.gap_us_min, st.gap_us_median, (unsigned long long)st.gap_samples);
        failed += bad || !used;
        g->destroy(g);
    }
    ref->destroy(ref);
    zr_model_free(&m);
    ZT_CHECKF(failed == 0, "%d of %zu step counts differ from the host loop", failed, sizeof steps / sizeof steps[0]);
}

/* The decode attention changes kernels at a position (a block a query head before it, blocks of
 * query-head groups from it: cuda/attn.h; here at position 20 instead of 4096) in the middle of
 * a run: eager and graph decode_run, in launches of 1 and 4 steps, pick the tokens of the host
 * loop (forward, which changes kernels at the same position), and a graph recorded at the run's
 * first step is recorded again there, once, rather than replaying the other kernel.
 * stories260K has 2 query heads a KV head. */
ZT_TEST(the_attention_kernels_change_at_a_position_inside_a_run_and_the_tokens_do_not) {
    if (!gpu_env()) return;
    const char *path = zt_shared_model("models/stories260K.gguf");
    if (!path) return;
    enum { N = 37, CTX = 8 + N - 1, SWITCH = 20 };
    ZrModel m;
    ZrError err = {0};
    ZT_CHECKF(zr_model_load(&m, path, &err) == 0, "%s", err.msg);
    ZT_CHECK(m.hp.n_head / m.hp.n_head_kv == 2);
    const int V = m.hp.n_vocab;
    ZrBackendOptions oe = {.n_ctx = CTX, .attn_group_pos = SWITCH, .quiet = true};
    ZrBackend *ref = zr_cuda_backend_create(&m, &oe, &err);
    ZT_CHECKF(ref != NULL, "%s", err.msg);
    ZrBackend *eager = zr_cuda_backend_create(&m, &oe, &err);
    ZT_CHECKF(eager != NULL, "%s", err.msg);
    int failed = 0;
    ZtSampling smp[ZT_N_SAMPLINGS];
    zt_samplings(smp, 3);
    for (int steps = 1; steps <= 4; steps += 3)
        for (int i = 0; i < ZT_N_SAMPLINGS; i++) {
            ZtDecode d = {.sp = &smp[i].sp, .n_cand = V, .prompt = k_prompt, .n_prompt = 8, .n = N};
            ZtDecoded want;
            if (!host_loop(ref, V, &d, &want)) {
                failed++;
                continue;
            }
            /* a graph recorded at the run's first step (position 8): recorded again at 20, once */
            ZrBackendOptions og = {.n_ctx = CTX, .attn_group_pos = SWITCH, .graph = true, .verify_graph = 1,
                                   .graph_steps = steps, .quiet = true};
            ZrBackend *g = zr_cuda_backend_create(&m, &og, &err);
            ZT_CHECKF(g != NULL, "%s", err.msg);
            uint64_t host_steps = 0;
            char what[160];
            snprintf(what, sizeof what, "    eager, %s", smp[i].name);
            bool ok = same_as(eager, V, &d, &want, what, &host_steps);
            snprintf(what, sizeof what, "    graph, %d steps a launch, %s", steps, smp[i].name);
            ok &= same_as(g, V, &d, &want, what, &host_steps);
            ZrBackendStats st;
            g->stats(g, &st);
            ok &= st.graph_active && st.graph_rebuilds == 1;
            fprintf(stderr, "  %d steps a launch, %-12s %s: graph %s, recorded again %d times (1 expected), %llu steps on the host\n",
                    steps, smp[i].name, ok ? "PASS" : "FAIL", st.graph_active ? "on" : "OFF", st.graph_rebuilds,
                    (unsigned long long)host_steps);
            failed += !ok;
            g->destroy(g);
            zt_decoded_free(&want);
        }
    eager->destroy(eager);
    ref->destroy(ref);
    zr_model_free(&m);
    ZT_CHECKF(failed == 0, "%d of %d runs differ from the host loop or were not recorded again", failed,
              2 * ZT_N_SAMPLINGS);
}

/* Steps the device hands to the host (ZR_PICK_HOST: a top-p set wider than the chain sorts)
 * amid steps it picks, inside launches of 4 steps: the steps queued after such a step recompute
 * its position (tok/pos unchanged), and the tokens and sampler state are still the host loop's.
 * The model: zrun-synth's tiny llama with a vocabulary of 16384, where top-p 0.999 keeps between
 * ~500 and ~4700 ids (about one step in six past the 4096 the chain sorts, on the CPU's logits). */
ZT_TEST(steps_handed_to_the_host_inside_launches_of_several_steps_keep_the_host_loops_tokens) {
    if (!gpu_env()) return;
    const char *exe = getenv("ZRUN_SYNTH");
    if (!exe) {
        fprintf(stderr, "  ZRUN_SYNTH is not set (run through meson test)\n");
        ZT_CHECK(exe != NULL);
    }
    char path[4200], cmd[8800];
    snprintf(path, sizeof path, "%s/decode_run_v16k.gguf", zt_tmpdir());
    snprintf(cmd, sizeof cmd, "'%s' -q -o '%s' --vocab 16384 --layers 2 --seed 3 --type f32", exe, path);
    ZtProc p = zt_proc_sh(cmd, NULL);
    ZT_CHECKF(p.status == 0, "zrun-synth: %s", p.err ? p.err : "");
    zt_proc_free(&p);
    Three t;
    ZT_CHECK(open_three(&t, path));
    const int V = t.m.hp.n_vocab;
    int bad = 0, runs = 0;
    uint64_t host_steps = 0;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        ZrSamplerParams sp = zr_sampler_defaults();
        sp.top_k = 0;
        sp.top_p = 0.999f;
        sp.min_p = 0.0f;
        sp.seed = seed;
        ZtDecode d = {.sp = &sp, .n_cand = V, .prompt = k_prompt, .n_prompt = 8, .n = N_TOKENS, .reference = true};
        ZtDecoded want;
        ZrError err = {0};
        t.ref->truncate(t.ref, 0);
        if (zt_decode(t.ref, V, &d, &want, &err)) {
            fprintf(stderr, "  host loop: %s\n", err.msg);
            bad++;
            continue;
        }
        d.reference = false;
        char what[160];
        uint64_t eager_host = 0;
        snprintf(what, sizeof what, "  top-p 0.999 seed %llu eager", (unsigned long long)seed);
        bad += !same_as(t.eager, V, &d, &want, what, &eager_host);
        snprintf(what, sizeof what, "  top-p 0.999 seed %llu graph", (unsigned long long)seed);
        bad += !same_as(t.graph, V, &d, &want, what, &host_steps);
        runs += 2;
        zt_decoded_free(&want);
    }
    ZrBackendStats st;
    t.graph->stats(t.graph, &st);
    const bool mixed = host_steps > 0 && host_steps < (uint64_t)4 * (N_TOKENS - 1);
    fprintf(stderr, "  vocab 16384, top-p 0.999: %s: %d of %d runs == the host loop; graph: %llu of %d steps sampled on "
                    "the host, launches of %d steps\n",
            bad || !mixed || st.graph_steps_per_launch != 4 ? "FAIL" : "PASS", runs - bad, runs,
            (unsigned long long)host_steps, 4 * (N_TOKENS - 1), st.graph_steps_per_launch);
    close_three(&t);
    ZT_CHECKF(bad == 0, "%d of %d runs differ from the host loop", bad, runs);
    ZT_CHECKF(mixed, "%llu steps sampled on the host: the test needs some, not all", (unsigned long long)host_steps);
    ZT_CHECKF(st.graph_steps_per_launch == 4, "launches of %d steps", st.graph_steps_per_launch);
}

/* zrun's text with each fault (at the first graph step and at a later one, in the free-running
 * part) equals a plain eager run's, greedy and sampled, --ignore-eos (banned ids) included. */
ZT_TEST(every_fault_ends_in_the_eager_text_greedy_and_sampled) {
    if (!gpu_env()) return;
    const char *m = zt_shared_model("models/stories260K.gguf");
    if (!m) return;
    static const char *const faults[] = {"graph-build",    "graph-instantiate", "graph-launch", "graph-launch:9",
                                         "graph-901",      "graph-901:10",      "replay-mismatch", "sticky",
                                         "sticky:12",      "context-lost:5",    "context-lost:20"};
    static const char *const samplings[][8] = {
        {"--temp", "0", NULL},
        {"--seed", "3", NULL},
        {"--seed", "5", "--top-k", "0", "--top-p", "0.9", "--min-p", "0"},
        {"--seed", "2", "--repeat-penalty", "1.3", "--presence-penalty", "0.4", "--ignore-eos", NULL},
    };
    int failed = 0;
    for (size_t s = 0; s < sizeof samplings / sizeof samplings[0]; s++) {
        const char *args[32] = {"-m", m, "-p", "Once upon a time", "-n", "64", "--device", "cuda", "--no-graph"};
        int n = 9;
        for (int i = 0; i < 8 && samplings[s][i]; i++) args[n++] = samplings[s][i];
        args[n] = NULL;
        ZtProc eager = zt_proc_zrun(NULL, args, NULL);
        ZT_CHECKF(eager.status == 0, "eager run: exit %d: %s", eager.status, eager.err);
        args[8] = "--graph";
        for (size_t f = 0; f < sizeof faults / sizeof faults[0]; f++) {
            ZtProcOpts o = {.fault = faults[f]};
            ZtProc g = zt_proc_zrun(NULL, args, &o);
            const bool ok = g.status == 0 && !strcmp(g.out, eager.out);
            fprintf(stderr, "  %-18s %-40s %s\n", faults[f], samplings[s][2] ? samplings[s][2] : samplings[s][1],
                    ok ? "PASS (== eager)" : "FAIL");
            if (!ok) {
                fprintf(stderr, "    exit %d\n    eager: %.200s\n    graph: %.200s\n    stderr: %.600s\n", g.status,
                        eager.out, g.out, g.err);
                failed++;
            }
            zt_proc_free(&g);
        }
        zt_proc_free(&eager);
    }
    ZT_CHECKF(failed == 0, "%d runs differ from eager", failed);
}

/* A stop (-n, end of generation, a full context) prints no token past it: the graph's
 * free-running text is a prefix-exact copy of the eager one at every -n and -c. */
ZT_TEST(stops_print_no_token_an_eager_run_would_not) {
    if (!gpu_env()) return;
    const char *m = zt_shared_model("models/stories260K.gguf");
    if (!m) return;
    static const char *const lims[][2] = {{"-n", "1"}, {"-n", "2"}, {"-n", "7"}, {"-n", "-1"}, {"-c", "12"}, {"-c", "40"}};
    int failed = 0;
    for (size_t i = 0; i < sizeof lims / sizeof lims[0]; i++)
        for (int sampled = 0; sampled < 2; sampled++) {
            const char *args[] = {"-m", m, "-p", "Once upon a time", lims[i][0], lims[i][1], "--device", "cuda",
                                  "--no-graph", sampled ? "--seed" : "--temp", sampled ? "7" : "0", NULL};
            ZtProc e = zt_proc_zrun(NULL, args, NULL);
            args[8] = "--graph";
            ZtProc g = zt_proc_zrun(NULL, args, NULL);
            const bool ok = e.status == 0 && g.status == 0 && !strcmp(e.out, g.out);
            fprintf(stderr, "  %s %-3s %s: %s\n", lims[i][0], lims[i][1], sampled ? "sampled" : "greedy ",
                    ok ? "PASS" : "FAIL");
            if (!ok) fprintf(stderr, "    eager: %.200s\n    graph: %.200s\n    %s\n", e.out, g.out, g.err);
            failed += !ok;
            zt_proc_free(&e);
            zt_proc_free(&g);
        }
    ZT_CHECKF(failed == 0, "%d runs differ", failed);
}

int main(void) { return gpu_main(); }
