/* Start-up (issue 19) on a real GPU: the first prompt pays no first-use costs. The backend's
 * warm-up (cuda/warm.h) plans every GEMM shape of the prefill for every bucket of rows and runs
 * each once, on its own thread while the weights go up; a prompt of any length then takes its
 * bucket's algorithm (cuda/cublaslt.h). This program is the first cuBLASLt user of its process,
 * so a cold-start tax the warm-up misses shows here: as time (a first prompt against the next
 * ones of its length), and as heuristic calls after the warm-up (the warm-up's list of shapes
 * against the prefill's real GEMMs, on dense, F16, F32 and mixture-of-experts models). The plan
 * cache on disk: a second open asks the heuristic nothing and computes the same bits; a damaged
 * file changes nothing but the time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "cuda/warm.h"
#include "gpu_env.h"
#include "model.h"
#include "zt.h"
#include "zt_proc.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void fill_ids(int32_t *ids, int n, int n_vocab) {
    for (int i = 0; i < n; i++) ids[i] = (int32_t)((7 * i + 1) % n_vocab);
}

/* Prompts of 1 (a decode step), 5, 37 and 512 tokens (a whole chunk): the first of each length
 * on a fresh backend at most twice the faster of the next two, plus 1 ms. */
ZT_TEST(the_first_prompt_of_every_length_costs_what_the_next_ones_do) {
    if (!gpu_env()) return;
    const char *path = zt_shared_model("fixtures/llama3-Q4_K_M.gguf");
    if (!path) return;
    ZrModel m;
    ZrError err = {0};
    ZT_CHECKF(!zr_model_load(&m, path, &err), "%s", err.msg);
    ZrBackendOptions o = {.n_ctx = 1024, .verify_graph = 1, .quiet = true};
    const double t0 = now_ms();
    ZrBackend *be = zr_cuda_backend_create(&m, &o, &err);
    const double t_open = now_ms() - t0;
    ZT_CHECKF(be, "%s", err.msg);
    float *logits = malloc(sizeof(float) * (size_t)m.hp.n_vocab);
    int32_t ids[512];
    ZT_CHECK(logits);
    fill_ids(ids, 512, m.hp.n_vocab);
    printf("backend open %.1f ms\n", t_open);
    static const int lengths[] = {1, 5, 37, 512};
    int bad = 0;
    for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
        const int n = lengths[l];
        double t[3];
        for (int i = 0; i < 3; i++) {
            be->truncate(be, 0);
            const double a = now_ms();
            ZT_CHECKF(!be->forward(be, ids, n, 0, logits, false, &err), "%d tokens: %s", n, err.msg);
            t[i] = now_ms() - a;
        }
        const double next = t[1] < t[2] ? t[1] : t[2];
        const bool ok = t[0] <= 2.0 * next + 1.0;
        bad += !ok;
        printf("%s %3d-token prompt: first %.2f ms, then %.2f, %.2f ms\n", ok ? "PASS" : "FAIL", n, t[0], t[1], t[2]);
    }
    ZT_CHECKF(bad == 0, "%d prompt lengths cost more the first time than twice the next + 1 ms", bad);
    be->destroy(be);
    free(logits);
    zr_model_free(&m);
}

/* A model from zrun-synth (ZRUN_SYNTH, set by meson test) -> path. */
static bool synth(const char *args, char *path, size_t cap) {
    const char *exe = getenv("ZRUN_SYNTH");
    if (!exe) {
        fprintf(stderr, "  ZRUN_SYNTH is not set (run through meson test)\n");
        return false;
    }
    snprintf(path, cap, "%s/startup_moe.gguf", zt_tmpdir());
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' -q -o '%s' %s", exe, path, args);
    ZtProc p = zt_proc_sh(cmd, NULL);
    if (p.status != 0 && p.err) fputs(p.err, stderr);
    const bool ok = p.status == 0;
    zt_proc_free(&p);
    return ok;
}

/* The forward pass of path as the backend makes it (the warm-up's thread beside zr_cuf_init),
 * then prefills of many lengths, in chunks of every bucket and across their edges, and the
 * all-logits path: none may ask the heuristic (a shape the warm-up did not list, or a bucket's
 * algorithm that an n of it cannot use). The warm-up plans each listed shape and bucket once
 * (a plan's shape includes the workspace: the plans made before the buffers exist must be the
 * prefill's, not planned again when the GEMMs run); late_buffers: zr_cuf_init only after the
 * thread's plans are surely done (1.5 s), as on a slow upload. */
