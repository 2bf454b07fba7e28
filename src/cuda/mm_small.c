#include "cuda/mm_small.h"

#include "cuda/klaunch.h"
#include "cuda/mv_shape.h"
#include "quant.h"

/* cu/matvec.cuh zr_xpad over a whole chunk (a multiple of 32) */
static size_t xpad(int values) { return (size_t)values + 4 * (size_t)(values / 32); }

ZrMmShape zr_cuf_mm_shape(int sm_count, int n_in, int n_out, int item, int n) {
    if (n < 1) n = 1;
    if (sm_count < 1) sm_count = 1;
    /* the largest chunk the budget holds for n rows, at least one unit, at most the row */
    const long per_row = (long)(ZR_CUF_MM_SMEM_BUDGET / (4 * n)) * 32 / 36;
    const long row_units = ((long)n_in + ZR_CUF_MM_UNIT - 1) / ZR_CUF_MM_UNIT;
    long units = per_row / ZR_CUF_MM_UNIT;
    if (units > row_units) units = row_units;
    if (units < 1) units = 1;
    /* split-K while the grid has fewer blocks than multiprocessors (a 1024-row K or V projection
     * makes 64 blocks of 16 rows) and every lane keeps an item of each chunk. Not below 2 blocks
     * per multiprocessor as the decode: 8B's 4096-row Q, attention output and FFN down (256
     * blocks on an H100's 132) ran 8 x 1 ~10-25% faster than 4 x 2 (zrun-mm-bench, Q6_K n 5:
     * wo 23.4 us against 30.4), the split's partial sums and barrier costing more than the
     * unbalanced last wave */
    const long groups = ((long)n_out + 1) / 2;
    const long items = item > 0 ? n_in / item : 0, chunk_items = item > 0 ? units * ZR_CUF_MM_UNIT / item : 0;
    int split = 1;
    while (split < ZR_CUF_MM_WARPS && (groups * split + ZR_CUF_MM_WARPS - 1) / ZR_CUF_MM_WARPS < sm_count &&
           items >= 64L * split && chunk_items >= 64L * split)
        split *= 2;
    return (ZrMmShape){.groups = ZR_CUF_MM_WARPS / split, .split = split, .chunk = (int)(units * ZR_CUF_MM_UNIT)};
}

size_t zr_cuf_mm_smem(ZrMmShape s, int n) { return (size_t)n * xpad(s.chunk) * sizeof(float); }

size_t zr_cuf_mm_smem_max(void) {
    size_t m = 0;
    for (int n = 1; n <= ZR_CUF_MM_COLS; n++) {
        /* the chunk does not depend on the type or the rows beyond its cap at the row length */
        const size_t b = zr_cuf_mm_smem(zr_cuf_mm_shape(1, 1 << 30, 1, 32, n), n);
        if (b > m) m = b;
    }
    return m;
}

size_t zr_cuf_mm_smem_limit(int max_smem_optin) {
    const size_t m = zr_cuf_mm_smem_max();
    return max_smem_optin >= 0 && m <= (size_t)max_smem_optin ? m : 47 * 1024;
}

bool zr_cuf_mm_fits(int sm_count, size_t smem_limit, uint32_t type, int n_in, int n_out, int n) {
    if (n < 1 || n > ZR_CUF_MM_COLS || type >= ZR_TYPE_COUNT || type == ZR_TYPE_F32 || type == ZR_TYPE_F16 ||
        !zr_type_kernel_suffix(type))
        return false;
    const ZrMmShape s = zr_cuf_mm_shape(sm_count, n_in, n_out, (int)zr_type_info(type)->item, n);
    return zr_cuf_mm_smem(s, n) <= smem_limit;
}

bool zr_cuf_mm_takes(const ZrCuKernels *k, const ZrCuWeight *w, int n) {
    return w->type < ZR_TYPE_COUNT && k->has_mm[w->type] &&
           zr_cuf_mm_fits(k->sm_count, k->mm_smem, w->type, w->n_in, w->n_out, n);
}

int zr_cuf_mm_small(ZrLauncher *l, const ZrCuKernels *k, const ZrCuWeight *w, CUdeviceptr x, int ldx, CUdeviceptr y,
                    int ldy, float beta, int n, ZrError *err) {
    if (w->type >= ZR_TYPE_COUNT || !k->has_mm[w->type])
        return zr_err(err, ZR_E_UNSUPPORTED, "no small-batch product for type %s", zr_type_name(w->type));
    /* one row is the decode's matrix-vector product, whose shapes were measured (mv_shape.c) */
    if (n == 1 && (beta == 0.0f || beta == 1.0f) && k->has_mv[w->type])
        return zr_cuf_matvec(l, k, w, x, y, beta == 1.0f ? y : 0, 0, 0.0f, ZR_CUF_MV_PLAIN, err);
    const ZrMmShape s = zr_cuf_mm_shape(k->sm_count, w->n_in, w->n_out, (int)zr_type_info(w->type)->item, n);
    return zr_k_matmul_small(l, &k->mm[w->type], w, x, ldx, y, ldy, beta, n, s, zr_cuf_mm_smem(s, n), err);
}
