/* zrun-synth ($ZRUN_SYNTH): the models it writes are valid, have the requested shape, types
 * and statistics, and are the same bytes for the same seed. */
#include <sys/wait.h>

#include "gguf.h"
#include "quant.h"
#include "zt.h"
#include "zt_synth.h"
#include "zt_proc.h"

/* The binary comes from meson test's environment; run by hand without it, the tests skip. */
#define NEED_BINARY()                                                             \
    do {                                                                          \
        if (!getenv("ZRUN_SYNTH")) {                                                   \
            zt_skip("ZRUN_SYNTH is not set (run through meson test)");                 \
            return;                                                              \
        }                                                                         \
    } while (0)

/* Runs zrun-synth with args, writing to tmpdir/name; returns the exit code. */
static bool same_file(const char *a, const char *b) {
    size_t la, lb;
    char *x = zt_read_file(a, &la), *y = zt_read_file(b, &lb);
    bool same = x && y && la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

ZT_TEST(synth_is_deterministic_for_a_seed_and_any_thread_count) {
    NEED_BINARY();
    char a[4200], b[4200], c[4200];
    ZT_CHECK(zt_synth("d1.gguf", "--type q4_k_m --seed 7 --threads 1", 0, a, sizeof a) == 0);
    ZT_CHECK(zt_synth("d2.gguf", "--type q4_k_m --seed 7 --threads 3", 0, b, sizeof b) == 0);
    ZT_CHECK(zt_synth("d3.gguf", "--type q4_k_m --seed 8", 0, c, sizeof c) == 0);
    ZT_CHECK(same_file(a, b));
    ZT_CHECK(!same_file(a, c));
}

/* The Q4_K_M file has, tensor for tensor, the types llama.cpp gave the llama-Q4_K_M fixture of
 * the same shape (embd 256, 2 layers, 4/2 heads, ff 256, vocab 512). */
ZT_TEST(synth_q4_k_m_mix_matches_llama_cpp_tensor_for_tensor) {
    NEED_BINARY();
    const char *ref_path = zt_shared_model("fixtures/llama-Q4_K_M.gguf");
    if (!ref_path) return;
    char p[4200];
    ZT_CHECK(zt_synth("mix.gguf", "--type q4_k_m --seed 3", 0, p, sizeof p) == 0);
    ZrGguf g;
    ZrError e;
    ZT_CHECKF(zr_gguf_open(&g, p, &e) == 0, "%s", e.msg);
    ZrGguf ref;
    int bad = 0;
    if (zr_gguf_open(&ref, ref_path, &e) != 0) {
        fprintf(stderr, "  %s\n", e.msg);
        bad++;
    } else {
        bad += ref.n_tensors != g.n_tensors;
        for (uint64_t i = 0; i < ref.n_tensors; i++) {
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)ref.tensors[i].name.len, ref.tensors[i].name.ptr);
            const ZrGgufTensor *t = zr_gguf_tensor(&g, name);
            if (!t || t->type != ref.tensors[i].type || t->ne[0] != ref.tensors[i].ne[0] || t->ne[1] != ref.tensors[i].ne[1]) {
                fprintf(stderr, "  %s: expected %s, found %s\n", name, zr_type_name(ref.tensors[i].type), t ? zr_type_name(t->type) : "none");
                bad++;
            }
        }
        zr_gguf_close(&ref);
    }
    const ZrGgufTensor *out = zr_gguf_tensor(&g, "output.weight"), *v0 = zr_gguf_tensor(&g, "blk.0.attn_v.weight"),
                       *v1 = zr_gguf_tensor(&g, "blk.1.attn_v.weight"), *d1 = zr_gguf_tensor(&g, "blk.1.ffn_down.weight"),
                       *n0 = zr_gguf_tensor(&g, "blk.0.attn_norm.weight"), *q0 = zr_gguf_tensor(&g, "blk.0.attn_q.weight");
    bool ok = out && out->type == ZR_TYPE_Q6_K && v0 && v0->type == ZR_TYPE_Q4_K && v1 && v1->type == ZR_TYPE_Q6_K && d1 &&
              d1->type == ZR_TYPE_Q6_K && n0 && n0->type == ZR_TYPE_F32 && q0 && q0->type == ZR_TYPE_Q4_K;
    uint32_t ft = 0;
    zr_gguf_get_u32(&g, "general.file_type", &ft, &e);
    zr_gguf_close(&g);
    ZT_CHECK(ok);
    ZT_CHECK(ft == 15);
    ZT_CHECKF(bad == 0, "%d differences from the fixture", bad);
}

