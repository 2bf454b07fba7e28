#include "cuda/moe.h"

#include <stdlib.h>
#include <string.h>

#include "cuda/buffers.h" /* ZR_CUF_LT_WS_BYTES */
#include "cuda/upload.h"

#define RUN_MAX 32 /* experts per run of the prefill (one batched GEMM per matrix) */

static int max_int(int a, int b) { return a > b ? a : b; }

static bool dense_type(uint32_t t) { return t == ZR_TYPE_F32 || t == ZR_TYPE_F16; }

/* The F16 values of the prefill's expert buffer (p_wq) for model m: up to RUN_MAX experts of the
 * widest expert matrix (2 n_ff x n_embd), at most 128 Mi values (256 MiB) unless one is larger. */
static size_t wq_elems_of(const ZrModel *m) {
    size_t n_expert = 0, n_ff = 0;
    for (int il = 0; il < m->hp.n_layer; il++) {
        const ZrLayerFacts *F = &m->layers[il].facts;
        if ((size_t)F->n_expert > n_expert) n_expert = (size_t)F->n_expert;
        if ((size_t)F->n_ff_expert > n_ff) n_ff = (size_t)F->n_ff_expert;
    }
    const size_t per = 2 * n_ff * (size_t)m->hp.n_embd, cap = (size_t)128 << 20;
    const size_t run = (n_expert < RUN_MAX ? n_expert : RUN_MAX) * per;
    return run < cap ? run : per > cap ? per : cap;
}

/* The most experts of a run on a layer whose gate|up (split: gate, up; else up_t == ZR_TYPE_COUNT),
 * down are of these types: RUN_MAX, or fewer when their F16 copies would not fit wq values. */
static int run_fit(size_t wq, uint32_t gu_t, uint32_t up_t, uint32_t down_t, int ff, int d) {
    const bool split = up_t != ZR_TYPE_COUNT;
    size_t per = 0; /* the most F16 values an expert's matrix of this layer needs */
    if (!dense_type(gu_t)) per = (size_t)(split ? ff : 2 * ff) * d;
    if (split && !dense_type(up_t) && (size_t)ff * d > per) per = (size_t)ff * d;
    if (!dense_type(down_t) && (size_t)ff * d > per) per = (size_t)ff * d;
    const size_t fit = per ? wq / per : RUN_MAX;
    return fit < RUN_MAX ? (int)fit : RUN_MAX;
}

int zr_cuf_moe_batch_max(const ZrModel *m, const ZrLayer *L) {
    const ZrLayerFacts *F = &L->facts;
    if (!F->n_expert || zr_cuf_moe_grouped(m, L)) return 0;
    const bool split = L->gate_exps.type != L->up_exps.type;
    int fit = run_fit(wq_elems_of(m), L->gate_exps.type, split ? L->up_exps.type : ZR_TYPE_COUNT, L->down_exps.type,
                      F->n_ff_expert, m->hp.n_embd);
    if (fit > F->n_expert) fit = F->n_expert;
    int b = 1;
    while (2 * b <= fit) b *= 2;
    return b;
}

