#include "cuda/stage.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cuda/kreg.h"
#include "quant.h"
#include "zr_clock.h"

/* ---- the gathering threads ---- */

/* The caller and n - 1 helpers copy one chunk's pieces together, each its share of their
 * concatenated bytes (in 64 KiB steps, so no two threads fault in the same page of the map). */
struct ZrStagePool {
    pthread_mutex_t mu;
    pthread_cond_t go, idle;
    pthread_t th[ZR_STAGE_MAX_THREADS];
    int n;               /* threads, the caller's included */
    int started;         /* helpers running */
    uint64_t gen;        /* bumped per job */
    int running;         /* helpers still copying the current job */
    bool quit;
    const ZrStagePiece *pieces;
    int n_pieces;
    uint8_t *base;
    size_t total;
};

typedef struct Helper {
    ZrStagePool *p;
    int idx;
} Helper;

static void copy_share(ZrStagePool *p, int w) {
    const size_t step = 64u << 10, units = (p->total + step - 1) / step;
    size_t lo = units * w / p->n * step, hi = units * (w + 1) / p->n * step;
    if (hi > p->total) hi = p->total;
    size_t at = 0;
    for (int i = 0; i < p->n_pieces && at < hi; i++) {
        const ZrStagePiece *pc = &p->pieces[i];
        const size_t a = lo > at ? lo : at, b = hi < at + pc->bytes ? hi : at + pc->bytes;
        if (a < b) memcpy(p->base + pc->off + (a - at), (const uint8_t *)pc->src + (a - at), b - a);
        at += pc->bytes;
    }
}

static void *helper_main(void *arg) {
    Helper h = *(Helper *)arg;
    free(arg);
    ZrStagePool *p = h.p;
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->quit && p->gen == seen) pthread_cond_wait(&p->go, &p->mu);
        if (p->quit) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        seen = p->gen;
        pthread_mutex_unlock(&p->mu);
        copy_share(p, h.idx);
        pthread_mutex_lock(&p->mu);
        if (--p->running == 0) pthread_cond_signal(&p->idle);
        pthread_mutex_unlock(&p->mu);
    }
}

static void pool_free(ZrStagePool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->quit = true;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->started; i++) pthread_join(p->th[i], NULL);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->idle);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* n threads in all; fewer when the system will not start more (the copies still get done). */
static ZrStagePool *pool_new(int n) {
    ZrStagePool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->idle, NULL);
    for (int i = 1; i < n; i++) {
        Helper *h = malloc(sizeof *h);
        if (!h) break;
        *h = (Helper){p, i};
        if (pthread_create(&p->th[p->started], NULL, helper_main, h)) {
            free(h);
            break;
        }
        p->started++;
    }
    p->n = p->started + 1;
    return p;
}

