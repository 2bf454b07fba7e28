/* The one matrix product of the CPU backend: weights of any type times F32 activations.
 * Each weight row is dequantized once (into a per-thread buffer) and dotted with every token
 * vector of the batch, so a prefill reads each weight once and a decode step (n = 1) goes
 * through the same code with the same rounding: prefill and decode logits agree bit for bit. */
#pragma once
#include "model.h"
#include "pool.h"

#define ZR_CPU_MATMUL_MAX 3
/* Rows dequantized together: a batch's token vectors are then streamed once per tile of rows
 * rather than once per row. */
#define ZR_CPU_MATMUL_TILE 8

/* One product y[n][w->ne1] = x[n][w->ne0] . w^T */
typedef struct ZrCpuMatmul {
    const ZrWeight *w;
    float *y;
} ZrCpuMatmul;

/* Runs up to ZR_CPU_MATMUL_MAX products that share the input x (e.g. q, k and v), their rows
 * split across the pool's threads. rowbuf is [threads][rowbuf_len] scratch, rowbuf_len >=
 * ZR_CPU_MATMUL_TILE x every w->ne0. */
void zr_cpu_matmul(ZrCpuPool *pool, float *rowbuf, int64_t rowbuf_len, const ZrCpuMatmul *mm, int n_mm,
                   const float *x, int n);
