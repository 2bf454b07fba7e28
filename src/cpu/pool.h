/* A small pthread pool for the CPU backend: the calling thread and n-1 workers split a range
 * of items (matrix rows, attention heads) into contiguous chunks, one per thread. */
#pragma once
#include <stdint.h>

#include "err.h"

/* Runs items [begin, end) on thread `thread` (0 = the caller, 1..n-1 the workers). */
typedef void (*ZrCpuTask)(void *ctx, int64_t begin, int64_t end, int thread);

typedef struct ZrCpuPool ZrCpuPool;

/* n_threads >= 1 (1: no workers, everything runs on the caller). */
ZrCpuPool *zr_cpu_pool_create(int n_threads, ZrError *err);
int zr_cpu_pool_threads(const ZrCpuPool *p);
/* Calls fn over [0, n_items) split across the threads; returns when every chunk is done. Each
 * thread gets at least `grain` items: waking a thread costs microseconds, so small jobs run on
 * fewer threads (or on the caller alone). */
void zr_cpu_pool_run(ZrCpuPool *p, int64_t n_items, int64_t grain, ZrCpuTask fn, void *ctx);
void zr_cpu_pool_free(ZrCpuPool *p);
