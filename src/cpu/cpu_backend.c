/* The CPU backend: the reference forward pass (F32 activations, weights dequantized block by
 * block inside the dot products, K and V cached exact or rounded to F16: ZrKvType) and zrun's
 * no-GPU path. A call to forward runs a batch of tokens through the layers together, so a
 * prefill reads every weight once per chunk of ZR_CPU_UBATCH tokens. What differs between
 * architectures comes from the model's facts (ZrHparams, ZrLayerFacts), never from the
 * architecture's name. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "cpu/matmul.h"
#include "cpu/moe.h"
#include "cpu/ops.h"
#include "cpu/pool.h"
#include "logits_check.h"
#include "quant.h"
#include "sampler.h"

/* Tokens computed together; bounds the activation buffers for long prompts (as llama.cpp's
 * default ubatch). */
#define ZR_CPU_UBATCH 512
#define ZR_CPU_MAX_THREADS 256

typedef struct CpuBackend {
    ZrBackend be;       /* first: the interface the callers hold */
    const ZrModel *m;
    ZrCpuPool *pool;
    int n_past;         /* tokens in the KV cache */
    int64_t q_dim;      /* n_head * head_dim */
    int64_t kv_dim;     /* n_head_kv * head_dim */
    ZrKvType kv_type;   /* ZR_KV_F16: every value stored is float(half(x)) (store_kv) */
    /* F16 values are kept as floats: the reference needs the values a half cache holds, not its
     * memory saving, and the attention reads them as before */
    float *k_cache;     /* [n_layer][n_ctx][kv_dim] */
    float *v_cache;     /* [n_layer][n_ctx][kv_dim] */
    int cap;            /* tokens the activation buffers below hold */
    float *x;           /* [cap][n_embd] residual stream */
    float *xn;          /* [cap][max(n_embd, n_ff)]: normed input of a block / swiglu output */
    float *q;           /* [cap][q_dim] */
    float *k;           /* [cap][kv_dim] */
    float *v;           /* [cap][kv_dim] */
    float *att;         /* [cap][q_dim] attention output, per head */
    float *gate;        /* [cap][n_ff] */
    float *up;          /* [cap][n_ff] */
    float *delta;       /* [cap][n_embd] block output before the residual add */
    ZrCpuMoe moe;       /* the mixture-of-experts FFN's buffers for cap tokens (none on a dense model) */
    float *scores;      /* [threads][n_ctx] attention weights */
    ZrCpuScratch tiles; /* [threads][ZR_CPU_MATMUL_TILE * max row length] dequantized weight rows */
    bool (*stop)(void *ctx); /* ZrBackendOptions.stop: polled between layers */
    void *stop_ctx;
} CpuBackend;

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

static const float *f32(const ZrWeight *w) { return w->data; }

/* ---- one op per step of the layer ---- */

static void embed(const CpuBackend *c, const int32_t *tokens, int n) {
    const ZrWeight *e = &c->m->tok_embd;
    const float scale = c->m->hp.embd_scale;
    for (int t = 0; t < n; t++) zr_dequant_row(e->type, zr_weight_row(e, tokens[t]), c->x + (int64_t)t * e->ne0, e->ne0);
    if (scale != 1.0f) zr_cpu_scale(c->x, scale, (int64_t)n * e->ne0);
}

static void rmsnorm_rows(float *y, const float *x, const ZrWeight *w, int n, float eps) {
    const int d = (int)w->ne0;
    for (int t = 0; t < n; t++) zr_cpu_rmsnorm(y + (int64_t)t * d, x + (int64_t)t * d, f32(w), d, eps);
}

static void add_bias_rows(float *y, const ZrWeight *b, int n) {
    if (!b->data) return;
    for (int t = 0; t < n; t++) zr_cpu_add(y + t * b->ne0, f32(b), b->ne0);
}

static void matmul(CpuBackend *c, const ZrWeight *w, float *y, const float *x, int n) {
    ZrCpuMatmul mm = {w, y};
    zr_cpu_matmul(c->pool, &mm, 1, x, n, &c->tiles);
}

