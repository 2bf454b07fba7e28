#include "cuda/warm.h"

#include <time.h>

int zr_cuf_warm(ZrCuForward *f, double *ms, ZrError *err) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const int32_t zeros[ZR_CUF_WARM_TOKENS] = {0};
    const int n = f->n_ctx < ZR_CUF_WARM_TOKENS ? f->n_ctx : ZR_CUF_WARM_TOKENS;
    int rc = n > 1 ? zr_cuf_prefill(f, zeros, n, 0, NULL, false, err) : ZR_OK;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    return rc ? zr_err_wrap(err, "warming up the prefill at load") : ZR_OK;
}
