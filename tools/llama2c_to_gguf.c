/* zrun-llama2c: converts a llama2.c checkpoint and its tokenizer.bin into a GGUF file.
 *
 *   zrun-llama2c MODEL.bin TOKENIZER.bin OUT.gguf
 *
 * The checkpoint is Karpathy's legacy ("version 0") llama2.c format: seven int32
 *   dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len
 * (vocab_size < 0: the classifier is not shared with the token embedding), then float32 arrays
 *   token_embedding [vocab][dim], rms_att [layer][dim], wq [layer][dim][dim],
 *   wk [layer][kv_dim][dim], wv [layer][kv_dim][dim], wo [layer][dim][dim], rms_ffn [layer][dim],
 *   w1 [layer][hidden][dim], w2 [layer][dim][hidden], w3 [layer][hidden][dim], rms_final [dim],
 *   freq_cis_real [seq_len][head_size/2], freq_cis_imag [seq_len][head_size/2], (wcls [vocab][dim]).
 * Every matrix is row-major [out][in], which is GGUF's [ne0 = in, ne1 = out]: the arrays are
 * written as they are, with no permutation of wq/wk (llama2.c rotates adjacent pairs, the same
 * convention as GGUF `llama`). The tokenizer file is int32 max_token_length, then per token
 * float32 score, int32 length, bytes; llama2.c's exporter wrote '▁' as ' ' and BOS/EOS as
 * "\n<s>\n" / "\n</s>\n", which is undone here. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "gguf_write.h"
#include "quant.h"

typedef struct L2cConfig {
    int dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
} L2cConfig;

typedef struct L2cWeights {
    const float *tok_embd;  /* [vocab][dim] */
    const float *rms_att;   /* [layer][dim] */
    const float *wq;        /* [layer][dim][dim] */
    const float *wk;        /* [layer][kv_dim][dim] */
    const float *wv;        /* [layer][kv_dim][dim] */
    const float *wo;        /* [layer][dim][dim] */
    const float *rms_ffn;   /* [layer][dim] */
    const float *w1;        /* [layer][hidden][dim]  gate */
    const float *w2;        /* [layer][dim][hidden]  down */
    const float *w3;        /* [layer][hidden][dim]  up */
    const float *rms_final; /* [dim] */
    const float *freq_real; /* [seq_len][head_size/2] */
    const float *freq_imag; /* [seq_len][head_size/2] */
    const float *wcls;      /* [vocab][dim], NULL when shared */
} L2cWeights;

typedef struct L2cVocab {
    int n;
    ZrStr *text;      /* [n] GGUF token text (into owned strings) */
    char **owned;     /* [n] */
    float *score;     /* [n] */
    int32_t *type;    /* [n] */
} L2cVocab;

typedef struct MappedFile {
    const uint8_t *p;
    size_t len;
} MappedFile;

static int map_file(MappedFile *m, const char *path, ZrError *err) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return zr_err(err, ZR_E_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return zr_err(err, ZR_E_IO, "%s: cannot stat: %s", path, strerror(errno));
    }
    m->len = (size_t)st.st_size;
    m->p = NULL;
    if (m->len > 0) {
        void *p = mmap(NULL, m->len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            close(fd);
            return zr_err(err, ZR_E_IO, "%s: cannot map: %s", path, strerror(errno));
        }
        m->p = p;
    }
    close(fd);
    return 0;
}

static void unmap_file(MappedFile *m) {
    if (m->p) munmap((void *)m->p, m->len);
    m->p = NULL;
}

static int32_t rd_i32(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Adds n floats to *count, refusing overflow. */
static int add_floats(uint64_t *count, uint64_t a, uint64_t b, uint64_t c) {
    uint64_t ab, abc;
    if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &abc) ||
        __builtin_add_overflow(*count, abc, count))
        return -1;
    return 0;
}

