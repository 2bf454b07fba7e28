/* zrun chat -m FILE [-sys TEXT] [-p FIRST] [--chat-template NAME|FILE] (= zrun -m FILE -cnv):
 * a conversation. Each user line becomes a turn rendered by the chat template (src/chat.c);
 * only what the turn adds to the rendered conversation is tokenized and prefilled, on top of
 * the KV cache the earlier turns left (llama.cpp's common_chat_format_single: the conversation
 * rendered without and with the new message, the difference fed; a newline is put back first
 * when the earlier render ended with one, as the model's reply stopped at its end-of-turn
 * token). The token that ended the last reply is fed with the next turn, so the cache holds
 * exactly the rendered conversation.
 *
 * A reply stops at an end-of-generation token of the vocabulary or a token whose text is one of
 * the template's end-of-turn texts ("<|im_end|>", "<|eot_id|>", ...), after -n tokens, or at
 * Ctrl-C (back to the prompt). Ctrl-C at the prompt, end of input (Ctrl-D) or "/exit" ends the
 * conversation with the summary. A full context ends it too, with a message saying so (zrun
 * does not drop turns: every token in the cache stays where the model saw it). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend_open.h"
#include "chat_input.h"
#include "cmd.h"
#include "conversation.h"
#include "progress.h"
#include "run.h"
#include "zr_clock.h"

#define MAX_STOP_IDS 16
#define MAX_TURN_LOG 64 /* turns whose prefill count the summary lists */

typedef struct Chat {
    ZrRun r;                      /* model, tokenizer, backend, sampler, totals for the summary */
    const ZrChatTemplate *tmpl;
    const char *tmpl_how;
    ZrConversation conv;
    int32_t stop_ids[MAX_STOP_IDS]; /* the template's end-of-turn texts found in the vocabulary */
    int n_stop_ids;
    int32_t pending;              /* the end-of-turn token of the last reply, fed with the next turn; -1 none */
    bool fed_any;                 /* BOS goes with the first text fed */
    char *cached;                 /* the text the KV cache holds: turns fed, replies generated */
    size_t cached_n;
    char *reply;                  /* [reply_cap] the reply's text so far */
    size_t reply_n, reply_cap;
    int turns;
    int prefilled[MAX_TURN_LOG];  /* tokens each turn prefilled */
    bool context_full;
    int wake_rd;                  /* the read end of the watcher's wake-up pipe (run.h: wake_fd) */
    int sigint_at;                /* test hook ZRUN_FAULT=chat-sigint:N: the first reply sends itself
                                   * SIGINT after N tokens (a real Ctrl-C, at a known point); -1 none */
} Chat;

#define CHAT_SIGINT_FAULT "chat-sigint:"

/* The hook: raise SIGINT and wait (up to 2 s) until the watcher has taken it. */
static void send_sigint(Chat *c) {
    c->sigint_at = -1;
    kill(getpid(), SIGINT);
    for (int i = 0; i < 2000 && !atomic_load(&c->r.interrupted); i++) nanosleep(&(struct timespec){0, 1000000}, NULL);
}

static uint64_t clock_seed(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 20);
    x ^= x >> 29;
    return x % 4294967296u;
}

/* A Ctrl-C that stopped a reply (or a prefill) is spent: the prompt must not hear it again. */
static void forget_sigint(Chat *c) {
    char drain[64];
    while (read(c->wake_rd, drain, sizeof drain) > 0) {}
    zr_run_clear_sigint(&c->r);
}

static bool is_stop(const Chat *c, int32_t id) {
    if (zr_tokenizer_is_eog(c->r.tok, id)) return true;
    for (int i = 0; i < c->n_stop_ids; i++)
        if (c->stop_ids[i] == id) return true;
    return false;
}

static void find_stop_ids(Chat *c) {
    for (const char *const *s = zr_chat_template_stops(c->tmpl); *s && c->n_stop_ids < MAX_STOP_IDS; s++) {
        int32_t id = zr_tokenizer_find(c->r.tok, *s, strlen(*s));
        if (id >= 0) c->stop_ids[c->n_stop_ids++] = id;
    }
}

/* Replaces c->cached with text[0..n) (+ more[0..m)). */
static int set_cached(Chat *c, const char *text, size_t n, const char *more, size_t m, ZrError *err) {
    char *b = malloc(n + m + 1);
    if (!b) return zr_err(err, ZR_E_NOMEM, "out of memory for a conversation of %zu bytes", n + m);
    memcpy(b, text, n);
    if (m) memcpy(b + n, more, m);
    b[n + m] = 0;
    free(c->cached);
    c->cached = b;
    c->cached_n = n + m;
    return 0;
}

