/* zrun-synth: writes a GGUF model of a chosen architecture, shape and weight type with random
 * N(0, s^2) weights from a seed, so tests and benchmarks never depend on files they cannot make.
 *
 * The file is written streaming (metadata, then each tensor row by row), so full-size shapes
 * (Llama-3-8B is 16 GB in F16) need only a bounded buffer. Rows are generated and quantized by
 * worker threads; each row's random stream depends only on (seed, tensor, row), so the bytes
 * are the same for any thread count. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf.h"
#include "gguf_write.h"
#include "quant.h"

static const char k_usage[] =
    "usage: zrun-synth -o OUT.gguf [options]\n"
    "  -o, --out FILE        output file\n"
    "      --arch A          llama | qwen2 | qwen3 | gemma2 | gemma3 | phi3 | qwen3moe (default llama)\n"
    "      --shape S         tiny | llama3.2-1b | llama3.2-3b | llama3-8b | gemma3-4b | gemma3-12b |\n"
    "                        qwen3-30b-a3b | mixtral-8x7b (default tiny); the flags below override it\n"
    "      --embd N          embedding length\n"
    "      --layers N        block count\n"
    "      --heads N         query heads\n"
    "      --kv-heads N      key/value heads\n"
    "      --head-dim N      head dimension (default embd / heads)\n"
    "      --ff N            feed-forward length\n"
    "      --vocab N|FILE    vocabulary size (a synthesized SentencePiece-style vocab), or a GGUF\n"
    "                        file whose tokenizer.* keys are copied (its size wins)\n"
    "      --ctx N           context length\n"
    "      --theta F         rope frequency base\n"
    "      --window N        gemma2/gemma3: sliding window of the local layers (default 16 for tiny, else\n"
    "                        4096 gemma2, 1024 gemma3)\n"
    "      --attn-softcap F, --final-softcap F\n"
    "                        gemma2: the soft-caps (default 50 and 30, Gemma 2's); gemma3: a final soft-cap\n"
    "      --rope-dim N      values rotated per head (default: the head dimension; Phi-4-mini: 3/4 of it)\n"
    "      --orig-ctx N      phi3: write LongRoPE factors (rope_factors_long/short) with this original\n"
    "                        context (long factors when the context used is larger; default: none)\n"
    "      --eps F           RMS norm epsilon (default 1e-5)\n"
    "      --experts N       llama, qwen3moe: a mixture of N experts per layer (ffn_gate_inp and 3-D\n"
    "                        ffn_{gate,up,down}_exps, as llama.cpp's converter writes Mixtral and Qwen3-MoE)\n"
    "      --experts-used K  experts chosen per token (with --experts)\n"
    "      --ff-expert N     each expert's hidden width (qwen3moe: expert_feed_forward_length; llama: the\n"
    "                        feed-forward length, as llama.cpp reads it)\n"
    "      --up-type T       the type of ffn_up_exps alone (a mixed quantization; default: --type's)\n"
    "      --tied, --untied  output projection tied to token_embd (no output.weight), or not\n"
    "      --type T          f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k, or a llama.cpp\n"
    "                        mix q2_k_mix q3_k_m q4_k_m q5_k_m (default f16; q4_k_m: q4_K with q6_K for output\n"
    "                        and some attn_v/ffn_down; q3_k_m: q3_K, q6_K output, q4_K/q5_K attn_v, attn_output,\n"
    "                        ffn_down; q5_k_m as q4_k_m around q5_K; q2_k_mix: llama.cpp's Q2_K file, q2_K with\n"
    "                        q6_K output, q3_K attn_output and ffn_down, attn_v q4_K where 4 or more query heads\n"
    "                        share a KV head, else q3_K; q2_k: every matrix q2_K)\n"
    "      --seed N          random seed (default 1)\n"
    "      --std S           standard deviation of the weight matrices (default 0.05)\n"
    "  -t, --threads N       worker threads (default: all cores)\n"
    "  -q, --quiet           no progress on standard error\n"
    "presets: tiny = embd 256, 2 layers, 4/2 heads, ff 256, vocab 512, ctx 2048, theta 10000\n"
    "         llama3.2-1b = embd 2048, 16 layers, 32/8 heads, ff 8192, vocab 128256, tied, theta 500000\n"
    "         llama3.2-3b = embd 3072, 28 layers, 24/8 heads, ff 8192, vocab 128256, tied, theta 500000\n"
    "         llama3-8b = embd 4096, 32 layers, 32/8 heads, ff 14336, vocab 128256, theta 500000\n"
    "         gemma3-4b = embd 2560, 34 layers, 8/4 heads of 256, ff 10240, vocab 262208, tied, theta 1e6,\n"
    "                     eps 1e-6 (with --arch gemma3)\n"
    "         gemma3-12b = embd 3840, 48 layers, 16/8 heads of 256, ff 15360, vocab 262208, tied, theta 1e6,\n"
    "                      eps 1e-6 (with --arch gemma3)\n"
    "         qwen3-30b-a3b = embd 2048, 48 layers, 32/4 heads of 128, ff 6144, 128 experts (8 used) of 768,\n"
    "                         vocab 151936, theta 1000000, eps 1e-6 (with --arch qwen3moe)\n"
    "         mixtral-8x7b = embd 4096, 32 layers, 32/8 heads, ff 14336, 8 experts (2 used), vocab 32000,\n"
    "                        theta 1000000 (with --arch llama)\n"
    "         qwen3moe on tiny: 16 experts (4 used) of 64\n";

typedef struct Shape {
    int64_t embd, layers, heads, kv_heads, head_dim, ff, vocab, ctx;
    double theta, eps;
    int tied; /* -1: the preset's / architecture's default */
    int64_t experts, experts_used, ff_exp; /* 0: a dense FFN */
} Shape;

/* How a tensor's values are drawn. */
typedef enum Init { INIT_MATRIX, INIT_NORM, INIT_BIAS, INIT_FACTOR } Init;

typedef struct Tensor {
    char name[64];
    uint32_t type;
    int64_t ne[3]; /* ne[2]: experts of a 3-D expert tensor, else 1 */
    uint32_t n_dims;
    Init init;
    float std;
} Tensor;

/* ---- random numbers ------------------------------------------------------------------ */

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