/* q/k norm: RMSNorm over each head's vector, before rope (an absent weight: that side has none) */
static void head_norm_rows(float *v, const ZrWeight *w, int n, int n_heads, float eps) {
    if (!w->data) return;
    const int hd = (int)w->ne0;
    for (int64_t i = 0; i < (int64_t)n * n_heads; i++) zr_cpu_rmsnorm(v + i * hd, v + i * hd, f32(w), hd, eps);
}

/* the layer's rope (its own base and scale) with the model's pairing and frequency factors (for
 * this context length: phi3's long or short ones) */
static void rope_rows(const CpuBackend *c, const ZrLayerFacts *f, float *v, int64_t dim, int n_heads, int n, int pos) {
    const ZrHparams *hp = &c->m->hp;
    const ZrWeight *factors = zr_model_rope_factors(c->m, c->be.n_ctx);
    const float *ff = factors->data ? f32(factors) : NULL;
    const bool neox = hp->rope == ZR_ROPE_NEOX;
    for (int t = 0; t < n; t++)
        zr_cpu_rope(v + t * dim, n_heads, hp->head_dim, hp->rope_dim, pos + t, f->rope_theta, f->rope_freq_scale, ff, neox);
    /* ggml's rope multiplies cos and sin by the attention factor: the rotated values scale by it,
     * the values past rope_dim pass unchanged */
    if (hp->rope_attn_factor != 1.0f)
        for (int64_t i = 0; i < (int64_t)n * n_heads; i++) zr_cpu_scale(v + i * hp->head_dim, hp->rope_attn_factor, hp->rope_dim);
}

/* dst[i] = the half nearest src[i] (ties to even), as a float */
static void round_to_half(float *dst, const float *src, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = zr_f16_to_f32(zr_f32_to_f16(src[i]));
}

/* The chunk's K and V into the cache, before the attention reads them: with an F16 cache every
 * read (the chunk's own positions included) sees the rounded value, as a GPU's half cache gives. */
static void store_kv(CpuBackend *c, int il, int n, int pos) {
    const int64_t at = (int64_t)il * c->be.n_ctx * c->kv_dim + (int64_t)pos * c->kv_dim, count = (int64_t)n * c->kv_dim;
    if (c->kv_type == ZR_KV_F16) {
        round_to_half(c->k_cache + at, c->k, count);
        round_to_half(c->v_cache + at, c->v, count);
        return;
    }
    memcpy(c->k_cache + at, c->k, sizeof(float) * count);
    memcpy(c->v_cache + at, c->v, sizeof(float) * count);
}

typedef struct AttnJob {
    CpuBackend *c;
    int il, pos;
} AttnJob;

/* Items are (token, head) pairs: token t at position pos+t attends to positions 0..pos+t, or on
 * a sliding-window layer to the last `window` of them (llama.cpp masks key p0 for query p1
 * when p1 - p0 >= n_swa). With a soft-cap (gemma2) the scores are c tanh(q.k scale / c) before
 * the softmax, as llama.cpp's build_attn_mha (Q scaled first, then scale 1/c, tanh, scale c). */
