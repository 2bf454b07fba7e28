#include "cuda/graph_dot.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads a whole file into a NUL-terminated buffer (NULL on failure). */
static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *text = NULL;
    size_t n = 0, cap = 0, got;
    do {
        if (n + 1 == cap || !cap) {
            cap = cap ? cap * 2 : 65536;
            char *t = realloc(text, cap);
            if (!t) {
                free(text);
                fclose(f);
                return NULL;
            }
            text = t;
        }
        got = fread(text + n, 1, cap - n - 1, f);
        n += got;
    } while (got);
    fclose(f);
    text[n] = 0;
    *len = n;
    return text;
}

int zr_graph_dot_dash_edges(const char *path, ZrError *err) {
    size_t len = 0;
    char *text = read_all(path, &len);
    if (!text) return zr_err(err, ZR_E_IO, "--graph-dot: %s: cannot read it back: %s", path, strerror(errno));
    size_t n_lines = 1;
    for (size_t i = 0; i < len; i++) n_lines += text[i] == '\n';
    static const char attr[] = " style=\"dashed\"", list[] = " [style=\"dashed\"]";
    char *out = malloc(len + n_lines * sizeof list + 1);
    if (!out) {
        free(text);
        return zr_err(err, ZR_E_NOMEM, "--graph-dot: no memory to rewrite %s", path);
    }
    size_t o = 0;
    for (char *line = text; *line;) {
        char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) + 1 : strlen(line);
        size_t semi = n; /* the statement's ';', searched from the end */
        while (semi > 0 && line[semi - 1] != ';') semi--;
        char *arrow = strstr(line, "\" -> \"");
        if (line[0] == '"' && semi > 0 && arrow && arrow < line + semi) {
            size_t head = semi - 1; /* line[head] == ';' */
            const bool has_list = head > 0 && line[head - 1] == ']';
            if (has_list) head--;
            memcpy(out + o, line, head);
            o += head;
            const char *add = has_list ? attr : list;
            size_t add_len = has_list ? sizeof attr - 1 : sizeof list - 1;
            memcpy(out + o, add, add_len);
            o += add_len;
            memcpy(out + o, line + head, n - head);
            o += n - head;
        } else {
            memcpy(out + o, line, n);
            o += n;
        }
        line += n;
    }
    free(text);
    int rc = ZR_OK;
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(out, 1, o, f) != o) rc = zr_err(err, ZR_E_IO, "--graph-dot: %s: cannot write it: %s", path, strerror(errno));
    if (f && fclose(f) && !rc) rc = zr_err(err, ZR_E_IO, "--graph-dot: %s: cannot write it: %s", path, strerror(errno));
    free(out);
    return rc;
}
