/* A model from a parsed GGUF: hyper-parameters per architecture (defaults as llama.cpp's),
 * then every weight bound by name with its type and shape checked. */
#include "model.h"

#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"

/* Sane bounds for values that size allocations before any tensor confirms them. */
#define MAX_LAYERS 1024
#define MAX_DIM (1 << 20)

/* Longest weight name we build: "blk.1023.attn_output.weight" and the like. */
#define NAME_CAP 64
/* Weights bound per layer (the ZrWeight fields of ZrLayer, after its facts) and outside the
 * layers. */
#define LAYER_WEIGHTS(L) (&(L)->attn_norm)
#define WEIGHTS_PER_LAYER ((sizeof(ZrLayer) - offsetof(ZrLayer, attn_norm)) / sizeof(ZrWeight))
#define WEIGHTS_GLOBAL 6
_Static_assert((sizeof(ZrLayer) - offsetof(ZrLayer, attn_norm)) % sizeof(ZrWeight) == 0,
               "ZrLayer holds its facts, then only ZrWeight fields");

const char *zr_act_name(ZrAct a) {
    switch (a) {
    case ZR_ACT_SILU: return "silu";
    case ZR_ACT_GELU_TANH: return "gelu_tanh";
    }
    return "?";
}

const char *zr_rope_kind_name(ZrRopeKind r) {
    switch (r) {
    case ZR_ROPE_NONE: return "none";
    case ZR_ROPE_NORM: return "norm";
    case ZR_ROPE_NEOX: return "neox";
    }
    return "?";
}

const ZrWeight *zr_model_rope_factors(const ZrModel *m, int n_ctx) {
    if (m->rope_freqs.data) return &m->rope_freqs;
    return n_ctx > m->hp.n_ctx_orig ? &m->rope_long : &m->rope_short;
}

const void *zr_weight_row(const ZrWeight *w, int64_t r) {
    return (const char *)w->data + (size_t)r * zr_row_bytes(w->type, w->ne0);
}

ZrWeight zr_weight_expert(const ZrWeight *w, int n_expert, int e) {
    const int64_t rows = w->ne1 / n_expert;
    ZrWeight x = *w;
    x.data = zr_weight_row(w, (int64_t)e * rows);
    x.ne1 = rows;
    x.nbytes = zr_row_bytes(w->type, w->ne0) * (uint64_t)rows;
    return x;
}

/* ---- hyper-parameters ---- */

typedef struct Keys {
    const ZrGguf *g;
    const char *arch;
    ZrError *err;
} Keys;

/* ---- the architectures ---- */

/* Whether an architecture's layers have a tensor (as llama.cpp loads them). */
typedef enum Presence { ABSENT, OPTIONAL, REQUIRED } Presence;

/* One row per architecture: the facts the architecture fixes (no key says them), which of its
 * optional tensors it has, and a hook for what only it reads. Everything else is common: the
 * hyper-parameter keys (read_hparams), the facts' defaults (llama's block: fill_facts), the
 * tensor names (bind_layer). Adding an architecture (issue 14: gemma2, gemma3, phi3) is a row
 * here, a hook when it has keys of its own (soft-caps, sliding window, a second rope base) or a
 * per-layer pattern (gemma3's five local layers per global one), and the kernels of any fact
 * value zr_model_check_facts still refuses. */
typedef struct ArchInfo {
    const char *name;   /* general.architecture */
    ZrArch arch;
    ZrRopeKind rope;    /* the pairing is implied by the architecture; no key says it */
    ZrAct act;          /* of every layer's gated FFN */
    Presence qkv_bias;  /* attn_{q,k,v}.bias */
    Presence qk_norm;   /* attn_{q,k}_norm.weight */
    Presence post_norm; /* post_attention_norm.weight and post_ffw_norm.weight */
    Presence output;    /* output.weight: when absent the embedding is the output */
    Presence fused_up;  /* ffn_up.weight is [n_embd, 2*n_ff], gate rows then up rows, and no ffn_gate (phi3) */
    Presence rope_factors; /* rope_factors_long/short.weight (phi3's LongRoPE) */
    /* after the common keys and the defaults (m->hp and every m->layers[il].facts filled): this
     * architecture's own keys and per-layer facts (NULL: none) */
    int (*facts)(const Keys *k, ZrModel *m);
} ArchInfo;

static int gemma2_facts(const Keys *k, ZrModel *m);
static int gemma3_facts(const Keys *k, ZrModel *m);
static int qwen3moe_facts(const Keys *k, ZrModel *m);

/* gemma2/gemma3/phi3 as llama.cpp de3ff815 loads them (src/models/gemma2.cpp, gemma3.cpp,
 * phi3.cpp: load_arch_hparams, load_arch_tensors; create_tensor_qkv in llama-model.cpp gives
 * every one of them optional q/k/v biases and the fused attn_qkv alternative). gemma2 reads
 * token_embd as its output whatever the file has. */
static const ArchInfo arch_table[] = {
    /* name     arch            rope          act               bias      qk_norm   post_norm output    fused_up  rope_factors */
    {"llama",  ZR_ARCH_LLAMA,  ZR_ROPE_NORM, ZR_ACT_SILU,      OPTIONAL, ABSENT,   ABSENT,   OPTIONAL, ABSENT,   ABSENT,   NULL},
    {"qwen2",  ZR_ARCH_QWEN2,  ZR_ROPE_NEOX, ZR_ACT_SILU,      REQUIRED, ABSENT,   ABSENT,   OPTIONAL, ABSENT,   ABSENT,   NULL},
    {"qwen3",  ZR_ARCH_QWEN3,  ZR_ROPE_NEOX, ZR_ACT_SILU,      ABSENT,   REQUIRED, ABSENT,   OPTIONAL, ABSENT,   ABSENT,   NULL},
    {"gemma2", ZR_ARCH_GEMMA2, ZR_ROPE_NEOX, ZR_ACT_GELU_TANH, OPTIONAL, ABSENT,   REQUIRED, ABSENT,   ABSENT,   ABSENT,   gemma2_facts},
    {"gemma3", ZR_ARCH_GEMMA3, ZR_ROPE_NEOX, ZR_ACT_GELU_TANH, OPTIONAL, REQUIRED, REQUIRED, OPTIONAL, ABSENT,   ABSENT,   gemma3_facts},
    {"phi3",   ZR_ARCH_PHI3,   ZR_ROPE_NEOX, ZR_ACT_SILU,      OPTIONAL, ABSENT,   ABSENT,   OPTIONAL, REQUIRED, OPTIONAL, NULL},
    {"qwen3moe", ZR_ARCH_QWEN3MOE, ZR_ROPE_NEOX, ZR_ACT_SILU,  ABSENT,   REQUIRED, ABSENT,   OPTIONAL, ABSENT,   ABSENT,   qwen3moe_facts},
};
#define N_ARCH (sizeof arch_table / sizeof arch_table[0])

const char *zr_arch_supported_list(void) { return "llama, qwen2, qwen3, gemma2, gemma3, phi3, qwen3moe"; }

/* The architectures whose FFN may be a mixture of experts (issue 15), as llama.cpp de3ff815 loads
 * them (src/models/llama.cpp, qwen3moe.cpp): llama when expert_count says so (Mixtral's layout),
 * qwen3moe always. Any other architecture with experts is refused by name. */
