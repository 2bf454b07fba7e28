/* zrun info FILE: what a GGUF file holds: architecture, hyper-parameters, tokenizer, the tensor
 * table and the totals that bound decode speed (bytes read per token). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "model.h"
#include "gguf.h"
#include "opt.h"
#include "quant.h"

static const char k_info_usage[] = "usage: zrun info FILE   (or: zrun info -m FILE)\n";

/* The ARCH.* keys shown, in order; "vocab_size" falls back to the tokenizer's count. */
static const char *const k_hparams[] = {
    "context_length",
    "embedding_length",
    "block_count",
    "feed_forward_length",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.key_length",
    "attention.value_length",
    "attention.layer_norm_rms_epsilon",
    "rope.freq_base",
    "rope.dimension_count",
    "rope.scaling.type",
    "rope.scaling.factor",
    "expert_count",
    "expert_used_count",
    "expert_feed_forward_length",
    "vocab_size",
};

/* A scalar or string value as text; arrays as "[N TYPE]". */
static void print_value(const ZrGgufKv *kv) {
    switch (kv->type) {
    case ZR_GGUF_STRING: {
        char text[204];
        printf("%s", zr_str_printable((ZrStr){(const char *)kv->value, kv->value_bytes}, text, sizeof text));
        break;
    }
    case ZR_GGUF_ARRAY: printf("[%" PRIu64 " %s]", kv->n, zr_gguf_type_name(kv->elem_type)); break;
    case ZR_GGUF_FLOAT32: case ZR_GGUF_FLOAT64: printf("%.9g", zr_gguf_kv_num(kv)); break;
    case ZR_GGUF_BOOL: printf("%s", kv->value[0] ? "true" : "false"); break;
    case ZR_GGUF_UINT64: { uint64_t v; memcpy(&v, kv->value, 8); printf("%" PRIu64, v); break; }
    case ZR_GGUF_INT64: { int64_t v; memcpy(&v, kv->value, 8); printf("%" PRId64, v); break; }
    default: printf("%.0f", zr_gguf_kv_num(kv)); break;
    }
}

static void print_shape(const ZrGgufTensor *t, char *out, size_t cap) {
    int n = snprintf(out, cap, "[");
    for (uint32_t d = 0; d < t->n_dims && n > 0 && (size_t)n < cap; d++)
        n += snprintf(out + n, cap - (size_t)n, "%s%" PRId64, d ? ", " : "", t->ne[d]);
    if (n > 0 && (size_t)n < cap) snprintf(out + n, cap - (size_t)n, "]");
}

/* "1.23 GiB" style, for the totals. */
static const char *human(uint64_t b, char *out, size_t cap) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 4) { v /= 1024; u++; }
    snprintf(out, cap, u ? "%.2f %s" : "%.0f %s", v, units[u]);
    return out;
}

