/* zrun eval, run as the user runs it: logits files, device selection, exit codes, messages. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zt_fixtures.h"
#include "zt.h"
#include "zt_proc.h"

#define EXACT_TOL 3e-5
/* llama.cpp's reference logits were computed with an F32 KV cache: compared with them, eval keeps
 * K and V exact (zrun's default f16 cache rounds them; test_cpu bounds that) */
#define F32_CACHE "-ctk f32 -ctv f32"

static char err_text[8192];

/* Runs `zrun eval ARGS` (stderr captured in err_text); returns the exit status. */
static int run_eval(const char *args) {
    const char *zrun = getenv("ZRUN");
    if (!zrun) zrun = "zrun";
    char cmd[24576];
    snprintf(cmd, sizeof cmd, "'%s' eval %s", zrun, args);
    ZtProc p = zt_proc_sh(cmd, NULL);
    snprintf(err_text, sizeof err_text, "%s", p.err ? p.err : "");
    zt_proc_free(&p);
    return p.status;
}

static const char *out_path(const char *name) {
    static char p[4096];
    snprintf(p, sizeof p, "%s/%s", zt_tmpdir(), name);
    return p;
}

/* out_path returns a static buffer: one path per call site at a time. */

/* A fixture's gguf and tokens file; false (the test is skipped) without ../shared. */
static bool fixture(const char *name, char *gguf, char *tokens) {
    char rel[256];
    snprintf(rel, sizeof rel, "fixtures/%s.gguf", name);
    const char *g = zt_shared_model(rel);
    snprintf(rel, sizeof rel, "fixtures/%s.tokens", name);
    const char *t = zt_shared_model(rel);
    if (!g || !t) return false;
    snprintf(gguf, 4096, "%s", g);
    snprintf(tokens, 4096, "%s", t);
    return true;
}

static double compare_with_exact(const char *name, const char *logits_path, int *argmax_equal, int *rows) {
    char rel[256];
    snprintf(rel, sizeof rel, "fixtures/%s.exact.f32", name);
    size_t n_ref, n_out;
    float *ref = zt_read_f32(zt_shared(rel), &n_ref);
    float *out = zt_read_f32(logits_path, &n_out);
    double worst = 1e30;
    *rows = 0;
    if (ref && out && n_ref == n_out) {
        *rows = (int)(n_ref / 512);
        ZtLogitsDiff d = zt_compare_logits(out, ref, *rows, 512);
        worst = d.worst_rel;
        *argmax_equal = d.argmax_equal;
    }
    free(ref);
    free(out);
    return worst;
}

ZT_TEST(eval_writes_every_position_logits_matching_the_reference) {
    char gguf[4096], tokens[4096], args[16384];
    if (!fixture("llama-Q4_K_M", gguf, tokens)) return;
    const char *out = out_path("q4km.f32");
    snprintf(args, sizeof args, "-m '%s' --tokens '%s' --logits '%s' --device cpu -t 2 " F32_CACHE, gguf, tokens, out);
    ZT_CHECKF(run_eval(args) == 0, "%s", err_text);
    size_t n;
    free(zt_read_f32(out, &n));
    ZT_CHECK(n == 33 * 512);
    int eq, rows;
    double worst = compare_with_exact("llama-Q4_K_M", out, &eq, &rows);
    ZT_CHECKF(worst <= EXACT_TOL && eq == rows && rows == 33, "max|diff|/std %.3g, argmax %d/%d", worst, eq, rows);
}

/* The default cache is f16 (as llama.cpp's): the same bits as -ctk f16 -ctv f16, other bits than
 * f32's but close to llama.cpp's F32-cache reference (max|diff|/std under 1e-2, every argmax). */
