/* The load progress line (progress.h). */
#include "progress.h"
#include "zr_clock.h"

#include <time.h>

void zr_progress_init(ZrProgress *p, const char *label, bool on) {
    *p = (ZrProgress){.out = stderr, .label = label, .on = on, .t0_ms = zr_clock_ms()};
}

void zr_progress_format(char *buf, size_t cap, const char *label, uint64_t done, uint64_t total, double secs) {
    const double gb = 1e9;
    const double pct = total ? 100.0 * (double)done / (double)total : 100.0;
    if (secs > 0)
        snprintf(buf, cap, "%s %.2f / %.2f GB (%.0f%%), %.1f GB/s", label, (double)done / gb, (double)total / gb, pct,
                 (double)done / gb / secs);
    else
        snprintf(buf, cap, "%s %.2f / %.2f GB (%.0f%%)", label, (double)done / gb, (double)total / gb, pct);
}

void zr_progress_cb(void *ctx, uint64_t done, uint64_t total) {
    ZrProgress *p = ctx;
    if (!p || !p->on) return;
    const double t = zr_clock_ms();
    if (t - p->t0_ms < ZR_PROGRESS_AFTER_MS && done < total) return;
    if (p->drawn && t - p->last_ms < ZR_PROGRESS_EVERY_MS && done < total) return;
    if (!p->drawn && done >= total && t - p->t0_ms < ZR_PROGRESS_AFTER_MS) return; /* too quick to show */
    char line[160];
    zr_progress_format(line, sizeof line, p->label, done, total, (t - p->t0_ms) / 1e3);
    fprintf(p->out, "\r%s\033[K", line);
    fflush(p->out);
    p->drawn = true;
    p->last_ms = t;
}

void zr_progress_end(ZrProgress *p) {
    if (!p->drawn) return;
    fputs("\r\033[K", p->out);
    fflush(p->out);
    p->drawn = false;
}
