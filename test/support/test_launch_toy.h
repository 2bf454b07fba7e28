/* A toy decode step for the graph tests, run on the driver double (CPU) or a real GPU: the
 * same host code, kernels of the same names (cu/graph_selftest.cu on the GPU, host functions in
 * the double). It has what matters for the graph: a KV cache written at the position read from
 * device memory, logits that depend on every position so far, a by-value parameter, buffers
 * that can move (epoch), and a backend-style recover hook that recreates the context and
 * re-prefills the history.
 *   zr_selftest_embed(kv, io)               kv[pos] = f(token)         io = int32 {token, pos}
 *   zr_selftest_attend(logits, kv, io, n)   logits[i] = sum_{j<=pos} kv[j] * w(i, j)
 *   zr_selftest_attend_pv(logits, kv, pos, n)  the same with pos passed BY VALUE (a bug the
 *                                           replay check must catch)
 *   zr_selftest_scale(x, s, n)              x[i] *= s */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "cuda/graph.h"

typedef struct Toy {
    const ZrCuDriver *drv;
    const void *image;  /* module image for recovery */
    ZrCuda cuda;
    ZrLauncher l;
    ZrKernel embed, attend, attend_pv, scale;
    CUdeviceptr d_io;     /* int32 [2]: token, position */
    CUdeviceptr d_kv;     /* f32 [n_ctx] */
    CUdeviceptr d_logits; /* f32 [n_vocab] */
    int n_ctx, n_vocab;
    bool pos_by_value;    /* use attend_pv: a step that bakes the position into a parameter */
    int cur_pos;
    int32_t history[4096];/* tokens fed so far, at positions 0.. */
    int n_hist;
    ZrDecodeIO io;
    int recover_calls;
} Toy;

int toy_open(Toy *t, const ZrCuDriver *drv, const void *image, int n_ctx, int n_vocab, ZrError *err);
void toy_close(Toy *t);
/* Moves every buffer (new allocations, contents copied) and bumps the epoch. */
int toy_move_buffers(Toy *t, ZrError *err);
/* Decodes n_steps tokens from position 0 through the controller; logits[n_steps][n_vocab].
 * move_at >= 0 moves the buffers after that step. */
int toy_run(Toy *t, const ZrDecodeOptions *o, int n_steps, float *logits, int move_at, ZrDecodeStats *stats,
            ZrError *err);
/* The token fed at step k. */
int32_t toy_token(int k);