/* The Q2_K, Q3_K_M and Q5_K_M mixes have, tensor for tensor, the types and file type llama.cpp
 * gave the fixtures of the same shape (embd 256, 2 layers, 4/2 heads, ff 256, vocab 512). */
ZT_TEST(synth_q2_k_q3_k_m_and_q5_k_m_mixes_match_llama_cpp_tensor_for_tensor) {
    NEED_BINARY();
    static const struct { const char *type, *fixture; uint32_t ftype; } mixes[] = {
        {"q2_k_mix", "fixtures/llama-Q2_K.gguf", 10},
        {"q3_k_m", "fixtures/llama-Q3_K_M.gguf", 12},
        {"q5_k_m", "fixtures/llama-Q5_K_M.gguf", 17},
    };
    for (size_t m = 0; m < sizeof mixes / sizeof *mixes; m++) {
        const char *ref_path = zt_shared_model(mixes[m].fixture);
        if (!ref_path) return;
        char p[4200], args[64];
        snprintf(args, sizeof args, "--type %s --seed 3", mixes[m].type);
        ZT_CHECKF(zt_synth("mix.gguf", args, 0, p, sizeof p) == 0, "%s", mixes[m].type);
        ZrGguf g, ref;
        ZrError e;
        if (zr_gguf_open(&g, p, &e) != 0) {
            ZT_CHECKF(false, "%s", e.msg);
            return;
        }
        if (zr_gguf_open(&ref, ref_path, &e) != 0) {
            zr_gguf_close(&g);
            ZT_CHECKF(false, "%s", e.msg);
            return;
        }
        int bad = ref.n_tensors != g.n_tensors;
        for (uint64_t i = 0; i < ref.n_tensors; i++) {
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)ref.tensors[i].name.len, ref.tensors[i].name.ptr);
            const ZrGgufTensor *t = zr_gguf_tensor(&g, name);
            if (!t || t->type != ref.tensors[i].type) {
                fprintf(stderr, "  %s %s: expected %s, found %s\n", mixes[m].type, name, zr_type_name(ref.tensors[i].type),
                        t ? zr_type_name(t->type) : "none");
                bad++;
            }
        }
        uint32_t ft = 0;
        zr_gguf_get_u32(&g, "general.file_type", &ft, &e);
        zr_gguf_close(&ref);
        zr_gguf_close(&g);
        ZT_CHECKF(ft == mixes[m].ftype, "%s: general.file_type %u", mixes[m].type, ft);
        ZT_CHECKF(bad == 0, "%s: %d differences from the fixture", mixes[m].type, bad);
    }
}

