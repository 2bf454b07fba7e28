/* How a command (run, eval, bench) gets its backend: the device choice, the one CPU fallback
 * rule and the one default context, written once here.
 *
 * The fallback rule (README, man/zrun.1 and --help say the same):
 *   --device cpu    the CPU backend.
 *   --device cuda   the CUDA backend, or an error saying why; never the CPU.
 *   --device auto   (the default) the CUDA backend; the CPU only when no GPU is usable
 *                   (ZR_E_NODEV: no libcuda, no device, or no kernels built in), with one line on
 *                   stderr. Any other CUDA failure (out of memory, a kernel that will not load)
 *                   is an error: a GPU that is there but fails is not hidden behind a slow run.
 */
#pragma once

#include "backend.h"
#include "err.h"
#include "model.h"

typedef enum ZrDevice { ZR_DEVICE_AUTO, ZR_DEVICE_CPU, ZR_DEVICE_CUDA } ZrDevice;

/* "auto", "cpu" or "cuda" (the --device value); anything else is ZR_E_USAGE naming opt. */
int zr_device_parse(const char *opt, const char *arg, ZrDevice *out, ZrError *err);

/* The KV cache's type from -ctk/--cache-type-k and -ctv/--cache-type-v, as every command that
 * opens a backend reads them (llama.cpp's spellings and its default, f16). zrun keeps K and V in
 * one type: f16 (each value rounded to the nearest half when stored) or f32 (kept as computed).
 * A command checks each value as it comes (zr_kv_flag) and resolves the pair after the last
 * option (zr_kv_flags_type): one flag alone sets both, two that differ are ZR_E_USAGE. */
typedef struct ZrKvFlags {
    bool k_given, v_given; /* -ctk, -ctv seen */
    ZrKvType k, v;
} ZrKvFlags;

/* "f16" or "f32" into *out; llama.cpp's other cache types (q8_0, q4_0, ..., bf16) and anything
 * else are ZR_E_USAGE naming opt and the types zrun has. */
int zr_kv_type_parse(const char *opt, const char *arg, ZrKvType *out, ZrError *err);
/* One of the pair: is_v false for -ctk, true for -ctv. */
int zr_kv_flag(ZrKvFlags *f, bool is_v, const char *opt, const char *arg, ZrError *err);
/* The one type: both given and equal, the one given, or ZR_KV_F16 when neither was. */
int zr_kv_flags_type(const ZrKvFlags *f, ZrKvType *out, ZrError *err);
/* "f16", "f32" (the flags' spelling; "?" for a value that is neither) */
const char *zr_kv_type_name(ZrKvType t);

/* Opens the backend for device under the rule above. who ("zrun", "zrun eval", ...) prefixes
 * the fallback line on stderr; NULL falls back silently (--quiet). */
ZrBackend *zr_backend_open(ZrDevice device, const ZrModel *m, const ZrBackendOptions *o, const char *who,
                           ZrError *err);

/* The cuBLASLt plan cache file a command gives the CUDA backend (ZrBackendOptions.plan_cache):
 * NULL when off (--no-plan-cache); given (--plan-cache FILE) when not NULL; else the default,
 * $XDG_CACHE_HOME/zrun/cublaslt-plans.bin (XDG_CACHE_HOME absolute, as the XDG base directory
 * specification asks), else $HOME/.cache/zrun/cublaslt-plans.bin, made in buf[cap]; NULL when
 * neither variable helps (or the path does not fit). */
const char *zr_backend_plan_cache(const char *given, bool off, const char *xdg_cache_home, const char *home, char *buf,
                                  size_t cap);

#define ZR_DEFAULT_CTX 4096

/* The context (KV cache positions) when -c is not given. One rule: the tokens the command will
 * feed when it knows them (n_needed > 0: eval's sequence, bench's largest test), else, for
 * generation of unknown length (run), the model's training context at most ZR_DEFAULT_CTX
 * (ZR_DEFAULT_CTX when the model does not say). */
int zr_backend_default_ctx(const ZrModel *m, int n_needed);