static void attention_heads(void *ctx, int64_t begin, int64_t end, int thread) {
    const AttnJob *j = ctx;
    CpuBackend *c = j->c;
    const ZrHparams *hp = &c->m->hp;
    const int hd = hp->head_dim, group = hp->n_head / hp->n_head_kv;
    const float scale = hp->attn_scale, cap = hp->attn_softcap;
    const int window = c->m->layers[j->il].facts.window;
    const float *kc = c->k_cache + (int64_t)j->il * c->be.n_ctx * c->kv_dim; /* [n_ctx][kv_dim] */
    const float *vc = c->v_cache + (int64_t)j->il * c->be.n_ctx * c->kv_dim;
    float *p = c->scores + (int64_t)thread * c->be.n_ctx;
    for (int64_t item = begin; item < end; item++) {
        const int t = (int)(item / hp->n_head), h = (int)(item % hp->n_head);
        const int64_t kv_off = (int64_t)(h / group) * hd;
        const int n_keys = j->pos + t + 1;
        const int first = window > 0 && n_keys > window ? n_keys - window : 0; /* the oldest visible key */
        const float *q = c->q + t * c->q_dim + (int64_t)h * hd;
        for (int s = first; s < n_keys; s++) p[s] = zr_cpu_dot(q, kc + s * c->kv_dim + kv_off, hd);
        if (cap != 0.0f) {
            for (int s = first; s < n_keys; s++) p[s] *= scale;
            zr_cpu_softcap(p + first, cap, n_keys - first);
            zr_cpu_softmax(p + first, n_keys - first, 1.0f);
        } else {
            zr_cpu_softmax(p + first, n_keys - first, scale);
        }
        float *out = c->att + t * c->q_dim + (int64_t)h * hd;
        memset(out, 0, sizeof(float) * hd);
        for (int s = first; s < n_keys; s++) {
            const float *v = vc + s * c->kv_dim + kv_off;
            for (int d = 0; d < hd; d++) out[d] += p[s] * v[d];
        }
    }
}

static void attention(CpuBackend *c, int il, int n, int pos) {
    AttnJob j = {c, il, pos};
    /* (token, head) items cost about 2 x keys x head_dim multiply-adds each */
    const int64_t macs_per_item = 2 * (int64_t)(pos + n) * c->m->hp.head_dim;
    zr_cpu_pool_run(c->pool, (int64_t)n * c->m->hp.n_head, (65536 + macs_per_item - 1) / macs_per_item, attention_heads, &j);
}

static void attention_block(CpuBackend *c, int il, int n, int pos) {
    const ZrHparams *hp = &c->m->hp;
    const ZrLayer *L = &c->m->layers[il];
    const ZrLayerFacts *f = &L->facts;
    rmsnorm_rows(c->xn, c->x, &L->attn_norm, n, hp->rms_eps);
    ZrCpuMatmul qkv[3] = {{&L->wq, c->q}, {&L->wk, c->k}, {&L->wv, c->v}};
    zr_cpu_matmul(c->pool, qkv, 3, c->xn, n, &c->tiles);
    if (f->qkv_bias) {
        add_bias_rows(c->q, &L->bq, n);
        add_bias_rows(c->k, &L->bk, n);
        add_bias_rows(c->v, &L->bv, n);
    }
    if (f->qk_norm) {
        head_norm_rows(c->q, &L->q_norm, n, hp->n_head, hp->rms_eps);
        head_norm_rows(c->k, &L->k_norm, n, hp->n_head_kv, hp->rms_eps);
    }
    if (f->rope) {
        rope_rows(c, f, c->q, c->q_dim, hp->n_head, n, pos);
        rope_rows(c, f, c->k, c->kv_dim, hp->n_head_kv, n, pos);
    }
    store_kv(c, il, n, pos);
    attention(c, il, n, pos);
    matmul(c, &L->wo, c->delta, c->att, n);
    if (f->post_attn_norm) rmsnorm_rows(c->delta, c->delta, &L->attn_post_norm, n, hp->rms_eps);
    zr_cpu_add(c->x, c->delta, (int64_t)n * hp->n_embd);
}

/* h = gelu(gate) * up with GELU's tanh form (gemma's gelu_pytorch_tanh; llama.cpp's
 * ggml_geglu_split). ggml's CPU backend looks GELU up in an f16 table (the input rounded to
 * f16, the result stored as f16, GGML_GELU_FP16): the reference computes it in f32, so gemma's
 * logits differ from llama.cpp's CPU logits by that table's rounding. */
static void geglu(float *h, const float *gate, const float *up, int64_t n) {
    const float sqrt_2_over_pi = 0.79788456080286535587989211986876f, a = 0.044715f;
    for (int64_t i = 0; i < n; i++) {
        const float x = gate[i];
        h[i] = 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * x * (1.0f + a * x * x))) * up[i];
    }
}