static int info_print(const ZrGguf *g) {
    ZrError e;
    ZrStr arch = {"", 0};
    char key[160];
    printf("file:          %s (GGUF v%u, %" PRIu64 " bytes, %" PRIu64 " keys, alignment %" PRIu64 ")\n", g->path,
           g->version, g->len, g->n_kv, g->alignment);
    if (zr_gguf_get_str(g, "general.architecture", &arch, &e)) {
        fprintf(stderr, "zrun: %s\n", e.msg);
        return 1;
    }
    /* strings from the file are shown through zr_str_printable: a length may be anything up
     * to 2^64 - 1 (as a %.*s precision it would turn negative) and the bytes anything */
    char text[204], text2[204];
    printf("architecture:  %s\n", zr_str_printable(arch, text, 104));
    ZrStr name = {NULL, 0};
    if (!zr_gguf_get_str_opt(g, "general.name", &name, &e) && name.ptr)
        printf("name:          %s\n", zr_str_printable(name, text, sizeof text));
    uint32_t ftype = 0;
    if (zr_gguf_find(g, "general.file_type") && !zr_gguf_get_u32(g, "general.file_type", &ftype, &e))
        printf("file_type:     %u\n", ftype);

    const ZrGgufKv *toks = zr_gguf_find(g, "tokenizer.ggml.tokens");
    uint64_t n_vocab = toks && toks->type == ZR_GGUF_ARRAY ? toks->n : 0;
    printf("hyper-parameters:\n");
    for (size_t i = 0; i < sizeof k_hparams / sizeof k_hparams[0]; i++) {
        snprintf(key, sizeof key, "%.*s.%s", (int)(arch.len < 100 ? arch.len : 100), arch.ptr, k_hparams[i]);
        const ZrGgufKv *kv = zr_gguf_find(g, key);
        bool vocab = !strcmp(k_hparams[i], "vocab_size");
        if (!kv && !(vocab && n_vocab)) {
            if (!strcmp(k_hparams[i], "rope.scaling.type") || !strcmp(k_hparams[i], "rope.scaling.factor") ||
                !strncmp(k_hparams[i], "expert_", 7))
                continue; /* rare keys: shown only when present */
            printf("  %-34s -\n", k_hparams[i]);
            continue;
        }
        printf("  %-34s ", k_hparams[i]);
        if (kv) print_value(kv);
        else printf("%" PRIu64 " (tokenizer)", n_vocab);
        printf("\n");
    }

    ZrStr model = {"-", 1}, pre = {"-", 1};
    zr_gguf_get_str_opt(g, "tokenizer.ggml.model", &model, &e);
    zr_gguf_get_str_opt(g, "tokenizer.ggml.pre", &pre, &e);
    printf("tokenizer:     %s (pre: %s), %" PRIu64 " tokens", zr_str_printable(model, text, 68),
           zr_str_printable(pre, text2, 68), n_vocab);
    static const char *const ids[] = {"bos", "eos", "unknown", "padding"};
    for (int i = 0; i < 4; i++) {
        uint32_t id;
        snprintf(key, sizeof key, "tokenizer.ggml.%s_token_id", ids[i]);
        if (zr_gguf_find(g, key) && !zr_gguf_get_u32(g, key, &id, &e) && id != UINT32_MAX) printf(", %s %u", ids[i], id);
    }
    printf("\n");

    /* tensor table */
    size_t w = 4;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].name.len > w) w = g->tensors[i].name.len < 96 ? g->tensors[i].name.len : 96;
    printf("tensors: %" PRIu64 "\n", g->n_tensors);
    printf("  %-*s  %-26s %-8s %14s\n", (int)w, "name", "shape", "type", "bytes");
    uint64_t params = 0, bytes = 0;
    bool experts = false; /* 3-D expert tensors: a token reads only its chosen experts' share */
    const ZrGgufTensor *embd = zr_gguf_tensor(g, "token_embd.weight");
    bool tied = embd && !zr_gguf_tensor(g, "output.weight");
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const ZrGgufTensor *t = &g->tensors[i];
        char shape[128];
        print_shape(t, shape, sizeof shape);
        printf("  %-*s  %-26s %-8s %14" PRIu64 "\n", (int)w, zr_str_printable(t->name, text, 100), shape,
               zr_type_name(t->type), t->nbytes);
        params += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
        experts |= t->n_dims == 3 && t->name.len > 12 && !memcmp(t->name.ptr + t->name.len - 12, "_exps.weight", 12);
        bytes += t->nbytes;
    }
    /* batch-1 decode reads every weight once per token, but of the embedding table only the
     * token's row, unless the output projection is tied to it (then all of it, as output) */
    uint64_t per_token = bytes;
    if (embd) {
        uint64_t row = embd->nbytes / (uint64_t)(embd->ne[1] * embd->ne[2] * embd->ne[3]);
        per_token = per_token - embd->nbytes + row + (tied ? embd->nbytes : 0);
    }
    char h1[32], h2[32];
    printf("totals:\n");
    printf("  parameters                         %" PRIu64 "\n", params);
    printf("  bytes                              %" PRIu64 " (%s)\n", bytes, human(bytes, h1, sizeof h1));
    printf("  bytes read per token               %" PRIu64 " (%s)%s\n", per_token, human(per_token, h2, sizeof h2),
           tied ? " (output tied to token_embd)" : "");
    if (experts) printf("  (every expert counted above; a token's share of the experts: the model's experts line below)\n");
    return 0;
}

/* The facts zrun reads from the file when it loads it as a model (src/model.h): what each
 * backend will compute, per model and per run of layers with the same facts; or why it will
 * not load it. */
