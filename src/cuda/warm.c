#include "cuda/warm.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/buffers.h"
#include "cuda/mm_small.h"
#include "cuda/moe.h"
#include "zr_clock.h"

#define WARM_MAX_POOL ZR_CUF_MAX_BUFFERS

/* One GEMM shape of the prefill (pointers filled at the run) and the rows it may take. */
typedef struct WarmGemm {
    ZrGemm g;
    size_t a_bytes, b_row_bytes; /* A; B per row */
    int max_rows;
    int small_rows; /* prompts of 2 .. small_rows rows take the small product (cuda/mm_small.h) */
} WarmGemm;

typedef struct PoolBuf {
    CUdeviceptr p;
    size_t bytes;
} PoolBuf;

struct ZrCuWarm {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    const ZrCuDriver *drv;
    CUcontext ctx;
    const ZrModel *m;
    int n_ctx;
    bool all_logits; /* the output's GEMMs too */
    int first_rows;  /* the first prompt's rows: ZR_FIRST_ROWS_ALL, ZR_FIRST_ROWS_LATER or 1.. (zr_cuf_warm_start) */
    int rows_free;   /* prompts of up to this many rows take no GEMM (the small product or none) */
    int sm_count;   /* for the small product's shapes (zr_cuf_mm_fits) */
    size_t mm_smem; /* its shared memory limit on this GPU */
    double t0;
    /* posted by zr_cuf_warm_buffers (or the wait: none) */
    bool posted, have_bufs;
    bool cancel;      /* the buffers go: no GEMM more */
    bool idle;        /* set by the thread: it launches nothing more and its GEMMs are done */
    bool ready;       /* set by the thread: the first prompt's GEMMs are planned and run */
    bool go_rest;     /* the rest may start: the first prompt is done (zr_cuf_warm_release), or none comes */
    ZrCuWarmStats st_ready; /* st at ready (the thread goes on writing st) */
    ZrCublasLt lt_ready;    /* at ready: the first prompt's plans, for the caller (zr_cuf_warm_ready), while
                             * the thread goes on with a second handle (zr_cublaslt_fork) */
    PoolBuf pool[WARM_MAX_POOL]; /* the buffers the GEMMs may use, largest first */
    int n_pool;
    CUdeviceptr ws; /* ZR_CUF_LT_WS_BYTES */
    CUdeviceptr d_own; /* the outputs of the GEMMs run after ready (the prompts' own buffers are in use then) */
    size_t d_own_bytes;
    /* the thread's */
    WarmGemm *gemms;
    int n_gemms, cap_gemms;
    ZrCublasLt lt;
    char *cache_path; /* the plan cache (ZrCuWarmCache), NULL: none */
    ZrLtCacheKey cache_key;
    ZrCuWarmStats st;
    int rc;
    ZrError err;
};

static int imin(int a, int b) { return a < b ? a : b; }

/* Adds g (rows up to max_rows) unless its shape is listed; then the larger max_rows counts. */
static int add(ZrCuWarm *w, const WarmGemm *x, ZrError *err) {
    for (int i = 0; i < w->n_gemms; i++) {
        WarmGemm *y = &w->gemms[i];
        if (y->g.m == x->g.m && y->g.k == x->g.k && y->g.type_a == x->g.type_a && y->g.lda == x->g.lda &&
            y->g.type_b == x->g.type_b && y->g.ldd == x->g.ldd && y->g.beta == x->g.beta && y->g.batch == x->g.batch &&
            y->g.stride_a == x->g.stride_a) {
            if (x->max_rows > y->max_rows) y->max_rows = x->max_rows;
            if (x->small_rows < y->small_rows) y->small_rows = x->small_rows;
            return ZR_OK;
        }
    }
    if (w->n_gemms == w->cap_gemms) {
        const int cap = w->cap_gemms ? 2 * w->cap_gemms : 32;
        WarmGemm *p = realloc(w->gemms, sizeof *p * cap);
        if (!p) return zr_err(err, ZR_E_NOMEM, "warm-up: out of host memory");
        w->gemms = p;
        w->cap_gemms = cap;
    }
    w->gemms[w->n_gemms++] = *x;
    return ZR_OK;
}