static bool no_heuristic_after_the_warm_up(GpuEnv *g, const char *name, const char *path, bool quantized,
                                           bool late_buffers) {
    ZrModel m;
    ZrError err = {0};
    if (zr_model_load(&m, path, &err)) {
        printf("FAIL %s: %s\n", name, err.msg);
        return false;
    }
    const int n_ctx = 1024;
    ZrCuWarm *w = NULL;
    ZrCublasLt lt = {0};
    ZrCuForward f;
    ZrCuWarmStats st;
    bool ok = false, f_init = false;
    if (zr_cuf_warm_start(&w, g->drv, g->cuda.ctx, g->cuda.props.sm_count, g->cuda.props.max_smem_optin, &m, n_ctx, true,
                          ZR_FIRST_ROWS_ALL, NULL, &err))
        goto done;
    const ZrCuProgress prog = {.buffers = zr_cuf_warm_buffers, .buffers_ctx = w};
    if (late_buffers) nanosleep(&(struct timespec){.tv_sec = 1, .tv_nsec = 500000000}, NULL);
    const int irc = zr_cuf_init(&f, &m, &g->cuda, &g->l, &lt, &g->k, n_ctx, false, &prog, &err);
    ZrError werr = {0};
    const int wrc = zr_cuf_warm_wait(w, &lt, &st, &werr);
    if (irc) goto done;
    f_init = true;
    if (wrc) {
        err = werr;
        goto done;
    }
    const int h0 = lt.n_heuristics, p0 = lt.n_plans;
    static const int lengths[] = {2, 3, 5, 8, 9, 16, 17, 37, 64, 65, 100, 128, 129, 255, 256, 257, 300, 511, 512};
    int32_t ids[512];
    fill_ids(ids, 512, m.hp.n_vocab);
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++)
        if (zr_cuf_prefill(&f, ids, lengths[i], 0, NULL, false, &err)) goto done;
    float *logits = malloc(sizeof(float) * (size_t)m.hp.n_vocab * 100);
    if (!logits) goto done;
    const int prc = zr_cuf_prefill(&f, ids, 100, 0, logits, true, &err); /* zrun eval's path: 64 + 36 rows */
    free(logits);
    if (prc) goto done;
    /* and it left out the buckets whose prompts all take the small product: only where the model
     * has quantized or BF16 matrices (the short prompts above then asked nothing) */
    ok = lt.n_heuristics == h0 && (quantized ? st.n_small > 0 : st.n_small == 0) && p0 <= st.n_listed && h0 == p0;
    printf("%s %s%s: warm-up: cuBLASLt opened in %.1f ms, %d plans (%d heuristic calls; %d shape-buckets listed) in "
           "%.1f ms, %d GEMMs run (%d "
           "planned only, %d buckets left to the small product) in %.1f ms; then %zu prompt lengths: %d plans made, %d "
           "heuristic calls (%d of them for an algorithm that failed its check)\n",
           ok ? "PASS" : "FAIL", name, late_buffers ? " (buffers after the plans)" : "", st.open_ms, p0, h0, st.n_listed,
           st.plan_ms, st.n_gemms, st.n_planned, st.n_small, st.gemm_ms,
           sizeof lengths / sizeof lengths[0] + 1, lt.n_plans - p0, lt.n_heuristics - h0, lt.n_fallbacks);
done:
    if (!ok && err.msg[0]) printf("FAIL %s: %s\n", name, err.msg);
    if (f_init) zr_cuf_free(&f);
    zr_cublaslt_close(&lt);
    zr_model_free(&m);
    return ok;
}