int zr_cuf_moe_upload_layer(ZrCuForward *f, ZrCuUpload *u, int il, ZrError *err) {
    const ZrModel *m = f->m;
    const ZrLayer *L = &m->layers[il];
    const ZrLayerFacts *F = &L->facts;
    if (!f->moe) {
        f->moe = calloc(1, sizeof *f->moe + sizeof(ZrCuMoeLayer) * (size_t)m->hp.n_layer);
        if (!f->moe) return zr_err(err, ZR_E_NOMEM, "cuda forward: out of host memory");
    }
    ZrCuMoeLayer *E = &f->moe->layers[il];
    const bool split = L->gate_exps.type != L->up_exps.type;
    if (split && F->n_ff_expert % 4) /* slots of gate | up rows stay 16-byte aligned for the down's SwiGLU input */
        return zr_err(err, ZR_E_UNSUPPORTED, "%s and %s: gate and up of different types (%s, %s) with experts %d wide (not a multiple of 4) are not supported on the GPU",
                      L->gate_exps.name, L->up_exps.name, zr_type_name(L->gate_exps.type), zr_type_name(L->up_exps.type), F->n_ff_expert);
    if (F->n_ff_expert > m->hp.n_ff) /* the prefill dequantizes experts into the F16 weight buffer, sized by n_ff */
        return zr_err(err, ZR_E_UNSUPPORTED, "%s: experts %d wide, wider than feed_forward_length %d (not supported on the GPU)",
                      L->down_exps.name, F->n_ff_expert, m->hp.n_ff);
    E->n_expert = F->n_expert;
    E->n_used = F->n_expert_used;
    E->n_ff = F->n_ff_expert;
    int n_out, off[2], rc;
    const ZrWeight *one[1] = {&L->ffn_gate_inp};
    if ((rc = zr_cuf_upload_group(u, one, 1, &E->router, &n_out, off, err))) return rc;
    one[0] = &L->down_exps;
    if ((rc = zr_cuf_upload_group(u, one, 1, &E->down, &n_out, off, err))) return rc;
    if (split) { /* each tensor as one stacked matrix (expert e's rows [e n_ff, (e + 1) n_ff)) */
        one[0] = &L->gate_exps;
        if ((rc = zr_cuf_upload_group(u, one, 1, &E->gu, &n_out, off, err))) return rc;
        one[0] = &L->up_exps;
        return zr_cuf_upload_group(u, one, 1, &E->up, &n_out, off, err);
    }
    /* gate_e, up_e for every expert: one stacked matrix, one run (one type) */
    const int n = 2 * F->n_expert;
    ZrWeight *views = malloc(sizeof *views * (size_t)n);
    const ZrWeight **ws = malloc(sizeof *ws * (size_t)n);
    if (!views || !ws) {
        free(views);
        free(ws);
        return zr_err(err, ZR_E_NOMEM, "cuda forward: out of host memory");
    }
    for (int e = 0; e < F->n_expert; e++) {
        views[2 * e] = zr_weight_expert(&L->gate_exps, F->n_expert, e);
        views[2 * e + 1] = zr_weight_expert(&L->up_exps, F->n_expert, e);
        ws[2 * e] = &views[2 * e];
        ws[2 * e + 1] = &views[2 * e + 1];
    }
    rc = zr_cuf_upload_group(u, ws, n, &E->gu, &n_out, off, err);
    free(views);
    free(ws);
    if (!rc && n_out != 1) rc = zr_err(err, ZR_E_INTERNAL, "%s: the experts' gate|up stacked into %d matrices", L->gate_exps.name, n_out);
    return rc;
}

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

static size_t matrix_bytes(uint32_t type, int64_t n_in, int64_t n_out) {
    return align256(zr_cuw_main_row_bytes(type, n_in) * (size_t)n_out) + align256(zr_cuw_side_bytes(type, n_in, n_out));
}

size_t zr_cuf_moe_layer_bytes(const ZrModel *m, const ZrLayer *L) {
    (void)m;
    if (!L->facts.n_expert) return 0;
    return matrix_bytes(L->ffn_gate_inp.type, L->ffn_gate_inp.ne0, L->ffn_gate_inp.ne1) +
           matrix_bytes(L->gate_exps.type, L->gate_exps.ne0, L->gate_exps.ne1) + matrix_bytes(L->up_exps.type, L->up_exps.ne0, L->up_exps.ne1) +
           matrix_bytes(L->down_exps.type, L->down_exps.ne0, L->down_exps.ne1) + 3 * 256;
}