/* The most rows (0 .. ZR_CUF_MM_COLS) up to which forward.c's gemm_group gives a matrix of type,
 * n_rows x n_in, to the small product instead of cuBLASLt. */
static int small_rows(const ZrCuWarm *w, uint32_t type, int n_in, int n_rows) {
    int n = 0;
    while (n < ZR_CUF_MM_COLS && zr_cuf_mm_fits(w->sm_count, w->mm_smem, type, n_in, n_rows, n + 1)) n++;
    return n;
}

/* The GEMMs of Y[rows][ldy] (+)= X W[n_rows rows]^T for a matrix of type and row length n_in, as
 * forward.c's gemm (n_rows = the whole matrix) and moe.c's rows_gemm make them: F32/F16 weights
 * read in place, others dequantized to F16 in slices of the weight buffer. small: the prefill
 * gives short prompts' products of this matrix to the small product where it fits (forward.c's
 * gemm_group; not moe.c's router). */
static int add_rows(ZrCuWarm *w, uint32_t type, int n_in, int n_rows, int ldy, float beta, int max_rows, bool small,
                    ZrError *err) {
    const size_t rb = zr_cuw_main_row_bytes(type, n_in);
    WarmGemm x = {.g = {.trans_a = 1, .trans_b = 0, .k = (uint64_t)n_in, .type_b = CUDA_R_16F, .ldb = n_in,
                        .type_d = CUDA_R_32F, .ldd = ldy, .alpha = 1.0f, .beta = beta},
                  .b_row_bytes = (size_t)n_in * 2, .max_rows = max_rows,
                  .small_rows = small ? small_rows(w, type, n_in, n_rows) : 0};
    if (type == ZR_TYPE_F32 || type == ZR_TYPE_F16) {
        x.g.m = (uint64_t)n_rows;
        x.g.type_a = type == ZR_TYPE_F32 ? CUDA_R_32F : CUDA_R_16F;
        x.g.lda = (int64_t)(rb / (type == ZR_TYPE_F32 ? 4 : 2));
        if (type == ZR_TYPE_F32) {
            x.g.type_b = CUDA_R_32F;
            x.b_row_bytes = (size_t)n_in * 4;
        }
        x.a_bytes = rb * (size_t)n_rows;
        return add(w, &x, err);
    }
    const int slice = (int)(zr_cuf_wbuf_elems(w->m) / (size_t)n_in);
    for (int r0 = 0; r0 < n_rows; r0 += slice) {
        const int nr = imin(n_rows - r0, slice);
        x.g.m = (uint64_t)nr;
        x.g.type_a = CUDA_R_16F;
        x.g.lda = n_in;
        x.a_bytes = (size_t)nr * n_in * 2;
        int rc = add(w, &x, err);
        if (rc) return rc;
    }
    return ZR_OK;
}

/* The batched GEMMs of moe.c's run_gemm for experts of type and row length n_in, rpe rows each:
 * batches of 1, 2, 4 .. nb experts (F32/F16 read in place, others from their F16 copies), each
 * expert's rows of X and Y n apart (the strides follow the bucket's n at the run). */
static int add_experts(ZrCuWarm *w, uint32_t type, int n_in, int rpe, int ldy, int nb, int max_rows, ZrError *err) {
    const bool f32 = type == ZR_TYPE_F32, dense = f32 || type == ZR_TYPE_F16;
    const int64_t lda = dense ? (int64_t)(zr_cuw_main_row_bytes(type, n_in) / (f32 ? 4 : 2)) : n_in;
    for (int b = 1; b <= nb; b *= 2) {
        WarmGemm x = {.g = {.trans_a = 1, .trans_b = 0, .m = (uint64_t)rpe, .k = (uint64_t)n_in, .type_a = f32 ? CUDA_R_32F : CUDA_R_16F,
                            .lda = lda, .type_b = f32 ? CUDA_R_32F : CUDA_R_16F, .ldb = n_in, .type_d = CUDA_R_32F, .ldd = ldy,
                            .alpha = 1.0f, .beta = 0.0f, .batch = b, .stride_a = b > 1 ? lda * rpe : 0},
                      .a_bytes = (size_t)lda * rpe * b * (f32 ? 4 : 2), .b_row_bytes = (size_t)n_in * (f32 ? 4 : 2) * b,
                      .max_rows = max_rows};
        int rc = add(w, &x, err);
        if (rc) return rc;
    }
    return ZR_OK;
}

