/* zrun-llama2c: the llama2.c checkpoints of ../shared/models, converted at test time into the
 * build directory, load as GGUF models and give their reference greedy ids from BOS; bad
 * inputs are refused with the file named. */
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "backend.h"
#include "gguf.h"
#include "model.h"
#include "zt.h"
#include "zt_proc.h"

/* Runs the converter; returns its exit status (-1 if it did not run). stderr goes to errfile. */
static int convert(const char *model, const char *tok, const char *out, const char *errfile) {
    const char *tool = getenv("ZRUN_LLAMA2C");
    if (!tool) return -1;
    char cmd[20000];
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' '%s' 2>'%s'", tool, model, tok, out, errfile);
    ZtProc p = zt_proc_sh(cmd, NULL);
    zt_proc_free(&p);
    return p.status;
}

/* Converts shared models/<bin> + models/<tok> into the scratch dir; NULL (skipped) if absent. */
static const char *converted(const char *bin, const char *tok) {
    static char out[8][4096];
    static int slot;
    const char *mp = zt_shared_model(bin), *tp = zt_shared_model(tok);
    if (!mp || !tp) return NULL;
    char *o = out[slot++ % 8];
    snprintf(o, 4096, "%s/%s.gguf", zt_tmpdir(), strrchr(bin, '/') + 1);
    char errfile[4200];
    snprintf(errfile, sizeof errfile, "%s.err", o);
    int rc = convert(mp, tp, o, errfile);
    if (rc != 0) {
        char *e = zt_read_file(errfile, NULL);
        fprintf(stderr, "  zrun-llama2c exited %d: %s\n", rc, e ? e : "");
        free(e);
        return "";
    }
    return o;
}

/* Greedy decoding from BOS alone on the CPU backend: ids[0..n) and the first 5 logits. */
static int greedy(const char *path, int n, int32_t *ids, float first[5]) {
    ZrModel m;
    ZrError err;
    if (zr_model_load(&m, path, &err)) {
        fprintf(stderr, "  %s\n", err.msg);
        return -1;
    }
    ZrBackendOptions o = {.n_ctx = n + 1, .n_threads = 2, .graph = 0, .verify_graph = 0, .quiet = true};
    ZrBackend *be = zr_cpu_backend_create(&m, &o, &err);
    if (!be) {
        fprintf(stderr, "  %s\n", err.msg);
        zr_model_free(&m);
        return -1;
    }
    const int nv = m.hp.n_vocab;
    float *logits = malloc((size_t)nv * sizeof *logits); /* [n_vocab] */
    int32_t tok = 1;
    int rc = 0;
    for (int i = 0; i < n && logits; i++) {
        if (be->forward(be, &tok, 1, i, logits, false, &err)) {
            fprintf(stderr, "  %s\n", err.msg);
            rc = -1;
            break;
        }
        if (i == 0) memcpy(first, logits, 5 * sizeof *first);
        int best = 0;
        for (int v = 1; v < nv; v++)
            if (logits[v] > logits[best]) best = v;
        ids[i] = tok = best;
    }
    free(logits);
    be->destroy(be);
    zr_model_free(&m);
    return logits ? rc : -1;
}

static int check_greedy(const char *gguf, const int32_t *want, int n, const float *want_logits) {
    int32_t got[64];
    float first[5];
    if (greedy(gguf, n, got, first)) return 0;
    for (int i = 0; i < 5; i++)
        if (fabsf(first[i] - want_logits[i]) > 1e-4f) {
            fprintf(stderr, "  first logit %d: %.6f, reference %.5f\n", i, first[i], want_logits[i]);
            return 0;
        }
    for (int i = 0; i < n; i++)
        if (got[i] != want[i]) {
            fprintf(stderr, "  id %d: %d, reference %d\n", i, got[i], want[i]);
            return 0;
        }
    return 1;
}

/* The reference ids of ../shared/models/README.md (numpy, float64). */
static const int32_t stories_ids[60] = {
    403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337,
    410, 408, 419, 292, 411, 322, 265, 282, 295, 433, 426, 385, 328, 432, 358, 394, 261, 370, 432, 352,
    266, 268, 388, 426, 338, 391, 266, 267, 337, 335, 312, 432, 398, 312, 286, 267, 414, 270, 333, 415};
static const int32_t salty_ids[32] = {403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338,
                                      401, 396, 267, 337, 410, 408, 419, 292, 411, 269, 280, 314, 411, 267, 337, 335};
static const int32_t aidreams_ids[32] = {319, 459, 355, 260, 275, 429, 339, 315, 374, 327, 446, 262, 421, 392, 275, 280,
                                         269, 440, 270, 283, 446, 299, 303, 266, 358, 430, 312, 379, 441, 260, 446, 262};

ZT_TEST(stories260K_bin_converts_and_gives_the_reference_greedy_ids) {
    const char *g = converted("models/stories260K.bin", "models/tok512.bin");
    if (!g) return;
    ZT_CHECK(*g);
    /* the README's numpy run covered 32 tokens of the .bin; its arrays equal the GGUF's, so
     * the 60 ids of the GGUF run must follow as well */
    ZT_CHECK(check_greedy(g, stories_ids, 60, (const float[]){-6.22291f, 8.40434f, -6.22374f, -6.22254f, -6.22195f}));
}

