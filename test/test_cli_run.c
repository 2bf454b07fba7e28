/* The run command as a user sees it: the zrun binary ($ZRUN) run as a process, its stdout,
 * stderr and exit status. */
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gguf.h"
#include "gguf_write.h"
#include "zt.h"
#include "zt_proc.h"

typedef ZtProc Run;
#define run_free zt_proc_free

/* Runs $ZRUN with args (NULL-terminated), stdin from in_path (or /dev/null). */
static Run run_zrun(const char *in_path, const char *const *args) {
    ZtProcOpts o = {.stdin_path = in_path};
    return zt_proc_zrun(NULL, args, &o);
}

#define RUN(in, ...) run_zrun(in, (const char *const[]){__VA_ARGS__, NULL})

/* The model every run here uses; NULL after zt_skip without ../shared. */
static const char *stories(void) { return zt_shared_model("models/stories260K.gguf"); }

/* ../shared/models/README.md: 64 greedy tokens from BOS (ids 403 ... 438 310). */
static const char reference_text[] =
    " Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
    "One day, she saw a big, red ball. She wanted to play with it, but it was too high.\nLily";

ZT_TEST(greedy_from_bos_prints_the_reference_text_of_stories260K) {
    const char *m = stories();
    if (!m) return;
    Run r = RUN(NULL, "-m", m, "-p", "", "--temp", "0", "-n", "64");
    ZT_CHECKF(r.status == 0, "exit %d: %s", r.status, r.err);
    ZT_CHECKF(!strcmp(r.out, reference_text), "got '%s'", r.out);
    ZT_CHECKF(strstr(r.err, "generated 64 tokens") != NULL, "%s", r.err);
    run_free(&r);
}

ZT_TEST(bad_options_exit_2_with_a_message) {
    static const char *const cases[][6] = {
        {"-m", "x.gguf", "-p", "hi", "--temp", "warm"},
        {"-m", "x.gguf", "-p", "hi", "--top-p", "2"},
        {"-m", "x.gguf", "-p", "hi", "--frobnicate", NULL},
        {"-m", "x.gguf", NULL},
        {"-p", "hi", NULL},
        {"-m", "x.gguf", "-p", "hi", "--device", "gpu"},
    };
    static const char *const want[] = {"--temp", "--top-p", "--frobnicate", "no prompt", "no model", "--device"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[8] = {0};
        for (int j = 0; j < 6 && cases[i][j]; j++) args[j] = cases[i][j];
        Run r = run_zrun(NULL, args);
        ZT_CHECKF(r.status == 2, "case %zu: exit %d", i, r.status);
        ZT_CHECKF(strstr(r.err, want[i]) && strstr(r.err, "zrun --help"), "case %zu: %s", i, r.err);
        ZT_CHECK(r.out[0] == 0);
        run_free(&r);
    }
}

ZT_TEST(a_missing_model_file_exits_1_naming_the_file) {
    Run r = RUN(NULL, "-m", "/nonexistent/dir/model.gguf", "-p", "hi");
    ZT_CHECKF(r.status == 1, "exit %d", r.status);
    ZT_CHECKF(strstr(r.err, "/nonexistent/dir/model.gguf") != NULL, "%s", r.err);
    run_free(&r);
}

ZT_TEST(help_prints_the_usage_and_exits_0) {
    Run r = RUN(NULL, "-m", "x.gguf", "--help");
    ZT_CHECK(r.status == 0);
    ZT_CHECK(strstr(r.out, "usage: zrun") && strstr(r.out, "--repeat-penalty"));
    run_free(&r);
}

ZT_TEST(the_same_seed_gives_the_same_text_and_the_summary_names_it) {
    const char *m = stories();
    if (!m) return;
    Run a = RUN(NULL, "-m", m, "-p", "Once upon a time", "--seed", "42", "-n", "40");
    Run b = RUN(NULL, "-m", m, "-p", "Once upon a time", "--seed", "42", "-n", "40");
    Run c = RUN(NULL, "-m", m, "-p", "Once upon a time", "--seed", "43", "-n", "40");
    ZT_CHECK(a.status == 0 && b.status == 0 && c.status == 0);
    ZT_CHECK(strlen(a.out) > 40);
    ZT_CHECK(!strcmp(a.out, b.out));
    ZT_CHECK(strcmp(a.out, c.out) != 0);
    ZT_CHECKF(strstr(a.err, "seed 42") != NULL, "%s", a.err);
    run_free(&a);
    run_free(&b);
    run_free(&c);
}

