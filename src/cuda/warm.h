/* No cold-start tax on the first prompt, and none on the critical path either (issue 19): a
 * thread of its own, started as soon as the context exists, opens cuBLASLt (while the early
 * thread loads the kernels' module: cuda/early.h), plans every GEMM shape of the prefill and, once the
 * activation buffers exist (zr_cuf_init allocates them before the weights go up and tells
 * ZrCuProgress.buffers), runs each shape once for every bucket of rows up to the longest prompt
 * chunk (cuda/cublaslt.h ZR_LT_BUCKET_MIN, 16, .., ZR_CUF_UBATCH; not a matrix's buckets whose
 * prompts all take the small product, cuda/mm_small.h) on a stream of its own:
 * cuBLASLt's heuristic and its GEMM kernels (loaded lazily by the driver, CUDA 12.2+) are loaded
 * while the upload runs. zrun's own
 * kernels are loaded at load already (cuModuleGetFunction of every kernel, cuda/kreg.c).
 *
 * The load waits only for the GEMMs the first prompt takes (its rows' bucket of the matrices the
 * small product does not take; all of them for ZR_FIRST_ROWS_ALL, none for a prompt yet unknown); the
 * thread plans and runs the rest once that prompt is done (zr_cuf_warm_release: beside the decode,
 * not beside the prompt's own cuBLASLt calls), and a prompt that needs a GEMM the load did not
 * make ready joins it first (zr_cuf_warm_joins). Before ready its GEMMs read and write the activation buffers,
 * the F16 weight buffer and the KV cache, whatever they hold, never the weights: they need none of
 * the upload, and nothing reads those buffers before the first prompt, which writes them first;
 * after ready they only read those, and write an allocation of their own. The shapes are listed from the model
 * as forward.c's gemm and moe.c's rows_gemm make them (test/gpu/test_startup.c: a prompt of any
 * length after the warm-up asks the heuristic nothing). */
#pragma once
#include <stdbool.h>

#include "backend.h"
#include "cuda/forward.h"


typedef struct ZrCuWarm ZrCuWarm;

typedef struct ZrCuWarmStats {
    double open_ms;  /* cuBLASLt's opening, on the thread (0: opened before it) */
    double plan_ms;  /* then the plans of every shape and bucket (no buffers needed) */
    double wait_ms;  /* then waiting for the buffers */
    double gemm_ms;  /* then the GEMMs, from the buffers' arrival to the stream's end */
    int n_gemms;     /* GEMMs run: one per shape and bucket */
    int n_planned;   /* of the plans, those not run (operands larger than every buffer: an F16/F32
                      * output matrix of zrun eval's all-logits path) */
    int max_rows;    /* the largest bucket warmed: prompts of 1..max_rows rows per chunk */
    int n_small;     /* shapes' buckets left out: every prompt of their rows takes the small product */
    int n_listed;    /* shapes' buckets planned (with the plans found or made by cuBLASLt) */
    int n_heuristics, n_cached, n_cache_refused; /* cuBLASLt's counts (ZrCublasLt) at ready, and at the end */
    int n_rest;      /* of them, planned after ready (after the first prompt) */
    int n_rest_run;  /* of those, run */
    double rest_ms;  /* their plans and runs */
    /* the plan cache (ZrCuWarmCache): read right after cuBLASLt's opening (in plan_ms), written
     * after the plans when they asked the heuristic anything */
    int n_cache_read;     /* entries read (0: none, or the file was refused: cache_note) */
    int n_cache_written;  /* entries written (0: not written) */
    double cache_load_ms, cache_save_ms;
    char cache_note[700]; /* why it was not read or not written; "" when it was, or had no need */
} ZrCuWarmStats;

/* The cuBLASLt plan cache on disk the warm-up reads and writes (cuda/lt_cache.h). */
typedef struct ZrCuWarmCache {
    const char *path;  /* the file (copied); NULL: no cache */
    ZrLtCacheKey key;  /* the GPU's part of its key (lt_version: the library's, filled in) */
} ZrCuWarmCache;

