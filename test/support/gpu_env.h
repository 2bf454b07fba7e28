/* The GPU fixture of the GPU test programs (test/gpu): whether a GPU is usable, the driver, and a
 * shared context with the embedded kernels and a launcher, opened once per program.
 * Every GPU program's main is gpu_main(): without a usable GPU it exits 77 (SKIP) whatever
 * host-only tests it holds, so the gpu suite never reads OK where nothing ran on a GPU. */
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

/* Why no GPU is usable here (no driver or device, or a build without the CUDA kernels), or NULL
 * when one is. A driver that loads and then fails is a failure (exit 1), not a skip. */
const char *gpu_absent(void);
/* The driver table; NULL when gpu_absent(). */
const ZrCuDriver *gpu_driver(void);
/* zt_run() when a GPU is usable, else every test SKIP and 77. */
int gpu_main(void);

/* The shared context, kernels and launcher; NULL (after zt_skip) without a GPU. */
GpuEnv *gpu_env(void);

/* Device buffer helpers that fail the test program loudly (a GPU test cannot go on without them). */
CUdeviceptr gpu_upload(GpuEnv *g, const void *src, size_t bytes);
CUdeviceptr gpu_alloc(GpuEnv *g, size_t bytes);
void gpu_download(GpuEnv *g, void *dst, CUdeviceptr src, size_t bytes);
void gpu_free(GpuEnv *g, CUdeviceptr p);

/* ADDNORM's block output r [n] as the forward pass leaves it (cuda/mv_shape.h ZrMvPost): r, then
 * its sum of squares in pieces (here one per 64 values, each summed in double), *n_ss of them. */
CUdeviceptr gpu_upload_post_r(GpuEnv *g, const float *r, int n, int *n_ss);

/* Deterministic uniform [-1, 1) and normal-ish values. */
float gpu_rand(uint64_t *s);