ZT_TEST(prompt_from_a_file_or_stdin_equals_the_prompt_argument) {
    const char *m = stories();
    if (!m) return;
    char path[4200];
    snprintf(path, sizeof path, "%s/prompt.txt", zt_tmpdir());
    FILE *f = fopen(path, "wb");
    ZT_CHECK(f);
    fputs("Once upon a time", f);
    fclose(f);
    Run a = RUN(NULL, "-m", m, "-p", "Once upon a time", "--temp", "0", "-n", "20");
    Run b = RUN(NULL, "-m", m, "-f", path, "--temp", "0", "-n", "20");
    Run c = RUN(path, "-m", m, "-p", "-", "--temp", "0", "-n", "20");
    ZT_CHECK(a.status == 0 && b.status == 0 && c.status == 0);
    /* the prompt is echoed, then the generation continues it */
    ZT_CHECKF(!strncmp(a.out, "Once upon a time, there was", 27), "'%s'", a.out);
    ZT_CHECK(!strcmp(a.out, b.out) && !strcmp(a.out, c.out));
    ZT_CHECK(strstr(a.err, "prompt 5 tokens") != NULL); /* BOS + 4 */
    run_free(&a);
    run_free(&b);
    run_free(&c);
    Run d = RUN(NULL, "-m", m, "-f", "/nonexistent/prompt.txt");
    ZT_CHECK(d.status == 1 && strstr(d.err, "/nonexistent/prompt.txt"));
    run_free(&d);
}

ZT_TEST(a_prompt_longer_than_the_context_is_an_error_not_a_truncation) {
    const char *m = stories();
    if (!m) return;
    Run r = RUN(NULL, "-m", m, "-c", "4", "-p", "Once upon a time there was");
    ZT_CHECKF(r.status == 1, "exit %d", r.status);
    ZT_CHECKF(strstr(r.err, "longer than the context of 4 tokens") != NULL, "%s", r.err);
    ZT_CHECK(r.out[0] == 0);
    run_free(&r);
}

ZT_TEST(generation_stops_when_the_context_is_full) {
    const char *m = stories();
    if (!m) return;
    /* BOS + 7 generated tokens fill a context of 8 */
    Run r = RUN(NULL, "-m", m, "-c", "8", "-p", "", "--temp", "0", "-n", "100");
    ZT_CHECK(r.status == 0);
    ZT_CHECKF(!strcmp(r.out, " Once upon a time, there was"), "'%s'", r.out);
    ZT_CHECKF(strstr(r.err, "generated 7 tokens, stop: context full") != NULL, "%s", r.err);
    run_free(&r);
}

ZT_TEST(no_display_prompt_prints_only_the_generated_text) {
    const char *m = stories();
    if (!m) return;
    Run r = RUN(NULL, "-m", m, "-p", "Once upon a time", "--temp", "0", "-n", "4", "--no-display-prompt");
    ZT_CHECK(r.status == 0);
    ZT_CHECKF(!strcmp(r.out, ", there was a"), "'%s'", r.out);
    run_free(&r);
}

ZT_TEST(n_predict_zero_only_prefills) {
    const char *m = stories();
    if (!m) return;
    Run r = RUN(NULL, "-m", m, "-p", "Once", "-n", "0");
    ZT_CHECK(r.status == 0 && !strcmp(r.out, "Once")); /* only the echoed prompt */
    ZT_CHECK(strstr(r.err, "generated 0 tokens") != NULL);
    run_free(&r);
}

/* stories260K.gguf with its eos_token_id moved to 432 (","), which greedy decoding from BOS
 * produces as its fifth token. */
static const char *model_with_eos_comma(const char *src) {
    static char path[4200];
    ZrGguf g;
    ZrError err;
    if (zr_gguf_open(&g, src, &err)) return NULL;
    ZrGgufWriter w;
    zr_gguf_w_init(&w);
    for (uint64_t i = 0; i < g.n_kv; i++) {
        if (zr_str_eq(g.kv[i].key, "general.alignment")) continue;
        if (zr_str_eq(g.kv[i].key, "tokenizer.ggml.eos_token_id")) zr_gguf_w_u32(&w, "tokenizer.ggml.eos_token_id", 432);
        else zr_gguf_w_copy_kv(&w, &g.kv[i]);
    }
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        const ZrGgufTensor *t = &g.tensors[i];
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        zr_gguf_w_tensor(&w, name, t->type, t->n_dims, t->ne, t->data);
    }
    snprintf(path, sizeof path, "%s/eos_comma.gguf", zt_tmpdir());
    FILE *f = fopen(path, "wb");
    int rc = f ? zr_gguf_w_write(&w, f, &err) : -1;
    if (f) fclose(f);
    zr_gguf_w_free(&w);
    zr_gguf_close(&g);
    return rc == 0 ? path : NULL;
}