typedef struct Rng { uint64_t s[4]; } Rng;

static Rng rng_for_row(uint64_t seed, uint64_t tensor, uint64_t row) {
    uint64_t k = seed * 0x9E3779B97F4A7C15ull ^ (tensor << 40) ^ row;
    Rng r;
    uint64_t sm = splitmix64(&k);
    for (int i = 0; i < 4; i++) r.s[i] = splitmix64(&sm);
    return r;
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t rng_next(Rng *r) { /* xoshiro256++ */
    uint64_t *s = r->s, out = rotl(s[0] + s[3], 23) + s[0], t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

/* Natural log of u in (0, 1], without libm (so the loop below vectorizes and the bits do not
 * depend on the libm at hand): u = 2^e * m with m in [sqrt(1/2), sqrt(2)), and
 * ln m = 2 atanh(t), t = (m - 1) / (m + 1), |t| < 0.172 (series to t^9: error < 1e-9). */
static inline float ln_unit(float u) {
    union { float f; uint32_t i; } x = {u};
    int32_t e = (int32_t)(x.i >> 23) - 127;
    x.i = (x.i & 0x7fffffu) | 0x3f800000u; /* m in [1, 2) */
    int32_t big = x.f > 1.41421356f; /* arithmetic, not branches, so the caller's loop vectorizes */
    float m = x.f * (1.0f - 0.5f * (float)big);
    e += big;
    float t = (m - 1.0f) / (m + 1.0f), t2 = t * t;
    float atanh = t * (1.0f + t2 * (1.0f / 3 + t2 * (1.0f / 5 + t2 * (1.0f / 7 + t2 * (1.0f / 9)))));
    return (float)e * 0.693147181f + 2.0f * atanh;
}

#define GAUSS_BLOCK 64

/* GAUSS_BLOCK values of N(mean, std^2) by Box-Muller. The angle is drawn as a quadrant q and
 * an offset t in [-pi/4, pi/4) (uniform over the circle all the same), so sin and cos need
 * only short polynomials (errors below 4e-7). */
static void gaussian_block(Rng *r, float *out, float mean, float std) {
    enum { H = GAUSS_BLOCK / 2 };
    uint32_t a[H], b[H];
    for (int i = 0; i < H; i++) {
        uint64_t x = rng_next(r);
        a[i] = (uint32_t)(x >> 40);            /* 24 bits: the radius */
        b[i] = (uint32_t)(x >> 8) & 0xffffffu; /* 2 bits quadrant, 22 bits angle */
    }
    for (int i = 0; i < H; i++) {
        float u1 = ((float)a[i] + 1.0f) * 0x1p-24f; /* (0, 1] */
        float rad = sqrtf(-2.0f * ln_unit(u1)) * std;
        float t = ((float)(b[i] & 0x3fffffu) * 0x1p-22f - 0.5f) * 1.57079633f, t2 = t * t;
        float sn = t * (1.0f + t2 * (-1.0f / 6 + t2 * (1.0f / 120 + t2 * (-1.0f / 5040))));
        float cs = 1.0f + t2 * (-0.5f + t2 * (1.0f / 24 + t2 * (-1.0f / 720 + t2 * (1.0f / 40320))));
        uint32_t q = b[i] >> 22;
        float odd = (float)(q & 1), sign = rad * (1.0f - (float)(q >> 1) * 2.0f);
        float x = cs + odd * (-sn - cs), y = sn + odd * (cs - sn); /* rotated by q quarter turns */
        out[i] = mean + x * sign;
        out[H + i] = mean + y * sign;
    }
}

/* n values of N(mean, std^2). */
static void gaussian_row(Rng *r, float *dst, int64_t n, float mean, float std) {
    int64_t i = 0;
    for (; i + GAUSS_BLOCK <= n; i += GAUSS_BLOCK) gaussian_block(r, dst + i, mean, std);
    if (i < n) {
        float tail[GAUSS_BLOCK];
        gaussian_block(r, tail, mean, std);
        memcpy(dst + i, tail, (size_t)(n - i) * sizeof *tail);
    }
}

/* ---- the tensor list ----------------------------------------------------------------- */

/* The llama.cpp file types synthesized as llama-quantize mixes them (the rules in build_tensors). */
typedef enum Mix { MIX_NONE, MIX_Q2_K, MIX_Q3_K_M, MIX_Q4_K_M, MIX_Q5_K_M } Mix;
static const struct { const char *name; Mix mix; uint32_t type, ftype; } k_mixes[] = {
    {"q2_k_mix", MIX_Q2_K, ZR_TYPE_Q2_K, ZR_FTYPE_Q2_K}, /* llama-quantize's Q2_K (q2_k: every matrix) */
    {"q3_k_m", MIX_Q3_K_M, ZR_TYPE_Q3_K, ZR_FTYPE_Q3_K_M},
    {"q4_k_m", MIX_Q4_K_M, ZR_TYPE_Q4_K, ZR_FTYPE_Q4_K_M},
    {"q5_k_m", MIX_Q5_K_M, ZR_TYPE_Q5_K, ZR_FTYPE_Q5_K_M},
};

/* A computed weight type by name (q4_k or q4_K), or a mix (q4_k_m: Q4_K with llama.cpp's
 * Q4_K_M choice of Q6_K tensors) and its main type. */
static uint32_t parse_type(const char *s, Mix *mix) {
    *mix = MIX_NONE;
    for (size_t i = 0; i < sizeof k_mixes / sizeof *k_mixes; i++)
        if (!strcasecmp(s, k_mixes[i].name)) {
            *mix = k_mixes[i].mix;
            return k_mixes[i].type;
        }
    for (uint32_t t = 0; t < ZR_TYPE_COUNT; t++) {
        const ZrTypeInfo *ti = zr_type_info(t);
        if (ti && ti->compute && !strcasecmp(s, ti->name)) return t;
    }
    return UINT32_MAX;
}

/* llama.cpp's general.file_type for the whole-file type. */
static uint32_t file_type(uint32_t type, Mix mix) {
    for (size_t i = 0; i < sizeof k_mixes / sizeof *k_mixes; i++)
        if (k_mixes[i].mix == mix) return k_mixes[i].ftype;
    return zr_file_type_of(type);
}

/* llama.cpp's Q4_K_M rule for attn_v and ffn_down: more bits in the first and last eighth of
 * the layers and every third one between. */
static bool use_more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* llama.cpp's attn_v (and Phi-3's attn_qkv: its category_is_attn_v takes both) of layer l of
 * n, gqa query heads a KV head: Q2_K's Q4_K where gqa >= 4, else Q3_K; Q3_K_M's first two
 * Q5_K, the rest Q4_K; Q4_K_M's and Q5_K_M's Q6_K where use_more_bits. (llama.cpp's bumps for
 * 8-expert and 70B models are not synthesized.) */
static uint32_t mix_v_type(Mix mix, uint32_t type, int64_t l, int64_t n, int64_t gqa) {
    if (mix == MIX_Q2_K) return gqa >= 4 ? ZR_TYPE_Q4_K : ZR_TYPE_Q3_K;
    if (mix == MIX_Q3_K_M) return l < 2 ? ZR_TYPE_Q5_K : ZR_TYPE_Q4_K;
    return mix != MIX_NONE && use_more_bits(l, n) ? ZR_TYPE_Q6_K : type;
}

/* llama.cpp's ffn_down: Q2_K's Q3_K; Q3_K_M's first sixteenth Q5_K, the rest Q4_K (any
 * architecture but Falcon); Q4_K_M's and Q5_K_M's Q6_K where use_more_bits. */
static uint32_t mix_down_type(Mix mix, uint32_t type, int64_t l, int64_t n) {
    if (mix == MIX_Q2_K) return ZR_TYPE_Q3_K;
    if (mix == MIX_Q3_K_M) return l < n / 16 ? ZR_TYPE_Q5_K : ZR_TYPE_Q4_K;
    return mix != MIX_NONE && use_more_bits(l, n) ? ZR_TYPE_Q6_K : type;
}

/* A type whose block fits the row: K-quants fall back to q8_0 (rows a multiple of 32), and
 * anything to f16 (as llama.cpp does for rows that fit no block). */
static uint32_t fit_type(uint32_t type, int64_t ne0) {
    if (ne0 % zr_type_info(type)->block == 0) return type;
    return ne0 % 32 == 0 ? ZR_TYPE_Q8_0 : ZR_TYPE_F16;
}

static int add(Tensor *t, int n, const char *name, uint32_t type, int64_t ne0, int64_t ne1, Init init, float std) {
    Tensor *x = &t[n];
    snprintf(x->name, sizeof x->name, "%s", name);
    x->n_dims = ne1 > 1 || init == INIT_MATRIX ? 2 : 1;
    x->ne[0] = ne0;
    x->ne[1] = ne1;
    x->ne[2] = 1;
    x->type = init == INIT_MATRIX ? fit_type(type, ne0) : ZR_TYPE_F32;
    x->init = init;
    x->std = std;
    return n + 1;
}

/* An expert tensor: n_expert matrices [ne0, ne1] as one GGUF [ne0, ne1, n_expert]. */
static int add_experts(Tensor *t, int n, const char *name, uint32_t type, int64_t ne0, int64_t ne1, int64_t n_expert, float std) {
    n = add(t, n, name, type, ne0, ne1, INIT_MATRIX, std);
    t[n - 1].n_dims = 3;
    t[n - 1].ne[2] = n_expert;
    return n;
}

/* llama.cpp's tensor names and GGUF shapes ([ne0 = input dim, ne1 = output dim]). */
static int build_tensors(Tensor *t, const char *arch, const Shape *s, uint32_t type, Mix mix, bool tied, float std,
                         int64_t rope_factors, uint32_t up_type) {
    int n = 0;
    char name[64];
    int64_t q = s->heads * s->head_dim, kv = s->kv_heads * s->head_dim;
    uint32_t out_type = mix != MIX_NONE ? ZR_TYPE_Q6_K : type; /* every mix's output: Q6_K */
    const bool gemma = !strcmp(arch, "gemma2") || !strcmp(arch, "gemma3"), phi3 = !strcmp(arch, "phi3");
    n = add(t, n, "token_embd.weight", tied ? out_type : type, s->embd, s->vocab, INIT_MATRIX, tied ? 0.25f : 0.5f);
    n = add(t, n, "output_norm.weight", 0, s->embd, 1, INIT_NORM, 0.1f);
    if (!tied) n = add(t, n, "output.weight", out_type, s->embd, s->vocab, INIT_MATRIX, 0.25f);
    if (rope_factors) {
        n = add(t, n, "rope_factors_long.weight", 0, rope_factors, 1, INIT_FACTOR, 2.0f);
        n = add(t, n, "rope_factors_short.weight", 0, rope_factors, 1, INIT_FACTOR, 0.2f);
    }
    for (int64_t l = 0; l < s->layers; l++) {
        const uint32_t v_type = mix_v_type(mix, type, l, s->layers, s->heads / s->kv_heads),
                       down_type = mix_down_type(mix, type, l, s->layers);
        /* llama.cpp's attn_output (models of other than 8 experts) */
        const uint32_t o_type = mix == MIX_Q3_K_M ? ZR_TYPE_Q4_K : mix == MIX_Q2_K ? ZR_TYPE_Q3_K : type;
#define NAME(x) (snprintf(name, sizeof name, "blk.%" PRId64 "." x, l), name)
        n = add(t, n, NAME("attn_norm.weight"), 0, s->embd, 1, INIT_NORM, 0.1f);
        if (phi3) { /* one fused Q|K|V matrix, as llama.cpp's converter writes Phi-3 */
            n = add(t, n, NAME("attn_qkv.weight"), v_type, s->embd, q + 2 * kv, INIT_MATRIX, std);
        } else {
            n = add(t, n, NAME("attn_q.weight"), type, s->embd, q, INIT_MATRIX, std);
            n = add(t, n, NAME("attn_k.weight"), type, s->embd, kv, INIT_MATRIX, std);
            n = add(t, n, NAME("attn_v.weight"), v_type, s->embd, kv, INIT_MATRIX, std);
        }
        if (!strcmp(arch, "qwen2")) {
            n = add(t, n, NAME("attn_q.bias"), 0, q, 1, INIT_BIAS, 0.2f);
            n = add(t, n, NAME("attn_k.bias"), 0, kv, 1, INIT_BIAS, 0.2f);
            n = add(t, n, NAME("attn_v.bias"), 0, kv, 1, INIT_BIAS, 0.2f);
        }
        if (!strcmp(arch, "qwen3") || !strcmp(arch, "qwen3moe") || !strcmp(arch, "gemma3")) {
            n = add(t, n, NAME("attn_q_norm.weight"), 0, s->head_dim, 1, INIT_NORM, 0.1f);
            n = add(t, n, NAME("attn_k_norm.weight"), 0, s->head_dim, 1, INIT_NORM, 0.1f);
        }
        n = add(t, n, NAME("attn_output.weight"), o_type, q, s->embd, INIT_MATRIX, tied ? 5 * std : std);
        if (gemma) n = add(t, n, NAME("post_attention_norm.weight"), 0, s->embd, 1, INIT_NORM, 0.1f);
        n = add(t, n, NAME("ffn_norm.weight"), 0, s->embd, 1, INIT_NORM, 0.1f);
        if (s->experts) { /* the router stays F32 (the converter's and llama-quantize's rule) */
            const int64_t ff = s->ff_exp, ne = s->experts;
            n = add(t, n, NAME("ffn_gate_inp.weight"), ZR_TYPE_F32, s->embd, ne, INIT_MATRIX, std);
            n = add_experts(t, n, NAME("ffn_gate_exps.weight"), type, s->embd, ff, ne, std);
            n = add_experts(t, n, NAME("ffn_up_exps.weight"), up_type, s->embd, ff, ne, std);
            n = add_experts(t, n, NAME("ffn_down_exps.weight"), down_type, ff, s->embd, ne, tied ? 5 * std : std);
        } else if (phi3) { /* gate rows, then up rows */
            n = add(t, n, NAME("ffn_up.weight"), type, s->embd, 2 * s->ff, INIT_MATRIX, std);
        } else {
            n = add(t, n, NAME("ffn_gate.weight"), type, s->embd, s->ff, INIT_MATRIX, std);
            n = add(t, n, NAME("ffn_up.weight"), type, s->embd, s->ff, INIT_MATRIX, std);
        }
        if (!s->experts) n = add(t, n, NAME("ffn_down.weight"), down_type, s->ff, s->embd, INIT_MATRIX, tied ? 5 * std : std);
        if (gemma) n = add(t, n, NAME("post_ffw_norm.weight"), 0, s->embd, 1, INIT_NORM, 0.1f);
#undef NAME
    }
    return n;
}

/* ---- vocabulary ---------------------------------------------------------------------- */

/* A SentencePiece-style vocabulary: <unk>, <s>, </s>, the 256 byte tokens, then unique pieces
 * ("a".."z", "aa".., alternately with the word-start mark U+2581). */
static int synth_vocab(ZrGgufWriter *w, int64_t n_vocab, const char *const *controls, int n_controls) {
    if (n_vocab < 259 || n_vocab > (1 << 24)) {
        fprintf(stderr, "zrun-synth: --vocab: expected 259..16777216 tokens (3 specials + 256 bytes + pieces), found %" PRId64 "\n", n_vocab);
        return 1;
    }
    char *pool = malloc((size_t)n_vocab * 16);
    ZrStr *toks = malloc((size_t)n_vocab * sizeof *toks);
    float *scores = malloc((size_t)n_vocab * sizeof *scores);
    int32_t *types = malloc((size_t)n_vocab * sizeof *types);
    if (!pool || !toks || !scores || !types) {
        free(pool), free(toks), free(scores), free(types);
        fprintf(stderr, "zrun-synth: out of memory for the vocabulary\n");
        return 1;
    }
    for (int64_t i = 0; i < n_vocab; i++) {
        char *p = pool + i * 16;
        int len;
        if (i < 3) {
            static const char *const sp[3] = {"<unk>", "<s>", "</s>"};
            len = snprintf(p, 16, "%s", sp[i]);
            types[i] = i == 0 ? 2 : 3; /* unknown, control */
            scores[i] = 0;
        } else if (i < 259) {
            len = snprintf(p, 16, "<0x%02X>", (unsigned)(i - 3));
            types[i] = 6; /* byte */
            scores[i] = 0;
        } else if (i >= n_vocab - n_controls) { /* the architecture's chat tokens */
            len = snprintf(p, 16, "%s", controls[i - (n_vocab - n_controls)]);
            types[i] = 3; /* control */
            scores[i] = 0;
        } else {
            int64_t k = i - 259, v = k / 2;
            len = 0;
            if (k % 2) { memcpy(p, "\xe2\x96\x81", 3); len = 3; }
            char rev[8];
            int m = 0;
            do { rev[m++] = (char)('a' + v % 26); v = v / 26 - 1; } while (v >= 0 && m < 8);
            while (m) p[len++] = rev[--m];
            p[len] = 0;
            types[i] = 1; /* normal */
            scores[i] = -(float)k;
        }
        toks[i] = (ZrStr){p, (uint64_t)len};
    }
    zr_gguf_w_str(w, "tokenizer.ggml.model", "llama");
    zr_gguf_w_arr_zrstr(w, "tokenizer.ggml.tokens", (uint64_t)n_vocab, toks);
    zr_gguf_w_arr(w, "tokenizer.ggml.scores", ZR_GGUF_FLOAT32, (uint64_t)n_vocab, scores);
    zr_gguf_w_arr(w, "tokenizer.ggml.token_type", ZR_GGUF_INT32, (uint64_t)n_vocab, types);
    zr_gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    zr_gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 1);
    zr_gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 2);
    zr_gguf_w_bool(w, "tokenizer.ggml.add_bos_token", true);
    zr_gguf_w_bool(w, "tokenizer.ggml.add_eos_token", false);
    free(pool), free(toks), free(scores), free(types);
    return 0;
}

