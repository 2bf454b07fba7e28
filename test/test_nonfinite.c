/* NaN or inf logits stop every command with a message naming the model and the token position,
 * never garbage text with exit 0: stories260K with one weight patched to +inf, -inf or NaN,
 * run as the user runs zrun (sampled and greedy generation, eval, bench), and the scan itself
 * (src/logits_check.h). */
#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "gguf_write.h"
#include "logits_check.h"
#include "zt.h"
#include "zt_proc.h"

/* stories260K.gguf with element `at` of tensor `name` (an f32 one) set to v; the path, or NULL. */
static const char *patched(const char *tag, const char *name, int at, float v) {
    static char path[4200];
    const char *src = zt_shared_model("models/stories260K.gguf");
    if (!src) return NULL;
    ZrGguf g;
    ZrError err;
    if (zr_gguf_open(&g, src, &err)) return NULL;
    const ZrGgufTensor *t = zr_gguf_tensor(&g, name);
    float *copy = t ? malloc(t->nbytes) : NULL;
    if (!copy) {
        zr_gguf_close(&g);
        return NULL;
    }
    memcpy(copy, t->data, t->nbytes);
    copy[at] = v;
    ZrGgufWriter w;
    zr_gguf_w_init(&w);
    for (uint64_t i = 0; i < g.n_kv; i++)
        if (!zr_str_eq(g.kv[i].key, "general.alignment")) zr_gguf_w_copy_kv(&w, &g.kv[i]);
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        const ZrGgufTensor *ti = &g.tensors[i];
        char n[128];
        snprintf(n, sizeof n, "%.*s", (int)ti->name.len, ti->name.ptr);
        zr_gguf_w_tensor(&w, n, ti->type, ti->n_dims, ti->ne, ti == t ? copy : ti->data);
    }
    snprintf(path, sizeof path, "%s/stories260K-%s.gguf", zt_tmpdir(), tag);
    FILE *f = fopen(path, "wb");
    int rc = f ? zr_gguf_w_write(&w, f, &err) : -1;
    if (f) fclose(f);
    zr_gguf_w_free(&w);
    zr_gguf_close(&g);
    free(copy);
    return rc == 0 ? path : NULL;
}

/* Runs zrun with args (NULL-terminated); true when it exits 1 saying where the non-finite
 * logit appeared, with nothing generated on standard output past the prompt. */
static bool stops_naming_the_position(const char *const *args, const char *want_pos) {
    ZtProc p = zt_proc_zrun(NULL, args, NULL);
    bool ok = p.status == 1 && strstr(p.err, "the forward pass at position ") &&
              strstr(p.err, "gave a non-finite logit (") && strstr(p.err, "expected finite weights") &&
              (!want_pos || strstr(p.err, want_pos));
    if (!ok) fprintf(stderr, "  %s: exit %d\n  stderr: %s\n  stdout: %.200s\n", args[0], p.status, p.err, p.out);
    zt_proc_free(&p);
    return ok;
}

#define NEED_ZRUN()                                      \
    do {                                                 \
        if (!getenv("ZRUN")) {                           \
            zt_skip("ZRUN is not set (run through meson test)"); \
            return;                                      \
        }                                                \
    } while (0)

ZT_TEST(scan_finds_the_first_nan_or_inf_and_passes_every_finite_value) {
    static float v[5000];
    for (int i = 0; i < 5000; i++) v[i] = (i % 2 ? -1.0f : 1.0f) * (float)i;
    v[7] = FLT_MAX;
    v[8] = -FLT_MAX;
    v[9] = FLT_MIN / 4; /* subnormal */
    ZT_CHECK(zr_logits_first_nonfinite(v, 5000) == -1);
    ZT_CHECK(zr_logits_first_nonfinite(v, 0) == -1);
    v[4321] = INFINITY;
    ZT_CHECK(zr_logits_first_nonfinite(v, 5000) == 4321);
    ZT_CHECK(zr_logits_first_nonfinite(v, 4321) == -1);
    v[1500] = -INFINITY;
    ZT_CHECK(zr_logits_first_nonfinite(v, 5000) == 1500);
    v[1024] = NAN;
    ZT_CHECK(zr_logits_first_nonfinite(v, 5000) == 1024);
    v[0] = -NAN;
    ZT_CHECK(zr_logits_first_nonfinite(v, 5000) == 0);
}

