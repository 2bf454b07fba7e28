/* zrun tokenize: the token ids (and pieces) of a text, as the model's tokenizer makes them.
 *   zrun tokenize -m FILE (-p TEXT | -f FILE) [--ids] [--pieces] [--special] [--no-bos]
 * Default output, one line per token like llama-tokenize: "   id -> 'piece'" (control bytes,
 * backslashes and bytes that are not UTF-8 are escaped). --ids prints only the ids, separated
 * by single spaces, then a newline: for scripts. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cmd.h"
#include "gguf.h"
#include "opt.h"
#include "tokenizer.h"

static const char k_usage[] =
    "usage: zrun tokenize -m FILE (-p TEXT | -f FILE) [--ids] [--pieces] [--special] [--no-bos]\n";

/* Reads all of f; NULL on error (errno set). */
static char *read_all(FILE *f, size_t *len) {
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    if (!b) return NULL;
    for (;;) {
        if (n == cap) {
            char *q = realloc(b, cap *= 2);
            if (!q) {
                free(b);
                return NULL;
            }
            b = q;
        }
        size_t k = fread(b + n, 1, cap - n, f);
        n += k;
        if (k == 0) break;
        if (n > (size_t)1 << 30) { /* past the tokenizer's limit (an endless stream: /dev/zero) */
            free(b);
            errno = EFBIG;
            return NULL;
        }
    }
    if (ferror(f)) {
        free(b);
        return NULL;
    }
    *len = n;
    return b;
}

/* Prints a piece readably: valid UTF-8 as it is, control bytes, backslash and stray bytes
 * escaped. */
static void print_piece(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k = c < 0x80 ? 1 : (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3
                              : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
        bool ok = k > 0 && i + k <= n;
        for (size_t j = 1; ok && j < k; j++) ok = (s[i + j] & 0xC0) == 0x80;
        if (!ok) {
            printf("\\x%02X", c);
            i++;
        } else if (k > 1) {
            fwrite(s + i, 1, k, stdout);
            i += k;
        } else {
            if (c == '\n') fputs("\\n", stdout);
            else if (c == '\t') fputs("\\t", stdout);
            else if (c == '\r') fputs("\\r", stdout);
            else if (c == '\\') fputs("\\\\", stdout);
            else if (c < 0x20 || c == 0x7F) printf("\\x%02X", c);
            else putchar((int)c);
            i++;
        }
    }
}

int zr_cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *prompt = NULL, *file = NULL;
    bool ids_only = false, special = false, no_bos = false;
    enum { OPT_MODEL = 1, OPT_PROMPT, OPT_FILE, OPT_IDS, OPT_PIECES, OPT_SPECIAL, OPT_NO_BOS, OPT_HELP };
    static const ZrOpt opts[] = {
        {OPT_MODEL, "-m|--model", ZR_OPT_VALUE, NULL}, {OPT_PROMPT, "-p|--prompt", ZR_OPT_VALUE, NULL},
        {OPT_FILE, "-f|--file", ZR_OPT_VALUE, NULL},   {OPT_IDS, "--ids", ZR_OPT_FLAG, NULL},
        {OPT_PIECES, "--pieces", ZR_OPT_FLAG, NULL},   {OPT_SPECIAL, "--special", ZR_OPT_FLAG, NULL},
        {OPT_NO_BOS, "--no-bos", ZR_OPT_FLAG, NULL},   {OPT_HELP, "-h|--help", ZR_OPT_FLAG, NULL},
        {0, NULL, 0, NULL},
    };
    ZrOptReader rd;
    zr_opt_init(&rd, argc, argv);
    for (;;) {
        const char *v;
        ZrError e;
        int id = zr_opt_next(&rd, opts, &v, &e);
        if (id == ZR_OPT_END) break;
        if (id == ZR_OPT_ERROR) {
            fprintf(stderr, "zrun tokenize: %s\n%s", e.msg, k_usage);
            return 2;
        }
        switch (id) {
        case ZR_OPT_ARG:
            fprintf(stderr, "zrun tokenize: unexpected argument '%s'\n%s", v, k_usage);
            return 2;
        case OPT_MODEL: model = v; break;
        case OPT_PROMPT: prompt = v; break;
        case OPT_FILE: file = v; break;
        case OPT_IDS: ids_only = true; break;
        case OPT_PIECES: ids_only = false; break;
        case OPT_SPECIAL: special = true; break;
        case OPT_NO_BOS: no_bos = true; break;
        case OPT_HELP: return zr_print_help(k_usage, "tokenize options (zrun tokenize):");
        }
    }
    if (!model || (!prompt && !file) || (prompt && file)) {
        fprintf(stderr, "zrun tokenize: %s\n%s",
                !model ? "-m FILE is required" : prompt && file ? "give -p or -f, not both"
                                                                : "-p TEXT or -f FILE is required",
                k_usage);
        return 2;
    }

    char *text = NULL;
    size_t len = 0;
    if (file || !strcmp(prompt, "-")) {
        FILE *f = file ? fopen(file, "rb") : stdin;
        if (!f) {
            fprintf(stderr, "zrun tokenize: cannot open %s: %m\n", file);
            return 1;
        }
        struct stat st;
        if (file && fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
            fprintf(stderr, "zrun tokenize: %s: is a directory; -f expects a file holding the text\n", file);
            fclose(f);
            return 1;
        }
        text = read_all(f, &len);
        if (file) fclose(f);
        if (!text) {
            fprintf(stderr, "zrun tokenize: cannot read %s: %m\n", file ? file : "standard input");
            return 1;
        }
    }

    ZrError err;
    ZrGguf g;
    ZrTokenizer *t = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    int status = 1;
    if (zr_gguf_open(&g, model, &err)) {
        fprintf(stderr, "zrun tokenize: %s\n", err.msg);
        free(text);
        return 1;
    }
    if (zr_tokenizer_load(&t, &g, &err) ||
        zr_tokenizer_encode(t, text ? text : prompt, text ? len : strlen(prompt), !no_bos, special,
                            &ids, &n, &err)) {
        fprintf(stderr, "zrun tokenize: %s\n", err.msg);
        goto done;
    }
    if (ids_only) {
        for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", (int)ids[i]);
        putchar('\n');
    } else {
        char buf[1024];
        for (size_t i = 0; i < n; i++) {
            size_t k = zr_tokenizer_token_bytes(t, ids[i], true, buf, sizeof buf);
            char *p = buf;
            if (k > sizeof buf && (p = malloc(k))) zr_tokenizer_token_bytes(t, ids[i], true, p, k);
            printf("%6d -> '", (int)ids[i]);
            if (p) print_piece((const unsigned char *)p, k);
            fputs("'\n", stdout);
            if (p != buf) free(p);
        }
    }
    if (fflush(stdout) != 0) {
        fprintf(stderr, "zrun tokenize: cannot write the output: %m\n");
        goto done;
    }
    status = 0;
done:
    free(ids);
    free(text);
    zr_tokenizer_free(t);
    zr_gguf_close(&g);
    return status;
}