ZT_TEST(an_end_of_generation_token_stops_and_is_not_printed) {
    const char *m = stories();
    if (!m) return;
    const char *eos = model_with_eos_comma(m);
    ZT_CHECK(eos);
    Run r = RUN(NULL, "-m", eos, "-p", "", "--temp", "0", "-n", "100");
    ZT_CHECKF(r.status == 0, "exit %d: %s", r.status, r.err);
    ZT_CHECKF(!strcmp(r.out, " Once upon a time"), "'%s'", r.out);
    ZT_CHECKF(strstr(r.err, "generated 4 tokens, stop: end of generation") != NULL, "%s", r.err);
    run_free(&r);
}

/* stories260K.gguf with a tokenizer of n_tok tokens (its first 512 and "extraN" ones; no
 * scores, no types) and llama.vocab_size 512, so the weights still load; nan_norm: NaNs
 * in output_norm.weight. */
static const char *model_with_tokens(const char *src, int n_tok, bool nan_norm) {
    static char path[4200];
    ZrGguf g;
    ZrError err;
    if (zr_gguf_open(&g, src, &err)) return NULL;
    ZrGgufWriter w;
    zr_gguf_w_init(&w);
    ZrStr toks[600];
    char extra[88][16];
    float nans[64]; /* [n_embd]: the writer keeps the pointer until it writes */
    for (int j = 0; j < 64; j++) nans[j] = NAN;
    for (uint64_t i = 0; i < g.n_kv; i++) {
        const ZrGgufKv *kv = &g.kv[i];
        if (zr_str_eq(kv->key, "general.alignment") || zr_str_eq(kv->key, "tokenizer.ggml.scores") ||
            zr_str_eq(kv->key, "tokenizer.ggml.token_type"))
            continue;
        if (zr_str_eq(kv->key, "tokenizer.ggml.tokens") && kv->n == 512 && n_tok <= 600) {
            zr_gguf_arr_strings(kv, toks);
            for (int j = 512; j < n_tok; j++) {
                snprintf(extra[j - 512], sizeof extra[0], "extra%d", j);
                toks[j] = (ZrStr){extra[j - 512], strlen(extra[j - 512])};
            }
            zr_gguf_w_arr_zrstr(&w, "tokenizer.ggml.tokens", (uint64_t)n_tok, toks);
        } else {
            zr_gguf_w_copy_kv(&w, kv);
        }
    }
    zr_gguf_w_u32(&w, "llama.vocab_size", 512);
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        const ZrGgufTensor *t = &g.tensors[i];
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        bool swap = nan_norm && !strcmp(name, "output_norm.weight") && t->ne[0] == 64;
        zr_gguf_w_tensor(&w, name, t->type, t->n_dims, t->ne, swap ? nans : t->data);
    }
    snprintf(path, sizeof path, "%s/tokens%d%s.gguf", zt_tmpdir(), n_tok, nan_norm ? "nan" : "");
    FILE *f = fopen(path, "wb");
    int rc = f ? zr_gguf_w_write(&w, f, &err) : -1;
    if (f) fclose(f);
    zr_gguf_w_free(&w);
    zr_gguf_close(&g);
    return rc == 0 ? path : NULL;
}

ZT_TEST(a_tokenizer_larger_than_the_embedding_is_an_error_a_smaller_one_masks_the_rest) {
    const char *m = stories();
    if (!m) return;
    const char *big = model_with_tokens(m, 600, false);
    ZT_CHECK(big);
    Run r = RUN(NULL, "-m", big, "-p", "Once", "-n", "4");
    ZT_CHECKF(r.status == 1, "exit %d: %s", r.status, r.err);
    ZT_CHECKF(strstr(r.err, "tokens600.gguf: tokenizer.ggml.tokens: expected at most 512 tokens (the rows of token_embd.weight), found 600"), "%s",
              r.err);
    ZT_CHECK(r.out[0] == 0);
    run_free(&r);
    /* padded output rows: ids past the tokenizer are never sampled */
    const char *small = model_with_tokens(m, 300, false);
    ZT_CHECK(small);
    r = RUN(NULL, "-m", small, "-p", "Once", "-n", "16", "--temp", "0");
    ZT_CHECKF(r.status == 0, "exit %d: %s", r.status, r.err);
    run_free(&r);
}

