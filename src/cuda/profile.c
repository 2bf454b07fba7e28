#include "cuda/profile.h"

#include <stdlib.h>
#include <string.h>

void zr_profile_init(ZrProfile *p, const ZrCuDriver *drv) {
    memset(p, 0, sizeof *p);
    p->drv = drv;
}

void zr_profile_free(ZrProfile *p) {
    for (size_t i = 0; i < p->n_events; i++) {
        if (p->pend[i].start) p->drv->cuEventDestroy(p->pend[i].start);
        if (p->pend[i].end) p->drv->cuEventDestroy(p->pend[i].end);
    }
    free(p->pend);
    free(p->rows);
    memset(p, 0, sizeof *p);
}

int zr_profile_begin(ZrProfile *p, const ZrKernel *k, CUstream stream, ZrError *err) {
    const ZrCuDriver *d = p->drv;
    if (p->n_pend == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 256;
        ZrProfilePending *n = realloc(p->pend, cap * sizeof *n);
        if (!n) return zr_err(err, ZR_E_NOMEM, "profile: no memory for %zu event pairs", cap);
        memset(n + p->cap, 0, (cap - p->cap) * sizeof *n);
        p->pend = n;
        p->cap = cap;
    }
    ZrProfilePending *e = &p->pend[p->n_pend];
    if (p->n_pend == p->n_events) { /* a slot without events yet */
        ZR_CU_TRY(d, err, d->cuEventCreate(&e->start, CU_EVENT_DEFAULT), "profile: cuEventCreate");
        CUresult r = d->cuEventCreate(&e->end, CU_EVENT_DEFAULT);
        if (r != CUDA_SUCCESS) {
            d->cuEventDestroy(e->start);
            e->start = NULL;
            return zr_driver_err(d, err, r, "profile: cuEventCreate");
        }
        p->n_events++;
    }
    e->kernel = k;
    ZR_CU_TRY(d, err, d->cuEventRecord(e->start, stream), "profile: cuEventRecord before %s", k->name);
    return ZR_OK;
}

int zr_profile_end(ZrProfile *p, CUstream stream, ZrError *err) {
    ZrProfilePending *e = &p->pend[p->n_pend];
    ZR_CU_TRY(p->drv, err, p->drv->cuEventRecord(e->end, stream), "profile: cuEventRecord after %s", e->kernel->name);
    p->n_pend++;
    return ZR_OK;
}

static ZrProfileRow *row_for(ZrProfile *p, const char *name) {
    for (size_t i = 0; i < p->n_rows; i++)
        if (!strcmp(p->rows[i].name, name)) return &p->rows[i];
    if (p->n_rows == p->rows_cap) {
        size_t cap = p->rows_cap ? p->rows_cap * 2 : 32;
        ZrProfileRow *n = realloc(p->rows, cap * sizeof *n);
        if (!n) return NULL;
        p->rows = n;
        p->rows_cap = cap;
    }
    ZrProfileRow *r = &p->rows[p->n_rows++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    return r;
}

int zr_profile_collect(ZrProfile *p, ZrError *err) {
    const ZrCuDriver *d = p->drv;
    if (!p->n_pend) return ZR_OK;
    ZR_CU_TRY(d, err, d->cuEventSynchronize(p->pend[p->n_pend - 1].end), "profile: cuEventSynchronize");
    for (size_t i = 0; i < p->n_pend; i++) {
        float ms = 0;
        ZR_CU_TRY(d, err, d->cuEventElapsedTime(&ms, p->pend[i].start, p->pend[i].end), "profile: cuEventElapsedTime");
        ZrProfileRow *r = row_for(p, p->pend[i].kernel->name);
        if (!r) return zr_err(err, ZR_E_NOMEM, "profile: no memory for another kernel row");
        r->calls++;
        r->total_ms += ms;
    }
    p->n_pend = 0;
    return ZR_OK;
}

static int by_total_desc(const void *a, const void *b) {
    double x = ((const ZrProfileRow *)a)->total_ms, y = ((const ZrProfileRow *)b)->total_ms;
    return x < y ? 1 : x > y ? -1 : strcmp(((const ZrProfileRow *)a)->name, ((const ZrProfileRow *)b)->name);
}

void zr_profile_sorted(const ZrProfile *p, ZrProfileRow *out) {
    if (!p->n_rows) return;
    memcpy(out, p->rows, p->n_rows * sizeof *out);
    qsort(out, p->n_rows, sizeof *out, by_total_desc);
}

void zr_profile_print(const ZrProfile *p, FILE *f) {
    ZrProfileRow *rows = p->n_rows ? malloc(p->n_rows * sizeof *rows) : NULL;
    if (p->n_rows && !rows) {
        fprintf(f, "profile: no memory to sort %zu rows\n", p->n_rows);
        return;
    }
    zr_profile_sorted(p, rows);
    double sum = 0;
    uint64_t calls = 0;
    for (size_t i = 0; i < p->n_rows; i++) {
        sum += rows[i].total_ms;
        calls += rows[i].calls;
    }
    fprintf(f, "%-32s %10s %12s %10s %7s\n", "kernel", "calls", "total ms", "mean us", "share");
    for (size_t i = 0; i < p->n_rows; i++)
        fprintf(f, "%-32s %10llu %12.3f %10.2f %6.1f%%\n", rows[i].name, (unsigned long long)rows[i].calls,
                rows[i].total_ms, rows[i].calls ? rows[i].total_ms * 1000.0 / rows[i].calls : 0.0,
                sum > 0 ? 100.0 * rows[i].total_ms / sum : 0.0);
    fprintf(f, "%-32s %10llu %12.3f\n", "sum", (unsigned long long)calls, sum);
    free(rows);
}
