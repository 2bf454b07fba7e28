/* Hand-built GGUF files, good and bad, shared by test_gguf (one test per case) and the fuzz
 * corpus generator (test/fuzz/gen_corpus.c). */
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct GgufCase {
    const char *name;
    /* Builds the file (malloc'ed). Returns 0 on success. */
    int (*make)(uint8_t **buf, size_t *len);
    /* NULL for a good file; else substrings the error message must contain (up to 3). */
    const char *expect[3];
} GgufCase;

extern const GgufCase gguf_cases[];
extern const int gguf_n_cases;
const GgufCase *gguf_case(const char *name);
