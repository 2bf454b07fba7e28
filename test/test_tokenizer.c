/* Tokenizer tests: llama.cpp's reference vocabularies (../shared/vocab, every case must give
 * exactly the expected ids), the stories260K prompt, special tokens, BOS/EOS and streaming
 * detokenization. */
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gguf.h"
#include "tokenizer.h"
#include "zt.h"

/* ---- helpers ---------------------------------------------------------------------------- */

/* Decompresses ../shared/vocab/ggml-vocab-NAME.gguf.xz into the build dir (once) and opens
 * it. Returns false (after zt_skip) when ../shared or xz is absent. */
static bool open_vocab(const char *name, ZrGguf *g, ZrTokenizer **t) {
    char rel[256], dst[2048], tmp[2100], cmd[16384];
    snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf.xz", name);
    const char *src = zt_shared(rel);
    if (!src) {
        zt_skip("vocabulary absent");
        return false;
    }
    const char *b = getenv("ZR_BUILD");
    snprintf(dst, sizeof dst, "%s/vocab", b ? b : ".");
    mkdir(dst, 0755);
    snprintf(dst, sizeof dst, "%s/vocab/ggml-vocab-%s.gguf", b ? b : ".", name);
    if (access(dst, R_OK) != 0) {
        snprintf(tmp, sizeof tmp, "%s.tmp%d", dst, (int)getpid());
        snprintf(cmd, sizeof cmd, "xz -dc '%s' > '%s' && mv '%s' '%s'", src, tmp, tmp, dst);
        int st = system(cmd);
        if (st != 0) {
            unlink(tmp);
            zt_skip("xz -dc failed (is xz-utils installed?)");
            return false;
        }
    }
    ZrError err;
    if (zr_gguf_open(g, dst, &err)) {
        fprintf(stderr, "  %s\n", err.msg);
        zt_failed_flag = 1;
        return false;
    }
    if (zr_tokenizer_load(t, g, &err)) {
        fprintf(stderr, "  %s\n", err.msg);
        zr_gguf_close(g);
        zt_failed_flag = 1;
        return false;
    }
    return true;
}

/* Decodes ids as a sequence from its start (llama_detokenize's leading-space rule). */
static char *detok_all(const ZrTokenizer *t, const int32_t *ids, size_t n, bool special, size_t *len) {
    ZrDetok d;
    zr_detok_init(&d, t);
    d.at_start = true;
    d.special = special;
    size_t cap = zr_detok_cap(t);
    char *out = malloc(n * cap + cap + 1);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) o += zr_detok_push(&d, ids[i], out + o, cap);
    o += zr_detok_flush(&d, out + o, cap);
    out[o] = 0;
    *len = o;
    return out;
}

typedef struct VocabResult {
    int cases, encode_ok, roundtrip_ok;
} VocabResult;

static const char SEP[] = "\n__ggml_vocab_test__\n";

static bool check_vocab(const char *name, VocabResult *r) {
    memset(r, 0, sizeof *r);
    char rel[256];
    snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf.inp", name);
    const char *inp_path = zt_shared(rel);
    snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf.out", name);
    const char *out_path = zt_shared(rel);
    if (!inp_path || !out_path) {
        zt_skip("vocabulary goldens absent");
        return false;
    }
    ZrGguf g;
    ZrTokenizer *t;
    if (!open_vocab(name, &g, &t)) return false;
    size_t inp_len, out_len;
    char *inp = zt_read_file(inp_path, &inp_len);
    char *exp = zt_read_file(out_path, &out_len);
    char *p = inp, *e = exp;
    for (;;) {
        char *s = memmem(p, inp_len - (size_t)(p - inp), SEP, sizeof SEP - 1);
        if (!s) break;
        char *nl = strchr(e, '\n');
        if (!nl) break;
        *nl = 0;
        int32_t want[4096];
        size_t nw = 0;
        for (char *q = e; *q;) {
            char *end;
            long v = strtol(q, &end, 10);
            if (end == q) break;
            want[nw++] = (int32_t)v;
            q = end;
        }
        int32_t *ids;
        size_t n;
        ZrError err;
        r->cases++;
        size_t len = (size_t)(s - p);
        if (zr_tokenizer_encode(t, p, len, false, false, &ids, &n, &err) == 0) {
            bool same = n == nw && (n == 0 || memcmp(ids, want, n * sizeof *ids) == 0);
            r->encode_ok += same;
            if (!same) {
                fprintf(stderr, "  %s case %d: '%.*s'\n    want", name, r->cases, (int)len, p);
                for (size_t i = 0; i < nw; i++) fprintf(stderr, " %d", want[i]);
                fprintf(stderr, "\n    got ");
                for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
                fprintf(stderr, "\n");
            }
            size_t dl;
            char *back = detok_all(t, ids, n, false, &dl);
            bool rt = dl == len && memcmp(back, p, len) == 0;
            r->roundtrip_ok += rt;
            if (!rt) fprintf(stderr, "  %s case %d: decode gives '%s'\n", name, r->cases, back);
            free(back);
            free(ids);
        } else {
            fprintf(stderr, "  %s case %d: %s\n", name, r->cases, err.msg);
        }
        p = s + sizeof SEP - 1;
        e = nl + 1;
    }
    fprintf(stderr, "  vocab %-15s %s  encode %d/%d  decode(encode(x)) == x %d/%d\n", name,
            zr_tokenizer_kind(t), r->encode_ok, r->cases, r->roundtrip_ok, r->cases);
    free(inp);
    free(exp);
    zr_tokenizer_free(t);
    zr_gguf_close(&g);
    return true;
}

