/* Per-kernel GPU time for --profile: a pair of cuEvents around each eager launch, read back in
 * zr_profile_collect and summed per kernel name. Graph replay is never profiled (it hides the
 * launches), which is why profiling forces eager decode. */
#pragma once
#include <stdint.h>
#include <stdio.h>

#include "cuda/driver.h"
#include "cuda/module.h"

typedef struct ZrProfileRow {
    char name[64];
    uint64_t calls;
    double total_ms;
} ZrProfileRow;

typedef struct ZrProfilePending {
    CUevent start, end;
    const ZrKernel *kernel;
} ZrProfilePending;

typedef struct ZrProfile {
    const ZrCuDriver *drv;
    ZrProfilePending *pend; /* [cap]: events of launches not collected yet; events are reused */
    size_t n_pend, n_events, cap;
    ZrProfileRow *rows;     /* [n_rows] one per kernel name, in first-seen order */
    size_t n_rows, rows_cap;
} ZrProfile;

void zr_profile_init(ZrProfile *p, const ZrCuDriver *drv);
void zr_profile_free(ZrProfile *p);
/* Around one launch on `stream` (called by the launcher). */
int zr_profile_begin(ZrProfile *p, const ZrKernel *k, CUstream stream, ZrError *err);
int zr_profile_end(ZrProfile *p, CUstream stream, ZrError *err);
/* Waits for the pending launches and adds their times to the rows. */
int zr_profile_collect(ZrProfile *p, ZrError *err);
/* Rows sorted by total time (descending) into out[0..n_rows). */
void zr_profile_sorted(const ZrProfile *p, ZrProfileRow *out);
/* The table: kernel, calls, total ms, mean µs, share; then the sum. */
void zr_profile_print(const ZrProfile *p, FILE *f);
