/* Mixture of experts (issue 15): llama.cpp's routing rule, the facts and tensors zrun reads from
 * qwen3moe and Mixtral-style llama files zrun-synth writes as llama.cpp's converter does, the
 * bytes a token reads, and the CPU reference's logits against llama.cpp's own
 * (test/data/oracle_moe, made by tools/oracle_moe_goldens.sh from llama.cpp de3ff815). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu/moe.h"
#include "model.h"
#include "zt.h"
#include "zt_synth.h"
#include "zt_fixtures.h"
#include "zt_proc.h"

/* the llama.cpp goldens' prompt (zt_synth.h) */
#define N_TOK ZT_ORACLE_N_TOK
#define N_ROWS ZT_ORACLE_N_ROWS
#define V ZT_ORACLE_VOCAB
#define N_CTX ZT_ORACLE_CTX
/* the bound: max |diff| / row std of llama.cpp's logits */
#define ORACLE_TOL 1e-4

/* ---- the routing ---- */

ZT_TEST(routing_is_softmax_then_the_largest_k_renormalized_largest_first) {
    const float logits[6] = {0.5f, 2.0f, -1.0f, 1.5f, 2.0f, 0.0f};
    float probs[6];
    int32_t ids[3];
    float w[3];
    zr_cpu_moe_route(logits, probs, 6, 3, ids, w);
    /* equal probabilities: the lower id first (1 before 4) */
    ZT_CHECKF(ids[0] == 1 && ids[1] == 4 && ids[2] == 3, "chose %d %d %d", ids[0], ids[1], ids[2]);
    double z = 0;
    for (int e = 0; e < 6; e++) z += exp(logits[e]);
    const double p1 = exp(2.0) / z, p3 = exp(1.5) / z, sum = 2 * p1 + p3;
    ZT_CHECKF(fabs(w[0] - p1 / sum) < 1e-6 && fabs(w[1] - p1 / sum) < 1e-6 && fabs(w[2] - p3 / sum) < 1e-6, "weights %g %g %g", w[0], w[1], w[2]);
    ZT_CHECK(fabsf(w[0] + w[1] + w[2] - 1.0f) < 1e-6f);
    /* the softmax is over every expert, so the weights are the ratios of the chosen exps alone
     * (softmax then top-k and renormalize = top-k then softmax) */
    ZT_CHECK(fabs(w[2] / w[0] - exp(-0.5)) < 1e-6);
}

ZT_TEST(one_expert_used_gets_weight_one) {
    const float logits[4] = {-3.0f, 0.25f, 4.0f, 1.0f};
    float probs[4], w;
    int32_t id;
    zr_cpu_moe_route(logits, probs, 4, 1, &id, &w);
    ZT_CHECK(id == 2 && w == 1.0f);
}

ZT_TEST(equal_probabilities_choose_the_lowest_ids_and_share_the_weight) {
    enum { N = 1024 };
    static float logits[N], probs[N];
    int32_t ids[8];
    float w[8];
    zr_cpu_moe_route(logits, probs, N, 8, ids, w);
    for (int j = 0; j < 8; j++) ZT_CHECKF(ids[j] == j && fabsf(w[j] - 0.125f) < 1e-7f, "slot %d: expert %d weight %g", j, ids[j], w[j]);
    /* the largest probability is >= 1 / n_expert >= 2^-10, so llama.cpp's clamp of the sum at 2^-14
     * never bites within MAX_EXPERTS; it is kept for the same formula */
    ZT_CHECK(ZR_MOE_MIN_WEIGHT_SUM == 0x1p-14f);
}

/* ---- the facts ---- */

