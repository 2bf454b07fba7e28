/* Regex pre-tokenizers of byte-level BPE vocabularies (see tokenizer_pre.h).
 *
 * How this reproduces llama.cpp (src/unicode.cpp, unicode_regex_split) exactly:
 * - The input is decoded to code points the way llama.cpp does (an invalid byte becomes
 *   U+FFFD; overlong forms are accepted) and the words are re-encoded from those code points.
 * - llama.cpp runs each regex over a "view" of the text in which every non-ASCII White_Space
 *   code point is replaced by U+000B (its std::regex only knows ASCII \s). We run PCRE2 over
 *   the same view, so a character class that names U+3000 (deepseek-llm) does not match the
 *   ideographic space, exactly as there. \s and \S are rewritten to the ASCII class [\t-\r ]
 *   before compiling: with the view, that is llama.cpp's White_Space set, no more and no less.
 * - Every regex splits each piece left by the previous one; a regex sees only its piece (so
 *   (?!\S) and $ at the end of a piece behave as at the end of the text), and the text
 *   between two matches becomes a piece of its own.
 * - llama.cpp's hand-written splitters for the GPT-2 and Llama-3 regexes (used in place of
 *   std::regex) give the same pieces as the regexes themselves, so one engine serves both.
 * - \p{S} in llama.cpp's category collapse does not include '~' (its ASCII symbol list stops
 *   at '|'); the regexes that use \p{S} spell that out. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer_pre.h"

#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ZR_PRETOK_MAX_REGEX 8

typedef struct ZrPretokFamily {
    const char *family;
    const char *names; /* the tokenizer.ggml.pre values, space-separated */
    bool ignore_merges;
    bool add_bos;
    const char *regex[ZR_PRETOK_MAX_REGEX]; /* NULL-terminated */
} ZrPretokFamily;

/* The GPT-2 split, shared by several families. */
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
/* Llama 3's split, with the case-insensitive contractions spelled out as llama.cpp does. */
#define RE_LLAMA3                                                                        \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" \
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2                                                                         \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" \
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* Non-ASCII characters are written as \x{...}: deepseek-llm's class of cased-letter ranges
 * holds U+1F7D, U+1FBE, U+1FD3, U+1FDB, U+2126 and U+212A, which NFC normalisation (many
 * editors, many web copies of llama.cpp) silently turns into other code points. */