ZT_TEST(after_the_warm_up_no_prompt_length_asks_the_heuristic) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    static const struct {
        const char *name, *path;
        bool quantized; /* quantized or BF16 matrices: the small product takes their short prompts */
    } fixtures[] = {
        {"llama3-Q4_K_M", "fixtures/llama3-Q4_K_M.gguf", true}, /* Q|K and V of two types: two GEMMs */
        {"llama-F16", "fixtures/llama-F16.gguf", false},         /* F16 weights read in place */
        {"llama-BF16", "fixtures/llama-BF16.gguf", true},
        {"stories260K F32", "models/stories260K.gguf", false},   /* F32 operands */
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
        const char *path = zt_shared_model(fixtures[i].path);
        if (!path) return;
        bad += !no_heuristic_after_the_warm_up(g, fixtures[i].name, path, fixtures[i].quantized, false);
        if (i == 0) bad += !no_heuristic_after_the_warm_up(g, fixtures[i].name, path, fixtures[i].quantized, true);
    }
    /* mixture of experts: the router and each expert's rows (split gate and up too) */
    static const char *const moe[][2] = {
        {"qwen3moe Q4_K, up Q8_0", "--arch qwen3moe --layers 2 --seed 12 --type q4_k --up-type q8_0"},
        {"llama-moe F32", "--arch llama --layers 2 --seed 8 --experts 4 --experts-used 1 --ff-expert 128 --type f32"},
    };
    for (size_t i = 0; i < sizeof moe / sizeof moe[0]; i++) {
        char path[4200];
        ZT_CHECK(synth(moe[i][1], path, sizeof path));
        bad += !no_heuristic_after_the_warm_up(g, moe[i][0], path, i == 0, false); /* the second: all F32 */
    }
    ZT_CHECKF(bad == 0, "%d models asked the heuristic after the warm-up", bad);
}

/* The driver and context opened on a thread beside the model's parse (ZrBackendOptions.cuda_early)
 * serve the backend as its own would: the same logits, bit for bit, from a 5-token prompt and a
 * decode step after it. */
ZT_TEST(a_context_opened_early_serves_the_backend_bit_for_bit) {
    if (!gpu_env()) return;
    const char *path = zt_shared_model("fixtures/llama3-Q4_K_M.gguf");
    if (!path) return;
    ZrCudaEarly *early = zr_cuda_early_start();
    ZT_CHECK(early);
    ZrModel m;
    ZrError err = {0};
    ZT_CHECKF(!zr_model_load(&m, path, &err), "%s", err.msg);
    const int V = m.hp.n_vocab;
    float *a = malloc(sizeof(float) * 2 * (size_t)V), *b = malloc(sizeof(float) * 2 * (size_t)V);
    ZT_CHECK(a && b);
    int32_t ids[6];
    fill_ids(ids, 6, V);
    double t_open[2];
    for (int k = 0; k < 2; k++) {
        ZrBackendOptions o = {.n_ctx = 64, .verify_graph = 1, .quiet = true, .cuda_early = k == 0 ? early : NULL};
        float *out = k == 0 ? a : b;
        const double t0 = now_ms();
        ZrBackend *be = zr_cuda_backend_create(&m, &o, &err);
        t_open[k] = now_ms() - t0;
        ZT_CHECKF(be, "%s", err.msg);
        ZT_CHECKF(!be->forward(be, ids, 5, 0, out, false, &err), "%s", err.msg);
        ZT_CHECKF(!be->forward(be, ids + 5, 1, 5, out + V, false, &err), "%s", err.msg);
        be->destroy(be);
    }
    const bool same = !memcmp(a, b, sizeof(float) * 2 * (size_t)V);
    printf("%s the context opened early: backend open %.1f ms (after the model's load), %.1f ms without; logits %s\n",
           same ? "PASS" : "FAIL", t_open[0], t_open[1], same ? "the same bit for bit" : "DIFFER");
    ZT_CHECK(same);
    free(a);
    free(b);
    zr_model_free(&m);
}

/* The load that waits only for the first prompt's GEMMs (ZrBackendOptions.first_rows: the rest
 * planned and run beside that prompt, joined by the first prompt that needs cuBLASLt) gives the
 * logits of the load that waits for all of it, bit for bit: a 5-token prompt (the small
 * product: no GEMM), a decode step, then a 37-token prompt (the join) and another decode step;
 * for a first prompt of 5 rows, of 37 (its bucket run before the load is done) and none yet (the
 * chat). And a backend destroyed while the rest goes on stops it cleanly. */