/* Runs of consecutive matrices of one type and row length, stacked as the upload stacks them
 * (upload.c upload_group), each added with its rows. */
static int add_group(ZrCuWarm *w, const ZrWeight *const *ws, int n, int ldy, float beta, int max_rows, ZrError *err) {
    for (int i = 0; i < n;) {
        int k = i + 1, rows = (int)ws[i]->ne1;
        while (k < n && ws[k]->type == ws[i]->type && ws[k]->ne0 == ws[i]->ne0) rows += (int)ws[k++]->ne1;
        int rc = add_rows(w, ws[i]->type, (int)ws[i]->ne0, rows, ldy, beta, max_rows, true, err);
        if (rc) return rc;
        i = k;
    }
    return ZR_OK;
}

/* Every GEMM shape of the prefill of m (forward.c zr_cuf_prefill, moe.c zr_cuf_moe_prefill). */
static int list_gemms(ZrCuWarm *w, int rows, ZrError *err) {
    const ZrModel *m = w->m;
    const ZrHparams *hp = &m->hp;
    const int n_embd = hp->n_embd, q_dim = hp->n_head * hp->head_dim;
    const int qkv_dim = q_dim + 2 * hp->n_head_kv * hp->head_dim;
    int rc;
    for (int il = 0; il < hp->n_layer; il++) {
        const ZrLayer *L = &m->layers[il];
        const ZrLayerFacts *F = &L->facts;
        const ZrWeight *qkv[3] = {&L->wq, &L->wk, &L->wv}, *wo[1] = {&L->wo};
        if ((rc = add_group(w, qkv, 3, qkv_dim, 0.0f, rows, err))) return rc;
        if ((rc = add_group(w, wo, 1, n_embd, F->post_attn_norm ? 0.0f : 1.0f, rows, err))) return rc;
        if (F->n_expert) {
            const int ff = F->n_ff_expert;
            if ((rc = add_rows(w, L->ffn_gate_inp.type, n_embd, F->n_expert, F->n_expert, 0.0f, rows, false, err)))
                return rc;
            const int nb = zr_cuf_moe_batch_max(m, L);
            if (L->gate_exps.type != L->up_exps.type) {
                if ((rc = add_experts(w, L->gate_exps.type, n_embd, ff, 2 * ff, nb, rows, err)) ||
                    (rc = add_experts(w, L->up_exps.type, n_embd, ff, 2 * ff, nb, rows, err)))
                    return rc;
            } else if ((rc = add_experts(w, L->gate_exps.type, n_embd, 2 * ff, 2 * ff, nb, rows, err))) {
                return rc;
            }
            if ((rc = add_experts(w, L->down_exps.type, ff, n_embd, n_embd, nb, rows, err))) return rc;
            continue;
        }
        const ZrWeight *gu[2] = {&L->w_gate, &L->w_up}, *down[1] = {&L->w_down};
        if ((rc = add_group(w, gu, 2, 2 * hp->n_ff, 0.0f, rows, err))) return rc;
        if ((rc = add_group(w, down, 1, n_embd, F->post_ffn_norm ? 0.0f : 1.0f, rows, err))) return rc;
    }
    /* the output of zrun eval's all-logits path, ZR_CUF_LOGIT_ROWS rows at a time: only for it
     * (every bucket of a vocabulary-sized matrix, planned and run, for a command that never asks) */
    if (!w->all_logits) return ZR_OK;
    const ZrWeight *out[1] = {m->tied_output ? &m->tok_embd : &m->output};
    return add_group(w, out, 1, hp->n_vocab, 0.0f, imin(rows, ZR_CUF_LOGIT_ROWS), err);
}