ZT_TEST(nan_logits_are_an_error_not_garbage_text) {
    const char *m = stories();
    if (!m) return;
    const char *bad = model_with_tokens(m, 512, true);
    ZT_CHECK(bad);
    Run r = RUN(NULL, "-m", bad, "-p", "", "-n", "4", "--temp", "0");
    ZT_CHECKF(r.status == 1, "exit %d: %s", r.status, r.err);
    ZT_CHECKF(strstr(r.err, "tokens512nan.gguf: the forward pass at position 0 gave a non-finite logit (") &&
                  strstr(r.err, "at token id 0): expected finite weights"), "%s", r.err);
    run_free(&r);
}

ZT_TEST(an_endless_prompt_stream_ends_with_an_error_at_the_tokenizers_limit) {
    const char *m = stories();
    if (!m) return;
    Run r = RUN("/dev/zero", "-m", m, "-p", "-", "--device", "cpu");
    ZT_CHECKF(r.status == 1, "exit %d: %s", r.status, r.err);
    ZT_CHECKF(strstr(r.err, "standard input: the prompt is longer than 1 GiB (the tokenizer's limit)"), "%s", r.err);
    run_free(&r);
    r = RUN(NULL, "tokenize", "-m", m, "-f", "/dev/zero");
    ZT_CHECKF(r.status == 1, "exit %d: %s", r.status, r.err);
    ZT_CHECKF(strstr(r.err, "cannot read /dev/zero: File too large"), "%s", r.err);
    run_free(&r);
}

ZT_TEST(quiet_leaves_standard_error_empty) {
    const char *m = stories();
    if (!m) return;
    Run r = RUN(NULL, "-m", m, "-p", "Once", "-n", "5", "--quiet");
    ZT_CHECK(r.status == 0 && r.out[0] != 0);
    ZT_CHECKF(r.err[0] == 0, "'%s'", r.err);
    run_free(&r);
}

ZT_TEST(device_cuda_without_a_usable_gpu_is_an_error) {
    const char *m = stories();
    if (!m) return;
    Run r = RUN(NULL, "-m", m, "-p", "Once", "-n", "2", "--device", "cuda");
    if (r.status == 0) {
        run_free(&r);
        zt_skip("a GPU is usable here");
        return;
    }
    ZT_CHECKF(r.status == 1 && strstr(r.err, "--device cuda") && strstr(r.err, "GPU"), "exit %d: %s", r.status, r.err);
    ZT_CHECK(r.out[0] == 0);
    run_free(&r);
    /* auto falls back to the CPU and says so */
    Run a = RUN(NULL, "-m", m, "-p", "Once", "-n", "2");
    ZT_CHECK(a.status == 0 && strstr(a.err, "running on the CPU") && strstr(a.err, "backend cpu"));
    run_free(&a);
}

ZT_TEST(ctrl_c_stops_after_the_current_token_prints_the_summary_and_exits_130) {
    const char *m = stories();
    const char *zrun = getenv("ZRUN");
    if (!m) return;
    if (!zrun) { zt_skip("$ZRUN is not set (run through meson test)"); return; }
    char err_path[4200];
    snprintf(err_path, sizeof err_path, "%s/sigint.err", zt_tmpdir());
    int fds[2];
    ZT_CHECK(pipe(fds) == 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGINT, SIG_DFL); /* as from an interactive shell */
        int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fds[1], 1);
        dup2(e, 2);
        close(fds[0]);
        /* ~2000 tokens: seconds of work, interrupted long before its end */
        execl(zrun, "zrun", "-m", m, "-p", "", "--seed", "1", "-n", "-1", "--device", "cpu", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char buf[65536];
    size_t got = 0;
    while (got < 20) { /* wait until generation is under way */
        ssize_t k = read(fds[0], buf + got, sizeof buf - 1 - got);
        if (k <= 0) break;
        got += (size_t)k;
    }
    kill(pid, SIGINT);
    for (;;) {
        ssize_t k = read(fds[0], buf + got, sizeof buf - 1 - got);
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fds[0]);
    int st;
    ZT_CHECK(waitpid(pid, &st, 0) == pid);
    char *err = zt_read_file(err_path, NULL);
    ZT_CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 130, "status %d", st);
    ZT_CHECKF(err && strstr(err, "stop: interrupted") && strstr(err, "zrun: prompt 1 tokens"), "%s", err ? err : "");
    ZT_CHECKF(got > 20 && got < 4000, "%zu bytes of text", got); /* the full run prints ~9000 */
    free(err);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

