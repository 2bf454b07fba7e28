/* gemma2, gemma3 and phi3 on the CUDA backend (issue 14), on models zrun-synth writes, against
 * the CPU reference (itself held to llama.cpp by test/test_archs.c), 40 positions: past the
 * synthesized sliding window of 16.
 *
 * Tolerances (worst row of max|gpu - cpu| / std(cpu row), as test_cuda_backend.c):
 *   decode steps (F32 throughout, as the CPU)                                  <= 3e-5
 *   prefill: F32 weights keep F32 operands <= 3e-5; F16 / quantized ones multiply F16
 *   operands (cuBLASLt)                                                       <= 1e-2
 * and the graph replays the eager logits bit for bit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "gpu_env.h"
#include "model.h"
#include "zt.h"
#include "zt_synth.h"
#include "zt_decode.h"
#include "zt_fixtures.h"
#include "zt_gpu_model.h"
#include "zt_proc.h"

#define N_POS 40

static const int32_t k_tokens[N_POS] = {2,   71,  294, 436, 413, 394, 35,  133, 63,  256, 392, 233, 244, 336,
                                        197, 406, 110, 51,  252, 17,  460, 430, 202, 224, 314, 393, 395, 45,
                                        88,  301, 19,  477, 150, 222, 9,   380, 265, 128, 499, 64};

typedef struct Case {
    const char *name, *args;
    int n_ctx; /* phi3's LongRoPE: the long factors past --orig-ctx */
} Case;

static const Case k_cases[] = {
    {"gemma2-F32", "--arch gemma2 --layers 4 --seed 3 --type f32", 128},
    {"gemma2-Q8_0", "--arch gemma2 --layers 4 --seed 3 --type q8_0", 128},
    {"gemma2-caps-F32", "--arch gemma2 --layers 4 --seed 9 --attn-softcap 0.5 --final-softcap 5 --type f32", 128},
    {"gemma3-F32", "--arch gemma3 --layers 7 --seed 4 --type f32", 128},
    {"gemma3-Q4_K_M", "--arch gemma3 --layers 7 --seed 4 --type q4_k_m", 128},
    {"gemma3-F16-hd256", "--arch gemma3 --layers 7 --seed 8 --type f16 --embd 512 --heads 4 --kv-heads 2 --head-dim 256", 128},
    /* heads of 128 with a window and caps that bite: the prefill's attn_prefill_f16_d128_swa */
    {"gemma2-caps-Q8_0-hd128", "--arch gemma2 --layers 4 --seed 9 --attn-softcap 0.5 --final-softcap 5 --type q8_0 --embd 512 --heads 4 --kv-heads 2 --head-dim 128", 128},
    {"phi3-F32-long", "--arch phi3 --layers 3 --seed 5 --orig-ctx 64 --type f32", 128},
    {"phi3-Q8_0-short", "--arch phi3 --layers 3 --seed 5 --orig-ctx 256 --type q8_0", 128},
    {"phi3-F16", "--arch phi3 --layers 2 --seed 7 --type f16", 128},
    /* Phi-4-mini's partial rotation with the LongRoPE attention factor (rope_scale_f32) */
    {"phi3-F32-partial", "--arch phi3 --layers 3 --seed 11 --orig-ctx 64 --rope-dim 48 --type f32", 128},
    {"phi3-Q4_K_M-partial", "--arch phi3 --layers 3 --seed 11 --orig-ctx 64 --rope-dim 48 --type q4_k_m", 128},
};
#define N_CASES (sizeof k_cases / sizeof k_cases[0])

