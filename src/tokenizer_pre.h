/* The pre-tokenizer of byte-level BPE vocabularies: splits text into words with the regex list
 * that tokenizer.ggml.pre names, exactly as llama.cpp's unicode_regex_split does (each regex
 * splits the pieces the previous one left; matches and the text between them both become
 * pieces). Regexes run in PCRE2 (UTF + UCP, JIT when available). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef struct ZrPretok ZrPretok;

/* name: the tokenizer.ggml.pre value ("" or NULL = "default"). An unknown name fails with
 * ZR_E_UNSUPPORTED and lists the known ones. */
int zr_pretok_create(ZrPretok **out, const char *name, ZrError *err);
void zr_pretok_free(ZrPretok *p);
/* The canonical pre-tokenizer family ("llama3", "qwen2", "gpt2", ...). */
const char *zr_pretok_family(const ZrPretok *p);
/* llama.cpp's per-family flags: whole words found in the vocabulary skip the merges
 * (llama3), and whether BOS is added when the file does not say (add_bos_token absent). */
bool zr_pretok_ignore_merges(const ZrPretok *p);
bool zr_pretok_default_add_bos(const ZrPretok *p);

/* The words of one split. text holds the words back to back (the input re-encoded from its
 * code points: identical to the input when that is valid UTF-8; each invalid byte becomes
 * U+FFFD as in llama.cpp); word i is text[end[i-1] .. end[i]). Reused across calls. */
typedef struct ZrWords {
    char *text;     /* [cap_text] */
    size_t n_text, cap_text;
    size_t *end;    /* [cap_words] byte offsets into text */
    size_t n, cap_words;
    /* scratch, kept between calls: about 4 bytes per code point, 1 per byte of the view and 4
     * per piece (a 20 MB prompt needs a small multiple of itself, not ~20x) */
    uint32_t *voff; /* [cap_voff] byte offset of code point i in view; [n_cpt] = the view's length */
    size_t n_cpt;
    char *view;     /* [cap_view] what the regexes see (see tokenizer_pre.c) */
    uint32_t *frag, *frag2; /* [cap_frag], [cap_frag2] piece lengths in code points */
    size_t cap_voff, cap_view, cap_frag, cap_frag2;
    void *match_data; /* pcre2_match_data_8 */
} ZrWords;

void zr_words_init(ZrWords *w);
void zr_words_free(ZrWords *w);
int zr_pretok_split(const ZrPretok *p, const char *text, size_t len, ZrWords *w, ZrError *err);