ZT_TEST(qwen3moe_binds_the_router_and_3d_expert_tensors_with_its_expert_width) {
    ZT_NEED_SYNTH();
    char p[4096];
    ZT_CHECK(zt_synth("q.gguf", "--arch qwen3moe --layers 2 --experts 16 --experts-used 4 --ff-expert 64 --type f32", 2, p, sizeof p) == 0);
    ZrModel m;
    ZrError err;
    ZT_CHECKF(zr_model_load(&m, p, &err) == 0, "%s", err.msg);
    ZT_CHECK(m.hp.arch == ZR_ARCH_QWEN3MOE && m.hp.rope == ZR_ROPE_NEOX);
    for (int il = 0; il < 2; il++) {
        const ZrLayer *L = &m.layers[il];
        const ZrLayerFacts *f = &L->facts;
        ZT_CHECKF(f->n_expert == 16 && f->n_expert_used == 4 && f->n_ff_expert == 64, "layer %d: %d %d %d", il, f->n_expert, f->n_expert_used,
                  f->n_ff_expert);
        ZT_CHECK(f->qk_norm && f->act == ZR_ACT_SILU && !L->w_gate.data && !L->w_up.data && !L->w_down.data);
        ZT_CHECK(L->ffn_gate_inp.ne0 == 256 && L->ffn_gate_inp.ne1 == 16);
        ZT_CHECK(L->gate_exps.ne0 == 256 && L->gate_exps.ne1 == 64 * 16 && L->up_exps.ne1 == 64 * 16);
        ZT_CHECK(L->down_exps.ne0 == 64 && L->down_exps.ne1 == 256 * 16);
        /* expert e: rows [e 64, (e + 1) 64) of the one tensor */
        const ZrWeight e3 = zr_weight_expert(&L->gate_exps, 16, 3);
        ZT_CHECK(e3.ne0 == 256 && e3.ne1 == 64 && e3.data == (const char *)L->gate_exps.data + 3 * 64 * 256 * sizeof(float));
        ZT_CHECK(e3.nbytes == 64 * 256 * sizeof(float));
    }
    zr_model_free(&m);
}

ZT_TEST(llama_experts_are_ff_wide_and_a_token_reads_only_the_chosen_share) {
    ZT_NEED_SYNTH();
    char p[4096];
    ZT_CHECK(zt_synth("l.gguf", "--arch llama --layers 2 --experts 8 --experts-used 2 --ff 128 --type f32", 2, p, sizeof p) == 0);
    ZrModel m;
    ZrError err;
    ZT_CHECKF(zr_model_load(&m, p, &err) == 0, "%s", err.msg);
    const ZrLayerFacts *f = &m.layers[1].facts;
    ZT_CHECK(f->n_expert == 8 && f->n_expert_used == 2 && f->n_ff_expert == 128);
    /* the experts: 3 matrices of 128 x 256 per expert, 2 layers; a token reads 2 of 8 */
    const uint64_t expert_params = 3ull * 128 * 256, all = 2 * 8 * expert_params, used = 2 * 2 * expert_params;
    ZT_CHECKF(m.n_params - m.n_params_active == all - used, "%llu %llu", (unsigned long long)m.n_params, (unsigned long long)m.n_params_active);
    uint64_t file_weights = 0;
    for (uint64_t i = 0; i < m.gguf.n_tensors; i++) file_weights += m.gguf.tensors[i].nbytes;
    /* one embedding row of 512 instead of the table; the experts' share */
    const uint64_t want = file_weights - 511ull * 256 * 4 - (all - used) * 4;
    ZT_CHECKF(m.bytes_per_token == want, "bytes per token %llu, expected %llu", (unsigned long long)m.bytes_per_token, (unsigned long long)want);
    zr_model_free(&m);
}

ZT_TEST(zrun_synth_refuses_expert_counts_llama_cpp_would_assert_on) {
    ZT_NEED_SYNTH();
    char p[4096];
    ZT_CHECK(zt_synth("bad.gguf", "--arch llama --layers 1 --experts 4 --experts-used 5 --type f32", 2, p, sizeof p) == 2);
    ZT_CHECK(zt_synth("bad.gguf", "--arch llama --layers 1 --experts 4 --type f32", 2, p, sizeof p) == 2);
    ZT_CHECK(zt_synth("bad.gguf", "--arch qwen2 --layers 1 --experts 4 --experts-used 2 --type f32", 2, p, sizeof p) == 2);
}

