/* Tokenizers driven only by tokenizer.ggml.* metadata: SentencePiece-style (model "llama")
 * and byte-level BPE (model "gpt2") with the pre-tokenizer named by tokenizer.ggml.pre. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "gguf.h"

typedef struct ZrTokenizer ZrTokenizer;

int zr_tokenizer_load(ZrTokenizer **out, const ZrGguf *g, ZrError *err);
void zr_tokenizer_free(ZrTokenizer *t);

/* Encodes text[0..len). add_special: BOS/EOS as add_bos_token/add_eos_token say.
 * parse_special: recognise control/user-defined token text (e.g. "<|begin_of_text|>").
 * *ids is malloc'ed (caller frees). */
int zr_tokenizer_encode(const ZrTokenizer *t, const char *text, size_t len, bool add_special,
                        bool parse_special, int32_t **ids, size_t *n_ids, ZrError *err);

int zr_tokenizer_n_vocab(const ZrTokenizer *t);
int32_t zr_tokenizer_bos(const ZrTokenizer *t); /* -1 if none */
int32_t zr_tokenizer_eos(const ZrTokenizer *t); /* -1 if none */
bool zr_tokenizer_is_eog(const ZrTokenizer *t, int32_t id); /* end of generation (eos, eot, ...) */
const char *zr_tokenizer_kind(const ZrTokenizer *t);        /* "llama (SentencePiece)", "gpt2 (byte-level BPE, llama-bpe)" */

/* The raw bytes a token stands for (byte tokens resolved, '▁' -> ' ', GPT-2 byte map undone).
 * Control tokens give their text only when special is true. Returns the byte count (may
 * exceed cap: then nothing is truncated mid-way silently: the caller retries). */
size_t zr_tokenizer_token_bytes(const ZrTokenizer *t, int32_t id, bool special, char *buf, size_t cap);

/* Streaming detokenizer: holds back incomplete UTF-8 so a character split over two tokens is
 * never printed broken. */
typedef struct ZrDetok {
    const ZrTokenizer *tok;
    char pending[8];
    int n_pending;
    bool at_start; /* SentencePiece: drop the space the encoder prepended, as llama.cpp does */
} ZrDetok;
void zr_detok_init(ZrDetok *d, const ZrTokenizer *t);
/* Appends the text of id; returns the number of complete bytes written to out (cap >= 64). */
size_t zr_detok_push(ZrDetok *d, int32_t id, char *out, size_t cap);
/* Flushes what is held back (invalid UTF-8 is emitted as U+FFFD). */
size_t zr_detok_flush(ZrDetok *d, char *out, size_t cap);
