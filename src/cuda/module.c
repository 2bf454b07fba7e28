#include "cuda/module.h"

#include <stdio.h>
#include <string.h>

#include "config.h"
#include "cuda/launch.h" /* zr_launch_kernel_pairs */

#if ZR_HAVE_KERNELS
extern const unsigned char zr_kernels_fatbin[];
extern const size_t zr_kernels_fatbin_size;
#endif

bool zr_cuda_have_kernels(void) { return ZR_HAVE_KERNELS != 0; }

const void *zr_cuda_kernels_image(void) {
#if ZR_HAVE_KERNELS
    return zr_kernels_fatbin;
#else
    return NULL;
#endif
}

size_t zr_cuda_kernels_image_size(void) {
#if ZR_HAVE_KERNELS
    return zr_kernels_fatbin_size;
#else
    return 0;
#endif
}

static int read_props(ZrCuda *c, ZrError *err) {
    const ZrCuDriver *d = c->drv;
    ZrCudaProps *p = &c->props;
    struct { int attr; int *dst; } attrs[] = {
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &p->cc_major},
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &p->cc_minor},
        {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &p->sm_count},
        {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, &p->l2_bytes},
        {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &p->max_smem_optin},
        {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, &p->smem_per_sm},
        {CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, &p->mem_clock_khz},
        {CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, &p->bus_width_bits},
    };
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++)
        ZR_CU_TRY(d, err, d->cuDeviceGetAttribute(attrs[i].dst, attrs[i].attr, c->dev), "cuDeviceGetAttribute(%d)",
                  attrs[i].attr);
    ZR_CU_TRY(d, err, d->cuDeviceGetName(p->name, (int)sizeof p->name, c->dev), "cuDeviceGetName");
    p->name[sizeof p->name - 1] = 0;
    ZR_CU_TRY(d, err, d->cuDeviceTotalMem(&p->total_mem, c->dev), "cuDeviceTotalMem");
    p->driver_version = d->driver_version;
    return ZR_OK;
}

int zr_cuda_open(const ZrCuDriver *drv, int ordinal, ZrCuda *out, ZrError *err) {
    memset(out, 0, sizeof *out);
    out->drv = drv;
    out->ordinal = ordinal;
    CUresult r = drv->cuDeviceGet(&out->dev, ordinal);
    if (r != CUDA_SUCCESS) {
        zr_driver_err(drv, err, r, "cuDeviceGet(%d)", ordinal);
        err->code = ZR_E_NODEV;
        return ZR_E_NODEV;
    }
    r = drv->cuDevicePrimaryCtxRetain(&out->ctx, out->dev);
    if (r != CUDA_SUCCESS) {
        out->ctx = NULL;
        return zr_driver_err(drv, err, r, "cuDevicePrimaryCtxRetain(device %d)", ordinal);
    }
    int rc = ZR_OK;
    r = drv->cuCtxSetCurrent(out->ctx);
    if (r != CUDA_SUCCESS) {
        rc = zr_driver_err(drv, err, r, "cuCtxSetCurrent");
        goto fail;
    }
    r = drv->cuStreamCreate(&out->stream, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS) {
        out->stream = NULL;
        rc = zr_driver_err(drv, err, r, "cuStreamCreate");
        goto fail;
    }
    if ((rc = read_props(out, err))) goto fail;
    return ZR_OK;
fail:
    zr_cuda_close(out);
    return rc;
}

int zr_cuda_load_module(ZrCuda *c, const void *image, ZrError *err) {
    CUresult r = c->drv->cuModuleLoadData(&c->mod, image);
    if (r != CUDA_SUCCESS) {
        c->mod = NULL;
        return zr_driver_err(c->drv, err, r,
                             "cuModuleLoadData: loading the kernels for %s (compute capability %d.%d)%s", c->props.name,
                             c->props.cc_major, c->props.cc_minor,
                             r == CUDA_ERROR_NO_BINARY_FOR_GPU || r == CUDA_ERROR_INVALID_IMAGE
                                 ? "; rebuild with -Dcuda-arch including this GPU's SM version"
                                 : "");
    }
    return ZR_OK;
}

