/* The sampling chain: penalties (repetition, presence, frequency) -> top-k -> top-p -> min-p -> temperature -> draw,
 * or greedy (temperature 0). A seeded xoshiro/pcg generator: the same seed gives the same text. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef struct ZrSamplerParams {
    float temp;            /* 0 = greedy */
    int top_k;             /* 0 = off */
    float top_p;           /* 1 = off */
    float min_p;           /* 0 = off */
    float repeat_penalty;  /* 1 = off */
    float presence_penalty;  /* subtracted once from a token seen in the window; 0 = off */
    float frequency_penalty; /* subtracted per occurrence in the window; 0 = off */
    int repeat_last_n;     /* tokens the penalties look back over */
    uint64_t seed;
} ZrSamplerParams;

typedef struct ZrSampler ZrSampler;

ZrSamplerParams zr_sampler_defaults(void);
ZrSampler *zr_sampler_create(const ZrSamplerParams *p, int n_vocab, ZrError *err);
void zr_sampler_free(ZrSampler *s);
/* Picks the next token from logits[n_vocab] (logits may be modified). */
int32_t zr_sampler_sample(ZrSampler *s, float *logits);
/* The greedy rule alone: the first id of the largest of logits[0..n) (n >= 1), NaN counting
 * as -inf, 0 when none is above -inf. zr_sampler_sample picks it at temperature 0 after the
 * penalty. */
int32_t zr_sampler_argmax(const float *logits, int n);
/* Whether sampling with p is zr_sampler_argmax of the logits as they come (temperature 0 and no
 * penalty), so a backend may pick on its own (ZrBackend.decode_run). */
bool zr_sampler_is_greedy(const ZrSamplerParams *p);
/* Records a token in the penalty history (prompt tokens and sampled ones). */
void zr_sampler_accept(ZrSampler *s, int32_t id);
/* The running state (generator and penalty history) as bytes, so a run can go on in another
 * process (src/app/resume.h): get writes zr_sampler_state_size bytes; set needs a sampler created
 * with the same parameters and fails (ZR_E_FORMAT) on a size or history that does not fit. */
size_t zr_sampler_state_size(const ZrSampler *s);
void zr_sampler_get_state(const ZrSampler *s, void *buf);
int zr_sampler_set_state(ZrSampler *s, const void *buf, size_t len, ZrError *err);
