/* Non-finite logits (NaN or +-inf: weights that hold them, or activations that overflow) would
 * be sampled into garbage text with exit 0. Every backend refuses them where it makes logits
 * the host sees (forward's rows; the greedy pick's report), so every command stops with a
 * message that names the model and the token position. */
#pragma once
#include <stdint.h>

#include "err.h"

/* The first index of v[0..n) whose value is NaN or +-inf, or -1. */
int64_t zr_logits_first_nonfinite(const float *v, int64_t n);
/* Checks n_rows rows of n_vocab logits, row r made at position pos0 + r; fails with
 * ZR_E_FORMAT naming model, the position, the value and the token id. */
int zr_logits_check(const char *model, const float *rows, int n_rows, int64_t n_vocab, int pos0, ZrError *err);
/* The same error for a pick made where the value is not at hand (on the device): value NULL. */
int zr_logits_nonfinite_error(const char *model, int pos, int64_t id, const float *value, ZrError *err);
