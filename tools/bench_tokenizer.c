/* bench_tokenizer: encode throughput on one core.
 *   bench_tokenizer [--shared DIR] [--mb N] [--repeat R] [--tmp DIR] [--one-line]
 * Builds N MiB (default 1) of mixed text from the reference inputs (the .inp files of
 * ../shared/vocab: every case of six vocabularies, separators removed, repeated), decompresses
 * the llama-bpe and llama-spm vocabularies into --tmp (default /tmp), encodes the text R times
 * (default 5; add_special and parse_special off, as for a prompt) and prints the best time as
 * MiB/s: thread CPU time (one core's work, robust to a busy machine) and wall time.
 * --one-line turns every newline into a space: one paragraph of N MiB, the worst case for
 * SentencePiece (whose merges then share one queue). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gguf.h"
#include "tokenizer.h"

static const char *k_inputs[] = {"llama-spm", "llama-bpe", "qwen2", "gpt-2", "deepseek-llm", "falcon"};
static const char SEP[] = "\n__ggml_vocab_test__\n";

static double clock_s(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static double now_s(void) { return clock_s(CLOCK_MONOTONIC); }
/* CPU time of this thread: on a loaded machine it still measures one core's work */
static double cpu_s(void) { return clock_s(CLOCK_THREAD_CPUTIME_ID); }

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) *len = (size_t)n;
    return b;
}

int main(int argc, char **argv) {
    const char *shared = getenv("ZR_SHARED") ? getenv("ZR_SHARED") : "../shared";
    const char *tmp = "/tmp";
    double mb = 1.0;
    int repeat = 5;
    bool one_line = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--shared") && i + 1 < argc) shared = argv[++i];
        else if (!strcmp(argv[i], "--tmp") && i + 1 < argc) tmp = argv[++i];
        else if (!strcmp(argv[i], "--mb") && i + 1 < argc) mb = atof(argv[++i]);
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) repeat = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--one-line")) one_line = true;
        else {
            fprintf(stderr, "usage: bench_tokenizer [--shared DIR] [--mb N] [--repeat R] [--tmp DIR] [--one-line]\n");
            return 2;
        }
    }
    if (mb <= 0 || mb > 1024 || repeat < 1) {
        fprintf(stderr, "bench_tokenizer: --mb must be in (0, 1024], --repeat >= 1\n");
        return 2;
    }

    /* the mixed text: every reference input, in turn, until the size is reached */
    size_t want = (size_t)(mb * 1024 * 1024), n = 0;
    char *pool = NULL, *text = malloc(want);
    size_t pool_len = 0;
    for (size_t k = 0; k < sizeof k_inputs / sizeof *k_inputs; k++) {
        char path[4096];
        size_t len;
        snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf.inp", shared, k_inputs[k]);
        char *s = read_file(path, &len);
        if (!s) {
            fprintf(stderr, "bench_tokenizer: cannot read %s\n", path);
            return 1;
        }
        pool = realloc(pool, pool_len + len);
        for (char *p = s; p < s + len;) {
            char *e = memmem(p, (size_t)(s + len - p), SEP, sizeof SEP - 1);
            size_t piece = e ? (size_t)(e - p) : (size_t)(s + len - p);
            memcpy(pool + pool_len, p, piece);
            pool_len += piece;
            if (e) pool[pool_len++] = '\n';
            p = e ? e + sizeof SEP - 1 : s + len;
        }
        free(s);
    }
    while (n < want) {
        size_t k = pool_len < want - n ? pool_len : want - n;
        memcpy(text + n, pool, k);
        n += k;
    }
    /* do not end inside a UTF-8 character */
    while (n > 0 && ((unsigned char)text[n - 1] & 0xC0) == 0x80) n--;
    if (n > 0 && (unsigned char)text[n - 1] >= 0xC0) n--;
    free(pool);
    if (one_line)
        for (size_t i = 0; i < n; i++)
            if (text[i] == '\n') text[i] = ' ';

    static const char *vocabs[] = {"llama-bpe", "llama-spm"};
    for (size_t v = 0; v < 2; v++) {
        char src[4096], dst[4096], cmd[9000];
        snprintf(src, sizeof src, "%s/vocab/ggml-vocab-%s.gguf.xz", shared, vocabs[v]);
        snprintf(dst, sizeof dst, "%s/zrun-bench-%s-%d.gguf", tmp, vocabs[v], (int)getpid());
        snprintf(cmd, sizeof cmd, "xz -dc '%s' > '%s'", src, dst);
        if (system(cmd) != 0) {
            fprintf(stderr, "bench_tokenizer: %s failed\n", cmd);
            return 1;
        }
        ZrGguf g;
        ZrTokenizer *t;
        ZrError err;
        double t0 = now_s();
        if (zr_gguf_open(&g, dst, &err) || zr_tokenizer_load(&t, &g, &err)) {
            fprintf(stderr, "bench_tokenizer: %s\n", err.msg);
            return 1;
        }
        double t_load = now_s() - t0;
        zr_gguf_close(&g);
        unlink(dst);
        double best = 1e30, best_wall = 1e30;
        size_t n_ids = 0;
        for (int r = 0; r < repeat; r++) {
            int32_t *ids;
            double w0 = now_s();
            t0 = cpu_s();
            if (zr_tokenizer_encode(t, text, n, false, false, &ids, &n_ids, &err)) {
                fprintf(stderr, "bench_tokenizer: %s\n", err.msg);
                return 1;
            }
            double dt = cpu_s() - t0, dw = now_s() - w0;
            free(ids);
            if (dt < best) best = dt;
            if (dw < best_wall) best_wall = dw;
        }
        double mib = (double)n / (1024 * 1024);
        printf("%-10s %-34s %.2f MiB -> %zu tokens: best of %d: %.1f ms CPU = %.2f MiB/s "
               "(wall %.1f ms = %.2f MiB/s; load %.0f ms)\n",
               vocabs[v], zr_tokenizer_kind(t), mib, n_ids, repeat, best * 1e3, mib / best,
               best_wall * 1e3, mib / best_wall, t_load * 1e3);
        zr_tokenizer_free(t);
    }
    free(text);
    return 0;
}