/* The first buffer of the pool with bytes, other than the ones in use (busy, n_busy). */
static CUdeviceptr pick(const ZrCuWarm *w, size_t bytes, const CUdeviceptr *busy, int n_busy) {
    for (int i = 0; i < w->n_pool; i++) {
        bool used = false;
        for (int j = 0; j < n_busy; j++) used |= busy[j] == w->pool[i].p;
        if (!used && w->pool[i].bytes >= bytes) return w->pool[i].p;
    }
    return 0;
}

/* Which buckets a pass takes: all; those the first prompt needs before the load is done; the rest. */
typedef enum { WANT_ALL, WANT_FIRST, WANT_REST } Want;

/* Whether the first prompt (w->first_rows) takes x's GEMM of n rows. */
static bool first_takes(const ZrCuWarm *w, const WarmGemm *x, int64_t n) {
    if (w->first_rows == ZR_FIRST_ROWS_ALL || w->first_rows > w->st.max_rows) return true; /* chunks: every bucket */
    return w->first_rows > x->small_rows && w->first_rows >= 2 && zr_cublaslt_bucket(n) == zr_cublaslt_bucket(w->first_rows);
}

/* x's GEMM of n rows (n = the bucket's largest) as a shape: no operands (the plans made before
 * the buffers exist, while the main thread may be posting them: nothing of the pool is read). */
static void shape_at(const WarmGemm *x, int64_t n, ZrGemm *g) {
    *g = x->g;
    g->n = (uint64_t)zr_cublaslt_bucket(n);
    if (g->batch > 1) { /* each batch's B and D matrices g.n rows apart */
        g->stride_b = (int64_t)g->n * g->ldb;
        g->stride_d = (int64_t)g->n * g->ldd;
    }
    g->workspace_bytes = ZR_CUF_LT_WS_BYTES; /* the prefill's: a plan's shape includes it */
}

/* x's GEMM of n rows with its operands from the pool, or from the own output buffer (own): *g,
 * or false when they do not fit. Only once the buffers are posted. */
static bool gemm_at(const ZrCuWarm *w, const WarmGemm *x, int64_t n, bool own, ZrGemm *g) {
    shape_at(x, n, g);
    g->workspace = w->ws;
    const size_t d_bytes = (size_t)g->ldd * g->n * sizeof(float) * (g->batch > 1 ? (size_t)g->batch : 1);
    CUdeviceptr busy[3];
    busy[0] = g->a = pick(w, x->a_bytes, busy, 0);
    busy[1] = g->b = pick(w, x->b_row_bytes * g->n, busy, 1);
    g->d = own ? (d_bytes <= w->d_own_bytes ? w->d_own : 0) : pick(w, d_bytes, busy, 2);
    return g->a && g->b && g->d;
}

/* Every listed shape for every bucket of its rows that a prompt can reach (not those wholly taken
 * by the small product) and the pass wants: planned, and with a stream run once where the
 * operands fit (the plans made before are found); the passes after ready write their outputs to
 * the own buffer (d_own). */
static int run_gemms(ZrCuWarm *w, CUstream stream, Want want, ZrError *err) {
    for (int i = 0; i < w->n_gemms; i++) {
        WarmGemm *x = &w->gemms[i];
        for (int64_t b = ZR_LT_BUCKET_MIN;; b *= 2) {
            const int64_t n = b < x->max_rows ? b : x->max_rows; /* the last bucket: as many rows as there can be */
            if (n <= x->small_rows) { /* every prompt of this bucket's rows takes the small product */
                if (!stream && want != WANT_REST) w->st.n_small++;
                if (n >= x->max_rows) break;
                continue;
            }
            if (want != WANT_ALL && first_takes(w, x, n) != (want == WANT_FIRST)) {
                if (n >= x->max_rows) break;
                continue;
            }
            ZrGemm g;
            const bool fits = stream && gemm_at(w, x, n, want == WANT_REST, &g);
            if (!stream) shape_at(x, n, &g);
            pthread_mutex_lock(&w->mu);
            const bool cancel = w->cancel;
            pthread_mutex_unlock(&w->mu);
            if (cancel) return ZR_OK;
            int rc;
            if (!stream) {
                rc = w->lt.handle ? zr_cublaslt_plan(&w->lt, &g, err) : ZR_OK; /* no handle: listed only */
                w->st.n_listed++;
            } else if (fits) {
                rc = zr_cublaslt_gemm(&w->lt, stream, &g, err);
                w->st.n_gemms++;
            } else {
                w->st.n_planned++;
                rc = ZR_OK;
            }
            if (rc) return rc;
            if (n >= x->max_rows) break;
        }
    }
    return ZR_OK;
}