ZT_TEST(a_load_that_defers_the_warm_ups_rest_gives_the_same_logits) {
    if (!gpu_env()) return;
    static const char *const paths[] = {"fixtures/llama3-Q4_K_M.gguf", "fixtures/llama-F16.gguf"};
    for (size_t pi = 0; pi < sizeof paths / sizeof paths[0]; pi++) {
        const char *path = zt_shared_model(paths[pi]);
        if (!path) return;
        ZrModel m;
        ZrError err = {0};
        ZT_CHECKF(!zr_model_load(&m, path, &err), "%s", err.msg);
        const int V = m.hp.n_vocab;
        static const int firsts[] = {ZR_FIRST_ROWS_ALL, 5, 37, ZR_FIRST_ROWS_LATER};
        enum { NF = sizeof firsts / sizeof firsts[0] };
        float *out[NF];
        int32_t ids[40];
        fill_ids(ids, 40, V);
        int bad = 0;
        for (int k = 0; k < NF; k++) {
            out[k] = malloc(sizeof(float) * 4 * (size_t)V);
            ZT_CHECK(out[k]);
            ZrBackendOptions o = {.n_ctx = 256, .verify_graph = 1, .quiet = true, .first_rows = firsts[k]};
            ZrBackend *be = zr_cuda_backend_create(&m, &o, &err);
            ZT_CHECKF(be, "%s", err.msg);
            ZT_CHECKF(!be->forward(be, ids, 5, 0, out[k], false, &err), "%s", err.msg);
            ZT_CHECKF(!be->forward(be, ids + 5, 1, 5, out[k] + V, false, &err), "%s", err.msg);
            be->truncate(be, 0);
            ZT_CHECKF(!be->forward(be, ids, 37, 0, out[k] + 2 * (size_t)V, false, &err), "%s", err.msg);
            ZT_CHECKF(!be->forward(be, ids + 37, 1, 37, out[k] + 3 * (size_t)V, false, &err), "%s", err.msg);
            be->destroy(be);
            const bool same = !memcmp(out[k], out[0], sizeof(float) * 4 * (size_t)V);
            bad += !same;
            printf("%s %s, first prompt of %d rows: logits %s\n", same ? "PASS" : "FAIL", paths[pi], firsts[k],
                   same ? "as the load that waits for every GEMM, bit for bit" : "DIFFER");
        }
        for (int k = 0; k < NF; k++) free(out[k]);
        /* destroyed at once: the rest stops between GEMMs, nothing is left running */
        ZrBackendOptions o = {.n_ctx = 256, .quiet = true, .first_rows = ZR_FIRST_ROWS_LATER};
        ZrBackend *be = zr_cuda_backend_create(&m, &o, &err);
        ZT_CHECKF(be, "%s", err.msg);
        be->destroy(be);
        zr_model_free(&m);
        ZT_CHECKF(bad == 0, "%s: %d deferred loads gave other logits", path, bad);
    }
}

/* The plan cache (ZrBackendOptions.plan_cache, cuda/lt_cache.h): one backend's prefill logits of
 * prompts of 5, 37 and 300 tokens (out: [3][n_vocab]) after an open with the cache at path (NULL:
 * none); *st: its counts after them (the GEMM plans, heuristic calls, plans from the cache). */
static bool open_and_prefill(const ZrModel *m, const char *path, float *out, ZrBackendStats *st, ZrError *err) {
    ZrBackendOptions o = {.n_ctx = 512, .verify_graph = 1, .quiet = true, .plan_cache = path};
    ZrBackend *be = zr_cuda_backend_create(m, &o, err);
    if (!be) return false;
    static const int lengths[] = {5, 37, 300};
    int32_t ids[300];
    fill_ids(ids, 300, m->hp.n_vocab);
    bool ok = true;
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0] && ok; i++) {
        be->truncate(be, 0);
        ok = !be->forward(be, ids, lengths[i], 0, out + i * (size_t)m->hp.n_vocab, false, err);
    }
    be->stats(be, st);
    be->destroy(be);
    return ok;
}

/* A second backend on the same GPU with the plan cache the first one wrote makes no heuristic
 * call (its plans all come from the file, each after cuBLASLt's check), and its prefill logits
 * equal the first's bit for bit (the same algorithms). */
