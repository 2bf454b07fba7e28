/* The one matrix product of the CPU backend: weights of any type times F32 activations, through
 * quant.h's zr_dot_row (dequantization on the fly, block by block). Every weight row is dotted
 * with every token vector of the batch while it is in cache, so a prefill reads each weight
 * from memory once, and a decode step (n = 1) goes through the same code with the same
 * rounding: prefill and decode logits agree bit for bit. */
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

/* Runs up to ZR_CPU_MATMUL_MAX products that share the input x (e.g. q, k and v), their rows
 * split across the pool's threads. */
void zr_cpu_matmul(ZrCpuPool *pool, const ZrCpuMatmul *mm, int n_mm, const float *x, int n);
