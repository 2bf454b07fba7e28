/* Weight matrices for the GPU kernel tests: random rows in ggml's layout of a type, and their
 * upload in the device layout (repacked as the backend repacks them: cuda/weights.h). */
#pragma once
#include <stdint.h>

#include "cuda/weights.h"
#include "gpu_env.h"

/* A random [n_in, n_out] matrix in ggml's layout of `type` (malloc'ed, zr_row_bytes per row):
 * rows with their own scale and an offset, so the formats' min and offset terms matter; NULL
 * when the quantizer refuses the type. */
uint8_t *gpu_random_matrix(uint32_t type, int n_in, int n_out, uint64_t *s);

/* Repacks a ggml-layout matrix into the device layout and uploads it. */
ZrCuWeight gpu_upload_weight(GpuEnv *g, uint32_t type, const uint8_t *w, int n_in, int n_out);