int zr_cuf_moe_buffers(ZrCuForward *f, ZrError *err) {
    if (!f->moe) return ZR_OK;
    int n_expert = 0, n_used = 0, n_ff = 0, rc;
    for (int il = 0; il < f->m->hp.n_layer; il++) {
        const ZrCuMoeLayer *E = &f->moe->layers[il];
        n_expert = max_int(n_expert, E->n_expert);
        n_used = max_int(n_used, E->n_used);
        n_ff = max_int(n_ff, E->n_ff);
    }
    /* the host arrays of the prefill's grouping, in the same allocation as f->moe */
    const size_t UB = ZR_CUF_UBATCH, head = sizeof *f->moe + sizeof(ZrCuMoeLayer) * (size_t)f->m->hp.n_layer;
    const size_t slots = UB * (size_t)n_used, padded = UB * (size_t)n_expert;
    const size_t host = sizeof(int32_t) * (slots + 2 * padded + (size_t)n_expert + 1);
    ZrCuMoe *M = realloc(f->moe, head + host);
    if (!M) return zr_err(err, ZR_E_NOMEM, "cuda forward: out of host memory");
    f->moe = M;
    M->h_ids = (int32_t *)((char *)M + head);
    M->h_idx = M->h_ids + slots;
    M->h_slot = M->h_idx + padded;
    M->h_start = M->h_slot + padded;
    M->tiles_max = (int)(slots / 32) + n_expert;
    M->ff_stride = (n_ff + 3) & ~3;
    const size_t e = (size_t)f->n_embd, fl = sizeof(float);
    if ((rc = zr_cuf_dalloc(f, &M->p_logits, fl * UB * (size_t)n_expert, "router logits (prefill)", err))) return rc;
    if ((rc = zr_cuf_dalloc(f, &M->p_ids, sizeof(int32_t) * slots, "expert ids (prefill)", err))) return rc;
    if ((rc = zr_cuf_dalloc(f, &M->p_weights, fl * slots, "expert weights (prefill)", err))) return rc;
    if ((rc = zr_cuf_dalloc(f, &M->p_idx, sizeof(int32_t) * padded, "expert rows (prefill)", err))) return rc;
    if ((rc = zr_cuf_dalloc(f, &M->p_slot, sizeof(int32_t) * padded, "expert slots (prefill)", err))) return rc;
    if ((rc = zr_cuf_dalloc(f, &M->p_tiles, sizeof(int32_t) * 4 * (size_t)M->tiles_max, "expert tiles (prefill)", err))) return rc;
    const size_t ffs = (size_t)n_ff, wide = e > ffs ? e : ffs;
    M->wq_elems = wq_elems_of(f->m);
    if ((rc = zr_cuf_dalloc(f, &M->p_wq, 2 * M->wq_elems, "expert f16 weights (prefill)", err))) return rc;
    if ((rc = zr_cuf_dalloc(f, &M->p_x, fl * slots * e, "expert inputs (prefill)", err))) return rc;
    if ((rc = zr_cuf_dalloc(f, &M->p_xh, 2 * slots * wide, "expert f16 inputs (prefill)", err))) return rc;
    if ((rc = zr_cuf_dalloc(f, &M->p_gu, fl * slots * 2 * ffs, "expert gate|up (prefill)", err))) return rc;
    if ((rc = zr_cuf_dalloc(f, &M->p_ff, fl * slots * ffs, "expert activations (prefill)", err))) return rc;
    if ((rc = zr_cuf_dalloc(f, &M->p_y, fl * slots * e, "expert outputs (prefill)", err))) return rc;
    if ((rc = zr_cuf_dalloc(f, &M->p_out, fl * slots * e, "expert outputs by slot (prefill)", err))) return rc;
    if ((rc = zr_cuf_dalloc(f, &M->logits, sizeof(float) * (size_t)n_expert, "router logits", err))) return rc;
    if ((rc = zr_cuf_dalloc(f, &M->ids, sizeof(int32_t) * (size_t)n_used, "expert ids", err))) return rc;
    if ((rc = zr_cuf_dalloc(f, &M->weights, sizeof(float) * (size_t)n_used, "expert weights", err))) return rc;
    if ((rc = zr_cuf_dalloc(f, &M->ff, sizeof(float) * (size_t)n_used * M->ff_stride, "expert activations", err))) return rc;
    if ((rc = zr_cuf_dalloc(f, &M->gate_up, sizeof(float) * (size_t)n_used * 2 * n_ff, "expert gate|up", err))) return rc;
    if ((rc = zr_cuf_dalloc(f, &M->out, sizeof(float) * (size_t)n_used * f->n_embd, "expert outputs", err))) return rc;
    /* at most one row-group block per output row */
    if ((rc = zr_cuf_dalloc(f, &M->done, sizeof(uint32_t) * (size_t)f->n_embd, "expert mix counts", err))) return rc;
    if ((rc = zr_cuda_memset8(f->cuda, M->done, 0, sizeof(uint32_t) * (size_t)f->n_embd, err))) return rc;
    /* a graph recorded before any token must not route on garbage */
    if ((rc = zr_cuda_memset8(f->cuda, M->ids, 0, sizeof(int32_t) * (size_t)n_used, err))) return rc;
    return zr_cuda_memset8(f->cuda, M->weights, 0, sizeof(float) * (size_t)n_used, err);
}

/* The router's launch shape: one row group a block, each row split over as many warps as have an
 * item a lane (at most 16). zr_cuf_mv_shape's pick for a dense matrix (8 row groups a block, rows
 * split in 2 at most) gives a 128-expert F32 router of 2048 inputs 8 blocks, each streaming 128
 * KiB in ~8 dependent rounds of loads on 8 of the SMs (7.5 us in the eager profile); this gives it
 * 64 blocks of one round each. */
