/* zrun ... --resume-fd N: the run path of a process that goes on with a run after the first
 * process lost its CUDA context (src/app/resume.h). It restores the state instead of reading a
 * prompt: the model must be the same file, the backend the same one, the KV cache is fed again
 * exactly as the first process fed it, the sampler and detokenizer go on where they were; then
 * the shared decode loop (run.c) carries on, eagerly. Nothing already printed is printed again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_open.h"
#include "fault_lost.h"
#include "resume.h"
#include "run.h"
#include "zr_clock.h"

/* The KV cache again, fed exactly as the first process fed it (the prompt in one call, then one
 * decode step per token, so every entry is bit for bit the same), then the lost step itself: its
 * logits are where the first process stopped. Nothing is printed. */
static int feed_again(ZrRun *r, const ZrResumeState *rs, ZrError *err) {
    ZrBackend *be = r->be;
    if (be->forward(be, r->ids, r->n_prompt, 0, r->logits, false, err)) return err->code;
    for (int p = r->n_prompt; p < rs->n_fed; p++)
        if (be->forward(be, &r->ids[p], 1, p, r->logits, false, err)) return err->code;
    if (be->forward(be, &rs->pending, 1, rs->n_fed, r->logits, false, err)) return err->code;
    r->ids[rs->n_fed] = rs->pending;
    r->pos = rs->n_fed + 1;
    r->n_gen = rs->n_gen;
    r->n_decode = rs->n_decode + 1;
    r->last = rs->last;
    memcpy(r->detok.pending, rs->detok_pending, sizeof r->detok.pending);
    r->detok.n_pending = rs->detok_n_pending;
    r->detok.at_start = rs->detok_at_start;
    r->detok.special = rs->detok_special;
    r->prefill_ms = rs->prefill_ms;
    return ZR_OK;
}

int zr_run_resume(const ZrRunSettings *s, const ZrEnv *env) {
    ZrRun r;
    zr_run_init(&r, s);
    ZrError err = {0};
    ZrResumeState rs = {0};
    int rc = 1;
    if (zr_resume_read_fd(s->resume_fd, &rs, &err)) goto fail;
    if (zr_run_load(&r, &err) || zr_resume_check_model(&rs, s->model, r.n_vocab, &err)) goto fail;
    r.n_ctx = rs.n_ctx;
    r.n_predict = rs.n_predict;
    r.n_prompt = rs.n_prompt;
    r.sp = rs.sampler;
    r.ids = malloc((size_t)rs.n_ctx * sizeof *r.ids);
    if (!r.ids) {
        zr_err(&err, ZR_E_NOMEM, "out of memory for %d token ids", rs.n_ctx);
        goto fail;
    }
    memcpy(r.ids, rs.tokens, (size_t)rs.n_fed * sizeof *r.ids);

    char plan_cache[4096];
    const ZrBackendOptions bo = {
        .n_ctx = r.n_ctx,
        .kv_type = rs.kv_type, /* the first process's cache: the same values in it */
        .n_threads = s->n_threads,
        .graph = false, /* a resumed run decodes eagerly */
        .verify_graph = s->verify_graph,
        .graph_steps = s->graph_steps,
        .profile = s->profile,
        .quiet = true, /* the first process said which device it runs on */
        .plan_cache = zr_backend_plan_cache(s->plan_cache, s->no_plan_cache, env->xdg_cache_home, env->home, plan_cache,
                                            sizeof plan_cache),
        /* no graph fault, no launch log, no dot file: those were the first process's */
    };
    /* (a resumed run inherits the blocked mask and any pending Ctrl-C across exec) */
    zr_run_block_sigint(&r);
    /* the backend the first process used: the same numbers need the same one, so no fallback */
    ZrBackend *be = !strcmp(rs.backend, "cpu") ? zr_cpu_backend_create(&r.model, &bo, &err)
                                               : zr_cuda_backend_create(&r.model, &bo, &err);
    if (!be) {
        zr_err_wrap(&err, "going on with the %s backend in a new process", rs.backend);
        goto fail;
    }
    /* context-lost counts its steps over the whole run: the ones up to the loss are spent */
    const char *lost = zr_fault_lost_is(env->fault) ? env->fault : NULL;
    if (zr_run_start(&r, be, lost, rs.n_decode, &err)) goto fail;
    if (zr_sampler_set_state(r.smp, rs.sampler_state, rs.sampler_state_len, &err)) {
        zr_err_wrap(&err, "resume state");
        goto fail;
    }
    const double t0 = zr_clock_ms();
    if (feed_again(&r, &rs, &err)) goto lost_again;
    const double rebuild_ms = zr_clock_ms() - t0;
    if (zr_run_decode(&r, &err)) {
        if (err.code == ZR_E_CONTEXT_LOST) goto lost_again;
        goto fail;
    }

    /* the first process's load and prompt, the decode time of both */
    char note[512];
    snprintf(note, sizeof note,
             "%s at decode step %d; the run went on in a new process %.1f ms later (load %.1f ms, %d tokens fed "
             "again in %.1f ms)",
             rs.cause, rs.n_decode, r.t_dec0 - rs.lost_at_ms, r.load_ms, rs.n_fed + 1, rebuild_ms);
    r.load_ms = rs.load_ms;
    r.decode_ms += rs.decode_ms;
    zr_run_summary(&r, note);
    rc = r.stop == ZR_STOP_INTERRUPT ? ZR_EXIT_INTERRUPTED : 0;
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
               msg, rs.n_decode, r.n_gen > rs.n_gen ? r.n_gen : rs.n_gen);
    } else {
        zr_err_wrap(&err, "going on in a new process after %s at decode step %d", rs.cause, rs.n_decode);
    }
fail:
    rc = zr_run_fail(&err);
done:
    zr_run_free(&r);
    zr_resume_free(&rs);
    return rc;
}