ZT_TEST(ctrl_c_during_a_long_prefill_stops_it_between_layers_and_exits_130) {
    const char *m = stories();
    const char *zrun = getenv("ZRUN");
    if (!m) return;
    if (!zrun) { zt_skip("$ZRUN is not set (run through meson test)"); return; }
    /* ~24000 tokens: a CPU prefill of many seconds (attention over the whole prompt) */
    char prompt_path[4200];
    snprintf(prompt_path, sizeof prompt_path, "%s/long_prompt.txt", zt_tmpdir());
    FILE *f = fopen(prompt_path, "w");
    ZT_CHECK(f);
    for (int i = 0; i < 6000; i++) fputs("Once upon a time ", f);
    fclose(f);
    int fds[2];
    ZT_CHECK(pipe(fds) == 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGINT, SIG_DFL);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(fds[1], 2);
        close(fds[0]);
        execl(zrun, "zrun", "-m", m, "-f", prompt_path, "-c", "32768", "-v", "--device", "cpu", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char buf[16384] = "";
    size_t got = 0;
    /* -v prints the sampling settings just before the prefill starts */
    while (!strstr(buf, "zrun: sampling")) {
        ssize_t k = read(fds[0], buf + got, sizeof buf - 1 - got);
        if (k <= 0) break;
        got += (size_t)k;
        buf[got] = 0;
    }
    usleep(300 * 1000);
    const double t0 = now_ms();
    kill(pid, SIGINT);
    for (;;) {
        ssize_t k = read(fds[0], buf + got, sizeof buf - 1 - got);
        if (k <= 0) break;
        got += (size_t)k;
    }
    buf[got] = 0;
    close(fds[0]);
    int st;
    ZT_CHECK(waitpid(pid, &st, 0) == pid);
    const double waited = now_ms() - t0;
    ZT_CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 130, "status %d: %s", st, buf);
    ZT_CHECKF(strstr(buf, "generated 0 tokens, stop: interrupted"), "%s", buf);
    ZT_CHECKF(waited < 3000, "exited %.0f ms after Ctrl-C", waited);
}

ZT_TEST(a_directory_as_the_prompt_file_says_it_is_a_directory) {
    const char *m = stories();
    if (!m) return;
    Run r = RUN(NULL, "-m", m, "-f", zt_tmpdir());
    ZT_CHECKF(r.status == 1 && strstr(r.err, "is a directory") && !strstr(r.err, "read error"), "%d %s", r.status, r.err);
    run_free(&r);
}

ZT_TEST(the_summary_starts_on_its_own_line_when_stdout_is_stderr) {
    const char *m = stories();
    if (!m) return;
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "\"$ZRUN\" -m '%s' -p 'Once' -n 3 --seed 1 --device cpu 2>&1", m);
    ZtProc p = zt_proc_sh(cmd, NULL);
    ZT_CHECK(p.status == 0);
    const char *load = strstr(p.out, "zrun: load");
    ZT_CHECKF(load && load > p.out && load[-1] == '\n', "%s", p.out);
    /* apart, standard output is exactly the text */
    Run r = RUN(NULL, "-m", m, "-p", "Once", "-n", "3", "--seed", "1", "--device", "cpu");
    ZT_CHECKF(r.out[strlen(r.out) - 1] != '\n' && strstr(p.out, r.out), "'%s'", r.out);
    run_free(&r);
    zt_proc_free(&p);
}

ZT_TEST(ignore_eos_never_draws_an_end_of_generation_token) {
    const char *m = stories();
    if (!m) return;
    const char *eos = model_with_eos_comma(m);
    ZT_CHECK(eos);
    Run r = RUN(NULL, "-m", eos, "-p", "", "--temp", "0", "-n", "12", "--ignore-eos");
    ZT_CHECKF(r.status == 0, "exit %d: %s", r.status, r.err);
    ZT_CHECKF(!strncmp(r.out, " Once upon a time", 17) && !strchr(r.out, ','), "'%s'", r.out);
    ZT_CHECKF(strstr(r.err, "generated 12 tokens, stop: -n limit") != NULL, "%s", r.err);
    run_free(&r);
}

