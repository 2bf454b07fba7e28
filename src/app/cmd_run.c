/* zrun -m FILE -p PROMPT ...: load, tokenize, prefill the prompt in one forward call, then
 * sample and decode token by token, streaming text to stdout; a summary goes to stderr (the
 * loop and the summary: run.c).
 *
 * A lost CUDA context (ZR_E_CONTEXT_LOST: the driver keeps a sticky error for the whole
 * process) does not end the run: it goes on in a new process, eagerly, once (src/app/resume.h;
 * that process takes the other path, cmd_resume.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend_open.h"
#include "progress.h"
#include "cmd.h"
#include "resume.h"
#include "run.h"
#include "zr_clock.h"

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
        if (n > (size_t)1 << 30) { /* an endless stream (/dev/zero) ends here */
            free(buf);
            zr_err(err, ZR_E_RANGE, "%s: the prompt is longer than 1 GiB (the tokenizer's limit)", label);
            return NULL;
        }
    }
    if (ferror(f)) {
        free(buf);
        zr_err(err, ZR_E_IO, "%s: read error: %s", label, strerror(errno));
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
        struct stat st;
        if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
            fclose(f);
            zr_err(err, ZR_E_IO, "%s: is a directory; -f expects a file holding the prompt", s->prompt_file);
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

/* The prompt's ids into r->ids / r->n_prompt, checked against the context. */
static int encode_prompt(ZrRun *r, const char *text, size_t text_len, ZrError *err) {
    size_t n = 0;
    if (zr_tokenizer_encode(r->tok, text, text_len, true, r->s->special, &r->ids, &n, err)) return err->code;
    if (n == 0) {
        /* An empty prompt starts from BOS alone (the tokenizer adds it when the model asks for
         * it; models that do not still get it here, as there is nothing else to start from). */
        int32_t bos = zr_tokenizer_bos(r->tok);
        if (bos < 0) return zr_err(err, ZR_E_RANGE, "the prompt is empty and %s has no BOS token to start from", r->s->model);
        free(r->ids);
        r->ids = malloc(sizeof *r->ids);
        if (!r->ids) return zr_err(err, ZR_E_NOMEM, "out of memory");
        r->ids[0] = bos;
        n = 1;
    }
    if (n > (size_t)r->n_ctx)
        return zr_err(err, ZR_E_RANGE,
                      "the prompt is %zu tokens, longer than the context of %d tokens (raise -c; the model was trained with %d)",
                      n, r->n_ctx, r->model.hp.n_ctx_train);
    r->n_prompt = (int)n;
    return ZR_OK;
}

/* "the CUDA context was lost (CAUSE)" from a ZR_E_CONTEXT_LOST message (see err.h). */
static void lost_head(const char *msg, char *out, size_t cap) {
    const char *close = strchr(msg, ')');
    int n = close ? (int)(close - msg + 1) : (int)strlen(msg);
    snprintf(out, cap, "%.*s", n, msg);
}

/* Where the decode loop stands: what the run needs to go on in a new process. */
static int state_from(const ZrRun *r, const ZrResumeState *model_id, const char *cause, ZrResumeState *st,
                      ZrError *err) {
    memset(st, 0, sizeof *st);
    memcpy(st->model, model_id->model, sizeof st->model);
    st->model_size = model_id->model_size;
    st->model_mtime_s = model_id->model_mtime_s;
    st->model_mtime_ns = model_id->model_mtime_ns;
    snprintf(st->backend, sizeof st->backend, "%s", r->be->name);
    snprintf(st->cause, sizeof st->cause, "%s", cause);
    st->n_vocab = r->n_vocab;
    st->n_ctx = r->n_ctx;
    st->kv_type = r->s->kv_type;
    st->n_predict = r->n_predict;
    st->sampler = r->sp;
    st->n_prompt = r->n_prompt;
    st->n_fed = r->pos;
    st->tokens = r->ids; /* borrowed: never freed here */
    st->pending = r->pending;
    st->n_gen = r->n_gen;
    st->n_decode = r->n_decode;
    st->sampler_state_len = (uint32_t)zr_sampler_state_size(r->smp);
    st->sampler_state = malloc(st->sampler_state_len ? st->sampler_state_len : 1);
    if (!st->sampler_state) return zr_err(err, ZR_E_NOMEM, "out of memory for the sampler state");
    zr_sampler_get_state(r->smp, st->sampler_state);
    memcpy(st->detok_pending, r->detok.pending, sizeof st->detok_pending);
    st->detok_n_pending = r->detok.n_pending;
    st->detok_at_start = r->detok.at_start;
    st->detok_special = r->detok.special;
    st->last = r->last;
    st->load_ms = r->load_ms;
    st->prefill_ms = r->prefill_ms;
    st->decode_ms = r->decode_ms;
    st->lost_at_ms = r->lost_at_ms;
    return ZR_OK;
}

/* The decode step lost the context (err): replaces this process with one that goes on (frees
 * the backend first, so the new one has the GPU's memory). model_id: the model file as it was
 * loaded. Returns only on failure, with err set. */
static int go_on_in_new_process(ZrRun *r, const ZrResumeState *model_id, int argc, char **argv, ZrError *err) {
    char cause[256];
    lost_head(err->msg, cause, sizeof cause);
    ZrResumeState st;
    ZrError e2 = {0};
    int rc = state_from(r, model_id, cause, &st, &e2);
    if (!rc) {
        r->be->destroy(r->be);
        r->be = NULL;
        fprintf(stderr, "zrun: %s: continuing in a new process, eager\n", cause);
        rc = zr_resume_exec(&st, argc, argv, &e2);
    }
    st.tokens = NULL; /* borrowed */
    zr_resume_free(&st);
    zr_err(err, rc, "%s, and the run could not go on in a new process: %s", cause, e2.msg);
    return rc;
}

int zr_run_fresh(const ZrRunSettings *s, const ZrEnv *env, int argc, char **argv) {
    ZrRun r;
    zr_run_init(&r, s);
    r.t_start = env->t_start_ms;
    ZrError err = {0};
    ZrResumeState model_id = {0}; /* the file as loaded: a new process must find the same one */
    size_t text_len = 0;
    char *text = read_prompt(s, &text_len, &err);
    int rc = 1;
    if (!text) goto fail;
    if (s->escape) text_len = zr_cli_unescape(text, text_len);
    /* the GPU's driver and context open on a thread while the model and tokenizer are read */
    if (s->device != ZR_DEVICE_CPU) r.cuda_early = zr_cuda_early_start();
    if (zr_run_load(&r, &err) || zr_resume_stat_model(&model_id, s->model, &err)) goto fail;
    r.n_ctx = s->n_ctx ? s->n_ctx : zr_backend_default_ctx(&r.model, 0);
    if (encode_prompt(&r, text, text_len, &err)) goto fail;

    ZrProgress progress;
    zr_progress_init(&progress, "zrun: loading", !s->quiet && env->stderr_tty);
    char plan_cache[4096];
    const ZrBackendOptions bo = {
        .n_ctx = r.n_ctx,
        .kv_type = s->kv_type,
        .n_threads = s->n_threads,
        .graph = s->graph >= 0 ? s->graph > 0 : env->graph, /* a flag wins over CUDA_GRAPH_ENABLE */
        .verify_graph = s->verify_graph,
        .graph_steps = s->graph_steps,
        .profile = s->profile,
        .log_launches = s->log_launches,
        .graph_dot = s->graph_dot,
        .fault = env->fault,
        .quiet = s->quiet,
        .plan_cache = zr_backend_plan_cache(s->plan_cache, s->no_plan_cache, env->xdg_cache_home, env->home, plan_cache,
                                            sizeof plan_cache),
        .progress = zr_progress_cb,
        .progress_ctx = &progress,
        .stop = zr_run_stop_cb,
        .stop_ctx = &r,
        .cuda_early = r.cuda_early,
        .first_rows = r.n_prompt, /* the load waits only for the GEMM set-up this prompt takes */
    };
    r.cuda_early = NULL; /* the backend's now */
    r.sp = s->sampler;
    r.sp.repeat_last_n = s->repeat_last_n < 0 ? r.n_ctx : s->repeat_last_n;
    if (!s->seed_given) r.sp.seed = clock_seed();
    /* Until here Ctrl-C simply ends zrun (waiting on a prompt from the terminal, say). */
    zr_run_block_sigint(&r);
    ZrBackend *be = zr_backend_open(s->device, &r.model, &bo, s->quiet ? NULL : "zrun", &err);
    zr_progress_end(&progress);
    if (!be || zr_run_start(&r, be, env->fault, -1, &err)) goto fail;
    if (!s->quiet && !strcmp(be->name, "cpu") && (s->graph == 1 || s->profile || s->log_launches || s->graph_dot))
        fprintf(stderr, "zrun: note: --graph, --profile, --log-launches and --graph-dot apply to the CUDA backend; "
                        "the CPU backend decodes eagerly\n");
    zr_run_notes(&r);
    for (int i = 0; i < r.n_prompt; i++) zr_sampler_accept(r.smp, r.ids[i]);

    if (zr_run_take_sigint(&r)) {
        r.stop = ZR_STOP_INTERRUPT;
        goto summary;
    }
    const double t_pre0 = zr_clock_ms();
    if (r.be->forward(r.be, r.ids, r.n_prompt, 0, r.logits, false, &err)) {
        if (err.code != ZR_E_INTERRUPTED) goto fail;
        r.prefill_ms = zr_clock_ms() - t_pre0; /* Ctrl-C during the prefill */
        r.stop = ZR_STOP_INTERRUPT;
        goto summary;
    }
    r.prefill_ms = zr_clock_ms() - t_pre0;
    /* Like llama.cpp, the prompt is echoed first (as the user wrote it), so stdout reads as one
     * text; --no-display-prompt leaves only the generated text. --color shows it apart. */
    const bool color = s->color > 0 || (s->color < 0 && env->stdout_tty && !env->no_color);
    if (!s->no_display_prompt && text_len > 0 &&
        ((color && zr_run_write(&r, "\033[33m", 5)) || zr_run_write(&r, text, text_len) ||
         (color && fputs("\033[0m", stdout) == EOF))) {
        zr_err(&err, ZR_E_IO, "writing standard output: %s", strerror(errno));
        goto fail;
    }
    if (zr_run_decode(&r, &err)) {
        if (err.code == ZR_E_CONTEXT_LOST) go_on_in_new_process(&r, &model_id, argc, argv, &err);
        goto fail;
    }
summary:
    zr_run_summary(&r, NULL);
    rc = r.stop == ZR_STOP_INTERRUPT ? ZR_EXIT_INTERRUPTED : 0;
    goto done;
fail:
    rc = zr_run_fail(&err);
done:
    zr_run_free(&r);
    zr_resume_free(&model_id);
    free(text);
    return rc;
}

int zr_cmd_run(int argc, char **argv, const ZrEnv *env) {
    ZrRunSettings s;
    ZrError err = {0};
    if (zr_cli_parse_run(&s, argc, argv, &err)) {
        fprintf(stderr, "zrun: %s (see zrun --help)\n", err.msg);
        return 2;
    }
    if (s.help)
        return zr_print_help("usage: zrun [run] -m FILE (-p PROMPT | -f FILE) [options]", "generation options (zrun run):");
    if (s.chat) return zr_chat_session(&s, env); /* -cnv, -i, -sys */
    /* the hidden --resume-fd: this process goes on with a run another one began */
    return s.resume_fd >= 0 ? zr_run_resume(&s, env) : zr_run_fresh(&s, env, argc, argv);
}