ZT_TEST(eval_caches_f16_by_default_and_f32_when_asked) {
    char gguf[4096], tokens[4096], args[16384], dflt[4200], f16[4200], f32[4200];
    if (!fixture("llama-Q4_K_M", gguf, tokens)) return;
    snprintf(dflt, sizeof dflt, "%s", out_path("kv_default.f32"));
    snprintf(f16, sizeof f16, "%s", out_path("kv_f16.f32"));
    snprintf(f32, sizeof f32, "%s", out_path("kv_f32.f32"));
    snprintf(args, sizeof args, "-m '%s' --tokens '%s' --logits '%s' --device cpu -t 2", gguf, tokens, dflt);
    ZT_CHECKF(run_eval(args) == 0, "%s", err_text);
    snprintf(args, sizeof args, "-m '%s' --tokens '%s' --logits '%s' --device cpu -t 2 -ctk f16 -ctv f16", gguf, tokens, f16);
    ZT_CHECKF(run_eval(args) == 0, "%s", err_text);
    snprintf(args, sizeof args, "-m '%s' --tokens '%s' --logits '%s' --device cpu -t 2 --cache-type-k f32", gguf, tokens, f32);
    ZT_CHECKF(run_eval(args) == 0, "%s", err_text);
    size_t na, nb, nc;
    float *a = zt_read_f32(dflt, &na), *b = zt_read_f32(f16, &nb), *c = zt_read_f32(f32, &nc);
    ZT_CHECK(a && b && c && na == 33 * 512 && nb == na && nc == na);
    if (a && b && c && nb == na && nc == na) {
        ZT_CHECK(!memcmp(a, b, na * sizeof(float)));
        ZT_CHECK(memcmp(a, c, na * sizeof(float)) != 0);
    }
    free(a);
    free(b);
    free(c);
    int eq, rows;
    const double worst = compare_with_exact("llama-Q4_K_M", dflt, &eq, &rows);
    ZT_CHECKF(worst <= 1e-2 && eq == rows && rows == 33, "max|diff|/std %.3g, argmax %d/%d", worst, eq, rows);
    ZT_CHECKF(compare_with_exact("llama-Q4_K_M", f32, &eq, &rows) <= EXACT_TOL, "-ctk f32 alone keeps V f32 too");
}

ZT_TEST(eval_logits_dash_writes_standard_output) {
    char gguf[4096], tokens[4096], cmd[16384];
    if (!fixture("llama-Q4_K_M", gguf, tokens)) return;
    char file[4200], piped[4200];
    snprintf(file, sizeof file, "%s", out_path("dash_file.f32"));
    snprintf(piped, sizeof piped, "%s", out_path("dash_stdout.f32"));
    snprintf(cmd, sizeof cmd, "-m '%s' --tokens '%s' --logits '%s' --device cpu -t 2", gguf, tokens, file);
    ZT_CHECKF(run_eval(cmd) == 0, "%s", err_text);
    snprintf(cmd, sizeof cmd, "-m '%s' --tokens '%s' --logits - --device cpu -t 2 > '%s'", gguf, tokens, piped);
    ZT_CHECKF(run_eval(cmd) == 0, "%s", err_text);
    ZT_CHECKF(strstr(err_text, "-> standard output"), "%s", err_text);
    size_t a, b;
    float *fa = zt_read_f32(file, &a), *fb = zt_read_f32(piped, &b);
    ZT_CHECK(fa && fb && a == 33 * 512 && a == b && !memcmp(fa, fb, a * sizeof(float)));
    free(fa);
    free(fb);
    char dash[4200];
    snprintf(dash, sizeof dash, "%s/-", zt_tmpdir());
    ZT_CHECK(access(dash, F_OK) != 0); /* no file named '-' */
}

ZT_TEST(eval_device_auto_without_a_gpu_falls_back_to_the_cpu_with_a_note) {
    char gguf[4096], tokens[4096], args[16384];
    if (!fixture("qwen2-Q8_0", gguf, tokens)) return;
    const char *out = out_path("auto.f32");
    snprintf(args, sizeof args, "-m '%s' --tokens '%s' --logits '%s' " F32_CACHE, gguf, tokens, out);
    ZT_CHECKF(run_eval(args) == 0, "%s", err_text);
    if (strstr(err_text, "cpu backend")) ZT_CHECKF(strstr(err_text, "running on the CPU"), "%s", err_text);
    int eq, rows;
    /* on a GPU the logits come from the CUDA backend: its own tolerance is the GPU tests' business */
    if (strstr(err_text, "cpu backend")) {
        double worst = compare_with_exact("qwen2-Q8_0", out, &eq, &rows);
        ZT_CHECKF(worst <= EXACT_TOL && eq == rows, "max|diff|/std %.3g", worst);
    }
}

