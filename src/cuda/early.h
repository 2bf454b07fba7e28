/* The other half of backend.h's zr_cuda_early_start: the backend takes over what the thread
 * opened, the context as soon as it exists and the kernels' module when it is loaded. */
#pragma once
#include "backend.h"
#include "cuda/module.h"

/* Where the thread's time went (ms): the driver opened (dlopen libcuda, cuInit), the context,
 * the kernels' module. */
typedef struct ZrCudaEarlyTimes {
    double driver, context, kernels;
} ZrCudaEarlyTimes;

/* Waits until the thread has opened the driver and context (zr_cuda_open(drv, 0)) and makes the
 * context current on the calling thread: *drv and *cuda are the caller's from here on, without
 * the module (cuda->mod NULL), which the thread goes on loading into that context; or the error
 * (nothing handed over). Either way zr_cuda_early_finish (or _drop) must follow. */
int zr_cuda_early_context(ZrCudaEarly *e, const ZrCuDriver **drv, ZrCuda *cuda, ZrError *err);
/* Whether the thread is done (the module loaded or failed): zr_cuda_early_finish will not wait. */
bool zr_cuda_early_loaded(ZrCudaEarly *e);
/* Joins the thread and frees e: *mod is the kernels' module (zr_cuda_load_kernels; NULL when
 * no kernels are built in), or its error; *t the thread's times. After a failed
 * zr_cuda_early_context it only cleans up (*mod NULL, ZR_OK). */
int zr_cuda_early_finish(ZrCudaEarly *e, CUmodule *mod, ZrCudaEarlyTimes *t, ZrError *err);
