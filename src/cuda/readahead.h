/* Reading the model file ahead of the upload (issue 19, a cold page cache): a thread asks the
 * kernel to read (madvise MADV_WILLNEED) the ranges of the map the upload will copy, in the
 * order it will copy them, at most ZR_READAHEAD_AHEAD bytes ahead of it, so the disk streams
 * large sequential reads while the upload copies what is already in memory. With a warm page
 * cache it costs a page-table walk per window and nothing else. MADV_SEQUENTIAL is left out:
 * it lets the kernel drop the pages soon after they are read, and the next run wants them warm. */
#pragma once
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ZR_READAHEAD_WINDOW (64u << 20)   /* bytes per madvise */
#define ZR_READAHEAD_AHEAD (1024u << 20)  /* how far ahead of the upload it may read */

typedef struct ZrRange {
    const void *p;
    size_t bytes;
} ZrRange;

typedef struct ZrReadahead {
    ZrRange *ranges;           /* [n] in upload order */
    int n;
    _Atomic uint64_t consumed; /* bytes of the ranges the upload has copied */
    atomic_bool stop;
    pthread_t th;
    bool running;
} ZrReadahead;

/* Copies the ranges and starts the thread; without memory or a thread it does nothing (the
 * upload only reads slower from a cold disk). */
void zr_readahead_start(ZrReadahead *ra, const ZrRange *ranges, int n);
/* The upload has copied `bytes` of the ranges, in order. */
void zr_readahead_consumed(ZrReadahead *ra, uint64_t bytes);
/* Stops and joins the thread. */
void zr_readahead_stop(ZrReadahead *ra);
