#include "err.h"

#include <stdio.h>
#include <string.h>

int zr_verr(ZrError *e, ZrStatus code, const char *fmt, va_list ap) {
    if (e) {
        e->code = code;
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    }
    return (int)code;
}

int zr_err(ZrError *e, ZrStatus code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    zr_verr(e, code, fmt, ap);
    va_end(ap);
    return (int)code;
}

int zr_err_wrap(ZrError *e, const char *fmt, ...) {
    if (!e) return ZR_E_INTERNAL;
    char prefix[512], old[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    size_t n = strlen(prefix);
    if (n > sizeof e->msg - 3) n = sizeof e->msg - 3;
    memcpy(e->msg, prefix, n);
    memcpy(e->msg + n, ": ", 2);
    size_t room = sizeof e->msg - n - 3;
    size_t m = strnlen(old, room);
    memcpy(e->msg + n + 2, old, m);
    e->msg[n + 2 + m] = 0;
    return (int)e->code;
}

const char *zr_status_name(ZrStatus s) {
    switch (s) {
    case ZR_OK: return "ok";
    case ZR_E_IO: return "i/o error";
    case ZR_E_FORMAT: return "format error";
    case ZR_E_UNSUPPORTED: return "unsupported";
    case ZR_E_NOMEM: return "out of memory";
    case ZR_E_USAGE: return "usage error";
    case ZR_E_RANGE: return "out of range";
    case ZR_E_CUDA: return "CUDA error";
    case ZR_E_NODEV: return "no GPU";
    case ZR_E_INTERRUPTED: return "interrupted";
    case ZR_E_INTERNAL: return "internal error";
    case ZR_E_CONTEXT_LOST: return "CUDA context lost";
    }
    return "unknown error";
}
