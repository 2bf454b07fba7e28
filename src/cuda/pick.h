/* The greedy pick on the device (cu/argmax.cu): the decode step's last kernel when the caller
 * samples greedily, so 8 bytes come back per token instead of n_vocab logits. */
#pragma once
#include <stdint.h>

#include "cuda/launch.h"

#define ZR_PICK_MAX_BLOCKS 256 /* cu/argmax.cu ZR_ARGMAX_MAX_BLOCKS */
#define ZR_PICK_THREADS 256    /* cu/argmax.cu ZR_ARGMAX_THREADS */
/* The pick buffer: i32 token, i32 first non-finite (NaN or +-inf) id (or -1), then the
 * kernel's scratch (a counter and one partial per block). Zero it once when allocated; the
 * kernel leaves it ready again. */
#define ZR_PICK_BYTES (16 + ZR_PICK_MAX_BLOCKS * 12)

/* pick[0] = the first id of the largest of logits[0..n) with NaN as -inf (zr_sampler_argmax),
 * pick[1] = the first id of a NaN or +-inf there or -1; logits 16-byte aligned, 1 <= n.
 * argmax_f32 must be the kernel `k`. One launch, through the launcher (so it is recorded into
 * the graph). */
int zr_pick_launch(ZrLauncher *l, const ZrKernel *k, CUdeviceptr logits, int n, CUdeviceptr pick, ZrError *err);