ZT_TEST(a_second_open_with_the_plan_cache_asks_the_heuristic_nothing_and_gives_the_same_logits) {
    if (!gpu_env()) return;
    const char *model = zt_shared_model("fixtures/llama3-Q4_K_M.gguf");
    if (!model) return;
    ZrModel m;
    ZrError err = {0};
    ZT_CHECKF(!zr_model_load(&m, model, &err), "%s", err.msg);
    const size_t n = 3 * (size_t)m.hp.n_vocab;
    float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n);
    ZT_CHECK(a && b);
    char path[4200];
    snprintf(path, sizeof path, "%s/plans/zrun/cublaslt-plans.bin", zt_tmpdir());
    unlink(path);
    ZrBackendStats s1, s2;
    const double t0 = now_ms();
    ZT_CHECKF(open_and_prefill(&m, path, a, &s1, &err), "first: %s", err.msg);
    const double t1 = now_ms();
    ZT_CHECKF(open_and_prefill(&m, path, b, &s2, &err), "second: %s", err.msg);
    const double t2 = now_ms();
    const bool same = !memcmp(a, b, sizeof(float) * n);
    const bool ok = s1.gemm_heuristics > 0 && s1.gemm_plans_cached == 0 && s2.gemm_heuristics == 0 &&
                    s2.gemm_plans_cached == s1.gemm_heuristics && s2.gemm_plans == s1.gemm_plans && same;
    printf("%s plan cache: first open + prompts %.0f ms, %d plans, %d heuristic calls; second %.0f ms, %d plans, %d "
           "heuristic calls, %d from the cache; logits %s\n",
           ok ? "PASS" : "FAIL", t1 - t0, s1.gemm_plans, s1.gemm_heuristics, t2 - t1, s2.gemm_plans, s2.gemm_heuristics,
           s2.gemm_plans_cached, same ? "the same bit for bit" : "DIFFER");
    ZT_CHECK(ok);
    free(a);
    free(b);
    zr_model_free(&m);
}

/* A damaged plan cache (a byte flipped, cut short, a directory in its place) is ignored: the
 * backend loads, asks the heuristic as without a cache, gives the logits of a backend without
 * one bit for bit, and a damaged file is replaced by a sound one (the next open asks nothing). */
ZT_TEST(a_damaged_plan_cache_still_loads_the_model_with_the_same_logits) {
    if (!gpu_env()) return;
    const char *model = zt_shared_model("fixtures/llama3-Q4_K_M.gguf");
    if (!model) return;
    ZrModel m;
    ZrError err = {0};
    ZT_CHECKF(!zr_model_load(&m, model, &err), "%s", err.msg);
    const size_t n = 3 * (size_t)m.hp.n_vocab;
    float *ref = malloc(sizeof(float) * n), *got = malloc(sizeof(float) * n);
    ZT_CHECK(ref && got);
    ZrBackendStats s0, s;
    ZT_CHECKF(open_and_prefill(&m, NULL, ref, &s0, &err), "no cache: %s", err.msg);
    char path[4200];
    snprintf(path, sizeof path, "%s/damaged-plans.bin", zt_tmpdir());
    unlink(path);
    ZT_CHECKF(open_and_prefill(&m, path, got, &s, &err), "writing: %s", err.msg);
    size_t len = 0;
    unsigned char *file = zt_read_file(path, &len);
    ZT_CHECKF(file && len > 400, "%s: no plan cache written", path);
    int bad = 0;
    for (int k = 0; k < 3; k++) {
        FILE *f = fopen(path, "wb");
        ZT_CHECK(f);
        if (k == 0) file[len / 2] ^= 0x10; /* a flipped bit in an entry */
        fwrite(file, 1, k == 1 ? len - 7 : len, f); /* k 1: cut short */
        if (k == 0) file[len / 2] ^= 0x10;
        if (k == 2) fwrite("\0", 1, 1, f); /* a byte too many */
        fclose(f);
        ZT_CHECKF(open_and_prefill(&m, path, got, &s, &err), "damage %d: %s", k, err.msg);
        const bool same = !memcmp(ref, got, sizeof(float) * n);
        ZrBackendStats again;
        ZT_CHECKF(open_and_prefill(&m, path, got, &again, &err), "after damage %d: %s", k, err.msg);
        const bool ok = same && s.gemm_heuristics == s0.gemm_heuristics && s.gemm_plans_cached == 0 &&
                        again.gemm_heuristics == 0 && !memcmp(ref, got, sizeof(float) * n);
        bad += !ok;
        printf("%s damage %d: %d heuristic calls (%d without a cache), logits %s; the next open %d heuristic calls\n",
               ok ? "PASS" : "FAIL", k, s.gemm_heuristics, s0.gemm_heuristics, same ? "the same" : "DIFFER",
               again.gemm_heuristics);
    }
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/a-directory.bin", zt_tmpdir());
    mkdir(dir, 0700);
    ZT_CHECKF(open_and_prefill(&m, dir, got, &s, &err), "a directory as the cache: %s", err.msg);
    const bool dir_ok = !memcmp(ref, got, sizeof(float) * n) && s.gemm_plans_cached == 0;
    printf("%s a directory as the plan cache: loads, logits %s\n", dir_ok ? "PASS" : "FAIL", dir_ok ? "the same" : "DIFFER");
    ZT_CHECKF(bad == 0 && dir_ok, "%d damaged caches misbehaved", bad + !dir_ok);
    free(file);
    free(ref);
    free(got);
    zr_model_free(&m);
}

