/* The staged upload (issue 19): host bytes (the mapped model file) into device memory at the copy
 * engine's speed. Pieces are gathered into page-locked chunks of ZR_STAGE_CHUNK bytes by several
 * host threads at once, each chunk goes up with cuMemcpyHtoDAsync on a stream of its own while
 * the next one is gathered, and rows in ggml's block layout are repacked on a second stream by
 * cu/repack.cu from a device staging chunk into their final place (while the next chunk copies) (the host's
 * zr_cuw_repack_row is the reference it matches byte for byte). An event per chunk says when
 * its buffers may be filled again.
 *
 * Nothing is on the device until zr_stage_finish returns ZR_OK: it waits for the copy stream,
 * so work queued afterwards on any stream sees the bytes. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda/launch.h"
#include "cuda/module.h"

#define ZR_STAGE_BUFS 4              /* host chunks in flight: one gathered while three copy */
#define ZR_STAGE_CHUNK (16u << 20)   /* bytes per chunk: 0.3 ms of PCIe 5 x16 */
#define ZR_STAGE_DEV_MAX 64          /* device chunks at most (1 GiB): raw rows wait in them while the kernels load */
#define ZR_STAGE_MAX_PIECES 128      /* pieces per chunk (a chunk is sent early when they run out) */
/* host threads gathering, the caller's included: on the H200's 16 cores 700 MiB of a mapped file
 * went into page-locked chunks at 5.4 GB/s on 1 thread, 30.7 on 8 and 25.5 on 16 (cu/PERF.md) */
#define ZR_STAGE_MAX_THREADS 8

/* One piece of a chunk: bytes from src at off in the chunk, then either copied to dst, or (dst
 * 0) repacked as rows [row0, row0 + n_rows) of a [n_in, n_out] matrix of `type` into main and
 * side. */
typedef struct ZrStagePiece {
    const void *src;
    size_t off, bytes;
    CUdeviceptr dst;
    uint32_t type;
    int n_in, row0, n_rows, n_out;
    CUdeviceptr main, side;
} ZrStagePiece;

/* The host chunks made before the GPU's context exists (zr_stage_host_prepare): anonymous memory
 * on transparent huge pages, already faulted in, which zr_stage_open only registers with the
 * driver. Pinning 4 x 16 MiB with cuMemHostAlloc took ~40 ms on the H200; touching huge pages
 * ~13 ms (while the context is still being made) and registering them 2.4 ms. */
typedef struct ZrStageHost {
    void *map;          /* the mapping (NULL: none: zr_stage_open pins its own chunks) */
    size_t map_bytes;
    uint8_t *base;      /* 2 MiB aligned in it, [bytes] */
    size_t bytes;
} ZrStageHost;

/* A device chunk: raw rows waiting for their repack. */
typedef struct ZrStageDev {
    CUdeviceptr p;                      /* [ZR_STAGE_CHUNK] */
    CUevent done;                       /* recorded after its repacks */
    bool busy;                          /* holds rows: repacks not launched, or done not seen yet */
    int n_pending;                      /* its pieces whose repack waits for the kernels */
    ZrStagePiece *pending;              /* [ZR_STAGE_MAX_PIECES] */
} ZrStageDev;

typedef struct ZrStagePool ZrStagePool; /* the gathering threads (stage.c) */

typedef struct ZrStage {
    const ZrCuda *cuda;
    CUstream stream;                    /* the copies, apart from the compute stream */
    CUstream rstream;                   /* the repacks, so a chunk's repack runs while the next copies */
    ZrLauncher launcher;                /* on rstream */
    ZrKernel repack;                    /* repack_rows, looked up before the first repack */
    bool have_repack;
    /* the kernels' module may still be loading on another thread while the chunks go up:
     * need_kernels waits for it (NULL: it is loaded); kernels_loaded asks without waiting (NULL:
     * the first repack waits). Rows copied before it is loaded wait in device chunks of their
     * own (at most ZR_STAGE_DEV_MAX) and are repacked once it is. */
    int (*need_kernels)(void *ctx, ZrError *err);
    bool (*kernels_loaded)(void *ctx);
    void *need_kernels_ctx;
    bool launcher_init;
    int n_buf;
    uint8_t *host[ZR_STAGE_BUFS];       /* page-locked [ZR_STAGE_CHUNK] */
    uint8_t *registered;                /* host[] lie in this prepared memory, registered (else cuMemHostAlloc's) */
    CUevent copied[ZR_STAGE_BUFS];      /* recorded after a host chunk's copies */
    bool host_busy[ZR_STAGE_BUFS];      /* copied was recorded and not yet waited for */
    ZrStageDev dev[ZR_STAGE_DEV_MAX];
    int n_dev, dnext;                   /* device chunks made; the next one to try */
    int cur;                            /* the host chunk being gathered */
    size_t fill;                        /* its bytes so far */
    ZrStagePiece pieces[ZR_STAGE_MAX_PIECES];
    int n_pieces;
    ZrStagePool *pool;
    int n_threads;                      /* gathering threads, the caller's included */
    uint64_t bytes;                     /* bytes sent so far */
    int max_waiting;                    /* most device chunks whose rows waited for the kernels at once */
    double gather_ms, wait_ms;          /* in pool_copy; in waits for a chunk's copies or repacks */
} ZrStage;

/* Maps and faults in the host chunks an upload of `total` bytes uses; needs no GPU. On failure
 * h->map is NULL (zr_stage_open then pins chunks of its own). */
void zr_stage_host_prepare(ZrStageHost *h, uint64_t total);
/* Unmaps them (after zr_stage_close). */
void zr_stage_host_release(ZrStageHost *h);
/* Opens the copy stream, the page-locked and device chunks (at most what `total` bytes need:
 * `pre`'s registered where given and large enough, else pinned here) and n_threads - 1 helper
 * threads (the repack kernel is looked up at the first repack) (n_threads <= 0: as many as the
 * machine has cores, at most ZR_STAGE_MAX_THREADS). `pre` must outlive the stage. */
int zr_stage_open(ZrStage *s, const ZrCuda *cuda, uint64_t total, int n_threads, const ZrStageHost *pre,
                  ZrError *err);
/* Queues bytes from src (host) to dst (device). */
int zr_stage_copy(ZrStage *s, CUdeviceptr dst, const void *src, size_t bytes, ZrError *err);
/* Queues n_rows ggml rows of `type` (zr_row_bytes(type, n_in) each, back to back at src) as rows
 * row0.. of the repacked [n_in, n_out] matrix at main / side (cuda/weights.h layout). */
int zr_stage_repack(ZrStage *s, uint32_t type, const void *src, int n_in, int row0, int n_rows, int n_out,
                    CUdeviceptr main, CUdeviceptr side, ZrError *err);
/* Sends what is gathered and waits until every byte queued is in place (both streams). */
int zr_stage_finish(ZrStage *s, ZrError *err);
/* The pinned host-to-device copy rate of this machine, 1e9 B/s: one chunk, timed with events
 * (the second of two copies). Call before queuing anything. */
int zr_stage_measure_h2d(ZrStage *s, double *gbps, ZrError *err);
/* Joins the threads and frees everything (waits for the copy stream first). */
void zr_stage_close(ZrStage *s);
