/* zrun -m FILE -p PROMPT: what its two paths share. A fresh run (cmd_run.c) encodes the prompt,
 * prefills and decodes; a run that goes on in a new process after the CUDA context was lost
 * (cmd_resume.c, src/app/resume.h) restores the first process's state and decodes on. Both load
 * the model and tokenizer, start the backend and sampler, and run the same decode loop and
 * summary, here.
 *
 * Stopping: an end-of-generation token (not printed), -n tokens, or a full context (prompt +
 * generated = n_ctx). Ctrl-C (SIGINT) stops after the current token, prints the summary and
 * exits 130; a second Ctrl-C kills at once. SIGINT is blocked and polled between tokens rather
 * than caught by a handler, so no flag has to live in a global. */
#pragma once
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "cli.h"
#include "env.h"
#include "model.h"
#include "sampler.h"
#include "tokenizer.h"

#define ZR_EXIT_INTERRUPTED 130

typedef enum ZrStop { ZR_STOP_LIMIT, ZR_STOP_EOG, ZR_STOP_CONTEXT, ZR_STOP_INTERRUPT } ZrStop;

typedef struct ZrRun {
    const ZrRunSettings *s;
    ZrModel model;
    bool model_loaded;
    ZrTokenizer *tok;
    ZrBackend *be;
    ZrSampler *smp;
    ZrSamplerParams sp;  /* as used: seed and repeat_last_n resolved */
    int n_vocab;         /* the model's output rows */
    int n_tok_vocab;     /* the tokenizer's ids (<= n_vocab): the ids past it (padding) have no text */
    int n_ctx;           /* resolved: -c, the default, or the first process's */
    int n_predict;       /* -n (the first process's, when resumed) */
    int n_prompt;
    int32_t *ids;        /* [n_ctx] the prompt, then the generated tokens fed */
    float *logits;       /* [n_vocab] the last step's */
    char *out;           /* [out_cap] the text of one token */
    size_t out_cap;
    ZrDetok detok;
    char last;           /* the last byte written to stdout */
    int pos;             /* tokens in the KV cache */
    int n_gen, n_decode; /* tokens printed; decode steps done */
    int32_t pending;     /* after a lost step: the token printed whose forward was lost */
    ZrStop stop;
    double t_load0, load_ms, prefill_ms, decode_ms, t_dec0, lost_at_ms;
    sigset_t old_mask;
    bool blocked;
} ZrRun;

/* The two paths; each returns the exit code. argv as zr_cmd_run got it (a fresh run passes it
 * on to the process it goes on in). */
int zr_run_fresh(const ZrRunSettings *s, const ZrEnv *env, int argc, char **argv); /* cmd_run.c */
int zr_run_resume(const ZrRunSettings *s, const ZrEnv *env);                       /* cmd_resume.c */

double zr_run_now_ms(void);
/* Empty, so zr_run_free is safe from here on. */
void zr_run_init(ZrRun *r, const ZrRunSettings *s);
/* The model and its tokenizer (-m), checked against each other. */
int zr_run_load(ZrRun *r, ZrError *err);
/* Blocks Ctrl-C until zr_run_free: called before any backend thread exists (workers and driver
 * threads inherit the mask), so it waits as a pending signal until the decode loop looks. */
void zr_run_block_sigint(ZrRun *r);
/* A pending Ctrl-C, taken: then it is unblocked in this thread, so a second one kills. */
bool zr_run_take_sigint(void);
/* Takes be (its owner from here, also on failure). With n_ctx, n_prompt and sp set: grows ids
 * to n_ctx, puts the context-lost test hook in front of be when fault asks for it (decode steps
 * <= after_step never fire; -1 none), creates the sampler and the output buffers. */
int zr_run_start(ZrRun *r, ZrBackend *be, const char *fault, int after_step, ZrError *err);
/* Writes n bytes of text to stdout, flushed. */
int zr_run_write(ZrRun *r, const char *buf, size_t n);
/* Samples, prints and feeds tokens from the logits at pos - 1 until a stop (r->stop), then ends
 * the text. ZR_E_CONTEXT_LOST leaves r->pending (printed, not fed), r->decode_ms and
 * r->lost_at_ms for going on elsewhere. */
int zr_run_decode(ZrRun *r, ZrError *err);
/* The summary on stderr (not with --quiet); note, when not NULL, is one more line. */
void zr_run_summary(const ZrRun *r, const char *note);
/* Prints the error; the exit code for it. */
int zr_run_fail(const ZrError *err);
void zr_run_free(ZrRun *r);