ZT_TEST(check_names_the_model_the_position_of_the_row_and_the_token) {
    float rows[3][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}, {9, INFINITY, 1, 2}};
    ZrError e;
    ZT_CHECK(zr_logits_check("m.gguf", rows[0], 2, 4, 10, &e) == ZR_OK);
    ZT_CHECK(zr_logits_check("m.gguf", rows[0], 3, 4, 10, &e) == ZR_E_FORMAT);
    ZT_CHECKF(strstr(e.msg, "m.gguf: the forward pass at position 12 gave a non-finite logit (inf at token id 1)"), "%s", e.msg);
}

ZT_TEST(inf_in_the_output_norm_stops_sampled_and_greedy_generation) {
    NEED_ZRUN();
    const char *m = patched("inf-norm", "output_norm.weight", 0, INFINITY);
    if (!m) return;
    const char *sampled[] = {"-m", m, "-p", "Once upon a time", "--device", "cpu", "--seed", "1", NULL};
    ZT_CHECK(stops_naming_the_position(sampled, NULL));
    const char *greedy[] = {"-m", m, "-p", "", "--temp", "0", "-n", "8", "--device", "cpu", NULL};
    ZT_CHECK(stops_naming_the_position(greedy, "position 0 "));
}

ZT_TEST(nan_or_minus_inf_in_a_layer_stops_generation) {
    NEED_ZRUN();
    const char *m = patched("nan-attn-norm", "blk.0.attn_norm.weight", 3, NAN);
    if (!m) return;
    const char *a[] = {"-m", m, "-p", "Once", "--temp", "0", "-n", "4", "--device", "cpu", NULL};
    ZT_CHECK(stops_naming_the_position(a, NULL));
    m = patched("minf-ffn-norm", "blk.4.ffn_norm.weight", 0, -INFINITY);
    if (!m) return;
    const char *b[] = {"-m", m, "-p", "Once", "-n", "4", "--device", "cpu", NULL};
    ZT_CHECK(stops_naming_the_position(b, NULL));
}

ZT_TEST(non_finite_logits_stop_eval_naming_the_position) {
    NEED_ZRUN();
    const char *m = patched("inf-norm", "output_norm.weight", 0, INFINITY);
    if (!m) return;
    char ids[4200], out[4200];
    snprintf(ids, sizeof ids, "%s/nonfinite.tokens", zt_tmpdir());
    snprintf(out, sizeof out, "%s/nonfinite.f32", zt_tmpdir());
    FILE *f = fopen(ids, "w");
    ZT_CHECK(f != NULL);
    fputs("1 403 407 9\n", f);
    fclose(f);
    const char *a[] = {"eval", "-m", m, "--tokens", ids, "--logits", out, "--device", "cpu", NULL};
    ZT_CHECK(stops_naming_the_position(a, "position 0 "));
}

ZT_TEST(non_finite_logits_stop_bench) {
    NEED_ZRUN();
    const char *m = patched("inf-norm", "output_norm.weight", 0, INFINITY);
    if (!m) return;
    const char *pp[] = {"bench", "-m", m, "-p", "8", "-n", "0", "-r", "1", "--device", "cpu", NULL};
    ZT_CHECK(stops_naming_the_position(pp, NULL));
    const char *tg[] = {"bench", "-m", m, "-p", "0", "-n", "4", "-r", "1", "--device", "cpu", NULL};
    ZT_CHECK(stops_naming_the_position(tg, NULL));
}

int main(void) { return zt_run(); }
