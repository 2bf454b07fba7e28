/* libFuzzer target for the tokenizers: arbitrary vocabulary metadata x arbitrary text.
 * Input: flags (1 byte: bit 0 add_special, bit 1 parse_special, bit 2 print control tokens),
 * the text's length (2 bytes, little-endian), a GGUF file with the tokenizer.ggml.* keys,
 * then the text (its last bytes). The text is encoded, the ids decoded back (piece by piece
 * and through the streaming detokenizer), and so are ids read from the text's own bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile size_t sink;

static void decode(const ZrTokenizer *t, const int32_t *ids, size_t n, bool special) {
    char piece[64];
    size_t cap = zr_detok_cap(t);
    char *out = malloc(cap);
    if (!out) return;
    ZrDetok d;
    zr_detok_init(&d, t);
    d.at_start = true;
    d.special = special;
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *text = zr_tokenizer_token_text(t, ids[i], &len);
        if (text && len) sink += (unsigned char)text[len - 1];
        size_t need = zr_tokenizer_token_bytes(t, ids[i], special, piece, sizeof piece);
        if (need > sizeof piece) {
            char *big = malloc(need);
            if (big && zr_tokenizer_token_bytes(t, ids[i], special, big, need) != need) abort();
            free(big);
        }
        size_t w = zr_detok_push(&d, ids[i], out, cap);
        if (w > cap) abort();
        sink += w + zr_tokenizer_is_eog(t, ids[i]) + zr_tokenizer_is_control(t, ids[i]);
    }
    if (zr_detok_flush(&d, out, cap) > cap) abort();
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    const unsigned flags = data[0];
    size_t tlen = (size_t)data[1] | (size_t)data[2] << 8;
    if (tlen > size - 3) tlen = size - 3;
    const size_t glen = size - 3 - tlen;
    /* exact-size copies: a read past either is a read past an allocation */
    uint8_t *file = malloc(glen ? glen : 1);
    char *text = malloc(tlen ? tlen : 1);
    if (!file || !text) abort();
    memcpy(file, data + 3, glen);
    memcpy(text, data + 3 + glen, tlen);
    ZrGguf g;
    ZrError err;
    ZrTokenizer *t = NULL;
    if (!zr_gguf_parse(&g, file, glen, "fuzz", &err)) {
        if (zr_tokenizer_load(&t, &g, &err) && !memchr(err.msg, 0, sizeof err.msg)) abort();
        zr_gguf_close(&g);
    }
    free(file); /* the tokenizer copied what it needs */
    if (t) {
        const int32_t nv = zr_tokenizer_n_vocab(t);
        int32_t *ids = NULL;
        size_t n = 0;
        if (!zr_tokenizer_encode(t, text, tlen, flags & 1, flags & 2, &ids, &n, &err)) {
            for (size_t i = 0; i < n; i++)
                if (ids[i] < 0 || ids[i] >= nv) abort();
            decode(t, ids, n, flags & 4);
        }
        free(ids);
        /* ids chosen by the input: every 2-byte pair of the text, taken modulo the vocabulary */
        size_t m = tlen / 2;
        int32_t *raw = malloc((m ? m : 1) * sizeof *raw);
        if (!raw) abort();
        for (size_t i = 0; i < m; i++) raw[i] = (int32_t)(((unsigned char)text[2 * i] | (unsigned)(unsigned char)text[2 * i + 1] << 8) % (unsigned)nv);
        decode(t, raw, m, flags & 4);
        free(raw);
        zr_tokenizer_free(t);
    }
    free(text);
    return 0;
}