/* What adding (role, content) adds to the rendered conversation, appended to c->conv. The
 * conversation rendered with the message, less the text the cache already holds (c->cached: the
 * texts fed and the replies generated). When the render does not start with that text (a
 * template that trims the replies, say), llama.cpp's common_chat_format_single: the render
 * without the message taken off instead, a newline put back first when it ended with one, and
 * the end-of-turn token of the last reply fed first (*with_pending). *text malloc'ed. */
static int turn_text(Chat *c, const char *role, const char *content, bool add_ass, char **text, size_t *len,
                     bool *with_pending, ZrError *err) {
    char *past = NULL, *now = NULL;
    size_t past_n = 0, now_n = 0;
    int rc = zr_conversation_add(&c->conv, role, content, err);
    if (!rc) rc = zr_chat_render(c->tmpl, c->conv.msgs, c->conv.n, add_ass, &now, &now_n, err);
    if (rc) return rc;
    size_t from = c->cached_n;
    bool nl = false;
    *with_pending = false;
    if (now_n < c->cached_n || (c->cached_n && memcmp(now, c->cached, c->cached_n))) {
        if (c->conv.n > 1 && (rc = zr_chat_render(c->tmpl, c->conv.msgs, c->conv.n - 1, false, &past, &past_n, err)))
            goto done;
        nl = add_ass && past_n && past[past_n - 1] == '\n';
        from = past_n < now_n ? past_n : now_n;
        *with_pending = true;
    }
    *len = (nl ? 1 : 0) + now_n - from;
    *text = malloc(*len + 1);
    if (!*text) {
        rc = zr_err(err, ZR_E_NOMEM, "out of memory for a turn of %zu bytes", *len);
        goto done;
    }
    if (nl) (*text)[0] = '\n';
    memcpy(*text + (nl ? 1 : 0), now + from, now_n - from);
    (*text)[*len] = 0;
    rc = set_cached(c, now, now_n, NULL, 0, err);
done:
    free(past);
    free(now);
    return rc;
}

/* Tokenizes text and feeds it (after the pending end-of-turn token) at the end of the cache.
 * ZR_E_RANGE: it does not fit the context (nothing fed); ZR_E_INTERRUPTED: Ctrl-C (the cache
 * is as before). */
static int feed(Chat *c, const char *text, size_t len, bool with_pending, ZrError *err) {
    ZrRun *r = &c->r;
    if (!with_pending) c->pending = -1; /* its text is in the turn's */
    int32_t *ids = NULL;
    size_t n = 0;
    if (zr_tokenizer_encode(r->tok, text, len, !c->fed_any, true, &ids, &n, err)) return err->code;
    const int extra = c->pending >= 0 ? 1 : 0;
    const size_t total = n + (size_t)extra;
    int rc = 0;
    if (total == 0) goto done;
    if ((size_t)r->pos + total + 1 > (size_t)r->n_ctx) { /* + 1: room for at least one token of reply */
        rc = zr_err(err, ZR_E_RANGE,
                    "the context is full: this turn needs %zu tokens and %d of the %d are free; the conversation "
                    "ends here (zrun keeps every turn: start again with a larger -c)",
                    total, r->n_ctx - r->pos, r->n_ctx);
        goto done;
    }
    const int at = r->pos;
    if (extra) r->ids[at] = c->pending;
    memcpy(r->ids + at + extra, ids, n * sizeof *ids);
    const double t0 = zr_clock_ms();
    if (r->be->forward(r->be, r->ids + at, (int)total, at, r->logits, false, err)) {
        r->be->truncate(r->be, at);
        rc = err->code;
        goto done;
    }
    r->prefill_ms += zr_clock_ms() - t0;
    for (size_t i = 0; i < total; i++) zr_sampler_accept(r->smp, r->ids[at + i]);
    r->pos = at + (int)total;
    r->n_prompt += (int)total;
    c->pending = -1;
    c->fed_any = true;
    if (c->turns < MAX_TURN_LOG) c->prefilled[c->turns] = (int)total;
    if (r->s->verbose && !r->s->quiet)
        fprintf(stderr, "zrun: turn %d: prefilled %zu tokens (only the new turn's; cache %d of %d)%s\n", c->turns + 1,
                total, r->pos, r->n_ctx,
                with_pending ? "; the template rewrote earlier text: the difference as llama.cpp's format_single takes it" : "");
done:
    free(ids);
    return rc;
}