static const struct { ZrArch arch; Presence experts; } k_moe_archs[] = {
    {ZR_ARCH_LLAMA, OPTIONAL},
    {ZR_ARCH_QWEN3MOE, REQUIRED},
};

static Presence arch_experts(const ArchInfo *ai) {
    for (size_t i = 0; i < sizeof k_moe_archs / sizeof k_moe_archs[0]; i++)
        if (k_moe_archs[i].arch == ai->arch) return k_moe_archs[i].experts;
    return ABSENT;
}

/* llama.cpp's LLAMA_MAX_EXPERTS is 1024; no model near the supported ones has more than 512 */
#define MAX_EXPERTS 1024

/* Architectures near the supported ones that zrun refuses with the reason (a file of one of
 * them would otherwise get the generic "not supported"). */
static const struct { const char *name, *why; } k_refused[] = {
    {"gemma3n", "Gemma 3n (per-layer embeddings, AltUp and LAuReL blocks) is not supported; Gemma 3 (gemma3) is"},
    {"gemma", "Gemma 1 is not supported; Gemma 2 (gemma2) and Gemma 3 (gemma3) are"},
    {"gemma4", "Gemma 4 is not supported; Gemma 2 (gemma2) and Gemma 3 (gemma3) are"},
    {"gemma-embedding", "EmbeddingGemma (an encoder) is not supported"},
    {"clip", "this is a multimodal projector (mmproj: a vision or audio tower), not a language model; vision towers are not supported: give the text model's GGUF"},
    {"phimoe", "Phi-3.5-MoE (phimoe) is not supported (no mixture-of-experts yet); Phi-3 dense models (phi3) are"},
    {"phi2", "Phi-2 (LayerNorm, parallel blocks) is not supported; Phi-3 (phi3) is"},
    {"gpt-oss", "gpt-oss (MXFP4 experts, attention sinks, alternating sliding windows) is not supported yet; Qwen3-MoE (qwen3moe) and Mixtral-style llama experts are"},
    {"qwen2moe", "Qwen1.5/Qwen2-MoE (shared experts) is not supported; Qwen3-MoE (qwen3moe) is"},
    {"qwen3next", "Qwen3-Next (linear attention, shared experts) is not supported; Qwen3-MoE (qwen3moe) is"},
    {"qwen3vlmoe", "Qwen3-VL-MoE (multimodal rope) is not supported; Qwen3-MoE (qwen3moe) is"},
    {"llama4", "Llama 4 (sigmoid routing, shared expert, chunked attention) is not supported; Mixtral-style llama experts are"},
    {"deepseek2", "DeepSeek-V2/V3 (MLA attention, grouped sigmoid routing, shared experts) is not supported"},
    {"olmoe", "OLMoE is not supported; Qwen3-MoE (qwen3moe) and Mixtral-style llama experts are"},
    {"granitemoe", "Granite-MoE (its own scalings) is not supported; Mixtral-style llama experts are"},
    {"dbrx", "DBRX is not supported; Mixtral-style llama experts are"},
    {"grok", "Grok is not supported; Mixtral-style llama experts are"},
};

static const char *key_name(const Keys *k, const char *suffix, char *buf, size_t cap) {
    snprintf(buf, cap, "%s.%s", k->arch, suffix);
    return buf;
}

/* Reads ARCH.suffix as a positive int <= MAX_DIM. *out keeps its default when the key is
 * absent and !required. */
static int key_int(const Keys *k, const char *suffix, bool required, int *out) {
    char key[128];
    key_name(k, suffix, key, sizeof key);
    if (!zr_gguf_find(k->g, key)) {
        if (required) return zr_err(k->err, ZR_E_FORMAT, "%s: key '%s' is missing (required by architecture %s)", k->g->path, key, k->arch);
        return 0;
    }
    uint32_t v;
    int rc = zr_gguf_get_u32(k->g, key, &v, k->err);
    if (rc) return rc;
    if (v == 0 || v > MAX_DIM)
        return zr_err(k->err, ZR_E_FORMAT, "%s: key '%s': expected a value in 1..%d, found %" PRIu32, k->g->path, key, MAX_DIM, v);
    *out = (int)v;
    return 0;
}

static int key_float(const Keys *k, const char *suffix, bool required, float *out) {
    char key[128];
    key_name(k, suffix, key, sizeof key);
    if (!zr_gguf_find(k->g, key)) {
        if (required) return zr_err(k->err, ZR_E_FORMAT, "%s: key '%s' is missing (required by architecture %s)", k->g->path, key, k->arch);
        return 0;
    }
    return zr_gguf_get_f32(k->g, key, out, k->err);
}

/* Linear rope scaling (rope.scaling.factor, or the older rope.scale_linear) as llama.cpp
 * reads it; other scaling types change the rotation beyond a frequency scale: refused. */
static int read_rope_scaling(const Keys *k, ZrHparams *hp) {
    float factor = 0.0f;
    int rc = key_float(k, "rope.scaling.factor", false, &factor);
    if (!rc && factor == 0.0f) rc = key_float(k, "rope.scale_linear", false, &factor);
    if (rc) return rc;
    hp->rope_freq_scale = 1.0f;
    if (factor == 0.0f || factor == 1.0f) return 0;
    char key[128];
    ZrStr type = {"linear", 6};
    rc = zr_gguf_get_name_opt(k->g, key_name(k, "rope.scaling.type", key, sizeof key), &type, k->err);
    if (rc) return rc;
    if (!zr_str_eq(type, "linear") && !zr_str_eq(type, "none"))
        return zr_err(k->err, ZR_E_UNSUPPORTED, "%s: key '%s': rope scaling '%.*s' (factor %g) is not supported (supported: linear)",
                      k->g->path, key, (int)(type.len > 32 ? 32 : type.len), type.ptr, (double)factor);
    if (zr_str_eq(type, "linear")) {
        if (!(factor > 0.0f) || !isfinite(factor))
            return zr_err(k->err, ZR_E_FORMAT, "%s: key '%s.rope.scaling.factor': expected a finite positive value, found %g", k->g->path, k->arch, (double)factor);
        hp->rope_freq_scale = 1.0f / factor;
    }
    return 0;
}

static int read_n_vocab(const Keys *k, ZrHparams *hp) {
    hp->n_vocab = 0;
    int rc = key_int(k, "vocab_size", false, &hp->n_vocab);
    if (rc || hp->n_vocab) return rc;
    const ZrGgufKv *toks = zr_gguf_find(k->g, "tokenizer.ggml.tokens");
    if (toks && toks->type == ZR_GGUF_ARRAY && toks->n > 0 && toks->n <= (uint64_t)INT32_MAX) {
        hp->n_vocab = (int)toks->n;
        return 0;
    }
    const ZrGgufTensor *t = zr_gguf_tensor(k->g, "token_embd.weight");
    if (t && t->n_dims == 2 && t->ne[1] > 0 && t->ne[1] <= INT32_MAX) {
        hp->n_vocab = (int)t->ne[1];
        return 0;
    }
    return zr_err(k->err, ZR_E_FORMAT, "%s: the vocabulary size is unknown (no '%s.vocab_size', no tokenizer.ggml.tokens array, no 2-D token_embd.weight)",
                  k->g->path, k->arch);
}

