/* Errors as values: a status code plus a message that names the input, the field and what
 * was expected versus found. Only main() decides to exit. */
#pragma once
#include <stdarg.h>

typedef enum ZrStatus {
    ZR_OK = 0,
    ZR_E_IO,          /* open/read/mmap failed */
    ZR_E_FORMAT,      /* malformed or hostile input file */
    ZR_E_UNSUPPORTED, /* valid but not supported (architecture, type, version) */
    ZR_E_NOMEM,       /* host or device allocation failed */
    ZR_E_USAGE,       /* bad command line / argument values */
    ZR_E_RANGE,       /* e.g. prompt longer than the context */
    ZR_E_CUDA,        /* a CUDA driver / cuBLASLt call failed */
    ZR_E_NODEV,       /* no usable GPU */
    ZR_E_INTERRUPTED,
    ZR_E_INTERNAL,
    ZR_E_CONTEXT_LOST, /* the GPU context is unusable and cannot be recreated in this process; a new
                        * process can go on. The message starts "the CUDA context was lost (CAUSE)" */
} ZrStatus;

typedef struct ZrError {
    ZrStatus code;
    char msg[1024];
} ZrError;

/* Sets *e (if e is non-NULL) and returns code, so callers can `return zr_err(e, ...)`. */
int zr_err(ZrError *e, ZrStatus code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int zr_verr(ZrError *e, ZrStatus code, const char *fmt, va_list ap);
/* Prefixes an existing message: "context: old message". */
int zr_err_wrap(ZrError *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *zr_status_name(ZrStatus s);
