#include "cuda/readahead.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static void advise(const uint8_t *p, size_t n) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = (uintptr_t)p & ~(page - 1), b = (uintptr_t)p + n;
    (void)madvise((void *)a, b - a, MADV_WILLNEED); /* advice only: a failure changes nothing */
}

static void *ra_main(void *arg) {
    ZrReadahead *ra = arg;
    uint64_t at = 0; /* bytes of the ranges advised so far */
    for (int i = 0; i < ra->n && !atomic_load(&ra->stop); i++) {
        const uint8_t *p = ra->ranges[i].p;
        for (size_t off = 0; off < ra->ranges[i].bytes && !atomic_load(&ra->stop);) {
            if (at > atomic_load(&ra->consumed) + ZR_READAHEAD_AHEAD) {
                nanosleep(&(struct timespec){0, 1000000}, NULL); /* far enough ahead: wait 1 ms */
                continue;
            }
            const size_t n = ra->ranges[i].bytes - off < ZR_READAHEAD_WINDOW ? ra->ranges[i].bytes - off
                                                                              : ZR_READAHEAD_WINDOW;
            advise(p + off, n);
            off += n;
            at += n;
        }
    }
    return NULL;
}

void zr_readahead_start(ZrReadahead *ra, const ZrRange *ranges, int n) {
    memset(ra, 0, sizeof *ra);
    atomic_init(&ra->consumed, 0);
    atomic_init(&ra->stop, false);
    if (n <= 0 || !(ra->ranges = malloc(sizeof *ra->ranges * (size_t)n))) return;
    memcpy(ra->ranges, ranges, sizeof *ra->ranges * (size_t)n);
    ra->n = n;
    ra->running = pthread_create(&ra->th, NULL, ra_main, ra) == 0;
}

void zr_readahead_consumed(ZrReadahead *ra, uint64_t bytes) { atomic_store(&ra->consumed, bytes); }

void zr_readahead_stop(ZrReadahead *ra) {
    atomic_store(&ra->stop, true);
    if (ra->running) pthread_join(ra->th, NULL);
    free(ra->ranges);
    memset(ra, 0, sizeof *ra);
}
