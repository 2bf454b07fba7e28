#include "cuda/upload.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/moe.h"
#include "cuda/readahead.h"
#include "cuda/stage.h"
#include "quant.h"
#include "zr_clock.h"

int zr_cuf_dalloc(ZrCuForward *f, CUdeviceptr *out, size_t bytes, const char *what, ZrError *err) {
    const size_t aligned = (bytes + 255) & ~(size_t)255;
    if (bytes && f->arena && aligned <= f->arena_size - f->arena_used) { /* during the upload: a piece of the weights' one allocation */
        *out = f->arena + f->arena_used;
        f->arena_used += aligned;
        return ZR_OK;
    }
    const double t0 = zr_clock_ms();
    if (f->n_allocs == f->cap_allocs) {
        int cap = f->cap_allocs ? 2 * f->cap_allocs : 64;
        CUdeviceptr *a = realloc(f->allocs, sizeof *a * cap);
        if (!a) return zr_err(err, ZR_E_NOMEM, "cuda forward: out of host memory");
        f->allocs = a;
        f->cap_allocs = cap;
    }
    int rc = zr_cuda_alloc(f->cuda, out, bytes, what, err);
    f->alloc_ms += zr_clock_ms() - t0;
    if (rc) return rc;
    if (*out) f->allocs[f->n_allocs++] = *out;
    return ZR_OK;
}

/* One upload: every device write of it goes through the stager (so no pageable copy waits behind
 * the chunks in the copy engine's queue), and the file is read ahead of it. */
struct ZrCuUpload {
    ZrCuForward *f;
    ZrStage st;
    ZrReadahead ra;
    uint64_t queued;  /* bytes of the map queued so far (the readahead's pace) */
    void **keep;      /* host buffers the stager reads when it sends their chunk: freed at the end */
    int n_keep, cap_keep;
};
typedef struct ZrCuUpload Upload;

/* A host buffer for bytes the stager will read later (freed when the upload ends). */
static void *keep_alloc(Upload *u, size_t bytes, ZrError *err) {
    if (u->n_keep == u->cap_keep) {
        int cap = u->cap_keep ? 2 * u->cap_keep : 64;
        void **k = realloc(u->keep, sizeof *k * cap);
        if (!k) return zr_err(err, ZR_E_NOMEM, "cuda forward: out of host memory"), NULL;
        u->keep = k;
        u->cap_keep = cap;
    }
    void *p = calloc(bytes ? bytes : 1, 1);
    if (!p) return zr_err(err, ZR_E_NOMEM, "cuda forward: out of host memory"), NULL;
    return u->keep[u->n_keep++] = p;
}

static int copy_mapped(Upload *u, CUdeviceptr dst, const void *src, size_t bytes, ZrError *err) {
    u->queued += bytes;
    zr_readahead_consumed(&u->ra, u->queued);
    return zr_stage_copy(&u->st, dst, src, bytes, err);
}

static int upload_f32(Upload *u, const ZrWeight *w, CUdeviceptr *out, ZrError *err) {
    if (!w->data) {
        *out = 0;
        return ZR_OK;
    }
    if (w->type != ZR_TYPE_F32)
        return zr_err(err, ZR_E_UNSUPPORTED, "%s: type %s, expected f32", w->name, zr_type_name(w->type));
    int rc = zr_cuf_dalloc(u->f, out, (size_t)w->ne0 * w->ne1 * 4, w->name, err);
    if (rc) return rc;
    return copy_mapped(u, *out, w->data, (size_t)w->ne0 * w->ne1 * 4, err);
}