/* ---- the forward pass ---- */

ZT_TEST(prefill_and_token_by_token_decode_give_the_same_logits) {
    ZT_NEED_SYNTH();
    /* the prefill groups tokens by expert; one token at a time runs each chosen expert alone: a
     * row's dot product gives the same bits either way (cpu/matmul.h) */
    char p[4096];
    ZT_CHECK(zt_synth("pd.gguf", "--arch qwen3moe --layers 2 --seed 3 --type q8_0", 2, p, sizeof p) == 0);
    ZtCpuModel a, b;
    ZT_CHECK(zt_cpu_model_load(&a, p, 64));
    ZT_CHECK(zt_cpu_model_load(&b, p, 64));
    enum { N = 24 };
    static float all[N * V], one[V];
    ZrError err;
    ZT_CHECKF(a.be->forward(a.be, zt_oracle_tokens, N, 0, all, true, &err) == 0, "%s", err.msg);
    for (int t = 0; t < N; t++) {
        ZT_CHECKF(b.be->forward(b.be, &zt_oracle_tokens[t], 1, t, one, false, &err) == 0, "%s", err.msg);
        ZT_CHECKF(memcmp(one, all + t * V, sizeof one) == 0, "token %d: decode logits differ from the prefill's", t);
    }
    zt_cpu_model_free(&a);
    zt_cpu_model_free(&b);
}

ZT_TEST(the_chosen_experts_change_from_token_to_token) {
    ZT_NEED_SYNTH();
    char p[4096];
    ZT_CHECK(zt_synth("ch.gguf", "--arch qwen3moe --layers 2 --seed 3 --type f32", 2, p, sizeof p) == 0);
    ZtCpuModel l;
    ZT_CHECK(zt_cpu_model_load(&l, p, 64));
    ZT_CHECK(zr_cpu_backend_moe_last(l.be, 0) == NULL); /* before any token */
    static float lg[V];
    ZrError err;
    int32_t sets[N_TOK][4];
    int distinct = 0;
    for (int t = 0; t < N_TOK; t++) {
        ZT_CHECKF(l.be->forward(l.be, &zt_oracle_tokens[t], 1, t, lg, false, &err) == 0, "%s", err.msg);
        const int32_t *ids = zr_cpu_backend_moe_last(l.be, 1);
        ZT_CHECK(ids != NULL);
        memcpy(sets[t], ids, sizeof sets[t]);
        bool seen = false;
        for (int u = 0; u < t && !seen; u++) seen = !memcmp(sets[u], sets[t], sizeof sets[t]);
        distinct += !seen;
        for (int j = 0; j < 4; j++) ZT_CHECK(ids[j] >= 0 && ids[j] < 16);
    }
    fprintf(stderr, "  layer 1: %d distinct expert sets (ordered) over %d tokens\n", distinct, N_TOK);
    ZT_CHECK(distinct > N_TOK / 2);
    zt_cpu_model_free(&l);
}

/* ---- llama.cpp ---- */

typedef struct Case {
    const char *name, *args;
} Case;

/* Keep in step with tools/oracle_moe_goldens.sh (F32 weights, F16, one quantized type; the
 * references are llama.cpp's logits on each model's F32 twin). */
