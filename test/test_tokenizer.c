/* Tokenizer tests: llama.cpp's reference vocabularies (../shared/vocab, every case must give
 * exactly the expected ids), the stories260K prompt, special tokens, BOS/EOS and streaming
 * detokenization. */
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gguf.h"
#include "gguf_write.h"
#include "tokenizer.h"
#include "zt.h"
#include "zt_proc.h"

/* ---- helpers ---------------------------------------------------------------------------- */

/* Decompresses ../shared/vocab/ggml-vocab-NAME.gguf.xz into the build dir (once) and opens
 * it. Returns false (after zt_skip) when ../shared or xz is absent. */
/* Opens path and its tokenizer; a failure marks the current test failed. */
static bool open_tokenizer(const char *path, ZrGguf *g, ZrTokenizer **t) {
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

static bool open_vocab(const char *name, ZrGguf *g, ZrTokenizer **t) {
    char rel[256], dst[2048], tmp[2100], cmd[16384];
    snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf.xz", name);
    const char *src = zt_shared_model(rel);
    if (!src) return false;
    const char *b = getenv("ZR_BUILD");
    snprintf(dst, sizeof dst, "%s/vocab", b ? b : ".");
    mkdir(dst, 0755);
    snprintf(dst, sizeof dst, "%s/vocab/ggml-vocab-%s.gguf", b ? b : ".", name);
    if (access(dst, R_OK) != 0) {
        snprintf(tmp, sizeof tmp, "%s.tmp%d", dst, (int)getpid());
        snprintf(cmd, sizeof cmd, "xz -dc '%s' > '%s' && mv '%s' '%s'", src, tmp, tmp, dst);
        ZtProc p = zt_proc_sh(cmd, NULL);
        zt_proc_free(&p);
        if (p.status != 0) {
            unlink(tmp);
            zt_skip("xz -dc failed (is xz-utils installed?)");
            return false;
        }
    }
    return open_tokenizer(dst, g, t);
}

/* The process's resident set and its peak since the peak was last reset, in bytes (Linux). */
static size_t proc_kb(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t kb = 0, n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, n)) kb = strtoull(line + n, NULL, 10);
    if (f) fclose(f);
    return kb * 1024;
}