static int parse_checkpoint(const MappedFile *f, const char *path, L2cConfig *c, L2cWeights *w, ZrError *err) {
    if (f->len < 28) return zr_err(err, ZR_E_FORMAT, "%s: header: expected 28 bytes, found a %zu-byte file", path, f->len);
    if (!memcmp(f->p, "24ka", 4))
        return zr_err(err, ZR_E_UNSUPPORTED,
                      "%s: a llama2.c export of version %d (magic 'ak42'): only the legacy version 0 checkpoint is supported",
                      path, rd_i32(f->p + 4));
    int *fields[7] = {&c->dim, &c->hidden_dim, &c->n_layers, &c->n_heads, &c->n_kv_heads, &c->vocab_size, &c->seq_len};
    static const char *const names[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
    for (int i = 0; i < 7; i++) {
        *fields[i] = rd_i32(f->p + 4 * i);
        int v = i == 5 && *fields[i] < 0 && *fields[i] != INT32_MIN ? -*fields[i] : *fields[i];
        if (v <= 0 || v > (1 << 24))
            return zr_err(err, ZR_E_FORMAT, "%s: header field %s: expected 1..16777216, found %d", path, names[i], *fields[i]);
    }
    const bool shared = c->vocab_size > 0;
    if (!shared) c->vocab_size = -c->vocab_size;
    if (c->dim % c->n_heads)
        return zr_err(err, ZR_E_FORMAT, "%s: header: dim %d is not a multiple of n_heads %d", path, c->dim, c->n_heads);
    if (c->n_heads % c->n_kv_heads)
        return zr_err(err, ZR_E_FORMAT, "%s: header: n_heads %d is not a multiple of n_kv_heads %d", path, c->n_heads,
                      c->n_kv_heads);
    const uint64_t dim = (uint64_t)c->dim, hid = (uint64_t)c->hidden_dim, L = (uint64_t)c->n_layers;
    const uint64_t V = (uint64_t)c->vocab_size, hs = dim / (uint64_t)c->n_heads;
    const uint64_t kv_dim = hs * (uint64_t)c->n_kv_heads;
    if (hs % 2) return zr_err(err, ZR_E_FORMAT, "%s: header: head size %llu is odd (RoPE needs pairs)", path, (unsigned long long)hs);

    /* Offsets of each array, in floats after the header. */
    uint64_t at = 0, off[14];
    const uint64_t sizes[14][3] = {
        {V, dim, 1},   {L, dim, 1},   {L, dim, dim},   {L, kv_dim, dim}, {L, kv_dim, dim},
        {L, dim, dim}, {L, dim, 1},   {L, hid, dim},   {L, dim, hid},    {L, hid, dim},
        {dim, 1, 1},   {(uint64_t)c->seq_len, hs / 2, 1}, {(uint64_t)c->seq_len, hs / 2, 1}, {shared ? 0 : V, dim, 1},
    };
    for (int i = 0; i < 14; i++) {
        off[i] = at;
        if (add_floats(&at, sizes[i][0], sizes[i][1], sizes[i][2]))
            return zr_err(err, ZR_E_FORMAT, "%s: header: sizes overflow", path);
    }
    if (at > (UINT64_MAX - 28) / 4 || 28 + at * 4 != f->len)
        return zr_err(err, ZR_E_FORMAT,
                      "%s: size: expected %llu bytes for dim %d, hidden_dim %d, %d layers, %d/%d heads, vocab %d (%s "
                      "classifier), seq_len %d; found %zu",
                      path, (unsigned long long)(28 + at * 4), c->dim, c->hidden_dim, c->n_layers, c->n_heads,
                      c->n_kv_heads, c->vocab_size, shared ? "shared" : "separate", c->seq_len, f->len);
    const float *base = (const float *)(const void *)(f->p + 28);
    const float **dst[14] = {&w->tok_embd, &w->rms_att, &w->wq, &w->wk, &w->wv, &w->wo, &w->rms_ffn,
                             &w->w1, &w->w2, &w->w3, &w->rms_final, &w->freq_real, &w->freq_imag, &w->wcls};
    for (int i = 0; i < 14; i++) *dst[i] = base + off[i];
    if (shared) w->wcls = NULL;
    return 0;
}

static void free_vocab(L2cVocab *v) {
    if (v->owned)
        for (int i = 0; i < v->n; i++) free(v->owned[i]);
    free(v->owned);
    free(v->text);
    free(v->score);
    free(v->type);
    memset(v, 0, sizeof *v);
}

static bool is_byte_token(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return false;
    for (int i = 3; i < 5; i++) {
        char ch = s[i];
        if (!((ch >= '0' && ch <= '9') || (ch >= 'A' && ch <= 'F'))) return false;
    }
    return true;
}

/* GGUF text of one llama2.c piece: BOS/EOS without their newlines, ' ' back to U+2581. */
static char *gguf_piece(const uint8_t *p, size_t n, size_t *out_len) {
    if (n == 5 && !memcmp(p, "\n<s>\n", 5)) { p += 1; n = 3; }
    else if (n == 6 && !memcmp(p, "\n</s>\n", 6)) { p += 1; n = 4; }
    size_t spaces = 0;
    for (size_t i = 0; i < n; i++) spaces += p[i] == ' ';
    char *s = malloc(n + 2 * spaces + 1);
    if (!s) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == ' ') {
            memcpy(s + k, "\xe2\x96\x81", 3);
            k += 3;
        } else {
            s[k++] = (char)p[i];
        }
    }
    s[k] = 0;
    *out_len = k;
    return s;
}