/* Concatenates the f32 vectors (absent ones as zeros) into one device vector. */
static int upload_f32_cat(Upload *u, const ZrWeight *const *ws, const int *lens, int n, CUdeviceptr *out,
                          ZrError *err) {
    size_t total = 0;
    for (int i = 0; i < n; i++) total += lens[i];
    float *h = keep_alloc(u, total * sizeof(float), err);
    if (!h) return err->code;
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        if (ws[i]->data) {
            if (ws[i]->type != ZR_TYPE_F32 || ws[i]->ne0 != lens[i])
                return zr_err(err, ZR_E_UNSUPPORTED, "%s: expected f32 [%d], found %s [%lld]", ws[i]->name, lens[i],
                              zr_type_name(ws[i]->type), (long long)ws[i]->ne0);
            memcpy(h + off, ws[i]->data, sizeof(float) * lens[i]);
        }
        off += lens[i];
    }
    int rc = zr_cuf_dalloc(u->f, out, total * sizeof(float), ws[0]->name, err);
    if (!rc) rc = zr_stage_copy(&u->st, *out, h, total * sizeof(float), err);
    return rc;
}

/* Uploads n matrices of one type and row length stacked into one device matrix: the file's bytes
 * as they are, repacked on the GPU (cu/repack.cu) unless the layout is the file's own (float
 * rows of a multiple of 16 bytes). */
static int upload_matrix(Upload *u, const ZrWeight *const *ws, int n, ZrCuWeight *out, ZrError *err) {
    ZrCuForward *f = u->f;
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
    const size_t raw = zr_row_bytes(type, n_in);
    *out = (ZrCuWeight){.type = type, .n_in = (int)n_in, .n_out = (int)N};
    int rc = zr_cuf_dalloc(f, &out->main, mb, ws[0]->name, err);
    if (!rc && sb) rc = zr_cuf_dalloc(f, &out->side, sb, ws[0]->name, err);
    int64_t r0 = 0;
    for (int i = 0; i < n && !rc; i++) {
        const size_t bytes = raw * (size_t)ws[i]->ne1;
        u->queued += bytes;
        zr_readahead_consumed(&u->ra, u->queued);
        if (ti->block == 1 && raw == rb)
            rc = zr_stage_copy(&u->st, out->main + (size_t)r0 * rb, ws[i]->data, bytes, err);
        else
            rc = zr_stage_repack(&u->st, type, ws[i]->data, (int)n_in, (int)r0, (int)ws[i]->ne1, (int)N, out->main,
                                 out->side, err);
        r0 += ws[i]->ne1;
    }
    if (!rc) f->weight_bytes += mb + sb;
    return rc;
}

/* Stacks each run of consecutive matrices sharing type and row length (one launch per run:
 * Q4_K_M's Q|K in Q4_K with V in Q6_K is two matrices, not three, which the decode step then
 * computes in one matvec_mix launch: cuda/mv_shape.h). off[i] = where output i starts, n_out =
 * the device matrices made. */
static int upload_group(Upload *u, const ZrWeight *const *ws, int n, ZrCuWeight *out, int *n_out, int *off,
                        ZrError *err) {
    ZrCuForward *f = u->f;
    int o = 0, rc;
    *n_out = 0;
    for (int i = 0; i < n;) {
        int k = i + 1;
        while (k < n && ws[k]->type == ws[i]->type && ws[k]->ne0 == ws[i]->ne0) k++;
        off[*n_out] = o;
        for (int t = i; t < k; t++) o += (int)ws[t]->ne1;
        if ((rc = upload_matrix(u, &ws[i], k - i, &out[*n_out], err))) return rc;
        /* matrices only: norms and padding are in the total, so done < total until the end */
        if (f->progress.fn)
            f->progress.fn(f->progress.ctx, f->weight_bytes < f->progress_total ? f->weight_bytes : f->progress_total - 1,
                           f->progress_total);
        ++*n_out;
        i = k;
    }
    return ZR_OK;
}

int zr_cuf_upload_group(ZrCuUpload *u, const ZrWeight *const *ws, int n, ZrCuWeight *out, int *n_out, int *off,
                        ZrError *err) {
    return upload_group(u, ws, n, out, n_out, off, err);
}

/* The angle per position of each rotated pair for a layer's rope base and linear scale (and the
 * file's frequency divisors for this context: rope_freqs, Llama 3.1; phi3's long or short
 * factors) -> *out, f64 [rope_dim/2]. */