/* Starts the thread in the context ctx of drv, on a GPU of sm_count multiprocessors whose blocks
 * may opt in to max_smem_optin bytes of shared memory (which rows the small product takes, left
 * out of the warm-up: cuda/mm_small.h), for model m and a context of n_ctx positions; all_logits:
 * the output's GEMMs of the all-logits path too (ZrBackendOptions.all_logits); first_rows:
 * ZrBackendOptions.first_rows (which GEMMs zr_cuf_warm_ready waits for). The thread opens
 * cuBLASLt first (beside the kernels' module: cuda/early.h). cache: the plan cache, or NULL:
 * none (its failures are notes in ZrCuWarmStats, never the warm-up's errors). ZR_E_NOMEM when
 * no thread can be started. */
int zr_cuf_warm_start(ZrCuWarm **out, const ZrCuDriver *drv, CUcontext ctx, int sm_count, int max_smem_optin,
                      const ZrModel *m, int n_ctx, bool all_logits, int first_rows, const ZrCuWarmCache *cache,
                      ZrError *err);
/* Waits until the GEMMs the first prompt takes are planned and run (or the thread failed): true
 * when the thread is done (join it: zr_cuf_warm_wait), false when the rest goes on. *st: the
 * stats so far (st may be NULL). *lt: the cuBLASLt with the first prompt's plans, the caller's
 * from here on (the thread plans and runs the rest on a second handle: zr_cublaslt_fork), or
 * zeroed (a prompt that needs cuBLASLt then joins the thread first). */
bool zr_cuf_warm_ready(ZrCuWarm *w, ZrCuWarmStats *st, ZrCublasLt *lt);
/* The rest may start (the first prompt is done): until then the thread waits after ready, so
 * that it does not share cuBLASLt with that prompt (zr_cuf_warm_wait releases it too). */
void zr_cuf_warm_release(ZrCuWarm *w);
/* Whether a prompt of n rows must join the thread first: it takes a cuBLASLt GEMM (more rows than
 * the small product takes) that the load did not make ready for the caller (have_first: it holds
 * the first prompt's plans from zr_cuf_warm_ready; those cover the first prompt's rows' bucket, n
 * not above them). */
bool zr_cuf_warm_joins(const ZrCuWarm *w, int n, bool have_first);
/* The list zr_cuf_warm_start would plan for these arguments, made on the calling thread without a
 * GPU or cuBLASLt (tests): st's n_listed, n_small and max_rows. */
int zr_cuf_warm_list(const ZrModel *m, int n_ctx, int sm_count, int max_smem_optin, bool all_logits, ZrCuWarmStats *st,
                     ZrError *err);
/* ZrCuProgress.buffers: f's activation buffers and workspaces exist (warm: the ZrCuWarm); f NULL:
 * they are about to be freed, so no more GEMMs, and it returns once those launched are done. */
void zr_cuf_warm_buffers(void *warm, const ZrCuForward *f);
/* Joins the thread (the GEMMs done) and frees w: *lt is the cuBLASLt it opened with the plans
 * made (into the one zr_cuf_warm_ready gave, when it gave one: zr_cublaslt_adopt), or on failure
 * err set (a handle the caller had stays its own; else *lt is zeroed). Without
 * zr_cuf_warm_buffers the thread only opens. */
int zr_cuf_warm_wait(ZrCuWarm *w, ZrCublasLt *lt, ZrCuWarmStats *st, ZrError *err);

/* The driver's first pageable copies each way on f's stream (it sets up their staging at first
 * use, which would be the first prompt's: its token ids up, its logits down), from and to the
 * decode step's token and position (zeros, which it writes back); then one eager decode step of
 * token 0 at position 0 when decode_step (not while profiling: it would be counted) (the decode kernels' first launches; it writes the KV rows of position 0,
 * which the first forward call rewrites). Before any decode tail is set. Synchronizes. */
int zr_cuf_warm_copies(ZrCuForward *f, bool decode_step, ZrError *err);
