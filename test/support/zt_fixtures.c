#include "zt_fixtures.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zt.h"

static int by_name(const void *a, const void *b) { return strcmp(((const ZtFixture *)a)->name, ((const ZtFixture *)b)->name); }

int zt_fixtures(ZtFixture *out, int cap) {
    const char *dir = zt_shared_model("fixtures");
    if (!dir) return 0;
    char dirpath[2048];
    snprintf(dirpath, sizeof dirpath, "%s", dir);
    DIR *d = opendir(dirpath);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    const char *suffix = ".exact.f32";
    while ((e = readdir(d)) && n < cap) {
        size_t len = strlen(e->d_name), sl = strlen(suffix);
        if (len <= sl || strcmp(e->d_name + len - sl, suffix) || len - sl >= sizeof out[n].name) continue;
        ZtFixture *f = &out[n];
        memcpy(f->name, e->d_name, len - sl);
        f->name[len - sl] = 0;
        snprintf(f->base, sizeof f->base, "%s/%s", dirpath, f->name);
        snprintf(f->gguf, sizeof f->gguf, "%s/%s.gguf", dirpath, f->name);
        /* the F32 stories model is not duplicated in fixtures/ (its README says so) */
        if (access(f->gguf, R_OK) != 0) snprintf(f->gguf, sizeof f->gguf, "%s/../models/stories260K.gguf", dirpath);
        n++;
    }
    closedir(d);
    if (!n) zt_skip("no NAME.exact.f32 in ../shared/fixtures");
    qsort(out, (size_t)n, sizeof *out, by_name);
    return n;
}

int32_t *zt_read_ids(const char *path, int *n) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    int cap = 64, count = 0;
    int32_t *v = malloc(sizeof *v * cap);
    int id;
    while (v && fscanf(f, "%d", &id) == 1) {
        if (count == cap) v = realloc(v, sizeof *v * (cap *= 2));
        if (v) v[count++] = id;
    }
    fclose(f);
    *n = count;
    return v;
}

float *zt_read_f32(const char *path, size_t *n) {
    size_t len;
    float *v = zt_read_file(path, &len);
    if (v) *n = len / sizeof(float);
    return v;
}

int zt_argmax(const float *v, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

float zt_top2_gap(const float *v, int n) {
    int best = zt_argmax(v, n);
    float second = -INFINITY;
    for (int i = 0; i < n; i++)
        if (i != best && v[i] > second) second = v[i];
    return v[best] - second;
}

ZtLogitsDiff zt_compare_logits(const float *a, const float *ref, int n_rows, int n_vocab) {
    ZtLogitsDiff d = {0, 0, 0};
    for (int r = 0; r < n_rows; r++) {
        const float *x = a + (size_t)r * n_vocab, *y = ref + (size_t)r * n_vocab;
        double mean = 0, var = 0, worst = 0;
        for (int i = 0; i < n_vocab; i++) mean += y[i];
        mean /= n_vocab;
        for (int i = 0; i < n_vocab; i++) var += (y[i] - mean) * (y[i] - mean);
        double sd = sqrt(var / n_vocab);
        for (int i = 0; i < n_vocab; i++) {
            double diff = fabs((double)x[i] - y[i]);
            if (isnan(diff)) diff = INFINITY;
            if (diff > worst) worst = diff;
        }
        if (worst / sd > d.worst_rel) d.worst_rel = worst / sd;
        if (worst > d.worst_abs) d.worst_abs = worst;
        d.argmax_equal += zt_argmax(x, n_vocab) == zt_argmax(y, n_vocab);
    }
    return d;
}