static void ffn_block(CpuBackend *c, int il, int n) {
    const ZrHparams *hp = &c->m->hp;
    const ZrLayer *L = &c->m->layers[il];
    rmsnorm_rows(c->xn, c->x, &L->ffn_norm, n, hp->rms_eps);
    if (L->facts.n_expert) {
        zr_cpu_moe_ffn(&c->moe, c->pool, &c->tiles, L, il, hp->n_embd, c->xn, n, c->delta);
        zr_cpu_add(c->x, c->delta, (int64_t)n * hp->n_embd);
        return;
    }
    ZrCpuMatmul gate_up[2] = {{&L->w_gate, c->gate}, {&L->w_up, c->up}};
    zr_cpu_matmul(c->pool, gate_up, 2, c->xn, n, &c->tiles);
    switch (L->facts.act) {
    case ZR_ACT_SILU: zr_cpu_swiglu(c->xn, c->gate, c->up, (int64_t)n * hp->n_ff); break;
    case ZR_ACT_GELU_TANH: geglu(c->xn, c->gate, c->up, (int64_t)n * hp->n_ff); break;
    }
    matmul(c, &L->w_down, c->delta, c->xn, n);
    if (L->facts.post_ffn_norm) rmsnorm_rows(c->delta, c->delta, &L->ffn_post_norm, n, hp->rms_eps);
    zr_cpu_add(c->x, c->delta, (int64_t)n * hp->n_embd);
}

/* Logits of the chunk's last token (n_out = 1) or of all of them (n_out = n), into out. */
static void output_logits(CpuBackend *c, int n, int n_out, float *out) {
    const ZrHparams *hp = &c->m->hp;
    const float *x = c->x + (int64_t)(n - n_out) * hp->n_embd;
    rmsnorm_rows(c->xn, x, &c->m->output_norm, n_out, hp->rms_eps);
    matmul(c, &c->m->output, out, c->xn, n_out);
    if (hp->final_softcap != 0.0f) zr_cpu_softcap(out, hp->final_softcap, (int64_t)n_out * hp->n_vocab);
}

/* false when the caller's stop asked to end it between two layers. */
static bool forward_chunk(CpuBackend *c, const int32_t *tokens, int n, int pos, float *logits, bool all_logits) {
    embed(c, tokens, n);
    for (int il = 0; il < c->m->hp.n_layer; il++) {
        /* a prefill of a long prompt takes seconds per chunk: Ctrl-C is heard between layers */
        if (n > 1 && c->stop && c->stop(c->stop_ctx)) return false;
        attention_block(c, il, n, pos);
        ffn_block(c, il, n);
    }
    if (logits) output_logits(c, n, all_logits ? n : 1, logits);
    return true;
}

/* ---- buffers ---- */

static void free_activations(CpuBackend *c) {
    float **bufs[] = {&c->x, &c->xn, &c->q, &c->k, &c->v, &c->att, &c->gate, &c->up, &c->delta};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        free(*bufs[i]);
        *bufs[i] = NULL;
    }
    zr_cpu_moe_free(&c->moe);
    c->cap = 0;
}

/* Sizes the activation buffers for n tokens (grown on a larger batch only: never in the
 * decode loop). */
static int reserve(CpuBackend *c, int n, ZrError *err) {
    if (n <= c->cap) return 0;
    const ZrHparams *hp = &c->m->hp;
    free_activations(c);
    const size_t t = (size_t)n, f = sizeof(float);
    c->x = malloc(t * hp->n_embd * f);
    c->xn = malloc(t * (size_t)max64(hp->n_embd, hp->n_ff) * f);
    c->q = malloc(t * c->q_dim * f);
    c->k = malloc(t * c->kv_dim * f);
    c->v = malloc(t * c->kv_dim * f);
    c->att = malloc(t * c->q_dim * f);
    c->gate = malloc(t * hp->n_ff * f);
    c->up = malloc(t * hp->n_ff * f);
    c->delta = malloc(t * hp->n_embd * f);
    if (!c->x || !c->xn || !c->q || !c->k || !c->v || !c->att || !c->gate || !c->up || !c->delta) {
        free_activations(c);
        return zr_err(err, ZR_E_NOMEM, "cpu backend: out of memory for the activations of %d tokens", n);
    }
    int rc = zr_cpu_moe_init(&c->moe, c->m, n, err);
    if (rc) {
        free_activations(c);
        return rc;
    }
    c->cap = n;
    return 0;
}