ZT_TEST(synth_writes_every_weight_type_with_fallbacks_for_short_rows) {
    NEED_BINARY();
    static const char *const types[] = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1",
                                        "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "q4_k_m"};
    static const uint32_t ids[] = {ZR_TYPE_F32, ZR_TYPE_F16, ZR_TYPE_BF16, ZR_TYPE_Q8_0, ZR_TYPE_Q4_0,
                                   ZR_TYPE_Q4_1, ZR_TYPE_Q5_0, ZR_TYPE_Q5_1, ZR_TYPE_Q2_K, ZR_TYPE_Q3_K,
                                   ZR_TYPE_Q4_K, ZR_TYPE_Q5_K, ZR_TYPE_Q6_K, ZR_TYPE_Q4_K};
    for (int i = 0; i < 14; i++) {
        char p[4200], args[256];
        /* ff 96: ffn_down rows (96) fit no K-quant block: q8_0 instead; embd 256 fits all */
        snprintf(args, sizeof args, "--type %s --layers 1 --ff 96 --vocab 300", types[i]);
        ZT_CHECKF(zt_synth("types.gguf", args, 0, p, sizeof p) == 0, "%s", types[i]);
        ZrGguf g;
        ZrError e;
        ZT_CHECKF(zr_gguf_open(&g, p, &e) == 0, "%s: %s", types[i], e.msg);
        const ZrGgufTensor *q = zr_gguf_tensor(&g, "blk.0.attn_q.weight"), *d = zr_gguf_tensor(&g, "blk.0.ffn_down.weight");
        uint32_t qt = q ? q->type : 999, dt = d ? d->type : 999;
        zr_gguf_close(&g);
        ZT_CHECKF(qt == ids[i], "%s: attn_q is %s", types[i], zr_type_name(qt));
        uint32_t want_d = zr_type_info(ids[i])->block == 256 ? ZR_TYPE_Q8_0 : ids[i];
        if (i == 13) want_d = ZR_TYPE_Q8_0; /* q4_k_m: q6_K would not fit either */
        ZT_CHECKF(dt == want_d, "%s: ffn_down is %s", types[i], zr_type_name(dt));
    }
}

ZT_TEST(synth_architectures_have_their_own_tensors_and_keys) {
    NEED_BINARY();
    char p[4200];
    ZrGguf g;
    ZrError e;
    ZT_CHECK(zt_synth("qwen2.gguf", "--arch qwen2 --type q8_0", 0, p, sizeof p) == 0);
    ZT_CHECKF(zr_gguf_open(&g, p, &e) == 0, "%s", e.msg);
    const ZrGgufTensor *qb = zr_gguf_tensor(&g, "blk.1.attn_q.bias"), *kb = zr_gguf_tensor(&g, "blk.1.attn_k.bias");
    float theta = 0;
    bool q2 = qb && qb->ne[0] == 256 && qb->type == ZR_TYPE_F32 && kb && kb->ne[0] == 128 &&
              zr_gguf_get_f32(&g, "qwen2.rope.freq_base", &theta, &e) == 0 && theta == 1e6f && g.n_tensors == 27;
    zr_gguf_close(&g);
    ZT_CHECK(q2);
    ZT_CHECK(zt_synth("qwen3.gguf", "--arch qwen3 --tied --type q6_k", 0, p, sizeof p) == 0);
    ZT_CHECKF(zr_gguf_open(&g, p, &e) == 0, "%s", e.msg);
    const ZrGgufTensor *qn = zr_gguf_tensor(&g, "blk.0.attn_q_norm.weight"), *emb = zr_gguf_tensor(&g, "token_embd.weight");
    uint32_t kl = 0;
    bool q3 = qn && qn->ne[0] == 64 && emb && emb->type == ZR_TYPE_Q6_K && !zr_gguf_tensor(&g, "output.weight") &&
              zr_gguf_get_u32(&g, "qwen3.attention.key_length", &kl, &e) == 0 && kl == 64 && g.n_tensors == 24;
    zr_gguf_close(&g);
    ZT_CHECK(q3);
    ZT_CHECK(zt_synth("shape.gguf", "--embd 128 --layers 3 --heads 8 --kv-heads 2 --head-dim 32 --ff 320 --vocab 1000 --ctx 512 --theta 5e5 --eps 1e-6", 0, p, sizeof p) == 0);
    ZT_CHECKF(zr_gguf_open(&g, p, &e) == 0, "%s", e.msg);
    uint32_t ctx = 0, ff = 0, layers = 0, vocab = 0;
    float eps = 0;
    const ZrGgufTensor *k2 = zr_gguf_tensor(&g, "blk.2.attn_k.weight"), *o2 = zr_gguf_tensor(&g, "blk.2.attn_output.weight"),
                       *out = zr_gguf_tensor(&g, "output.weight");
    int rc = zr_gguf_get_u32(&g, "llama.context_length", &ctx, &e) | zr_gguf_get_u32(&g, "llama.feed_forward_length", &ff, &e) |
             zr_gguf_get_u32(&g, "llama.block_count", &layers, &e) | zr_gguf_get_u32(&g, "llama.vocab_size", &vocab, &e) |
             zr_gguf_get_f32(&g, "llama.attention.layer_norm_rms_epsilon", &eps, &e);
    bool sh = rc == 0 && ctx == 512 && ff == 320 && layers == 3 && vocab == 1000 && eps == 1e-6f && k2 && k2->ne[0] == 128 &&
              k2->ne[1] == 64 && o2 && o2->ne[0] == 256 && o2->ne[1] == 128 && out && out->ne[1] == 1000 &&
              zr_gguf_find(&g, "llama.attention.key_length") != NULL;
    zr_gguf_close(&g);
    ZT_CHECK(sh);
}