static void pool_copy(ZrStagePool *p, uint8_t *base, const ZrStagePiece *pieces, int n_pieces) {
    size_t total = 0;
    for (int i = 0; i < n_pieces; i++) total += pieces[i].bytes;
    pthread_mutex_lock(&p->mu);
    p->base = base;
    p->pieces = pieces;
    p->n_pieces = n_pieces;
    p->total = total;
    p->running = p->started;
    p->gen++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    copy_share(p, 0);
    pthread_mutex_lock(&p->mu);
    while (p->running > 0) pthread_cond_wait(&p->idle, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

/* ---- the chunks ---- */

static int stage_bufs(uint64_t total) {
    const uint64_t chunks = (total + ZR_STAGE_CHUNK - 1) / ZR_STAGE_CHUNK;
    return chunks < ZR_STAGE_BUFS ? (chunks > 0 ? (int)chunks : 1) : ZR_STAGE_BUFS;
}

void zr_stage_host_prepare(ZrStageHost *h, uint64_t total) {
    memset(h, 0, sizeof *h);
    const size_t huge = 2u << 20, n = (size_t)stage_bufs(total) * ZR_STAGE_CHUNK;
    void *p = mmap(NULL, n + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;
    uint8_t *base = (uint8_t *)(((uintptr_t)p + huge - 1) & ~(uintptr_t)(huge - 1));
#ifdef MADV_HUGEPAGE
    (void)madvise(base, n, MADV_HUGEPAGE); /* advice: without it the pages are only smaller */
#endif
    const long page = sysconf(_SC_PAGESIZE);
    for (size_t o = 0; o < n; o += page > 0 ? (size_t)page : 4096) base[o] = 0; /* faulted in now, not at registration */
    *h = (ZrStageHost){.map = p, .map_bytes = n + huge, .base = base, .bytes = n};
}

void zr_stage_host_release(ZrStageHost *h) {
    if (h->map) munmap(h->map, h->map_bytes);
    memset(h, 0, sizeof *h);
}

/* A new device chunk (ZR_OK and *out NULL when the GPU has no room for one). */
static int dev_new(ZrStage *s, ZrStageDev **out, ZrError *err) {
    const ZrCuDriver *d = s->cuda->drv;
    *out = NULL;
    ZrStageDev *v = &s->dev[s->n_dev];
    memset(v, 0, sizeof *v);
    if (!(v->pending = malloc(sizeof *v->pending * ZR_STAGE_MAX_PIECES)))
        return zr_err(err, ZR_E_NOMEM, "upload: out of host memory");
    CUresult r = d->cuMemAlloc(&v->p, ZR_STAGE_CHUNK);
    const bool have_mem = r == CUDA_SUCCESS;
    if (have_mem && (r = d->cuEventCreate(&v->done, CU_EVENT_DISABLE_TIMING)) == CUDA_SUCCESS) {
        s->n_dev++;
        *out = v;
        return ZR_OK;
    }
    int rc = ZR_OK; /* no room for the chunk: the caller waits for one instead */
    if (have_mem) {
        d->cuMemFree(v->p);
        rc = zr_driver_err(d, err, r, "upload: cuEventCreate");
    }
    free(v->pending);
    memset(v, 0, sizeof *v);
    return rc;
}

int zr_stage_open(ZrStage *s, const ZrCuda *cuda, uint64_t total, int n_threads, const ZrStageHost *pre,
                  ZrError *err) {
    memset(s, 0, sizeof *s);
    s->cuda = cuda;
    const ZrCuDriver *d = cuda->drv;
    CUresult r = d->cuStreamCreate(&s->stream, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS) {
        s->stream = NULL;
        return zr_driver_err(d, err, r, "upload: cuStreamCreate (the copy stream)");
    }
    int rc;
    r = d->cuStreamCreate(&s->rstream, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS) {
        s->rstream = NULL;
        rc = zr_driver_err(d, err, r, "upload: cuStreamCreate (the repack stream)");
        goto fail;
    }
    zr_launcher_init(&s->launcher, d, d->cuStreamWaitEvent ? s->rstream : s->stream);
    s->launcher_init = true;
    s->n_buf = stage_bufs(total);
    const size_t host_bytes = (size_t)s->n_buf * ZR_STAGE_CHUNK;
    if (pre && pre->base && pre->bytes >= host_bytes && d->cuMemHostRegister && d->cuMemHostUnregister &&
        d->cuMemHostRegister(pre->base, host_bytes, 0) == CUDA_SUCCESS) {
        s->registered = pre->base;
        for (int i = 0; i < s->n_buf; i++) s->host[i] = pre->base + (size_t)i * ZR_STAGE_CHUNK;
    }
    for (int i = 0; i < s->n_buf; i++) {
        if (!s->registered &&
            (rc = zr_cuda_host_alloc(cuda, (void **)&s->host[i], ZR_STAGE_CHUNK, "the upload's page-locked chunk", err)))
            goto fail;
        ZrStageDev *v;
        if ((rc = dev_new(s, &v, err))) goto fail;
        if (!v) {
            rc = zr_err(err, ZR_E_NOMEM, "out of GPU memory for the upload's staging chunk (%u bytes)", ZR_STAGE_CHUNK);
            goto fail;
        }
        r = d->cuEventCreate(&s->copied[i], CU_EVENT_DISABLE_TIMING);
        if (r != CUDA_SUCCESS) {
            rc = zr_driver_err(d, err, r, "upload: cuEventCreate");
            goto fail;
        }
    }
    if (n_threads <= 0) { /* the cores this process may run on */
        cpu_set_t set;
        const long ncpu = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = ncpu > 0 ? (int)ncpu : 1;
    }
    if (n_threads > ZR_STAGE_MAX_THREADS) n_threads = ZR_STAGE_MAX_THREADS;
    if (!(s->pool = pool_new(n_threads))) {
        rc = zr_err(err, ZR_E_NOMEM, "upload: out of host memory");
        goto fail;
    }
    s->n_threads = s->pool->n;
    return ZR_OK;
fail:
    zr_stage_close(s);
    return rc;
}

void zr_stage_close(ZrStage *s) {
    if (!s->cuda) return;
    const ZrCuDriver *d = s->cuda->drv;
    /* no copy or repack may still read a buffer freed below */
    if (s->stream) d->cuStreamSynchronize(s->stream);
    if (s->rstream) d->cuStreamSynchronize(s->rstream);
    pool_free(s->pool);
    for (int i = 0; i < ZR_STAGE_BUFS; i++) {
        if (s->copied[i]) d->cuEventDestroy(s->copied[i]);
        if (!s->registered) zr_cuda_host_free(s->cuda, s->host[i]);
    }
    if (s->registered) d->cuMemHostUnregister(s->registered);
    for (int i = 0; i < s->n_dev; i++) {
        if (s->dev[i].done) d->cuEventDestroy(s->dev[i].done);
        zr_cuda_free(s->cuda, s->dev[i].p);
        free(s->dev[i].pending);
    }
    if (s->launcher_init) zr_launcher_free(&s->launcher);
    if (s->stream) d->cuStreamDestroy(s->stream);
    if (s->rstream) d->cuStreamDestroy(s->rstream);
    memset(s, 0, sizeof *s);
}

int zr_stage_measure_h2d(ZrStage *s, double *gbps, ZrError *err) {
    const ZrCuDriver *d = s->cuda->drv;
    CUevent ev[2] = {NULL, NULL};
    int rc = ZR_OK;
    float ms = 0;
    *gbps = 0;
    CUresult r = d->cuEventCreate(&ev[0], CU_EVENT_DEFAULT);
    if (r == CUDA_SUCCESS) r = d->cuEventCreate(&ev[1], CU_EVENT_DEFAULT);
    for (int rep = 0; rep < 2 && r == CUDA_SUCCESS; rep++) { /* the first pays for the first use */
        r = d->cuEventRecord(ev[0], s->stream);
        if (r == CUDA_SUCCESS) r = d->cuMemcpyHtoDAsync(s->dev[0].p, s->host[0], ZR_STAGE_CHUNK, s->stream);
        if (r == CUDA_SUCCESS) r = d->cuEventRecord(ev[1], s->stream);
        if (r == CUDA_SUCCESS) r = d->cuEventSynchronize(ev[1]);
        if (r == CUDA_SUCCESS) r = d->cuEventElapsedTime(&ms, ev[0], ev[1]);
    }
    if (r != CUDA_SUCCESS) rc = zr_driver_err(d, err, r, "upload: timing a page-locked copy");
    else if (ms > 0) *gbps = ZR_STAGE_CHUNK / (ms * 1e6);
    for (int i = 0; i < 2; i++)
        if (ev[i]) d->cuEventDestroy(ev[i]);
    return rc;
}

/* Launches the repacks of every device chunk whose rows wait for them, once the kernels are
 * loaded; `wait`: waits for them to be (else returns when they are not yet). */
static int flush(ZrStage *s, bool wait, ZrError *err) {
    const ZrCuDriver *d = s->cuda->drv;
    int waiting = 0;
    for (int i = 0; i < s->n_dev; i++) waiting += s->dev[i].n_pending > 0;
    if (waiting == 0) return ZR_OK;
    if (waiting > s->max_waiting) s->max_waiting = waiting;
    if (!s->have_repack) {
        if (!wait && s->kernels_loaded && !s->kernels_loaded(s->need_kernels_ctx)) return ZR_OK;
        int rc = s->need_kernels ? s->need_kernels(s->need_kernels_ctx, err) : ZR_OK;
        if (rc || (rc = zr_kreg_load(s->cuda, "repack_rows", &s->repack, err))) return rc;
        s->have_repack = true;
    }
    for (int c = 0; c < s->n_dev; c++) {
        ZrStageDev *v = &s->dev[c];
        if (v->n_pending == 0) continue;
        for (int i = 0; i < v->n_pending; i++) {
            ZrStagePiece *p = &v->pending[i];
            CUdeviceptr src = v->p + p->off;
            int type = (int)p->type;
            const int64_t n = (int64_t)p->n_rows * (p->n_in / (int)zr_type_info(p->type)->block);
            int rc = ZR_LAUNCH(&s->launcher, &s->repack, ZR_DIM1((unsigned)((n + 255) / 256)), ZR_DIM1(256), 0, err, &src,
                               &p->main, &p->side, &type, &p->n_in, &p->row0, &p->n_rows, &p->n_out);
            if (rc) return rc;
        }
        v->n_pending = 0;
        ZR_CU_TRY(d, err, d->cuEventRecord(v->done, s->launcher.stream), "upload: cuEventRecord");
    }
    return ZR_OK;
}

/* A device chunk free for a host chunk's raw rows: the next one whose repacks are done, else a
 * new one while rows wait for the kernels (or fewer than ZR_STAGE_BUFS exist), else the next
 * one once its repacks are done. */
static int dev_take(ZrStage *s, ZrStageDev **out, ZrError *err) {
    const ZrCuDriver *d = s->cuda->drv;
    for (int k = 0; k < s->n_dev; k++) {
        const int c = (s->dnext + k) % s->n_dev;
        ZrStageDev *v = &s->dev[c];
        if (v->busy && v->n_pending == 0 && d->cuEventQuery && d->cuEventQuery(v->done) == CUDA_SUCCESS) v->busy = false;
        if (!v->busy) {
            s->dnext = (c + 1) % s->n_dev;
            *out = v;
            return ZR_OK;
        }
    }
    int rc;
    if (s->n_dev < ZR_STAGE_DEV_MAX && (s->n_dev < ZR_STAGE_BUFS || !s->have_repack)) {
        if ((rc = dev_new(s, out, err))) return rc;
        if (*out) return ZR_OK;
    }
    if ((rc = flush(s, true, err))) return rc;
    ZrStageDev *v = &s->dev[s->dnext];
    const double t0 = zr_clock_ms();
    ZR_CU_TRY(d, err, d->cuEventSynchronize(v->done), "upload: waiting for a chunk's repack");
    s->wait_ms += zr_clock_ms() - t0;
    v->busy = false;
    s->dnext = (s->dnext + 1) % s->n_dev;
    *out = v;
    return ZR_OK;
}

/* Gathers the current host chunk and sends it: the copies on the copy stream, the raw rows into
 * a device chunk whose repacks follow on the repack stream once the copies are done (the next
 * chunk's copies meanwhile; later, when the kernels are still loading), and moves on to the next
 * host chunk once its copies are done. */
static int send(ZrStage *s, ZrError *err) {
    const ZrCuDriver *d = s->cuda->drv;
    const int b = s->cur;
    if (s->n_pieces == 0) return ZR_OK;
    double t0 = zr_clock_ms();
    pool_copy(s->pool, s->host[b], s->pieces, s->n_pieces);
    s->gather_ms += zr_clock_ms() - t0;
    bool repacks = false;
    for (int i = 0; i < s->n_pieces; i++) repacks |= !s->pieces[i].dst;
    ZrStageDev *v = NULL;
    int rc;
    if (repacks && (rc = dev_take(s, &v, err))) return rc;
    for (int i = 0; i < s->n_pieces; i++) {
        const ZrStagePiece *p = &s->pieces[i];
        const CUdeviceptr to = p->dst ? p->dst : v->p + p->off;
        ZR_CU_TRY(d, err, d->cuMemcpyHtoDAsync(to, s->host[b] + p->off, p->bytes, s->stream),
                  "upload: cuMemcpyHtoDAsync(%zu bytes)", p->bytes);
        s->bytes += p->bytes;
    }
    ZR_CU_TRY(d, err, d->cuEventRecord(s->copied[b], s->stream), "upload: cuEventRecord");
    s->host_busy[b] = true;
    if (repacks) {
        /* the repack stream waits for these copies now: its launches may come later */
        if (s->launcher.stream != s->stream)
            ZR_CU_TRY(d, err, d->cuStreamWaitEvent(s->rstream, s->copied[b], 0), "upload: cuStreamWaitEvent");
        for (int i = 0; i < s->n_pieces; i++)
            if (!s->pieces[i].dst) v->pending[v->n_pending++] = s->pieces[i];
        v->busy = true;
        if ((rc = flush(s, false, err))) return rc;
    }
    s->n_pieces = 0;
    s->fill = 0;
    s->cur = (b + 1) % s->n_buf;
    if (s->host_busy[s->cur]) {
        t0 = zr_clock_ms();
        ZR_CU_TRY(d, err, d->cuEventSynchronize(s->copied[s->cur]), "upload: waiting for a chunk's copy");
        s->wait_ms += zr_clock_ms() - t0;
        s->host_busy[s->cur] = false;
    }
    return ZR_OK;
}

/* Where the next piece starts in the chunk: 256-byte aligned (the repack's rows, the copies). */
static size_t next_off(const ZrStage *s) { return (s->fill + 255) & ~(size_t)255; }

int zr_stage_copy(ZrStage *s, CUdeviceptr dst, const void *src, size_t bytes, ZrError *err) {
    const uint8_t *p = src;
    int rc;
    while (bytes > 0) {
        const size_t off = next_off(s);
        if (off >= ZR_STAGE_CHUNK || s->n_pieces == ZR_STAGE_MAX_PIECES) {
            if ((rc = send(s, err))) return rc;
            continue;
        }
        const size_t take = bytes < ZR_STAGE_CHUNK - off ? bytes : ZR_STAGE_CHUNK - off;
        s->pieces[s->n_pieces++] = (ZrStagePiece){.src = p, .off = off, .bytes = take, .dst = dst};
        s->fill = off + take;
        p += take;
        dst += take;
        bytes -= take;
    }
    return ZR_OK;
}

int zr_stage_repack(ZrStage *s, uint32_t type, const void *src, int n_in, int row0, int n_rows, int n_out,
                    CUdeviceptr main, CUdeviceptr side, ZrError *err) {
    const ZrTypeInfo *ti = zr_type_info(type);
    if (!ti || !ti->main || n_in % (int)ti->block)
        return zr_err(err, ZR_E_INTERNAL, "upload: no GPU repack for %s rows of %d values", zr_type_name(type), n_in);
    const size_t rb = zr_row_bytes(type, n_in);
    if (rb > ZR_STAGE_CHUNK)
        return zr_err(err, ZR_E_UNSUPPORTED, "upload: a %s row of %d values (%zu bytes) is larger than a chunk (%u bytes)",
                      ti->name, n_in, rb, ZR_STAGE_CHUNK);
    const uint8_t *p = src;
    int rc;
    while (n_rows > 0) {
        const size_t off = next_off(s);
        const size_t fit = off < ZR_STAGE_CHUNK ? (ZR_STAGE_CHUNK - off) / rb : 0;
        if (fit == 0 || s->n_pieces == ZR_STAGE_MAX_PIECES) {
            if ((rc = send(s, err))) return rc;
            continue;
        }
        const int take = (size_t)n_rows < fit ? n_rows : (int)fit;
        s->pieces[s->n_pieces++] = (ZrStagePiece){.src = p, .off = off, .bytes = rb * take, .type = type, .n_in = n_in,
                                                  .row0 = row0, .n_rows = take, .n_out = n_out, .main = main,
                                                  .side = side};
        s->fill = off + rb * take;
        p += rb * take;
        row0 += take;
        n_rows -= take;
    }
    return ZR_OK;
}

int zr_stage_finish(ZrStage *s, ZrError *err) {
    int rc = send(s, err);
    if (rc || (rc = flush(s, true, err))) return rc;
    const ZrCuDriver *d = s->cuda->drv;
    ZR_CU_TRY(d, err, d->cuStreamSynchronize(s->stream), "upload: cuStreamSynchronize (a copy failed)");
    ZR_CU_TRY(d, err, d->cuStreamSynchronize(s->rstream), "upload: cuStreamSynchronize (a repack failed)");
    for (int i = 0; i < s->n_buf; i++) s->host_busy[i] = false;
    for (int i = 0; i < s->n_dev; i++) s->dev[i].busy = false;
    return ZR_OK;
}