static int read_hparams(const ZrGguf *g, const ArchInfo *ai, ZrHparams *hp, ZrError *err) {
    Keys k = {g, ai->name, err};
    memset(hp, 0, sizeof *hp);
    hp->arch = ai->arch;
    snprintf(hp->arch_name, sizeof hp->arch_name, "%s", ai->name);
    hp->norm = ZR_NORM_RMS;
    hp->rope = ai->rope;
    hp->rope_theta = 10000.0f;
    hp->embd_scale = 1.0f;
    hp->rope_attn_factor = 1.0f;
    int rc;
    if ((rc = key_int(&k, "embedding_length", true, &hp->n_embd))) return rc;
    if ((rc = key_int(&k, "block_count", true, &hp->n_layer))) return rc;
    if ((rc = key_int(&k, "feed_forward_length", true, &hp->n_ff))) return rc;
    if ((rc = key_int(&k, "attention.head_count", true, &hp->n_head))) return rc;
    hp->n_head_kv = hp->n_head;
    if ((rc = key_int(&k, "attention.head_count_kv", false, &hp->n_head_kv))) return rc;
    if ((rc = key_int(&k, "context_length", true, &hp->n_ctx_train))) return rc;
    if ((rc = key_float(&k, "attention.layer_norm_rms_epsilon", true, &hp->rms_eps))) return rc;
    if ((rc = key_float(&k, "rope.freq_base", false, &hp->rope_theta))) return rc;
    if ((rc = read_rope_scaling(&k, hp))) return rc;
    if ((rc = key_float(&k, "rope.scaling.attn_factor", false, &hp->rope_attn_factor))) return rc;
    if (!(hp->rope_attn_factor > 0.0f) || !isfinite(hp->rope_attn_factor))
        return zr_err(err, ZR_E_FORMAT, "%s: key '%s.rope.scaling.attn_factor': expected a finite positive value, found %g", g->path, ai->name,
                      (double)hp->rope_attn_factor);
    hp->n_ctx_orig = hp->n_ctx_train;
    if ((rc = key_int(&k, "rope.scaling.original_context_length", false, &hp->n_ctx_orig))) return rc;
    if ((rc = read_n_vocab(&k, hp))) return rc;

    if (hp->n_layer > MAX_LAYERS)
        return zr_err(err, ZR_E_FORMAT, "%s: key '%s.block_count': expected at most %d, found %d", g->path, ai->name, MAX_LAYERS, hp->n_layer);
    if (hp->n_head % hp->n_head_kv)
        return zr_err(err, ZR_E_FORMAT, "%s: %d query heads are not a multiple of %d key/value heads", g->path, hp->n_head, hp->n_head_kv);
    /* a NaN fails the comparison; an infinite epsilon zeroes every norm, an infinite base every rotation */
    if (!(hp->rms_eps > 0.0f) || !isfinite(hp->rms_eps))
        return zr_err(err, ZR_E_FORMAT, "%s: key '%s.attention.layer_norm_rms_epsilon': expected a finite positive value, found %g", g->path, ai->name, (double)hp->rms_eps);
    if (!(hp->rope_theta > 0.0f) || !isfinite(hp->rope_theta))
        return zr_err(err, ZR_E_FORMAT, "%s: key '%s.rope.freq_base': expected a finite positive value, found %g", g->path, ai->name, (double)hp->rope_theta);

    /* head_dim: key_length when given (qwen3: n_head*head_dim != n_embd), else n_embd/n_head */
    hp->head_dim = 0;
    if ((rc = key_int(&k, "attention.key_length", false, &hp->head_dim))) return rc;
    if (!hp->head_dim) {
        if (hp->n_embd % hp->n_head)
            return zr_err(err, ZR_E_FORMAT, "%s: embedding length %d is not a multiple of %d heads (and no '%s.attention.key_length')",
                          g->path, hp->n_embd, hp->n_head, ai->name);
        hp->head_dim = hp->n_embd / hp->n_head;
    }
    int v_len = hp->head_dim;
    if ((rc = key_int(&k, "attention.value_length", false, &v_len))) return rc;
    if (v_len != hp->head_dim)
        return zr_err(err, ZR_E_UNSUPPORTED, "%s: key length %d differs from value length %d (not supported)", g->path, hp->head_dim, v_len);
    if ((int64_t)hp->n_head * hp->head_dim > MAX_DIM)
        return zr_err(err, ZR_E_FORMAT, "%s: %d heads x %d per head exceed %d", g->path, hp->n_head, hp->head_dim, MAX_DIM);
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);

    hp->rope_dim = hp->head_dim;
    if ((rc = key_int(&k, "rope.dimension_count", false, &hp->rope_dim))) return rc;
    char rkey[128];
    if (hp->rope_dim % 2 && !zr_gguf_find(g, key_name(&k, "rope.dimension_count", rkey, sizeof rkey))) {
        if (zr_gguf_find(g, key_name(&k, "attention.key_length", rkey, sizeof rkey)))
            return zr_err(err, ZR_E_FORMAT, "%s: key '%s': expected an even head dimension (RoPE rotates pairs), found %d", g->path, rkey, hp->head_dim);
        return zr_err(err, ZR_E_FORMAT, "%s: embedding length %d / %d heads: expected an even head dimension (RoPE rotates pairs), found %d",
                      g->path, hp->n_embd, hp->n_head, hp->head_dim);
    }
    if (hp->rope_dim > hp->head_dim || hp->rope_dim % 2)
        return zr_err(err, ZR_E_FORMAT, "%s: key '%s.rope.dimension_count': expected an even value <= head dim %d, found %d",
                      g->path, ai->name, hp->head_dim, hp->rope_dim);
    return 0;
}

/* ---- per-layer facts ---- */

/* expert_count and expert_used_count, read for every architecture as llama.cpp does (its
 * llama_model::load_hparams). On llama a count of 1 is the dense FFN (as zrun has always read it);
 * qwen3moe needs the keys (llama.cpp throws "n_expert must be > 0 for QWEN3MOE"). Each expert's
 * width: llama's is feed_forward_length; qwen3moe's is its own key (arch hook). */
static int read_experts(const Keys *k, ZrModel *m, Presence experts) {
    int n_expert = 0, n_used = 0;
    char key[128];
    int rc = key_int(k, "expert_count", experts == REQUIRED, &n_expert);
    if (rc || (n_expert <= 1 && experts != REQUIRED)) return rc;
    key_name(k, "expert_count", key, sizeof key);
    if (experts == ABSENT)
        return zr_err(k->err, ZR_E_UNSUPPORTED, "%s: key '%s' = %d: mixture of experts is supported on llama (Mixtral's layout) and qwen3moe, not on %s",
                      k->g->path, key, n_expert, k->arch);
    if (n_expert > MAX_EXPERTS)
        return zr_err(k->err, ZR_E_FORMAT, "%s: key '%s': expected at most %d experts, found %d", k->g->path, key, MAX_EXPERTS, n_expert);
    if ((rc = key_int(k, "expert_used_count", true, &n_used))) return rc;
    if (n_used > n_expert)
        return zr_err(k->err, ZR_E_FORMAT, "%s: key '%s': expected at most the %d experts, found %d", k->g->path,
                      key_name(k, "expert_used_count", key, sizeof key), n_expert, n_used);
    for (int il = 0; il < m->hp.n_layer; il++) {
        m->layers[il].facts.n_expert = n_expert;
        m->layers[il].facts.n_expert_used = n_used;
        m->layers[il].facts.n_ff_expert = m->hp.n_ff;
    }
    return 0;
}