/* Copies every tokenizer.* key of a vocab GGUF (the writer copies the bytes); returns its
 * token count (0 on error). */
static int64_t copy_vocab(ZrGgufWriter *w, const char *path) {
    ZrGguf v;
    ZrError e;
    if (zr_gguf_open(&v, path, &e)) {
        fprintf(stderr, "zrun-synth: --vocab: %s\n", e.msg);
        return 0;
    }
    const ZrGgufKv *toks = NULL;
    if (zr_gguf_get_arr(&v, "tokenizer.ggml.tokens", ZR_GGUF_STRING, &toks, &e)) {
        fprintf(stderr, "zrun-synth: --vocab: %s\n", e.msg);
        zr_gguf_close(&v);
        return 0;
    }
    int64_t n = (int64_t)toks->n;
    for (uint64_t i = 0; i < v.n_kv; i++)
        if (v.kv[i].key.len > 10 && !memcmp(v.kv[i].key.ptr, "tokenizer.", 10)) zr_gguf_w_copy_kv(w, &v.kv[i]);
    zr_gguf_close(&v);
    return n;
}

/* ---- parallel row generation --------------------------------------------------------- */

typedef struct Job {
    const Tensor *t;
    uint64_t seed, tensor_index;
    int64_t row0, rows; /* this batch */
    uint8_t *out;       /* rows x row_bytes */
    size_t row_bytes;
    int n_threads, id;
} Job;

