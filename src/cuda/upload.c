#include "cuda/upload.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/moe.h"
#include "quant.h"

int zr_cuf_dalloc(ZrCuForward *f, CUdeviceptr *out, size_t bytes, const char *what, ZrError *err) {
    if (f->n_allocs == f->cap_allocs) {
        int cap = f->cap_allocs ? 2 * f->cap_allocs : 64;
        CUdeviceptr *a = realloc(f->allocs, sizeof *a * cap);
        if (!a) return zr_err(err, ZR_E_NOMEM, "cuda forward: out of host memory");
        f->allocs = a;
        f->cap_allocs = cap;
    }
    int rc = zr_cuda_alloc(f->cuda, out, bytes, what, err);
    if (rc) return rc;
    if (*out) f->allocs[f->n_allocs++] = *out;
    return ZR_OK;
}

static int upload_f32(ZrCuForward *f, const ZrWeight *w, CUdeviceptr *out, ZrError *err) {
    if (!w->data) {
        *out = 0;
        return ZR_OK;
    }
    if (w->type != ZR_TYPE_F32)
        return zr_err(err, ZR_E_UNSUPPORTED, "%s: type %s, expected f32", w->name, zr_type_name(w->type));
    int rc = zr_cuf_dalloc(f, out, (size_t)w->ne0 * w->ne1 * 4, w->name, err);
    if (rc) return rc;
    return zr_cuda_h2d(f->cuda, *out, w->data, (size_t)w->ne0 * w->ne1 * 4, err);
}

/* Concatenates the f32 vectors (absent ones as zeros) into one device vector. */
static int upload_f32_cat(ZrCuForward *f, const ZrWeight *const *ws, const int *lens, int n, CUdeviceptr *out,
                          ZrError *err) {
    size_t total = 0;
    for (int i = 0; i < n; i++) total += lens[i];
    float *h = calloc(total, sizeof *h);
    if (!h) return zr_err(err, ZR_E_NOMEM, "cuda forward: out of host memory");
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        if (ws[i]->data) {
            if (ws[i]->type != ZR_TYPE_F32 || ws[i]->ne0 != lens[i]) {
                free(h);
                return zr_err(err, ZR_E_UNSUPPORTED, "%s: expected f32 [%d], found %s [%lld]", ws[i]->name, lens[i],
                              zr_type_name(ws[i]->type), (long long)ws[i]->ne0);
            }
            memcpy(h + off, ws[i]->data, sizeof(float) * lens[i]);
        }
        off += lens[i];
    }
    int rc = zr_cuf_dalloc(f, out, total * sizeof(float), ws[0]->name, err);
    if (!rc) rc = zr_cuda_h2d(f->cuda, *out, h, total * sizeof(float), err);
    if (!rc) rc = zr_cuda_sync(f->cuda, err);
    free(h);
    return rc;
}

/* Uploads n matrices of one type and row length stacked into one device matrix. */
static int upload_matrix(ZrCuForward *f, const ZrWeight *const *ws, int n, ZrCuWeight *out, ZrError *err) {
    const uint32_t type = ws[0]->type;
    const int64_t n_in = ws[0]->ne0;
    int64_t N = 0;
    for (int i = 0; i < n; i++) N += ws[i]->ne1;
    const ZrTypeInfo *ti = zr_type_info(type);
    if (!zr_cuw_supported(type) || !ti)
        return zr_err(err, ZR_E_UNSUPPORTED, "%s: type %s has no GPU kernels", ws[0]->name, zr_type_name(type));
    if (n_in % ti->block)
        return zr_err(err, ZR_E_FORMAT, "%s: row of %lld values is not a multiple of the %s block (%u)", ws[0]->name,
                      (long long)n_in, ti->name, ti->block);
    if (N > INT32_MAX || n_in > INT32_MAX)
        return zr_err(err, ZR_E_UNSUPPORTED, "%s: too large for the GPU kernels", ws[0]->name);
    const size_t rb = zr_cuw_main_row_bytes(type, n_in), mb = rb * (size_t)N, sb = zr_cuw_side_bytes(type, n_in, N);
    uint8_t *hm = malloc(mb), *hs = sb ? malloc(sb) : NULL;
    if (!hm || (sb && !hs)) {
        free(hm);
        free(hs);
        return zr_err(err, ZR_E_NOMEM, "%s: out of host memory repacking %zu bytes", ws[0]->name, mb + sb);
    }
    int64_t r0 = 0;
    for (int i = 0; i < n; i++) {
        for (int64_t r = 0; r < ws[i]->ne1; r++)
            zr_cuw_repack_row(type, zr_weight_row(ws[i], r), n_in, r0 + r, N, hm, hs);
        r0 += ws[i]->ne1;
    }
    *out = (ZrCuWeight){.type = type, .n_in = (int)n_in, .n_out = (int)N};
    int rc = zr_cuf_dalloc(f, &out->main, mb, ws[0]->name, err);
    if (!rc && sb) rc = zr_cuf_dalloc(f, &out->side, sb, ws[0]->name, err);
    if (!rc) rc = zr_cuda_h2d(f->cuda, out->main, hm, mb, err);
    if (!rc && sb) rc = zr_cuda_h2d(f->cuda, out->side, hs, sb, err);
    if (!rc) rc = zr_cuda_sync(f->cuda, err);
    free(hm);
    free(hs);
    if (!rc) f->weight_bytes += mb + sb;
    return rc;
}

