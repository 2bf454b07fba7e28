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

/* One table: the flags' names of zrun's cache types (the first is the default). */
static const struct {
    ZrKvType type;
    const char *name;
} k_kv_types[] = {{ZR_KV_F16, "f16"}, {ZR_KV_F32, "f32"}};

/* llama.cpp's other -ctk/-ctv types (common/arg.cpp kv_cache_types): named in the refusal. */
static const char *const k_kv_llama_only[] = {"bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"};

int zr_kv_type_parse(const char *opt, const char *arg, ZrKvType *out, ZrError *err) {
    for (size_t i = 0; i < sizeof k_kv_types / sizeof k_kv_types[0]; i++)
        if (!strcmp(arg, k_kv_types[i].name)) {
            *out = k_kv_types[i].type;
            return ZR_OK;
        }
    for (size_t i = 0; i < sizeof k_kv_llama_only / sizeof k_kv_llama_only[0]; i++)
        if (!strcmp(arg, k_kv_llama_only[i]))
            return zr_err(err, ZR_E_USAGE,
                          "%s %s: a llama.cpp cache type zrun does not have; zrun keeps the KV cache in f16 (the default) or f32",
                          opt, arg);
    return zr_err(err, ZR_E_USAGE, "%s: expected f16 or f32, found '%s'", opt, arg);
}

int zr_kv_flag(ZrKvFlags *f, bool is_v, const char *opt, const char *arg, ZrError *err) {
    int rc = zr_kv_type_parse(opt, arg, is_v ? &f->v : &f->k, err);
    if (rc) return rc;
    if (is_v) f->v_given = true;
    else f->k_given = true;
    return ZR_OK;
}

int zr_kv_flags_type(const ZrKvFlags *f, ZrKvType *out, ZrError *err) {
    if (f->k_given && f->v_given && f->k != f->v)
        return zr_err(err, ZR_E_USAGE, "-ctk %s and -ctv %s: zrun keeps K and V in one type; give the same to both",
                      zr_kv_type_name(f->k), zr_kv_type_name(f->v));
    *out = f->k_given ? f->k : f->v_given ? f->v : k_kv_types[0].type;
    return ZR_OK;
}

const char *zr_kv_type_name(ZrKvType t) {
    for (size_t i = 0; i < sizeof k_kv_types / sizeof k_kv_types[0]; i++)
        if (k_kv_types[i].type == t) return k_kv_types[i].name;
    return "?";
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