ZT_TEST(gemma2_gemma3_phi3_decode_and_prefill_match_the_cpu_past_the_window) {
    if (!gpu_env()) return;
    int failed = 0;
    for (size_t i = 0; i < N_CASES; i++) {
        const Case *k = &k_cases[i];
        char path[4200];
        ZrModel m;
        ZrError err = {0};
        ZT_CHECK(zt_synth("cuda_arch.gguf", k->args, 0, path, sizeof path) == 0);
        ZT_CHECKF(zr_model_load(&m, path, &err) == 0, "%s: %s", k->name, err.msg);
        const int V = m.hp.n_vocab;
        float *ref = zt_cpu_logits(&m, k_tokens, N_POS, k->n_ctx), *lg = malloc(sizeof(float) * N_POS * V);
        ZT_CHECK(ref != NULL);
        ZrBackendOptions o = {.n_ctx = k->n_ctx, .verify_graph = 1, .quiet = true};
        ZrBackend *be = zr_cuda_backend_create(&m, &o, &err);
        ZT_CHECKF(be != NULL, "%s: %s", k->name, err.msg);
        /* decode one position at a time; prefill 24 positions, then 16 more reading their cache */
        failed += zt_gpu_decode_prefill(be, &m, k->name, k_tokens, N_POS, 24, ref, lg);
        be->destroy(be);
        free(ref);
        free(lg);
        zr_model_free(&m);
    }
    ZT_CHECKF(failed == 0, "%d runs over tolerance", failed);
}

/* The recorded graph replays the eager decode bit for bit, 64 greedy steps from position 8 (past
 * the window of 16 and the soft-caps: every kernel of the gemma blocks in the graph). */
ZT_TEST(graph_decode_equals_eager_bit_for_bit_on_gemma2_gemma3_phi3) {
    if (!gpu_env()) return;
    int failed = 0;
    for (size_t i = 0; i < N_CASES; i++) {
        const Case *k = &k_cases[i];
        char path[4200];
        ZrModel m;
        ZrError err = {0};
        ZT_CHECK(zt_synth("cuda_arch.gguf", k->args, 0, path, sizeof path) == 0);
        ZT_CHECKF(zr_model_load(&m, path, &err) == 0, "%s: %s", k->name, err.msg);
        const int V = m.hp.n_vocab;
        ZrBackendOptions oe = {.n_ctx = 128, .graph = 0, .quiet = true}, og = {.n_ctx = 128, .graph = 1, .verify_graph = 2, .quiet = true};
        ZrBackend *eg = zr_cuda_backend_create(&m, &oe, &err), *gg = eg ? zr_cuda_backend_create(&m, &og, &err) : NULL;
        ZT_CHECKF(eg && gg, "%s: %s", k->name, err.msg);
        float *a = malloc(sizeof(float) * V), *b = malloc(sizeof(float) * V);
        int rc = eg->forward(eg, k_tokens, 8, 0, a, false, &err);
        if (!rc) rc = gg->forward(gg, k_tokens, 8, 0, b, false, &err);
        int diff_step = -1;
        for (int pos = 8; !rc && pos < 8 + 64; pos++) {
            const int32_t t = zt_argmax(a, V);
            if ((rc = eg->forward(eg, &t, 1, pos, a, false, &err)) || (rc = gg->forward(gg, &t, 1, pos, b, false, &err))) break;
            if (memcmp(a, b, sizeof(float) * V) && diff_step < 0) diff_step = pos;
        }
        ZrBackendStats st;
        gg->stats(gg, &st);
        const bool ok = !rc && diff_step < 0 && st.graph_active;
        fprintf(stderr, "  graph %-18s %s (kernels/token %llu)%s%s\n", k->name, ok ? "== eager over 64 steps" : "DIFFERS",
                (unsigned long long)st.kernels_per_token, rc ? " error: " : "", rc ? err.msg : "");
        failed += !ok;
        eg->destroy(eg);
        gg->destroy(gg);
        free(a);
        free(b);
        zr_model_free(&m);
    }
    ZT_CHECKF(failed == 0, "%d of %zu models differ", failed, N_CASES);
}

/* Greedy ids of the CUDA backend's own pick equal the CPU reference's over 48 steps (the text of
 * a greedy run is these ids), eager. */