#define VOCAB_TEST(fn, name)                                                \
    ZT_TEST(fn) {                                                           \
        VocabResult r;                                                      \
        if (!check_vocab(name, &r)) return;                                 \
        ZT_CHECK(r.cases == 46);                                            \
        ZT_CHECKF(r.encode_ok == r.cases, "%d of %d", r.encode_ok, r.cases); \
        ZT_CHECKF(r.roundtrip_ok == r.cases, "%d of %d", r.roundtrip_ok, r.cases); \
    }

VOCAB_TEST(vocab_llama_spm_matches_llama_cpp, "llama-spm")
VOCAB_TEST(vocab_phi_3_matches_llama_cpp, "phi-3")
VOCAB_TEST(vocab_llama_bpe_matches_llama_cpp, "llama-bpe")
VOCAB_TEST(vocab_qwen2_matches_llama_cpp, "qwen2")
VOCAB_TEST(vocab_gpt_2_matches_llama_cpp, "gpt-2")
VOCAB_TEST(vocab_deepseek_llm_matches_llama_cpp, "deepseek-llm")
VOCAB_TEST(vocab_deepseek_coder_matches_llama_cpp, "deepseek-coder")
VOCAB_TEST(vocab_falcon_matches_llama_cpp, "falcon")
VOCAB_TEST(vocab_mpt_matches_llama_cpp, "mpt")
VOCAB_TEST(vocab_starcoder_matches_llama_cpp, "starcoder")
VOCAB_TEST(vocab_refact_matches_llama_cpp, "refact")

/* ---- stories260K (SentencePiece, 512 tokens) ------------------------------------------ */

static bool open_stories(ZrGguf *g, ZrTokenizer **t) {
    const char *path = zt_shared("models/stories260K.gguf");
    if (!path) {
        zt_skip("stories260K.gguf absent");
        return false;
    }
    ZrError err;
    if (zr_gguf_open(g, path, &err)) {
        fprintf(stderr, "  %s\n", err.msg);
        zt_failed_flag = 1;
        return false;
    }
    if (zr_tokenizer_load(t, g, &err)) {
        fprintf(stderr, "  %s\n", err.msg);
        zr_gguf_close(g);
        zt_failed_flag = 1;
        return false;
    }
    return true;
}

static const char STORY[] =
    "Once upon a time, there was a little dog named Max. He liked to run in the park with his friends.";
/* ../shared/fixtures/README.md: BOS, then llama.cpp's ids */
static const int32_t STORY_IDS[] = {1,   403, 407, 261, 378, 432, 383, 286, 261, 376, 400,
                                    428, 395, 392, 412, 444, 426, 346, 397, 355, 267, 352,
                                    379, 322, 265, 282, 295, 433, 335, 345, 374, 419, 426};

ZT_TEST(stories260k_prompt_encodes_to_llama_cpp_ids_after_bos) {
    ZrGguf g;
    ZrTokenizer *t;
    if (!open_stories(&g, &t)) return;
    int32_t *ids;
    size_t n;
    ZrError err;
    int rc = zr_tokenizer_encode(t, STORY, strlen(STORY), true, false, &ids, &n, &err);
    ZT_CHECKF(rc == 0, "%s", err.msg);
    size_t want = sizeof STORY_IDS / sizeof *STORY_IDS;
    bool same = n == want && memcmp(ids, STORY_IDS, n * sizeof *ids) == 0;
    if (!same)
        for (size_t i = 0; i < n; i++) fprintf(stderr, "%d%c", ids[i], i + 1 < n ? ' ' : '\n');
    free(ids);
    ZT_CHECKF(same, "got %zu ids, want %zu", n, want);
    ZT_CHECK(zr_tokenizer_bos(t) == 1 && zr_tokenizer_eos(t) == 2);
    ZT_CHECK(zr_tokenizer_add_bos(t));
    ZT_CHECK(zr_tokenizer_is_eog(t, 2) && !zr_tokenizer_is_eog(t, 1) && !zr_tokenizer_is_eog(t, 403));
    zr_tokenizer_free(t);
    zr_gguf_close(&g);
}

ZT_TEST(stories260k_stream_prints_the_leading_space_after_bos) {
    ZrGguf g;
    ZrTokenizer *t;
    if (!open_stories(&g, &t)) return;
    ZrDetok d;
    zr_detok_init(&d, t);
    char out[4096];
    size_t o = 0;
    for (size_t i = 0; i < sizeof STORY_IDS / sizeof *STORY_IDS; i++)
        o += zr_detok_push(&d, STORY_IDS[i], out + o, sizeof out - o);
    o += zr_detok_flush(&d, out + o, sizeof out - o);
    out[o] = 0;
    ZT_CHECKF(o == strlen(STORY) + 1 && out[0] == ' ' && strcmp(out + 1, STORY) == 0, "'%s'", out);
    zr_tokenizer_free(t);
    zr_gguf_close(&g);
}

ZT_TEST(stories260k_detok_at_start_drops_the_prefix_space_without_bos) {
    ZrGguf g;
    ZrTokenizer *t;
    if (!open_stories(&g, &t)) return;
    size_t len;
    char *s = detok_all(t, STORY_IDS + 1, sizeof STORY_IDS / sizeof *STORY_IDS - 1, false, &len);
    ZT_CHECKF(strcmp(s, STORY) == 0, "'%s'", s);
    free(s);
    /* with BOS first the space stays, as in llama_detokenize */
    s = detok_all(t, STORY_IDS, sizeof STORY_IDS / sizeof *STORY_IDS, false, &len);
    ZT_CHECKF(s[0] == ' ' && strcmp(s + 1, STORY) == 0, "'%s'", s);
    free(s);
    zr_tokenizer_free(t);
    zr_gguf_close(&g);
}

int main(void) { return zt_run(); }