ZT_TEST(synth_weights_have_the_requested_mean_and_deviation) {
    NEED_BINARY();
    char p[4200];
    ZT_CHECK(zt_synth("stats.gguf", "--type f32 --std 0.02 --seed 11", 0, p, sizeof p) == 0);
    ZrGguf g;
    ZrError e;
    ZT_CHECKF(zr_gguf_open(&g, p, &e) == 0, "%s", e.msg);
    const ZrGgufTensor *q = zr_gguf_tensor(&g, "blk.0.ffn_up.weight"), *n = zr_gguf_tensor(&g, "output_norm.weight");
    double s = 0, s2 = 0, ns = 0, ns2 = 0;
    int64_t cnt = q->ne[0] * q->ne[1];
    const float *x = q->data, *y = n->data;
    int64_t within = 0, beyond2 = 0; /* |x| < 1 sd: 68.27%; > 2 sd: 4.55% for a normal */
    for (int64_t i = 0; i < cnt; i++) {
        s += x[i], s2 += (double)x[i] * x[i];
        within += fabsf(x[i]) < 0.02f;
        beyond2 += fabsf(x[i]) > 0.04f;
    }
    for (int64_t i = 0; i < n->ne[0]; i++) ns += y[i], ns2 += (double)y[i] * y[i];
    double mean = s / (double)cnt, sd = sqrt(s2 / (double)cnt - mean * mean);
    double nmean = ns / (double)n->ne[0], nsd = sqrt(ns2 / (double)n->ne[0] - nmean * nmean);
    zr_gguf_close(&g);
    ZT_NEAR(mean, 0.0, 0.001);
    ZT_NEAR(sd, 0.02, 0.0005);
    ZT_NEAR(nmean, 1.0, 0.02);
    ZT_NEAR(nsd, 0.1, 0.015);
    ZT_NEAR((double)within / (double)cnt, 0.6827, 0.006);
    ZT_NEAR((double)beyond2 / (double)cnt, 0.0455, 0.003);
}

