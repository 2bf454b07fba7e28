/* A whole model on a GPU backend against the CPU reference's logits: the tolerances the CUDA
 * model tests hold it to, and their two runs (decode one position at a time, then a prefill in
 * two passes). */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "model.h"

/* Worst row of max|gpu - cpu| / std(cpu row): decode steps (F32 throughout, as the CPU), and
 * prefills with F16 operands (cuBLASLt; F32 weights keep F32 operands: ZT_DECODE_TOL). */
#define ZT_DECODE_TOL 3e-5
#define ZT_PREFILL_TOL 1e-2

/* Whether the model's weights are F32 (embeddings, output and the first layer's wq). */
bool zt_all_f32(const ZrModel *m);

/* tokens [n] on be from an empty cache, against ref [n][n_vocab] (the CPU's logits): decode one
 * position at a time within ZT_DECODE_TOL, then a prefill of the first `split` positions and one
 * of the rest (reading the first's cache) within ZT_PREFILL_TOL (ZT_DECODE_TOL for F32 weights).
 * A line on stderr each, under `name`; lg [n][n_vocab] holds the prefill's logits after. Returns
 * how many of the two runs failed or went over their tolerance. */
int zt_gpu_decode_prefill(ZrBackend *be, const ZrModel *m, const char *name, const int32_t *tokens, int n, int split,
                          const float *ref, float *lg);