ZT_TEST(greedy_ids_equal_the_cpu_on_gemma2_gemma3_phi3) {
    if (!gpu_env()) return;
    for (size_t i = 0; i < N_CASES; i++) {
        const Case *k = &k_cases[i];
        /* F32 models (both sides compute the same values), not those whose final soft-cap
         * squeezes the top logits together */
        if (strstr(k->args, "f32") == NULL || strstr(k->args, "softcap")) continue;
        char path[4200];
        ZrModel m;
        ZrError err = {0};
        ZT_CHECK(zt_synth("cuda_arch.gguf", k->args, 0, path, sizeof path) == 0);
        ZT_CHECKF(zr_model_load(&m, path, &err) == 0, "%s: %s", k->name, err.msg);
        ZrBackendOptions oc = {.n_ctx = 128, .n_threads = 4}, og = {.n_ctx = 128, .quiet = true};
        ZrBackend *cb = zr_cpu_backend_create(&m, &oc, &err), *gb = cb ? zr_cuda_backend_create(&m, &og, &err) : NULL;
        ZT_CHECKF(cb && gb, "%s: %s", k->name, err.msg);
        int32_t pc = 0, pg = 0;
        int rc = cb->forward(cb, k_tokens, 8, 0, NULL, false, &err);
        if (!rc) rc = gb->forward(gb, k_tokens, 8, 0, NULL, false, &err);
        int32_t tc = k_tokens[8], tg = k_tokens[8], same = 0;
        for (int pos = 8; !rc && pos < 56; pos++) {
            if ((rc = zt_greedy_step(cb, m.hp.n_vocab, tc, pos, m.hp.n_vocab, NULL, &pc, &err)) ||
                (rc = zt_greedy_step(gb, m.hp.n_vocab, tg, pos, m.hp.n_vocab, NULL, &pg, &err)))
                break;
            same += pc == pg;
            tc = pc;
            tg = pg;
        }
        fprintf(stderr, "  greedy %-18s %d of 48 ids equal%s%s\n", k->name, same, rc ? " error: " : "", rc ? err.msg : "");
        ZT_CHECKF(!rc && same == 48, "%s: %d of 48 greedy ids equal", k->name, same);
        cb->destroy(cb);
        gb->destroy(gb);
        zr_model_free(&m);
    }
}

/* n ids in 2..501, a fixed walk over tiny's vocabulary (malloc'd) */
static int32_t *walk_tokens(int n) {
    int32_t *tok = malloc(sizeof(int32_t) * n);
    for (int i = 0; i < n; i++) tok[i] = (int32_t)((i * 7919 + 2) % 500) + 2;
    return tok;
}

/* Synthesizes and loads the case's model into *m, and returns the CPU reference's logits of
 * every position [n][n_vocab] (one prefill pass, cache type kv); NULL when a step failed (said on
 * stderr, the test marked failed; *m loaded only when the load succeeded: m->hp.n_vocab 0 else). */
static float *case_cpu_logits(const Case *k, ZrModel *m, const int32_t *tok, int n, ZrKvType kv) {
    char path[4200];
    ZrError err = {0};
    memset(m, 0, sizeof *m);
    if (zt_synth("cuda_arch.gguf", k->args, 0, path, sizeof path) != 0 || zr_model_load(m, path, &err)) {
        fprintf(stderr, "  %s: zrun-synth or load failed: %s\n", k->name, err.msg);
        zt_failed_flag = 1;
        return NULL;
    }
    float *ref = malloc(sizeof(float) * n * m->hp.n_vocab);
    ZrBackendOptions oc = {.n_ctx = k->n_ctx, .n_threads = 4, .kv_type = kv};
    ZrBackend *cb = zr_cpu_backend_create(m, &oc, &err);
    if (!cb || cb->forward(cb, tok, n, 0, ref, true, &err)) {
        fprintf(stderr, "  %s: the CPU reference: %s\n", k->name, err.msg);
        zt_failed_flag = 1;
        free(ref);
        ref = NULL;
    }
    if (cb) cb->destroy(cb);
    return ref;
}

/* Past several chunks of the fused decode attention (n_ctx 512: chunks of 128, 64 for heads of
 * 256) and past the
 * window: 300 decode steps on the CUDA backend, eager and graph, against the CPU's logits of
 * every position (one prefill pass), for gemma3 (window 40, q/k norms, heads of 64 and of 256)
 * and gemma2 (window 40, soft-caps that bite). The graph replays the eager logits bit for bit. */