static void *worker(void *arg) {
    Job *j = arg;
    const Tensor *t = j->t;
    float *tmp = malloc((size_t)t->ne[0] * sizeof *tmp);
    if (!tmp) return (void *)1;
    for (int64_t r = j->id; r < j->rows; r += j->n_threads) {
        Rng rng = rng_for_row(j->seed, j->tensor_index, (uint64_t)(j->row0 + r));
        float mean = t->init == INIT_NORM ? 1.0f : 0.0f;
        gaussian_row(&rng, tmp, t->ne[0], mean, t->std);
        if (t->init == INIT_FACTOR) /* rope frequency divisors: positive, 1 and above */
            for (int64_t i = 0; i < t->ne[0]; i++) tmp[i] = 1.0f + fabsf(tmp[i]);
        zr_quantize_row(t->type, tmp, j->out + (size_t)r * j->row_bytes, t->ne[0]);
    }
    free(tmp);
    return NULL;
}

static int write_tensor(FILE *f, const ZrGgufWriter *w, const Tensor *t, uint64_t index, uint64_t seed, int n_threads,
                        uint8_t *buf, size_t buf_bytes, ZrError *err) {
    size_t row_bytes = zr_row_bytes(t->type, t->ne[0]);
    const int64_t n_rows = t->ne[1] * t->ne[2];
    int64_t batch = (int64_t)(buf_bytes / row_bytes);
    if (batch < 1) batch = 1;
    pthread_t th[256];
    Job jobs[256];
    for (int64_t r0 = 0; r0 < n_rows; r0 += batch) {
        int64_t rows = n_rows - r0 < batch ? n_rows - r0 : batch;
        int nt = rows < n_threads ? (int)rows : n_threads;
        for (int i = 0; i < nt; i++) {
            jobs[i] = (Job){t, seed, index, r0, rows, buf, row_bytes, nt, i};
            if (i > 0 && pthread_create(&th[i], NULL, worker, &jobs[i]) != 0) return zr_err(err, ZR_E_INTERNAL, "pthread_create failed");
        }
        void *bad = worker(&jobs[0]);
        for (int i = 1; i < nt; i++) {
            void *b;
            pthread_join(th[i], &b);
            bad = bad ? bad : b;
        }
        if (bad) return zr_err(err, ZR_E_NOMEM, "out of memory for a row of %" PRId64, t->ne[0]);
        if (fwrite(buf, row_bytes, (size_t)rows, f) != (size_t)rows)
            return zr_err(err, ZR_E_IO, "write failed: %s", strerror(errno));
    }
    return zr_gguf_w_write_pad(w, f, row_bytes * (uint64_t)n_rows, err);
}