static int reply_append(Chat *c, const char *s, size_t n, ZrError *err) {
    if (c->reply_n + n + 1 > c->reply_cap) {
        size_t cap = c->reply_cap ? c->reply_cap : 1024;
        while (cap < c->reply_n + n + 1) cap *= 2;
        char *b = realloc(c->reply, cap);
        if (!b) return zr_err(err, ZR_E_NOMEM, "out of memory for a reply of %zu bytes", c->reply_n + n);
        c->reply = b;
        c->reply_cap = cap;
    }
    memcpy(c->reply + c->reply_n, s, n);
    c->reply_n += n;
    c->reply[c->reply_n] = 0;
    return 0;
}

static int print_text(Chat *c, const char *s, size_t n, ZrError *err) {
    if (zr_run_write(&c->r, s, n)) return zr_err(err, ZR_E_IO, "writing standard output: %s", strerror(errno));
    return reply_append(c, s, n, err);
}

/* Samples and prints the reply from the logits of the last token fed, feeding every token
 * printed; sets r->stop. The reply's text is in c->reply. */
static int reply(Chat *c, ZrError *err) {
    ZrRun *r = &c->r;
    c->reply_n = 0;
    if (c->reply) c->reply[0] = 0;
    zr_detok_init(&r->detok, r->tok);
    int n_gen = 0;
    const double t0 = zr_clock_ms();
    int rc = 0;
    for (;;) {
        if (zr_run_take_sigint(r)) { r->stop = ZR_STOP_INTERRUPT; break; }
        for (int i = r->n_tok_vocab; i < r->n_vocab; i++) r->logits[i] = -INFINITY;
        int32_t id = zr_sampler_sample(r->smp, r->logits);
        zr_sampler_accept(r->smp, id);
        if (is_stop(c, id)) {
            c->pending = id;
            r->stop = ZR_STOP_EOG;
            break;
        }
        n_gen++;
        r->n_gen++;
        size_t n = zr_detok_push(&r->detok, id, r->out, r->out_cap);
        if ((rc = print_text(c, r->out, n, err))) break;
        if (r->pos + 1 >= r->n_ctx) { /* the token has no room to be fed */
            r->stop = ZR_STOP_CONTEXT;
            break;
        }
        r->ids[r->pos] = id;
        if ((rc = r->be->forward(r->be, &id, 1, r->pos, r->logits, false, err))) break;
        r->pos++;
        r->n_decode++;
        if (r->n_predict >= 0 && n_gen >= r->n_predict) { r->stop = ZR_STOP_LIMIT; break; }
        if (n_gen == c->sigint_at) send_sigint(c);
    }
    r->decode_ms += zr_clock_ms() - t0;
    if (!rc) {
        size_t n = zr_detok_flush(&r->detok, r->out, r->out_cap);
        rc = print_text(c, r->out, n, err);
    }
    if (!rc && r->last != '\n' && zr_run_write(r, "\n", 1))
        rc = zr_err(err, ZR_E_IO, "writing standard output: %s", strerror(errno));
    return rc;
}

/* One message: its turn fed and, with add_ass, the reply printed and kept. A full context sets
 * c->context_full (the conversation ends; not an error). */
static int turn(Chat *c, const char *role, const char *content, bool add_ass, ZrError *err) {
    char *text = NULL;
    size_t len = 0;
    int32_t pending = c->pending;
    char *cached = c->cached ? strdup(c->cached) : NULL;
    size_t cached_n = c->cached_n;
    bool with_pending = false;
    int rc = cached || !c->cached ? turn_text(c, role, content, add_ass, &text, &len, &with_pending, err)
                                  : zr_err(err, ZR_E_NOMEM, "out of memory");
    if (!rc) rc = feed(c, text, len, with_pending, err);
    free(text);
    if (rc == ZR_E_INTERRUPTED || rc == ZR_E_RANGE) {
        zr_conversation_pop(&c->conv); /* the turn never happened */
        c->pending = pending;
        free(c->cached);
        c->cached = cached, cached = NULL;
        c->cached_n = cached_n;
        if (rc == ZR_E_INTERRUPTED) {
            forget_sigint(c);
            fputs("zrun: interrupted while reading the turn; it was dropped\n", stderr);
            return 0;
        }
        fprintf(stderr, "zrun: %s\n", err->msg);
        c->context_full = true;
        return 0;
    }
    free(cached);
    if (rc) return rc;
    c->turns++;
    if (!add_ass) return 0; /* the system prompt alone: no reply */
    if ((rc = reply(c, err))) return rc;
    if ((rc = zr_conversation_add(&c->conv, "assistant", c->reply ? c->reply : "", err)) ||
        (rc = set_cached(c, c->cached, c->cached_n, c->reply, c->reply_n, err)))
        return rc;
    if (c->r.stop == ZR_STOP_INTERRUPT) {
        forget_sigint(c);
        if (!c->r.s->quiet) fputs("zrun: reply stopped (Ctrl-C)\n", stderr);
    } else if (c->r.stop == ZR_STOP_CONTEXT) {
        fprintf(stderr, "zrun: the context is full (%d tokens): the conversation ends here (zrun keeps every turn: "
                        "start again with a larger -c)\n", c->r.n_ctx);
        c->context_full = true;
    }
    return 0;
}