#define LONG_POS 300
ZT_TEST(gemma_decode_past_several_attention_chunks_and_the_window_matches_the_cpu) {
    if (!gpu_env()) return;
    static const Case cases[] = {
        {"gemma3-F32-w40", "--arch gemma3 --layers 7 --seed 12 --window 40 --type f32", 512},
        {"gemma3-F32-hd256-w40", "--arch gemma3 --layers 7 --seed 13 --window 40 --embd 512 --heads 4 --kv-heads 2 --head-dim 256 --type f32", 512},
        {"gemma2-F32-caps-w40", "--arch gemma2 --layers 4 --seed 14 --window 40 --attn-softcap 0.5 --final-softcap 5 --type f32", 512},
    };
    int32_t *tok = walk_tokens(LONG_POS);
    int failed = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const Case *k = &cases[i];
        ZrModel m;
        ZrError err = {0};
        float *ref = case_cpu_logits(k, &m, tok, LONG_POS, ZR_KV_F32);
        ZT_CHECK(ref != NULL);
        const int V = m.hp.n_vocab;
        float *lg = malloc(sizeof(float) * LONG_POS * V), *lgg = malloc(sizeof(float) * LONG_POS * V);
        ZrBackendOptions oe = {.n_ctx = k->n_ctx, .quiet = true}, og = {.n_ctx = k->n_ctx, .graph = 1, .verify_graph = 2, .quiet = true};
        ZrBackend *eg = zr_cuda_backend_create(&m, &oe, &err), *gg = eg ? zr_cuda_backend_create(&m, &og, &err) : NULL;
        ZT_CHECKF(eg && gg, "%s: %s", k->name, err.msg);
        int rc = 0;
        for (int t = 0; t < LONG_POS && !rc; t++) {
            rc = eg->forward(eg, &tok[t], 1, t, lg + (size_t)t * V, true, &err);
            if (!rc) rc = gg->forward(gg, &tok[t], 1, t, lgg + (size_t)t * V, true, &err);
        }
        const ZtLogitsDiff d = zt_compare_logits(lg, ref, LONG_POS, V);
        const bool same = !rc && !memcmp(lg, lgg, sizeof(float) * LONG_POS * V);
        ZrBackendStats st;
        gg->stats(gg, &st);
        const bool ok = !rc && d.worst_rel <= ZT_DECODE_TOL && same && st.graph_active;
        fprintf(stderr, "  decode %-22s %d positions: max|diff|/std %.3g  argmax %d/%d  graph %s%s%s%s\n", k->name,
                LONG_POS, d.worst_rel, d.argmax_equal, LONG_POS, same ? "== eager" : "DIFFERS", ok ? "" : "  FAIL ",
                rc ? err.msg : "", st.graph_active ? "" : " (graph not active)");
        failed += !ok;
        eg->destroy(eg);
        gg->destroy(gg);
        free(ref);
        free(lg);
        free(lgg);
        zr_model_free(&m);
    }
    free(tok);
    ZT_CHECKF(failed == 0, "%d models over tolerance or graph != eager", failed);
}

/* An F16 KV cache (-ctk f16, the commands' default; the _kvh kernels) against the CPU reference
 * rounding the same K/V values to halves (ZR_KV_F16 on both): every position decoded one at a
 * time eager and through the graph (bit for bit equal), then a prefill of all of them. The GPU's
 * K and V before rounding are within ~1e-6 of the CPU's, so now and then the two round a value to
 * neighbouring halves (2^-11 of it apart), and such a value moves the later logits far more than
 * the F32 cache's differences do: H200, 160 positions, decode max|diff|/std 5.1e-5 (gemma2 Q8_0)
 * .. 3.5e-4 (llama Q8_0), F32 weights 7.3e-5 .. 1.6e-4, where an F32 cache keeps them under 3e-5
 * (ZT_DECODE_TOL). ZT_KV16_TOL allows 1e-3, with every argmax equal.
 * The F16 logits must also differ from the F32 cache's (the cache really holds halves).
 * Cases: llamas (GQA 4:1, heads of 128 and 64; from position 100, by the test-only switch
 * position, the grouped decode kernel: with heads of 64 or 128 the tensor-core one), gemma3
 * (window 40, q/k norms, heads of 256), gemma2 (caps that bite), qwen3-style 8:1 groups with
 * norms (tensor-core), and phi3's partial rotation (rope_scale_f32_kvh, the split kernels). */
