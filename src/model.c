/* A model from a parsed GGUF: hyper-parameters per architecture (defaults as llama.cpp's),
 * then every weight bound by name with its type and shape checked. */
#include "model.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"

/* Whether an architecture's layers have a tensor (as llama.cpp loads them). */
typedef enum Presence { ABSENT, OPTIONAL, REQUIRED } Presence;

typedef struct ArchInfo {
    const char *name;
    ZrArch arch;
    bool rope_neox;     /* the architecture implies the rope style; no key says so */
    Presence qkv_bias;  /* attn_{q,k,v}.bias */
    Presence qk_norm;   /* attn_{q,k}_norm.weight */
} ArchInfo;

static const ArchInfo arch_table[] = {
    {"llama", ZR_ARCH_LLAMA, false, OPTIONAL, ABSENT},
    {"qwen2", ZR_ARCH_QWEN2, true, REQUIRED, ABSENT},
    {"qwen3", ZR_ARCH_QWEN3, true, ABSENT, REQUIRED},
};
#define N_ARCH (sizeof arch_table / sizeof arch_table[0])

/* Sane bounds for values that size allocations before any tensor confirms them. */
#define MAX_LAYERS 1024
#define MAX_DIM (1 << 20)

/* Longest weight name we build: "blk.1023.attn_output.weight" and the like. */
#define NAME_CAP 64
/* Weights bound per layer (the ZrWeight fields of ZrLayer) and outside the layers. */
#define WEIGHTS_PER_LAYER (sizeof(ZrLayer) / sizeof(ZrWeight))
#define WEIGHTS_GLOBAL 4
_Static_assert(sizeof(ZrLayer) % sizeof(ZrWeight) == 0, "ZrLayer holds only ZrWeight fields");

const char *zr_arch_supported_list(void) { return "llama, qwen2, qwen3"; }

const void *zr_weight_row(const ZrWeight *w, int64_t r) {
    return (const char *)w->data + (size_t)r * zr_row_bytes(w->type, w->ne0);
}

/* ---- hyper-parameters ---- */

typedef struct Keys {
    const ZrGguf *g;
    const char *arch;
    ZrError *err;
} Keys;

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
    rc = zr_gguf_get_str_opt(k->g, key_name(k, "rope.scaling.type", key, sizeof key), &type, k->err);
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
    hp->rope_neox = ai->rope_neox;
    hp->rope_theta = 10000.0f;
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
    if ((rc = read_n_vocab(&k, hp))) return rc;

    int n_expert = 0;
    if ((rc = key_int(&k, "expert_count", false, &n_expert))) return rc;
    if (n_expert > 1)
        return zr_err(err, ZR_E_UNSUPPORTED, "%s: mixture-of-experts models (%s.expert_count = %d) are not supported", g->path, ai->name, n_expert);
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

static int bind_layer(Binder *b, int il, ZrLayer *L) {
    const ZrHparams *hp = &b->m->hp;
    const int64_t e = hp->n_embd, q = (int64_t)hp->n_head * hp->head_dim, kv = (int64_t)hp->n_head_kv * hp->head_dim;
    const Presence bias = b->ai->qkv_bias, qk_norm = b->ai->qk_norm;
    char n[NAME_CAP];
    int rc = 0;
#define BIND(field, suffix, ne0, ne1, req) \
    if (!rc) { snprintf(n, sizeof n, "blk.%d." suffix, il); rc = bind(b, &L->field, n, ne0, ne1, req); }
    BIND(attn_norm, "attn_norm.weight", e, 0, true);
    BIND(wq, "attn_q.weight", e, q, true);
    BIND(wk, "attn_k.weight", e, kv, true);
    BIND(wv, "attn_v.weight", e, kv, true);
    if (bias != ABSENT) {
        BIND(bq, "attn_q.bias", q, 0, bias == REQUIRED);
        BIND(bk, "attn_k.bias", kv, 0, bias == REQUIRED);
        BIND(bv, "attn_v.bias", kv, 0, bias == REQUIRED);
    }
    if (qk_norm != ABSENT) {
        BIND(q_norm, "attn_q_norm.weight", hp->head_dim, 0, qk_norm == REQUIRED);
        BIND(k_norm, "attn_k_norm.weight", hp->head_dim, 0, qk_norm == REQUIRED);
    }
    BIND(wo, "attn_output.weight", q, e, true);
    BIND(ffn_norm, "ffn_norm.weight", e, 0, true);
    BIND(w_gate, "ffn_gate.weight", e, hp->n_ff, true);
    BIND(w_up, "ffn_up.weight", e, hp->n_ff, true);
    BIND(w_down, "ffn_down.weight", hp->n_ff, e, true);
#undef BIND
    return rc;
}

static uint64_t weight_params(const ZrWeight *w) { return w->data ? (uint64_t)(w->ne0 * w->ne1) : 0; }
static uint64_t weight_bytes(const ZrWeight *w) { return w->data ? w->nbytes : 0; }