/* ---- main ---------------------------------------------------------------------------- */

static int preset(const char *name, Shape *s) {
    if (!strcmp(name, "tiny")) *s = (Shape){256, 2, 4, 2, 0, 256, 512, 2048, 10000.0, 1e-5, -1, 0, 0, 0};
    else if (!strcmp(name, "llama3.2-1b")) *s = (Shape){2048, 16, 32, 8, 0, 8192, 128256, 131072, 500000.0, 1e-5, 1, 0, 0, 0};
    else if (!strcmp(name, "llama3-8b")) *s = (Shape){4096, 32, 32, 8, 0, 14336, 128256, 8192, 500000.0, 1e-5, 0, 0, 0, 0};
    /* Llama-3.2-3B's config (the llama of the Gemma-3-4B and Phi-3-mini comparisons) */
    else if (!strcmp(name, "llama3.2-3b")) *s = (Shape){3072, 28, 24, 8, 0, 8192, 128256, 131072, 500000.0, 1e-5, 1, 0, 0, 0};
    /* Gemma 3's text configs (google/gemma-3-{4b,12b}-it config.json text_config; llama.cpp
     * de3ff815 fixes sliding_window_pattern 6 and the local base 10000 itself; --arch gemma3
     * writes the window 1024 and the linear rope scaling 8): query_pre_attn_scalar 256 = head_dim */
    else if (!strcmp(name, "gemma3-4b")) *s = (Shape){2560, 34, 8, 4, 256, 10240, 262208, 131072, 1000000.0, 1e-6, 1, 0, 0, 0};
    else if (!strcmp(name, "gemma3-12b")) *s = (Shape){3840, 48, 16, 8, 256, 15360, 262208, 131072, 1000000.0, 1e-6, 1, 0, 0, 0};
    else if (!strcmp(name, "qwen3-30b-a3b")) *s = (Shape){2048, 48, 32, 4, 128, 6144, 151936, 40960, 1000000.0, 1e-6, 0, 128, 8, 768};
    else if (!strcmp(name, "mixtral-8x7b")) *s = (Shape){4096, 32, 32, 8, 0, 14336, 32000, 32768, 1000000.0, 1e-5, 0, 8, 2, 14336};
    else return 1;
    return 0;
}

static bool parse_i64(const char *s, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v <= 0) return false;
    *out = v;
    return true;
}

