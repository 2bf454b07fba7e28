/* The other half of backend.h's zr_cuda_early_start: the backend takes over what the thread
 * opened. */
#pragma once
#include "backend.h"
#include "cuda/cublaslt.h"
#include "cuda/module.h"

/* Where the thread's time went (ms): the driver opened (dlopen libcuda, cuInit), the context,
 * the kernels' module, cuBLASLt; total: all four. */
typedef struct ZrCudaEarlyTimes {
    double driver, context, kernels, cublaslt, total;
} ZrCudaEarlyTimes;

/* Joins e and frees it: *drv and *cuda as zr_driver_open and zr_cuda_open(drv, 0) left them on
 * the thread, the kernels loaded (when built in: zr_cuda_load_kernels), the context made current
 * on the calling thread; or their error. *lt: cuBLASLt opened there too, or zeroed when it would
 * not open (the backend opens it again for its error). *t: the thread's times. */
int zr_cuda_early_take(ZrCudaEarly *e, const ZrCuDriver **drv, ZrCuda *cuda, ZrCublasLt *lt, ZrCudaEarlyTimes *t,
                       ZrError *err);
