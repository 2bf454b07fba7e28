/* Weight formats against the fixtures in ../shared/fixtures (see its README): every tensor of
 * every file dequantizes to finite values with the documented statistics, and the same tensor
 * quantized to different types by llama.cpp (all from one F32 base) dequantizes to values that
 * agree within each type's quantization error. A wrong block layout scrambles values and shows
 * up as a disagreement of the order of the values themselves (relative RMS ~1.4), far above
 * any type's error. Skips when ../shared is absent. */
#include <stdint.h>

#include "gguf.h"
#include "quant.h"
#include "zt.h"

typedef struct Tensor {
    float *v;   /* (n) dequantized values, row-major */
    int64_t n;  /* elements */
    int64_t ne0; /* row length */
    uint32_t type;
} Tensor;

static int64_t n_elems(const ZrGgufTensor *t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }

static bool load(const ZrGguf *g, const ZrGgufTensor *t, Tensor *out) {
    out->n = n_elems(t);
    out->ne0 = t->ne[0];
    out->type = t->type;
    out->v = malloc(sizeof(float) * (size_t)out->n);
    if (!out->v) return false;
    size_t rb = zr_row_bytes(t->type, t->ne[0]);
    for (int64_t r = 0; r < out->n / t->ne[0]; r++)
        zr_dequant_row(t->type, (const uint8_t *)t->data + (size_t)r * rb, out->v + r * t->ne[0], t->ne[0]);
    (void)g;
    return true;
}

static bool name_is(const ZrGgufTensor *t, const char *s) {
    return t->name.len == strlen(s) && memcmp(t->name.ptr, s, t->name.len) == 0;
}

static bool name_ends(const ZrGgufTensor *t, const char *suffix) {
    size_t k = strlen(suffix);
    return t->name.len >= k && memcmp(t->name.ptr + t->name.len - k, suffix, k) == 0;
}

static const char *fixture_path(const char *model) {
    char rel[256];
    if (strcmp(model, "stories260K-F32") == 0) snprintf(rel, sizeof rel, "models/stories260K.gguf");
    else snprintf(rel, sizeof rel, "fixtures/%s.gguf", model);
    return zt_shared(rel);
}

static bool open_model(const char *model, ZrGguf *g) {
    const char *p = fixture_path(model);
    if (!p) return false;
    ZrError e;
    if (zr_gguf_open(g, p, &e) != ZR_OK) {
        fprintf(stderr, "  %s: %s\n", p, e.msg);
        return false;
    }
    return true;
}

static const char *all_models[] = {
    "llama-F16", "llama-BF16", "llama-Q8_0", "llama-Q4_0", "llama-Q4_1", "llama-Q5_0", "llama-Q5_1",
    "llama-Q2_K", "llama-Q3_K_M", "llama-Q4_K_M", "llama-Q5_K_M", "llama-Q6_K", "llama3-Q8_0",
    "llama3-Q4_K_M", "qwen2-Q8_0", "qwen2-Q4_K_M", "qwen3-Q6_K", "qwen3-Q4_K_M", "stories260K-F32",
    "stories260K-Q8_0", "stories260K-Q4_K_M",
};
#define N_MODELS (sizeof all_models / sizeof all_models[0])

/* Relative RMS quantization error allowed per type, against a reference within ~2e-4
 * (the F16 file). llama.cpp's files measure (worst tensor): bf16 0.0017, q8_0 0.0054,
 * q4_0 0.086, q4_1 0.079, q5_0 0.043, q5_1 0.038, q2_K 0.297, q3_K 0.151, q4_K 0.072,
 * q5_K 0.036, q6_K 0.018; the bounds leave ~25% on top. */
static double type_bound(uint32_t type) {
    switch (type) {
    case ZR_TYPE_F32: return 0;
    case ZR_TYPE_F16: return 4e-4;
    case ZR_TYPE_BF16: return 0.003;
    case ZR_TYPE_Q8_0: return 0.008;
    case ZR_TYPE_Q4_0: return 0.11;
    case ZR_TYPE_Q4_1: return 0.10;
    case ZR_TYPE_Q5_0: return 0.055;
    case ZR_TYPE_Q5_1: return 0.05;
    case ZR_TYPE_Q2_K: return 0.36;
    case ZR_TYPE_Q3_K: return 0.19;
    case ZR_TYPE_Q4_K: return 0.09;
    case ZR_TYPE_Q5_K: return 0.046;
    case ZR_TYPE_Q6_K: return 0.023;
    default: return 0;
    }
}