ZT_TEST(saltyduckegg_converts_and_gives_the_reference_greedy_ids) {
    const char *g = converted("models/saltyduckegg_model.bin", "models/tok512.bin");
    if (!g) return;
    ZT_CHECK(*g);
    ZT_CHECK(check_greedy(g, salty_ids, 32, (const float[]){-0.89652f, 5.17432f, -0.87654f, -0.87952f, -0.84349f}));
}

ZT_TEST(aidreams260K_converts_and_gives_the_reference_greedy_ids) {
    const char *g = converted("models/aidreams260K.bin", "models/aidreams_tok512.bin");
    if (!g) return;
    ZT_CHECK(*g);
    ZT_CHECK(check_greedy(g, aidreams_ids, 32, (const float[]){0.44083f, 3.98911f, 0.97526f, 0.54860f, 1.01630f}));
}

ZT_TEST(converted_stories260K_equals_the_published_gguf) {
    /* Same vocabulary (text, scores, types) and bit-identical tensors: no permutation. */
    const char *ref = zt_shared_model("models/stories260K.gguf");
    const char *g = converted("models/stories260K.bin", "models/tok512.bin");
    if (!ref || !g) return;
    ZT_CHECK(*g);
    ZrGguf a, b;
    ZrError err;
    ZT_CHECKF(zr_gguf_open(&a, g, &err) == 0, "%s", err.msg);
    ZT_CHECKF(zr_gguf_open(&b, ref, &err) == 0, "%s", err.msg);
    static const char *const arrays[] = {"tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"};
    int same = 1;
    for (int i = 0; i < 3; i++) {
        const ZrGgufKv *ka = zr_gguf_find(&a, arrays[i]), *kb = zr_gguf_find(&b, arrays[i]);
        if (!ka || !kb || ka->n != kb->n || ka->value_bytes != kb->value_bytes ||
            memcmp(ka->value, kb->value, (size_t)ka->value_bytes)) {
            fprintf(stderr, "  %s differs\n", arrays[i]);
            same = 0;
        }
    }
    int tensors = 0;
    for (uint64_t i = 0; i < b.n_tensors; i++) {
        const ZrGgufTensor *tb = &b.tensors[i];
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)tb->name.len, tb->name.ptr);
        const ZrGgufTensor *ta = zr_gguf_tensor(&a, name);
        if (!ta) {
            /* the published file stores the shared classifier again as output.weight */
            if (strcmp(name, "output.weight")) { fprintf(stderr, "  %s missing\n", name); same = 0; }
            continue;
        }
        if (ta->nbytes != tb->nbytes || memcmp(ta->data, tb->data, (size_t)ta->nbytes)) {
            fprintf(stderr, "  %s differs\n", name);
            same = 0;
        }
        tensors++;
    }
    ZT_CHECK(a.n_tensors == b.n_tensors - 1);
    zr_gguf_close(&a);
    zr_gguf_close(&b);
    ZT_CHECK(same && tensors == 47);
}

/* Writes len bytes of src (or all when len < 0) to a scratch file. */
static const char *scratch_copy(const char *src, const char *name, long len) {
    static char path[4][4096];
    static int slot;
    char *p = path[slot++ % 4];
    snprintf(p, 4096, "%s/%s", zt_tmpdir(), name);
    size_t n;
    char *data = zt_read_file(src, &n);
    if (!data) return NULL;
    FILE *f = fopen(p, "wb");
    if (!f) { free(data); return NULL; }
    fwrite(data, 1, len < 0 ? n : (size_t)len, f);
    fclose(f);
    free(data);
    return p;
}

static int refused_with(const char *model, const char *tok, const char *want) {
    char out[4200], errfile[4200];
    snprintf(out, sizeof out, "%s/refused.gguf", zt_tmpdir());
    snprintf(errfile, sizeof errfile, "%s/refused.err", zt_tmpdir());
    int rc = convert(model, tok, out, errfile);
    char *e = zt_read_file(errfile, NULL);
    int ok = rc == 1 && e && strstr(e, want);
    if (!ok) fprintf(stderr, "  exit %d, stderr '%s', wanted '%s'\n", rc, e ? e : "", want);
    free(e);
    FILE *f = fopen(out, "rb");
    if (f) { fclose(f); fprintf(stderr, "  output written despite the error\n"); ok = 0; }
    return ok;
}

ZT_TEST(bad_inputs_are_refused_naming_the_file_and_field) {
    const char *bin = zt_shared_model("models/stories260K.bin"), *tok = zt_shared_model("models/tok512.bin");
    if (!bin || !tok) return;
    if (!getenv("ZRUN_LLAMA2C")) { zt_skip("ZRUN_LLAMA2C not set"); return; }
    const char *trunc = scratch_copy(bin, "truncated.bin", 1000000);
    const char *short_tok = scratch_copy(tok, "short_tok.bin", 3000);
    ZT_CHECK(trunc && short_tok);
    ZT_CHECK(refused_with(trunc, tok, "truncated.bin: size: expected 1056540 bytes"));
    ZT_CHECK(refused_with(bin, short_tok, "short_tok.bin: token"));
    ZT_CHECK(refused_with("/nonexistent/model.bin", tok, "/nonexistent/model.bin: cannot open"));
    ZT_CHECK(refused_with(tok, tok, "tok512.bin: header field hidden_dim")); /* a tokenizer is no checkpoint */
}

int main(void) { return zt_run(); }