static ZrMvShape router_shape(const ZrCuWeight *w) {
    const long items = w->n_in / (long)zr_type_info(w->type)->item;
    int split = 1;
    while (split < 16 && 64L * split <= items) split *= 2;
    return (ZrMvShape){.groups = 1, .split = split};
}

int zr_cuf_moe_ffn(ZrCuForward *f, int il, CUdeviceptr x, CUdeviceptr norm_w, ZrError *err) {
    const ZrCuMoe *M = f->moe;
    const ZrCuMoeLayer *E = &M->layers[il];
    const float eps = f->m->hp.rms_eps;
    int rc;
    /* the router on the normed row */
    if ((rc = zr_cuf_matvec_shaped(f->launcher, f->k, &E->router, x, M->logits, 0, norm_w, eps, ZR_CUF_MV_RMSNORM,
                                   router_shape(&E->router), err)))
        return rc;
    if (!f->k->has_mv_id[E->gu.type] || !f->k->has_mv_id[E->down.type] || (E->up.main && !f->k->has_mv_id[E->up.type]))
        return zr_err(err, ZR_E_UNSUPPORTED, "no expert matrix-vector kernel for type %s", zr_type_name(E->gu.type));
    /* the routing in the first gate|up launch (its blocks route for themselves), or apart for more than 32 chosen or 256 experts */
    const bool fused = E->n_used <= 32 && E->n_expert <= 256;
    const ZrMvIdFuse route = {.logits = M->logits, .n_expert = E->n_expert, .weights = M->weights};
    const ZrMvIdFuse mix = {.weights = M->weights, .mix_x = x, .done = M->done};
    if (!fused && (rc = zr_k_moe_route(f->launcher, f->k, M->logits, E->n_expert, E->n_used, M->ids, M->weights, 1, err))) return rc;
    if (E->up.main) { /* split gate and up: each into its half of gate_up, SwiGLU as down reads it */
        const ZrCuWeight *gu[2] = {&E->gu, &E->up};
        for (int h = 0; h < 2; h++) {
            const ZrCuWeight one = {.type = gu[h]->type, .n_in = gu[h]->n_in, .n_out = E->n_ff};
            if ((rc = zr_k_matvec_id(f->launcher, &f->k->mv_id[gu[h]->type], zr_cuf_mv_rows_per_warp(gu[h]->type), gu[h], E->n_ff, M->ids,
                                     E->n_used, x, 0, M->gate_up + (CUdeviceptr)h * E->n_ff * sizeof(float), 2 * E->n_ff, norm_w, eps,
                                     ZR_CUF_MV_RMSNORM, zr_cuf_mv_shape_expert(f->k, &one, ZR_CUF_MV_RMSNORM), fused && h == 0 ? &route : NULL,
                                     err)))
                return rc;
        }
        /* down of each chosen expert on its SwiGLU, mixed into the residual */
        const ZrCuWeight one_down = {.type = E->down.type, .n_in = E->down.n_in, .n_out = f->n_embd};
        return zr_k_matvec_id(f->launcher, &f->k->mv_id[E->down.type], zr_cuf_mv_rows_per_warp(E->down.type), &E->down, f->n_embd,
                              M->ids, E->n_used, M->gate_up, 2 * E->n_ff, M->out, f->n_embd, 0, 0.0f, ZR_CUF_MV_SWIGLU,
                              zr_cuf_mv_shape_expert_slots(f->k, &one_down, ZR_CUF_MV_SWIGLU, E->n_used), &mix, err);
    }
    /* silu(gate) * up of each chosen expert, on the normed row (the norm fused again: one row) */
    const ZrCuWeight one_gu = {.type = E->gu.type, .n_in = E->gu.n_in, .n_out = 2 * E->n_ff};
    const int glu = ZR_CUF_MV_RMSNORM | ZR_CUF_MV_GLU, R = zr_cuf_mv_rows_per_warp(E->gu.type);
    const ZrMvShape gu_shape = zr_cuf_mv_shape_expert(f->k, &one_gu, glu);
    if (M->ff_stride == E->n_ff && f->k->has_mv_idflat[E->gu.type] && E->n_used <= 32) {
        /* every slot's tiles in one grid of at most one wave (zr_cuf_mv_flat_blocks) */
        const unsigned tiles = zr_k_matvec_id_flat_tiles(R, 2 * E->n_ff, E->n_used, gu_shape);
        const unsigned blocks = zr_cuf_mv_flat_blocks(f->k, &f->k->mv_idflat[E->gu.type], tiles, gu_shape);
        rc = zr_k_matvec_id_flat(f->launcher, &f->k->mv_idflat[E->gu.type], R, &E->gu, 2 * E->n_ff, M->ids, E->n_used, x, M->ff, norm_w,
                                 eps, glu, gu_shape, blocks, fused ? &route : NULL, err);
    } else {
        rc = zr_k_matvec_id(f->launcher, &f->k->mv_id[E->gu.type], R, &E->gu, 2 * E->n_ff, M->ids, E->n_used, x, 0, M->ff, M->ff_stride,
                            norm_w, eps, glu, gu_shape, fused ? &route : NULL, err);
    }
    if (rc) return rc;
    /* down of each chosen expert on its own activations, mixed into the residual: a warp per row
     * over every slot where the slots' activations fit one block's staging (contiguous: ff_stride
     * is n_ff), else a block per row group and slot whose last block mixes */
    if (M->ff_stride == E->n_ff && f->k->has_mv_idmix[E->down.type] && zr_k_matvec_id_mix_fits(&E->down, E->n_used))
        return zr_k_matvec_id_mix(f->launcher, &f->k->mv_idmix[E->down.type], &E->down, f->n_embd, M->ids, E->n_used, M->ff,
                                  M->weights, x, err);
    const ZrCuWeight one_down = {.type = E->down.type, .n_in = E->down.n_in, .n_out = f->n_embd};
    return zr_k_matvec_id(f->launcher, &f->k->mv_id[E->down.type], zr_cuf_mv_rows_per_warp(E->down.type), &E->down, f->n_embd, M->ids,
                          E->n_used, M->ff, M->ff_stride, M->out, f->n_embd, 0, 0.0f, ZR_CUF_MV_PLAIN,
                          zr_cuf_mv_shape_expert_slots(f->k, &one_down, ZR_CUF_MV_PLAIN, E->n_used), &mix, err);
}