static int parse_tokenizer(const MappedFile *f, const char *path, int n_vocab, L2cVocab *v, ZrError *err) {
    memset(v, 0, sizeof *v);
    if (f->len < 4) return zr_err(err, ZR_E_FORMAT, "%s: header: expected int32 max_token_length, found %zu bytes", path, f->len);
    const int32_t max_len = rd_i32(f->p);
    if (max_len <= 0) return zr_err(err, ZR_E_FORMAT, "%s: max_token_length: expected > 0, found %d", path, max_len);
    v->n = n_vocab;
    v->text = calloc((size_t)n_vocab, sizeof *v->text);
    v->owned = calloc((size_t)n_vocab, sizeof *v->owned);
    v->score = calloc((size_t)n_vocab, sizeof *v->score);
    v->type = calloc((size_t)n_vocab, sizeof *v->type);
    if (!v->text || !v->owned || !v->score || !v->type) {
        free_vocab(v);
        return zr_err(err, ZR_E_NOMEM, "%s: out of memory for %d tokens", path, n_vocab);
    }
    size_t at = 4;
    for (int i = 0; i < n_vocab; i++) {
        if (f->len - at < 8) {
            free_vocab(v);
            return zr_err(err, ZR_E_FORMAT, "%s: token %d: expected score and length, found the end of the file (the model has %d tokens)",
                          path, i, n_vocab);
        }
        memcpy(&v->score[i], f->p + at, 4);
        const int32_t len = rd_i32(f->p + at + 4);
        at += 8;
        if (len < 0 || len > max_len || (size_t)len > f->len - at) {
            free_vocab(v);
            return zr_err(err, ZR_E_FORMAT, "%s: token %d: length: expected 0..%d within the file, found %d", path, i,
                          max_len, len);
        }
        size_t n;
        v->owned[i] = gguf_piece(f->p + at, (size_t)len, &n);
        if (!v->owned[i]) {
            free_vocab(v);
            return zr_err(err, ZR_E_NOMEM, "%s: out of memory", path);
        }
        at += (size_t)len;
        v->text[i] = (ZrStr){v->owned[i], n};
        const char *s = v->owned[i];
        if (!strcmp(s, "<unk>")) v->type[i] = 2;                            /* UNKNOWN */
        else if (!strcmp(s, "<s>") || !strcmp(s, "</s>")) v->type[i] = 3;   /* CONTROL */
        else if (is_byte_token(s, n)) v->type[i] = 6;                        /* BYTE */
        else v->type[i] = 1;                                                 /* NORMAL */
    }
    if (at != f->len) {
        free_vocab(v);
        return zr_err(err, ZR_E_FORMAT, "%s: %zu bytes follow token %d: the tokenizer has more tokens than the model's vocabulary of %d",
                      path, f->len - at, n_vocab - 1, n_vocab);
    }
    return 0;
}