/* src/models/qwen3moe.cpp: each expert's width is expert_feed_forward_length, else
 * feed_forward_length / expert_used_count. Qwen3-MoE's norm_topk_prob is not read: llama.cpp
 * always renormalizes the chosen weights (norm_w = true), and so does zrun. */
static int qwen3moe_facts(const Keys *k, ZrModel *m) {
    int n_ff_exp = 0;
    int rc = key_int(k, "expert_feed_forward_length", false, &n_ff_exp);
    for (int il = 0; !rc && il < m->hp.n_layer; il++) {
        ZrLayerFacts *f = &m->layers[il].facts;
        f->n_ff_expert = n_ff_exp ? n_ff_exp : m->hp.n_ff / f->n_expert_used;
    }
    return rc;
}

/* ---- gemma ---- */

/* The sliding-window layers as llama.cpp's load_swa_pattern (llama-model.cpp) and
 * llama_hparams::set_swa_pattern: attention.sliding_window_pattern as one value per layer (an
 * array), else as a period n (default: the architecture's) where layer il is local when
 * il % n < n - 1 (n = 0: every layer). A local layer attends to the last n_swa positions only
 * (llama_hparams::is_masked_swa, standard: key p0 is masked for query p1 when p1 - p0 >= n_swa)
 * and rotates with the local base and scale (llama_model::get_rope_freq_base/scale). */
static int set_swa(const Keys *k, ZrModel *m, int n_swa, uint32_t period, float theta, float scale) {
    char key[128];
    key_name(k, "attention.sliding_window_pattern", key, sizeof key);
    const ZrGgufKv *kv = zr_gguf_find(k->g, key), *arr = NULL;
    if (kv && kv->type == ZR_GGUF_ARRAY) {
        if (kv->n != (uint64_t)m->hp.n_layer || kv->elem_type == ZR_GGUF_STRING || kv->elem_type == ZR_GGUF_ARRAY)
            return zr_err(k->err, ZR_E_FORMAT, "%s: key '%s': expected %d numbers (one per layer), found %" PRIu64 " values of type %u", k->g->path, key,
                          m->hp.n_layer, kv->n, (unsigned)kv->elem_type);
        arr = kv;
    } else if (kv) {
        int rc = zr_gguf_get_u32(k->g, key, &period, k->err);
        if (rc) return rc;
    }
    for (int il = 0; il < m->hp.n_layer; il++) {
        const bool local = arr ? zr_gguf_arr_num(arr, (uint64_t)il) != 0 : period == 0 || (uint32_t)il % period < period - 1;
        if (!local) continue;
        ZrLayerFacts *f = &m->layers[il].facts;
        f->window = n_swa;
        f->rope_theta = theta;
        f->rope_freq_scale = scale;
    }
    return 0;
}

/* llama.cpp's f_attention_scale of gemma2/gemma3 (from gemma_pytorch's config): Q is scaled by
 * 1/sqrt(n_embd / n_head) for the 27B model (told by its layer count), else 1/sqrt(head_dim). */
static void gemma_attn_scale(ZrHparams *hp, int n_layer_27b) {
    hp->attn_scale = hp->n_layer == n_layer_27b ? 1.0f / sqrtf((float)(hp->n_embd / hp->n_head)) : 1.0f / sqrtf((float)hp->head_dim);
}

/* src/models/gemma2.cpp: embedding * sqrtf(n_embd); attention soft-cap 50 and final soft-cap 30
 * unless the keys say; window 4096 unless the key says, every other layer local (pattern 2),
 * local layers with rope.freq_base_swa (default: the global base) and the global scale. */
static int gemma2_facts(const Keys *k, ZrModel *m) {
    ZrHparams *hp = &m->hp;
    hp->embd_scale = sqrtf((float)hp->n_embd);
    hp->attn_softcap = 50.0f;
    hp->final_softcap = 30.0f;
    int n_swa = 4096, rc;
    float theta_swa = hp->rope_theta;
    if ((rc = key_float(k, "attn_logit_softcapping", false, &hp->attn_softcap))) return rc;
    if ((rc = key_float(k, "final_logit_softcapping", false, &hp->final_softcap))) return rc;
    if ((rc = key_int(k, "attention.sliding_window", false, &n_swa))) return rc;
    if ((rc = key_float(k, "rope.freq_base_swa", false, &theta_swa))) return rc;
    gemma_attn_scale(hp, 46);
    return set_swa(k, m, n_swa, 2, theta_swa, hp->rope_freq_scale);
}

/* src/models/gemma3.cpp: embedding * sqrtf(n_embd); final soft-cap only when the key says;
 * sliding windows only when attention.sliding_window > 0, then five local layers per global
 * one (pattern 6), local layers with rope.freq_base_swa (default 10000) and scale 1 (the
 * global layers keep the file's base and linear scaling: 1/8 on Gemma 3 4B and larger). */
static int gemma3_facts(const Keys *k, ZrModel *m) {
    ZrHparams *hp = &m->hp;
    hp->embd_scale = sqrtf((float)hp->n_embd);
    hp->final_softcap = 0.0f;
    int rc;
    if ((rc = key_float(k, "final_logit_softcapping", false, &hp->final_softcap))) return rc;
    gemma_attn_scale(hp, 62);
    char key[128];
    uint32_t n_swa = 0;
    if ((rc = zr_gguf_get_u32_opt(k->g, key_name(k, "attention.sliding_window", key, sizeof key), &n_swa, k->err))) return rc;
    if (n_swa == 0) return 0;
    if (n_swa > MAX_DIM) return zr_err(k->err, ZR_E_FORMAT, "%s: key '%s': expected a value in 0..%d, found %" PRIu32, k->g->path, key, MAX_DIM, n_swa);
    float theta_swa = 10000.0f;
    if ((rc = key_float(k, "rope.freq_base_swa", false, &theta_swa))) return rc;
    return set_swa(k, m, (int)n_swa, 6, theta_swa, 1.0f);
}

/* Every layer's facts: llama's block with the architecture's fixed choices and the model's rope,
 * then the keys every architecture may have (experts), then the architecture's own hook.
 * Optional tensors count as present here; binding keeps the fact only where the file has them. */
