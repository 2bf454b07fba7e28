/* zrun -m FILE -p PROMPT ...: load, tokenize, prefill the prompt in one forward call, then
 * sample and decode token by token, streaming text to stdout; a summary goes to stderr.
 *
 * Stopping: an end-of-generation token (not printed), -n tokens, or a full context (prompt +
 * generated = n_ctx). Ctrl-C (SIGINT) stops after the current token, prints the summary and
 * exits 130; a second Ctrl-C kills at once. SIGINT is blocked and polled between tokens rather
 * than caught by a handler, so no flag has to live in a global.
 *
 * A lost CUDA context (ZR_E_CONTEXT_LOST: the driver keeps a sticky error for the whole
 * process) does not end the run: it goes on in a new process, eagerly (src/app/resume.h), once. */
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
#include "fault_lost.h"
#include "model.h"
#include "resume.h"
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

/* The backend the first process used, for a resumed run: the same numbers need the same one. */
static ZrBackend *open_backend_again(const char *name, const ZrModel *m, const ZrBackendOptions *o, ZrError *err) {
    ZrBackend *be = !strcmp(name, "cpu") ? zr_cpu_backend_create(m, o, err) : zr_cuda_backend_create(m, o, err);
    if (!be) zr_err_wrap(err, "going on with the %s backend in a new process", name);
    return be;
}

/* "the CUDA context was lost (CAUSE)" from a ZR_E_CONTEXT_LOST message (see err.h). */
static void lost_head(const char *msg, char *out, size_t cap) {
    const char *close = strchr(msg, ')');
    int n = close ? (int)(close - msg + 1) : (int)strlen(msg);
    snprintf(out, cap, "%.*s", n, msg);
}

/* Where the decode loop stands: what a run needs to go on in a new process. */
typedef struct ZrRunPoint {
    const ZrRunSettings *s;
    const char *backend;
    int n_vocab, n_ctx, n_prompt, pos, n_gen, n_decode;
    const int32_t *ids; /* [pos] fed so far */
    int32_t pending;    /* sampled and printed, its forward lost */
    const ZrSamplerParams *sp;
    const ZrSampler *smp;
    const ZrDetok *detok;
    char last;
    double load_ms, prefill_ms, decode_ms, lost_at_ms;
} ZrRunPoint;

static int state_from(const ZrRunPoint *p, const ZrResumeState *model_id, const char *cause, ZrResumeState *st,
                      ZrError *err) {
    memset(st, 0, sizeof *st);
    memcpy(st->model, model_id->model, sizeof st->model);
    st->model_size = model_id->model_size;
    st->model_mtime_s = model_id->model_mtime_s;
    st->model_mtime_ns = model_id->model_mtime_ns;
    snprintf(st->backend, sizeof st->backend, "%s", p->backend);
    snprintf(st->cause, sizeof st->cause, "%s", cause);
    st->n_vocab = p->n_vocab;
    st->n_ctx = p->n_ctx;
    st->n_predict = p->s->n_predict;
    st->sampler = *p->sp;
    st->n_prompt = p->n_prompt;
    st->n_fed = p->pos;
    st->tokens = (int32_t *)p->ids; /* borrowed: encoded, never freed here */
    st->pending = p->pending;
    st->n_gen = p->n_gen;
    st->n_decode = p->n_decode;
    st->sampler_state_len = (uint32_t)zr_sampler_state_size(p->smp);
    st->sampler_state = malloc(st->sampler_state_len ? st->sampler_state_len : 1);
    if (!st->sampler_state) return zr_err(err, ZR_E_NOMEM, "out of memory for the sampler state");
    zr_sampler_get_state(p->smp, st->sampler_state);
    memcpy(st->detok_pending, p->detok->pending, sizeof st->detok_pending);
    st->detok_n_pending = p->detok->n_pending;
    st->detok_at_start = p->detok->at_start;
    st->detok_special = p->detok->special;
    st->last = p->last;
    st->load_ms = p->load_ms;
    st->prefill_ms = p->prefill_ms;
    st->decode_ms = p->decode_ms;
    st->lost_at_ms = p->lost_at_ms;
    return ZR_OK;
}

/* The decode step lost the context (err): replaces this process with one that goes on (frees
 * *be first, so the new one has the GPU's memory). model_id: the model file as it was loaded.
 * Returns only on failure, with err set. */