ZT_TEST(a_reverse_prompt_stops_generation_after_printing_it) {
    const char *m = stories();
    if (!m) return;
    Run r = RUN(NULL, "-m", m, "-p", "", "--temp", "0", "-n", "64", "-r", "little girl");
    ZT_CHECKF(r.status == 0, "exit %d: %s", r.status, r.err);
    ZT_CHECKF(!strcmp(r.out, " Once upon a time, there was a little girl"), "'%s'", r.out);
    ZT_CHECKF(strstr(r.err, "stop: reverse prompt") != NULL, "%s", r.err);
    run_free(&r);
    /* -e: escapes in -r and the prompt */
    Run e = RUN(NULL, "-m", m, "-p", "Once\\x20upon", "-e", "--temp", "0", "-n", "64", "-r", "high.\\n");
    ZT_CHECKF(e.status == 0 && !strncmp(e.out, "Once upon", 9), "'%s' %s", e.out, e.err);
    ZT_CHECKF(strstr(e.err, "stop: reverse prompt") && e.out[strlen(e.out) - 1] == '\n', "'%s'", e.out);
    run_free(&e);
}

ZT_TEST(llama_cpp_options_that_do_not_apply_get_a_note_not_an_error) {
    const char *m = stories();
    if (!m) return;
    Run r = RUN(NULL, "-m", m, "-p", "Once", "-n", "2", "-ngl", "99", "-fa", "-mmp", "0", "--device", "cpu", "--graph");
    ZT_CHECKF(r.status == 0, "exit %d: %s", r.status, r.err);
    ZT_CHECKF(strstr(r.err, "zrun: note: -ngl/--gpu-layers 99 ignored") && strstr(r.err, "note: -fa/--flash-attn"), "%s", r.err);
    ZT_CHECKF(strstr(r.err, "--graph, --profile, --log-launches and --graph-dot apply to the CUDA backend"), "%s", r.err);
    run_free(&r);
    Run q = RUN(NULL, "-m", m, "-p", "Once", "-n", "2", "-ngl", "99", "--quiet");
    ZT_CHECK(q.status == 0 && q.err[0] == 0);
    run_free(&q);
}

ZT_TEST(verbose_prints_the_sampling_chain_and_no_progress_line_reaches_a_pipe) {
    const char *m = stories();
    if (!m) return;
    Run r = RUN(NULL, "-m", m, "-p", "Once", "-n", "2", "-v", "--presence-penalty", "0.5", "-s", "3");
    ZT_CHECKF(r.status == 0, "exit %d: %s", r.status, r.err);
    ZT_CHECKF(strstr(r.err, "zrun: sampling: penalties (last 64: repeat 1, presence 0.5, frequency 0)") &&
                  strstr(r.err, "seed 3"),
              "%s", r.err);
    ZT_CHECKF(!strchr(r.err, '\r') && !strstr(r.err, "loading"), "%s", r.err);
    run_free(&r);
}

/* "first token X ms after start (load Y ms, prompt Z ms)": the start is the process's, before
 * the load, so X covers both and falls inside the process's life as the caller saw it; no
 * token, no line; not without -v. */
ZT_TEST(verbose_says_how_long_after_the_start_the_first_token_came) {
    const char *m = stories();
    if (!m) return;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    Run r = RUN(NULL, "-m", m, "-p", "Once", "-n", "3", "-v", "--device", "cpu");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double wall = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    ZT_CHECKF(r.status == 0, "exit %d: %s", r.status, r.err);
    const char *l = strstr(r.err, "zrun: first token ");
    double first = -1, load = -1, prompt = -1;
    ZT_CHECKF(l && sscanf(l, "zrun: first token %lf ms after start (load %lf ms, prompt %lf ms)", &first, &load,
                          &prompt) == 3,
              "%s", r.err);
    ZT_CHECKF(load >= 0 && prompt >= 0 && first + 0.2 >= load + prompt && first <= wall, "first %g load %g prompt %g wall %g",
              first, load, prompt, wall);
    run_free(&r);
    r = RUN(NULL, "-m", m, "-p", "Once", "-n", "0", "-v", "--device", "cpu");
    ZT_CHECKF(r.status == 0 && !strstr(r.err, "first token"), "%s", r.err);
    run_free(&r);
    r = RUN(NULL, "-m", m, "-p", "Once", "-n", "3", "--device", "cpu");
    ZT_CHECKF(r.status == 0 && !strstr(r.err, "first token"), "%s", r.err);
    run_free(&r);
}

int main(void) { return zt_run(); }
