#include "cuda/early.h"
#include "zr_clock.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ZrCudaEarly {
    pthread_t th, lt_th;
    const ZrCuDriver *drv;
    ZrCuda cuda;
    ZrCublasLt lt;
    int rc;
    ZrError err;
    ZrCudaEarlyTimes t;
    /* the context, for cuBLASLt's thread: 0 not yet, 1 made, -1 none will come */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int ctx_state;
    int lt_rc;
};

/* cuBLASLt's library loaded from the start, beside the driver's (it needs no context), then its
 * handle made in the context once it exists, beside the kernels' module load. */
static void *lt_main(void *arg) {
    ZrCudaEarly *e = arg;
    ZrError err = {0};
    const double t0 = zr_clock_ms();
    e->lt_rc = zr_cublaslt_load(&e->lt, &err);
    const double t1 = zr_clock_ms();
    pthread_mutex_lock(&e->mu);
    while (!e->ctx_state) pthread_cond_wait(&e->cv, &e->mu);
    const bool ctx = e->ctx_state > 0;
    pthread_mutex_unlock(&e->mu);
    const double t2 = zr_clock_ms();
    if (!e->lt_rc && !ctx) zr_cublaslt_close(&e->lt);
    if (!e->lt_rc && ctx) {
        const CUresult r = e->drv->cuCtxSetCurrent(e->cuda.ctx);
        e->lt_rc = r == CUDA_SUCCESS ? zr_cublaslt_create(&e->lt, &err) : ZR_E_CUDA;
        if (r != CUDA_SUCCESS) zr_cublaslt_close(&e->lt);
    }
    e->t.lt_load = t1 - t0;
    e->t.lt_create = zr_clock_ms() - t2;
    return NULL;
}

static void ctx_state(ZrCudaEarly *e, int state) {
    pthread_mutex_lock(&e->mu);
    e->ctx_state = state;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

static void *early_main(void *arg) {
    ZrCudaEarly *e = arg;
    const double t0 = zr_clock_ms();
    const bool lt_th = pthread_create(&e->lt_th, NULL, lt_main, e) == 0;
    e->rc = zr_driver_open(&e->drv, &e->err);
    const double t1 = zr_clock_ms();
    if (!e->rc) e->rc = zr_cuda_open(e->drv, 0, &e->cuda, &e->err);
    ctx_state(e, e->rc ? -1 : 1);
    const double t2 = zr_clock_ms();
    /* the kernels and cuBLASLt need no model either (without kernels built in, the backend says so) */
    if (!e->rc && zr_cuda_have_kernels()) e->rc = zr_cuda_load_kernels(&e->cuda, &e->err);
    const double t3 = zr_clock_ms();
    if (lt_th) {
        pthread_join(e->lt_th, NULL);
    } else { /* no second thread: here, after the kernels */
        ZrError lt_err = {0};
        e->lt_rc = e->rc ? ZR_E_CUDA : zr_cublaslt_open(&e->lt, &lt_err);
    }
    if (e->lt_rc || e->rc) zr_cublaslt_close(&e->lt); /* zeroed: the backend opens it again for its error */
    const double t4 = zr_clock_ms();
    e->t.driver = t1 - t0, e->t.context = t2 - t1, e->t.kernels = t3 - t2, e->t.cublaslt = t4 - t3, e->t.total = t4 - t0;
    return NULL;
}

ZrCudaEarly *zr_cuda_early_start(void) {
    ZrCudaEarly *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    /* the thread, and the driver's own threads it starts, with SIGINT blocked: the commands take
     * it on a thread of their own (src/app/run.h), and it must never land on the driver's */
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, &old);
    if (pthread_create(&e->th, NULL, early_main, e)) {
        pthread_cond_destroy(&e->cv);
        pthread_mutex_destroy(&e->mu);
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
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
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
