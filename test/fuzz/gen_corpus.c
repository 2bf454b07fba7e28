/* Writes the hand-built GGUF files of test/gguf_cases.c (every bad file and a few good
 * ones) into a directory: the fuzzer's seed corpus, test/fuzz/corpus/.
 *   gen_corpus DIR            write DIR/NAME.gguf for every case
 *   gen_corpus --check DIR    exit 1 unless DIR holds exactly those bytes */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_cases.h"

int main(int argc, char **argv) {
    int check = argc == 3 && !strcmp(argv[1], "--check");
    if (argc != 2 + check) {
        fprintf(stderr, "usage: gen_corpus [--check] DIR\n");
        return 2;
    }
    const char *dir = argv[1 + check];
    int bad = 0;
    for (int i = 0; i < gguf_n_cases; i++) {
        uint8_t *buf;
        size_t len;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.gguf", dir, gguf_cases[i].name);
        if (gguf_cases[i].make(&buf, &len)) { fprintf(stderr, "%s: cannot build\n", gguf_cases[i].name); return 1; }
        if (check) {
            FILE *f = fopen(path, "rb");
            uint8_t *old = malloc(len + 1);
            size_t n = f && old ? fread(old, 1, len + 1, f) : 0;
            if (!f || n != len || memcmp(old, buf, len) != 0) {
                fprintf(stderr, "%s differs from what gen_corpus makes: run gen_corpus %s\n", path, dir);
                bad++;
            }
            if (f) fclose(f);
            free(old);
        } else {
            FILE *f = fopen(path, "wb");
            if (!f || fwrite(buf, 1, len, f) != len) { fprintf(stderr, "%s: cannot write\n", path); bad++; }
            if (f) fclose(f);
        }
        free(buf);
    }
    return bad != 0;
}