static int go_on_in_new_process(const ZrRunPoint *p, const ZrResumeState *model_id, ZrBackend **be, int argc,
                                char **argv, ZrError *err) {
    char cause[256];
    lost_head(err->msg, cause, sizeof cause);
    ZrResumeState st;
    ZrError e2 = {0};
    int rc = state_from(p, model_id, cause, &st, &e2);
    if (!rc) {
        (*be)->destroy(*be);
        *be = NULL;
        fprintf(stderr, "zrun: %s: continuing in a new process, eager\n", cause);
        rc = zr_resume_exec(&st, argc, argv, &e2);
    }
    st.tokens = NULL; /* borrowed */
    zr_resume_free(&st);
    zr_err(err, rc, "%s, and the run could not go on in a new process: %s", cause, e2.msg);
    return rc;
}

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
    int32_t *ids = NULL;  /* [n_ctx] the prompt, then the generated tokens fed */
    float *logits = NULL; /* [n_vocab] */
    char *out = NULL;     /* [zr_detok_cap] text of one token */
    sigset_t old_mask, int_mask;
    sigemptyset(&int_mask);
    sigaddset(&int_mask, SIGINT);
    bool blocked = false;
    /* A resumed run (--resume-fd, src/app/resume.h) takes its tokens, counters and sampler from the
     * state instead of the prompt; the prompt was encoded and printed by the first process. */
    const bool resuming = s.resume_fd >= 0;
    ZrResumeState rs = {0};

    size_t text_len = 0;
    if (resuming) {
        if (zr_resume_read_fd(s.resume_fd, &rs, &err)) goto fail;
        /* the graph faults were for the first process; context-lost counts its steps over the run */
        const char *fault = getenv("ZRUN_FAULT");
        if (fault && !zr_fault_lost_is(fault)) unsetenv("ZRUN_FAULT");
    } else {
        text = read_prompt(&s, &text_len, &err);
        if (!text) goto fail;
    }

    const double t_load0 = now_ms();
    if (zr_model_load(&model, s.model, &err)) {
        if (!strstr(err.msg, s.model)) zr_err_wrap(&err, "%s", s.model);
        goto fail;
    }
    model_loaded = true;
    /* the file as loaded: a new process must find the same one (kept in rs until a loss) */
    if (resuming ? zr_resume_check_model(&rs, s.model, model.hp.n_vocab, &err)
                 : zr_resume_stat_model(&rs, s.model, &err))
        goto fail;
    if (zr_tokenizer_load(&tok, &model.gguf, &err)) {
        if (strncmp(err.msg, s.model, strlen(s.model))) zr_err_wrap(&err, "%s: tokenizer", s.model); /* not twice */
        goto fail;
    }
    const int n_vocab = model.hp.n_vocab;
    if (zr_tokenizer_n_vocab(tok) > n_vocab) {
        /* ids the model cannot embed (fewer tokens are fine: padded output rows are masked) */
        zr_err(&err, ZR_E_FORMAT, "%s: tokenizer.ggml.tokens: expected at most %d tokens (the rows of token_embd.weight), found %d",
               s.model, n_vocab, zr_tokenizer_n_vocab(tok));
        goto fail;
    }
    int n_ctx = s.n_ctx;
    if (resuming) {
        n_ctx = rs.n_ctx;
        s.n_predict = rs.n_predict;
    } else if (n_ctx == 0) {
        n_ctx = model.hp.n_ctx_train > 0 && model.hp.n_ctx_train < ZR_RUN_DEFAULT_CTX ? model.hp.n_ctx_train
                                                                                       : ZR_RUN_DEFAULT_CTX;
    }

    size_t n_prompt = 0;
    if (resuming) {
        n_prompt = (size_t)rs.n_prompt;
    } else {
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
    }
    {
        int32_t *grown = realloc(ids, (size_t)n_ctx * sizeof *ids);
        if (!grown) { zr_err(&err, ZR_E_NOMEM, "out of memory for %d token ids", n_ctx); goto fail; }
        ids = grown;
        if (resuming) memcpy(ids, rs.tokens, (size_t)rs.n_fed * sizeof *ids);
    }

    ZrBackendOptions bo = {
        .n_ctx = n_ctx,
        .n_threads = s.n_threads,
        .graph = resuming ? 0 : s.graph, /* a resumed run decodes eagerly */
        .verify_graph = s.verify_graph,
        .profile = s.profile,
        .log_launches = s.log_launches && !resuming,
        .graph_dot = resuming ? NULL : s.graph_dot,
        .quiet = s.quiet || resuming, /* the first process said which device it runs on */
    };
    /* Until here Ctrl-C simply ends zrun (waiting on a prompt from the terminal, say). From
     * here it is blocked, before any backend thread exists (workers and driver threads inherit
     * the mask), so it waits as a pending signal until the decode loop looks for it. (A resumed
     * run inherits the blocked mask and any pending Ctrl-C across exec.) */
    pthread_sigmask(SIG_BLOCK, &int_mask, &old_mask);
    blocked = true;
    be = resuming ? open_backend_again(rs.backend, &model, &bo, &err) : open_backend(&s, &model, &bo, &err);
    if (!be) goto fail;
    if (zr_fault_lost_wrap(&be, getenv("ZRUN_FAULT"), (int)n_prompt, resuming ? rs.n_decode : -1, &err)) goto fail;
    double load_ms = now_ms() - t_load0;

    ZrSamplerParams sp = s.sampler;
    sp.repeat_last_n = s.repeat_last_n < 0 ? n_ctx : s.repeat_last_n;
    if (!s.seed_given) sp.seed = clock_seed();
    if (resuming) sp = rs.sampler;
    smp = zr_sampler_create(&sp, n_vocab, &err);
    if (!smp) goto fail;
    if (resuming) {
        if (zr_sampler_set_state(smp, rs.sampler_state, rs.sampler_state_len, &err)) {
            zr_err_wrap(&err, "resume state");
            goto fail;
        }
    } else {
        for (size_t i = 0; i < n_prompt; i++) zr_sampler_accept(smp, ids[i]);
    }
    logits = malloc((size_t)n_vocab * sizeof *logits); /* [n_vocab] */
    if (!logits) { zr_err(&err, ZR_E_NOMEM, "out of memory for %d logits", n_vocab); goto fail; }
    /* Ids past the tokenizer's vocabulary (padded output matrices) have no text. */
    const int n_tok_vocab = zr_tokenizer_n_vocab(tok);

    ZrStop stop = STOP_LIMIT;
    double prefill_ms = 0.0, decode_ms = 0.0, rebuild_ms = 0.0, t_dec0 = 0.0;
    int n_gen = 0, n_decode = 0;
    int pos = (int)n_prompt; /* tokens in the KV cache */
    char last = '\n';
    bool out_failed = false;
    /* The text continues the prompt (or BOS), so pieces print as they are (the detokenizer's
     * default): from BOS, stories260K prints " Once upon a time". */
    ZrDetok detok;
    zr_detok_init(&detok, tok);
    const size_t out_cap = zr_detok_cap(tok);
    out = malloc(out_cap);
    if (!out) { zr_err(&err, ZR_E_NOMEM, "out of memory"); goto fail; }

    if (resuming) {
        /* The KV cache again, fed exactly as the first process fed it (the prompt in one call,
         * then one decode step per token, so every entry is bit for bit the same), then the
         * lost step itself: its logits are where the first process stopped. Nothing is printed. */
        const double t0 = now_ms();
        if (be->forward(be, ids, (int)n_prompt, 0, logits, false, &err)) goto lost_again;
        for (int p = (int)n_prompt; p < rs.n_fed; p++)
            if (be->forward(be, &ids[p], 1, p, logits, false, &err)) goto lost_again;
        if (be->forward(be, &rs.pending, 1, rs.n_fed, logits, false, &err)) goto lost_again;
        rebuild_ms = now_ms() - t0;
        ids[rs.n_fed] = rs.pending;
        pos = rs.n_fed + 1;
        n_gen = rs.n_gen;
        n_decode = rs.n_decode + 1;
        last = rs.last;
        memcpy(detok.pending, rs.detok_pending, sizeof detok.pending);
        detok.n_pending = rs.detok_n_pending;
        detok.at_start = rs.detok_at_start;
        detok.special = rs.detok_special;
        prefill_ms = rs.prefill_ms;
    } else {
        if (sigint_pending()) {
            sigint_take();
            stop = STOP_INTERRUPT;
            goto summary;
        }
        const double t_pre0 = now_ms();
        if (be->forward(be, ids, (int)n_prompt, 0, logits, false, &err)) goto fail;
        prefill_ms = now_ms() - t_pre0;
        /* Like llama.cpp, the prompt is echoed first (as the user wrote it), so stdout reads as
         * one text; --no-display-prompt leaves only the generated text. */
        if (!s.no_display_prompt && text_len > 0 && out_write(text, text_len, &last)) {
            zr_err(&err, ZR_E_IO, "writing standard output: %s", strerror(errno));
            goto fail;
        }
    }
    /* Pure greedy sampling lets the backend pick (the GPU sends back the token, not the logits);
     * the first token still comes from the prompt's logits. */
    const bool backend_picks = zr_sampler_is_greedy(&sp) && be->decode_greedy && n_tok_vocab >= 1;
    ZrGreedy picked = {0, -1};
    bool have_pick = false; /* picked is the pick from the last step's logits */
    t_dec0 = now_ms();
    for (;;) {
        if (s.n_predict >= 0 && n_gen >= s.n_predict) { stop = STOP_LIMIT; break; }
        if (pos >= n_ctx) { stop = STOP_CONTEXT; break; }
        if (sigint_pending()) { sigint_take(); stop = STOP_INTERRUPT; break; }
        int nan_at = have_pick ? picked.nan_at : -1;
        if (!have_pick) {
            for (int i = n_tok_vocab; i < n_vocab; i++) logits[i] = -INFINITY;
            for (int i = 0; i < n_tok_vocab && nan_at < 0; i++)
                if (isnan(logits[i])) nan_at = i;
        }
        if (nan_at >= 0) { /* NaN/Inf weights: sampling would print garbage silently */
            zr_err(&err, ZR_E_FORMAT, "%s: the forward pass at position %d gave a NaN logit (token id %d): expected finite weights", s.model,
                   pos - 1, nan_at);
            goto fail;
        }
        int32_t id = have_pick ? picked.token : zr_sampler_sample(smp, logits);
        zr_sampler_accept(smp, id);
        if (zr_tokenizer_is_eog(tok, id)) { stop = STOP_EOG; break; }
        n_gen++;
        size_t n = zr_detok_push(&detok, id, out, out_cap);
        if (out_write(out, n, &last)) { out_failed = true; break; }
        /* The sampled token needs a forward pass only if another one is to follow it. */
        if (s.n_predict >= 0 && n_gen >= s.n_predict) { stop = STOP_LIMIT; break; }
        if (pos + 1 >= n_ctx) { stop = STOP_CONTEXT; break; }
        if (sigint_pending()) { sigint_take(); stop = STOP_INTERRUPT; break; }
        if (backend_picks ? be->decode_greedy(be, id, pos, n_tok_vocab, NULL, &picked, &err)
                          : be->forward(be, &id, 1, pos, logits, false, &err)) {
            if (err.code != ZR_E_CONTEXT_LOST) goto fail;
            if (resuming) goto lost_again;
            const double t_lost = now_ms();
            const ZrRunPoint here = {
                .s = &s, .backend = be->name, .n_vocab = n_vocab, .n_ctx = n_ctx, .n_prompt = (int)n_prompt,
                .pos = pos, .n_gen = n_gen, .n_decode = n_decode, .ids = ids, .pending = id, .sp = &sp,
                .smp = smp, .detok = &detok, .last = last, .load_ms = load_ms, .prefill_ms = prefill_ms,
                .decode_ms = t_lost - t_dec0, .lost_at_ms = t_lost,
            };
            go_on_in_new_process(&here, &rs, &be, argc, argv, &err);
            goto fail;
        }
        have_pick = backend_picks;
        ids[pos] = id;
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
        /* after a resume: the first process's load and prompt, the decode time of both */
        const double new_load_ms = load_ms;
        if (resuming) {
            load_ms = rs.load_ms;
            decode_ms += rs.decode_ms;
        }
        fprintf(stderr, "zrun: load %.1f ms (model, tokenizer, %s backend, context %d)\n", load_ms, be->name, n_ctx);
        fprintf(stderr, "zrun: prompt %zu tokens in %.1f ms (%.1f tokens/s)\n", n_prompt, prefill_ms,
                rate((double)n_prompt, prefill_ms));
        fprintf(stderr, "zrun: generated %d tokens, stop: %s; %d decode steps in %.1f ms (%.1f tokens/s)\n", n_gen,
                stop_names[stop], n_decode, decode_ms, rate(n_decode, decode_ms));
        if (resuming)
            fprintf(stderr,
                    "zrun: %s at decode step %d; the run went on in a new process %.1f ms later (load %.1f ms, "
                    "%d tokens fed again in %.1f ms)\n",
                    rs.cause, rs.n_decode, t_dec0 - rs.lost_at_ms, new_load_ms, rs.n_fed + 1, rebuild_ms);
        if (!strcmp(be->name, "cpu"))
            fprintf(stderr, "zrun: backend cpu (%ld threads), seed %llu\n", n_threads, (unsigned long long)sp.seed);
        else
            fprintf(stderr, "zrun: backend %s (graph %s, %llu kernels/token), seed %llu\n", be->name,
                    st.graph_active ? "on" : "off", (unsigned long long)st.kernels_per_token,
                    (unsigned long long)sp.seed);
    }
    rc = stop == STOP_INTERRUPT ? ZR_EXIT_INTERRUPTED : 0;
    goto done;

lost_again:
    /* The new process could not feed the tokens again, or lost its context too: a run goes on
     * in a new process once, so this ends it (after the tokens printed, all of them right). */
    if (err.code == ZR_E_CONTEXT_LOST) {
        char msg[sizeof err.msg];
        snprintf(msg, sizeof msg, "%s", err.msg);
        zr_err(&err, ZR_E_CONTEXT_LOST,
               "%s; it was lost once already in this run (at decode step %d) and a run goes on in a new process "
               "only once: stopping after %d generated tokens",
               msg, rs.n_decode, n_gen > rs.n_gen ? n_gen : rs.n_gen);
    } else {
        zr_err_wrap(&err, "going on in a new process after %s at decode step %d", rs.cause, rs.n_decode);
    }
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
    zr_resume_free(&rs);
    if (blocked) pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    return rc;
}
