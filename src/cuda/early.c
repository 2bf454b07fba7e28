#include "cuda/early.h"
#include "zr_clock.h"
#include "zr_thread.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* What the thread has done: the driver and context (or their failure), then the kernels' module. */
enum { EARLY_RUNNING, EARLY_CONTEXT, EARLY_DONE };

struct ZrCudaEarly {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stage;           /* EARLY_*, under mu */
    bool handed;         /* the context went to the caller (zr_cuda_early_context): the thread's no more */
    const ZrCuDriver *drv;
    ZrCuda cuda;         /* the module is loaded into it after the context is handed over */
    int rc, rc_kernels;  /* the driver and context's; the module's */
    ZrError err, err_kernels;
    ZrCudaEarlyTimes t;
};

static void set_stage(ZrCudaEarly *e, int stage) {
    pthread_mutex_lock(&e->mu);
    e->stage = stage;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

static void *early_main(void *arg) {
    ZrCudaEarly *e = arg;
    const double t0 = zr_clock_ms();
    e->rc = zr_driver_open(&e->drv, &e->err);
    const double t1 = zr_clock_ms();
    if (!e->rc) e->rc = zr_cuda_open(e->drv, 0, &e->cuda, &e->err);
    const double t2 = zr_clock_ms();
    e->t.driver = t1 - t0;
    e->t.context = t2 - t1;
    set_stage(e, EARLY_CONTEXT);
    /* the kernels need no model either (without kernels built in, the backend says so); the
     * caller uploads into the context meanwhile, and cuBLASLt opens on the warm-up's thread
     * (cuda/warm.h) */
    CUmodule mod = NULL;
    if (!e->rc && zr_cuda_have_kernels()) {
        ZrCuda tmp = e->cuda; /* the module alone is the thread's: the context may be the caller's now */
        tmp.mod = NULL;
        e->rc_kernels = zr_cuda_load_kernels(&tmp, &e->err_kernels);
        mod = tmp.mod;
    }
    const double t3 = zr_clock_ms();
    pthread_mutex_lock(&e->mu);
    e->cuda.mod = mod;
    e->t.kernels = t3 - t2;
    e->stage = EARLY_DONE;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

bool zr_cuda_early_loaded(ZrCudaEarly *e) {
    pthread_mutex_lock(&e->mu);
    const bool done = e->stage == EARLY_DONE;
    pthread_mutex_unlock(&e->mu);
    return done;
}

ZrCudaEarly *zr_cuda_early_start(void) {
    ZrCudaEarly *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    /* the thread, and the driver's own threads it starts, with SIGINT blocked */
    if (!zr_thread_start(&e->th, early_main, e)) {
        pthread_cond_destroy(&e->cv);
        pthread_mutex_destroy(&e->mu);
        free(e);
        e = NULL;
    }
    return e;
}

static void wait_stage(ZrCudaEarly *e, int stage) {
    pthread_mutex_lock(&e->mu);
    while (e->stage < stage) pthread_cond_wait(&e->cv, &e->mu);
    pthread_mutex_unlock(&e->mu);
}

int zr_cuda_early_context(ZrCudaEarly *e, const ZrCuDriver **drv, ZrCuda *cuda, ZrError *err) {
    wait_stage(e, EARLY_CONTEXT);
    if (e->rc) {
        *err = e->err;
        return e->rc;
    }
    const CUresult r = e->drv->cuCtxSetCurrent(e->cuda.ctx);
    if (r != CUDA_SUCCESS) return zr_driver_err(e->drv, err, r, "cuCtxSetCurrent (the context opened early)");
    *drv = e->drv;
    *cuda = e->cuda;
    cuda->mod = NULL; /* zr_cuda_early_finish gives it */
    pthread_mutex_lock(&e->mu);
    e->handed = true;
    pthread_mutex_unlock(&e->mu);
    return ZR_OK;
}

/* Joins the thread and frees e; what it opened is closed unless the context was handed over, and
 * the module then goes to *mod (NULL: unloaded too). */
static int finish(ZrCudaEarly *e, CUmodule *mod, ZrCudaEarlyTimes *t, ZrError *err) {
    pthread_join(e->th, NULL);
    int rc = ZR_OK;
    if (t) *t = e->t;
    if (e->handed && mod) {
        *mod = e->cuda.mod;
        if (e->rc_kernels) {
            *err = e->err_kernels;
            rc = e->rc_kernels;
        }
    } else if (e->handed) {
        if (e->cuda.mod) e->drv->cuModuleUnload(e->cuda.mod);
    } else {
        zr_cuda_close(&e->cuda); /* what opened (before a failure), the module with it */
    }
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    free(e);
    return rc;
}

int zr_cuda_early_finish(ZrCudaEarly *e, CUmodule *mod, ZrCudaEarlyTimes *t, ZrError *err) {
    *mod = NULL;
    return finish(e, mod, t, err);
}

void zr_cuda_early_drop(ZrCudaEarly *e) {
    if (e) finish(e, NULL, NULL, NULL);
}
