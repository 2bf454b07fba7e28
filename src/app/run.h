/* zrun -m FILE -p PROMPT: what its two paths share. A fresh run (cmd_run.c) encodes the prompt,
 * prefills and decodes; a run that goes on in a new process after the CUDA context was lost
 * (cmd_resume.c, src/app/resume.h) restores the first process's state and decodes on. Both load
 * the model and tokenizer, start the backend and sampler, and run the same decode loop and
 * summary, here.
 *
 * Stopping: an end-of-generation token (not printed, unless --ignore-eos), -n tokens, a full
 * context (prompt + generated = n_ctx), or a reverse prompt (-r) at the end of the text.
 * Ctrl-C (SIGINT) stops after the current token (during the prefill: between two layers),
 * prints the summary and exits 130; a second Ctrl-C kills at once. SIGINT is blocked in every
 * thread and taken by one watcher thread (sigwait), which raises the run's flag and then lets
 * the next SIGINT take its default action; so no flag lives in a global and no handler runs. */
#pragma once
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "cli.h"
#include "env.h"
#include "model.h"
#include "sampler.h"
#include "tokenizer.h"

#define ZR_EXIT_INTERRUPTED 130

typedef enum ZrStop { ZR_STOP_LIMIT, ZR_STOP_EOG, ZR_STOP_CONTEXT, ZR_STOP_INTERRUPT, ZR_STOP_REVERSE } ZrStop;

#define ZR_RUN_TAIL 256 /* bytes of generated text kept to find a reverse prompt (-r) at its end */

typedef struct ZrRun {
    const ZrRunSettings *s;
    ZrModel model;
    bool model_loaded;
    ZrTokenizer *tok;
    ZrBackend *be;
    ZrCudaEarly *cuda_early; /* the driver and context opening beside the model's parse until the
                              * backend takes them over (ZrBackendOptions.cuda_early); else NULL */
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
    int32_t cur;         /* while decoding: the token printed that the next step feeds */
    bool out_failed;     /* writing stdout failed: the decode loop stopped */
    uint64_t host_steps; /* decode steps whose token was sampled on the host from logits copied back */
    ZrStop stop;
    double t_load0, load_ms, prefill_ms, decode_ms, t_dec0, lost_at_ms;
    double t_start;      /* the process's start (ZrEnv.t_start_ms); 0: not this process's (resumed) */
    double t_first;      /* when the first generated token was written; 0: none yet */
    int32_t *eog;        /* [n_eog] the end-of-generation ids (--ignore-eos masks them) */
    int n_eog;
    char *rev[ZR_MAX_REVERSE]; /* the reverse prompts (-r), escapes processed with -e */
    size_t rev_len[ZR_MAX_REVERSE];
    int n_rev;
    char tail[ZR_RUN_TAIL]; /* the last n_tail bytes of generated text */
    size_t n_tail;
    sigset_t old_mask;
    bool blocked;
    atomic_int interrupted; /* set by the watcher at the first Ctrl-C */
    bool sigint_rearm;      /* the chat: every Ctrl-C raises the flag (none kills); set before
                             * zr_run_block_sigint */
    int wake_fd;            /* >= 0: the watcher also writes a byte here at each Ctrl-C (the chat's
                             * prompt polls it); zr_run_init sets -1 */
    pthread_t watcher;
    bool watching;
} ZrRun;

/* The two paths; each returns the exit code. argv as zr_cmd_run got it (a fresh run passes it
 * on to the process it goes on in). */
int zr_run_fresh(const ZrRunSettings *s, const ZrEnv *env, int argc, char **argv); /* cmd_run.c */
int zr_run_resume(const ZrRunSettings *s, const ZrEnv *env);                       /* cmd_resume.c */
/* A conversation (zrun chat, zrun -cnv): s->chat; the exit code. */
int zr_chat_session(const ZrRunSettings *s, const ZrEnv *env);                     /* cmd_chat.c */

/* Empty, so zr_run_free is safe from here on. */
void zr_run_init(ZrRun *r, const ZrRunSettings *s);
/* The model and its tokenizer (-m), checked against each other. */
int zr_run_load(ZrRun *r, ZrError *err);
/* Blocks Ctrl-C until zr_run_free and starts the watcher thread that takes it: called before
 * any backend thread exists (workers and driver threads inherit the mask). */
void zr_run_block_sigint(ZrRun *r);
/* Whether Ctrl-C was pressed. */
bool zr_run_take_sigint(ZrRun *r);
/* Forgets a Ctrl-C taken (the chat goes on after a reply it stopped). */
void zr_run_clear_sigint(ZrRun *r);
/* The same, as a ZrBackendOptions.stop callback (ctx: the ZrRun). */
bool zr_run_stop_cb(void *ctx);
/* Takes be (its owner from here, also on failure). With n_ctx, n_prompt and sp set: grows ids
 * to n_ctx, puts the context-lost test hook in front of be when fault asks for it (decode steps
 * <= after_step never fire; -1 none), creates the sampler and the output buffers, and lists
 * what --ignore-eos and -r need. */
int zr_run_start(ZrRun *r, ZrBackend *be, const char *fault, int after_step, ZrError *err);
/* Writes n bytes of text to stdout, flushed. */
int zr_run_write(ZrRun *r, const char *buf, size_t n);
/* Samples, prints and feeds tokens from the logits at pos - 1 until a stop (r->stop), then ends
 * the text: the first token on the host, the rest through the backend's decode_run (which
 * streams each token to the printer as it is picked). ZR_E_CONTEXT_LOST leaves r->pending (printed, not fed), r->decode_ms and
 * r->lost_at_ms for going on elsewhere. */
int zr_run_decode(ZrRun *r, ZrError *err);
/* The summary on stderr (not with --quiet); note, when not NULL, is one more line. When stdout
 * and stderr are the same file and the text did not end a line, it starts on a new one. */
void zr_run_summary(const ZrRun *r, const char *note);
/* The notes on stderr before a run (not with --quiet): llama.cpp options that do not apply, and
 * with -v the settings as resolved. */
void zr_run_notes(const ZrRun *r);
/* Prints the error; the exit code for it. */
int zr_run_fail(const ZrError *err);
void zr_run_free(ZrRun *r);