#define ZT_KV16_TOL 1e-3
#define KV16_POS 160
ZT_TEST(an_f16_kv_cache_matches_the_cpu_rounding_the_same_and_graph_equals_eager) {
    if (!gpu_env()) return;
    static const Case cases[] = {
        {"llama-Q8_0-gqa4", "--arch llama --layers 3 --seed 21 --heads 8 --kv-heads 2 --head-dim 128 --type q8_0", 256},
        {"llama-F32-gqa4", "--arch llama --layers 3 --seed 22 --heads 8 --kv-heads 2 --head-dim 64 --type f32", 256},
        {"gemma3-F32-hd256-w40", "--arch gemma3 --layers 7 --seed 13 --window 40 --embd 512 --heads 4 --kv-heads 2 --head-dim 256 --type f32", 256},
        {"gemma2-Q8_0-caps-w40", "--arch gemma2 --layers 4 --seed 14 --window 40 --attn-softcap 0.5 --final-softcap 5 --type q8_0", 256},
        {"qwen3-F16-gqa8", "--arch qwen3 --layers 3 --seed 23 --heads 16 --kv-heads 2 --head-dim 64 --type f16", 256},
        {"phi3-F32-partial", "--arch phi3 --layers 3 --seed 11 --orig-ctx 64 --rope-dim 48 --type f32", 256},
    };
    int32_t *tok = walk_tokens(KV16_POS);
    int failed = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const Case *k = &cases[i];
        ZrModel m;
        ZrError err = {0};
        float *ref = case_cpu_logits(k, &m, tok, KV16_POS, ZR_KV_F16);
        ZT_CHECK(ref != NULL);
        const int V = m.hp.n_vocab;
        const size_t all = sizeof(float) * KV16_POS * V;
        float *lg = malloc(all), *lgg = malloc(all), *lp = malloc(all), *l32 = malloc(all);
        ZrBackendOptions oe = {.n_ctx = k->n_ctx, .quiet = true, .kv_type = ZR_KV_F16, .attn_group_pos = 100};
        ZrBackendOptions og = oe, o32 = {.n_ctx = k->n_ctx, .quiet = true};
        og.graph = true;
        og.verify_graph = 2;
        ZrBackend *eg = zr_cuda_backend_create(&m, &oe, &err), *gg = eg ? zr_cuda_backend_create(&m, &og, &err) : NULL;
        ZrBackend *b32 = gg ? zr_cuda_backend_create(&m, &o32, &err) : NULL;
        ZT_CHECKF(eg && gg && b32, "%s: %s", k->name, err.msg);
        int rc = 0;
        for (int t = 0; t < KV16_POS && !rc; t++) {
            rc = eg->forward(eg, &tok[t], 1, t, lg + (size_t)t * V, true, &err);
            if (!rc) rc = gg->forward(gg, &tok[t], 1, t, lgg + (size_t)t * V, true, &err);
            if (!rc) rc = b32->forward(b32, &tok[t], 1, t, l32 + (size_t)t * V, true, &err);
        }
        eg->truncate(eg, 0);
        if (!rc) rc = eg->forward(eg, tok, KV16_POS, 0, lp, true, &err);
        const ZtLogitsDiff d = zt_compare_logits(lg, ref, KV16_POS, V), dp = zt_compare_logits(lp, ref, KV16_POS, V);
        const ZtLogitsDiff d32 = zt_compare_logits(l32, lg, KV16_POS, V);
        const double ptol = zt_all_f32(&m) ? ZT_KV16_TOL : ZT_PREFILL_TOL;
        const bool same = !rc && !memcmp(lg, lgg, all);
        ZrBackendStats st;
        gg->stats(gg, &st);
        const bool ok = !rc && d.worst_rel <= ZT_KV16_TOL && d.argmax_equal == KV16_POS && dp.worst_rel <= ptol &&
                        same && st.graph_active && d32.worst_rel > 0;
        fprintf(stderr,
                "  kv16 %-22s decode max|diff|/std %.3g argmax %d/%d, prefill %.3g (tol %g), graph %s, f32 cache %.3g away%s%s\n",
                k->name, d.worst_rel, d.argmax_equal, KV16_POS, dp.worst_rel, ptol, same ? "== eager" : "DIFFERS",
                d32.worst_rel, ok ? "" : "  FAIL ", rc ? err.msg : "");
        failed += !ok;
        eg->destroy(eg);
        gg->destroy(gg);
        b32->destroy(b32);
        free(ref), free(lg), free(lgg), free(lp), free(l32);
        zr_model_free(&m);
    }
    free(tok);
    ZT_CHECKF(failed == 0, "%d models over tolerance, graph != eager or no different from an F32 cache", failed);
}