/* ---- prefill ---- */

#define ROWS_MAX 65535 /* rows per launch of the per-row kernels (grid.y): a run's padded rows are at most this many */

/* Y = X W^T through cuBLASLt for `batch` experts of a run at once (forward.c's gemm, strided
 * batched): expert i's n_rows rows at a + i n_rows rows (its F16 copy, or the weight itself when
 * F32/F16), its rows of x at i rows_in rows of x32 (F32 weights) or x16, its outputs at y + i
 * rows_in rows of ldy. rows_in: each expert's rows of the run's padded layout. */
static int run_gemm(ZrCuForward *f, const ZrCuWeight *w, CUdeviceptr a, int n_rows, int batch, int rows_in, CUdeviceptr x32,
                    CUdeviceptr x16, CUdeviceptr y, int ldy, ZrError *err) {
    const bool f32 = w->type == ZR_TYPE_F32, dense = f32 || w->type == ZR_TYPE_F16;
    const int64_t lda = dense ? (int64_t)(zr_cuw_main_row_bytes(w->type, w->n_in) / (f32 ? 4 : 2)) : w->n_in;
    ZrGemm g = {.trans_a = 1, .trans_b = 0, .m = (uint64_t)n_rows, .n = (uint64_t)rows_in, .k = (uint64_t)w->n_in, .a = a,
                .type_a = f32 ? CUDA_R_32F : CUDA_R_16F, .lda = lda, .type_b = f32 ? CUDA_R_32F : CUDA_R_16F, .b = f32 ? x32 : x16,
                .ldb = w->n_in, .d = y, .type_d = CUDA_R_32F, .ldd = ldy, .alpha = 1.0f, .beta = 0.0f, .workspace = f->lt_ws,
                .workspace_bytes = ZR_CUF_LT_WS_BYTES, .batch = batch, .stride_a = lda * n_rows,
                .stride_b = (int64_t)rows_in * w->n_in, .stride_d = (int64_t)rows_in * ldy};
    ZrCuMoe *M = f->moe;
    const size_t eb = f32 ? 4 : 2;
    const CUdeviceptr b0 = f32 ? x32 : x16;
    /* batches of powers of two (a run of 13: 8, 4, 1), so that few shapes occur (a prefill warm-up
     * can list them); one GEMM per expert once a batched GEMM failed */
    for (int i = 0; i < batch;) {
        int nb = 1;
        while (!M->no_batch && 2 * nb <= batch - i) nb *= 2;
        g.batch = nb;
        g.a = a + (CUdeviceptr)(i * g.stride_a) * eb;
        g.b = b0 + (CUdeviceptr)(i * g.stride_b) * eb;
        g.d = y + (CUdeviceptr)(i * g.stride_d) * sizeof(float);
        ZrError e1 = {0};
        int rc = zr_cublaslt_gemm(f->lt, f->cuda->stream, &g, nb > 1 ? &e1 : err);
        if (rc && nb > 1) {
            M->no_batch = true; /* the same results, one expert at a time */
            continue;
        }
        if (rc) return rc;
        i += nb;
    }
    return ZR_OK;
}