static int upload_rope(Upload *u, float theta, float freq_scale, CUdeviceptr *out, ZrError *err) {
    ZrCuForward *f = u->f;
    const ZrHparams *hp = &f->m->hp;
    const int half = hp->rope_dim / 2;
    double *h = keep_alloc(u, sizeof(double) * (half > 0 ? half : 1), err);
    if (!h) return err->code;
    const ZrWeight *factors = zr_model_rope_factors(f->m, f->n_ctx);
    const float *ff = factors->data;
    if (ff && (factors->type != ZR_TYPE_F32 || factors->ne0 < half))
        return zr_err(err, ZR_E_FORMAT, "%s: expected f32 [%d]", factors->name, half);
    for (int i = 0; i < half; i++) {
        double fr = (double)freq_scale * pow((double)theta, -2.0 * i / hp->rope_dim);
        if (ff) fr /= ff[i];
        h[i] = fr;
    }
    int rc = zr_cuf_dalloc(f, out, sizeof(double) * (half > 0 ? half : 1), "rope frequencies", err);
    if (!rc) rc = zr_stage_copy(&u->st, *out, h, sizeof(double) * half, err);
    return rc;
}

/* The matrices' bytes in the map, in the order the upload copies them (the readahead's list). */
static int upload_ranges(const ZrModel *m, ZrRange **out) {
    const int cap = 2 + 7 * m->hp.n_layer;
    ZrRange *r = malloc(sizeof *r * cap);
    int n = 0;
    if (!r) return 0;
#define ADD(w)                                                                                \
    do {                                                                                      \
        if ((w)->data) r[n++] = (ZrRange){(w)->data, zr_row_bytes((w)->type, (w)->ne0) * (size_t)(w)->ne1}; \
    } while (0)
    ADD(&m->tok_embd);
    if (!m->tied_output) ADD(&m->output);
    for (int il = 0; il < m->hp.n_layer; il++) {
        const ZrLayer *L = &m->layers[il];
        ADD(&L->wq);
        ADD(&L->wk);
        ADD(&L->wv);
        ADD(&L->wo);
        ADD(&L->w_gate);
        ADD(&L->w_up);
        ADD(&L->w_down);
    }
#undef ADD
    *out = r;
    return n;
}

static int upload_all(Upload *u, ZrError *err);

int zr_cuf_upload(ZrCuForward *f, ZrError *err) {
    const double t0 = (zr_clock_ms() / 1e3);
    Upload u = {.f = f};
    ZrRange *ranges = NULL;
    const int n_ranges = upload_ranges(f->m, &ranges);
    zr_readahead_start(&u.ra, ranges, n_ranges);
    free(ranges);
    /* the weights in one device allocation of the bytes zr_cuf_plan counts for them (each piece
     * 256-byte aligned, as it counts them; one past it gets an allocation of its own), not ~10 a
     * layer */
    CUdeviceptr arena = 0;
    ZrError aerr = {0};
    int rc = zr_cuf_dalloc(f, &arena, f->progress_total, "the weights", &aerr);
    if (rc == ZR_E_NOMEM) rc = ZR_OK; /* no room in one piece (a fragmented GPU): each in its own as they fit */
    else if (rc) *err = aerr;
    f->arena = arena;
    f->arena_size = f->progress_total;
    f->arena_used = 0;
    if (!rc) rc = zr_stage_open(&u.st, f->cuda, f->progress_total, 0, f->progress.staging, err);
    u.st.need_kernels = f->progress.module;
    u.st.kernels_loaded = f->progress.module_loaded;
    u.st.need_kernels_ctx = f->progress.kernels_ctx;
    f->upload_setup_s = (zr_clock_ms() / 1e3) - t0;
    if (!rc) rc = zr_stage_measure_h2d(&u.st, &f->upload_h2d_gbps, err);
    if (!rc) rc = upload_all(&u, err);
    if (!rc) rc = zr_stage_finish(&u.st, err);
    if (!rc) {
        f->upload_bytes = u.st.bytes;
        f->upload_threads = u.st.n_threads;
        f->upload_waiting = u.st.max_waiting;
        f->upload_gather_ms = u.st.gather_ms;
        f->upload_wait_ms = u.st.wait_ms;
        f->upload_prepared = u.st.registered != NULL;
    }
    zr_stage_close(&u.st);
    f->arena = 0; /* what comes after the weights gets allocations of its own */
    zr_readahead_stop(&u.ra);
    for (int i = 0; i < u.n_keep; i++) free(u.keep[i]);
    free(u.keep);
    f->upload_s = (zr_clock_ms() / 1e3) - t0;
    return rc;
}