const int32_t *zr_cpu_backend_moe_last(const ZrBackend *be, int il) {
    const CpuBackend *c = (const CpuBackend *)be;
    if (!c->moe.last || il < 0 || il >= c->m->hp.n_layer || !c->m->layers[il].facts.n_expert || c->n_past == 0) return NULL;
    return c->moe.last + (int64_t)il * c->moe.max_used;
}

/* ---- the interface ---- */

static int cpu_forward(ZrBackend *be, const int32_t *tokens, int n, int pos, float *logits, bool all_logits, ZrError *err) {
    CpuBackend *c = (CpuBackend *)be;
    const int n_vocab = c->m->hp.n_vocab;
    if (n < 1) return zr_err(err, ZR_E_INTERNAL, "cpu forward: %d tokens given (at least 1 expected)", n);
    if (pos != c->n_past)
        return zr_err(err, ZR_E_INTERNAL, "cpu forward: position %d given, but %d tokens are in the cache", pos, c->n_past);
    if ((int64_t)pos + n > be->n_ctx)
        return zr_err(err, ZR_E_RANGE, "cpu forward: %d tokens at positions %d..%d do not fit the context of %d tokens (use a larger -c)",
                      n, pos, pos + n - 1, be->n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return zr_err(err, ZR_E_RANGE, "cpu forward: token id %d at position %d is outside the vocabulary 0..%d", tokens[i], pos + i, n_vocab - 1);
    int rc = reserve(c, n < ZR_CPU_UBATCH ? n : ZR_CPU_UBATCH, err);
    if (rc) return rc;
    for (int c0 = 0; c0 < n; c0 += ZR_CPU_UBATCH) {
        const int nc = n - c0 < ZR_CPU_UBATCH ? n - c0 : ZR_CPU_UBATCH;
        const bool last = c0 + nc == n;
        float *out = all_logits ? logits + (int64_t)c0 * n_vocab : last ? logits : NULL;
        if (!forward_chunk(c, tokens + c0, nc, pos + c0, out, all_logits))
            return zr_err(err, ZR_E_INTERRUPTED, "cpu forward: stopped after %d of %d tokens", c0, n);
        c->n_past = pos + c0 + nc;
        if (out && (rc = zr_logits_check(c->m->gguf.path, out, all_logits ? nc : 1, n_vocab, all_logits ? pos + c0 : pos + n - 1, err)))
            return rc;
    }
    return 0;
}

/* The reference loop itself: forward + the host sampler. */
static int cpu_decode_run(ZrBackend *be, ZrDecodeLoop *loop, ZrError *err) {
    CpuBackend *c = (CpuBackend *)be;
    return zr_decode_run_host(be, c->m->hp.n_vocab, loop, err);
}

static void cpu_truncate(ZrBackend *be, int pos) {
    CpuBackend *c = (CpuBackend *)be;
    if (pos < 0) pos = 0;
    if (pos < c->n_past) c->n_past = pos;
}

static void cpu_stats(const ZrBackend *be, ZrBackendStats *out) {
    (void)be;
    memset(out, 0, sizeof *out);
}

static void cpu_destroy(ZrBackend *be) {
    CpuBackend *c = (CpuBackend *)be;
    if (!c) return;
    zr_cpu_pool_free(c->pool);
    free_activations(c);
    free(c->k_cache);
    free(c->v_cache);
    free(c->scores);
    free(c->tiles.buf);
    free(c);
}

static int default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > ZR_CPU_MAX_THREADS ? ZR_CPU_MAX_THREADS : (int)n;
}