/* What the list depends on besides the model: the GPU's size (the small product's rows) and
 * whether eval's all-logits GEMMs are wanted. */
static void setup(ZrCuWarm *w, const ZrModel *m, int n_ctx, int sm_count, int max_smem_optin, bool all_logits,
                  int first_rows) {
    w->m = m;
    w->n_ctx = n_ctx;
    w->all_logits = all_logits;
    w->first_rows = first_rows;
    w->go_rest = first_rows == ZR_FIRST_ROWS_LATER; /* no prompt yet: the rest at once */
    w->sm_count = sm_count > 0 ? sm_count : 1;
    w->mm_smem = zr_cuf_mm_smem_limit(max_smem_optin);
}

/* Every shape listed, up to the longest prompt chunk (st.max_rows), and the rows no GEMM takes. */
static int list(ZrCuWarm *w, ZrError *err) {
    const int rows = imin(w->n_ctx, ZR_CUF_UBATCH);
    w->st.max_rows = rows;
    int rc = list_gemms(w, rows, err);
    w->rows_free = rows;
    for (int i = 0; i < w->n_gemms; i++) w->rows_free = imin(w->rows_free, w->gemms[i].small_rows);
    if (w->rows_free < 1) w->rows_free = 1; /* one row: the decode step's matrix-vector kernels */
    return rc;
}

/* The pass's shapes planned for each bucket a prompt can reach (no cuBLASLt handle: counted
 * only, st.n_listed). */
static int plan(ZrCuWarm *w, Want want, ZrError *err) {
    return w->st.max_rows >= 2 ? run_gemms(w, NULL, want, err) : ZR_OK; /* a prefill has 2 rows or more */
}

static void lt_counts(ZrCuWarm *w) {
    w->st.n_heuristics = w->lt.n_heuristics;
    w->st.n_cached = w->lt.n_cached;
    w->st.n_cache_refused = w->lt.n_cache_refused;
}

/* The plan cache read into w->lt (cuda/cublaslt.h): a failure is a note, not an error. */
static void cache_load(ZrCuWarm *w) {
    const double t0 = zr_clock_ms();
    ZrError e = {0};
    if (zr_cublaslt_cache_load(&w->lt, w->cache_path, &w->cache_key, &e))
        snprintf(w->st.cache_note, sizeof w->st.cache_note, "not read: %.300s", e.msg);
    w->st.n_cache_read = w->lt.cache.n;
    w->st.cache_load_ms = zr_clock_ms() - t0;
}

/* The plans the heuristic made, with the entries read, written back: a failure is a note. */
static void cache_save(ZrCuWarm *w) {
    if (!w->lt.n_heuristics) return; /* nothing new */
    const double t0 = zr_clock_ms();
    ZrError e = {0};
    if (zr_cublaslt_cache_save(&w->lt, w->cache_path, &w->cache_key, &w->st.n_cache_written, &e)) {
        const size_t used = strlen(w->st.cache_note);
        snprintf(w->st.cache_note + used, sizeof w->st.cache_note - used, "%snot written: %.300s", used ? "; " : "", e.msg);
    }
    w->st.cache_save_ms = zr_clock_ms() - t0;
}

/* The GEMMs after ready: their plans, and each run once with its output in an allocation of
 * its own (the prompts run beside them and write the pool). */
