/* The decode loop and what around it a fresh run and a resumed one share (run.h). */
#include "run.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fault_lost.h"
#include "zr_clock.h"

static const char *const stop_names[] = {"-n limit", "end of generation", "context full", "interrupted",
                                         "reverse prompt"};

static double rate(double n, double ms) { return ms > 0.0 ? n * 1e3 / ms : 0.0; }

void zr_run_init(ZrRun *r, const ZrRunSettings *s) {
    memset(r, 0, sizeof *r);
    r->s = s;
    r->n_predict = s->n_predict;
    r->last = '\n';
    r->stop = ZR_STOP_LIMIT;
    r->wake_fd = -1;
}

int zr_run_load(ZrRun *r, ZrError *err) {
    const char *path = r->s->model;
    r->t_load0 = zr_clock_ms();
    if (zr_model_load(&r->model, path, err)) {
        if (!strstr(err->msg, path)) zr_err_wrap(err, "%s", path);
        return err->code;
    }
    r->model_loaded = true;
    if (zr_tokenizer_load(&r->tok, &r->model.gguf, err)) {
        if (strncmp(err->msg, path, strlen(path))) zr_err_wrap(err, "%s: tokenizer", path); /* not twice */
        return err->code;
    }
    r->n_vocab = r->model.hp.n_vocab;
    r->n_tok_vocab = zr_tokenizer_n_vocab(r->tok);
    if (r->n_tok_vocab > r->n_vocab) /* ids the model cannot embed (fewer are fine: padded output rows are masked) */
        return zr_err(err, ZR_E_FORMAT,
                      "%s: tokenizer.ggml.tokens: expected at most %d tokens (the rows of token_embd.weight), found %d",
                      path, r->n_vocab, r->n_tok_vocab);
    return ZR_OK;
}

/* The watcher: the first SIGINT raises the run's flag; then SIGINT is unblocked in this thread
 * alone, so the next one takes its default action at once and ends the process. With
 * sigint_rearm (the chat) every SIGINT raises the flag and wakes wake_fd, and none kills. */
static void *watch_sigint(void *arg) {
    ZrRun *r = arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    int sig = 0;
    do {
        if (sigwait(&set, &sig) != 0) break;
        atomic_store(&r->interrupted, 1);
        if (r->wake_fd >= 0 && write(r->wake_fd, "", 1) < 0) { /* full: a wake-up is pending anyway */ }
    } while (r->sigint_rearm);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    for (;;) pause(); /* a cancellation point: zr_run_free ends the thread here */
    return NULL;
}

void zr_run_block_sigint(ZrRun *r) {
    sigset_t int_mask;
    sigemptyset(&int_mask);
    sigaddset(&int_mask, SIGINT);
    pthread_sigmask(SIG_BLOCK, &int_mask, &r->old_mask);
    r->blocked = true;
    atomic_store(&r->interrupted, 0);
    /* without the watcher a Ctrl-C still stops the run at the next token (take_sigint looks at
     * the pending set), but a second one cannot kill */
    r->watching = pthread_create(&r->watcher, NULL, watch_sigint, r) == 0;
}

bool zr_run_take_sigint(ZrRun *r) {
    if (atomic_load(&r->interrupted)) return true;
    if (r->watching) return false;
    sigset_t pend;
    if (sigpending(&pend) != 0 || sigismember(&pend, SIGINT) != 1) return false;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    struct timespec zero = {0, 0};
    sigtimedwait(&set, NULL, &zero); /* taken, so restoring the mask does not deliver it */
    atomic_store(&r->interrupted, 1);
    return true;
}

void zr_run_clear_sigint(ZrRun *r) { atomic_store(&r->interrupted, 0); }

bool zr_run_stop_cb(void *ctx) { return zr_run_take_sigint(ctx); }