/* zrun itself, twice with --plan-cache FILE: the second start-up line says its plans came from
 * the file with no heuristic call, and the text is the same; --no-plan-cache says it has none.
 * The prompt is longer than the small product's rows, so the load plans its GEMMs before it is
 * done (a shorter one leaves them all to the warm-up's rest: ZrBackendOptions.first_rows). */
#define LONG_PROMPT                                                                                \
    "Once upon a time there was a little girl who lived in a village near the forest, and every day " \
    "she walked to the river with her brother to watch the boats"
ZT_TEST(zrun_says_how_many_plans_came_from_the_plan_cache) {
    if (!gpu_env()) return;
    const char *model = zt_shared_model("fixtures/llama3-Q4_K_M.gguf");
    if (!model) return;
    char path[4200];
    snprintf(path, sizeof path, "%s/zrun-plans.bin", zt_tmpdir());
    unlink(path);
    const char *const args[] = {"-m", model, "-p", LONG_PROMPT, "-n", "8", "--temp", "0", "--device", "cuda",
                                "--plan-cache", path, NULL};
    ZtProc a = zt_proc_zrun(NULL, args, NULL), b = zt_proc_zrun(NULL, args, NULL);
    const char *const off[] = {"-m", model, "-p", LONG_PROMPT, "-n", "8", "--temp", "0", "--device", "cuda",
                               "--no-plan-cache", NULL};
    ZtProc c = zt_proc_zrun(NULL, off, NULL);
    ZT_CHECKF(a.status == 0 && b.status == 0 && c.status == 0, "exit %d %d %d: %s%s%s", a.status, b.status, c.status, a.err,
              b.err, c.err);
    const char *first = strstr(a.err, "heuristic calls, 0 from the plan cache");
    const char *second = strstr(b.err, "(0 heuristic calls, ");
    const bool ok = first && second && strstr(second, "from the plan cache") && !strstr(b.err, "(0 heuristic calls, 0 from") &&
                    strstr(c.err, "heuristic calls; no plan cache") && !strcmp(a.out, b.out) && !strcmp(a.out, c.out);
    printf("%s zrun --plan-cache: first run's line %s; second's %s; the text %s\n", ok ? "PASS" : "FAIL",
           first ? "reads 0 from the cache" : "WRONG", second ? "reads 0 heuristic calls" : "WRONG",
           !strcmp(a.out, b.out) ? "the same" : "DIFFERS");
    if (!ok) fprintf(stderr, "%s\n%s\n%s\n", a.err, b.err, c.err);
    ZT_CHECK(ok);
    zt_proc_free(&a);
    zt_proc_free(&b);
    zt_proc_free(&c);
}

/* zrun -p: the load made ready the GEMMs of the prompt's rows, so the prompt never waits for
 * the warm-up's rest (the "joined" line), on F16 weights (cuBLASLt from 2 rows) and Q4_K_M (the
 * small product up to 8 rows), short and long prompts; the text equals --no-plan-cache's. */
ZT_TEST(zrun_p_never_waits_for_the_warm_ups_rest) {
    if (!gpu_env()) return;
    static const char *const models[] = {"fixtures/llama-F16.gguf", "fixtures/llama3-Q4_K_M.gguf"};
    static const char *const prompts[] = {"Once upon a time", LONG_PROMPT};
    int bad = 0;
    for (size_t i = 0; i < 2; i++) {
        const char *model = zt_shared_model(models[i]);
        if (!model) return;
        for (size_t j = 0; j < 2; j++) {
            const char *const args[] = {"-m", model, "-p", prompts[j], "-n", "8", "--temp", "0", "--device", "cuda",
                                        "--no-plan-cache", NULL};
            ZtProc a = zt_proc_zrun(NULL, args, NULL);
            const bool ok = a.status == 0 && a.err && strstr(a.err, "start-up") && !strstr(a.err, "joined");
            bad += !ok;
            printf("%s %s, %s prompt: %s\n", ok ? "PASS" : "FAIL", models[i], j ? "long" : "short",
                   ok ? "no wait for the warm-up's rest" : a.err ? a.err : "no output");
            zt_proc_free(&a);
        }
    }
    ZT_CHECKF(bad == 0, "%d zrun runs waited for the warm-up's rest", bad);
}

int main(void) { return gpu_main(); }