static int fill_facts(ZrModel *m, const ArchInfo *ai, const ZrGguf *g, ZrError *err) {
    ZrHparams *hp = &m->hp;
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return zr_err(err, ZR_E_NOMEM, "%s: out of memory for %d layers", g->path, hp->n_layer);
    for (int il = 0; il < hp->n_layer; il++)
        m->layers[il].facts = (ZrLayerFacts){.act = ai->act,
                                             .qkv_bias = ai->qkv_bias != ABSENT,
                                             .qk_norm = ai->qk_norm != ABSENT,
                                             .post_attn_norm = ai->post_norm != ABSENT,
                                             .post_ffn_norm = ai->post_norm != ABSENT,
                                             .rope = hp->rope != ZR_ROPE_NONE,
                                             .rope_theta = hp->rope_theta,
                                             .rope_freq_scale = hp->rope_freq_scale};
    Keys k = {g, ai->name, err};
    int rc = read_experts(&k, m, arch_experts(ai));
    if (!rc && ai->facts) rc = ai->facts(&k, m);
    return rc;
}

/* What zrun computes today (the CPU reference computes every fact passed here; the CUDA
 * backend refuses those it has no kernel for by name); everything else is refused by name before
 * any tensor is bound (so on the facts as the architecture states them: an optional tensor
 * counts as present). Widen it where the CPU reference gains the op (issue 15: experts). */
static int check_facts(const ZrModel *m, const char *path, ZrError *err) {
    const ZrHparams *hp = &m->hp;
    const char *arch = hp->arch_name;
    if (hp->norm != ZR_NORM_RMS) return zr_err(err, ZR_E_UNSUPPORTED, "%s: %s: only RMS norms are supported", path, arch);
    if (hp->rope == ZR_ROPE_NONE)
        return zr_err(err, ZR_E_UNSUPPORTED, "%s: %s: models without rope are not supported (supported rope: norm, neox)", path, arch);
    if (!(hp->embd_scale > 0.0f) || !isfinite(hp->embd_scale))
        return zr_err(err, ZR_E_FORMAT, "%s: %s: embedding scale: expected a finite positive value, found %g", path, arch, (double)hp->embd_scale);
    if (!(hp->attn_scale > 0.0f) || !isfinite(hp->attn_scale))
        return zr_err(err, ZR_E_FORMAT, "%s: %s: attention scale: expected a finite positive value, found %g", path, arch, (double)hp->attn_scale);
    if (!(hp->final_softcap >= 0.0f) || !isfinite(hp->final_softcap))
        return zr_err(err, ZR_E_FORMAT, "%s: %s: final logit soft-cap: expected a finite value >= 0, found %g", path, arch, (double)hp->final_softcap);
    if (!(hp->attn_softcap >= 0.0f) || !isfinite(hp->attn_softcap))
        return zr_err(err, ZR_E_FORMAT, "%s: %s: attention logit soft-cap: expected a finite value >= 0, found %g", path, arch, (double)hp->attn_softcap);
    if (!(hp->rope_attn_factor > 0.0f) || !isfinite(hp->rope_attn_factor))
        return zr_err(err, ZR_E_FORMAT, "%s: %s: rope attention factor: expected a finite positive value, found %g", path, arch, (double)hp->rope_attn_factor);
    for (int il = 0; il < hp->n_layer; il++) {
        const ZrLayerFacts *f = &m->layers[il].facts;
        if (f->act != ZR_ACT_SILU && f->act != ZR_ACT_GELU_TANH)
            return zr_err(err, ZR_E_UNSUPPORTED, "%s: %s: layer %d: FFN activation '%s' is not supported (supported: silu, gelu_tanh)", path, arch, il, zr_act_name(f->act));
        if (f->window < 0)
            return zr_err(err, ZR_E_FORMAT, "%s: %s: layer %d: sliding window %d: expected >= 0", path, arch, il, f->window);
        if (!f->rope)
            return zr_err(err, ZR_E_UNSUPPORTED, "%s: %s: layer %d: layers without rope (NoPE) are not supported yet", path, arch, il);
        if (!(f->rope_theta > 0.0f) || !isfinite(f->rope_theta) || !(f->rope_freq_scale > 0.0f) || !isfinite(f->rope_freq_scale))
            return zr_err(err, ZR_E_FORMAT, "%s: %s: layer %d: rope base %g, frequency scale %g: expected finite positive values", path, arch, il,
                          (double)f->rope_theta, (double)f->rope_freq_scale);
        if (f->n_expert && (f->n_expert < 0 || f->n_expert > MAX_EXPERTS || f->n_expert_used < 1 || f->n_expert_used > f->n_expert || f->n_ff_expert < 1))
            return zr_err(err, ZR_E_FORMAT, "%s: %s: layer %d: %d experts, %d used, each %d wide: expected 1..%d experts, 1..%d used, a width >= 1",
                          path, arch, il, f->n_expert, f->n_expert_used, f->n_ff_expert, MAX_EXPERTS, f->n_expert);
        if (f->n_expert && f->act != ZR_ACT_SILU)
            return zr_err(err, ZR_E_UNSUPPORTED, "%s: %s: layer %d: experts with a %s FFN are not supported (supported: silu)", path, arch, il, zr_act_name(f->act));
    }
    return 0;
}

int zr_model_check_facts(const ZrModel *m, ZrError *err) {
    return check_facts(m, m->gguf.path ? m->gguf.path : "model", err);
}

/* ---- tensor binding ---- */

typedef struct Binder {
    ZrModel *m;
    const ArchInfo *ai;
    const ZrGguf *g;
    char *next_name; /* into m->names */
    ZrError *err;
} Binder;