ZT_TEST(eval_device_cuda_without_a_gpu_fails_with_exit_1_and_says_why) {
    char gguf[4096], tokens[4096], args[16384];
    if (!fixture("stories260K-Q8_0", gguf, tokens)) return;
    snprintf(args, sizeof args, "-m '%s' --tokens '%s' --logits '%s' --device cuda", gguf, tokens, out_path("cuda.f32"));
    int rc = run_eval(args);
    if (rc == 0) {
        ZT_CHECKF(strstr(err_text, "cuda backend"), "%s", err_text);
        return; /* a GPU is usable here */
    }
    ZT_CHECKF(rc == 1, "exit %d: %s", rc, err_text);
    ZT_CHECKF(strstr(err_text, "GPU") || strstr(err_text, "CUDA") || strstr(err_text, "cuda"), "%s", err_text);
    ZT_CHECKF(!strstr(err_text, "running on the CPU"), "%s", err_text);
}

ZT_TEST(eval_context_smaller_than_the_tokens_is_a_runtime_error) {
    char gguf[4096], tokens[4096], args[16384];
    if (!fixture("llama-Q8_0", gguf, tokens)) return;
    const char *out = out_path("short.f32");
    snprintf(args, sizeof args, "-m '%s' --tokens '%s' --logits '%s' --device cpu -c 16", gguf, tokens, out);
    ZT_CHECK(run_eval(args) == 1);
    ZT_CHECKF(strstr(err_text, "context of 16 tokens"), "%s", err_text);
    size_t n;
    float *left = zt_read_f32(out, &n);
    ZT_CHECKF(!left, "a partial logits file was left behind");
}

ZT_TEST(eval_context_beyond_the_machine_memory_is_an_out_of_memory_error_naming_the_bytes) {
    char gguf[4096], tokens[4096], args[16384];
    if (!fixture("llama-Q8_0", gguf, tokens)) return;
    /* terabytes of KV cache: refused before allocating, whatever the overcommit policy */
    snprintf(args, sizeof args, "-m '%s' --tokens '%s' --logits '%s' --device cpu -c 2000000000", gguf, tokens, out_path("huge.f32"));
    ZT_CHECK(run_eval(args) == 1);
    ZT_CHECKF(strstr(err_text, "the KV cache of 2000000000 tokens needs ") && strstr(err_text, " bytes") && strstr(err_text, "use a smaller -c"),
              "%s", err_text);
}

ZT_TEST(eval_token_ids_are_checked) {
    char gguf[4096], tokens[4096], args[16384];
    if (!fixture("llama-Q8_0", gguf, tokens)) return;
    char ids[4096];
    snprintf(ids, sizeof ids, "%s", out_path("bad.tokens"));
    FILE *f = fopen(ids, "w");
    fputs("1 403 9999\n", f);
    fclose(f);
    snprintf(args, sizeof args, "-m '%s' --tokens '%s' --logits '%s' --device cpu", gguf, ids, out_path("bad.f32"));
    ZT_CHECK(run_eval(args) == 1);
    ZT_CHECKF(strstr(err_text, "bad.tokens: token 3: token id 9999 is outside the vocabulary of"), "%s", err_text);

    f = fopen(ids, "w");
    fputs("1 40x3\n", f);
    fclose(f);
    ZT_CHECK(run_eval(args) == 1);
    ZT_CHECKF(strstr(err_text, "bad.tokens") && strstr(err_text, "40x3"), "%s", err_text);

    f = fopen(ids, "w");
    fclose(f);
    ZT_CHECK(run_eval(args) == 1);
    ZT_CHECKF(strstr(err_text, "no token ids"), "%s", err_text);
}

