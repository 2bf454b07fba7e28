/* Going on in a new process after the CUDA context was lost.
 *
 * Some drivers (580.159.04) keep a sticky error (700, 719, ...) for the whole process: no new
 * context can be created in it, whatever is reset or destroyed. A new process can use the GPU
 * again. So when a decode step fails with ZR_E_CONTEXT_LOST, zrun (cmd_run.c) writes the state
 * of the run into an anonymous file (memfd_create, else O_TMPFILE in /tmp), keeps it open across
 * exec, and replaces itself with a new zrun given the same arguments plus
 * "--resume-fd N --no-graph". That process (cmd_resume.c) checks the state and the model file,
 * loads the model, feeds the token history again in the calls it was first fed in (the prompt
 * in one forward, then one decode step per generated token: so the KV cache is bit for bit
 * what it was), restores the sampler and the detokenizer, and goes on: the text is the one a
 * run without the loss prints, nothing lost or repeated.
 *
 * The state only travels to a process on the same machine (host byte order). Its layout:
 *   "ZRRESUME" u32 version u32 size-of-the-rest, then the fields below in order (strings and
 *   byte blobs as u32 length + bytes), the tokens, and an FNV-1a 64 checksum of all before it. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "err.h"
#include "sampler.h"

#define ZR_RESUME_VERSION 3 /* 2: the presence and frequency penalties; 3: the KV cache's type */
#define ZR_RESUME_MAX_TOKENS (1 << 24) /* a sanity bound on n_ctx for a state read back */

typedef struct ZrResumeState {
    uint32_t resumes;           /* times this run already went on in a new process, before this one */
    char model[4096];           /* -m as given */
    uint64_t model_size;        /* the model file when the run began: the new process must find */
    int64_t model_mtime_s;      /*   the same size and modification time */
    int64_t model_mtime_ns;
    char backend[16];           /* "cpu" or "cuda": the new process uses the same one */
    char cause[256];            /* "the CUDA context was lost (CUDA_ERROR_...)" */
    int32_t n_vocab;
    int32_t n_ctx;              /* resolved (-c or the model's) */
    ZrKvType kv_type;           /* -ctk/-ctv resolved: the new process's cache holds the same values */
    int32_t n_predict;          /* -n */
    ZrSamplerParams sampler;    /* as used: seed and repeat_last_n resolved */
    int32_t n_prompt;           /* prompt tokens (fed in one forward, at positions 0..n_prompt) */
    int32_t n_fed;              /* tokens in the KV cache: the prompt + the generated tokens fed */
    int32_t *tokens;            /* [n_fed] malloc'ed */
    int32_t pending;            /* the last sampled token: printed, in the sampler's history, not fed */
    int32_t n_gen;              /* tokens generated (printed) so far, pending included */
    int32_t n_decode;           /* decode steps done (= n_fed - n_prompt) */
    uint8_t *sampler_state;     /* [sampler_state_len] zr_sampler_get_state, malloc'ed */
    uint32_t sampler_state_len;
    char detok_pending[8];      /* the streaming detokenizer's held-back bytes (ZrDetok) */
    int32_t detok_n_pending;
    bool detok_at_start, detok_special;
    char last;                  /* the last byte written to stdout */
    double load_ms, prefill_ms; /* the first process's load and prompt times */
    double decode_ms;           /* decoding time before the loss, over all processes */
    double lost_at_ms;          /* CLOCK_MONOTONIC (system-wide) when the context was lost */
} ZrResumeState;

/* Fills model, model_size and the mtime from the file at path. */
int zr_resume_stat_model(ZrResumeState *st, const char *path, ZrError *err);
/* The state as bytes (malloc'ed *buf) and back. decode checks everything it can without the
 * model: magic, version, sizes, counts against each other, token ids against n_vocab, the
 * checksum; a bad state is ZR_E_FORMAT naming the field. */
int zr_resume_encode(const ZrResumeState *st, uint8_t **buf, size_t *len, ZrError *err);
int zr_resume_decode(const uint8_t *buf, size_t len, ZrResumeState *st, ZrError *err);
/* Reads the whole state from fd (from offset 0) and closes fd. */
int zr_resume_read_fd(int fd, ZrResumeState *st, ZrError *err);
/* The file at path (the new process's -m) must be the one the state was written for, with
 * n_vocab tokens: else ZR_E_USAGE saying what differs. */
int zr_resume_check_model(const ZrResumeState *st, const char *path, int n_vocab, ZrError *err);
/* Writes the state to an anonymous file left open across exec and replaces this process with
 * /proc/self/exe run [--resume-fd N --no-graph] + argv[1..argc) (argv as zr_cmd_run got it;
 * argv[0] names the command). Flushes stdio first. Returns only on failure. */
int zr_resume_exec(const ZrResumeState *st, int argc, char **argv, ZrError *err);
void zr_resume_free(ZrResumeState *st);
