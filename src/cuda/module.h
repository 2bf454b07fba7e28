/* One GPU session: the device's primary context (shared with cuBLASLt), the one stream every
 * launch / copy / graph launch goes to, the embedded kernel module, kernel lookup by name into
 * a handle that knows its parameter layout, device memory helpers and device properties. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda/driver.h"

typedef struct ZrCudaProps {
    char name[256];          /* "NVIDIA H100 80GB HBM3" */
    int cc_major, cc_minor;  /* compute capability, e.g. 9.0 */
    int sm_count;
    int l2_bytes;
    int max_smem_optin;      /* dynamic shared memory a kernel may opt in to, bytes */
    int smem_per_sm;         /* shared memory of a multiprocessor, bytes */
    int mem_clock_khz, bus_width_bits;
    size_t total_mem;        /* bytes */
    int driver_version;      /* e.g. 13000 = CUDA 13.0 */
} ZrCudaProps;

typedef struct ZrCuda {
    const ZrCuDriver *drv;
    int ordinal;
    CUdevice dev;
    CUcontext ctx;    /* primary context of dev, current on the calling thread */
    CUstream stream;  /* non-blocking; all backend work is ordered on it */
    CUmodule mod;     /* the kernels; NULL until loaded */
    ZrCudaProps props;
} ZrCuda;

#define ZR_KERNEL_MAX_PARAMS 32
/* A kernel found by name, with the byte size and offset of each parameter: from
 * cuFuncGetParamInfo when the driver has it, else from the sizes the caller gave. The launcher
 * copies exactly these bytes when it records a launch. */
typedef struct ZrKernel {
    CUfunction fn;
    char name[64];
    int n_params;
    uint32_t size[ZR_KERNEL_MAX_PARAMS];   /* bytes of parameter i */
    uint32_t offset[ZR_KERNEL_MAX_PARAMS]; /* offset of parameter i in the kernel's parameter buffer */
    /* from cuFuncGetAttribute at load (0: not known, a driver table without it): the largest block
     * it launches (its register cap may hold fewer than the device's 1024 threads) and its registers
     * a thread; the launch shapes read them (cuda/mv_shape.c) instead of mirroring cu/'s caps; its
     * static shared memory in bytes, which the dynamic shared memory it may opt in to sits beside */
    int max_threads, regs, static_smem;
    bool pairs; /* launched in clusters of two on even 1-D grids (zr_launch_kernel_pairs, at lookup) */
} ZrKernel;

/* Retains the primary context of device `ordinal`, makes it current, creates the stream and
 * reads the properties. Does not load kernels. */
int zr_cuda_open(const ZrCuDriver *drv, int ordinal, ZrCuda *out, ZrError *err);
/* Loads a fatbin/cubin/PTX image (cuModuleLoadData; the image must stay valid while loaded). */
int zr_cuda_load_module(ZrCuda *c, const void *image, ZrError *err);
/* Loads the fatbin embedded at build time; ZR_E_NODEV "no CUDA kernels built in" when the
 * build had no nvcc (config.h ZR_HAVE_KERNELS 0). */
int zr_cuda_load_kernels(ZrCuda *c, ZrError *err);
bool zr_cuda_have_kernels(void);
/* The embedded fatbin (for zr_cuda_reset), or NULL when none was built in; its bytes (0: none). */
const void *zr_cuda_kernels_image(void);
size_t zr_cuda_kernels_image_size(void);
/* Unloads the module, destroys the stream, releases the primary context. Safe on a zeroed or
 * poisoned ZrCuda (errors are ignored: this is teardown). */
void zr_cuda_close(ZrCuda *c);
/* After a sticky error: tears the session down, resets the device's primary context (which frees
 * every allocation of the old one), opens it again and reloads the same module image. Every
 * CUdeviceptr, ZrKernel and graph of the old session is invalid afterwards.
 * Fails (ZR_E_CONTEXT_LOST, "only a new process can use the GPU again") on drivers that keep a sticky
 * error for the whole process: driver 580.159.04 does, for __trap() (719) and illegal
 * addresses (700), whether the context was the primary one or created with cuCtxCreate. */
int zr_cuda_reset(ZrCuda *c, const void *image, ZrError *err);

/* Finds an `extern "C"` kernel. sizes/n_sizes (may be NULL/0) give the parameter sizes the
 * caller will pass; when the driver reports the layout too, both must agree (else
 * ZR_E_INTERNAL naming the kernel and parameter). */
int zr_cuda_kernel(const ZrCuda *c, const char *name, const size_t *sizes, int n_sizes, ZrKernel *out,
                   ZrError *err);
/* Raises the kernel's dynamic shared memory limit (needed above 48 KiB). */
int zr_cuda_kernel_set_smem(const ZrCuda *c, const ZrKernel *k, int bytes, ZrError *err);

/* Device memory. `what` names the buffer in errors: out of memory says how many bytes were
 * needed and how many were free (cuMemGetInfo). bytes == 0 gives *out = 0 and no error. */
int zr_cuda_alloc(const ZrCuda *c, CUdeviceptr *out, size_t bytes, const char *what, ZrError *err);
void zr_cuda_free(const ZrCuda *c, CUdeviceptr p);
/* Page-locked host memory (fast async copies); falls back to nothing: errors are returned. */
int zr_cuda_host_alloc(const ZrCuda *c, void **out, size_t bytes, const char *what, ZrError *err);
void zr_cuda_host_free(const ZrCuda *c, void *p);
/* Async on c->stream (ordered with every launch). For pageable host memory the driver stages the
 * copy, so the host buffer may be reused once the call returns for h2d; d2h needs a sync. */
int zr_cuda_h2d(const ZrCuda *c, CUdeviceptr dst, const void *src, size_t bytes, ZrError *err);
int zr_cuda_d2h(const ZrCuda *c, void *dst, CUdeviceptr src, size_t bytes, ZrError *err);
int zr_cuda_d2d(const ZrCuda *c, CUdeviceptr dst, CUdeviceptr src, size_t bytes, ZrError *err);
int zr_cuda_memset8(const ZrCuda *c, CUdeviceptr dst, uint8_t value, size_t bytes, ZrError *err);
int zr_cuda_memset32(const ZrCuda *c, CUdeviceptr dst, uint32_t value, size_t count, ZrError *err);
/* Waits for c->stream; async kernel errors surface here. */
int zr_cuda_sync(const ZrCuda *c, ZrError *err);
/* The raw result of waiting for the stream (for classifying sticky errors). */
CUresult zr_cuda_sync_result(const ZrCuda *c);
/* "NVIDIA H100 80GB HBM3, CC 9.0, 132 SMs, 79.1 GiB, driver CUDA 13.0" */
void zr_cuda_describe(const ZrCuda *c, char *buf, size_t len);