static int upload_all(Upload *u, ZrError *err) {
    ZrCuForward *f = u->f;
    const ZrModel *m = f->m;
    int rc;
    const ZrWeight *one[1] = {&m->tok_embd};
    int n1, off1[1];
    if ((rc = upload_group(u, one, 1, &f->tok_embd, &n1, off1, err))) return rc;
    if (m->tied_output) {
        f->output = f->tok_embd;
    } else {
        one[0] = &m->output;
        if ((rc = upload_group(u, one, 1, &f->output, &n1, off1, err))) return rc;
    }
    if ((rc = upload_f32(u, &m->output_norm, &f->output_norm, err))) return rc;
    f->layers = calloc(m->hp.n_layer, sizeof *f->layers);
    if (!f->layers) return zr_err(err, ZR_E_NOMEM, "cuda forward: out of host memory");
    for (int il = 0; il < m->hp.n_layer; il++) {
        const ZrLayer *L = &m->layers[il];
        ZrCuLayer *G = &f->layers[il];
        const ZrWeight *qkv[3] = {&L->wq, &L->wk, &L->wv}, *gu[2] = {&L->w_gate, &L->w_up};
        if ((rc = upload_f32(u, &L->attn_norm, &G->attn_norm, err))) return rc;
        if ((rc = upload_f32(u, &L->ffn_norm, &G->ffn_norm, err))) return rc;
        if ((rc = upload_group(u, qkv, 3, G->qkv, &G->n_qkv, G->qkv_off, err))) return rc;
        /* layers with the same rope base and scale as the one before share its table (every
         * layer of today's architectures; gemma3's local layers will differ) */
        const ZrLayerFacts *F = &L->facts, *prev = il > 0 ? &m->layers[il - 1].facts : NULL;
        if (prev && prev->rope_theta == F->rope_theta && prev->rope_freq_scale == F->rope_freq_scale)
            G->rope_freq = f->layers[il - 1].rope_freq;
        else if ((rc = upload_rope(u, F->rope_theta, F->rope_freq_scale, &G->rope_freq, err)))
            return rc;
        if (F->qkv_bias) {
            const ZrWeight *b[3] = {&L->bq, &L->bk, &L->bv};
            const int lens[3] = {f->q_dim, f->kv_dim, f->kv_dim};
            if ((rc = upload_f32_cat(u, b, lens, 3, &G->bias, err))) return rc;
        }
        if (F->qk_norm && (rc = upload_f32(u, &L->q_norm, &G->q_norm, err))) return rc;
        if (F->qk_norm && (rc = upload_f32(u, &L->k_norm, &G->k_norm, err))) return rc;
        one[0] = &L->wo;
        if ((rc = upload_group(u, one, 1, &G->wo, &n1, off1, err))) return rc;
        if (F->n_expert) { /* the router and the experts (cuda/moe.c) instead of gate|up and down */
            if ((rc = zr_cuf_moe_upload_layer(f, u, il, err))) return rc;
        } else {
            if ((rc = upload_group(u, gu, 2, G->gu, &G->n_gu, G->gu_off, err))) return rc;
            one[0] = &L->w_down;
            if ((rc = upload_group(u, one, 1, &G->down, &n1, off1, err))) return rc;
        }
        if (F->post_attn_norm && (rc = upload_f32(u, &L->attn_post_norm, &G->post_attn_norm, err))) return rc;
        if (F->post_ffn_norm && (rc = upload_f32(u, &L->ffn_post_norm, &G->post_ffn_norm, err))) return rc;
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
