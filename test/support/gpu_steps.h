/* Timing one device step (a sampling launch, a greedy pick) as the GPU runs it, for the sampling
 * benchmarks of test_sample and test_sample_full: 200 steps queued behind ~15 ms of a busy
 * kernel (so the host's launch rate never shows), a cuEvent between consecutive steps, the
 * median. */
#pragma once
#include <stddef.h>

#include "gpu_env.h"

/* One step on g's stream (launched through g->l): ZR_OK or an error in e. */
typedef int (*ZtStepFn)(GpuEnv *g, void *ctx, ZrError *e);

/* Median µs of one fn(g, ctx) step, or -1 when a launch failed (the message on stderr). busy:
 * busy_bytes of device memory the busy kernel reads (read_bw_probe), sink its 8-byte output. */
float zt_gpu_step_us(GpuEnv *g, ZtStepFn fn, void *ctx, CUdeviceptr busy, size_t busy_bytes, CUdeviceptr sink);
