/* The one matrix product of the CPU backend: weights of any type times F32 activations, through
 * quant.h's zr_dot_row. Every weight row is dotted with every token vector of the batch while
 * it is in cache, so a prefill reads each weight from memory once. A decode step (n = 1)
 * dequantizes on the fly, block by block; a batch (n > 1) dequantizes a tile of rows once into
 * the caller's scratch and dots the F32 rows with every token. zr_dot_row of a dequantized row
 * as F32 gives the same bits as zr_dot_row of the quantized row (test_quant checks it), so
 * prefill and decode logits still agree bit for bit. */
#pragma once
#include "model.h"
#include "pool.h"

#define ZR_CPU_MATMUL_MAX 3
/* Rows taken together: the batch's token vectors are streamed once per tile of rows rather
 * than once per row. */
#define ZR_CPU_MATMUL_TILE 8

/* One product y[n][w->ne1] = x[n][w->ne0] . w^T */
typedef struct ZrCpuMatmul {
    const ZrWeight *w;
    float *y;
} ZrCpuMatmul;

/* Per-thread room for a dequantized tile: [threads][ZR_CPU_MATMUL_TILE * max_ne0] floats. */
typedef struct ZrCpuScratch {
    float *buf;
    int64_t per_thread; /* floats per thread */
} ZrCpuScratch;

/* Runs up to ZR_CPU_MATMUL_MAX products that share the input x (e.g. q, k and v), their rows
 * split across the pool's threads. scratch may be NULL (every row then dequantizes per token). */
void zr_cpu_matmul(ZrCpuPool *pool, const ZrCpuMatmul *mm, int n_mm, const float *x, int n,
                   const ZrCpuScratch *scratch);