static const ZrPretokFamily k_families[] = {
    {"default", "default", false, false,
     {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]", NULL}},
    {"llama3", "llama3 llama-v3 llama-bpe falcon3 falcon-h1 pixtral midm-2.0 lfm2", true, true,
     {RE_LLAMA3, NULL}},
    {"dbrx", "dbrx smaug-bpe", false, false, {RE_LLAMA3, NULL}},
    {"deepseek-llm", "deepseek-llm", false, false,
     {"[\\r\\n]",
      "\\s?[\\x{41}-\\x{5A}\\x{61}-\\x{7A}\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}"
      "\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}"
      "\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-"
      "\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}"
      "\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}"
      "\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}"
      "\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}"
      "\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}"
      "\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-"
      "\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}"
      "\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-"
      "\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}"
      "\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}"
      "\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-"
      "\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-"
      "\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-"
      "\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-"
      "\\x{118DF}\\x{1E900}-\\x{1E943}]+",
      "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
      "\\s+$", "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+", "\\p{N}+", NULL}},
    {"deepseek-coder", "deepseek-coder", false, false,
     {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+",
      "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+", "\\p{N}", NULL}},
    {"deepseek-v3", "deepseek-v3 hunyuan-dense joyai-llm", false, false,
     {"\\p{N}{1,3}", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|(?:~|[^\\r\\n\\p{L}\\p{P}\\p{S}])?"
      "[\\p{L}\\p{M}]+| ?(?:(?!~)[\\p{P}\\p{S}])+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      NULL}},
    {"falcon", "falcon", false, false,
     {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]", NULL}},
    {"starcoder", "starcoder refact command-r smollm codeshell exaone minerva-7b", false, false,
     {"\\p{N}", RE_GPT2, NULL}},
    {"gpt2",
     "gpt-2 phi-2 jina-es jina-de gigachat jina-v2-es jina-v2-de a.x-4.0 mellum modern-bert mpt "
     "olmo jais trillion granite-docling exaone4 jina-v1-en jina-v2-code roberta-bpe",
     false, false, {RE_GPT2, NULL}},
    {"qwen2", "qwen2 deepseek-r1-qwen kormo stablelm2 hunyuan megrez", false, false,
     {RE_QWEN2, NULL}},
    {"poro", "poro-chat bloom gpt3-finnish", false, false,
     {" ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+", NULL}},
    {"chatglm4", "chatglm-bpe glm4", false, false, {RE_LLAMA3, NULL}},
    {"viking", "viking", false, false,
     {" ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+", "\\p{N}",
      NULL}},
    {"tekken", "tekken", true, true,
     {"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?"
      "((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|"
      "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      NULL}},
    {"gpt4o", "gpt-4o llama4", false, false,
     {"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+"
      "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?"
      "((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|"
      "'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      NULL}},
    {"seed-coder", "seed-coder", false, false,
     {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
      "\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      NULL}},
    {"bailingmoe", "bailingmoe bailingmoe2 llada-moe", false, false,
     {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
      "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
      NULL}},
    {"grok-2", "grok-2", false, false, {RE_QWEN2, NULL}},
};
#define N_FAMILIES (sizeof k_families / sizeof k_families[0])

struct ZrPretok {
    const ZrPretokFamily *fam;
    int n_regex;
    pcre2_code *code[ZR_PRETOK_MAX_REGEX];
};

/* llama.cpp's White_Space set (unicode-data.cpp, unicode_set_whitespace). */
static bool is_white_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

/* \s -> [\t-\r ] (inside a class: \t-\r and a space), \S -> [^\t-\r ]. out holds 4x len. */
static void rewrite_space_classes(const char *re, char *out) {
    bool in_class = false;
    size_t o = 0;
    for (size_t i = 0; re[i]; i++) {
        char c = re[i];
        if (c == '\\' && re[i + 1]) {
            char d = re[i + 1];
            if (d == 's' || d == 'S') {
                const char *rep = in_class ? "\\t-\\r " : d == 's' ? "[\\t-\\r ]" : "[^\\t-\\r ]";
                size_t n = strlen(rep);
                memcpy(out + o, rep, n);
                o += n;
            } else {
                out[o++] = c;
                out[o++] = d;
            }
            i++;
            continue;
        }
        if (c == '[' && !in_class) in_class = true;
        else if (c == ']' && in_class) in_class = false;
        out[o++] = c;
    }
    out[o] = 0;
}

static bool name_in_list(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ' ');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && memcmp(p, name, n) == 0) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

int zr_pretok_create(ZrPretok **out, const char *name, ZrError *err) {
    *out = NULL;
    if (!name || !*name) name = "default";
    const ZrPretokFamily *fam = NULL;
    for (size_t i = 0; i < N_FAMILIES && !fam; i++)
        if (name_in_list(k_families[i].names, name)) fam = &k_families[i];
    if (!fam) {
        char known[2048];
        size_t o = 0;
        known[0] = 0;
        for (size_t i = 0; i < N_FAMILIES; i++)
            o += (size_t)snprintf(known + o, o < sizeof known ? sizeof known - o : 0, "%s%s",
                                  i ? " " : "", k_families[i].names);
        return zr_err(err, ZR_E_UNSUPPORTED,
                      "tokenizer.ggml.pre: pre-tokenizer '%s' is not supported (known: %s)", name,
                      known);
    }
    ZrPretok *p = calloc(1, sizeof *p);
    if (!p) return zr_err(err, ZR_E_NOMEM, "pre-tokenizer: out of memory");
    p->fam = fam;
    for (int i = 0; i < ZR_PRETOK_MAX_REGEX && fam->regex[i]; i++) {
        size_t len = strlen(fam->regex[i]);
        char *re = malloc(4 * len + 1);
        if (!re) {
            zr_pretok_free(p);
            return zr_err(err, ZR_E_NOMEM, "pre-tokenizer: out of memory");
        }
        rewrite_space_classes(fam->regex[i], re);
        int ec;
        PCRE2_SIZE eo;
        p->code[i] = pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &ec, &eo, NULL);
        free(re);
        if (!p->code[i]) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(ec, msg, sizeof msg);
            zr_pretok_free(p);
            return zr_err(err, ZR_E_INTERNAL, "pre-tokenizer '%s': regex %d: %s at offset %zu",
                          fam->family, i, (const char *)msg, (size_t)eo);
        }
        /* JIT is an optimisation only: without it pcre2_match interprets. */
        (void)pcre2_jit_compile(p->code[i], PCRE2_JIT_COMPLETE);
        p->n_regex = i + 1;
    }
    *out = p;
    return ZR_OK;
}

void zr_pretok_free(ZrPretok *p) {
    if (!p) return;
    for (int i = 0; i < p->n_regex; i++) pcre2_code_free(p->code[i]);
    free(p);
}

const char *zr_pretok_family(const ZrPretok *p) { return p->fam->family; }
bool zr_pretok_ignore_merges(const ZrPretok *p) { return p->fam->ignore_merges; }
bool zr_pretok_default_add_bos(const ZrPretok *p) { return p->fam->add_bos; }

void zr_words_init(ZrWords *w) { memset(w, 0, sizeof *w); }

void zr_words_free(ZrWords *w) {
    free(w->text);
    free(w->end);
    free(w->view);
    free(w->voff);
    free(w->frag);
    free(w->frag2);
    if (w->match_data) pcre2_match_data_free((pcre2_match_data *)w->match_data);
    memset(w, 0, sizeof *w);
}

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t n = *cap ? *cap : 64;
    while (n < need) n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q) return false;
    *p = q;
    *cap = n;
    return true;
}

/* llama.cpp's unicode_cpt_from_utf8: lengths from the lead byte, continuation bytes checked,
 * nothing else (overlong forms and surrogates pass); a bad byte is U+FFFD and is skipped. */
static uint32_t decode_cpt(const unsigned char *s, size_t len, size_t *i) {
    size_t k = *i;
    unsigned b0 = s[k];
    if (b0 < 0x80) {
        *i = k + 1;
        return b0;
    }
    if ((b0 & 0x40) && !(b0 & 0x20)) {
        if (k + 1 < len && (s[k + 1] & 0xC0) == 0x80) {
            *i = k + 2;
            return ((b0 & 0x1Fu) << 6) | (s[k + 1] & 0x3Fu);
        }
    } else if ((b0 & 0x40) && !(b0 & 0x10)) {
        if (k + 2 < len && (s[k + 1] & 0xC0) == 0x80 && (s[k + 2] & 0xC0) == 0x80) {
            *i = k + 3;
            return ((b0 & 0x0Fu) << 12) | ((s[k + 1] & 0x3Fu) << 6) | (s[k + 2] & 0x3Fu);
        }
    } else if ((b0 & 0x40) && !(b0 & 0x08)) {
        if (k + 3 < len && (s[k + 1] & 0xC0) == 0x80 && (s[k + 2] & 0xC0) == 0x80 &&
            (s[k + 3] & 0xC0) == 0x80) {
            *i = k + 4;
            return ((b0 & 0x07u) << 18) | ((s[k + 1] & 0x3Fu) << 12) | ((s[k + 2] & 0x3Fu) << 6) |
                   (s[k + 3] & 0x3Fu);
        }
    }
    *i = k + 1;
    return 0xFFFD;
}

static size_t encode_cpt(uint32_t c, char *o) {
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xC0 | (c >> 6));
        o[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | (c >> 12));
        o[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (c >> 18));
    o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    o[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* The code point at byte offset b of the view (a character boundary, or the end), searched
 * forward from *cur: a piece's matches come in order, so a scan costs one step per character. */
static size_t cpt_at(const ZrWords *w, size_t *cur, size_t b) {
    while (*cur < w->n_cpt && w->voff[*cur] < b) (*cur)++;
    return *cur;
}

/* One regex over one piece of the view: appends the new piece lengths (code points) to frag2. */
static int split_piece(const pcre2_code *code, ZrWords *w, size_t s, size_t len, size_t *n2,
                       ZrError *err) {
    pcre2_match_data *md = (pcre2_match_data *)w->match_data;
    const size_t base = w->voff[s];
    const size_t sublen = w->voff[s + len] - base;
    const PCRE2_SPTR subj = (PCRE2_SPTR)(w->view + base);
    size_t pos = 0, prev = 0, cur = s, cprev = s; /* cprev: the code point at prev */
    uint32_t opts = 0;
    /* each match adds at most two pieces (the gap before it and itself) */
    for (;;) {
        int rc = pcre2_match(code, subj, sublen, pos, opts | PCRE2_NO_UTF_CHECK, md, NULL);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
            rc = pcre2_match(code, subj, sublen, pos, opts | PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                             md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) {
            if (!opts || pos >= sublen) break;
            /* no non-empty match where the empty one was: search on from the next character */
            opts = 0;
            pos++;
            while (pos < sublen && (w->view[base + pos] & 0xC0) == 0x80) pos++;
            continue;
        }
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return zr_err(err, ZR_E_RANGE, "pre-tokenizer: regex failed on a %zu-byte piece: %s",
                          sublen, (const char *)msg);
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (!grow((void **)&w->frag2, &w->cap_frag2, *n2 + 2, sizeof *w->frag2))
            return zr_err(err, ZR_E_NOMEM, "pre-tokenizer: out of memory");
        const size_t cms = cpt_at(w, &cur, base + ms);
        if (ms > prev) w->frag2[(*n2)++] = (uint32_t)(cms - cprev);
        if (me > ms) {
            const size_t cme = cpt_at(w, &cur, base + me);
            w->frag2[(*n2)++] = (uint32_t)(cme - cms);
            prev = pos = me;
            cprev = cme;
            opts = 0;
            if (pos >= sublen) break;
        } else {
            /* an empty match splits the text here; std::regex_iterator then looks for a
             * non-empty match at the same place before moving on */
            prev = pos = ms;
            cprev = cms;
            opts = PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED;
        }
    }
    if (prev < sublen) {
        if (!grow((void **)&w->frag2, &w->cap_frag2, *n2 + 1, sizeof *w->frag2))
            return zr_err(err, ZR_E_NOMEM, "pre-tokenizer: out of memory");
        w->frag2[(*n2)++] = (uint32_t)(cpt_at(w, &cur, base + sublen) - cprev);
    }
    return ZR_OK;
}

int zr_pretok_split(const ZrPretok *p, const char *text, size_t len, ZrWords *w, ZrError *err) {
    const unsigned char *s = (const unsigned char *)text;
    w->n = 0;
    w->n_text = 0;
    if (!w->match_data) {
        w->match_data = pcre2_match_data_create(32, NULL);
        if (!w->match_data) return zr_err(err, ZR_E_NOMEM, "pre-tokenizer: out of memory");
    }
    /* at most one code point per byte, at most 3 view bytes per byte (a bad byte: U+FFFD) */
    if (!grow((void **)&w->voff, &w->cap_voff, len + 2, sizeof *w->voff) ||
        !grow((void **)&w->view, &w->cap_view, 3 * len + 4 + 64, 1))
        goto nomem;
    size_t n = 0, vb = 0;
    for (size_t i = 0; i < len;) {
        uint32_t c = decode_cpt(s, len, &i);
        if (c > 0x10FFFF) c = 0xFFFD;
        uint32_t v = c;
        if (c >= 0x80 && is_white_space(c)) v = 0x0B;
        else if (c >= 0xD800 && c <= 0xDFFF) v = 0xFFFD;
        w->voff[n] = (uint32_t)vb;
        vb += encode_cpt(v, w->view + vb);
        n++;
    }
    w->voff[n] = (uint32_t)vb;
    w->n_cpt = n;
    /* PCRE2's JIT may look at bytes past the end of the subject (it never uses them): keep
     * them defined */
    memset(w->view + vb, 0, 64);
    if (n == 0) return ZR_OK;

    size_t nf = 1;
    if (!grow((void **)&w->frag, &w->cap_frag, 1, sizeof *w->frag)) goto nomem;
    w->frag[0] = (uint32_t)n;
    for (int r = 0; r < p->n_regex; r++) {
        size_t n2 = 0, start = 0;
        for (size_t f = 0; f < nf; f++) {
            int rc = split_piece(p->code[r], w, start, w->frag[f], &n2, err);
            if (rc) return rc;
            start += w->frag[f];
        }
        uint32_t *t = w->frag;
        size_t tc = w->cap_frag;
        w->frag = w->frag2;
        w->cap_frag = w->cap_frag2;
        w->frag2 = t;
        w->cap_frag2 = tc;
        nf = n2;
    }

    /* the words, re-encoded from the code points (decoded again: the same sequence) */
    if (!grow((void **)&w->text, &w->cap_text, 3 * len + 1, 1)) goto nomem;
    if (!grow((void **)&w->end, &w->cap_words, nf + 1, sizeof *w->end)) goto nomem;
    size_t i = 0, o = 0;
    for (size_t f = 0; f < nf; f++) {
        for (size_t j = 0; j < w->frag[f]; j++) {
            uint32_t c = decode_cpt(s, len, &i);
            o += encode_cpt(c > 0x10FFFF ? 0xFFFD : c, w->text + o);
        }
        w->end[w->n++] = o;
    }
    w->n_text = o;
    return ZR_OK;
nomem:
    return zr_err(err, ZR_E_NOMEM, "pre-tokenizer: out of memory for %zu bytes of text", len);
}