/* Stacks each run of consecutive matrices sharing type and row length (one launch per run:
 * Q4_K_M's Q|K in Q4_K with V in Q6_K is two launches, not three). off[i] = where output i
 * starts, n_out = the device matrices made. */
static int upload_group(ZrCuForward *f, const ZrWeight *const *ws, int n, ZrCuWeight *out, int *n_out, int *off,
                        ZrError *err) {
    int o = 0, rc;
    *n_out = 0;
    for (int i = 0; i < n;) {
        int k = i + 1;
        while (k < n && ws[k]->type == ws[i]->type && ws[k]->ne0 == ws[i]->ne0) k++;
        off[*n_out] = o;
        for (int t = i; t < k; t++) o += (int)ws[t]->ne1;
        if ((rc = upload_matrix(f, &ws[i], k - i, &out[*n_out], err))) return rc;
        /* matrices only: norms and padding are in the total, so done < total until the end */
        if (f->progress.fn)
            f->progress.fn(f->progress.ctx, f->weight_bytes < f->progress_total ? f->weight_bytes : f->progress_total - 1,
                           f->progress_total);
        ++*n_out;
        i = k;
    }
    return ZR_OK;
}

int zr_cuf_upload_group(ZrCuForward *f, const ZrWeight *const *ws, int n, ZrCuWeight *out, int *n_out, int *off,
                        ZrError *err) {
    return upload_group(f, ws, n, out, n_out, off, err);
}

/* The angle per position of each rotated pair for a layer's rope base and linear scale (and the
 * file's frequency divisors for this context: rope_freqs, Llama 3.1; phi3's long or short
 * factors) -> *out, f64 [rope_dim/2]. */
static int upload_rope(ZrCuForward *f, float theta, float freq_scale, CUdeviceptr *out, ZrError *err) {
    const ZrHparams *hp = &f->m->hp;
    const int half = hp->rope_dim / 2;
    double *h = calloc(half > 0 ? half : 1, sizeof *h);
    if (!h) return zr_err(err, ZR_E_NOMEM, "cuda forward: out of host memory");
    const ZrWeight *factors = zr_model_rope_factors(f->m, f->n_ctx);
    const float *ff = factors->data;
    if (ff && (factors->type != ZR_TYPE_F32 || factors->ne0 < half)) {
        free(h);
        return zr_err(err, ZR_E_FORMAT, "%s: expected f32 [%d]", factors->name, half);
    }
    for (int i = 0; i < half; i++) {
        double fr = (double)freq_scale * pow((double)theta, -2.0 * i / hp->rope_dim);
        if (ff) fr /= ff[i];
        h[i] = fr;
    }
    int rc = zr_cuf_dalloc(f, out, sizeof(double) * (half > 0 ? half : 1), "rope frequencies", err);
    if (!rc) rc = zr_cuda_h2d(f->cuda, *out, h, sizeof(double) * half, err);
    if (!rc) rc = zr_cuda_sync(f->cuda, err);
    free(h);
    return rc;
}