ZrBackend *zr_cpu_backend_create(const ZrModel *m, const ZrBackendOptions *o, ZrError *err) {
    const ZrHparams *hp = &m->hp;
    /* the model checked its facts at load; a caller that changed them since is checked again,
     * so no layer runs with a fact this backend does not compute */
    if (zr_model_check_facts(m, err)) return NULL;
    if (o->n_ctx < 1) {
        zr_err(err, ZR_E_USAGE, "cpu backend: a context of %d positions; expected >= 1 (zr_backend_default_ctx)", o->n_ctx);
        return NULL;
    }
    if (o->kv_type != ZR_KV_F32 && o->kv_type != ZR_KV_F16) {
        zr_err(err, ZR_E_USAGE, "cpu backend: KV cache type %d; expected ZR_KV_F32 (0) or ZR_KV_F16 (1)", (int)o->kv_type);
        return NULL;
    }
    const int n_ctx = o->n_ctx;
    int n_threads = o->n_threads > 0 ? (o->n_threads < ZR_CPU_MAX_THREADS ? o->n_threads : ZR_CPU_MAX_THREADS) : default_threads();
    CpuBackend *c = calloc(1, sizeof *c);
    if (!c) {
        zr_err(err, ZR_E_NOMEM, "cpu backend: out of memory");
        return NULL;
    }
    c->be = (ZrBackend){.name = "cpu", .n_ctx = n_ctx, .forward = cpu_forward, .decode_run = cpu_decode_run, .truncate = cpu_truncate, .stats = cpu_stats, .destroy = cpu_destroy};
    c->m = m;
    c->kv_type = o->kv_type;
    c->stop = o->stop;
    c->stop_ctx = o->stop_ctx;
    c->q_dim = (int64_t)hp->n_head * hp->head_dim;
    c->kv_dim = (int64_t)hp->n_head_kv * hp->head_dim;
    const size_t kv_elems = (size_t)hp->n_layer * n_ctx * c->kv_dim; /* <= 2^10 * 2^31 * 2^20 */
    /* K and V: refused before allocating when they exceed the machine's memory (malloc would
     * succeed lazily and the kernel would kill the process as the context fills) */
    const double kv_bytes = 2.0 * (double)kv_elems * sizeof(float);
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && kv_bytes > (double)pages * (double)page) {
        zr_err(err, ZR_E_NOMEM, "cpu backend: the KV cache of %d tokens needs %.0f bytes (%.1f GiB), more than this machine's %.0f bytes of memory; use a smaller -c",
               n_ctx, kv_bytes, kv_bytes / (1 << 30), (double)pages * (double)page);
        cpu_destroy(&c->be);
        return NULL;
    }
    c->k_cache = malloc(kv_elems * sizeof(float));
    c->v_cache = malloc(kv_elems * sizeof(float));
    c->scores = malloc((size_t)n_threads * n_ctx * sizeof(float));
    /* the longest weight row: the input width of any matrix */
    int64_t n_ff_expert = 0;
    for (int il = 0; il < hp->n_layer; il++) n_ff_expert = max64(n_ff_expert, m->layers[il].facts.n_ff_expert);
    c->tiles.per_thread = ZR_CPU_MATMUL_TILE * max64(max64(max64(hp->n_embd, hp->n_ff), c->q_dim), n_ff_expert);
    c->tiles.buf = malloc((size_t)n_threads * c->tiles.per_thread * sizeof(float));
    if (!c->k_cache || !c->v_cache || !c->scores || !c->tiles.buf) {
        zr_err(err, ZR_E_NOMEM, "cpu backend: out of memory for the KV cache of %d tokens (%.0f bytes, %.1f MiB); use a smaller -c",
               n_ctx, kv_bytes, kv_bytes / (1 << 20));
        cpu_destroy(&c->be);
        return NULL;
    }
    c->pool = zr_cpu_pool_create(n_threads, err);
    if (!c->pool) {
        cpu_destroy(&c->be);
        return NULL;
    }
    return &c->be;
}