int zr_run_start(ZrRun *r, ZrBackend *be, const char *fault, int after_step, ZrError *err) {
    r->be = be;
    if (zr_fault_lost_wrap(&r->be, fault, r->n_prompt, after_step, err)) return err->code;
    r->load_ms = zr_clock_ms() - r->t_load0;
    int32_t *grown = realloc(r->ids, (size_t)r->n_ctx * sizeof *grown);
    if (!grown) return zr_err(err, ZR_E_NOMEM, "out of memory for %d token ids", r->n_ctx);
    r->ids = grown;
    r->smp = zr_sampler_create(&r->sp, r->n_vocab, err);
    if (!r->smp) return err->code;
    r->logits = malloc((size_t)r->n_vocab * sizeof *r->logits);
    if (!r->logits) return zr_err(err, ZR_E_NOMEM, "out of memory for %d logits", r->n_vocab);
    /* The text continues the prompt (or BOS), so pieces print as they are (the detokenizer's
     * default): from BOS, stories260K prints " Once upon a time". */
    zr_detok_init(&r->detok, r->tok);
    r->out_cap = zr_detok_cap(r->tok);
    r->out = malloc(r->out_cap);
    if (!r->out) return zr_err(err, ZR_E_NOMEM, "out of memory");
    r->pos = r->n_prompt;
    const ZrRunSettings *s = r->s;
    if (s->ignore_eos) {
        r->eog = malloc((size_t)(r->n_tok_vocab > 0 ? r->n_tok_vocab : 1) * sizeof *r->eog);
        if (!r->eog) return zr_err(err, ZR_E_NOMEM, "out of memory");
        for (int32_t id = 0; id < r->n_tok_vocab; id++)
            if (zr_tokenizer_is_eog(r->tok, id)) r->eog[r->n_eog++] = id;
    }
    for (int i = 0; i < s->n_reverse; i++) {
        size_t n = strlen(s->reverse[i]);
        if (!(r->rev[i] = malloc(n + 1))) return zr_err(err, ZR_E_NOMEM, "out of memory");
        memcpy(r->rev[i], s->reverse[i], n + 1);
        r->rev_len[i] = s->escape ? zr_cli_unescape(r->rev[i], n) : n;
        if (r->rev_len[i] > ZR_RUN_TAIL)
            return zr_err(err, ZR_E_USAGE, "-r/--reverse-prompt: expected at most %d bytes, found %zu", ZR_RUN_TAIL,
                          r->rev_len[i]);
        if (r->rev_len[i]) r->n_rev++;
        else free(r->rev[i]), r->rev[i] = NULL;
    }
    return ZR_OK;
}

/* Appends text to the tail; whether it now ends with a reverse prompt. */
static bool reverse_prompt_reached(ZrRun *r, const char *buf, size_t n) {
    if (!r->n_rev || !n) return false;
    if (n >= ZR_RUN_TAIL) {
        memcpy(r->tail, buf + n - ZR_RUN_TAIL, ZR_RUN_TAIL);
        r->n_tail = ZR_RUN_TAIL;
    } else {
        size_t keep = r->n_tail + n > ZR_RUN_TAIL ? ZR_RUN_TAIL - n : r->n_tail;
        memmove(r->tail, r->tail + r->n_tail - keep, keep);
        memcpy(r->tail + keep, buf, n);
        r->n_tail = keep + n;
    }
    for (int i = 0; i < ZR_MAX_REVERSE; i++) {
        size_t k = r->rev_len[i];
        if (r->rev[i] && k <= r->n_tail && !memcmp(r->tail + r->n_tail - k, r->rev[i], k)) return true;
    }
    return false;
}

int zr_run_write(ZrRun *r, const char *buf, size_t n) {
    if (!n) return 0;
    if (fwrite(buf, 1, n, stdout) != n) return -1;
    r->last = buf[n - 1];
    return fflush(stdout) == 0 ? 0 : -1;
}

/* A token picked (and accepted by the sampler): shown unless it ends the generation; whether a
 * step is to feed it (another token follows). r->cur is the token the next step feeds. */
static bool take_token(ZrRun *r, int32_t id) {
    if (zr_tokenizer_is_eog(r->tok, id) && !r->s->ignore_eos) { r->stop = ZR_STOP_EOG; return false; }
    r->n_gen++;
    size_t n = zr_detok_push(&r->detok, id, r->out, r->out_cap);
    if (zr_run_write(r, r->out, n)) { r->out_failed = true; return false; }
    if (r->n_gen == 1) r->t_first = zr_clock_ms();
    if (reverse_prompt_reached(r, r->out, n)) { r->stop = ZR_STOP_REVERSE; return false; }
    /* The sampled token needs a forward pass only if another one is to follow it. */
    if (r->n_predict >= 0 && r->n_gen >= r->n_predict) { r->stop = ZR_STOP_LIMIT; return false; }
    if (r->pos + 1 >= r->n_ctx) { r->stop = ZR_STOP_CONTEXT; return false; }
    if (zr_run_take_sigint(r)) { r->stop = ZR_STOP_INTERRUPT; return false; }
    r->cur = id;
    return true;
}