static void shape_str(const ZrGgufTensor *t, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (uint32_t d = 0; d < t->n_dims && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, d ? ", %" PRId64 : "%" PRId64, t->ne[d]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

/* "f32, f16, q4_0, ..." : the types zrun dequantizes */
static void compute_types(char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    for (uint32_t id = 0; id < ZR_TYPE_COUNT && n < cap; id++) {
        const ZrTypeInfo *ti = zr_type_info(id);
        if (ti && ti->compute) n += (size_t)snprintf(buf + n, cap - n, n ? ", %s" : "%s", ti->name);
    }
}

static int bind_found(Binder *b, ZrWeight *w, const char *name, const ZrGgufTensor *t, int64_t ne0, int64_t ne1, bool matrix);

/* Binds w to the tensor `name` with shape [ne0] (ne1 == 0: a 1-D F32 vector) or [ne0, ne1]
 * (a matrix of any type zrun computes). An absent optional tensor leaves w->data NULL. */
static int bind(Binder *b, ZrWeight *w, const char *name, int64_t ne0, int64_t ne1, bool required) {
    const char *path = b->g->path;
    memset(w, 0, sizeof *w);
    const ZrGgufTensor *t = zr_gguf_tensor(b->g, name);
    if (!t) {
        if (required)
            return zr_err(b->err, ZR_E_FORMAT, "%s: tensor '%s' is missing (required by architecture %s)", path, name, b->m->hp.arch_name);
        return 0;
    }
    bool matrix = ne1 > 0;
    bool shape_ok = matrix ? (t->n_dims == 2 && t->ne[0] == ne0 && t->ne[1] == ne1) : (t->n_dims == 1 && t->ne[0] == ne0);
    if (!shape_ok) {
        char found[96];
        shape_str(t, found, sizeof found);
        if (matrix)
            return zr_err(b->err, ZR_E_FORMAT, "%s: tensor '%s': expected shape [%" PRId64 ", %" PRId64 "], found %s", path, name, ne0, ne1, found);
        return zr_err(b->err, ZR_E_FORMAT, "%s: tensor '%s': expected shape [%" PRId64 "], found %s", path, name, ne0, found);
    }
    return bind_found(b, w, name, t, ne0, ne1, matrix);
}

/* An expert tensor: GGUF [ne0, ne1, n_expert] (n_expert matrices of ne1 rows, one after the
 * other), bound as the matrix [ne0, ne1 * n_expert]. Required. */
static int bind_experts(Binder *b, ZrWeight *w, const char *name, int64_t ne0, int64_t ne1, int64_t n_expert) {
    const char *path = b->g->path;
    memset(w, 0, sizeof *w);
    const ZrGgufTensor *t = zr_gguf_tensor(b->g, name);
    if (!t) return zr_err(b->err, ZR_E_FORMAT, "%s: tensor '%s' is missing (required by architecture %s with %s.expert_count = %" PRId64 ")", path, name,
                          b->m->hp.arch_name, b->m->hp.arch_name, n_expert);
    if (t->n_dims != 3 || t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != n_expert) {
        char found[96];
        shape_str(t, found, sizeof found);
        return zr_err(b->err, ZR_E_FORMAT, "%s: tensor '%s': expected shape [%" PRId64 ", %" PRId64 ", %" PRId64 "], found %s", path, name, ne0, ne1,
                      n_expert, found);
    }
    return bind_found(b, w, name, t, ne0, ne1 * n_expert, true);
}

/* The checks of a found tensor beyond its shape (type, blocks), then the binding. */
static int bind_found(Binder *b, ZrWeight *w, const char *name, const ZrGgufTensor *t, int64_t ne0, int64_t ne1, bool matrix) {
    const char *path = b->g->path;
    const ZrTypeInfo *ti = zr_type_info(t->type);
    char type_label[32];
    if (ti)
        snprintf(type_label, sizeof type_label, "%s", ti->name);
    else
        snprintf(type_label, sizeof type_label, "id %u", (unsigned)t->type);
    if (matrix && (!ti || !ti->compute)) {
        char computed[256];
        compute_types(computed, sizeof computed);
        return zr_err(b->err, ZR_E_UNSUPPORTED, "%s: tensor '%s': type %s is not supported (zrun computes %s)", path, name, type_label, computed);
    }
    if (!matrix && t->type != ZR_TYPE_F32)
        return zr_err(b->err, ZR_E_UNSUPPORTED, "%s: tensor '%s': expected type f32, found %s", path, name, type_label);
    if (ne0 % ti->block)
        return zr_err(b->err, ZR_E_FORMAT, "%s: tensor '%s': row length %" PRId64 " is not a multiple of the %s block size %u", path, name, ne0, ti->name, ti->block);

    w->data = t->data;
    w->type = t->type;
    w->ne0 = ne0;
    w->ne1 = matrix ? ne1 : 1;
    w->nbytes = t->nbytes;
    snprintf(b->next_name, NAME_CAP, "%s", name);
    w->name = b->next_name;
    b->next_name += NAME_CAP;
    return 0;
}

/* Rows [row0, row0 + rows) of a bound matrix (or values of a bound vector) as a weight of its
 * own: a fused tensor's parts (rows of every block format are whole blocks, so any row range is a
 * matrix of the same type). The part keeps the fused tensor's name. */
static ZrWeight part_of(const ZrWeight *whole, int64_t row0, int64_t rows) {
    ZrWeight w = *whole;
    w.data = zr_weight_row(whole, row0);
    w.ne1 = rows;
    w.nbytes = zr_row_bytes(whole->type, whole->ne0) * (uint64_t)rows;
    return w;
}

/* Values [i0, i0 + n) of a bound f32 vector as a vector of its own. */
static ZrWeight part_of_vector(const ZrWeight *whole, int64_t i0, int64_t n) {
    ZrWeight w = *whole;
    w.data = (const float *)whole->data + i0;
    w.ne0 = n;
    w.nbytes = (uint64_t)n * sizeof(float);
    return w;
}

static int bind_layer(Binder *b, int il, ZrLayer *L) {
    const ZrHparams *hp = &b->m->hp;
    const ArchInfo *ai = b->ai;
    ZrLayerFacts *f = &L->facts;
    const int64_t e = hp->n_embd, q = (int64_t)hp->n_head * hp->head_dim, kv = (int64_t)hp->n_head_kv * hp->head_dim;
    char n[NAME_CAP];
    int rc = 0;
#define BIND(field, suffix, ne0, ne1, req) \
    if (!rc) { snprintf(n, sizeof n, "blk.%d." suffix, il); rc = bind(b, &L->field, n, ne0, ne1, req); }
    BIND(attn_norm, "attn_norm.weight", e, 0, true);
    /* llama.cpp's create_tensor_qkv: attn_qkv.weight [n_embd, q + 2 kv] (Q rows, K rows, V rows:
     * build_qkv's views) when the file has it, with attn_qkv.bias or else the separate biases */
    snprintf(n, sizeof n, "blk.%d.attn_qkv.weight", il);
    const bool fused_qkv = zr_gguf_tensor(b->g, n) != NULL;
    bool fused_bias = false;
    if (fused_qkv) {
        BIND(wq, "attn_qkv.weight", e, q + 2 * kv, true);
        if (!rc) {
            const ZrWeight whole = L->wq;
            L->wq = part_of(&whole, 0, q);
            L->wk = part_of(&whole, q, kv);
            L->wv = part_of(&whole, q + kv, kv);
        }
        snprintf(n, sizeof n, "blk.%d.attn_qkv.bias", il);
        fused_bias = f->qkv_bias && zr_gguf_tensor(b->g, n) != NULL;
        if (fused_bias) {
            BIND(bq, "attn_qkv.bias", q + 2 * kv, 0, true);
            if (!rc) {
                const ZrWeight whole = L->bq;
                L->bq = part_of_vector(&whole, 0, q);
                L->bk = part_of_vector(&whole, q, kv);
                L->bv = part_of_vector(&whole, q + kv, kv);
            }
        }
    } else {
        BIND(wq, "attn_q.weight", e, q, true);
        BIND(wk, "attn_k.weight", e, kv, true);
        BIND(wv, "attn_v.weight", e, kv, true);
    }
    if (f->qkv_bias && !fused_bias) {
        BIND(bq, "attn_q.bias", q, 0, ai->qkv_bias == REQUIRED);
        BIND(bk, "attn_k.bias", kv, 0, ai->qkv_bias == REQUIRED);
        BIND(bv, "attn_v.bias", kv, 0, ai->qkv_bias == REQUIRED);
    }
    if (f->qk_norm) {
        BIND(q_norm, "attn_q_norm.weight", hp->head_dim, 0, ai->qk_norm == REQUIRED);
        BIND(k_norm, "attn_k_norm.weight", hp->head_dim, 0, ai->qk_norm == REQUIRED);
    }
    BIND(wo, "attn_output.weight", q, e, true);
    if (f->post_attn_norm) BIND(attn_post_norm, "post_attention_norm.weight", e, 0, ai->post_norm == REQUIRED);
    BIND(ffn_norm, "ffn_norm.weight", e, 0, true);
    if (f->n_expert) {
        /* llama.cpp's llama / qwen3moe load_arch_tensors: the router, then the experts as 3-D
         * tensors [n_embd, n_ff_exp, n_expert] (gate, up) and [n_ff_exp, n_embd, n_expert] (down).
         * llama.cpp lets a llama file lack ffn_gate_exps (then silu(up) alone); zrun requires it. */
        const int64_t ff = f->n_ff_expert, ne = f->n_expert;
        BIND(ffn_gate_inp, "ffn_gate_inp.weight", e, ne, true);
#define BIND_EXPERTS(field, suffix, ne0, ne1) \
    if (!rc) { snprintf(n, sizeof n, "blk.%d." suffix, il); rc = bind_experts(b, &L->field, n, ne0, ne1, ne); }
        BIND_EXPERTS(gate_exps, "ffn_gate_exps.weight", e, ff);
        BIND_EXPERTS(up_exps, "ffn_up_exps.weight", e, ff);
        BIND_EXPERTS(down_exps, "ffn_down_exps.weight", ff, e);
#undef BIND_EXPERTS
    } else if (ai->fused_up == REQUIRED) {
        /* phi3: ffn_up.weight [n_embd, 2 n_ff], gate rows first (llama.cpp's LLM_FFN_SWIGLU on the
         * one product: ggml_swiglu takes silu of the first half times the second) */
        BIND(w_gate, "ffn_up.weight", e, 2 * (int64_t)hp->n_ff, true);
        if (!rc) {
            const ZrWeight whole = L->w_gate;
            L->w_gate = part_of(&whole, 0, hp->n_ff);
            L->w_up = part_of(&whole, hp->n_ff, hp->n_ff);
        }
    } else {
        BIND(w_gate, "ffn_gate.weight", e, hp->n_ff, true);
        BIND(w_up, "ffn_up.weight", e, hp->n_ff, true);
    }
    if (!f->n_expert) BIND(w_down, "ffn_down.weight", hp->n_ff, e, true);
    if (f->post_ffn_norm) BIND(ffn_post_norm, "post_ffw_norm.weight", e, 0, ai->post_norm == REQUIRED);
#undef BIND
    /* optional tensors: the fact says what the file has (an absent bias of three adds zero) */
    f->qkv_bias = L->bq.data || L->bk.data || L->bv.data;
    f->qk_norm = L->q_norm.data || L->k_norm.data;
    f->post_attn_norm = L->attn_post_norm.data != NULL;
    f->post_ffn_norm = L->ffn_post_norm.data != NULL;
    return rc;
}

static uint64_t weight_params(const ZrWeight *w) { return w->data ? (uint64_t)(w->ne0 * w->ne1) : 0; }
static uint64_t weight_bytes(const ZrWeight *w) { return w->data ? w->nbytes : 0; }

/* The share of w a token reads: all of it, but of an expert tensor the chosen experts' only. */
static uint64_t active_part(const ZrLayer *L, const ZrWeight *w, uint64_t all) {
    const bool expert = L->facts.n_expert && (w == &L->gate_exps || w == &L->up_exps || w == &L->down_exps);
    return expert ? all / (uint64_t)L->facts.n_expert * (uint64_t)L->facts.n_expert_used : all;
}

static void count_model(ZrModel *m) {
    const ZrWeight *globals[] = {&m->tok_embd, &m->output_norm, &m->rope_freqs, &m->rope_long, &m->rope_short};
    m->n_params = 0;
    m->n_params_active = 0;
    m->bytes_per_token = 0;
    for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++) m->n_params += weight_params(globals[i]);
    if (!m->tied_output) m->n_params += weight_params(&m->output);
    /* a decode step reads one embedding row, then every other weight once (the output matrix
     * in full even when it is the tied embedding) */
    m->bytes_per_token = zr_row_bytes(m->tok_embd.type, m->tok_embd.ne0) + weight_bytes(&m->output_norm) +
                         weight_bytes(&m->rope_freqs) + weight_bytes(&m->output);
    m->n_params_active = m->n_params;
    for (int il = 0; il < m->hp.n_layer; il++) {
        const ZrLayer *L = &m->layers[il];
        const ZrWeight *w = LAYER_WEIGHTS(L);
        for (size_t i = 0; i < WEIGHTS_PER_LAYER; i++) {
            m->n_params += weight_params(&w[i]);
            m->n_params_active += active_part(L, &w[i], weight_params(&w[i]));
            m->bytes_per_token += active_part(L, &w[i], weight_bytes(&w[i]));
        }
    }
}

/* The layers' facts must be set (their tensors are bound as the facts say). */
static int bind_all(ZrModel *m, const ArchInfo *ai, const ZrGguf *g, ZrError *err) {
    const ZrHparams *hp = &m->hp;
    size_t n_names = WEIGHTS_GLOBAL + WEIGHTS_PER_LAYER * (size_t)hp->n_layer;
    m->names = calloc(n_names, NAME_CAP);
    if (!m->names) return zr_err(err, ZR_E_NOMEM, "%s: out of memory for %d layers", g->path, hp->n_layer);
    Binder b = {m, ai, g, m->names, err};
    int rc = bind(&b, &m->tok_embd, "token_embd.weight", hp->n_embd, hp->n_vocab, true);
    if (!rc) rc = bind(&b, &m->output_norm, "output_norm.weight", hp->n_embd, 0, true);
    if (!rc && ai->output != ABSENT) rc = bind(&b, &m->output, "output.weight", hp->n_embd, hp->n_vocab, ai->output == REQUIRED);
    if (!rc && !m->output.data) {
        m->output = m->tok_embd;
        m->tied_output = true;
    }
    if (!rc) rc = bind(&b, &m->rope_freqs, "rope_freqs.weight", hp->rope_dim / 2, 0, false);
    if (!rc && ai->rope_factors != ABSENT) rc = bind(&b, &m->rope_long, "rope_factors_long.weight", hp->rope_dim / 2, 0, ai->rope_factors == REQUIRED);
    if (!rc && ai->rope_factors != ABSENT) rc = bind(&b, &m->rope_short, "rope_factors_short.weight", hp->rope_dim / 2, 0, ai->rope_factors == REQUIRED);
    for (int il = 0; !rc && il < hp->n_layer; il++) rc = bind_layer(&b, il, &m->layers[il]);
    return rc;
}

/* rope_freqs.weight divides each pair's frequency: a zero, negative or non-finite divisor
 * makes every rotation NaN. [rope_dim/2] f32. */
static int check_rope_freqs(const ZrModel *m, const ZrGguf *g, ZrError *err) {
    const ZrWeight *ws[3] = {&m->rope_freqs, &m->rope_long, &m->rope_short};
    for (int k = 0; k < 3; k++) {
        const ZrWeight *w = ws[k];
        for (int64_t i = 0; w->data && i < w->ne0; i++) {
            float f;
            memcpy(&f, (const char *)w->data + i * (int64_t)sizeof f, sizeof f);
            if (!(f > 0.0f) || !isfinite(f))
                return zr_err(err, ZR_E_FORMAT, "%s: tensor '%s': value %" PRId64 ": expected a finite positive frequency divisor, found %g",
                              g->path, w->name, i, (double)f);
        }
    }
    return 0;
}

/* A text model's GGUF with a vision tower's tensors (llama.cpp keeps those in a separate mmproj
 * file: "v.*", "mm.*") is refused by name rather than run without them. */
static int check_vision(const ZrGguf *g, ZrError *err) {
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const ZrStr *name = &g->tensors[i].name;
        if ((name->len > 2 && !memcmp(name->ptr, "v.", 2)) || (name->len > 3 && !memcmp(name->ptr, "mm.", 3)))
            return zr_err(err, ZR_E_UNSUPPORTED, "%s: tensor '%.*s': vision towers are not supported (a text-only GGUF is)", g->path,
                          (int)(name->len > 64 ? 64 : name->len), name->ptr);
    }
    return 0;
}