static int warm_rest(ZrCuWarm *w, CUstream stream, ZrError *err) {
    const ZrCuDriver *d = w->drv;
    /* not beside the first prompt's own cuBLASLt calls: the library's first uses of kernels
     * serialize (a 5-token F16 prompt took 14-44 ms instead of 2 beside them, H100) */
    pthread_mutex_lock(&w->mu);
    while (!w->go_rest && !w->cancel) pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
    const double t0 = zr_clock_ms();
    const int listed = w->st.n_listed;
    int rc = plan(w, WANT_REST, err);
    w->st.n_rest = w->st.n_listed - listed;
    if (!rc && w->cache_path) cache_save(w); /* every plan made now */
    if (rc || !stream || !w->st.n_rest) goto done;
    size_t d_bytes = 0;
    for (int i = 0; i < w->n_gemms; i++) {
        const WarmGemm *x = &w->gemms[i];
        const size_t b = (size_t)x->g.ldd * (size_t)zr_cublaslt_bucket(x->max_rows) * sizeof(float) *
                         (x->g.batch > 1 ? (size_t)x->g.batch : 1);
        if (b > d_bytes) d_bytes = b;
    }
    if (d->cuMemAlloc(&w->d_own, d_bytes) != CUDA_SUCCESS) { /* no room: planned only (the first use loads the kernels) */
        w->d_own = 0;
        goto done;
    }
    w->d_own_bytes = d_bytes;
    const int ran = w->st.n_gemms;
    rc = run_gemms(w, stream, WANT_REST, err);
    const CUresult r = d->cuStreamSynchronize(stream);
    if (!rc && r != CUDA_SUCCESS) rc = zr_driver_err(d, err, r, "its GEMMs");
    w->st.n_rest_run = w->st.n_gemms - ran;
    d->cuMemFree(w->d_own);
    w->d_own = 0;
done:
    w->st.rest_ms = zr_clock_ms() - t0;
    return rc;
}

static int warm_main_(ZrCuWarm *w) {
    const ZrCuDriver *d = w->drv;
    ZrError *err = &w->err;
    CUresult r = d->cuCtxSetCurrent(w->ctx);
    if (r != CUDA_SUCCESS) return zr_driver_err(d, err, r, "warm-up: cuCtxSetCurrent on its thread");
    int rc = zr_cublaslt_open(&w->lt, err);
    if (rc) return rc;
    w->st.open_ms = zr_clock_ms() - w->t0;
    if (w->cache_path) cache_load(w);
    /* the plans need no buffers: made while the main thread loads the kernels */
    if ((rc = plan(w, WANT_FIRST, err))) return zr_err_wrap(err, "warming up the prefill at load");
    w->st.plan_ms = zr_clock_ms() - w->t0 - w->st.open_ms;
    if (w->cache_path && w->first_rows == ZR_FIRST_ROWS_ALL) cache_save(w); /* else after the rest's plans */
    const double t_wait = zr_clock_ms();
    pthread_mutex_lock(&w->mu);
    while (!w->posted) pthread_cond_wait(&w->cv, &w->mu);
    const bool go = w->have_bufs;
    pthread_mutex_unlock(&w->mu);
    const double t_go = zr_clock_ms();
    w->st.wait_ms = t_go - t_wait;
    CUstream stream = NULL;
    if (go && w->st.max_rows >= 2) /* a prefill has 2 rows or more */
        ZR_CU_TRY(d, err, d->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "warm-up: cuStreamCreate");
    if (stream) {
        rc = run_gemms(w, stream, WANT_FIRST, err);
        r = d->cuStreamSynchronize(stream);
        if (!rc && r != CUDA_SUCCESS) rc = zr_driver_err(d, err, r, "its GEMMs");
    }
    w->st.gemm_ms = zr_clock_ms() - t_go;
    lt_counts(w);
    /* the rest (none for ZR_FIRST_ROWS_ALL) after the first prompt, on a handle of its own: the
     * caller takes this one with the first prompt's plans (without a second, it waits for the rest) */
    ZrCublasLt rest;
    ZrError ferr = {0};
    const bool fork = !rc && w->first_rows != ZR_FIRST_ROWS_ALL && !zr_cublaslt_fork(&w->lt, &rest, &ferr);
    pthread_mutex_lock(&w->mu);
    w->st_ready = w->st;
    if (fork) {
        w->lt_ready = w->lt;
        w->lt = rest;
    }
    w->ready = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    if (!rc && w->first_rows != ZR_FIRST_ROWS_ALL) rc = warm_rest(w, stream, err);
    if (stream) d->cuStreamDestroy(stream);
    return rc ? zr_err_wrap(err, "warming up the prefill at load") : ZR_OK;
}