int main(int argc, char **argv) {
    enum { O_ARCH = 256, O_SHAPE, O_EMBD, O_LAYERS, O_HEADS, O_KV, O_HD, O_FF, O_VOCAB, O_CTX, O_THETA, O_EPS, O_TIED,
           O_UNTIED, O_TYPE, O_SEED, O_STD, O_WINDOW, O_ORIG_CTX, O_ATTN_CAP, O_FINAL_CAP, O_ROPE_DIM, O_EXPERTS, O_EXPERTS_USED,
           O_FF_EXPERT, O_UP_TYPE };
    static const struct option opts[] = {
        {"out", required_argument, 0, 'o'},      {"arch", required_argument, 0, O_ARCH},
        {"shape", required_argument, 0, O_SHAPE}, {"embd", required_argument, 0, O_EMBD},
        {"layers", required_argument, 0, O_LAYERS}, {"heads", required_argument, 0, O_HEADS},
        {"kv-heads", required_argument, 0, O_KV}, {"head-dim", required_argument, 0, O_HD},
        {"ff", required_argument, 0, O_FF},       {"vocab", required_argument, 0, O_VOCAB},
        {"ctx", required_argument, 0, O_CTX},     {"theta", required_argument, 0, O_THETA},
        {"eps", required_argument, 0, O_EPS},     {"tied", no_argument, 0, O_TIED},
        {"untied", no_argument, 0, O_UNTIED},     {"type", required_argument, 0, O_TYPE},
        {"seed", required_argument, 0, O_SEED},   {"std", required_argument, 0, O_STD},
        {"threads", required_argument, 0, 't'},   {"quiet", no_argument, 0, 'q'},
        {"window", required_argument, 0, O_WINDOW}, {"orig-ctx", required_argument, 0, O_ORIG_CTX},
        {"attn-softcap", required_argument, 0, O_ATTN_CAP}, {"final-softcap", required_argument, 0, O_FINAL_CAP},
        {"rope-dim", required_argument, 0, O_ROPE_DIM},
        {"experts", required_argument, 0, O_EXPERTS}, {"experts-used", required_argument, 0, O_EXPERTS_USED},
        {"ff-expert", required_argument, 0, O_FF_EXPERT}, {"up-type", required_argument, 0, O_UP_TYPE},
        {"help", no_argument, 0, 'h'},            {0, 0, 0, 0},
    };
    const char *out = NULL, *arch = "llama", *shape_name = "tiny", *vocab_file = NULL, *type_name = "f16", *up_type_name = NULL;
    int64_t ov[8] = {0}; /* embd layers heads kv hd ff vocab ctx overrides */
    double theta = 0, eps = 0, std = 0.05, attn_cap = 0, final_cap = 0;
    int tied = -1, quiet = 0;
    int64_t threads = sysconf(_SC_NPROCESSORS_ONLN), seed = 1, window = 0, orig_ctx = 0, rope_dim = 0;
    int64_t experts = 0, experts_used = 0, ff_expert = 0;
    int c, li = -1;
    while ((c = getopt_long(argc, argv, "o:t:qh", opts, &li)) != -1) {
        int64_t v;
        switch (c) {
        case 'o': out = optarg; break;
        case O_ARCH: arch = optarg; break;
        case O_SHAPE: shape_name = optarg; break;
        case O_EMBD: case O_LAYERS: case O_HEADS: case O_KV: case O_HD: case O_FF: case O_CTX:
            if (!parse_i64(optarg, &v)) goto bad_number;
            ov[c == O_CTX ? 7 : c - O_EMBD] = v;
            break;
        case O_VOCAB:
            if (parse_i64(optarg, &v)) ov[6] = v;
            else vocab_file = optarg;
            break;
        case O_THETA: theta = atof(optarg); if (theta <= 0) goto bad_number; break;
        case O_EPS: eps = atof(optarg); if (eps <= 0) goto bad_number; break;
        case O_STD: std = atof(optarg); if (std <= 0) goto bad_number; break;
        case O_TIED: tied = 1; break;
        case O_UNTIED: tied = 0; break;
        case O_TYPE: type_name = optarg; break;
        case O_SEED: {
            char *end;
            seed = (int64_t)strtoull(optarg, &end, 10);
            if (end == optarg || *end) goto bad_number;
            break;
        }
        case 't': if (!parse_i64(optarg, &threads)) goto bad_number; break;
        case 'q': quiet = 1; break;
        case O_WINDOW: if (!parse_i64(optarg, &window)) goto bad_number; break;
        case O_ORIG_CTX: if (!parse_i64(optarg, &orig_ctx)) goto bad_number; break;
        case O_ROPE_DIM: if (!parse_i64(optarg, &rope_dim)) goto bad_number; break;
        case O_EXPERTS: if (!parse_i64(optarg, &experts)) goto bad_number; break;
        case O_EXPERTS_USED: if (!parse_i64(optarg, &experts_used)) goto bad_number; break;
        case O_FF_EXPERT: if (!parse_i64(optarg, &ff_expert)) goto bad_number; break;
        case O_UP_TYPE: up_type_name = optarg; break;
        case O_ATTN_CAP: attn_cap = atof(optarg); if (attn_cap <= 0) goto bad_number; break;
        case O_FINAL_CAP: final_cap = atof(optarg); if (final_cap <= 0) goto bad_number; break;
        case 'h': fputs(k_usage, stdout); return 0;
        default: fputs(k_usage, stderr); return 2;
        }
        li = -1;
        continue;
    bad_number:
        fprintf(stderr, "zrun-synth: -%s%s: expected a positive number, found '%s'\n", li >= 0 ? "-" : "",
                li >= 0 ? opts[li].name : "t", optarg);
        return 2;
    }
    if (!out || optind < argc) {
        fprintf(stderr, "zrun-synth: %s\n%s", out ? "unexpected argument" : "expected -o OUT.gguf", k_usage);
        return 2;
    }
    static const char *const archs[] = {"llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3", "qwen3moe"};
    bool known = false;
    for (size_t i = 0; i < sizeof archs / sizeof *archs; i++) known |= !strcmp(arch, archs[i]);
    if (!known) {
        fprintf(stderr, "zrun-synth: --arch: expected llama, qwen2, qwen3, gemma2, gemma3, phi3 or qwen3moe, found '%s'\n", arch);
        return 2;
    }
    const bool gemma2 = !strcmp(arch, "gemma2"), gemma3 = !strcmp(arch, "gemma3"), phi3 = !strcmp(arch, "phi3");
    if ((window && !gemma2 && !gemma3) || (orig_ctx && !phi3) || (attn_cap && !gemma2) || (final_cap && !gemma2 && !gemma3)) {
        fprintf(stderr, "zrun-synth: %s: not an option of architecture %s\n",
                window ? "--window" : orig_ctx ? "--orig-ctx" : attn_cap ? "--attn-softcap" : "--final-softcap", arch);
        return 2;
    }
    Shape s;
    if (preset(shape_name, &s)) {
        fprintf(stderr, "zrun-synth: --shape: expected tiny, llama3.2-1b, llama3.2-3b, llama3-8b, gemma3-4b, gemma3-12b, "
                        "qwen3-30b-a3b or mixtral-8x7b, found '%s'\n", shape_name);
        return 2;
    }
    int64_t *fields[8] = {&s.embd, &s.layers, &s.heads, &s.kv_heads, &s.head_dim, &s.ff, &s.vocab, &s.ctx};
    for (int i = 0; i < 8; i++)
        if (ov[i]) *fields[i] = ov[i];
    /* the experts: the preset's, qwen3moe's tiny default, the flags; llama's experts are ff wide */
    const bool qwen3moe = !strcmp(arch, "qwen3moe");
    if (qwen3moe && !s.experts) s.experts = 16, s.experts_used = 4, s.ff_exp = 64;
    if (experts) s.experts = experts, s.experts_used = 0;
    if (experts_used) s.experts_used = experts_used;
    if (ff_expert && qwen3moe) s.ff_exp = ff_expert;
    else if (ff_expert) s.ff = ff_expert;
    if (!qwen3moe) s.ff_exp = s.ff;
    if ((experts || experts_used || ff_expert) && !qwen3moe && strcmp(arch, "llama")) {
        fprintf(stderr, "zrun-synth: --experts, --experts-used, --ff-expert: not options of architecture %s (llama and qwen3moe have experts)\n", arch);
        return 2;
    }
    if (s.experts && (s.experts < 2 || s.experts_used < 1 || s.experts_used > s.experts)) {
        fprintf(stderr, "zrun-synth: --experts %" PRId64 " --experts-used %" PRId64 ": expected at least 2 experts and 1..%" PRId64 " used\n",
                s.experts, s.experts_used, s.experts);
        return 2;
    }
    if (!s.experts && (experts_used || ff_expert)) {
        fprintf(stderr, "zrun-synth: --experts-used, --ff-expert: expected with --experts N\n");
        return 2;
    }
    if (theta > 0) s.theta = theta;
    else if (strcmp(arch, "llama") && strcmp(shape_name, "tiny") == 0) s.theta = 1000000.0;
    if (eps > 0) s.eps = eps;
    if (tied >= 0) s.tied = tied;
    if (s.tied < 0) s.tied = gemma2 || gemma3; /* Gemma's output is its embedding */
    if (gemma2 && !s.tied) {
        fprintf(stderr, "zrun-synth: --untied: gemma2 has no output.weight (llama.cpp reads token_embd as its output)\n");
        return 2;
    }
    if (!window) window = strcmp(shape_name, "tiny") == 0 ? 16 : gemma2 ? 4096 : 1024;
    if (!s.head_dim) s.head_dim = s.embd / s.heads;
    if (!rope_dim) rope_dim = s.head_dim;
    if (rope_dim > s.head_dim || rope_dim % 2) {
        fprintf(stderr, "zrun-synth: --rope-dim: expected an even value <= the head dimension %" PRId64 ", found %" PRId64 "\n", s.head_dim, rope_dim);
        return 2;
    }
    if (s.heads % s.kv_heads || s.head_dim < 2 || s.head_dim % 2) {
        fprintf(stderr, "zrun-synth: shape: expected heads a multiple of kv-heads and an even head-dim, found %" PRId64
                        "/%" PRId64 " heads, head-dim %" PRId64 "\n", s.heads, s.kv_heads, s.head_dim);
        return 2;
    }
    Mix mix;
    uint32_t type = parse_type(type_name, &mix);
    if (type == UINT32_MAX) {
        fprintf(stderr, "zrun-synth: --type: expected");
        for (uint32_t t = 0; t < ZR_TYPE_COUNT; t++)
            if (zr_type_kernel_suffix(t)) fprintf(stderr, " %s", zr_type_kernel_suffix(t));
        for (size_t i = 0; i < sizeof k_mixes / sizeof *k_mixes; i++) fprintf(stderr, " %s", k_mixes[i].name);
        fprintf(stderr, ", found '%s'\n", type_name);
        return 2;
    }
    uint32_t up_type = type;
    if (up_type_name) {
        Mix up_mix;
        up_type = parse_type(up_type_name, &up_mix);
        if (up_type == UINT32_MAX || up_mix || !s.experts) {
            fprintf(stderr, "zrun-synth: --up-type: expected a type of --type (not a mix) with --experts, found '%s'\n", up_type_name);
            return 2;
        }
    }
    if (threads > 256) threads = 256;

    static const char *const gemma_chat[] = {"<start_of_turn>", "<end_of_turn>"};
    static const char *const phi3_chat[] = {"<|endoftext|>", "<|user|>", "<|assistant|>", "<|end|>"};
    ZrGgufWriter w;
    zr_gguf_w_init(&w);
    char name[128];
    zr_gguf_w_str(&w, "general.architecture", arch);
    snprintf(name, sizeof name, "zrun-synth %s %s seed %" PRId64, arch, type_name, seed);
    zr_gguf_w_str(&w, "general.name", name);
    zr_gguf_w_u32(&w, "general.file_type", file_type(type, mix));
#define KEY(k) (snprintf(name, sizeof name, "%s." k, arch), name)
    zr_gguf_w_u32(&w, KEY("context_length"), (uint32_t)s.ctx);
    zr_gguf_w_u32(&w, KEY("embedding_length"), (uint32_t)s.embd);
    zr_gguf_w_u32(&w, KEY("block_count"), (uint32_t)s.layers);
    zr_gguf_w_u32(&w, KEY("feed_forward_length"), (uint32_t)s.ff);
    zr_gguf_w_u32(&w, KEY("attention.head_count"), (uint32_t)s.heads);
    zr_gguf_w_u32(&w, KEY("attention.head_count_kv"), (uint32_t)s.kv_heads);
    zr_gguf_w_f32(&w, KEY("attention.layer_norm_rms_epsilon"), (float)s.eps);
    zr_gguf_w_f32(&w, KEY("rope.freq_base"), (float)s.theta);
    zr_gguf_w_u32(&w, KEY("rope.dimension_count"), (uint32_t)rope_dim);
    if (phi3 && s.head_dim * s.heads != s.embd) {
        fprintf(stderr, "zrun-synth: phi3: expected heads x head-dim = embd (llama.cpp's attn_output is [embd, embd])\n");
        return 2;
    }
    if (gemma2) { /* the converter's keys (Gemma 2's config values) */
        zr_gguf_w_f32(&w, KEY("attn_logit_softcapping"), attn_cap ? (float)attn_cap : 50.0f);
        zr_gguf_w_f32(&w, KEY("final_logit_softcapping"), final_cap ? (float)final_cap : 30.0f);
    }
    if (gemma3 && final_cap) zr_gguf_w_f32(&w, KEY("final_logit_softcapping"), (float)final_cap);
    if (gemma2 || gemma3) zr_gguf_w_u32(&w, KEY("attention.sliding_window"), (uint32_t)window);
    if (gemma3) { /* Gemma 3 4B and larger: linear scaling 8 on the global layers */
        zr_gguf_w_str(&w, KEY("rope.scaling.type"), "linear");
        zr_gguf_w_f32(&w, KEY("rope.scaling.factor"), 8.0f);
    }
    if (phi3 && orig_ctx) { /* LongRoPE as the converter writes it (conversion/phi.py) */
        const double scale = (double)s.ctx / (double)orig_ctx;
        zr_gguf_w_u32(&w, KEY("rope.scaling.original_context_length"), (uint32_t)orig_ctx);
        zr_gguf_w_f32(&w, KEY("rope.scaling.attn_factor"), scale > 1.0 ? (float)sqrt(1.0 + log(scale) / log((double)orig_ctx)) : 1.0f);
    }
    if (s.experts) {
        zr_gguf_w_u32(&w, KEY("expert_count"), (uint32_t)s.experts);
        zr_gguf_w_u32(&w, KEY("expert_used_count"), (uint32_t)s.experts_used);
    }
    if (qwen3moe) zr_gguf_w_u32(&w, KEY("expert_feed_forward_length"), (uint32_t)s.ff_exp);
    if (!strcmp(arch, "qwen3") || qwen3moe || gemma2 || gemma3 || s.head_dim * s.heads != s.embd) {
        zr_gguf_w_u32(&w, KEY("attention.key_length"), (uint32_t)s.head_dim);
        zr_gguf_w_u32(&w, KEY("attention.value_length"), (uint32_t)s.head_dim);
    }
    if (vocab_file) {
        s.vocab = copy_vocab(&w, vocab_file);
        if (!s.vocab) { zr_gguf_w_free(&w); return 1; }
    } else if (synth_vocab(&w, s.vocab, gemma2 || gemma3 ? gemma_chat : phi3 ? phi3_chat : NULL,
                           gemma2 || gemma3 ? 2 : phi3 ? 4 : 0)) {
        zr_gguf_w_free(&w);
        return 2;
    }
    if ((gemma2 || gemma3) && !vocab_file) zr_gguf_w_bool(&w, "tokenizer.ggml.add_space_prefix", false); /* as Gemma's converter */
    zr_gguf_w_u32(&w, KEY("vocab_size"), (uint32_t)s.vocab);
#undef KEY

    int n_max = 3 + (int)s.layers * 14;
    Tensor *ts = calloc((size_t)n_max, sizeof *ts);
    if (!ts) { fprintf(stderr, "zrun-synth: out of memory\n"); return 1; }
    int nt = build_tensors(ts, arch, &s, type, mix, s.tied, (float)std, phi3 && orig_ctx ? rope_dim / 2 : 0, up_type);
    for (int i = 0; i < nt; i++) zr_gguf_w_tensor(&w, ts[i].name, ts[i].type, ts[i].n_dims, ts[i].ne, NULL);

    FILE *f = fopen(out, "wb");
    if (!f) {
        fprintf(stderr, "zrun-synth: %s: cannot create: %s\n", out, strerror(errno));
        return 1;
    }
    setvbuf(f, NULL, _IOFBF, 1 << 22);
    size_t buf_bytes = 64u << 20;
    uint8_t *buf = malloc(buf_bytes);
    ZrError e = {0};
    int rc = !buf ? zr_err(&e, ZR_E_NOMEM, "out of memory") : zr_gguf_w_write_meta(&w, f, &e);
    uint64_t done = 0, total = zr_gguf_w_file_size(&w);
    for (int i = 0; i < nt && !rc; i++) {
        rc = write_tensor(f, &w, &ts[i], (uint64_t)i, (uint64_t)seed, (int)threads, buf, buf_bytes, &e);
        done += w.tensors[i].nbytes;
        if (!quiet && isatty(2)) fprintf(stderr, "\rzrun-synth: %5.1f%% %s          ", 100.0 * (double)done / (double)total, ts[i].name);
    }
    if (fclose(f) != 0 && !rc) rc = zr_err(&e, ZR_E_IO, "close failed: %s", strerror(errno));
    if (!quiet && isatty(2)) fprintf(stderr, "\r");
    if (rc) {
        fprintf(stderr, "zrun-synth: %s: %s\n", out, e.msg);
        remove(out);
    } else if (!quiet) {
        fprintf(stderr, "zrun-synth: wrote %s: %s, %s, embd %" PRId64 ", %" PRId64 " layers, %" PRId64 "/%" PRId64
                        " heads of %" PRId64 ", ff %" PRId64 ", vocab %" PRId64 "%s, %d tensors, %" PRIu64 " bytes\n",
                out, arch, type_name, s.embd, s.layers, s.heads, s.kv_heads, s.head_dim, s.ff, s.vocab,
                s.tied ? ", tied" : "", nt, total);
        if (s.experts)
            fprintf(stderr, "zrun-synth: %" PRId64 " experts per layer, %" PRId64 " used, each %" PRId64 " wide\n", s.experts, s.experts_used, s.ff_exp);
    }
    free(buf);
    free(ts);
    zr_gguf_w_free(&w);
    return rc ? 1 : 0;
}