/* The f32 vectors (ne1 == 1) of m whose data is not 4-byte aligned get aligned copies (in one
 * allocation, m->aligned): a file with general.alignment = 1 may place them anywhere, and the
 * backends read them as float arrays. Matrices are read bytewise and stay in the map. */
static bool misaligned_vector(const ZrWeight *w) {
    return w->data && w->type == ZR_TYPE_F32 && w->ne1 == 1 && (uintptr_t)w->data % _Alignof(float) != 0;
}

/* Counts (copy false) or makes (copy true) v's aligned copy at m->aligned + at; returns the
 * floats it takes there. */
static uint64_t align_vector(ZrModel *m, ZrWeight *v, uint64_t at, bool copy) {
    if (!misaligned_vector(v)) return 0;
    if (copy) {
        memcpy(m->aligned + at, v->data, (size_t)v->nbytes);
        v->data = m->aligned + at;
    }
    return (uint64_t)v->ne0;
}

static int align_vectors(ZrModel *m, const ZrGguf *g, ZrError *err) {
    for (int copy = 0; copy < 2; copy++) {
        uint64_t at = 0;
        at += align_vector(m, &m->output_norm, at, copy);
        at += align_vector(m, &m->rope_freqs, at, copy);
        for (int il = 0; il < m->hp.n_layer; il++) {
            ZrWeight *w = LAYER_WEIGHTS(&m->layers[il]);
            for (size_t i = 0; i < WEIGHTS_PER_LAYER; i++) at += align_vector(m, &w[i], at, copy);
        }
        if (copy) break;
        if (!at) return 0;
        m->aligned = malloc((size_t)at * sizeof(float));
        if (!m->aligned) return zr_err(err, ZR_E_NOMEM, "%s: out of memory for %" PRIu64 " aligned norm weights", g->path, at);
    }
    return 0;
}