int zr_cuf_upload(ZrCuForward *f, ZrError *err) {
    const ZrModel *m = f->m;
    int rc;
    const ZrWeight *one[1] = {&m->tok_embd};
    int n1, off1[1];
    if ((rc = upload_group(f, one, 1, &f->tok_embd, &n1, off1, err))) return rc;
    if (m->tied_output) {
        f->output = f->tok_embd;
    } else {
        one[0] = &m->output;
        if ((rc = upload_group(f, one, 1, &f->output, &n1, off1, err))) return rc;
    }
    if ((rc = upload_f32(f, &m->output_norm, &f->output_norm, err))) return rc;
    f->layers = calloc(m->hp.n_layer, sizeof *f->layers);
    if (!f->layers) return zr_err(err, ZR_E_NOMEM, "cuda forward: out of host memory");
    for (int il = 0; il < m->hp.n_layer; il++) {
        const ZrLayer *L = &m->layers[il];
        ZrCuLayer *G = &f->layers[il];
        const ZrWeight *qkv[3] = {&L->wq, &L->wk, &L->wv}, *gu[2] = {&L->w_gate, &L->w_up};
        if ((rc = upload_f32(f, &L->attn_norm, &G->attn_norm, err))) return rc;
        if ((rc = upload_f32(f, &L->ffn_norm, &G->ffn_norm, err))) return rc;
        if ((rc = upload_group(f, qkv, 3, G->qkv, &G->n_qkv, G->qkv_off, err))) return rc;
        /* layers with the same rope base and scale as the one before share its table (every
         * layer of today's architectures; gemma3's local layers will differ) */
        const ZrLayerFacts *F = &L->facts, *prev = il > 0 ? &m->layers[il - 1].facts : NULL;
        if (prev && prev->rope_theta == F->rope_theta && prev->rope_freq_scale == F->rope_freq_scale)
            G->rope_freq = f->layers[il - 1].rope_freq;
        else if ((rc = upload_rope(f, F->rope_theta, F->rope_freq_scale, &G->rope_freq, err)))
            return rc;
        if (F->qkv_bias) {
            const ZrWeight *b[3] = {&L->bq, &L->bk, &L->bv};
            const int lens[3] = {f->q_dim, f->kv_dim, f->kv_dim};
            if ((rc = upload_f32_cat(f, b, lens, 3, &G->bias, err))) return rc;
        }
        if (F->qk_norm && (rc = upload_f32(f, &L->q_norm, &G->q_norm, err))) return rc;
        if (F->qk_norm && (rc = upload_f32(f, &L->k_norm, &G->k_norm, err))) return rc;
        one[0] = &L->wo;
        if ((rc = upload_group(f, one, 1, &G->wo, &n1, off1, err))) return rc;
        if (F->n_expert) { /* the router and the experts (cuda/moe.c) instead of gate|up and down */
            if ((rc = zr_cuf_moe_upload_layer(f, il, err))) return rc;
        } else {
            if ((rc = upload_group(f, gu, 2, G->gu, &G->n_gu, G->gu_off, err))) return rc;
            one[0] = &L->w_down;
            if ((rc = upload_group(f, one, 1, &G->down, &n1, off1, err))) return rc;
        }
        if (F->post_attn_norm && (rc = upload_f32(f, &L->attn_post_norm, &G->post_attn_norm, err))) return rc;
        if (F->post_ffn_norm && (rc = upload_f32(f, &L->ffn_post_norm, &G->post_ffn_norm, err))) return rc;
    }
    return ZR_OK;
}

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

static size_t matrix_bytes(const ZrWeight *w) {
    return align256(zr_cuw_main_row_bytes(w->type, w->ne0) * (size_t)w->ne1) +
           align256(zr_cuw_side_bytes(w->type, w->ne0, w->ne1));
}

size_t zr_cuf_upload_bytes(const ZrModel *m) {
    const ZrHparams *hp = &m->hp;
    const size_t qkv_dim = (size_t)(hp->n_head + 2 * hp->n_head_kv) * hp->head_dim;
    /* the embedding and the output norm */
    size_t w = matrix_bytes(&m->tok_embd) + align256((size_t)hp->n_embd * 4);
    if (!m->tied_output) w += matrix_bytes(&m->output);
    for (int il = 0; il < hp->n_layer; il++) {
        const ZrLayer *L = &m->layers[il];
        const ZrWeight *mats[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < 7; i++) w += mats[i]->data ? matrix_bytes(mats[i]) + 256 : 0;
        w += zr_cuf_moe_layer_bytes(m, L);
        /* a rope table (4 KiB at most) where the layer's base or scale differs from the one before */
        if (il == 0 || L->facts.rope_theta != L[-1].facts.rope_theta ||
            L->facts.rope_freq_scale != L[-1].facts.rope_freq_scale)
            w += 4096;
        /* two norms (and a spare), the bias, the q/k norms */
        w += 3 * align256((size_t)hp->n_embd * 4) + align256(qkv_dim * 4) + 2 * align256((size_t)hp->head_dim * 4);
        /* gemma's norms after the blocks */
        w += (L->facts.post_attn_norm + L->facts.post_ffn_norm) * align256((size_t)hp->n_embd * 4);
    }
    return w;
}
