/* THE launcher: every kernel launch of the CUDA backend goes through zr_launch, the only caller
 * of cuLaunchKernel. While recording it also appends a record per launch (function, grid,
 * block, shared bytes and a PRIVATE copy of the parameter bytes), from which graph.c builds
 * the decode graph; with a profile attached it times every launch with cuEvents.
 *
 * Parameters are passed like cuLaunchKernel's kernelParams: an array of pointers, one per
 * kernel parameter, each pointing at the value; the byte sizes come from the ZrKernel.
 *     int n = 4096; CUdeviceptr x = ..., y = ...;
 *     ZR_LAUNCH(l, &k_rmsnorm, ZR_DIM1(1), ZR_DIM1(256), 0, err, &y, &x, &n);
 * For the graph to replay the same step, values that change per token (token id, position,
 * sequence length) must NOT be kernel parameters: kernels read them from device memory.
 *
 * Programmatic dependent launch (zr_launcher_set_pdl): launches go through cuLaunchKernelEx
 * with PROGRAMMATIC_STREAM_SERIALIZATION, so each kernel may start while the one before it in
 * the stream drains (every kernel waits in griddepcontrol.wait before touching what earlier
 * work wrote: cu/common.cuh). The CUDA backend turns it on wherever it is supported
 * (zr_launch_pdl_supported); a launcher starts with it off (plain cuLaunchKernel), which is what
 * tests and tools get unless they ask.
 *
 * Thread block clusters (zr_launcher_set_clusters): the launches zr_launch_cluster_of names go out
 * as clusters of two blocks (cuLaunchKernelEx's CLUSTER_DIMENSION, and the graph node's attribute
 * of the same name). The kernels do not use the cluster: only where the hardware places the
 * blocks changes, and with it the time (cu/PERF.md session 36), not a bit of the results. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cuda/driver.h"
#include "cuda/module.h"
#include "cuda/profile.h"

typedef struct ZrDim3 { unsigned x, y, z; } ZrDim3;
#define ZR_DIM3(x, y, z) ((ZrDim3){(x), (y), (z)})
#define ZR_DIM1(x) ((ZrDim3){(x), 1, 1})

typedef struct ZrLaunchRecord {
    const ZrKernel *kernel; /* the handle must outlive the recording (it names the kernel) */
    CUfunction fn;
    ZrDim3 grid, block;
    unsigned shared_bytes;
    unsigned cluster;       /* blocks a thread block cluster (0 or 1: none; zr_launch_cluster_of) */
    size_t param_off;       /* the parameter block in the arena, laid out at kernel->offset[i] */
    size_t param_bytes;     /* its length */
} ZrLaunchRecord;

/* The records of one recording pass. The arena owns the parameter bytes; records refer to it
 * by offset, so growing the arena never invalidates them. */
typedef struct ZrRecording {
    ZrLaunchRecord *recs; /* [n] in launch order */
    size_t n, cap;
    unsigned char *arena; /* [arena_len] parameter bytes of all records */
    size_t arena_len, arena_cap;
} ZrRecording;

typedef struct ZrLauncher {
    const ZrCuDriver *drv;
    CUstream stream;
    bool recording;     /* zr_launch appends to rec */
    ZrRecording rec;
    ZrProfile *profile; /* non-NULL: cuEvents around every launch */
    bool sync_each;     /* debugging: wait after each launch so a fault names its kernel */
    uint64_t n_launches;/* launches issued since init */
    bool pdl;           /* cuLaunchKernelEx with programmatic stream serialization */
    bool clusters;      /* the launches zr_launch_cluster_of names as clusters (cuLaunchKernelEx) */
} ZrLauncher;

void zr_launcher_init(ZrLauncher *l, const ZrCuDriver *drv, CUstream stream);
void zr_launcher_free(ZrLauncher *l);
/* Programmatic dependent launch for the launches that follow, where `on` and the driver has
 * cuLaunchKernelEx; returns whether it is on. The backend passes zr_launch_pdl_supported(cuda). */
bool zr_launcher_set_pdl(ZrLauncher *l, bool on);
/* Compute capability >= 9.0 and cuLaunchKernelEx in the driver. */
bool zr_launch_pdl_supported(const ZrCuda *c);
/* Clusters for the launches that follow, where `on` and the driver has cuLaunchKernelEx and
 * cuGraphKernelNodeSetAttribute; returns whether they are on. The backend passes
 * zr_launch_clusters_supported(cuda). */
bool zr_launcher_set_clusters(ZrLauncher *l, bool on);
/* Compute capability >= 9.0 and both entry points in the driver. */
bool zr_launch_clusters_supported(const ZrCuda *c);
/* The cluster a launch of k on grid takes with clusters on: 2 for the decode products that stage
 * x whole in every block (matvec_<type>, _tall, the balanced gate|up, matvec_f32 / _f16, the
 * mixed-type Q/K/V) on an even one-dimensional grid, else 1. Measured (H200, cu/PERF.md sessions
 * 36 and 39): Llama-3.2-1B Q4_K_M +0.5-0.75% tg128, the other models -0.1 to +0.4%; the
 * mixed-type products (since their grid is 1-D) Llama-3.2-3B +1.0%, Llama-3-8B +0.7%,
 * Gemma-3-4B +0.2%; everything else in twos the same, in fours 10-32% slower. */
unsigned zr_launch_cluster_of(const ZrKernel *k, ZrDim3 grid);
/* The name half of that rule, taken once per kernel at lookup (ZrKernel.pairs: zr_cuda_kernel). */
bool zr_launch_kernel_pairs(const char *name);

/* Launches k on l->stream. params[0..n_params) point at the values; n_params must equal
 * k->n_params. Checks the launch; with sync_each also waits for it. */
int zr_launch(ZrLauncher *l, const ZrKernel *k, ZrDim3 grid, ZrDim3 block, unsigned shared_bytes,
              void *const *params, int n_params, ZrError *err);
#define ZR_LAUNCH(l, k, grid, block, shared_bytes, err, ...)                                     \
    zr_launch((l), (k), (grid), (block), (shared_bytes), (void *[]){__VA_ARGS__},                \
              (int)(sizeof((void *[]){__VA_ARGS__}) / sizeof(void *)), (err))

/* Clears the records and turns recording on / off. */
void zr_launcher_record_begin(ZrLauncher *l);
void zr_launcher_record_end(ZrLauncher *l);

void zr_recording_clear(ZrRecording *r);
void zr_recording_free(ZrRecording *r);
/* Moves the records out of `from` into `to` (to is freed first; from is left empty). */
void zr_recording_move(ZrRecording *to, ZrRecording *from);
/* The parameter block of record i, and a pointer to its parameter j. */
const unsigned char *zr_recording_params(const ZrRecording *r, size_t i);
const void *zr_recording_param(const ZrRecording *r, size_t i, int j);
/* --log-launches: one line per record: index, kernel, grid, block, shared bytes, then each
 * parameter's bytes in hex (memory order). */
void zr_recording_print(const ZrRecording *r, FILE *f);
/* 0 when both recordings launch the same kernels with the same configuration and parameter
 * bytes; else nonzero and `why` says where they first differ. */
int zr_recording_compare(const ZrRecording *a, const ZrRecording *b, char *why, size_t why_len);