/* The layer number N of a "blk.N.*" tensor name, or -1 when the name has none. Every digit
 * counts: a number too large for int64 saturates at INT64_MAX, so no number wraps below
 * block_count. */
static int64_t layer_of(const ZrStr *name, uint64_t *digits) {
    if (name->len < 6 || memcmp(name->ptr, "blk.", 4)) return -1;
    int64_t layer = 0;
    uint64_t j = 4;
    for (; j < name->len && name->ptr[j] >= '0' && name->ptr[j] <= '9'; j++)
        layer = layer > (INT64_MAX - 9) / 10 ? INT64_MAX : layer * 10 + (name->ptr[j] - '0');
    if (j == 4 || j >= name->len || name->ptr[j] != '.') return -1;
    *digits = j - 4;
    return layer;
}

/* A tensor of a layer past block_count means the count is wrong: running the first layers
 * only would give a silently wrong answer. */
static int check_stray_layers(const ZrModel *m, const ZrGguf *g, ZrError *err) {
    int64_t top = -1;    /* the highest layer named */
    uint64_t at = 0;     /* a tensor of it */
    uint64_t digits = 0; /* the length of its number */
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        uint64_t d = 0;
        int64_t layer = layer_of(&g->tensors[i].name, &d);
        if (layer <= top) continue;
        top = layer;
        at = i;
        digits = d;
    }
    if (top < m->hp.n_layer) return 0;
    const ZrStr *name = &g->tensors[at].name;
    const int shown = (int)(name->len > 64 ? 64 : name->len);
    if (top < INT32_MAX)
        return zr_err(err, ZR_E_FORMAT, "%s: key '%s.block_count': expected %" PRId64 " (the file has tensor '%.*s'), found %d",
                      g->path, m->hp.arch_name, top + 1, shown, name->ptr, m->hp.n_layer);
    return zr_err(err, ZR_E_FORMAT, "%s: key '%s.block_count': expected a layer count above %.*s (the file has tensor '%.*s'), found %d",
                  g->path, m->hp.arch_name, (int)(digits > 40 ? 40 : digits), name->ptr + 4, shown, name->ptr, m->hp.n_layer);
}

static const ArchInfo *find_arch(const ZrGguf *g, ZrError *err) {
    ZrStr name;
    if (zr_gguf_get_name(g, "general.architecture", &name, err)) return NULL;
    for (size_t i = 0; i < N_ARCH; i++)
        if (zr_str_eq(name, arch_table[i].name)) return &arch_table[i];
    for (size_t i = 0; i < sizeof k_refused / sizeof k_refused[0]; i++)
        if (zr_str_eq(name, k_refused[i].name)) {
            zr_err(err, ZR_E_UNSUPPORTED, "%s: architecture '%s': %s (supported: %s)", g->path, k_refused[i].name, k_refused[i].why, zr_arch_supported_list());
            return NULL;
        }
    zr_err(err, ZR_E_UNSUPPORTED, "%s: architecture '%.*s' is not supported (supported: %s)", g->path,
           (int)(name.len > 64 ? 64 : name.len), name.ptr, zr_arch_supported_list());
    return NULL;
}

int zr_model_from_gguf(ZrModel *m, ZrGguf *g, ZrError *err) {
    memset(m, 0, sizeof *m);
    const ArchInfo *ai = find_arch(g, err);
    if (!ai) return err ? (int)err->code : ZR_E_UNSUPPORTED;
    int rc = read_hparams(g, ai, &m->hp, err);
    if (!rc) rc = fill_facts(m, ai, g, err);
    if (!rc) rc = check_facts(m, g->path, err);
    if (!rc) rc = bind_all(m, ai, g, err);
    if (!rc) rc = check_rope_freqs(m, g, err);
    if (!rc) rc = check_vision(g, err);
    if (!rc) rc = check_stray_layers(m, g, err);
    if (!rc) rc = align_vectors(m, g, err);
    if (rc) {
        free(m->layers);
        free(m->names);
        free(m->aligned);
        memset(m, 0, sizeof *m);
        return rc;
    }
    count_model(m);
    /* take the map: the weights point into it */
    m->gguf = *g;
    memset(g, 0, sizeof *g);
    return 0;
}

int zr_model_load(ZrModel *m, const char *path, ZrError *err) {
    ZrGguf g;
    int rc = zr_gguf_open(&g, path, err);
    if (rc) {
        memset(m, 0, sizeof *m);
        return rc;
    }
    rc = zr_model_from_gguf(m, &g, err);
    if (rc) zr_gguf_close(&g);
    return rc;
}

void zr_model_free(ZrModel *m) {
    if (!m) return;
    free(m->layers);
    free(m->names);
    free(m->aligned);
    zr_gguf_close(&m->gguf);
    memset(m, 0, sizeof *m);
}