/* RoPE base recovered from the checkpoint's own tables: at position 1, pair i turns by
 * theta^(-2i/head_size). llama2.c always used 10000; anything else is carried over. */
static float rope_theta(const L2cConfig *c, const L2cWeights *w) {
    const int half = c->dim / c->n_heads / 2;
    if (half < 2 || c->seq_len < 2) return 10000.0f;
    double angle = atan2(w->freq_imag[half + 1], w->freq_real[half + 1]);
    if (!(angle > 0.0) || angle >= 1.0) return 10000.0f;
    double theta = pow(angle, -(double)half);
    return fabs(theta / 10000.0 - 1.0) < 1e-3 ? 10000.0f : (float)theta;
}

static const char *base_name(const char *path, char *buf, size_t cap) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    snprintf(buf, cap, "%s", b);
    char *dot = strrchr(buf, '.');
    if (dot && dot != buf) *dot = 0;
    return buf;
}

static void add_matrix(ZrGgufWriter *w, const char *name, const float *data, int64_t ne0, int64_t ne1) {
    int64_t ne[2] = {ne0, ne1};
    zr_gguf_w_tensor(w, name, ZR_TYPE_F32, ne1 == 1 ? 1 : 2, ne, data);
}

static int convert(const char *model_path, const char *tok_path, const char *out_path, ZrError *err) {
    MappedFile mf = {0}, tf = {0};
    L2cConfig c;
    L2cWeights wt;
    L2cVocab voc = {0};
    ZrGgufWriter w;
    zr_gguf_w_init(&w);
    FILE *out = NULL;
    int rc = map_file(&mf, model_path, err);
    if (!rc) rc = parse_checkpoint(&mf, model_path, &c, &wt, err);
    if (!rc) rc = map_file(&tf, tok_path, err);
    if (!rc) rc = parse_tokenizer(&tf, tok_path, c.vocab_size, &voc, err);
    if (rc) goto done;

    char name[256];
    const int64_t dim = c.dim, hid = c.hidden_dim, V = c.vocab_size;
    const int64_t kv_dim = dim / c.n_heads * c.n_kv_heads;
    zr_gguf_w_str(&w, "general.architecture", "llama");
    zr_gguf_w_str(&w, "general.name", base_name(model_path, name, sizeof name));
    zr_gguf_w_u32(&w, "general.file_type", 0); /* all F32 */
    zr_gguf_w_u32(&w, "llama.context_length", (uint32_t)c.seq_len);
    zr_gguf_w_u32(&w, "llama.embedding_length", (uint32_t)c.dim);
    zr_gguf_w_u32(&w, "llama.block_count", (uint32_t)c.n_layers);
    zr_gguf_w_u32(&w, "llama.feed_forward_length", (uint32_t)c.hidden_dim);
    zr_gguf_w_u32(&w, "llama.attention.head_count", (uint32_t)c.n_heads);
    zr_gguf_w_u32(&w, "llama.attention.head_count_kv", (uint32_t)c.n_kv_heads);
    zr_gguf_w_u32(&w, "llama.rope.dimension_count", (uint32_t)(c.dim / c.n_heads));
    zr_gguf_w_f32(&w, "llama.rope.freq_base", rope_theta(&c, &wt));
    zr_gguf_w_f32(&w, "llama.attention.layer_norm_rms_epsilon", 1e-5f); /* llama2.c's rmsnorm */
    zr_gguf_w_u32(&w, "llama.vocab_size", (uint32_t)c.vocab_size);
    zr_gguf_w_str(&w, "tokenizer.ggml.model", "llama");
    zr_gguf_w_arr_zrstr(&w, "tokenizer.ggml.tokens", (uint64_t)voc.n, voc.text);
    zr_gguf_w_arr(&w, "tokenizer.ggml.scores", ZR_GGUF_FLOAT32, (uint64_t)voc.n, voc.score);
    zr_gguf_w_arr(&w, "tokenizer.ggml.token_type", ZR_GGUF_INT32, (uint64_t)voc.n, voc.type);
    zr_gguf_w_u32(&w, "tokenizer.ggml.unknown_token_id", 0);
    zr_gguf_w_u32(&w, "tokenizer.ggml.bos_token_id", 1);
    zr_gguf_w_u32(&w, "tokenizer.ggml.eos_token_id", 2);
    zr_gguf_w_bool(&w, "tokenizer.ggml.add_bos_token", true);
    zr_gguf_w_bool(&w, "tokenizer.ggml.add_eos_token", false);

    add_matrix(&w, "token_embd.weight", wt.tok_embd, dim, V);
    add_matrix(&w, "output_norm.weight", wt.rms_final, dim, 1);
    if (wt.wcls) add_matrix(&w, "output.weight", wt.wcls, dim, V);
    for (int64_t l = 0; l < c.n_layers; l++) {
        char tn[64];
#define LAYER_TENSOR(suffix, ptr, ne0, ne1)                                             \
    snprintf(tn, sizeof tn, "blk.%lld.%s.weight", (long long)l, suffix);                \
    add_matrix(&w, tn, (ptr) + l * (ne0) * (ne1), ne0, ne1)
        LAYER_TENSOR("attn_norm", wt.rms_att, dim, 1);
        LAYER_TENSOR("attn_q", wt.wq, dim, dim);
        LAYER_TENSOR("attn_k", wt.wk, dim, kv_dim);
        LAYER_TENSOR("attn_v", wt.wv, dim, kv_dim);
        LAYER_TENSOR("attn_output", wt.wo, dim, dim);
        LAYER_TENSOR("ffn_norm", wt.rms_ffn, dim, 1);
        LAYER_TENSOR("ffn_gate", wt.w1, dim, hid);
        LAYER_TENSOR("ffn_down", wt.w2, hid, dim);
        LAYER_TENSOR("ffn_up", wt.w3, dim, hid);
#undef LAYER_TENSOR
    }

    out = fopen(out_path, "wb");
    if (!out) {
        rc = zr_err(err, ZR_E_IO, "%s: cannot create: %s", out_path, strerror(errno));
        goto done;
    }
    rc = zr_gguf_w_write(&w, out, err);
    if (fclose(out) != 0 && !rc) rc = zr_err(err, ZR_E_IO, "%s: write failed: %s", out_path, strerror(errno));
    if (rc) {
        zr_err_wrap(err, "%s", out_path);
        remove(out_path);
    }
done:
    zr_gguf_w_free(&w);
    free_vocab(&voc);
    unmap_file(&tf);
    unmap_file(&mf);
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: zrun-llama2c MODEL.bin TOKENIZER.bin OUT.gguf\n"
               "Converts a llama2.c (version 0) checkpoint and its tokenizer.bin into an F32 GGUF.\n");
        return 0;
    }
    if (argc != 4) {
        fprintf(stderr, "usage: zrun-llama2c MODEL.bin TOKENIZER.bin OUT.gguf\n");
        return 2;
    }
    ZrError err = {0};
    if (convert(argv[1], argv[2], argv[3], &err)) {
        fprintf(stderr, "zrun-llama2c: %s\n", err.msg);
        return 1;
    }
    return 0;
}