int zr_cuda_load_kernels(ZrCuda *c, ZrError *err) {
#if ZR_HAVE_KERNELS
    return zr_cuda_load_module(c, zr_kernels_fatbin, err);
#else
    (void)c;
    return zr_err(err, ZR_E_NODEV, "no CUDA kernels built in: this zrun was built without nvcc (-Dcuda=disabled)");
#endif
}

void zr_cuda_close(ZrCuda *c) {
    const ZrCuDriver *d = c->drv;
    if (!d) return;
    if (c->mod) d->cuModuleUnload(c->mod);
    if (c->stream) d->cuStreamDestroy(c->stream);
    if (c->ctx) d->cuDevicePrimaryCtxRelease(c->dev);
    c->mod = NULL;
    c->stream = NULL;
    c->ctx = NULL;
}

int zr_cuda_reset(ZrCuda *c, const void *image, ZrError *err) {
    const ZrCuDriver *d = c->drv;
    int ordinal = c->ordinal;
    CUdevice dev = c->dev;
    bool had_ctx = c->ctx != NULL;
    zr_cuda_close(c);
    /* Reset destroys the primary context and every allocation in it: the only way out of a
     * sticky error short of a new process. */
    if (had_ctx) {
        CUresult rr = d->cuDevicePrimaryCtxReset(dev);
        if (rr != CUDA_SUCCESS) return zr_driver_err(d, err, rr, "cuDevicePrimaryCtxReset(device %d)", ordinal);
    }
    /* Some drivers keep a sticky error for the whole process (seen on 580.159.04: after
     * __trap() or an illegal address, every new context, primary or not, fails with the same
     * error). Say so plainly: only a new process can use the GPU again. */
    CUcontext probe = NULL;
    CUresult r = d->cuDevicePrimaryCtxRetain(&probe, dev);
    if (r != CUDA_SUCCESS) {
        if (zr_driver_error_is_sticky(r))
            return zr_err(err, ZR_E_CONTEXT_LOST,
                          "recreating the CUDA context: the driver (CUDA %d.%d) keeps %s for the whole process: no new "
                          "context can be created in it, only a new process can use the GPU again",
                          d->driver_version / 1000, d->driver_version % 1000 / 10, zr_driver_error_name(d, r));
        return zr_driver_err(d, err, r, "recreating the CUDA context: cuDevicePrimaryCtxRetain(device %d)", ordinal);
    }
    d->cuDevicePrimaryCtxRelease(dev);
    int rc = zr_cuda_open(d, ordinal, c, err);
    if (rc) return zr_err_wrap(err, "recreating the CUDA context");
    if (image && (rc = zr_cuda_load_module(c, image, err))) return zr_err_wrap(err, "recreating the CUDA context");
    return ZR_OK;
}