ZT_TEST(eval_token_words_are_read_whole_and_a_nul_byte_is_refused) {
    char gguf[4096], tokens[4096], args[16384];
    if (!fixture("llama-Q8_0", gguf, tokens)) return;
    char ids[4096];
    snprintf(ids, sizeof ids, "%s", out_path("long.tokens"));
    snprintf(args, sizeof args, "-m '%s' --tokens '%s' --logits '%s' --device cpu", gguf, ids, out_path("long.f32"));
    /* 35 digits: "%31s" read them as two ids, 0 and 5 */
    FILE *f = fopen(ids, "w");
    fputs("1 00000000000000000000000000000000005\n", f);
    fclose(f);
    ZT_CHECK(run_eval(args) == 1);
    ZT_CHECKF(strstr(err_text, "long.tokens: token 2: expected a non-negative decimal id") && strstr(err_text, "(too long)"), "%s", err_text);
    f = fopen(ids, "w");
    fwrite("1 2\0 3", 1, 6, f);
    fclose(f);
    ZT_CHECK(run_eval(args) == 1);
    ZT_CHECKF(strstr(err_text, "long.tokens: token 2: expected a non-negative decimal id, found '2?' (with a NUL byte)"), "%s", err_text);
}

ZT_TEST(eval_tokens_from_an_endless_file_end_with_an_error_not_a_hang) {
    char gguf[4096], tokens[4096], cmd[16384];
    if (!fixture("llama-Q8_0", gguf, tokens)) return;
    const char *zrun = getenv("ZRUN");
    snprintf(cmd, sizeof cmd, "timeout 60 '%s' eval -m '%s' --tokens /dev/zero --logits '%s' --device cpu", zrun ? zrun : "zrun",
             gguf, out_path("zero.f32"));
    ZtProc p = zt_proc_sh(cmd, NULL);
    int status = p.status;
    bool said = strstr(p.err, "/dev/zero: token 1: expected a non-negative decimal id") != NULL;
    zt_proc_free(&p);
    ZT_CHECKF(status == 1, "exit status %d (124: still reading after 60 s)", status);
    ZT_CHECK(said);
}

ZT_TEST(eval_usage_errors_exit_2) {
    ZT_CHECK(run_eval("--tokens a --logits b") == 2);
    ZT_CHECKF(strstr(err_text, "-m FILE is required"), "%s", err_text);
    ZT_CHECK(run_eval("-m a --logits b") == 2);
    ZT_CHECK(run_eval("-m a --tokens b") == 2);
    ZT_CHECK(run_eval("-m a --tokens b --logits c --device tpu") == 2);
    ZT_CHECKF(strstr(err_text, "tpu"), "%s", err_text);
    ZT_CHECK(run_eval("-m a --tokens b --logits c -t x") == 2);
    ZT_CHECK(run_eval("-m a --tokens b --logits c --bogus") == 2);
    ZT_CHECK(run_eval("-m a --tokens b --logits c -c") == 2);
    ZT_CHECK(run_eval("-m a --tokens b --logits c -ctk f16 -ctv f32") == 2);
    ZT_CHECKF(strstr(err_text, "-ctk f16 and -ctv f32: zrun keeps K and V in one type"), "%s", err_text);
    ZT_CHECK(run_eval("-m a --tokens b --logits c -ctk q4_0") == 2);
    ZT_CHECKF(strstr(err_text, "-ctk/--cache-type-k q4_0: a llama.cpp cache type zrun does not have"), "%s", err_text);
}

ZT_TEST(eval_missing_model_file_is_a_runtime_error_naming_it) {
    char args[16384];
    char ids[4096];
    snprintf(ids, sizeof ids, "%s", out_path("one.tokens"));
    FILE *f = fopen(ids, "w");
    fputs("1\n", f);
    fclose(f);
    char absent[4096]; /* out_path's buffer is shared: one path per call */
    snprintf(absent, sizeof absent, "%s", out_path("absent.gguf"));
    snprintf(args, sizeof args, "-m '%s' --tokens '%s' --logits '%s' --device cpu", absent, ids, out_path("x.f32"));
    ZT_CHECK(run_eval(args) == 1);
    ZT_CHECKF(strstr(err_text, "absent.gguf"), "%s", err_text);
}

int main(void) { return zt_run(); }