/* Launches of one recorded decode step (kernels_per_token) */
static long step_launches(const char *args) {
    char path[4200];
    ZrModel m;
    ZrError err = {0};
    if (zt_synth("cuda_arch.gguf", args, 0, path, sizeof path) != 0 || zr_model_load(&m, path, &err)) return -1;
    ZrBackendOptions og = {.n_ctx = 128, .graph = 1, .quiet = true};
    ZrBackend *gg = zr_cuda_backend_create(&m, &og, &err);
    long n = -1;
    float *lg = malloc(sizeof(float) * m.hp.n_vocab);
    int rc = gg ? gg->forward(gg, k_tokens, 4, 0, lg, false, &err) : 1;
    for (int p = 4; p < 8 && !rc; p++) rc = gg->forward(gg, &k_tokens[p], 1, p, lg, false, &err);
    if (!rc) {
        ZrBackendStats st;
        gg->stats(gg, &st);
        n = st.graph_active ? (long)st.kernels_per_token : -1;
    }
    if (rc) fprintf(stderr, "  %s: %s\n", args, err.msg);
    if (gg) gg->destroy(gg);
    free(lg);
    zr_model_free(&m);
    return n;
}

/* Issue 14: a gemma layer launches what a llama layer of the same shape and types launches: the
 * windowed / soft-capped / q-k-normed attention is one launch as llama's, GeGLU rides on the
 * gate|up product as SwiGLU does, and the two post norms on the products after them
 * (ZR_CUF_MV_ADDNORM); the embedding scale rides on the lookup. Per step gemma2 adds the final
 * soft-cap. (Before: 12 launches per gemma3 layer against llama's 5, and scale_f32 per step.) */
ZT_TEST(gemma_decode_launches_what_llama_does) {
    if (!gpu_env()) return;
    const int L = 7; /* --layers below */
    const char *shape = "--layers 7 --seed 2 --type q8_0 --embd 512 --heads 4 --kv-heads 2 --ff 1024 --tied";
    char a[512];
    snprintf(a, sizeof a, "--arch llama %s", shape);
    const long llama = step_launches(a);
    snprintf(a, sizeof a, "--arch gemma3 %s", shape);
    const long g3 = step_launches(a);
    snprintf(a, sizeof a, "--arch gemma3 %s --head-dim 256", shape);
    const long g3_256 = step_launches(a);
    snprintf(a, sizeof a, "--arch gemma2 %s", shape);
    const long g2 = step_launches(a);
    fprintf(stderr, "  kernels per token, %d layers: llama %ld, gemma3 %ld (heads of 256: %ld), gemma2 %ld\n", L, llama, g3,
            g3_256, g2);
    ZT_CHECK(llama > 0);
    ZT_CHECKF(g3 == llama, "gemma3: %ld launches, expected llama's %ld", g3, llama);
    ZT_CHECKF(g3_256 == g3, "gemma3 with heads of 256: %ld launches, expected %ld", g3_256, g3);
    ZT_CHECKF(g2 == llama + 1, "gemma2: %ld launches, expected llama's %ld + 1", g2, llama);
}

int main(void) { return gpu_main(); }
