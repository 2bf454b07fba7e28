#include "matmul.h"

#include "quant.h"

typedef struct MatmulJob {
    const ZrCpuMatmul *mm;
    int n_mm;
    int64_t first_row[ZR_CPU_MATMUL_MAX + 1]; /* rows of the products laid end to end */
    const float *x;                            /* [n][ne0] */
    int n;
    const ZrCpuScratch *scratch;               /* or NULL */
} MatmulJob;

/* Rows [begin, end) of product k, a tile of rows at a time against every token. */
static void matmul_tiles(const MatmulJob *j, int k, int64_t begin, int64_t end, int thread) {
    const ZrWeight *w = j->mm[k].w;
    const int64_t ne0 = w->ne0, ne1 = w->ne1;
    /* A batch pays the dequantization once per row instead of once per (row, token). */
    float *tile = NULL; /* [ZR_CPU_MATMUL_TILE][ne0] */
    if (j->n > 1 && w->type != ZR_TYPE_F32 && j->scratch && j->scratch->per_thread >= ZR_CPU_MATMUL_TILE * ne0)
        tile = j->scratch->buf + (int64_t)thread * j->scratch->per_thread;
    for (int64_t r0 = begin; r0 < end; r0 += ZR_CPU_MATMUL_TILE) {
        const int nr = (int)(end - r0 < ZR_CPU_MATMUL_TILE ? end - r0 : ZR_CPU_MATMUL_TILE);
        if (tile) {
            for (int i = 0; i < nr; i++) zr_dequant_row(w->type, zr_weight_row(w, r0 + i), tile + i * ne0, ne0);
            for (int t = 0; t < j->n; t++) {
                const float *x = j->x + t * ne0;
                float *y = j->mm[k].y + t * ne1 + r0;
                for (int i = 0; i < nr; i++) y[i] = zr_dot_row(ZR_TYPE_F32, tile + i * ne0, x, ne0);
            }
            continue;
        }
        for (int t = 0; t < j->n; t++) {
            const float *x = j->x + t * ne0;
            float *y = j->mm[k].y + t * ne1 + r0;
            for (int i = 0; i < nr; i++) y[i] = zr_dot_row(w->type, zr_weight_row(w, r0 + i), x, ne0);
        }
    }
}

static void matmul_rows(void *ctx, int64_t begin, int64_t end, int thread) {
    const MatmulJob *j = ctx;
    for (int k = 0; k < j->n_mm; k++) {
        const int64_t lo = begin > j->first_row[k] ? begin : j->first_row[k];
        const int64_t hi = end < j->first_row[k + 1] ? end : j->first_row[k + 1];
        if (lo < hi) matmul_tiles(j, k, lo - j->first_row[k], hi - j->first_row[k], thread);
    }
}

void zr_cpu_matmul(ZrCpuPool *pool, const ZrCpuMatmul *mm, int n_mm, const float *x, int n,
                   const ZrCpuScratch *scratch) {
    MatmulJob j = {.mm = mm, .n_mm = n_mm, .x = x, .n = n, .scratch = scratch};
    for (int k = 0; k < n_mm; k++) j.first_row[k + 1] = j.first_row[k] + mm[k].w->ne1;
    /* rows per thread so that each thread has some 64K multiply-adds at least */
    const int64_t macs_per_row = mm[0].w->ne0 * (int64_t)n;
    zr_cpu_pool_run(pool, j.first_row[n_mm], (65536 + macs_per_row - 1) / macs_per_row, matmul_rows, &j);
}
