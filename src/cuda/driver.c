#include "cuda/driver.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The one global of zrun: the resolved driver entry points. */
static ZrCuDriver g_driver; /* ready once driver_version != 0 */

typedef struct Entry {
    const char *name; /* base name: cuGetProcAddress picks the version from `version` */
    int version;
    size_t offset;
    bool optional;
} Entry;

#define E(fn, v) {#fn, v, offsetof(ZrCuDriver, fn), false}
#define OPT(fn, v) {#fn, v, offsetof(ZrCuDriver, fn), true}
static const Entry k_entries[] = {
    E(cuGetErrorName, 6000),
    E(cuGetErrorString, 6000),
    E(cuInit, 2000),
    E(cuDriverGetVersion, 2020),
    E(cuDeviceGet, 2000),
    E(cuDeviceGetCount, 2000),
    E(cuDeviceGetName, 2000),
    E(cuDeviceTotalMem, ZR_CU_V_MEM),
    E(cuDeviceGetAttribute, 2000),
    E(cuDevicePrimaryCtxRetain, 7000),
    E(cuDevicePrimaryCtxRelease, ZR_CU_V_PRIMARY),
    E(cuDevicePrimaryCtxReset, ZR_CU_V_PRIMARY),
    E(cuCtxSetCurrent, ZR_CU_V_BASE),
    OPT(cuCtxCreate, ZR_CU_V_MEM),
    E(cuCtxDestroy, ZR_CU_V_BASE),
    E(cuModuleLoadData, 2000),
    E(cuModuleUnload, 2000),
    E(cuModuleGetFunction, 2000),
    OPT(cuModuleGetGlobal, 3020),
    OPT(cuFuncGetParamInfo, ZR_CU_V_PARAM_INFO),
    E(cuFuncSetAttribute, 9000),
    OPT(cuFuncGetAttribute, 2020),
    E(cuMemGetInfo, ZR_CU_V_MEM),
    E(cuMemAlloc, ZR_CU_V_MEM),
    E(cuMemFree, ZR_CU_V_MEM),
    E(cuMemHostAlloc, 2020),
    E(cuMemFreeHost, 2000),
    OPT(cuMemHostRegister, 6050),
    OPT(cuMemHostUnregister, 4000),
    E(cuMemcpyHtoDAsync, ZR_CU_V_MEM),
    E(cuMemcpyDtoHAsync, ZR_CU_V_MEM),
    E(cuMemcpyDtoDAsync, ZR_CU_V_MEM),
    E(cuMemsetD8Async, ZR_CU_V_MEM),
    E(cuMemsetD32Async, ZR_CU_V_MEM),
    E(cuStreamCreate, 2000),
    E(cuStreamSynchronize, 2000),
    E(cuStreamQuery, 2000),
    E(cuStreamDestroy, ZR_CU_V_BASE),
    E(cuEventCreate, 2000),
    E(cuEventRecord, 2000),
    OPT(cuStreamWaitEvent, 3020),
    E(cuEventSynchronize, 2000),
    OPT(cuEventQuery, 2000),
    E(cuEventElapsedTime, 2000),
    E(cuEventDestroy, ZR_CU_V_BASE),
    E(cuLaunchKernel, ZR_CU_V_BASE),
    OPT(cuLaunchKernelEx, ZR_CU_V_LAUNCH_EX),
    E(cuGraphCreate, 10000),
    E(cuGraphAddKernelNode, ZR_CU_V_GRAPH_NODE),
    OPT(cuGraphAddDependencies, ZR_CU_V_GRAPH_EDGES),
    OPT(cuGraphKernelNodeSetAttribute, 11000),
    E(cuGraphInstantiateWithFlags, ZR_CU_V_GRAPH_INST),
    E(cuGraphLaunch, 10000),
    E(cuGraphExecDestroy, 10000),
    E(cuGraphDestroy, 10000),
    E(cuGraphDebugDotPrint, 11030),
};
#undef E
#undef OPT

