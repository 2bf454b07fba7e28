/* The monotonic clock every timing in zrun reads (load, prompt, decode, progress, start-up
 * stages, graph build): milliseconds since an arbitrary start, CLOCK_MONOTONIC. */
#pragma once
#include <time.h>

static inline double zr_clock_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}
