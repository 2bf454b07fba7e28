#include "cuda/early.h"
#include "zr_clock.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ZrCudaEarly {
    pthread_t th;
    const ZrCuDriver *drv;
    ZrCuda cuda;
    ZrCublasLt lt;
    int rc;
    ZrError err;
    ZrCudaEarlyTimes t;
};

static void *early_main(void *arg) {
    ZrCudaEarly *e = arg;
    const double t0 = zr_clock_ms();
    e->rc = zr_driver_open(&e->drv, &e->err);
    const double t1 = zr_clock_ms();
    if (!e->rc) e->rc = zr_cuda_open(e->drv, 0, &e->cuda, &e->err);
    const double t2 = zr_clock_ms();
    /* the kernels and cuBLASLt need no model either (without kernels built in, the backend says so) */
    if (!e->rc && zr_cuda_have_kernels()) e->rc = zr_cuda_load_kernels(&e->cuda, &e->err);
    const double t3 = zr_clock_ms();
    ZrError lt_err = {0};
    if (!e->rc && zr_cublaslt_open(&e->lt, &lt_err)) memset(&e->lt, 0, sizeof e->lt);
    const double t4 = zr_clock_ms();
    e->t = (ZrCudaEarlyTimes){t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0};
    return NULL;
}

ZrCudaEarly *zr_cuda_early_start(void) {
    ZrCudaEarly *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    /* the thread, and the driver's own threads it starts, with SIGINT blocked: the commands take
     * it on a thread of their own (src/app/run.h), and it must never land on the driver's */
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, &old);
    if (pthread_create(&e->th, NULL, early_main, e)) {
        free(e);
        e = NULL;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return e;
}

int zr_cuda_early_take(ZrCudaEarly *e, const ZrCuDriver **drv, ZrCuda *cuda, ZrCublasLt *lt, ZrCudaEarlyTimes *t,
                       ZrError *err) {
    pthread_join(e->th, NULL);
    int rc = e->rc;
    *t = e->t;
    memset(lt, 0, sizeof *lt);
    if (rc) {
        *err = e->err;
        zr_cuda_close(&e->cuda); /* what opened before the failure */
    } else {
        *drv = e->drv;
        *cuda = e->cuda;
        *lt = e->lt;
        const CUresult r = e->drv->cuCtxSetCurrent(cuda->ctx);
        if (r != CUDA_SUCCESS) {
            rc = zr_driver_err(e->drv, err, r, "cuCtxSetCurrent (the context opened early)");
            zr_cublaslt_close(lt);
            zr_cuda_close(cuda);
        }
    }
    free(e);
    return rc;
}

void zr_cuda_early_drop(ZrCudaEarly *e) {
    if (!e) return;
    const ZrCuDriver *drv;
    ZrCuda cuda;
    ZrCublasLt lt;
    ZrCudaEarlyTimes t;
    ZrError err = {0};
    if (!zr_cuda_early_take(e, &drv, &cuda, &lt, &t, &err)) {
        zr_cublaslt_close(&lt);
        zr_cuda_close(&cuda);
    }
}
