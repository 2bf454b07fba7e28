/* Decoding a prompt's continuation two ways, for the tests of ZrBackend.decode_run: through the
 * backend's decode_run, and through the reference loop written out here (forward one token,
 * zr_decode_pick_host), so a test can hold any backend's loop to the host's tokens; and the five
 * sampling settings issue 12 checks every backend with. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "sampler.h"

#define ZT_N_SAMPLINGS 5

typedef struct ZtSampling {
    const char *name; /* "greedy", "default", "top-k", "top-p", "penalties" */
    ZrSamplerParams sp;
} ZtSampling;

/* greedy (temp 0), default (zr_sampler_defaults), top-k only (top-k 5, top-p 1, min-p 0), top-p
 * only (top-k 0, top-p 0.9, min-p 0), penalties on (default chain, repeat 1.3, presence 0.4,
 * frequency 0.2, last 32); each with the seed. */
void zt_samplings(ZtSampling out[ZT_N_SAMPLINGS], uint64_t seed);

typedef struct ZtDecode {
    const ZrSamplerParams *sp;
    int n_cand;            /* ids that may be picked */
    const int32_t *ban;    /* [n_ban] */
    int n_ban;
    const int32_t *prompt; /* [n_prompt] >= 1, prefilled at 0 (the cache must be empty) */
    int n_prompt;
    int n;                 /* tokens to pick: the first from the prompt's logits, then n - 1 steps */
    int stop_after;        /* > 0: on_token refuses the stop_after-th token of the loop (a stop); else n */
    bool reference;        /* the loop written out here, not be->decode_run */
} ZtDecode;

typedef struct ZtDecoded {
    int32_t *tokens;       /* [n] picked (malloc'ed) */
    int n_tokens;
    int steps;             /* decode steps done (decode_run's count) */
    uint64_t host_steps;
    uint8_t *state;        /* the sampler's state at the end (zr_sampler_get_state; malloc'ed) */
    size_t state_len;
} ZtDecoded;

/* Prefills d->prompt on be (n_vocab: the model's output rows) and picks d->n tokens. */
int zt_decode(ZrBackend *be, int n_vocab, const ZtDecode *d, ZtDecoded *out, ZrError *err);
void zt_decoded_free(ZtDecoded *o);

/* One greedy decode step through be->decode_run (max_steps 1): token at pos, the pick over ids
 * [0, n_cand) into *next, the step's logits into logits[n_vocab] when not NULL. */
int zt_greedy_step(ZrBackend *be, int n_vocab, int32_t token, int pos, int n_cand, float *logits, int32_t *next,
                   ZrError *err);

/* An on_token that appends each token at *(int32_t **)ctx and moves it on; always goes on (the
 * loop's max_steps bounds it). */
bool zt_collect_into(void *ctx, int32_t token);