/* decode_run's on_token: the step that fed r->cur at r->pos is done; then the token it picked. */
static bool on_token(void *ctx, int32_t id) {
    ZrRun *r = ctx;
    r->ids[r->pos] = r->cur;
    r->pos++;
    r->n_decode++;
    return take_token(r, id);
}

int zr_run_decode(ZrRun *r, ZrError *err) {
    ZrBackend *be = r->be;
    const int n_vocab = r->n_vocab, n_predict = r->n_predict, n_ctx = r->n_ctx;
    r->out_failed = false;
    r->t_dec0 = zr_clock_ms();
    bool go = true;
    if (n_predict >= 0 && r->n_gen >= n_predict) { r->stop = ZR_STOP_LIMIT; go = false; }
    else if (r->pos >= n_ctx) { r->stop = ZR_STOP_CONTEXT; go = false; }
    else if (zr_run_take_sigint(r)) { r->stop = ZR_STOP_INTERRUPT; go = false; }
    if (go) {
        /* the first token comes from the logits at pos - 1 (the prompt's, or a resumed run's);
         * (a NaN or inf logit has failed the forward call that made it: backend.h) */
        ZrDecodeLoop L = {.sp = &r->sp, .host = r->smp, .n_cand = r->n_tok_vocab, .ban = r->eog, .n_ban = r->n_eog,
                          .on_token = on_token, .ctx = r};
        const int32_t id = zr_decode_pick_host(&L, r->logits, n_vocab);
        go = take_token(r, id);
        /* then the backend's loop: steps until take_token says stop (or the context is full) */
        if (go) {
            L.token = r->cur;
            L.pos = r->pos;
            L.max_steps = n_ctx - r->pos;
            if (be->decode_run(be, &L, err)) {
                r->host_steps += L.host_steps;
                if (err->code == ZR_E_CONTEXT_LOST) {
                    r->lost_at_ms = zr_clock_ms();
                    r->decode_ms = r->lost_at_ms - r->t_dec0;
                    r->pending = r->cur; /* printed, its step lost */
                }
                return err->code;
            }
            r->host_steps += L.host_steps;
        }
    }
    r->decode_ms = zr_clock_ms() - r->t_dec0;
    bool out_failed = r->out_failed;
    if (!out_failed) {
        size_t n = zr_detok_flush(&r->detok, r->out, r->out_cap);
        if (zr_run_write(r, r->out, n)) out_failed = true;
    }
    /* A terminal gets its line ended; a pipe gets exactly the generated text. */
    if (!out_failed && r->n_gen > 0 && r->last != '\n' && isatty(STDOUT_FILENO)) zr_run_write(r, "\n", 1);
    if (out_failed || ferror(stdout)) return zr_err(err, ZR_E_IO, "writing standard output: %s", strerror(errno));
    return ZR_OK;
}