int zr_cuda_kernel(const ZrCuda *c, const char *name, const size_t *sizes, int n_sizes, ZrKernel *out,
                   ZrError *err) {
    const ZrCuDriver *d = c->drv;
    memset(out, 0, sizeof *out);
    if (strlen(name) >= sizeof out->name)
        return zr_err(err, ZR_E_INTERNAL, "kernel name too long (%zu bytes, at most %zu): %s", strlen(name),
                      sizeof out->name - 1, name);
    if (n_sizes > ZR_KERNEL_MAX_PARAMS)
        return zr_err(err, ZR_E_INTERNAL, "kernel %s: %d parameters, at most %d supported", name, n_sizes,
                      ZR_KERNEL_MAX_PARAMS);
    if (!c->mod) return zr_err(err, ZR_E_INTERNAL, "kernel %s: no kernel module loaded", name);
    snprintf(out->name, sizeof out->name, "%s", name);
    out->pairs = zr_launch_kernel_pairs(name); /* once here, not at every launch */
    CUresult r = d->cuModuleGetFunction(&out->fn, c->mod, name);
    if (r != CUDA_SUCCESS)
        return zr_driver_err(d, err, r, "kernel %s: not found in the embedded module (cuModuleGetFunction)", name);
    if (d->cuFuncGetAttribute) {
        if ((r = d->cuFuncGetAttribute(&out->max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, out->fn)) != CUDA_SUCCESS ||
            (r = d->cuFuncGetAttribute(&out->regs, CU_FUNC_ATTRIBUTE_NUM_REGS, out->fn)) != CUDA_SUCCESS ||
            (r = d->cuFuncGetAttribute(&out->static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, out->fn)) != CUDA_SUCCESS)
            return zr_driver_err(d, err, r, "kernel %s: its block limit, registers and static shared memory (cuFuncGetAttribute)",
                                 name);
    }
    if (d->cuFuncGetParamInfo) {
        int n = 0;
        for (;;) {
            size_t off = 0, sz = 0;
            r = d->cuFuncGetParamInfo(out->fn, (size_t)n, &off, &sz);
            if (r == CUDA_ERROR_INVALID_VALUE) break; /* past the last parameter */
            if (r != CUDA_SUCCESS) return zr_driver_err(d, err, r, "kernel %s: cuFuncGetParamInfo(%d)", name, n);
            if (n == ZR_KERNEL_MAX_PARAMS)
                return zr_err(err, ZR_E_INTERNAL, "kernel %s: more than %d parameters", name, ZR_KERNEL_MAX_PARAMS);
            out->offset[n] = (uint32_t)off;
            out->size[n] = (uint32_t)sz;
            n++;
        }
        out->n_params = n;
        if (sizes) {
            if (n_sizes != n)
                return zr_err(err, ZR_E_INTERNAL, "kernel %s: the module says %d parameters, the caller gives %d", name,
                              n, n_sizes);
            for (int i = 0; i < n; i++)
                if (sizes[i] != out->size[i])
                    return zr_err(err, ZR_E_INTERNAL,
                                  "kernel %s: parameter %d is %u bytes in the module, the caller gives %zu", name, i,
                                  out->size[i], sizes[i]);
        }
        return ZR_OK;
    }
    if (!sizes)
        return zr_err(err, ZR_E_INTERNAL,
                      "kernel %s: this driver (CUDA %d.%d) cannot report parameter sizes (cuFuncGetParamInfo needs 12.4) "
                      "and the caller gave none",
                      name, d->driver_version / 1000, d->driver_version % 1000 / 10);
    uint32_t off = 0;
    for (int i = 0; i < n_sizes; i++) {
        uint32_t sz = (uint32_t)sizes[i];
        uint32_t align = sz >= 8 ? 8 : sz >= 4 ? 4 : sz >= 2 ? 2 : 1; /* natural alignment, as nvcc lays them out */
        off = (off + align - 1) / align * align;
        out->offset[i] = off;
        out->size[i] = sz;
        off += sz;
    }
    out->n_params = n_sizes;
    return ZR_OK;
}

int zr_cuda_kernel_set_smem(const ZrCuda *c, const ZrKernel *k, int bytes, ZrError *err) {
    ZR_CU_TRY(c->drv, err, c->drv->cuFuncSetAttribute(k->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes),
              "kernel %s: allowing %d bytes of dynamic shared memory (device maximum %d)", k->name, bytes,
              c->props.max_smem_optin);
    return ZR_OK;
}

int zr_cuda_alloc(const ZrCuda *c, CUdeviceptr *out, size_t bytes, const char *what, ZrError *err) {
    *out = 0;
    if (bytes == 0) return ZR_OK;
    CUresult r = c->drv->cuMemAlloc(out, bytes);
    if (r == CUDA_SUCCESS) return ZR_OK;
    *out = 0;
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        size_t free_b = 0, total_b = 0;
        c->drv->cuMemGetInfo(&free_b, &total_b);
        return zr_err(err, ZR_E_NOMEM,
                      "out of GPU memory allocating %s: needed %zu bytes (%.1f MiB), %.1f MiB free of %.1f MiB on %s",
                      what, bytes, bytes / 1048576.0, free_b / 1048576.0, total_b / 1048576.0, c->props.name);
    }
    return zr_driver_err(c->drv, err, r, "cuMemAlloc(%zu bytes) for %s", bytes, what);
}

