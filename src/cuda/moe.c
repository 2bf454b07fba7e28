#include "cuda/moe.h"

#include <stdlib.h>
#include <string.h>

#include "cuda/upload.h"

static int max_int(int a, int b) { return a > b ? a : b; }

int zr_cuf_moe_upload_layer(ZrCuForward *f, int il, ZrError *err) {
    const ZrModel *m = f->m;
    const ZrLayer *L = &m->layers[il];
    const ZrLayerFacts *F = &L->facts;
    if (!f->moe) {
        f->moe = calloc(1, sizeof *f->moe + sizeof(ZrCuMoeLayer) * (size_t)m->hp.n_layer);
        if (!f->moe) return zr_err(err, ZR_E_NOMEM, "cuda forward: out of host memory");
    }
    ZrCuMoeLayer *E = &f->moe->layers[il];
    if (L->gate_exps.type != L->up_exps.type)
        return zr_err(err, ZR_E_UNSUPPORTED, "%s and %s: experts' gate and up of different types (%s, %s) are not supported on the GPU",
                      L->gate_exps.name, L->up_exps.name, zr_type_name(L->gate_exps.type), zr_type_name(L->up_exps.type));
    if (F->n_ff_expert > max_int(max_int(m->hp.n_embd, m->hp.n_ff), m->hp.n_head * m->hp.head_dim))
        return zr_err(err, ZR_E_UNSUPPORTED, "%s: experts %d wide, wider than the model's other rows (not supported on the GPU)",
                      L->down_exps.name, F->n_ff_expert);
    E->n_expert = F->n_expert;
    E->n_used = F->n_expert_used;
    E->n_ff = F->n_ff_expert;
    int n_out, off[2], rc;
    const ZrWeight *one[1] = {&L->ffn_gate_inp};
    if ((rc = zr_cuf_upload_group(f, one, 1, &E->router, &n_out, off, err))) return rc;
    one[0] = &L->down_exps;
    if ((rc = zr_cuf_upload_group(f, one, 1, &E->down, &n_out, off, err))) return rc;
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
    rc = zr_cuf_upload_group(f, ws, n, &E->gu, &n_out, off, err);
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
           matrix_bytes(L->gate_exps.type, L->gate_exps.ne0, 2 * L->gate_exps.ne1) +
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
    ZrCuMoe *M = f->moe;
    M->ff_stride = (n_ff + 3) & ~3;
    if ((rc = zr_cuf_dalloc(f, &M->logits, sizeof(float) * (size_t)n_expert, "router logits", err))) return rc;
    if ((rc = zr_cuf_dalloc(f, &M->ids, sizeof(int32_t) * (size_t)n_used, "expert ids", err))) return rc;
    if ((rc = zr_cuf_dalloc(f, &M->weights, sizeof(float) * (size_t)n_used, "expert weights", err))) return rc;
    if ((rc = zr_cuf_dalloc(f, &M->ff, sizeof(float) * (size_t)n_used * M->ff_stride, "expert activations", err))) return rc;
    if ((rc = zr_cuf_dalloc(f, &M->out, sizeof(float) * (size_t)n_used * f->n_embd, "expert outputs", err))) return rc;
    /* a graph recorded before any token must not route on garbage */
    if ((rc = zr_cuda_memset8(f->cuda, M->ids, 0, sizeof(int32_t) * (size_t)n_used, err))) return rc;
    return zr_cuda_memset8(f->cuda, M->weights, 0, sizeof(float) * (size_t)n_used, err);
}

int zr_cuf_moe_ffn(ZrCuForward *f, int il, CUdeviceptr x, CUdeviceptr norm_w, ZrError *err) {
    const ZrCuMoe *M = f->moe;
    const ZrCuMoeLayer *E = &M->layers[il];
    const float eps = f->m->hp.rms_eps;
    int rc;
    /* the router on the normed row */
    if ((rc = zr_cuf_matvec(f->launcher, f->k, &E->router, x, M->logits, 0, norm_w, eps, ZR_CUF_MV_RMSNORM, err))) return rc;
    if ((rc = zr_k_moe_route(f->launcher, f->k, M->logits, E->n_expert, E->n_used, M->ids, M->weights, 1, err))) return rc;
    /* silu(gate) * up of each chosen expert, on the normed row (the norm fused again: one row) */
    const ZrCuWeight one_gu = {.type = E->gu.type, .n_in = E->gu.n_in, .n_out = 2 * E->n_ff};
    if (!f->k->has_mv_id[E->gu.type] || !f->k->has_mv_id[E->down.type])
        return zr_err(err, ZR_E_UNSUPPORTED, "no expert matrix-vector kernel for type %s", zr_type_name(E->gu.type));
    const int glu = ZR_CUF_MV_RMSNORM | ZR_CUF_MV_GLU;
    if ((rc = zr_k_matvec_id(f->launcher, &f->k->mv_id[E->gu.type], zr_cuf_mv_rows_per_warp(E->gu.type), &E->gu, 2 * E->n_ff, M->ids,
                             E->n_used, x, 0, M->ff, M->ff_stride, norm_w, eps, glu, zr_cuf_mv_shape(f->k, &one_gu, glu), err)))
        return rc;
    /* down of each chosen expert on its own activations */
    const ZrCuWeight one_down = {.type = E->down.type, .n_in = E->down.n_in, .n_out = f->n_embd};
    if ((rc = zr_k_matvec_id(f->launcher, &f->k->mv_id[E->down.type], zr_cuf_mv_rows_per_warp(E->down.type), &E->down, f->n_embd,
                             M->ids, E->n_used, M->ff, M->ff_stride, M->out, f->n_embd, 0, 0.0f, ZR_CUF_MV_PLAIN,
                             zr_cuf_mv_shape(f->k, &one_down, ZR_CUF_MV_PLAIN), err)))
        return rc;
    return zr_k_moe_combine(f->launcher, f->k, M->out, M->weights, E->n_used, x, f->n_embd, 1, err);
}
