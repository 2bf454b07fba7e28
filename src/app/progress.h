/* The load progress line: "zrun: loading 3.20 / 16.00 GB (20%), 5.1 GB/s", redrawn in place on
 * standard error while a backend uploads the weights (ZrBackendOptions.progress), and cleared
 * at the end, as llama.cpp and ollama show it. Only on a terminal: a pipe or a file gets
 * nothing, so logs and scripts see no carriage returns. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define ZR_PROGRESS_EVERY_MS 100.0 /* the line is redrawn at most this often */
#define ZR_PROGRESS_AFTER_MS 250.0 /* and not at all for a load that ends before this */

typedef struct ZrProgress {
    FILE *out;        /* stderr */
    const char *label;
    bool on;          /* a terminal, and not --quiet */
    bool drawn;       /* a line is on the screen */
    double t0_ms, last_ms;
} ZrProgress;

/* on: whether to draw at all (the command passes "stderr is a terminal and not --quiet"). */
void zr_progress_init(ZrProgress *p, const char *label, bool on);
/* A ZrBackendOptions.progress callback; ctx is the ZrProgress. */
void zr_progress_cb(void *ctx, uint64_t done, uint64_t total);
/* Clears the line, if one was drawn. */
void zr_progress_end(ZrProgress *p);
/* The text of the line for done of total bytes after secs seconds. */
void zr_progress_format(char *buf, size_t cap, const char *label, uint64_t done, uint64_t total, double secs);
