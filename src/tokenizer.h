/* Tokenizers driven only by tokenizer.ggml.* metadata: SentencePiece-style (model "llama")
 * and byte-level BPE (model "gpt2") with the pre-tokenizer named by tokenizer.ggml.pre.
 * Both reproduce llama.cpp's llama_tokenize token for token (see tokenizer.c). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "gguf.h"

typedef struct ZrTokenizer ZrTokenizer;

/* Copies everything it needs out of g: g may be closed afterwards. */
int zr_tokenizer_load(ZrTokenizer **out, const ZrGguf *g, ZrError *err);
void zr_tokenizer_free(ZrTokenizer *t);

/* Encodes text[0..len). add_special: BOS/EOS as add_bos_token/add_eos_token say.
 * parse_special: recognise control/user-defined token text (e.g. "<|begin_of_text|>").
 * User-defined tokens are recognised in either case, as in llama.cpp.
 * *ids is malloc'ed (caller frees; NULL when *n_ids is 0). */
int zr_tokenizer_encode(const ZrTokenizer *t, const char *text, size_t len, bool add_special,
                        bool parse_special, int32_t **ids, size_t *n_ids, ZrError *err);

int zr_tokenizer_n_vocab(const ZrTokenizer *t);
int32_t zr_tokenizer_bos(const ZrTokenizer *t); /* -1 if none */
int32_t zr_tokenizer_eos(const ZrTokenizer *t); /* -1 if none */
bool zr_tokenizer_add_bos(const ZrTokenizer *t); /* whether encode(add_special) prepends BOS */
bool zr_tokenizer_is_eog(const ZrTokenizer *t, int32_t id); /* end of generation (eos, eot, ...) */
bool zr_tokenizer_is_control(const ZrTokenizer *t, int32_t id); /* control or unknown type */
const char *zr_tokenizer_kind(const ZrTokenizer *t);        /* "llama (SentencePiece)", "gpt2 (byte-level BPE, llama-bpe)" */

/* The vocabulary entry of id as stored in the file (not NUL-terminated), or NULL. */
const char *zr_tokenizer_token_text(const ZrTokenizer *t, int32_t id, size_t *len);
/* The id whose vocabulary text is exactly text[0..len), or -1. */
int32_t zr_tokenizer_find(const ZrTokenizer *t, const char *text, size_t len);

/* The raw bytes a token stands for (byte tokens resolved, '▁' -> ' ', GPT-2 byte map undone).
 * Control tokens give their text only when special is true. Returns the byte count (may
 * exceed cap: then nothing is truncated mid-way silently: the caller retries). */
size_t zr_tokenizer_token_bytes(const ZrTokenizer *t, int32_t id, bool special, char *buf, size_t cap);

/* Streaming detokenizer: holds back incomplete UTF-8 so a character split over two tokens is
 * never printed broken.
 *
 * Leading space: a SentencePiece encoder prepends a space to the text, so " Once" is the
 * piece of the first word after BOS. zrun prints pieces as they are, like llama.cpp's
 * streaming output (llama-cli, llama-simple): generating from BOS prints " Once upon a time".
 * Set at_start after zr_detok_init to get llama_detokenize's rule for a sequence decoded
 * from its start instead: when add_space_prefix is on and the first token pushed is not BOS,
 * one leading space of its piece is dropped (so detokenizing encode(x) gives x back). */
typedef struct ZrDetok {
    const ZrTokenizer *tok;
    char pending[8];
    int n_pending;
    bool at_start; /* see above; zr_detok_init sets it false */
    bool special;  /* also print the text of control tokens (default false) */
} ZrDetok;
void zr_detok_init(ZrDetok *d, const ZrTokenizer *t);
/* The out capacity one push or flush may need: 3 x (longest piece + 8) bytes (invalid UTF-8 is
 * replaced by the 3-byte U+FFFD). 1024 covers every vocabulary zrun knows of. */
size_t zr_detok_cap(const ZrTokenizer *t);
/* Appends the text of id; returns the number of complete bytes written to out. Valid UTF-8 is
 * passed through; each byte that can never start or continue a character becomes U+FFFD.
 * With cap < zr_detok_cap(t) the output is cut at a character boundary (text is lost). */
size_t zr_detok_push(ZrDetok *d, int32_t id, char *out, size_t cap);
/* Flushes what is held back (an incomplete character at the end becomes U+FFFD). */
size_t zr_detok_flush(ZrDetok *d, char *out, size_t cap);