static const struct { CUresult r; const char *name; } k_names[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED"},
    {CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT"},
    {CUDA_ERROR_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU"},
    {CUDA_ERROR_ECC_UNCORRECTABLE, "CUDA_ERROR_ECC_UNCORRECTABLE"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS"},
    {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"},
    {CUDA_ERROR_LAUNCH_TIMEOUT, "CUDA_ERROR_LAUNCH_TIMEOUT"},
    {CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED"},
    {CUDA_ERROR_ASSERT, "CUDA_ERROR_ASSERT"},
    {CUDA_ERROR_HARDWARE_STACK_ERROR, "CUDA_ERROR_HARDWARE_STACK_ERROR"},
    {CUDA_ERROR_ILLEGAL_INSTRUCTION, "CUDA_ERROR_ILLEGAL_INSTRUCTION"},
    {CUDA_ERROR_MISALIGNED_ADDRESS, "CUDA_ERROR_MISALIGNED_ADDRESS"},
    {CUDA_ERROR_INVALID_ADDRESS_SPACE, "CUDA_ERROR_INVALID_ADDRESS_SPACE"},
    {CUDA_ERROR_INVALID_PC, "CUDA_ERROR_INVALID_PC"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED"},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN"},
};

const char *zr_driver_error_name(const ZrCuDriver *drv, CUresult r) {
    const char *s = NULL;
    if (drv && drv->cuGetErrorName && drv->cuGetErrorName(r, &s) == CUDA_SUCCESS && s) return s;
    for (size_t i = 0; i < sizeof k_names / sizeof k_names[0]; i++)
        if (k_names[i].r == r) return k_names[i].name;
    return "CUDA error (unnamed code)";
}

int zr_driver_err(const ZrCuDriver *drv, ZrError *err, CUresult r, const char *what_fmt, ...) {
    char what[512];
    va_list ap;
    va_start(ap, what_fmt);
    vsnprintf(what, sizeof what, what_fmt, ap);
    va_end(ap);
    const char *desc = NULL;
    if (!(drv && drv->cuGetErrorString && drv->cuGetErrorString(r, &desc) == CUDA_SUCCESS && desc)) desc = "";
    ZrStatus code = r == CUDA_ERROR_OUT_OF_MEMORY ? ZR_E_NOMEM : ZR_E_CUDA;
    return zr_err(err, code, "%s: %s (%d)%s%s", what, zr_driver_error_name(drv, r), r, *desc ? ": " : "", desc);
}

bool zr_driver_error_is_sticky(CUresult r) {
    switch (r) {
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_UNKNOWN:
        return true;
    default:
        return false;
    }
}

static int load(ZrCuDriver *d, ZrError *err) {
    memset(d, 0, sizeof *d);
    d->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!d->lib) {
        const char *why = dlerror();
        return zr_err(err, ZR_E_NODEV, "no NVIDIA driver: dlopen(libcuda.so.1) failed: %s", why ? why : "not found");
    }
    PFN_cuGetProcAddress_v12000 gpa2 = NULL;
    PFN_cuGetProcAddress_v11030 gpa1 = NULL;
    *(void **)&gpa2 = dlsym(d->lib, "cuGetProcAddress_v2");
    if (!gpa2) *(void **)&gpa1 = dlsym(d->lib, "cuGetProcAddress");
    if (!gpa2 && !gpa1)
        return zr_err(err, ZR_E_NODEV,
                      "libcuda.so.1 has no cuGetProcAddress: the NVIDIA driver is too old (zrun needs CUDA %d.%d or newer)",
                      ZR_CU_V_MIN_DRIVER / 1000, ZR_CU_V_MIN_DRIVER % 1000 / 10);
    for (size_t i = 0; i < sizeof k_entries / sizeof k_entries[0]; i++) {
        const Entry *e = &k_entries[i];
        void *fn = NULL;
        CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
        CUresult r = gpa2 ? gpa2(e->name, &fn, e->version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &st)
                          : gpa1(e->name, &fn, e->version, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
        if (r != CUDA_SUCCESS || st != CU_GET_PROC_ADDRESS_SUCCESS || !fn) {
            if (e->optional) continue;
            return zr_err(err, ZR_E_NODEV,
                          "libcuda.so.1: cuGetProcAddress(\"%s\", cudaVersion %d) failed: %s (result %d, status %d); "
                          "the NVIDIA driver is too old (zrun needs CUDA %d.%d or newer)",
                          e->name, e->version, zr_driver_error_name(d, r), r, st, ZR_CU_V_MIN_DRIVER / 1000,
                          ZR_CU_V_MIN_DRIVER % 1000 / 10);
        }
        memcpy((char *)d + e->offset, &fn, sizeof fn);
    }
    CUresult r = d->cuInit(0);
    if (r == CUDA_ERROR_NO_DEVICE || r == CUDA_ERROR_STUB_LIBRARY || r == CUDA_ERROR_INVALID_DEVICE)
        return zr_err(err, ZR_E_NODEV, "no usable GPU: cuInit: %s (%d)", zr_driver_error_name(d, r), r);
    if (r != CUDA_SUCCESS) {
        zr_driver_err(d, err, r, "no usable GPU: cuInit");
        err->code = ZR_E_NODEV;
        return ZR_E_NODEV;
    }
    ZR_CU_TRY(d, err, d->cuDriverGetVersion(&d->driver_version), "cuDriverGetVersion");
    if (d->driver_version < ZR_CU_V_MIN_DRIVER)
        return zr_err(err, ZR_E_NODEV, "the NVIDIA driver supports CUDA %d.%d; zrun needs %d.%d or newer",
                      d->driver_version / 1000, d->driver_version % 1000 / 10, ZR_CU_V_MIN_DRIVER / 1000,
                      ZR_CU_V_MIN_DRIVER % 1000 / 10);
    /* A driver older than 12.3 answers the request for cuGraphAddDependencies with its only
     * version, which has no edge-data argument: not the function the table's type says. */
    if (d->driver_version < ZR_CU_V_GRAPH_EDGES) d->cuGraphAddDependencies = NULL;
    int n = 0;
    r = d->cuDeviceGetCount(&n);
    if (r != CUDA_SUCCESS || n < 1)
        return zr_err(err, ZR_E_NODEV, "no usable GPU: cuDeviceGetCount: %d devices (%s)", n, zr_driver_error_name(d, r));
    return ZR_OK;
}

int zr_driver_open(const ZrCuDriver **out, ZrError *err) {
    *out = NULL;
    if (g_driver.driver_version == 0) {
        int rc = load(&g_driver, err);
        if (rc) {
            if (g_driver.lib) dlclose(g_driver.lib);
            memset(&g_driver, 0, sizeof g_driver);
            return rc;
        }
    }
    *out = &g_driver;
    return ZR_OK;
}