static bool reset_peak_rss(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return false;
    bool ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

/* Whether s[0..n) is complete, valid UTF-8 (what a streaming detokenizer may emit). */
static bool utf8_valid(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k = c < 0x80 ? 1 : (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3
                              : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
        if (!k || i + k > n) return false;
        for (size_t j = 1; j < k; j++)
            if ((s[i + j] & 0xC0) != 0x80) return false;
        if ((c == 0xE0 && s[i + 1] < 0xA0) || (c == 0xED && s[i + 1] > 0x9F) ||
            (c == 0xF0 && s[i + 1] < 0x90) || (c == 0xF4 && s[i + 1] > 0x8F))
            return false;
        i += k;
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
    for (size_t i = 0; i < n; i++) {
        size_t k = zr_detok_push(&d, ids[i], out + o, cap);
        if (!utf8_valid((const unsigned char *)out + o, k)) {
            fprintf(stderr, "  token %zu (id %d): the detokenizer emitted broken UTF-8\n", i, ids[i]);
            zt_failed_flag = 1;
        }
        o += k;
    }
    o += zr_detok_flush(&d, out + o, cap);
    out[o] = 0;
    *len = o;
    return out;
}

typedef struct VocabResult {
    int cases, encode_ok, roundtrip_ok;
} VocabResult;

static const char SEP[] = "\n__ggml_vocab_test__\n";

/* Encodes every input of inp_path (llama.cpp's .inp format) without BOS and without special
 * parsing, and compares with the ids of out_path; false (after zt_skip) without the files. */
static bool check_cases(const char *name, const char *inp_path, const char *out_path, VocabResult *r) {
    memset(r, 0, sizeof *r);
    if (!inp_path || !out_path) return false;
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

static bool check_vocab(const char *name, VocabResult *r) {
    char rel[256], inp[4096], out[4096];
    snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf.inp", name);
    const char *p = zt_shared_model(rel);
    snprintf(inp, sizeof inp, "%s", p ? p : "");
    snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf.out", name);
    p = zt_shared_model(rel);
    snprintf(out, sizeof out, "%s", p ? p : "");
    return check_cases(name, inp[0] ? inp : NULL, out[0] ? out : NULL, r);
}

/* test/vocab_special: texts that look like special tokens ("</s>", "<|im_end|>", ...), with the
 * ids llama.cpp de3ff815 gives them (../shared/oracle's zfx tokout; README.md there). */
static bool check_special_texts(const char *name, VocabResult *r) {
    const char *src = getenv("ZR_SRC");
    char inp[4096], out[4096];
    snprintf(inp, sizeof inp, "%s/test/vocab_special/special.inp", src ? src : ".");
    snprintf(out, sizeof out, "%s/test/vocab_special/%s.out", src ? src : ".", name);
    return check_cases(name, inp, out, r);
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

/* Without --special, text that looks like a special token stays text unless the token is
 * user-defined; a user-defined token that llama.cpp counts as end of generation (phi-3's "</s>")
 * is control, so "</s>" is '<', '/', 's', '>' there too. */
#define SPECIAL_TEXT_TEST(fn, name)                                         \
    ZT_TEST(fn) {                                                           \
        VocabResult r;                                                      \
        if (!check_special_texts(name, &r)) return;                         \
        ZT_CHECK(r.cases == 22);                                            \
        ZT_CHECKF(r.encode_ok == r.cases, "%d of %d", r.encode_ok, r.cases); \
    }

SPECIAL_TEXT_TEST(special_looking_text_llama_spm_matches_llama_cpp, "llama-spm")
SPECIAL_TEXT_TEST(special_looking_text_phi_3_stays_text_as_in_llama_cpp, "phi-3")
SPECIAL_TEXT_TEST(special_looking_text_llama_bpe_matches_llama_cpp, "llama-bpe")
SPECIAL_TEXT_TEST(special_looking_text_qwen2_matches_llama_cpp, "qwen2")
SPECIAL_TEXT_TEST(special_looking_text_gpt_2_matches_llama_cpp, "gpt-2")
SPECIAL_TEXT_TEST(special_looking_text_deepseek_llm_matches_llama_cpp, "deepseek-llm")
SPECIAL_TEXT_TEST(special_looking_text_deepseek_coder_matches_llama_cpp, "deepseek-coder")
SPECIAL_TEXT_TEST(special_looking_text_falcon_matches_llama_cpp, "falcon")
SPECIAL_TEXT_TEST(special_looking_text_mpt_matches_llama_cpp, "mpt")
SPECIAL_TEXT_TEST(special_looking_text_starcoder_matches_llama_cpp, "starcoder")
SPECIAL_TEXT_TEST(special_looking_text_refact_matches_llama_cpp, "refact")

/* ---- stories260K (SentencePiece, 512 tokens) ------------------------------------------ */

static bool open_stories(ZrGguf *g, ZrTokenizer **t) {
    const char *path = zt_shared_model("models/stories260K.gguf");
    if (!path) return false;
    return open_tokenizer(path, g, t);
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

/* ---- synthetic vocabularies (built in memory with the GGUF writer) --------------------- */

typedef struct Synth {
    ZrGgufWriter w;
    uint8_t *buf;
    ZrGguf g;
} Synth;

/* A byte-level BPE vocabulary over a few letters (the GPT-2 alphabet writes ' ' as "Ġ"). */
static void synth_bpe(Synth *s, const char *pre) {
    static const char *tokens[] = {"a", "b", "c", "ab", "abc", "\xC4\xA0", "\xC4\xA0\x61",
                                   "xy", "y", "<|end|>", "<u>", "u>cc", "<s>", "</s>"};
    static const int32_t types[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 4, 4, 3, 3};
    static const char *merges[] = {"a b", "ab c", "\xC4\xA0 a", "x y"};
    zr_gguf_w_init(&s->w);
    zr_gguf_w_str(&s->w, "tokenizer.ggml.model", "gpt2");
    if (pre) zr_gguf_w_str(&s->w, "tokenizer.ggml.pre", pre);
    zr_gguf_w_arr_str(&s->w, "tokenizer.ggml.tokens", 14, tokens);
    zr_gguf_w_arr(&s->w, "tokenizer.ggml.token_type", ZR_GGUF_INT32, 14, types);
    zr_gguf_w_arr_str(&s->w, "tokenizer.ggml.merges", 4, merges);
    zr_gguf_w_u32(&s->w, "tokenizer.ggml.bos_token_id", 12);
    zr_gguf_w_u32(&s->w, "tokenizer.ggml.eos_token_id", 13);
}

static ZrTokenizer *synth_load(Synth *s, ZrError *err) {
    size_t len;
    ZrTokenizer *t = NULL;
    s->buf = NULL;
    if (zr_gguf_w_to_mem(&s->w, &s->buf, &len, err) == 0 && zr_gguf_parse(&s->g, s->buf, len, "<synth>", err) == 0) {
        if (zr_tokenizer_load(&t, &s->g, err)) t = NULL;
        zr_gguf_close(&s->g);
    }
    free(s->buf);
    zr_gguf_w_free(&s->w);
    return t;
}

/* synth_bpe's vocabulary with pre-tokenizer `pre` and nothing else, loaded */
static ZrTokenizer *bpe_loaded(const char *pre, ZrError *err) {
    Synth s;
    synth_bpe(&s, pre);
    return synth_load(&s, err);
}

static bool encode_is(const ZrTokenizer *t, const char *text, bool add_special, bool parse_special,
                      const int32_t *want, size_t n_want) {
    int32_t *ids;
    size_t n;
    ZrError err;
    if (zr_tokenizer_encode(t, text, strlen(text), add_special, parse_special, &ids, &n, &err)) {
        fprintf(stderr, "  '%s': %s\n", text, err.msg);
        return false;
    }
    bool same = n == n_want && (n == 0 || memcmp(ids, want, n * sizeof *ids) == 0);
    if (!same) {
        fprintf(stderr, "  '%s' gives", text);
        for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n");
    }
    free(ids);
    return same;
}
#define ENCODES_TO(t, text, add, parse, ...)                                                 \
    encode_is(t, text, add, parse, (const int32_t[]){__VA_ARGS__},                          \
              sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t))

ZT_TEST(bpe_merges_apply_lowest_rank_first) {
    ZrError err;
    ZrTokenizer *t = bpe_loaded("gpt-2", &err);
    ZT_CHECKF(t, "%s", err.msg);
    ZT_CHECK(ENCODES_TO(t, "abc", false, false, 4));
    /* " ab" is Ġ a b: "a b" (rank 0) goes before "Ġ a" (rank 2), leaving Ġ, ab */
    ZT_CHECK(ENCODES_TO(t, "abc ab", false, false, 4, 5, 3));
    ZT_CHECK(ENCODES_TO(t, " a", false, false, 6));
    ZT_CHECK(ENCODES_TO(t, "cab", false, false, 2, 3));
    zr_tokenizer_free(t);
}

ZT_TEST(bpe_merge_with_a_half_outside_the_vocabulary_still_applies) {
    ZrError err;
    ZrTokenizer *t = bpe_loaded("gpt-2", &err);
    ZT_CHECKF(t, "%s", err.msg);
    /* "x" is no token, but the merge "x y" makes the token "xy" */
    ZT_CHECK(ENCODES_TO(t, "xy", false, false, 7));
    /* a lone "x" has no token at all: llama.cpp drops it */
    ZT_CHECK(ENCODES_TO(t, "xa", false, false, 0));
    zr_tokenizer_free(t);
}

ZT_TEST(special_token_text_is_parsed_only_when_asked) {
    ZrError err;
    ZrTokenizer *t = bpe_loaded("gpt-2", &err);
    ZT_CHECKF(t, "%s", err.msg);
    ZT_CHECK(ENCODES_TO(t, "ab<|end|>c", false, true, 3, 9, 2));
    int32_t *ids;
    size_t n;
    ZT_CHECK(zr_tokenizer_encode(t, "ab<|end|>c", 10, false, false, &ids, &n, &err) == 0);
    bool has = false;
    for (size_t i = 0; i < n; i++) has |= ids[i] == 9;
    free(ids);
    ZT_CHECK(!has);
    zr_tokenizer_free(t);
}

ZT_TEST(user_defined_tokens_are_recognised_without_parse_special_longest_first) {
    ZrError err;
    ZrTokenizer *t = bpe_loaded("gpt-2", &err);
    ZT_CHECKF(t, "%s", err.msg);
    ZT_CHECK(ENCODES_TO(t, "a<u>b", false, false, 0, 10, 1));
    /* llama.cpp cuts at the longest token's occurrences first: "u>cc" wins over "<u>" */
    int32_t *ids;
    size_t n;
    ZT_CHECK(zr_tokenizer_encode(t, "<u>cc", 5, false, false, &ids, &n, &err) == 0);
    bool ok = n >= 1 && ids[n - 1] == 11; /* "<" (no token) then "u>cc" */
    for (size_t i = 0; i < n; i++) ok &= ids[i] != 10;
    free(ids);
    ZT_CHECK(ok);
    zr_tokenizer_free(t);
}

ZT_TEST(add_special_adds_bos_and_eos_as_the_file_says) {
    Synth s;
    ZrError err;
    synth_bpe(&s, "gpt-2");
    zr_gguf_w_bool(&s.w, "tokenizer.ggml.add_bos_token", true);
    zr_gguf_w_bool(&s.w, "tokenizer.ggml.add_eos_token", true);
    ZrTokenizer *t = synth_load(&s, &err);
    ZT_CHECKF(t, "%s", err.msg);
    ZT_CHECK(ENCODES_TO(t, "abc", true, false, 12, 4, 13));
    ZT_CHECK(ENCODES_TO(t, "", true, false, 12, 13));
    ZT_CHECK(ENCODES_TO(t, "abc", false, false, 4));
    ZT_CHECK(zr_tokenizer_add_bos(t) && zr_tokenizer_bos(t) == 12 && zr_tokenizer_eos(t) == 13);
    ZT_CHECK(zr_tokenizer_is_eog(t, 13) && zr_tokenizer_is_eog(t, 9) && !zr_tokenizer_is_eog(t, 12));
    zr_tokenizer_free(t);

    t = bpe_loaded("gpt-2", &err); /* gpt-2 adds nothing unless the file says so */
    ZT_CHECKF(t, "%s", err.msg);
    ZT_CHECK(ENCODES_TO(t, "abc", true, false, 4));
    zr_tokenizer_free(t);

    t = bpe_loaded("llama-bpe", &err); /* llama3 adds BOS when the file does not say */
    ZT_CHECKF(t, "%s", err.msg);
    ZT_CHECK(ENCODES_TO(t, "abc", true, false, 12, 4));
    zr_tokenizer_free(t);
}

ZT_TEST(empty_text_gives_no_tokens) {
    ZrError err;
    ZrTokenizer *t = bpe_loaded("gpt-2", &err);
    ZT_CHECKF(t, "%s", err.msg);
    int32_t *ids = (int32_t *)&err;
    size_t n = 7;
    ZT_CHECK(zr_tokenizer_encode(t, "", 0, false, true, &ids, &n, &err) == 0);
    ZT_CHECK(n == 0 && ids == NULL);
    zr_tokenizer_free(t);
}

ZT_TEST(unknown_pre_tokenizer_is_refused_by_name) {
    ZrError err;
    ZrTokenizer *t = bpe_loaded("no-such-pre", &err);
    ZT_CHECK(t == NULL);
    ZT_CHECK(err.code == ZR_E_UNSUPPORTED);
    ZT_CHECKF(strstr(err.msg, "'no-such-pre'") && strstr(err.msg, "llama-bpe"), "%s", err.msg);
}

ZT_TEST(a_pre_tokenizer_or_model_name_with_a_nul_byte_is_refused) {
    Synth s;
    ZrError err;
    synth_bpe(&s, NULL);
    zr_gguf_w_key(&s.w, "tokenizer.ggml.pre", ZR_GGUF_STRING);
    zr_gguf_w_raw_u64(&s.w, 8);
    zr_gguf_w_raw_bytes(&s.w, "default", 8); /* "default\0" */
    ZT_CHECK(synth_load(&s, &err) == NULL);
    ZT_CHECKF(err.code == ZR_E_FORMAT && strstr(err.msg, "key 'tokenizer.ggml.pre': expected a name without NUL bytes, found a NUL at byte 7"), "%s", err.msg);
    static const char *tokens[] = {"a"};
    zr_gguf_w_init(&s.w);
    zr_gguf_w_key(&s.w, "tokenizer.ggml.model", ZR_GGUF_STRING);
    zr_gguf_w_raw_u64(&s.w, 6);
    zr_gguf_w_raw_bytes(&s.w, "gpt2\0x", 6);
    zr_gguf_w_arr_str(&s.w, "tokenizer.ggml.tokens", 1, tokens);
    ZT_CHECK(synth_load(&s, &err) == NULL);
    ZT_CHECKF(err.code == ZR_E_FORMAT && strstr(err.msg, "key 'tokenizer.ggml.model': expected a name without NUL bytes, found a NUL at byte 4 of 'gpt2?x'"), "%s", err.msg);
}

ZT_TEST(unknown_tokenizer_model_is_refused) {
    Synth s;
    ZrError err;
    static const char *tokens[] = {"a"};
    zr_gguf_w_init(&s.w);
    zr_gguf_w_str(&s.w, "tokenizer.ggml.model", "bert");
    zr_gguf_w_arr_str(&s.w, "tokenizer.ggml.tokens", 1, tokens);
    ZT_CHECK(synth_load(&s, &err) == NULL);
    ZT_CHECKF(err.code == ZR_E_UNSUPPORTED && strstr(err.msg, "bert"), "%s", err.msg);
}

ZT_TEST(duplicate_token_text_is_a_format_error) {
    Synth s;
    ZrError err;
    static const char *tokens[] = {"<unk>", "<s>", "</s>", "a", "a"};
    zr_gguf_w_init(&s.w);
    zr_gguf_w_str(&s.w, "tokenizer.ggml.model", "llama");
    zr_gguf_w_arr_str(&s.w, "tokenizer.ggml.tokens", 5, tokens);
    ZT_CHECK(synth_load(&s, &err) == NULL);
    ZT_CHECKF(err.code == ZR_E_FORMAT && strstr(err.msg, "3 and 4"), "%s", err.msg);
}

ZT_TEST(missing_token_list_is_a_format_error) {
    Synth s;
    ZrError err;
    zr_gguf_w_init(&s.w);
    zr_gguf_w_str(&s.w, "tokenizer.ggml.model", "llama");
    ZT_CHECK(synth_load(&s, &err) == NULL);
    ZT_CHECKF(err.code == ZR_E_FORMAT && strstr(err.msg, "tokenizer.ggml.tokens"), "%s", err.msg);
}

/* ---- hostile metadata: each a clear error naming the key, expected and found ------------ */

/* A 4-token SentencePiece vocabulary; `bad` adds or overrides keys after it. */
static ZrTokenizer *spm_with(ZrError *err, void (*bad)(ZrGgufWriter *w, int arg), int arg) {
    static const char *tokens[] = {"<unk>", "<s>", "</s>", "a"};
    Synth s;
    zr_gguf_w_init(&s.w);
    zr_gguf_w_str(&s.w, "tokenizer.ggml.model", "llama");
    zr_gguf_w_arr_str(&s.w, "tokenizer.ggml.tokens", 4, tokens);
    bad(&s.w, arg);
    return synth_load(&s, err);
}

static void special_id(ZrGgufWriter *w, int arg) {
    static const char *keys[] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                                 "tokenizer.ggml.unknown_token_id"};
    zr_gguf_w_i32(w, keys[arg / 2], arg % 2 ? -5 : 4);
}
static void bos_as_text(ZrGgufWriter *w, int arg) { (void)arg; zr_gguf_w_str(w, "tokenizer.ggml.bos_token_id", "1"); }
static void none_ids(ZrGgufWriter *w, int arg) {
    (void)arg;
    zr_gguf_w_u32(w, "tokenizer.ggml.eot_token_id", UINT32_MAX);
    zr_gguf_w_i32(w, "tokenizer.ggml.eom_token_id", -1);
    zr_gguf_w_u32(w, "tokenizer.ggml.padding_token_id", 4); /* = n_vocab: seen in the wild, unused */
}

ZT_TEST(special_token_ids_outside_the_vocabulary_are_refused_by_key) {
    ZrError err;
    static const char *names[] = {"bos", "eos", "eot", "unknown"};
    for (int arg = 0; arg < 8; arg++) {
        ZT_CHECK(spm_with(&err, special_id, arg) == NULL);
        char want[160];
        snprintf(want, sizeof want, "key 'tokenizer.ggml.%s_token_id': expected a token id in 0..3 (or -1 for none), found %d",
                 names[arg / 2], arg % 2 ? -5 : 4);
        ZT_CHECKF(err.code == ZR_E_FORMAT && strstr(err.msg, "<synth>") && strstr(err.msg, want), "%s", err.msg);
    }
    ZT_CHECK(spm_with(&err, bos_as_text, 0) == NULL);
    ZT_CHECKF(strstr(err.msg, "key 'tokenizer.ggml.bos_token_id': expected an integer token id, found string"), "%s", err.msg);
    ZrTokenizer *t = spm_with(&err, none_ids, 0); /* the "none" values and an unused padding id load */
    ZT_CHECKF(t != NULL, "%s", err.msg);
    zr_tokenizer_free(t);
}

static void scores_and_types(ZrGgufWriter *w, int arg) {
    float scores[4] = {0, 0, 0, arg == 0 ? NAN : -1.0f};
    int32_t types[4] = {2, 3, 3, arg == 1 ? 9 : arg == 2 ? -1 : 1};
    float ftypes[4] = {2, 3, 3, 1};
    zr_gguf_w_arr(w, "tokenizer.ggml.scores", ZR_GGUF_FLOAT32, 4, scores);
    if (arg == 3)
        zr_gguf_w_arr(w, "tokenizer.ggml.token_type", ZR_GGUF_FLOAT32, 4, ftypes);
    else
        zr_gguf_w_arr(w, "tokenizer.ggml.token_type", ZR_GGUF_INT32, 4, types);
}

ZT_TEST(non_finite_scores_and_unknown_token_types_are_refused) {
    ZrError err;
    static const char *want[] = {"tokenizer.ggml.scores[3]: expected a finite float32, found nan",
                                 "tokenizer.ggml.token_type[3]: expected a token type in 0..6, found 9",
                                 "tokenizer.ggml.token_type[3]: expected a token type in 0..6, found -1",
                                 "tokenizer.ggml.token_type: expected 4 integers, found 4 float32"};
    for (int arg = 0; arg < 4; arg++) {
        ZT_CHECK(spm_with(&err, scores_and_types, arg) == NULL);
        ZT_CHECKF(err.code == ZR_E_FORMAT && strstr(err.msg, want[arg]), "%s", err.msg);
    }
}

ZT_TEST(a_merge_that_does_not_split_in_two_is_refused) {
    static const char *tokens[] = {"a", "b", "ab"};
    static const char *bad[] = {"ab", "a ", " ab"};
    for (int i = 0; i < 3; i++) {
        const char *merges[] = {"a b", bad[i]};
        Synth s;
        ZrError err;
        zr_gguf_w_init(&s.w);
        zr_gguf_w_str(&s.w, "tokenizer.ggml.model", "gpt2");
        zr_gguf_w_arr_str(&s.w, "tokenizer.ggml.tokens", 3, tokens);
        zr_gguf_w_arr_str(&s.w, "tokenizer.ggml.merges", 2, merges);
        zr_gguf_w_u32(&s.w, "tokenizer.ggml.bos_token_id", 0);
        ZT_CHECK(synth_load(&s, &err) == NULL);
        char want[128];
        snprintf(want, sizeof want, "tokenizer.ggml.merges[1]: expected 'LEFT RIGHT' (two non-empty texts split by a space), found '%s'", bad[i]);
        ZT_CHECKF(err.code == ZR_E_FORMAT && strstr(err.msg, want), "%s", err.msg);
    }
}

/* ---- arbitrary bytes ------------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Random text: ASCII, whitespace runs, multi-byte characters, digits, stray bytes. */
static size_t random_text(uint64_t *seed, char *out, size_t cap, bool valid_utf8) {
    static const char *pieces[] = {" ", "  ", "\n", "\t", "a", "Z", "7", "'s", "é", "ß", "中", "🦙", "\xE3\x80\x80",
                                   ".", "!!", "x", "\xC2\xA0", "\xCC\x81", "\r\n", "--"};
    size_t n = 0, len = rng_next(seed) % 48;
    for (size_t i = 0; i < len; i++) {
        uint64_t r = rng_next(seed);
        if (!valid_utf8 && r % 7 == 0) {
            if (n + 1 > cap) break;
            out[n++] = (char)(0x80 + (r >> 8) % 0x80); /* a byte that is not ASCII */
            continue;
        }
        const char *p = pieces[(r >> 16) % (sizeof pieces / sizeof *pieces)];
        size_t k = strlen(p);
        if (n + k > cap) break;
        memcpy(out + n, p, k);
        n += k;
    }
    return n;
}

static size_t concat_pieces(const ZrTokenizer *t, const int32_t *ids, size_t n, char *out, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) o += zr_tokenizer_token_bytes(t, ids[i], false, out + o, o < cap ? cap - o : 0);
    return o;
}

ZT_TEST(spm_any_bytes_encode_and_the_pieces_give_utf8_back) {
    ZrGguf g;
    ZrTokenizer *t;
    if (!open_vocab("llama-spm", &g, &t)) return;
    uint64_t seed = 1;
    for (int k = 0; k < 500; k++) {
        char text[512], back[2048];
        bool valid = k % 2 == 0;
        size_t len = random_text(&seed, text, sizeof text, valid);
        int32_t *ids;
        size_t n;
        ZrError err;
        ZT_CHECKF(zr_tokenizer_encode(t, text, len, false, false, &ids, &n, &err) == 0, "%s", err.msg);
        size_t m = concat_pieces(t, ids, n, back, sizeof back);
        free(ids);
        /* the prefix space, then the text byte for byte (byte fallback is lossless). Not so
         * for invalid UTF-8: a bad lead byte takes the next bytes into its symbol, and a space
         * there comes back as the bytes of U+2581, as in llama.cpp. */
        if (valid)
            ZT_CHECKF(len == 0 ? m == 0 : m == len + 1 && back[0] == ' ' && memcmp(back + 1, text, len) == 0,
                      "case %d", k);
    }
    zr_tokenizer_free(t);
    zr_gguf_close(&g);
}

ZT_TEST(bpe_any_utf8_encodes_and_the_pieces_give_it_back) {
    const char *names[] = {"llama-bpe", "qwen2", "deepseek-llm", "falcon"};
    for (size_t v = 0; v < sizeof names / sizeof *names; v++) {
        ZrGguf g;
        ZrTokenizer *t;
        if (!open_vocab(names[v], &g, &t)) return;
        uint64_t seed = 7;
        for (int k = 0; k < 300; k++) {
            char text[512], back[2048];
            bool valid = k % 2 == 0;
            size_t len = random_text(&seed, text, sizeof text, valid);
            int32_t *ids;
            size_t n;
            ZrError err;
            ZT_CHECKF(zr_tokenizer_encode(t, text, len, false, false, &ids, &n, &err) == 0, "%s", err.msg);
            size_t m = concat_pieces(t, ids, n, back, sizeof back);
            free(ids);
            /* invalid bytes become U+FFFD, as in llama.cpp: only valid text comes back as it was */
            if (valid) ZT_CHECKF(m == len && memcmp(back, text, len) == 0, "%s case %d", names[v], k);
        }
        zr_tokenizer_free(t);
        zr_gguf_close(&g);
    }
}

/* ---- streaming detokenization ----------------------------------------------------------- */

ZT_TEST(detok_holds_back_a_character_split_over_byte_tokens) {
    ZrGguf g;
    ZrTokenizer *t;
    if (!open_vocab("llama-spm", &g, &t)) return;
    /* U+1D518 is not in the vocabulary: it becomes four byte tokens <0xF0> <0x9D> <0x94> <0x98> */
    const char *text = "\xF0\x9D\x94\x98";
    int32_t *ids;
    size_t n;
    ZrError err;
    ZT_CHECK(zr_tokenizer_encode(t, text, 4, false, false, &ids, &n, &err) == 0);
    ZT_CHECKF(n == 5 && ids[1] == 3 + 0xF0 && ids[4] == 3 + 0x98, "n=%zu", n); /* "▁" first */
    ZrDetok d;
    zr_detok_init(&d, t);
    char out[256];
    ZT_CHECK(zr_detok_push(&d, ids[0], out, sizeof out) == 1 && out[0] == ' ');
    ZT_CHECK(zr_detok_push(&d, ids[1], out, sizeof out) == 0);
    ZT_CHECK(zr_detok_push(&d, ids[2], out, sizeof out) == 0);
    ZT_CHECK(zr_detok_push(&d, ids[3], out, sizeof out) == 0);
    ZT_CHECK(zr_detok_push(&d, ids[4], out, sizeof out) == 4 && memcmp(out, text, 4) == 0);
    ZT_CHECK(zr_detok_flush(&d, out, sizeof out) == 0);
    free(ids);
    zr_tokenizer_free(t);
    zr_gguf_close(&g);
}

ZT_TEST(detok_replaces_bytes_that_cannot_form_a_character) {
    ZrGguf g;
    ZrTokenizer *t;
    if (!open_vocab("llama-spm", &g, &t)) return;
    ZrDetok d;
    zr_detok_init(&d, t);
    char out[256];
    /* a stray continuation byte is never completed: U+FFFD at once */
    ZT_CHECK(zr_detok_push(&d, 3 + 0x80, out, sizeof out) == 3 && memcmp(out, "\xEF\xBF\xBD", 3) == 0);
    /* a lead byte followed by a plain letter: U+FFFD, then the letter */
    ZT_CHECK(zr_detok_push(&d, 3 + 0xE2, out, sizeof out) == 0);
    int32_t a = zr_tokenizer_find(t, "a", 1);
    ZT_CHECK(a >= 0);
    ZT_CHECK(zr_detok_push(&d, a, out, sizeof out) == 4 && memcmp(out, "\xEF\xBF\xBD" "a", 4) == 0);
    /* an incomplete character at the end: flushed as one U+FFFD */
    ZT_CHECK(zr_detok_push(&d, 3 + 0xE2, out, sizeof out) == 0);
    ZT_CHECK(zr_detok_push(&d, 3 + 0x96, out, sizeof out) == 0);
    ZT_CHECK(zr_detok_flush(&d, out, sizeof out) == 3 && memcmp(out, "\xEF\xBF\xBD", 3) == 0);
    ZT_CHECK(zr_detok_flush(&d, out, sizeof out) == 0);
    zr_tokenizer_free(t);
    zr_gguf_close(&g);
}

ZT_TEST(detok_prints_control_tokens_only_when_special) {
    ZrGguf g;
    ZrTokenizer *t;
    if (!open_vocab("llama-bpe", &g, &t)) return;
    ZrDetok d;
    zr_detok_init(&d, t);
    char out[1024];
    ZT_CHECK(zr_detok_push(&d, 128000, out, sizeof out) == 0);
    d.special = true;
    size_t k = zr_detok_push(&d, 128000, out, sizeof out);
    ZT_CHECKF(k == 17 && memcmp(out, "<|begin_of_text|>", 17) == 0, "%zu", k);
    ZT_CHECK(zr_tokenizer_is_control(t, 128000) && zr_tokenizer_is_eog(t, 128009));
    ZT_CHECK(zr_detok_cap(t) <= 1024);
    zr_tokenizer_free(t);
    zr_gguf_close(&g);
}

ZT_TEST(llama3_special_tokens_parse_and_bos_is_added) {
    ZrGguf g;
    ZrTokenizer *t;
    if (!open_vocab("llama-bpe", &g, &t)) return;
    ZT_CHECK(ENCODES_TO(t, "<|begin_of_text|>Hello<|eot_id|>", false, true, 128000, 9906, 128009));
    ZT_CHECK(ENCODES_TO(t, "Hello", true, false, 128000, 9906));
    int32_t *ids;
    size_t n;
    ZrError err;
    ZT_CHECK(zr_tokenizer_encode(t, "<|eot_id|>", 10, false, false, &ids, &n, &err) == 0);
    bool plain = n > 1;
    for (size_t i = 0; i < n; i++) plain &= ids[i] < 128000;
    free(ids);
    ZT_CHECK(plain);
    zr_tokenizer_free(t);
    zr_gguf_close(&g);
}

/* line: one line with its newline */
static bool first_line_is(const char *out, const char *line) { return strncmp(out, line, strlen(line)) == 0; }

ZT_TEST(zrun_tokenize_prints_ids_for_scripts_and_exits_2_on_usage_errors) {
    const char *zrun = getenv("ZRUN");
    const char *model = zt_shared_model("models/stories260K.gguf");
    if (!model) return;
    if (!zrun) {
        zt_skip("$ZRUN is not set (run through meson test)");
        return;
    }
    ZtProc p = zt_proc_zrun(NULL, (const char *const[]){"tokenize", "-m", model, "-p", STORY, "--ids", NULL}, NULL);
    ZT_CHECKF(p.status == 0, "exit %d: %s", p.status, p.err);
    ZT_CHECKF(first_line_is(p.out, "1 403 407 261 378 432 383 286 261 376 400 428 395 392 412 444 426 346 397 355 "
                            "267 352 379 322 265 282 295 433 335 345 374 419 426\n"), "%s", p.out);
    zt_proc_free(&p);
    p = zt_proc_zrun(NULL, (const char *const[]){"tokenize", "-m", model, "-p", "Hi", "--no-bos", NULL}, NULL);
    ZT_CHECKF(first_line_is(p.out, "   320 -> ' H'\n"), "%s", p.out);
    zt_proc_free(&p);
    p = zt_proc_zrun(NULL, (const char *const[]){"tokenize", "-p", "x", NULL}, NULL);
    ZT_CHECK(p.status == 2);
    zt_proc_free(&p);
    p = zt_proc_zrun(NULL, (const char *const[]){"tokenize", "-m", "/nonexistent.gguf", "-p", "x", NULL}, NULL);
    ZT_CHECK(p.status == 1);
    zt_proc_free(&p);
}

ZT_TEST(zrun_tokenize_says_when_the_text_file_is_a_directory) {
    const char *model = zt_shared_model("models/stories260K.gguf");
    if (!model) return;
    if (!getenv("ZRUN")) {
        zt_skip("$ZRUN is not set (run through meson test)");
        return;
    }
    ZtProc p = zt_proc_zrun(NULL, (const char *const[]){"tokenize", "-m", model, "-f", zt_tmpdir(), NULL}, NULL);
    ZT_CHECKF(p.status == 1 && strstr(p.err, "is a directory"), "exit %d: %s", p.status, p.err);
    zt_proc_free(&p);
}

/* A 20 MB prompt on one line: the working memory of encoding stays a small multiple of the
 * text (it was ~37 bytes per input byte, 772 MB here: a symbol and queue entries per character
 * of the whole text). */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
ZT_TEST(encoding_20_mb_of_text_needs_a_few_bytes_per_input_byte) {
#ifdef UNDER_ASAN
    zt_skip("AddressSanitizer keeps freed memory in quarantine: resident sizes say nothing here");
    return;
#endif
    ZrGguf g;
    ZrTokenizer *t;
    if (!open_vocab("llama-spm", &g, &t)) return;
    static const char *const words[] = {"Once", "upon", "a", "time", "there", "was", "little", "girl", "named", "Lily.",
                                        "She", "loved", "to", "play", "outside,", "\303\274ber", "\xE6\x97\xA5\xE6\x9C\xAC", "123", "don't"};
    const size_t len = 20u << 20;
    char *text = malloc(len);
    ZT_CHECK(text != NULL);
    uint64_t st = 7;
    for (size_t n = 0; n < len;) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        const char *w = words[(st >> 33) % (sizeof words / sizeof words[0])];
        size_t k = strlen(w);
        if (k + 1 > len - n) k = len - n - 1;
        memcpy(text + n, w, k);
        n += k;
        text[n++] = ' ';
    }
    if (!reset_peak_rss()) {
        free(text);
        zr_tokenizer_free(t);
        zr_gguf_close(&g);
        zt_skip("/proc/self/clear_refs is not writable: the peak cannot be measured");
        return;
    }
    const size_t before = proc_kb("VmRSS:");
    int32_t *ids = NULL;
    size_t n_ids = 0;
    ZrError err;
    int rc = zr_tokenizer_encode(t, text, len, true, false, &ids, &n_ids, &err);
    const size_t peak = proc_kb("VmHWM:");
    free(ids);
    free(text);
    zr_tokenizer_free(t);
    zr_gguf_close(&g);
    ZT_CHECKF(rc == 0, "%s", err.msg);
    ZT_CHECK(n_ids > len / 8);
    const double per_byte = (double)(peak - before) / (double)len;
    fprintf(stderr, "  %zu tokens; peak working memory %.1f MB, %.2f bytes per input byte\n", n_ids, (double)(peak - before) / 1e6, per_byte);
    ZT_CHECKF(per_byte < 6.0, "%.2f bytes per input byte", per_byte);
}

/* The tokenizer's old text index hashed with fixed multiply-xorshift steps: all invertible, so
 * for any 8-byte texts' hash a file can choose (here: 200k that agree in their low 19 bits, the
 * slot bits of the table) the texts can be computed. Loading such a vocabulary made every insert
 * scan the whole cluster: quadratic. With a keyed hash it loads in linear time. */
static uint64_t inv64(uint64_t a) { /* a odd: a^-1 mod 2^64 (Newton) */
    uint64_t x = a;
    for (int i = 0; i < 6; i++) x *= 2 - a * x;
    return x;
}

ZT_TEST(a_vocabulary_of_texts_chosen_to_collide_loads_in_linear_time) {
    enum { N = 200000 };
    const uint64_t h0 = 0x9E3779B97F4A7C15ull ^ (8 * 0xC2B2AE3D27D4EB4Full);
    char *texts = malloc((size_t)N * 8);
    ZrStr *strs = malloc(N * sizeof *strs);
    ZT_CHECK(texts && strs);
    for (uint64_t i = 0; i < N; i++) {
        uint64_t o = i << 19 | 777; /* the old hash of text i: slot 777 of 2^19 */
        uint64_t y = o ^ (o >> 32);
        uint64_t h = y * inv64(0x9E3779B97F4A7C15ull);
        h ^= h >> 29;
        h ^= h >> 58;
        h *= inv64(0xC4CEB9FE1A85EC53ull);
        h ^= h >> 32;
        uint64_t v = (h * inv64(0xFF51AFD7ED558CCDull)) ^ h0;
        memcpy(texts + 8 * i, &v, 8);
        strs[i] = (ZrStr){texts + 8 * i, 8};
    }
    Synth sy;
    zr_gguf_w_init(&sy.w);
    zr_gguf_w_str(&sy.w, "tokenizer.ggml.model", "llama");
    zr_gguf_w_arr_zrstr(&sy.w, "tokenizer.ggml.tokens", N, strs);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ZrError err;
    ZrTokenizer *t = synth_load(&sy, &err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    bool found = t && zr_tokenizer_find(t, texts + 8 * 12345, 8) == 12345;
    zr_tokenizer_free(t);
    free(texts);
    free(strs);
    ZT_CHECKF(found, "%s", t ? "text 12345 not found" : err.msg);
    ZT_CHECKF(sec < 2.0, "%d colliding texts loaded in %.2f s", N, sec);
}

int main(void) { return zt_run(); }