ZT_TEST(synth_vocab_is_sentencepiece_style_and_unique) {
    NEED_BINARY();
    char p[4200];
    ZT_CHECK(zt_synth("vocab.gguf", "--vocab 3000 --layers 1", 0, p, sizeof p) == 0);
    ZrGguf g;
    ZrError e;
    ZT_CHECKF(zr_gguf_open(&g, p, &e) == 0, "%s", e.msg);
    const ZrGgufKv *toks = NULL, *scores = NULL, *types = NULL;
    int rc = zr_gguf_get_arr(&g, "tokenizer.ggml.tokens", ZR_GGUF_STRING, &toks, &e) |
             zr_gguf_get_arr(&g, "tokenizer.ggml.scores", ZR_GGUF_FLOAT32, &scores, &e) |
             zr_gguf_get_arr(&g, "tokenizer.ggml.token_type", ZR_GGUF_INT32, &types, &e);
    ZrStr model = {0};
    rc |= zr_gguf_get_str(&g, "tokenizer.ggml.model", &model, &e);
    int dups = 0;
    bool shape = false;
    if (!rc) {
        ZrStr *t = malloc(toks->n * sizeof *t);
        zr_gguf_arr_strings(toks, t);
        shape = toks->n == 3000 && scores->n == 3000 && types->n == 3000 && zr_str_eq(model, "llama") &&
                zr_str_eq(t[0], "<unk>") && zr_str_eq(t[1], "<s>") && zr_str_eq(t[2], "</s>") && zr_str_eq(t[3], "<0x00>") &&
                zr_str_eq(t[258], "<0xFF>") && zr_str_eq(t[259], "a") && zr_str_eq(t[260], "\xe2\x96\x81" "a") &&
                zr_gguf_arr_num(types, 1) == 3 && zr_gguf_arr_num(types, 10) == 6 && zr_gguf_arr_num(types, 300) == 1;
        for (uint64_t i = 0; i < toks->n; i++)
            for (uint64_t j = i + 1; j < toks->n; j++)
                dups += t[i].len == t[j].len && !memcmp(t[i].ptr, t[j].ptr, t[i].len);
        free(t);
    }
    zr_gguf_close(&g);
    ZT_CHECKF(rc == 0, "%s", e.msg);
    ZT_CHECK(shape);
    ZT_CHECK(dups == 0);
}

ZT_TEST(synth_copies_the_tokenizer_of_a_vocab_file) {
    NEED_BINARY();
    const char *src = zt_shared_model("models/stories260K.gguf");
    if (!src) return;
    char p[4200], args[4300];
    snprintf(args, sizeof args, "--vocab '%s' --type q8_0", src);
    ZT_CHECK(zt_synth("copied.gguf", args, 0, p, sizeof p) == 0);
    ZrGguf a, b;
    ZrError e;
    ZT_CHECK(zr_gguf_open(&a, src, &e) == 0);
    ZT_CHECKF(zr_gguf_open(&b, p, &e) == 0, "%s", e.msg);
    int same = 0, tok_keys = 0;
    for (uint64_t i = 0; i < a.n_kv; i++) {
        if (a.kv[i].key.len < 10 || memcmp(a.kv[i].key.ptr, "tokenizer.", 10)) continue;
        tok_keys++;
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)a.kv[i].key.len, a.kv[i].key.ptr);
        const ZrGgufKv *k = zr_gguf_find(&b, key);
        same += k && k->type == a.kv[i].type && k->value_bytes == a.kv[i].value_bytes &&
                !memcmp(k->value, a.kv[i].value, k->value_bytes);
    }
    uint32_t vocab = 0;
    zr_gguf_get_u32(&b, "llama.vocab_size", &vocab, &e);
    const ZrGgufTensor *emb = zr_gguf_tensor(&b, "token_embd.weight");
    bool ok = emb && emb->ne[1] == 512 && vocab == 512;
    zr_gguf_close(&a);
    zr_gguf_close(&b);
    ZT_CHECK(tok_keys == 9 && same == tok_keys);
    ZT_CHECK(ok);
}

ZT_TEST(synth_usage_errors_exit_2) {
    NEED_BINARY();
    char p[4200];
    ZT_CHECK(zt_synth("u.gguf", "--type q9_9 2>/dev/null", 0, p, sizeof p) == 2);
    ZT_CHECK(zt_synth("u.gguf", "--arch gpt2 2>/dev/null", 0, p, sizeof p) == 2);
    ZT_CHECK(zt_synth("u.gguf", "--embd -4 2>/dev/null", 0, p, sizeof p) == 2);
    ZT_CHECK(zt_synth("u.gguf", "--vocab 100 2>/dev/null", 0, p, sizeof p) == 2);
    ZT_CHECK(zt_synth("u.gguf", "--heads 4 --kv-heads 3 2>/dev/null", 0, p, sizeof p) == 2);
}

int main(void) { return zt_run(); }