/* A run's expert matrices of w (rpe rows per expert, experts e0 .. e0 + len) times their rows of
 * the run's operand (c rows per expert) into y: dequantized to F16 in one launch first unless F32/F16. */
static int run_matrix(ZrCuForward *f, const ZrCuWeight *w, int rpe, int e0, int len, int c, CUdeviceptr x32, CUdeviceptr x16,
                      CUdeviceptr y, int ldy, ZrError *err) {
    const bool dense = w->type == ZR_TYPE_F32 || w->type == ZR_TYPE_F16;
    const ZrCuMoe *M = f->moe;
    if (dense)
        return run_gemm(f, w, w->main + (CUdeviceptr)e0 * rpe * zr_cuw_main_row_bytes(w->type, w->n_in), rpe, len, c, x32, x16, y, ldy,
                        err);
    int rc = zr_k_dequant_f16(f->launcher, f->k, w, M->p_wq, e0 * rpe, len * rpe, err);
    return rc ? rc : run_gemm(f, w, M->p_wq, rpe, len, c, x32, x16, y, ldy, err);
}

bool zr_cuf_moe_grouped(const ZrModel *m, const ZrLayer *L) {
    const ZrLayerFacts *F = &L->facts;
    return F->n_expert && F->n_expert <= 1024 && L->gate_exps.type != ZR_TYPE_F32 && L->up_exps.type != ZR_TYPE_F32 && L->down_exps.type != ZR_TYPE_F32 &&
           m->hp.n_embd % 64 == 0 && F->n_ff_expert % 64 == 0 && ZR_CUF_UBATCH * F->n_expert_used <= ROWS_MAX;
}

/* Whether layer il's prefill takes the grouped product: zr_cuf_moe_grouped, and every expert
 * matrix has its kernel. */
static bool grouped_fits(const ZrCuForward *f, int il) {
    const ZrCuMoeLayer *E = &f->moe->layers[il];
    const ZrCuWeight *w[3] = {&E->gu, &E->down, E->up.main ? &E->up : NULL};
    if (!zr_cuf_moe_grouped(f->m, &f->m->layers[il])) return false;
    for (int i = 0; i < 3; i++)
        if (w[i] && !f->k->has_moe_mm[w[i]->type]) return false;
    return true;
}

/* The experts of the nk slots of M->p_ids through the grouped product (moe.h), all on the device:
 * f->xh holds the chunk's normed rows in F16. */
static int prefill_grouped(ZrCuForward *f, const ZrCuMoeLayer *E, int nk, ZrError *err) {
    ZrCuMoe *M = f->moe;
    const int k = E->n_used, ne = E->n_expert, ff = E->n_ff, d = f->n_embd;
    int rc;
    /* Tiles of 64 rows: an expert's weight tile is dequantized once per 64 of its rows, and the
     * kernel skips the groups of 16 past a tile's rows (Qwen3-30B-A3B's ~32 rows an expert: one
     * tile, ~2-3 groups, where tiles of 32 took 1.5 tiles an expert on average); 32 only where a
     * GPU lacks the 64-row kernels (their shared memory, cuda/kreg.c). */
    const bool split = E->up.main != 0;
    int bn = 64;
    if (!f->k->has_moe_mm64[E->gu.type] || !f->k->has_moe_mm64[E->down.type] || (split && !f->k->has_moe_mm64[E->up.type])) bn = 32;
    /* the slots sorted by expert into tiles on the device; the launches take the bound on the
     * tiles (each expert's rows in whole tiles), and the blocks past the last tile exit */
    const int n_tiles = nk / bn + ne;
    if (n_tiles > M->tiles_max) return zr_err(err, ZR_E_INTERNAL, "cuda moe prefill: %d expert tiles, room for %d", n_tiles, M->tiles_max);
    if ((rc = zr_k_moe_group(f->launcher, f->k, M->p_ids, nk, k, ne, bn, M->p_idx, M->p_slot, M->p_tiles, n_tiles, err))) return rc;
    /* gate|up of every slot from its token's normed row (split: gate into the first half of each
     * row, up into the second) */
    if ((rc = zr_k_moe_mm(f->launcher, f->k, bn, &E->gu, split ? ff : 2 * ff, f->xh, d, M->p_idx, M->p_gu, 2 * ff, 0, M->p_tiles,
                          n_tiles, err)))
        return rc;
    if (split && (rc = zr_k_moe_mm(f->launcher, f->k, bn, &E->up, ff, f->xh, d, M->p_idx, M->p_gu + (CUdeviceptr)ff * sizeof(float),
                                   2 * ff, 0, M->p_tiles, n_tiles, err)))
        return rc;
    /* SwiGLU in F16, then down into each row's slot */
    if ((rc = zr_k_swiglu(f->launcher, f->k, true, M->p_gu, 2 * ff, M->p_xh, ff, nk, err))) return rc;
    return zr_k_moe_mm(f->launcher, f->k, bn, &E->down, d, M->p_xh, ff, 0, M->p_out, d, M->p_slot, M->p_tiles, n_tiles, err);
}

