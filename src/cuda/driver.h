/* The CUDA Driver API, opened at run time: dlopen("libcuda.so.1"), then every entry point is
 * resolved through cuGetProcAddress into ONE function table (zrun's only global). Everything
 * else takes a `const ZrCuDriver *`, so tests can pass a table of fakes (a driver double).
 * No link-time dependency on libcuda, libcudart or cuBLAS. */
#pragma once
#include <stdbool.h>

#include "cuda/cuda_abi.h"
#include "err.h"

typedef struct ZrCuDriver {
    void *lib;          /* dlopen handle; NULL in a test double */
    int driver_version; /* e.g. 13000 */
    PFN_cuGetErrorName cuGetErrorName;
    PFN_cuGetErrorString cuGetErrorString;
    PFN_cuInit cuInit;
    PFN_cuDriverGetVersion cuDriverGetVersion;
    PFN_cuDeviceGet cuDeviceGet;
    PFN_cuDeviceGetCount cuDeviceGetCount;
    PFN_cuDeviceGetName cuDeviceGetName;
    PFN_cuDeviceTotalMem_v2 cuDeviceTotalMem;
    PFN_cuDeviceGetAttribute cuDeviceGetAttribute;
    PFN_cuDevicePrimaryCtxRetain cuDevicePrimaryCtxRetain;
    PFN_cuDevicePrimaryCtxRelease_v2 cuDevicePrimaryCtxRelease;
    PFN_cuDevicePrimaryCtxReset_v2 cuDevicePrimaryCtxReset;
    PFN_cuCtxSetCurrent cuCtxSetCurrent;
    PFN_cuCtxCreate_v2 cuCtxCreate;   /* optional: a context of our own (not the primary one) */
    PFN_cuCtxDestroy_v2 cuCtxDestroy;
    PFN_cuModuleLoadData cuModuleLoadData;
    PFN_cuModuleUnload cuModuleUnload;
    PFN_cuModuleGetFunction cuModuleGetFunction;
    PFN_cuModuleGetGlobal_v2 cuModuleGetGlobal; /* optional: the timeline build's stamps (cuda/timeline.h) */
    PFN_cuFuncGetParamInfo cuFuncGetParamInfo; /* optional (driver >= 12.4); may be NULL */
    PFN_cuFuncSetAttribute cuFuncSetAttribute;
    PFN_cuFuncGetAttribute cuFuncGetAttribute; /* optional in the table (test doubles leave it NULL) */
    PFN_cuMemGetInfo_v2 cuMemGetInfo;
    PFN_cuMemAlloc_v2 cuMemAlloc;
    PFN_cuMemFree_v2 cuMemFree;
    PFN_cuMemHostAlloc cuMemHostAlloc;
    PFN_cuMemFreeHost cuMemFreeHost;
    PFN_cuMemHostRegister_v2 cuMemHostRegister; /* optional: NULL when absent (the upload pins its own chunks) */
    PFN_cuMemHostUnregister cuMemHostUnregister; /* optional, with cuMemHostRegister */
    PFN_cuMemcpyHtoDAsync_v2 cuMemcpyHtoDAsync;
    PFN_cuMemcpyDtoHAsync_v2 cuMemcpyDtoHAsync;
    PFN_cuMemcpyDtoDAsync_v2 cuMemcpyDtoDAsync;
    PFN_cuMemsetD8Async cuMemsetD8Async;
    PFN_cuMemsetD32Async cuMemsetD32Async;
    PFN_cuStreamCreate cuStreamCreate;
    PFN_cuStreamSynchronize cuStreamSynchronize;
    PFN_cuStreamQuery cuStreamQuery;
    PFN_cuStreamDestroy_v2 cuStreamDestroy;
    PFN_cuEventCreate cuEventCreate;
    PFN_cuEventRecord cuEventRecord;
    PFN_cuStreamWaitEvent cuStreamWaitEvent; /* optional: NULL when absent */
    PFN_cuEventSynchronize cuEventSynchronize;
    PFN_cuEventQuery cuEventQuery; /* optional: NULL when absent */
    PFN_cuEventElapsedTime cuEventElapsedTime;
    PFN_cuEventDestroy_v2 cuEventDestroy;
    PFN_cuLaunchKernel cuLaunchKernel; /* called ONLY by src/cuda/launch.c */
    PFN_cuLaunchKernelEx_v11060 cuLaunchKernelEx; /* optional; ONLY src/cuda/launch.c (PDL on) */
    PFN_cuGraphCreate cuGraphCreate;
    PFN_cuGraphAddKernelNode_v2 cuGraphAddKernelNode;
    PFN_cuGraphAddDependencies_v12030 cuGraphAddDependencies; /* optional (driver >= 12.3); may be NULL */
    PFN_cuGraphKernelNodeSetAttribute_v11000 cuGraphKernelNodeSetAttribute; /* optional; ONLY launch.c, graph.c */
    PFN_cuGraphInstantiateWithFlags cuGraphInstantiateWithFlags;
    PFN_cuGraphLaunch cuGraphLaunch;
    PFN_cuGraphExecDestroy cuGraphExecDestroy;
    PFN_cuGraphDestroy cuGraphDestroy;
    PFN_cuGraphDebugDotPrint cuGraphDebugDotPrint;
} ZrCuDriver;

/* Opens libcuda once (later calls return the same table), calls cuInit and checks that there
 * is at least one device. ZR_E_NODEV with the reason when libcuda is missing, too old, or
 * there is no device; ZR_E_CUDA for other driver failures. */
int zr_driver_open(const ZrCuDriver **out, ZrError *err);

/* "CUDA_ERROR_ILLEGAL_ADDRESS": from cuGetErrorName when the table has it, else from our own
 * list of the codes zrun cares about, else "CUDA error <n>". Never NULL. */
const char *zr_driver_error_name(const ZrCuDriver *drv, CUresult r);

/* Sets err to "<what>: CUDA_ERROR_X (n): <description>" and returns ZR_E_CUDA
 * (ZR_E_NOMEM for CUDA_ERROR_OUT_OF_MEMORY). */
int zr_driver_err(const ZrCuDriver *drv, ZrError *err, CUresult r, const char *what_fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* True for the errors after which the context is unusable and must be destroyed (700, 714-719,
 * 214, 999, ...): every later call in the context returns the same error. */
bool zr_driver_error_is_sticky(CUresult r);

/* Evaluates a driver call; on failure sets err and returns from the enclosing function. */
#define ZR_CU_TRY(drv, err, call, ...)                                        \
    do {                                                                      \
        CUresult zr_r_ = (call);                                              \
        if (zr_r_ != CUDA_SUCCESS) return zr_driver_err((drv), (err), zr_r_, __VA_ARGS__); \
    } while (0)
