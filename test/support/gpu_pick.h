/* The device side of one pick step for the sampling tests (test_sample, test_sample_full): the
 * logits, tok_pos and the ring of records a sampling or greedy launch reads and writes, the
 * ZrPickIO that names them, and the read-back of a step's record. */
#pragma once
#include <stdint.h>

#include "cuda/sample.h"
#include "gpu_env.h"

typedef struct ZtPick {
    CUdeviceptr logits;  /* n_vocab floats */
    CUdeviceptr tok_pos; /* int32 [2]: the last token and its position */
    CUdeviceptr ring;    /* n_slots ZrPickRecord */
    ZrPickIO io;         /* over the first n_cand logits */
} ZtPick;

/* Allocates the three buffers (a failed allocation fails the test: gpu_alloc). */
ZtPick zt_pick_open(GpuEnv *g, int n_vocab, int n_cand, int n_slots);
void zt_pick_close(GpuEnv *g, ZtPick *p);
/* The record of the step at position pos (slot pos mod n_slots) and tok_pos after the step. */
void zt_pick_read(GpuEnv *g, const ZtPick *p, int32_t pos, ZrPickRecord *rec, int32_t tok_pos[2]);
