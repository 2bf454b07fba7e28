#include "backend_open.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

int zr_device_parse(const char *opt, const char *arg, ZrDevice *out, ZrError *err) {
    if (!strcmp(arg, "auto")) *out = ZR_DEVICE_AUTO;
    else if (!strcmp(arg, "cpu")) *out = ZR_DEVICE_CPU;
    else if (!strcmp(arg, "cuda")) *out = ZR_DEVICE_CUDA;
    else return zr_err(err, ZR_E_USAGE, "%s: expected auto, cpu or cuda, found '%s'", opt, arg);
    return ZR_OK;
}

ZrBackend *zr_backend_open(ZrDevice device, const ZrModel *m, const ZrBackendOptions *o, const char *who,
                           ZrError *err) {
    if (device == ZR_DEVICE_CPU) {
        zr_cuda_early_drop(o->cuda_early);
        return zr_cpu_backend_create(m, o, err);
    }
    ZrBackend *be = zr_cuda_backend_create(m, o, err);
    if (be) return be;
    /* the backend's reason may already say "no usable GPU" */
    const bool said = !strncmp(err->msg, "no usable GPU", 13);
    if (device == ZR_DEVICE_CUDA) {
        if (err->code == ZR_E_NODEV) zr_err_wrap(err, said ? "--device cuda" : "--device cuda: no usable GPU");
        return NULL;
    }
    if (err->code != ZR_E_NODEV) return NULL;
    if (who)
        fprintf(stderr, said ? "%s: %s; running on the CPU\n" : "%s: no usable GPU (%s); running on the CPU\n", who,
                err->msg);
    return zr_cpu_backend_create(m, o, err);
}

const char *zr_backend_plan_cache(const char *given, bool off, const char *xdg_cache_home, const char *home, char *buf,
                                  size_t cap) {
    if (off) return NULL;
    if (given) return given;
    int n = -1;
    if (xdg_cache_home && xdg_cache_home[0] == '/') n = snprintf(buf, cap, "%s/zrun/cublaslt-plans.bin", xdg_cache_home);
    else if (home && home[0]) n = snprintf(buf, cap, "%s/.cache/zrun/cublaslt-plans.bin", home);
    return n > 0 && (size_t)n < cap ? buf : NULL;
}

int zr_backend_default_ctx(const ZrModel *m, int n_needed) {
    if (n_needed > 0) return n_needed;
    const int train = m->hp.n_ctx_train;
    return train > 0 && train < ZR_DEFAULT_CTX ? train : ZR_DEFAULT_CTX;
}