/* The README's generating standard deviation of a random model's tensor; 0 where none. */
static double expected_std(const char *model, const ZrGgufTensor *t, double *mean) {
    bool tied = strncmp(model, "llama3", 6) == 0 || strncmp(model, "qwen3", 5) == 0;
    *mean = 0;
    if (strncmp(model, "stories", 7) == 0 || name_is(t, "rope_freqs.weight")) return 0;
    if (name_ends(t, "_norm.weight")) {
        *mean = 1;
        return 0.1;
    }
    if (name_ends(t, ".bias")) return 0.2;
    if (name_is(t, "token_embd.weight")) return tied ? 0.25 : 0.5;
    if (name_is(t, "output.weight")) return 0.25;
    if (name_ends(t, "attn_output.weight") || name_ends(t, "ffn_down.weight")) return tied ? 0.25 : 0.05;
    return 0.05; /* q, k, v, gate, up */
}

ZT_TEST(every_fixture_tensor_dequantizes_to_finite_values_with_the_readme_statistics) {
    int files = 0, checked = 0;
    for (size_t m = 0; m < N_MODELS; m++) {
        ZrGguf g;
        if (!open_model(all_models[m], &g)) continue;
        files++;
        for (uint64_t k = 0; k < g.n_tensors; k++) {
            const ZrGgufTensor *t = &g.tensors[k];
            const ZrTypeInfo *ti = zr_type_info(t->type);
            ZT_CHECKF(ti && ti->compute, "%s: %.*s: type %u", all_models[m], (int)t->name.len, t->name.ptr, t->type);
            Tensor x;
            ZT_CHECK(load(&g, t, &x));
            double s1 = 0, s2 = 0;
            bool finite = true;
            for (int64_t i = 0; i < x.n; i++) {
                finite = finite && isfinite(x.v[i]);
                s1 += x.v[i];
                s2 += (double)x.v[i] * x.v[i];
            }
            free(x.v);
            ZT_CHECKF(finite, "%s: %.*s has non-finite values", all_models[m], (int)t->name.len, t->name.ptr);
            double want_mean, want_std = expected_std(all_models[m], t, &want_mean);
            if (want_std == 0) continue;
            double mean = s1 / (double)x.n, sd = sqrt(s2 / (double)x.n - mean * mean);
            /* sampling error of n draws (4 sigma) plus the type's quantization error */
            double q = type_bound(t->type);
            double tol_mean = 4 * want_std / sqrt((double)x.n) + 0.02 * want_std;
            double tol_sd = 4 * want_std / sqrt(2.0 * (double)x.n) + (sqrt(1 + q * q) - 1) * want_std + 0.01 * want_std;
            ZT_CHECKF(fabs(mean - want_mean) <= tol_mean, "%s: %.*s (%s): mean %g, want %g +- %g", all_models[m],
                      (int)t->name.len, t->name.ptr, zr_type_name(t->type), mean, want_mean, tol_mean);
            ZT_CHECKF(fabs(sd - want_std) <= tol_sd, "%s: %.*s (%s): std %g, want %g +- %g", all_models[m],
                      (int)t->name.len, t->name.ptr, zr_type_name(t->type), sd, want_std, tol_sd);
            checked++;
        }
        zr_gguf_close(&g);
    }
    if (files == 0) {
        zt_skip("no fixtures");
        return;
    }
    fprintf(stderr, "  %d files, %d tensors' statistics checked\n", files, checked);
    ZT_CHECK(files == (int)N_MODELS);
}

/* worst relative RMS difference seen per tensor type, for the report */
typedef struct Worst {
    double rel[ZR_TYPE_COUNT];
    double max_abs[ZR_TYPE_COUNT];
} Worst;

/* Compares every tensor of `model` with the same tensor of `ref`: relative RMS difference
 * within the combined bound of the two types. */
static bool compare_models(const char *model, const char *ref, Worst *w, int *compared) {
    ZrGguf a, b;
    if (!open_model(model, &a)) return false;
    if (!open_model(ref, &b)) {
        zr_gguf_close(&a);
        return false;
    }
    bool ok = true;
    for (uint64_t k = 0; k < a.n_tensors && ok; k++) {
        const ZrGgufTensor *ta = &a.tensors[k];
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)ta->name.len, ta->name.ptr);
        const ZrGgufTensor *tb = zr_gguf_tensor(&b, name);
        if (!tb || n_elems(ta) != n_elems(tb) || ta->ne[0] != tb->ne[0]) {
            fprintf(stderr, "  %s: tensor %s missing or shaped differently in %s\n", model, name, ref);
            ok = false;
            break;
        }
        Tensor x, y;
        if (!load(&a, ta, &x) || !load(&b, tb, &y)) {
            ok = false;
            break;
        }
        double e2 = 0, r2 = 0, mx = 0;
        for (int64_t i = 0; i < x.n; i++) {
            double d = (double)x.v[i] - y.v[i];
            e2 += d * d;
            r2 += (double)y.v[i] * y.v[i];
            if (fabs(d) > mx) mx = fabs(d);
        }
        free(x.v);
        free(y.v);
        double rel = r2 > 0 ? sqrt(e2 / r2) : sqrt(e2);
        double ba = type_bound(ta->type), bb = type_bound(tb->type), bound = sqrt(ba * ba + bb * bb);
        if (ta->type == tb->type && ta->type == ZR_TYPE_F32) bound = 0; /* the norms: copied, never requantized */
        if (ta->type != tb->type || ta->type != ZR_TYPE_F32) {
            if (rel > w->rel[ta->type]) w->rel[ta->type] = rel;
            if (mx > w->max_abs[ta->type]) w->max_abs[ta->type] = mx;
        }
        if (!(rel <= bound)) {
            fprintf(stderr, "  %s vs %s: %s (%s vs %s): relative RMS difference %.5f > %.5f\n", model, ref, name,
                    zr_type_name(ta->type), zr_type_name(tb->type), rel, bound);
            ok = false;
        }
        (*compared)++;
    }
    zr_gguf_close(&a);
    zr_gguf_close(&b);
    return ok;
}