void zr_cuda_free(const ZrCuda *c, CUdeviceptr p) {
    if (p) c->drv->cuMemFree(p);
}

int zr_cuda_host_alloc(const ZrCuda *c, void **out, size_t bytes, const char *what, ZrError *err) {
    *out = NULL;
    ZR_CU_TRY(c->drv, err, c->drv->cuMemHostAlloc(out, bytes ? bytes : 1, 0), "cuMemHostAlloc(%zu bytes) for %s",
              bytes, what);
    return ZR_OK;
}

void zr_cuda_host_free(const ZrCuda *c, void *p) {
    if (p) c->drv->cuMemFreeHost(p);
}

int zr_cuda_h2d(const ZrCuda *c, CUdeviceptr dst, const void *src, size_t bytes, ZrError *err) {
    if (!bytes) return ZR_OK;
    ZR_CU_TRY(c->drv, err, c->drv->cuMemcpyHtoDAsync(dst, src, bytes, c->stream), "cuMemcpyHtoDAsync(%zu bytes)",
              bytes);
    return ZR_OK;
}

int zr_cuda_d2h(const ZrCuda *c, void *dst, CUdeviceptr src, size_t bytes, ZrError *err) {
    if (!bytes) return ZR_OK;
    ZR_CU_TRY(c->drv, err, c->drv->cuMemcpyDtoHAsync(dst, src, bytes, c->stream), "cuMemcpyDtoHAsync(%zu bytes)",
              bytes);
    return ZR_OK;
}

int zr_cuda_d2d(const ZrCuda *c, CUdeviceptr dst, CUdeviceptr src, size_t bytes, ZrError *err) {
    if (!bytes) return ZR_OK;
    ZR_CU_TRY(c->drv, err, c->drv->cuMemcpyDtoDAsync(dst, src, bytes, c->stream), "cuMemcpyDtoDAsync(%zu bytes)",
              bytes);
    return ZR_OK;
}

int zr_cuda_memset8(const ZrCuda *c, CUdeviceptr dst, uint8_t value, size_t bytes, ZrError *err) {
    if (!bytes) return ZR_OK;
    ZR_CU_TRY(c->drv, err, c->drv->cuMemsetD8Async(dst, value, bytes, c->stream), "cuMemsetD8Async(%zu bytes)",
              bytes);
    return ZR_OK;
}

int zr_cuda_memset32(const ZrCuda *c, CUdeviceptr dst, uint32_t value, size_t count, ZrError *err) {
    if (!count) return ZR_OK;
    ZR_CU_TRY(c->drv, err, c->drv->cuMemsetD32Async(dst, value, count, c->stream), "cuMemsetD32Async(%zu words)",
              count);
    return ZR_OK;
}

CUresult zr_cuda_sync_result(const ZrCuda *c) { return c->drv->cuStreamSynchronize(c->stream); }

int zr_cuda_sync(const ZrCuda *c, ZrError *err) {
    ZR_CU_TRY(c->drv, err, zr_cuda_sync_result(c), "cuStreamSynchronize (an earlier kernel or copy failed)");
    return ZR_OK;
}

void zr_cuda_describe(const ZrCuda *c, char *buf, size_t len) {
    const ZrCudaProps *p = &c->props;
    snprintf(buf, len, "%s, CC %d.%d, %d SMs, %.1f GiB, driver CUDA %d.%d", p->name, p->cc_major, p->cc_minor,
             p->sm_count, p->total_mem / 1073741824.0, p->driver_version / 1000, p->driver_version % 1000 / 10);
}
