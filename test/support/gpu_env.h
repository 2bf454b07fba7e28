/* Shared setup of the GPU tests: the driver, a context, the embedded kernels and a launcher,
 * opened once per test program. gpu_env() returns NULL (after zt_skip) when no GPU is usable,
 * so every test skips on a machine without one and the program exits 77. */
#pragma once
#include "cuda/driver.h"
#include "cuda/forward.h"
#include "cuda/launch.h"
#include "cuda/module.h"

typedef struct GpuEnv {
    const ZrCuDriver *drv;
    ZrCuda cuda;
    ZrLauncher l;
    ZrCuKernels k;
} GpuEnv;

GpuEnv *gpu_env(void);

/* Device buffer helpers that fail the test program loudly (a GPU test cannot go on without them). */
CUdeviceptr gpu_upload(GpuEnv *g, const void *src, size_t bytes);
CUdeviceptr gpu_alloc(GpuEnv *g, size_t bytes);
void gpu_download(GpuEnv *g, void *dst, CUdeviceptr src, size_t bytes);
void gpu_free(GpuEnv *g, CUdeviceptr p);

/* Deterministic uniform [-1, 1) and normal-ish values. */
float gpu_rand(uint64_t *s);
