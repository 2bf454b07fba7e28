/* The pool: workers sleep on a condition variable and wake for each new generation of work.
 * No spinning: on a 2-core machine running two test programs at once, spinning threads would
 * steal the core the other program needs. */
#include "pool.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct Worker {
    struct ZrCpuPool *pool;
    int index;
    pthread_t thread;
} Worker;

struct ZrCpuPool {
    int n_threads;
    Worker *workers;     /* [n_threads - 1] */
    int n_started;
    pthread_mutex_t mu;
    pthread_cond_t wake; /* a new generation (or quit) */
    pthread_cond_t done; /* pending reached 0 */
    uint64_t generation;
    int pending;         /* workers still running the current generation */
    bool quit;
    ZrCpuTask fn;
    void *ctx;
    int64_t n_items;
    int n_active;        /* threads that get a chunk of the current generation */
};

static void run_chunk(ZrCpuTask fn, void *ctx, int64_t n_items, int thread, int n_active) {
    if (thread >= n_active) return;
    int64_t begin = n_items * thread / n_active, end = n_items * (thread + 1) / n_active;
    if (begin < end) fn(ctx, begin, end, thread);
}

static void *worker_main(void *arg) {
    Worker *w = arg;
    ZrCpuPool *p = w->pool;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->generation == seen && !p->quit) pthread_cond_wait(&p->wake, &p->mu);
        if (p->quit) break;
        seen = p->generation;
        ZrCpuTask fn = p->fn;
        void *ctx = p->ctx;
        int64_t n_items = p->n_items;
        int n_active = p->n_active;
        pthread_mutex_unlock(&p->mu);
        run_chunk(fn, ctx, n_items, w->index, n_active);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

ZrCpuPool *zr_cpu_pool_create(int n_threads, ZrError *err) {
    if (n_threads < 1) n_threads = 1;
    ZrCpuPool *p = calloc(1, sizeof *p);
    if (!p) {
        zr_err(err, ZR_E_NOMEM, "cpu backend: out of memory for the thread pool");
        return NULL;
    }
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    if (n_threads > 1) {
        p->workers = calloc((size_t)n_threads - 1, sizeof *p->workers);
        if (!p->workers) {
            zr_err(err, ZR_E_NOMEM, "cpu backend: out of memory for %d threads", n_threads);
            zr_cpu_pool_free(p);
            return NULL;
        }
    }
    for (int i = 1; i < n_threads; i++) {
        Worker *w = &p->workers[i - 1];
        w->pool = p;
        w->index = i;
        int rc = pthread_create(&w->thread, NULL, worker_main, w);
        if (rc) {
            zr_err(err, ZR_E_INTERNAL, "cpu backend: cannot start thread %d of %d: %s", i + 1, n_threads, strerror(rc));
            zr_cpu_pool_free(p);
            return NULL;
        }
        p->n_started++;
    }
    return p;
}

int zr_cpu_pool_threads(const ZrCpuPool *p) { return p->n_threads; }

void zr_cpu_pool_run(ZrCpuPool *p, int64_t n_items, int64_t grain, ZrCpuTask fn, void *ctx) {
    if (grain < 1) grain = 1;
    const int64_t by_grain = n_items / grain;
    const int n_active = by_grain < p->n_threads ? (int)by_grain : p->n_threads;
    if (n_active <= 1) {
        if (n_items > 0) fn(ctx, 0, n_items, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n_items = n_items;
    p->n_active = n_active;
    p->pending = p->n_threads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);

    run_chunk(fn, ctx, n_items, 0, n_active);

    pthread_mutex_lock(&p->mu);
    while (p->pending > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void zr_cpu_pool_free(ZrCpuPool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->quit = true;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_started; i++) pthread_join(p->workers[i].thread, NULL);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
    free(p->workers);
    free(p);
}