/* Whether standard output and standard error are one file (2>&1, one log file, one pipe). */
static bool stdout_is_stderr(void) {
    struct stat a, b;
    return fstat(STDOUT_FILENO, &a) == 0 && fstat(STDERR_FILENO, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

void zr_run_notes(const ZrRun *r) {
    const ZrRunSettings *s = r->s;
    if (s->quiet) return;
    for (int i = 0; i < s->n_notes; i++) fprintf(stderr, "zrun: note: %s\n", s->notes[i]);
    if (!s->verbose) return;
    fprintf(stderr, "zrun: model %s: %s, %d layers, vocabulary %d\n", s->model, r->model.hp.arch_name,
            r->model.hp.n_layer, r->n_vocab);
    fprintf(stderr, "zrun: prompt %d tokens, context %d (KV cache %s), -n %d\n", r->n_prompt, r->n_ctx,
            zr_kv_type_name(s->kv_type), r->n_predict);
    fprintf(stderr,
            "zrun: sampling: penalties (last %d: repeat %g, presence %g, frequency %g) -> top-k %d -> top-p %g -> "
            "min-p %g -> temp %g%s; seed %llu\n",
            r->sp.repeat_last_n, (double)r->sp.repeat_penalty, (double)r->sp.presence_penalty,
            (double)r->sp.frequency_penalty, r->sp.top_k, (double)r->sp.top_p, (double)r->sp.min_p,
            (double)r->sp.temp, r->sp.temp <= 0.0f ? " (greedy)" : "", (unsigned long long)r->sp.seed);
}

void zr_run_summary(const ZrRun *r, const char *note) {
    const ZrRunSettings *s = r->s;
    if (s->quiet) return;
    fflush(stdout);
    if (r->last != '\n' && stdout_is_stderr()) fputc('\n', stderr);
    const ZrBackend *be = r->be;
    ZrBackendStats st = {0};
    if (be->stats) be->stats(be, &st);
    long n_threads = s->n_threads > 0 ? s->n_threads : sysconf(_SC_NPROCESSORS_ONLN);
    fprintf(stderr, "zrun: load %.1f ms (model, tokenizer, %s backend, context %d)\n", r->load_ms, be->name, r->n_ctx);
    fprintf(stderr, "zrun: prompt %d tokens in %.1f ms (%.1f tokens/s)\n", r->n_prompt, r->prefill_ms,
            rate((double)r->n_prompt, r->prefill_ms));
    fprintf(stderr, "zrun: generated %d tokens, stop: %s; %d decode steps in %.1f ms (%.1f tokens/s)\n", r->n_gen,
            stop_names[r->stop], r->n_decode, r->decode_ms, rate(r->n_decode, r->decode_ms));
    if (s->verbose && r->t_start > 0 && r->t_first > 0)
        fprintf(stderr, "zrun: first token %.1f ms after start (load %.1f ms, prompt %.1f ms)\n", r->t_first - r->t_start,
                r->load_ms, r->prefill_ms);
    if (note) fprintf(stderr, "zrun: %s\n", note);
    if (!strcmp(be->name, "cpu"))
        fprintf(stderr, "zrun: backend cpu (%ld threads), seed %llu\n", n_threads, (unsigned long long)r->sp.seed);
    else
        fprintf(stderr, "zrun: backend %s (graph %s, %llu kernels/token), seed %llu\n", be->name,
                st.graph_active ? "on" : "off", (unsigned long long)st.kernels_per_token,
                (unsigned long long)r->sp.seed);
    if (s->verbose)
        fprintf(stderr, "zrun: %llu of %d decode steps sampled on the host (logits copied back)%s\n",
                (unsigned long long)r->host_steps, r->n_decode,
                r->host_steps ? "" : "; the backend picked every token");
    if (s->verbose && st.gap_samples)
        fprintf(stderr, "zrun: GPU idle between decode steps: min %.2f us, median %.2f us, mean %.2f us (%llu pairs, "
                        "%%globaltimer; %d steps a graph launch)\n",
                st.gap_us_min, st.gap_us_median, st.gap_us_mean, (unsigned long long)st.gap_samples,
                st.graph_steps_per_launch);
}

int zr_run_fail(const ZrError *err) {
    fflush(stdout);
    fprintf(stderr, "zrun: %s\n", err->msg);
    return err->code == ZR_E_USAGE ? 2 : 1;
}

void zr_run_free(ZrRun *r) {
    free(r->out);
    free(r->logits);
    zr_sampler_free(r->smp);
    if (r->be) r->be->destroy(r->be);
    zr_cuda_early_drop(r->cuda_early);
    zr_tokenizer_free(r->tok);
    if (r->model_loaded) zr_model_free(&r->model);
    free(r->ids);
    if (r->watching) {
        pthread_cancel(r->watcher);
        pthread_join(r->watcher, NULL);
    }
    free(r->eog);
    for (int i = 0; i < ZR_MAX_REVERSE; i++) free(r->rev[i]);
    if (r->blocked) pthread_sigmask(SIG_SETMASK, &r->old_mask, NULL);
    memset(r, 0, sizeof *r);
}
