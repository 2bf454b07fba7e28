/* zrun -m FILE -p PROMPT ...: load, tokenize, prefill the prompt in one forward call, then
 * sample and decode token by token, streaming text to stdout; a summary goes to stderr.
 *
 * Stopping: an end-of-generation token (not printed), -n tokens, or a full context (prompt +
 * generated = n_ctx). Ctrl-C (SIGINT) stops after the current token, prints the summary and
 * exits 130; a second Ctrl-C kills at once. SIGINT is blocked and polled between tokens rather
 * than caught by a handler, so no flag has to live in a global. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "cli.h"
#include "cmd.h"
#include "model.h"
#include "sampler.h"
#include "tokenizer.h"

#define ZR_EXIT_INTERRUPTED 130

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static uint64_t clock_seed(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    /* Seeds are printed in the summary; keep them short enough to retype. */
    uint64_t x = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 20);
    x ^= x >> 29;
    return x % 4294967296u;
}

/* Reads a whole stream; *len excludes the terminating NUL added for convenience. */
static char *read_stream(FILE *f, const char *label, size_t *len, ZrError *err) {
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    if (!buf) { zr_err(err, ZR_E_NOMEM, "%s: out of memory", label); return NULL; }
    for (;;) {
        if (n + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) { free(buf); zr_err(err, ZR_E_NOMEM, "%s: out of memory", label); return NULL; }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        free(buf);
        zr_err(err, ZR_E_IO, "%s: read error", label);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

static char *read_prompt(const ZrRunSettings *s, size_t *len, ZrError *err) {
    if (s->prompt_file) {
        FILE *f = fopen(s->prompt_file, "rb");
        if (!f) {
            zr_err(err, ZR_E_IO, "%s: cannot open the prompt file: %s", s->prompt_file, strerror(errno));
            return NULL;
        }
        char *t = read_stream(f, s->prompt_file, len, err);
        fclose(f);
        return t;
    }
    if (!strcmp(s->prompt, "-")) return read_stream(stdin, "standard input", len, err);
    *len = strlen(s->prompt);
    char *t = malloc(*len + 1);
    if (!t) { zr_err(err, ZR_E_NOMEM, "prompt: out of memory"); return NULL; }
    memcpy(t, s->prompt, *len + 1);
    return t;
}

/* --device auto tries CUDA and falls back to the CPU only when no GPU is usable; any other
 * CUDA failure (out of memory, a kernel error) is an error, not a silent fallback. */
static ZrBackend *open_backend(const ZrRunSettings *s, const ZrModel *m, const ZrBackendOptions *o, ZrError *err) {
    if (s->device == ZR_DEVICE_CPU) return zr_cpu_backend_create(m, o, err);
    ZrBackend *be = zr_cuda_backend_create(m, o, err);
    if (be) return be;
    /* the backend's reason may already say "no usable GPU" */
    const bool said = !strncmp(err->msg, "no usable GPU", 13);
    if (s->device == ZR_DEVICE_CUDA) {
        if (err->code == ZR_E_NODEV) zr_err_wrap(err, said ? "--device cuda" : "--device cuda: no usable GPU");
        return NULL;
    }
    if (err->code != ZR_E_NODEV) return NULL;
    if (!s->quiet) fprintf(stderr, said ? "zrun: %s; running on the CPU\n" : "zrun: no usable GPU (%s); running on the CPU\n", err->msg);
    return zr_cpu_backend_create(m, o, err);
}

static bool sigint_pending(void) {
    sigset_t pend;
    return sigpending(&pend) == 0 && sigismember(&pend, SIGINT) == 1;
}

/* Consumes the pending SIGINT and unblocks it in this thread, so a second Ctrl-C kills. */
static void sigint_take(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    struct timespec zero = {0, 0};
    sigtimedwait(&set, NULL, &zero);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

static int out_write(const char *buf, size_t n, char *last) {
    if (!n) return 0;
    if (fwrite(buf, 1, n, stdout) != n) return -1;
    *last = buf[n - 1];
    return fflush(stdout) == 0 ? 0 : -1;
}

typedef enum ZrStop { STOP_LIMIT, STOP_EOG, STOP_CONTEXT, STOP_INTERRUPT } ZrStop;
static const char *const stop_names[] = {"-n limit", "end of generation", "context full", "interrupted"};

static double rate(double n, double ms) { return ms > 0.0 ? n * 1e3 / ms : 0.0; }

int zr_cmd_run(int argc, char **argv) {
    ZrRunSettings s;
    ZrError err = {0};
    if (zr_cli_parse_run(&s, argc, argv, &err)) {
        fprintf(stderr, "zrun: %s (see zrun --help)\n", err.msg);
        return 2;
    }
    if (s.help) {
        fputs(zr_usage_text, stdout);
        return 0;
    }

    int rc = 1;
    bool model_loaded = false;
    ZrModel model;
    ZrTokenizer *tok = NULL;
    ZrBackend *be = NULL;
    ZrSampler *smp = NULL;
    char *text = NULL;
    int32_t *ids = NULL;
    float *logits = NULL;
    char *out = NULL; /* [zr_detok_cap] text of one token */
    sigset_t old_mask, int_mask;
    sigemptyset(&int_mask);
    sigaddset(&int_mask, SIGINT);
    bool blocked = false;

    size_t text_len = 0;
    text = read_prompt(&s, &text_len, &err);
    if (!text) goto fail;

    const double t_load0 = now_ms();
    if (zr_model_load(&model, s.model, &err)) {
        if (!strstr(err.msg, s.model)) zr_err_wrap(&err, "%s", s.model);
        goto fail;
    }
    model_loaded = true;
    if (zr_tokenizer_load(&tok, &model.gguf, &err)) {
        zr_err_wrap(&err, "%s: tokenizer", s.model);
        goto fail;
    }
    const int n_vocab = model.hp.n_vocab;
    int n_ctx = s.n_ctx;
    if (n_ctx == 0) {
        n_ctx = model.hp.n_ctx_train > 0 && model.hp.n_ctx_train < ZR_RUN_DEFAULT_CTX ? model.hp.n_ctx_train
                                                                                       : ZR_RUN_DEFAULT_CTX;
    }

    size_t n_prompt = 0;
    if (zr_tokenizer_encode(tok, text, text_len, true, s.special, &ids, &n_prompt, &err)) goto fail;
    if (n_prompt == 0) {
        /* An empty prompt starts from BOS alone (the tokenizer adds it when the model asks for
         * it; models that do not still get it here, as there is nothing else to start from). */
        int32_t bos = zr_tokenizer_bos(tok);
        if (bos < 0) {
            zr_err(&err, ZR_E_RANGE, "the prompt is empty and %s has no BOS token to start from", s.model);
            goto fail;
        }
        free(ids);
        ids = malloc(sizeof *ids);
        if (!ids) { zr_err(&err, ZR_E_NOMEM, "out of memory"); goto fail; }
        ids[0] = bos;
        n_prompt = 1;
    }
    if (n_prompt > (size_t)n_ctx) {
        zr_err(&err, ZR_E_RANGE, "the prompt is %zu tokens, longer than the context of %d tokens (raise -c; the model was trained with %d)",
               n_prompt, n_ctx, model.hp.n_ctx_train);
        goto fail;
    }

    ZrBackendOptions bo = {
        .n_ctx = n_ctx,
        .n_threads = s.n_threads,
        .graph = s.graph,
        .verify_graph = s.verify_graph,
        .profile = s.profile,
        .log_launches = s.log_launches,
        .graph_dot = s.graph_dot,
        .quiet = s.quiet,
    };
    /* Until here Ctrl-C simply ends zrun (waiting on a prompt from the terminal, say). From
     * here it is blocked, before any backend thread exists (workers and driver threads inherit
     * the mask), so it waits as a pending signal until the decode loop looks for it. */
    pthread_sigmask(SIG_BLOCK, &int_mask, &old_mask);
    blocked = true;
    be = open_backend(&s, &model, &bo, &err);
    if (!be) goto fail;
    const double load_ms = now_ms() - t_load0;

    ZrSamplerParams sp = s.sampler;
    sp.repeat_last_n = s.repeat_last_n < 0 ? n_ctx : s.repeat_last_n;
    if (!s.seed_given) sp.seed = clock_seed();
    smp = zr_sampler_create(&sp, n_vocab, &err);
    if (!smp) goto fail;
    for (size_t i = 0; i < n_prompt; i++) zr_sampler_accept(smp, ids[i]);
    logits = malloc((size_t)n_vocab * sizeof *logits); /* [n_vocab] */
    if (!logits) { zr_err(&err, ZR_E_NOMEM, "out of memory for %d logits", n_vocab); goto fail; }
    /* Ids past the tokenizer's vocabulary (padded output matrices) have no text. */
    const int n_tok_vocab = zr_tokenizer_n_vocab(tok);

    ZrStop stop = STOP_LIMIT;
    double prefill_ms = 0.0, decode_ms = 0.0;
    int n_gen = 0, n_decode = 0;
    char last = '\n';
    bool out_failed = false;
    if (sigint_pending()) {
        sigint_take();
        stop = STOP_INTERRUPT;
        goto summary;
    }

    const double t_pre0 = now_ms();
    if (be->forward(be, ids, (int)n_prompt, 0, logits, false, &err)) goto fail;
    prefill_ms = now_ms() - t_pre0;

    /* The text continues the prompt (or BOS), so pieces print as they are (the detokenizer's
     * default): from BOS, stories260K prints " Once upon a time". */
    ZrDetok detok;
    zr_detok_init(&detok, tok);
    const size_t out_cap = zr_detok_cap(tok);
    out = malloc(out_cap);
    if (!out) { zr_err(&err, ZR_E_NOMEM, "out of memory"); goto fail; }
    /* Like llama.cpp, the prompt is echoed first (as the user wrote it), so stdout reads as one
     * text; --no-display-prompt leaves only the generated text. */
    if (!s.no_display_prompt && text_len > 0 && out_write(text, text_len, &last)) {
        zr_err(&err, ZR_E_IO, "writing standard output: %s", strerror(errno));
        goto fail;
    }
    int pos = (int)n_prompt; /* tokens in the KV cache */
    const double t_dec0 = now_ms();
    for (;;) {
        if (s.n_predict >= 0 && n_gen >= s.n_predict) { stop = STOP_LIMIT; break; }
        if (pos >= n_ctx) { stop = STOP_CONTEXT; break; }
        if (sigint_pending()) { sigint_take(); stop = STOP_INTERRUPT; break; }
        for (int i = n_tok_vocab; i < n_vocab; i++) logits[i] = -INFINITY;
        int32_t id = zr_sampler_sample(smp, logits);
        zr_sampler_accept(smp, id);
        if (zr_tokenizer_is_eog(tok, id)) { stop = STOP_EOG; break; }
        n_gen++;
        size_t n = zr_detok_push(&detok, id, out, out_cap);
        if (out_write(out, n, &last)) { out_failed = true; break; }
        /* The sampled token needs a forward pass only if another one is to follow it. */
        if (s.n_predict >= 0 && n_gen >= s.n_predict) { stop = STOP_LIMIT; break; }
        if (pos + 1 >= n_ctx) { stop = STOP_CONTEXT; break; }
        if (sigint_pending()) { sigint_take(); stop = STOP_INTERRUPT; break; }
        if (be->forward(be, &id, 1, pos, logits, false, &err)) goto fail;
        pos++;
        n_decode++;
    }
    decode_ms = now_ms() - t_dec0;
    if (!out_failed) {
        size_t n = zr_detok_flush(&detok, out, out_cap);
        if (out_write(out, n, &last)) out_failed = true;
    }
    /* A terminal gets its line ended; a pipe gets exactly the generated text. */
    if (!out_failed && n_gen > 0 && last != '\n' && isatty(STDOUT_FILENO)) out_write("\n", 1, &last);
    if (out_failed || ferror(stdout)) {
        zr_err(&err, ZR_E_IO, "writing standard output: %s", strerror(errno));
        goto fail;
    }

summary:
    if (!s.quiet) {
        ZrBackendStats st = {0};
        if (be->stats) be->stats(be, &st);
        long n_threads = s.n_threads > 0 ? s.n_threads : sysconf(_SC_NPROCESSORS_ONLN);
        fprintf(stderr, "zrun: load %.1f ms (model, tokenizer, %s backend, context %d)\n", load_ms, be->name, n_ctx);
        fprintf(stderr, "zrun: prompt %zu tokens in %.1f ms (%.1f tokens/s)\n", n_prompt, prefill_ms,
                rate((double)n_prompt, prefill_ms));
        fprintf(stderr, "zrun: generated %d tokens, stop: %s; %d decode steps in %.1f ms (%.1f tokens/s)\n", n_gen,
                stop_names[stop], n_decode, decode_ms, rate(n_decode, decode_ms));
        if (!strcmp(be->name, "cpu"))
            fprintf(stderr, "zrun: backend cpu (%ld threads), seed %llu\n", n_threads, (unsigned long long)sp.seed);
        else
            fprintf(stderr, "zrun: backend %s (graph %s, %llu kernels/token), seed %llu\n", be->name,
                    st.graph_active ? "on" : "off", (unsigned long long)st.kernels_per_token,
                    (unsigned long long)sp.seed);
    }
    rc = stop == STOP_INTERRUPT ? ZR_EXIT_INTERRUPTED : 0;
    goto done;

fail:
    fflush(stdout);
    fprintf(stderr, "zrun: %s\n", err.msg);
    rc = err.code == ZR_E_USAGE ? 2 : 1;
done:
    free(out);
    free(logits);
    zr_sampler_free(smp);
    if (be) be->destroy(be);
    zr_tokenizer_free(tok);
    if (model_loaded) zr_model_free(&model);
    free(ids);
    free(text);
    if (blocked) pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    return rc;
}