int zr_cuf_moe_prefill(ZrCuForward *f, int il, int n, CUdeviceptr norm_w, ZrError *err) {
    ZrCuMoe *M = f->moe;
    const ZrCuMoeLayer *E = &M->layers[il];
    const int k = E->n_used, ne = E->n_expert, ff = E->n_ff, d = f->n_embd, nk = n * k;
    int rc;
    /* the router on every normed row, then the routing */
    if ((rc = zr_k_rmsnorm(f->launcher, f->k, f->x, d, norm_w, f->xn, d, d, f->m->hp.rms_eps, 1, n, err))) return rc;
    const bool grouped = grouped_fits(f, il);
    if ((E->router.type != ZR_TYPE_F32 || grouped) && (rc = zr_k_convert(f->launcher, f->k, f->xn, f->xh, d, n, err))) return rc;
    if (E->router.type == ZR_TYPE_F32 || E->router.type == ZR_TYPE_F16) {
        if ((rc = run_gemm(f, &E->router, E->router.main, ne, 1, n, f->xn, f->xh, M->p_logits, ne, err))) return rc;
    } else {
        if ((size_t)ne * (size_t)d > f->wbuf_elems)
            return zr_err(err, ZR_E_UNSUPPORTED, "cuda moe prefill: a %s router of %d x %d does not fit the F16 weight buffer",
                          zr_type_name(E->router.type), ne, d);
        if ((rc = zr_k_dequant_f16(f->launcher, f->k, &E->router, f->wbuf, 0, ne, err))) return rc;
        if ((rc = run_gemm(f, &E->router, f->wbuf, ne, 1, n, f->xn, f->xh, M->p_logits, ne, err))) return rc;
    }
    if ((rc = zr_k_moe_route(f->launcher, f->k, M->p_logits, ne, k, M->p_ids, M->p_weights, n, err))) return rc;
    if (grouped) {
        if ((rc = prefill_grouped(f, E, nk, err))) return rc;
        return zr_k_moe_combine(f->launcher, f->k, M->p_out, M->p_weights, k, f->x, d, n, err);
    }
    /* the ids to the host once; each expert's count of slots */
    if ((rc = zr_cuda_d2h(f->cuda, M->h_ids, M->p_ids, sizeof(int32_t) * (size_t)nk, err))) return rc;
    if ((rc = zr_cuda_sync(f->cuda, err))) return rc;
    int32_t *cnt = M->h_start; /* [ne + 1]: counts, then each expert's next padded row */
    memset(cnt, 0, sizeof(int32_t) * (size_t)(ne + 1));
    for (int s = 0; s < nk; s++) {
        const int e = M->h_ids[s];
        if (e < 0 || e >= ne) return zr_err(err, ZR_E_INTERNAL, "cuda moe prefill: layer %d: expert id %d of %d", il, e, ne);
        cnt[e]++;
    }
    /* Runs of consecutive experts, one batched GEMM per matrix and run: a run starts at a chosen
     * expert and takes the next ones while their F16 copies fit p_wq and the run's padded rows
     * (its experts x its largest count, rounded up to 16 so that few GEMM shapes occur) fit the
     * slot buffers; in the padded layout each expert of a run has that many rows, the unused ones
     * a copy of row 0 that nothing reads back (slot -1). */
    const bool split = E->up.main != 0;
    const int rpe_gu = split ? ff : 2 * ff;
    /* at most RUN_MAX experts a run: enough GEMM blocks to fill the GPU (a 1536-row expert is 12
     * tiles of 128 rows: 384 blocks), and test_moe_cuda's 64- and 128-expert models take several runs */
    const int fit = run_fit(M->wq_elems, E->gu.type, split ? E->up.type : ZR_TYPE_COUNT, E->down.type, ff, d),
              cap = ZR_CUF_UBATCH * k < ROWS_MAX ? ZR_CUF_UBATCH * k : ROWS_MAX;
    if (fit < 1) return zr_err(err, ZR_E_INTERNAL, "cuda moe prefill: layer %d: an expert does not fit the F16 weight buffer", il);
    enum { MAX_RUNS = 1024 };
    int run_e0[MAX_RUNS], run_len[MAX_RUNS], run_c[MAX_RUNS], run_base[MAX_RUNS], n_runs = 0, rows = 0;
    for (int e0 = 0; e0 < ne;) {
        if (!cnt[e0]) {
            e0++;
            continue;
        }
        int len = 1, c = (cnt[e0] + 15) & ~15;
        for (int e = e0 + 1; e < ne && e - e0 < fit; e++) {
            const int c2 = cnt[e] > c ? (cnt[e] + 15) & ~15 : c;
            if ((e - e0 + 1) * c2 > cap) break;
            if (cnt[e]) len = e - e0 + 1, c = c2;
        }
        run_e0[n_runs] = e0, run_len[n_runs] = len, run_c[n_runs] = c, run_base[n_runs] = rows;
        for (int e = e0; e < e0 + len; e++) cnt[e] = rows + (e - e0) * c; /* now: its first padded row */
        for (int i = rows; i < rows + len * c; i++) M->h_idx[i] = 0, M->h_slot[i] = -1;
        rows += len * c;
        n_runs++;
        e0 += len;
    }
    for (int s = 0; s < nk; s++) { /* each slot at its expert's next padded row (rows in order within an expert) */
        const int at = cnt[M->h_ids[s]]++;
        M->h_idx[at] = s / k;
        M->h_slot[at] = s;
    }
    if ((rc = zr_cuda_h2d(f->cuda, M->p_idx, M->h_idx, sizeof(int32_t) * (size_t)rows, err))) return rc;
    if ((rc = zr_cuda_h2d(f->cuda, M->p_slot, M->h_slot, sizeof(int32_t) * (size_t)rows, err))) return rc;
    const bool gu_f16 = E->gu.type != ZR_TYPE_F32 || (split && E->up.type != ZR_TYPE_F32);
    const bool down_f16 = E->down.type != ZR_TYPE_F32;
    for (int r = 0; r < n_runs; r++) {
        const int e0 = run_e0[r], len = run_len[r], c = run_c[r], base = run_base[r], nr_run = len * c;
        const CUdeviceptr idx = M->p_idx + (CUdeviceptr)base * sizeof(int32_t), slot = M->p_slot + (CUdeviceptr)base * sizeof(int32_t);
        /* the run's rows of xn (and their F16 copy) */
        if ((rc = zr_k_moe_gather(f->launcher, f->k, f->xn, idx, M->p_x, d, nr_run, err))) return rc;
        if (gu_f16 && (rc = zr_k_convert(f->launcher, f->k, M->p_x, M->p_xh, d, nr_run, err))) return rc;
        /* gate|up (split: gate into the first half of each row, up into the second) */
        if ((rc = run_matrix(f, &E->gu, rpe_gu, e0, len, c, M->p_x, M->p_xh, M->p_gu, 2 * ff, err))) return rc;
        if (split && (rc = run_matrix(f, &E->up, ff, e0, len, c, M->p_x, M->p_xh, M->p_gu + (CUdeviceptr)ff * sizeof(float), 2 * ff, err)))
            return rc;
        /* SwiGLU, down, and the outputs to their slots */
        if ((rc = zr_k_swiglu(f->launcher, f->k, down_f16, M->p_gu, 2 * ff, down_f16 ? M->p_xh : M->p_ff, ff, nr_run, err))) return rc;
        if ((rc = run_matrix(f, &E->down, d, e0, len, c, M->p_ff, M->p_xh, M->p_y, d, err))) return rc;
        if ((rc = zr_k_moe_scatter(f->launcher, f->k, M->p_y, slot, M->p_out, d, nr_run, err))) return rc;
    }
    return zr_k_moe_combine(f->launcher, f->k, M->p_out, M->p_weights, k, f->x, d, n, err);
}