static void summary(Chat *c) {
    if (c->r.s->quiet) return;
    char note[600];
    int k = snprintf(note, sizeof note, "chat: %d turns fed (template %s, %s); tokens prefilled per turn:", c->turns,
                     zr_chat_template_name(c->tmpl), c->tmpl_how);
    for (int i = 0; i < c->turns && i < MAX_TURN_LOG && k < (int)sizeof note - 12; i++)
        k += snprintf(note + k, sizeof note - (size_t)k, " %d", c->prefilled[i]);
    zr_run_summary(&c->r, note);
}

/* -p TEXT or -f FILE: the first user message (malloc'ed), or NULL with *none. */
static char *first_message(const ZrRunSettings *s, bool *none, ZrError *err) {
    *none = !s->prompt && !s->prompt_file;
    if (*none) return NULL;
    if (s->prompt) {
        char *t = strdup(s->prompt);
        if (!t) zr_err(err, ZR_E_NOMEM, "out of memory");
        else if (s->escape) t[zr_cli_unescape(t, strlen(t))] = 0;
        return t;
    }
    FILE *f = fopen(s->prompt_file, "rb");
    if (!f) {
        zr_err(err, ZR_E_IO, "%s: cannot open the first message: %s", s->prompt_file, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0, k;
    char *t = malloc(cap);
    while (t && (k = fread(t + n, 1, cap - n - 1, f)) > 0) {
        n += k;
        if (n + 1 == cap) {
            char *b = realloc(t, cap *= 2);
            if (!b) free(t);
            t = b;
        }
    }
    fclose(f);
    if (!t) zr_err(err, ZR_E_NOMEM, "%s: out of memory", s->prompt_file);
    else t[n] = 0;
    return t;
}

int zr_chat_session(const ZrRunSettings *s, const ZrEnv *env) {
    Chat c;
    memset(&c, 0, sizeof c);
    c.pending = -1;
    c.sigint_at = -1;
    const char *fault = env->fault;
    if (fault && !strncmp(fault, CHAT_SIGINT_FAULT, strlen(CHAT_SIGINT_FAULT))) {
        c.sigint_at = atoi(fault + strlen(CHAT_SIGINT_FAULT));
        fault = NULL;
    }
    ZrRun *r = &c.r;
    zr_run_init(r, s);
    ZrError err = {0};
    ZrLineInput *in = NULL;
    int wake[2] = {-1, -1};
    int rc = 1;
    bool none;
    char *first = first_message(s, &none, &err);
    if (!first && !none) goto fail;
    /* the GPU's driver and context open on a thread while the model and tokenizer are read */
    if (s->device != ZR_DEVICE_CPU) r->cuda_early = zr_cuda_early_start();
    if (zr_run_load(r, &err)) goto fail;
    if (zr_chat_template_pick(&c.tmpl, s->chat_template, &r->model.gguf, &c.tmpl_how, &err)) {
        if (err.code != ZR_E_USAGE) zr_err_wrap(&err, "%s", s->model);
        goto fail;
    }
    find_stop_ids(&c);
    r->n_ctx = s->n_ctx ? s->n_ctx : zr_backend_default_ctx(&r->model, 0);
    if (pipe(wake) || fcntl(wake[1], F_SETFL, O_NONBLOCK) || fcntl(wake[0], F_SETFL, O_NONBLOCK)) {
        zr_err(&err, ZR_E_IO, "chat: a pipe for Ctrl-C: %s", strerror(errno));
        goto fail;
    }
    r->wake_fd = wake[1];
    c.wake_rd = wake[0];
    r->sigint_rearm = true;

    ZrProgress progress;
    zr_progress_init(&progress, "zrun: loading", !s->quiet && env->stderr_tty);
    char plan_cache[4096];
    const ZrBackendOptions bo = {
        .n_ctx = r->n_ctx,
        .kv_type = s->kv_type,
        .n_threads = s->n_threads,
        .graph = s->graph >= 0 ? s->graph > 0 : env->graph,
        .verify_graph = s->verify_graph,
        .graph_steps = s->graph_steps,
        .profile = s->profile,
        .log_launches = s->log_launches,
        .graph_dot = s->graph_dot,
        .fault = fault,
        .quiet = s->quiet,
        .plan_cache = zr_backend_plan_cache(s->plan_cache, s->no_plan_cache, env->xdg_cache_home, env->home, plan_cache,
                                            sizeof plan_cache),
        .progress = zr_progress_cb,
        .progress_ctx = &progress,
        .stop = zr_run_stop_cb,
        .stop_ctx = r,
        .cuda_early = r->cuda_early,
        .first_rows = ZR_FIRST_ROWS_LATER, /* the first prompt comes later: the GEMM set-up goes on beside it */
    };
    r->cuda_early = NULL; /* the backend's now */
    r->sp = s->sampler;
    r->sp.repeat_last_n = s->repeat_last_n < 0 ? r->n_ctx : s->repeat_last_n;
    if (!s->seed_given) r->sp.seed = clock_seed();
    zr_run_block_sigint(r);
    ZrBackend *be = zr_backend_open(s->device, &r->model, &bo, s->quiet ? NULL : "zrun", &err);
    zr_progress_end(&progress);
    if (!be || zr_run_start(r, be, NULL, -1, &err)) goto fail;
    zr_run_notes(r);
    if (!s->quiet && s->verbose)
        fprintf(stderr, "zrun: chat template %s (%s)\n", zr_chat_template_name(c.tmpl), c.tmpl_how);
    if (!(in = zr_line_open("zrun", env->stdin_tty, wake[0]))) {
        zr_err(&err, ZR_E_NOMEM, "chat: cannot start reading lines (libedit)");
        goto fail;
    }

    r->stop = ZR_STOP_LIMIT;
    bool ctrl_c = false; /* at the prompt: the conversation ends with exit status 130 */
    /* -sys with -p: rendered and fed together, as llama.cpp does; -sys alone: fed now */
    if (s->system_prompt && !none && zr_conversation_add(&c.conv, "system", s->system_prompt, &err)) goto fail;
    if (s->system_prompt && none && turn(&c, "system", s->system_prompt, false, &err)) goto fail;
    if (!c.context_full && !none && turn(&c, "user", first, true, &err)) goto fail;
    while (!c.context_full && !(s->single_turn && !none)) {
        const char *line;
        size_t len;
        ZrLineStatus ls = zr_line_read(in, "> ", &line, &len);
        if (ls == ZR_LINE_ERROR) {
            zr_err(&err, ZR_E_IO, "reading standard input: %s", strerror(errno));
            goto fail;
        }
        if (ls == ZR_LINE_INTERRUPT) ctrl_c = true;
        if (ls != ZR_LINE_OK || !strcmp(line, "/exit")) break;
        if (!len) continue; /* an empty line is no turn */
        if (turn(&c, "user", line, true, &err)) goto fail;
        if (s->single_turn) break;
    }
    summary(&c);
    rc = ctrl_c ? ZR_EXIT_INTERRUPTED : 0;
    goto done;
fail:
    rc = zr_run_fail(&err);
    if (r->be) summary(&c);
done:
    zr_line_close(in);
    zr_run_free(r);
    zr_conversation_free(&c.conv);
    free(c.reply);
    free(c.cached);
    free(first);
    if (wake[0] >= 0) close(wake[0]), close(wake[1]);
    return rc;
}

int zr_cmd_chat(int argc, char **argv, const ZrEnv *env) {
    ZrRunSettings s;
    ZrError err = {0};
    if (zr_cli_parse_chat(&s, argc, argv, &err)) {
        fprintf(stderr, "zrun chat: %s (see zrun chat --help)\n", err.msg);
        return 2;
    }
    if (s.help)
        return zr_print_help("usage: zrun chat -m FILE [-sys TEXT] [-p FIRST] [--chat-template NAME|FILE] [options]",
                             "chat options (zrun chat, zrun -cnv):");
    return zr_chat_session(&s, env);
}