static void facts_print(ZrGguf *g) {
    ZrModel m;
    ZrError e;
    /* binds the file already parsed and checked (the model takes over its map) */
    if (zr_model_from_gguf(&m, g, &e)) {
        printf("model:         not loadable: %s\n", e.msg);
        return;
    }
    const ZrHparams *hp = &m.hp;
    printf("model:         rope %s, embedding scale %.9g, attention scale %.9g", zr_rope_kind_name(hp->rope),
           (double)hp->embd_scale, (double)hp->attn_scale);
    if (hp->attn_softcap != 0.0f) printf(", attention soft-cap %.9g", (double)hp->attn_softcap);
    if (hp->final_softcap != 0.0f) printf(", final soft-cap %.9g", (double)hp->final_softcap);
    printf("%s\n", m.tied_output ? ", output tied to token_embd" : "");
    for (int a = 0; a < hp->n_layer;) {
        const ZrLayerFacts *f = &m.layers[a].facts;
        int b = a + 1; /* [a, b): layers with the same facts */
        while (b < hp->n_layer && !memcmp(&m.layers[b].facts, f, sizeof *f)) b++;
        if (b - a > 1) printf("  layers %d-%d: %s", a, b - 1, zr_act_name(f->act));
        else printf("  layer %d: %s", a, zr_act_name(f->act));
        if (f->qkv_bias) printf(", qkv bias");
        if (f->qk_norm) printf(", q/k norm");
        if (f->post_attn_norm) printf(", post-attention norm");
        if (f->post_ffn_norm) printf(", post-FFN norm");
        if (f->rope) printf(", rope base %.9g scale %.9g", (double)f->rope_theta, (double)f->rope_freq_scale);
        else printf(", no rope");
        if (f->window) printf(", window %d", f->window);
        else printf(", global attention");
        if (f->n_expert) printf(", %d experts (%d used) of width %d", f->n_expert, f->n_expert_used, f->n_ff_expert);
        printf("\n");
        a = b;
    }
    if (m.n_params_active != m.n_params) {
        char h[32];
        printf("  experts: a token uses %" PRIu64 " of %" PRIu64 " parameters and reads %" PRIu64 " bytes (%s) of weights\n", m.n_params_active,
               m.n_params, m.bytes_per_token, human(m.bytes_per_token, h, sizeof h));
    }
    zr_model_free(&m);
}

int zr_cmd_info(int argc, char **argv) {
    enum { O_MODEL = 1, O_HELP };
    static const ZrOpt opts[] = {
        {O_MODEL, "-m|--model", ZR_OPT_VALUE, NULL}, /* as every other command takes the model */
        {O_HELP, "-h|--help", ZR_OPT_FLAG, NULL},
        {0, NULL, 0, NULL},
    };
    const char *path = NULL;
    ZrOptReader rd;
    zr_opt_init(&rd, argc, argv);
    for (;;) {
        const char *v;
        ZrError e;
        int id = zr_opt_next(&rd, opts, &v, &e);
        if (id == ZR_OPT_END) break;
        if (id == ZR_OPT_ERROR) {
            fprintf(stderr, "zrun info: %s\n%s", e.msg, k_info_usage);
            return 2;
        }
        if (id == O_HELP) return zr_print_help(k_info_usage, "info (zrun info):");
        if (path) {
            fprintf(stderr, "zrun info: expected one FILE, found another: '%s'\n%s", v, k_info_usage);
            return 2;
        }
        path = v; /* FILE or -m FILE */
    }
    if (!path) {
        fprintf(stderr, "zrun info: expected a FILE\n%s", k_info_usage);
        return 2;
    }
    ZrGguf g;
    ZrError e;
    if (zr_gguf_open(&g, path, &e)) {
        fprintf(stderr, "zrun: %s\n", e.msg);
        return 1;
    }
    int rc = info_print(&g);
    if (rc == 0) facts_print(&g);
    if ((fflush(stdout) != 0 || ferror(stdout)) && rc == 0) {
        fprintf(stderr, "zrun info: writing standard output: %s\n", strerror(errno));
        rc = 1;
    }
    zr_gguf_close(&g); /* (a no-op when the model took the map over: closed with it) */
    return rc;
}
