/* The other half of backend.h's zr_cuda_early_start: the backend takes over what the thread
 * opened. */
#pragma once
#include "backend.h"
#include "cuda/module.h"

/* Joins e and frees it: *drv and *cuda as zr_driver_open and zr_cuda_open(drv, 0) left them on
 * the thread, the context made current on the calling thread; or their error. *ms: the thread's
 * time from its start to its end. */
int zr_cuda_early_take(ZrCudaEarly *e, const ZrCuDriver **drv, ZrCuda *cuda, double *ms, ZrError *err);