static void count_model(ZrModel *m) {
    const ZrWeight *globals[] = {&m->tok_embd, &m->output_norm, &m->rope_freqs};
    m->n_params = 0;
    m->bytes_per_token = 0;
    for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++) m->n_params += weight_params(globals[i]);
    if (!m->tied_output) m->n_params += weight_params(&m->output);
    /* a decode step reads one embedding row, then every other weight once (the output matrix
     * in full even when it is the tied embedding) */
    m->bytes_per_token = zr_row_bytes(m->tok_embd.type, m->tok_embd.ne0) + weight_bytes(&m->output_norm) +
                         weight_bytes(&m->rope_freqs) + weight_bytes(&m->output);
    for (int il = 0; il < m->hp.n_layer; il++) {
        const ZrWeight *w = (const ZrWeight *)&m->layers[il];
        for (size_t i = 0; i < WEIGHTS_PER_LAYER; i++) {
            m->n_params += weight_params(&w[i]);
            m->bytes_per_token += weight_bytes(&w[i]);
        }
    }
}

static int bind_all(ZrModel *m, const ArchInfo *ai, const ZrGguf *g, ZrError *err) {
    const ZrHparams *hp = &m->hp;
    size_t n_names = WEIGHTS_GLOBAL + WEIGHTS_PER_LAYER * (size_t)hp->n_layer;
    m->names = calloc(n_names, NAME_CAP);
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->names || !m->layers) return zr_err(err, ZR_E_NOMEM, "%s: out of memory for %d layers", g->path, hp->n_layer);
    Binder b = {m, ai, g, m->names, err};
    int rc = bind(&b, &m->tok_embd, "token_embd.weight", hp->n_embd, hp->n_vocab, true);
    if (!rc) rc = bind(&b, &m->output_norm, "output_norm.weight", hp->n_embd, 0, true);
    if (!rc) rc = bind(&b, &m->output, "output.weight", hp->n_embd, hp->n_vocab, false);
    if (!rc && !m->output.data) {
        m->output = m->tok_embd;
        m->tied_output = true;
    }
    if (!rc) rc = bind(&b, &m->rope_freqs, "rope_freqs.weight", hp->rope_dim / 2, 0, false);
    for (int il = 0; !rc && il < hp->n_layer; il++) rc = bind_layer(&b, il, &m->layers[il]);
    return rc;
}

/* rope_freqs.weight divides each pair's frequency: a zero, negative or non-finite divisor
 * makes every rotation NaN. [rope_dim/2] f32. */
static int check_rope_freqs(const ZrModel *m, const ZrGguf *g, ZrError *err) {
    const ZrWeight *w = &m->rope_freqs;
    for (int64_t i = 0; w->data && i < w->ne0; i++) {
        float f;
        memcpy(&f, (const char *)w->data + i * (int64_t)sizeof f, sizeof f);
        if (!(f > 0.0f) || !isfinite(f))
            return zr_err(err, ZR_E_FORMAT, "%s: tensor 'rope_freqs.weight': value %" PRId64 ": expected a finite positive frequency divisor, found %g",
                          g->path, i, (double)f);
    }
    return 0;
}

/* A tensor of a layer past block_count means the count is wrong: running the first layers
 * only would give a silently wrong answer. */
static int check_stray_layers(const ZrModel *m, const ZrGguf *g, ZrError *err) {
    int64_t top = -1;    /* the highest layer named */
    uint64_t at = 0;     /* a tensor of it */
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const ZrStr *name = &g->tensors[i].name;
        if (name->len < 5 || memcmp(name->ptr, "blk.", 4)) continue;
        int64_t layer = 0;
        uint64_t j = 4;
        for (; j < name->len && j < 12 && name->ptr[j] >= '0' && name->ptr[j] <= '9'; j++) layer = layer * 10 + (name->ptr[j] - '0');
        if (j == 4 || j >= name->len || name->ptr[j] != '.' || layer <= top) continue;
        top = layer;
        at = i;
    }
    if (top < m->hp.n_layer) return 0;
    const ZrStr *name = &g->tensors[at].name;
    return zr_err(err, ZR_E_FORMAT, "%s: key '%s.block_count': expected %" PRId64 " (the file has tensor '%.*s'), found %d",
                  g->path, m->hp.arch_name, top + 1, (int)(name->len > 64 ? 64 : name->len), name->ptr, m->hp.n_layer);
}

static const ArchInfo *find_arch(const ZrGguf *g, ZrError *err) {
    ZrStr name;
    if (zr_gguf_get_str(g, "general.architecture", &name, err)) return NULL;
    for (size_t i = 0; i < N_ARCH; i++)
        if (zr_str_eq(name, arch_table[i].name)) return &arch_table[i];
    zr_err(err, ZR_E_UNSUPPORTED, "%s: architecture '%.*s' is not supported (supported: %s)", g->path,
           (int)(name.len > 64 ? 64 : name.len), name.ptr, zr_arch_supported_list());
    return NULL;
}

int zr_model_from_gguf(ZrModel *m, ZrGguf *g, ZrError *err) {
    memset(m, 0, sizeof *m);
    const ArchInfo *ai = find_arch(g, err);
    if (!ai) return err ? (int)err->code : ZR_E_UNSUPPORTED;
    int rc = read_hparams(g, ai, &m->hp, err);
    if (!rc) rc = bind_all(m, ai, g, err);
    if (!rc) rc = check_rope_freqs(m, g, err);
    if (!rc) rc = check_stray_layers(m, g, err);
    if (rc) {
        free(m->layers);
        free(m->names);
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
    zr_gguf_close(&m->gguf);
    memset(m, 0, sizeof *m);
}