ZT_TEST(same_tensor_across_types_agrees_within_the_quantization_error) {
    static const char *pairs[][2] = {
        /* the llama base (seed 91) in every type, against its F16 file */
        {"llama-BF16", "llama-F16"},     {"llama-Q8_0", "llama-F16"},     {"llama-Q4_0", "llama-F16"},
        {"llama-Q4_1", "llama-F16"},     {"llama-Q5_0", "llama-F16"},     {"llama-Q5_1", "llama-F16"},
        {"llama-Q2_K", "llama-F16"},     {"llama-Q3_K_M", "llama-F16"},   {"llama-Q4_K_M", "llama-F16"},
        {"llama-Q5_K_M", "llama-F16"},   {"llama-Q6_K", "llama-F16"},
        /* the other bases against their finest file */
        {"llama3-Q4_K_M", "llama3-Q8_0"}, {"qwen2-Q4_K_M", "qwen2-Q8_0"}, {"qwen3-Q4_K_M", "qwen3-Q6_K"},
        /* the real model: its F32 original against both quantized files */
        {"stories260K-Q8_0", "stories260K-F32"}, {"stories260K-Q4_K_M", "stories260K-F32"},
    };
    Worst w;
    memset(&w, 0, sizeof w);
    int compared = 0, pairs_done = 0;
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        if (!fixture_path(pairs[i][0]) || !fixture_path(pairs[i][1])) continue;
        ZT_CHECKF(compare_models(pairs[i][0], pairs[i][1], &w, &compared), "%s vs %s", pairs[i][0], pairs[i][1]);
        pairs_done++;
    }
    if (pairs_done == 0) {
        zt_skip("no fixtures");
        return;
    }
    fprintf(stderr, "  %d tensors in %d file pairs; worst per type (relative RMS, max abs difference):\n", compared,
            pairs_done);
    for (uint32_t t = 0; t < ZR_TYPE_COUNT; t++)
        if (w.rel[t] > 0) fprintf(stderr, "    %-5s %.5f  %.3g\n", zr_type_name(t), w.rel[t], w.max_abs[t]);
    ZT_CHECK(pairs_done == (int)(sizeof pairs / sizeof pairs[0]));
}

ZT_TEST(dot_matches_dequantization_on_every_fixture_tensor) {
    int files = 0;
    float *x = NULL;
    for (size_t m = 0; m < N_MODELS; m++) {
        ZrGguf g;
        if (!open_model(all_models[m], &g)) continue;
        files++;
        for (uint64_t k = 0; k < g.n_tensors; k++) {
            const ZrGgufTensor *t = &g.tensors[k];
            Tensor w;
            ZT_CHECK(load(&g, t, &w));
            float *nx = realloc(x, sizeof(float) * (size_t)w.ne0);
            ZT_CHECK(nx != NULL);
            x = nx;
            for (int64_t i = 0; i < w.ne0; i++) x[i] = (float)((i * 37) % 19) / 9.0f - 1.0f;
            size_t rb = zr_row_bytes(t->type, w.ne0);
            int64_t rows = w.n / w.ne0;
            for (int64_t r = 0; r < rows; r += rows > 4 ? rows / 4 : 1) {
                double ref = 0, mag = 0;
                for (int64_t i = 0; i < w.ne0; i++) {
                    ref += (double)w.v[r * w.ne0 + i] * x[i];
                    mag += fabs((double)w.v[r * w.ne0 + i] * x[i]);
                }
                float got = zr_dot_row(t->type, (const uint8_t *)t->data + (size_t)r * rb, x, w.ne0);
                ZT_CHECKF(fabs(got - ref) <= 1e-5 * mag + 1e-30, "%s: %.*s row %lld: %g vs %g", all_models[m],
                          (int)t->name.len, t->name.ptr, (long long)r, (double)got, ref);
            }
            free(w.v);
        }
        zr_gguf_close(&g);
    }
    free(x);
    if (files == 0) {
        zt_skip("no fixtures");
        return;
    }
    ZT_CHECKF(files == (int)N_MODELS, "%d of the %d fixtures opened", files, (int)N_MODELS);
}

int main(void) { return zt_run(); }