static const Case k_cases[] = {
    {"qwen3moe-F32", "--arch qwen3moe --layers 3 --seed 5 --type f32"},
    {"qwen3moe-F16", "--arch qwen3moe --layers 3 --seed 5 --type f16"},
    {"qwen3moe-Q4_K_M", "--arch qwen3moe --layers 3 --seed 5 --type q4_k_m"},
    /* Qwen3-30B-A3B's ratio: 8 of 64 narrow experts */
    {"qwen3moe-wide-F32", "--arch qwen3moe --layers 2 --seed 7 --experts 64 --experts-used 8 --ff-expert 32 --type f32"},
    {"llama-moe-F32", "--arch llama --layers 3 --seed 6 --experts 8 --experts-used 2 --type f32"},
    {"llama-moe-F16", "--arch llama --layers 3 --seed 6 --experts 8 --experts-used 2 --type f16"},
    {"llama-moe-Q4_K_M", "--arch llama --layers 3 --seed 6 --experts 8 --experts-used 2 --type q4_k_m"},
    {"llama-moe-top1-F32", "--arch llama --layers 2 --seed 8 --experts 4 --experts-used 1 --ff-expert 128 --type f32"},
    /* a mixed quantization: up experts in another type than gate */
    {"qwen3moe-mixed-Q4_K", "--arch qwen3moe --layers 2 --seed 12 --type q4_k --up-type q8_0"},
};

ZT_TEST(qwen3moe_and_mixtral_style_llama_logits_match_llama_cpp) {
    ZT_NEED_SYNTH();
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        const Case *k = &k_cases[i];
        ZtLogitsDiff d;
        ZT_CHECKF(zt_oracle_compare("oracle_moe", k->name, k->args, &d), "%s", k->name);
        ZT_CHECKF(d.worst_rel <= ORACLE_TOL, "%s: %.3g > %.3g", k->name, d.worst_rel, ORACLE_TOL);
        ZT_CHECKF(d.argmax_equal == N_ROWS, "%s: argmax equal at %d of %d rows", k->name, d.argmax_equal, N_ROWS);
    }
}

/* ---- zrun info ---- */

ZT_TEST(info_shows_the_experts_and_a_tokens_share) {
    ZT_NEED_SYNTH();
    if (!getenv("ZRUN")) {
        zt_skip("$ZRUN is not set (run through meson test)");
        return;
    }
    char p[4096];
    ZT_CHECK(zt_synth("i.gguf", "--arch qwen3moe --layers 2 --type f32", 2, p, sizeof p) == 0);
    ZtProc r = zt_proc_zrun(NULL, (const char *const[]){"info", p, NULL}, NULL);
    ZT_CHECKF(r.status == 0, "%s", r.err);
    ZT_CHECKF(strstr(r.out, "expert_count                       16"), "%s", r.out);
    ZT_CHECKF(strstr(r.out, "expert_feed_forward_length         64"), "%s", r.out);
    ZT_CHECKF(strstr(r.out, "16 experts (4 used) of width 64"), "%s", r.out);
    ZT_CHECKF(strstr(r.out, "experts: a token uses "), "%s", r.out);
    zt_proc_free(&r);
}

ZT_TEST(bench_counts_the_bytes_of_the_chosen_experts_not_the_file) {
    ZT_NEED_SYNTH();
    if (!getenv("ZRUN")) {
        zt_skip("$ZRUN is not set (run through meson test)");
        return;
    }
    char p[4096];
    ZT_CHECK(zt_synth("b.gguf", "--arch qwen3moe --layers 2 --type f32", 2, p, sizeof p) == 0);
    ZrModel m;
    ZrError err;
    ZT_CHECKF(zr_model_load(&m, p, &err) == 0, "%s", err.msg);
    char want[64];
    snprintf(want, sizeof want, "\"bytes_per_token\": %llu,", (unsigned long long)m.bytes_per_token);
    ZT_CHECK(m.bytes_per_token < m.gguf.len / 2); /* 4 of 16 experts: well under half the file */
    zr_model_free(&m);
    ZtProc r = zt_proc_zrun(NULL, (const char *const[]){"bench", "-m", p, "-p", "4", "-n", "2", "-r", "1", "-o", "json", "--device", "cpu", "-t", "1", NULL},
                            NULL);
    ZT_CHECKF(r.status == 0, "%s", r.err);
    ZT_CHECKF(strstr(r.out, want), "'%s' not in: %s", want, r.out);
    zt_proc_free(&r);
}

int main(void) { return zt_run(); }