static void *warm_main(void *arg) {
    ZrCuWarm *w = arg;
    w->rc = warm_main_(w);
    lt_counts(w);
    pthread_mutex_lock(&w->mu);
    if (!w->ready) w->st_ready = w->st;
    w->idle = w->ready = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* A warm-up whose thread never started, freed. */
static void unstarted_free(ZrCuWarm *w) {
    free(w->gemms);
    free(w->cache_path);
    free(w);
}

int zr_cuf_warm_start(ZrCuWarm **out, const ZrCuDriver *drv, CUcontext ctx, int sm_count, int max_smem_optin,
                      const ZrModel *m, int n_ctx, bool all_logits, int first_rows, const ZrCuWarmCache *cache,
                      ZrError *err) {
    *out = NULL;
    ZrCuWarm *w = calloc(1, sizeof *w);
    if (!w) return zr_err(err, ZR_E_NOMEM, "warm-up: out of host memory");
    if (cache && cache->path) {
        if (!(w->cache_path = strdup(cache->path))) {
            unstarted_free(w);
            return zr_err(err, ZR_E_NOMEM, "warm-up: out of host memory");
        }
        w->cache_key = cache->key;
    }
    w->drv = drv;
    w->ctx = ctx;
    setup(w, m, n_ctx, sm_count, max_smem_optin, all_logits, first_rows);
    w->t0 = zr_clock_ms();
    if (list(w, err)) { /* on this thread: the rows no GEMM takes are known at once */
        unstarted_free(w);
        return zr_err_wrap(err, "warming up the prefill at load");
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (pthread_create(&w->th, NULL, warm_main, w)) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        unstarted_free(w);
        return zr_err(err, ZR_E_NOMEM, "warm-up: cannot start its thread");
    }
    *out = w;
    return ZR_OK;
}

bool zr_cuf_warm_ready(ZrCuWarm *w, ZrCuWarmStats *st, ZrCublasLt *lt) {
    pthread_mutex_lock(&w->mu);
    while (!w->ready) pthread_cond_wait(&w->cv, &w->mu);
    const bool idle = w->idle;
    if (st) *st = idle ? w->st : w->st_ready;
    memset(lt, 0, sizeof *lt);
    if (!idle && w->lt_ready.handle) { /* the first prompt's plans: the caller's from here on */
        *lt = w->lt_ready;
        memset(&w->lt_ready, 0, sizeof w->lt_ready);
    }
    pthread_mutex_unlock(&w->mu);
    return idle;
}

bool zr_cuf_warm_joins(const ZrCuWarm *w, int n, bool have_first) {
    if (n <= w->rows_free) return false; /* no GEMM */
    const bool covered = w->first_rows >= 2 && w->first_rows <= w->st.max_rows && n <= w->first_rows &&
                         zr_cublaslt_bucket(n) == zr_cublaslt_bucket(w->first_rows);
    return !(have_first && covered);
}

void zr_cuf_warm_release(ZrCuWarm *w) {
    pthread_mutex_lock(&w->mu);
    w->go_rest = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void post(ZrCuWarm *w, bool have_bufs) {
    pthread_mutex_lock(&w->mu);
    if (!w->posted) {
        w->posted = true;
        w->have_bufs = have_bufs;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
}

int zr_cuf_warm_list(const ZrModel *m, int n_ctx, int sm_count, int max_smem_optin, bool all_logits, ZrCuWarmStats *st,
                     ZrError *err) {
    ZrCuWarm w = {0};
    setup(&w, m, n_ctx, sm_count, max_smem_optin, all_logits, ZR_FIRST_ROWS_ALL);
    pthread_mutex_init(&w.mu, NULL); /* run_gemms asks it whether the buffers went */
    int rc = list(&w, err);
    if (!rc) rc = plan(&w, WANT_ALL, err);
    pthread_mutex_destroy(&w.mu);
    free(w.gemms);
    *st = w.st;
    return rc;
}

void zr_cuf_warm_buffers(void *warm, const ZrCuForward *f) {
    ZrCuWarm *w = warm;
    if (!f) { /* the buffers go: stop, and wait until the GEMMs launched are done */
        post(w, false);
        pthread_mutex_lock(&w->mu);
        w->cancel = true;
        while (!w->idle) pthread_cond_wait(&w->cv, &w->mu);
        pthread_mutex_unlock(&w->mu);
        return;
    }
    ZrCuBuffer t[ZR_CUF_MAX_BUFFERS];
    const int n = zr_cuf_buffers(f->m, f->n_ctx, f->kv16, t);
    w->n_pool = 0;
    for (int i = 0; i < n; i++) {
        /* not the small ones zr_cuf_init clears after the upload, nor the workspace (the GEMMs' own) */
        const size_t fld = t[i].field;
        if (fld == offsetof(ZrCuForward, d_tok) || fld == offsetof(ZrCuForward, d_pick) ||
            fld == offsetof(ZrCuForward, attn_count) || fld == offsetof(ZrCuForward, lt_ws))
            continue;
        PoolBuf b = {*(const CUdeviceptr *)((const char *)f + fld), t[i].bytes};
        int at = w->n_pool++;
        while (at > 0 && w->pool[at - 1].bytes < b.bytes) { /* largest first */
            w->pool[at] = w->pool[at - 1];
            at--;
        }
        w->pool[at] = b;
    }
    w->ws = f->lt_ws; /* of ZR_CUF_LT_WS_BYTES, the size the plans were made for */
    post(w, true);
}

int zr_cuf_warm_wait(ZrCuWarm *w, ZrCublasLt *lt, ZrCuWarmStats *st, ZrError *err) {
    post(w, false); /* nothing more comes */
    zr_cuf_warm_release(w);
    pthread_join(w->th, NULL);
    int rc = w->rc;
    if (w->lt_ready.handle) { /* the first prompt's handle, not taken: the thread ended before ready was asked */
        if (lt->handle) zr_cublaslt_close(&w->lt_ready);
        else *lt = w->lt_ready;
        memset(&w->lt_ready, 0, sizeof w->lt_ready);
    }
    if (rc) { /* a handle the caller has stays the caller's */
        zr_cublaslt_close(&w->lt);
        *err = w->err;
    } else if (lt->handle) { /* the rest's plans join the first prompt's */
        rc = zr_cublaslt_adopt(lt, &w->lt, err);
    } else {
        *lt = w->lt;
    }
    if (st) *st = w->st;
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w->gemms);
    free(w->cache_path);
    free(w);
    return rc;
}

int zr_cuf_warm_copies(ZrCuForward *f, bool decode_step, ZrError *err) {
    int32_t v[2] = {0, 0};
    int rc = zr_cuda_d2h(f->cuda, v, f->d_tok, sizeof v, err);
    if (!rc) rc = zr_cuda_sync(f->cuda, err);
    if (!rc) rc = zr_cuda_h2d(f->cuda, f->d_tok, v, sizeof v, err);
    if (!rc) rc = zr_cuda_sync(f->cuda, err);
    /* one decode step: every decode kernel's first launch (1.7 ms on an H100) is paid here, not by
     * the first one-token prompt; the KV rows it writes at position 0 are rewritten by the first
     * forward call, which starts at position 0 */
    if (!rc && decode_step) rc = zr_cuf_decode_step(f, err);
    if (!rc && decode_step) rc = zr_cuda_sync(f->cuda, err);
    return rc ? zr_err_wrap(err, "warming up the copies and the decode step at load") : ZR_OK;
}
