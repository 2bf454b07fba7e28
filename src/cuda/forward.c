#include "cuda/forward.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/pick.h"
#include "quant.h"

/* ---- kernels ---- */

/* Rows of W each warp computes in the matrix-vector kernel of a type (cu/matvec_*.cu: the R
 * of each ZR_MATVEC line, 2 for every type since run 3; a mismatch leaves rows unwritten,
 * which the gpu tests catch). */
int zr_cuf_mv_rows_per_warp(uint32_t type) {
    (void)type;
    return 2;
}

/* Values per 16-byte item of a type's kernel (cu/matvec.cuh EPI). */
static int mv_item_values(uint32_t type) {
    switch (type) {
    case ZR_TYPE_F32: return 4;
    case ZR_TYPE_F16: case ZR_TYPE_BF16: return 8;
    case ZR_TYPE_Q8_0: return 16;
    case ZR_TYPE_Q2_K: case ZR_TYPE_Q3_K: return 64;
    default: return 32;
    }
}

static const char *kname(uint32_t type) {
    switch (type) {
    case ZR_TYPE_F32: return "f32";
    case ZR_TYPE_F16: return "f16";
    case ZR_TYPE_BF16: return "bf16";
    case ZR_TYPE_Q8_0: return "q8_0";
    case ZR_TYPE_Q4_0: return "q4_0";
    case ZR_TYPE_Q4_1: return "q4_1";
    case ZR_TYPE_Q5_0: return "q5_0";
    case ZR_TYPE_Q5_1: return "q5_1";
    case ZR_TYPE_Q2_K: return "q2_k";
    case ZR_TYPE_Q3_K: return "q3_k";
    case ZR_TYPE_Q4_K: return "q4_k";
    case ZR_TYPE_Q5_K: return "q5_k";
    case ZR_TYPE_Q6_K: return "q6_k";
    default: return NULL;
    }
}

static unsigned cdiv(size_t a, size_t b) { return (unsigned)((a + b - 1) / b); }

static size_t mv_smem(int n_in) { return ((size_t)n_in + 4 * (size_t)((n_in + 31) / 32)) * sizeof(float); }

#define P 8 /* a pointer parameter */
#define I 4 /* an int or float parameter */

int zr_cuf_kernels_load(const ZrCuda *c, ZrCuKernels *k, int max_n_in, ZrError *err) {
    static const size_t mv_sz[] = {P, P, P, P, P, P, I, I, I, I, I}, dq_sz[] = {P, P, P, I, I, I, I}, em_sz[] = {P, P, P, P, I, I};
    char name[64];
    int rc;
    memset(k, 0, sizeof *k);
    k->sm_count = c->props.sm_count > 0 ? c->props.sm_count : 1;
    const size_t smem = mv_smem(max_n_in);
    for (uint32_t t = 0; t < ZR_TYPE_COUNT; t++) {
        const char *tn = kname(t);
        if (!tn) continue;
        snprintf(name, sizeof name, "matvec_%s", tn);
        if ((rc = zr_cuda_kernel(c, name, mv_sz, 11, &k->mv[t], err))) return rc;
        if (smem + 1024 > 48 * 1024) { /* the kernel's static reduction arrays come on top */
            if ((int)smem > c->props.max_smem_optin)
                return zr_err(err, ZR_E_UNSUPPORTED,
                              "rows of %d values need %zu bytes of shared memory in %s; this GPU allows %d", max_n_in,
                              smem, name, c->props.max_smem_optin);
            if ((rc = zr_cuda_kernel_set_smem(c, &k->mv[t], (int)smem, err))) return rc;
        }
        k->has_mv[t] = true;
        snprintf(name, sizeof name, "embed_%s", tn);
        if ((rc = zr_cuda_kernel(c, name, em_sz, 6, &k->embed[t], err))) return rc;
        k->has_embed[t] = true;
        if (t != ZR_TYPE_F16) {
            snprintf(name, sizeof name, "dequant_%s_f16", tn);
            if ((rc = zr_cuda_kernel(c, name, dq_sz, 7, &k->dq[t], err))) return rc;
            k->has_dq[t] = true;
        }
    }
    static const size_t rms_sz[] = {P, I, P, P, I, I, I}, rope_sz[] = {P, I, I, I, I, I, I, P, P, P, P},
                        ap_sz[] = {P, I, P, P, P, P, I, I, I, I, I, I},
                        ac_sz[] = {P, P, I, P, I, I, I, I}, sw_sz[] = {P, I, P, I}, ar_sz[] = {P, I, P, I},
                        add_sz[] = {P, P, I}, cv_sz[] = {P, I, P, I, I}, am_sz[] = {P, I, P},
                        apre_sz[] = {P, I, P, P, P, I, P, I, I, I, I},
                        ad_sz[] = {P, P, P, P, P, P, P, P, I, I, I, I, I, I, I, I};
    struct {
        const char *name;
        const size_t *sz;
        int n;
        ZrKernel *out;
    } fixed[] = {
        {"rmsnorm_f32", rms_sz, 7, &k->rmsnorm},        {"rope_kv_f32", rope_sz, 11, &k->rope_kv},
        {"attn_part_f32", ap_sz, 12, &k->attn_part},
        {"attn_combine_f32", ac_sz, 8, &k->attn_combine}, {"attn_decode_f32", ad_sz, 16, &k->attn_decode},
        {"swiglu_f32", sw_sz, 4, &k->swiglu},
        {"add_rows_f32", ar_sz, 4, &k->add_rows},       {"add_f32", add_sz, 3, &k->add},
        {"convert_f32_f16", cv_sz, 5, &k->convert},     {"argmax_f32", am_sz, 3, &k->argmax},
        {"attn_prefill_f16_d64", apre_sz, 11, &k->attn_prefill[0]},
        {"attn_prefill_f16_d128", apre_sz, 11, &k->attn_prefill[1]},
        {"rmsnorm_f32_f16", rms_sz, 7, &k->rmsnorm_f16},  {"swiglu_f32_f16", sw_sz, 4, &k->swiglu_f16},
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if ((rc = zr_cuda_kernel(c, fixed[i].name, fixed[i].sz, fixed[i].n, fixed[i].out, err))) return rc;
    return ZR_OK;
}

/* ---- memory plan ---- */

typedef struct Dims {
    int n_embd, q_dim, kv_dim, qkv_dim, n_ff, n_vocab, n_layer, head_dim, n_head;
} Dims;

static Dims dims_of(const ZrModel *m) {
    const ZrHparams *hp = &m->hp;
    Dims d = {hp->n_embd, hp->n_head * hp->head_dim, hp->n_head_kv * hp->head_dim, 0, hp->n_ff, hp->n_vocab,
              hp->n_layer, hp->head_dim, hp->n_head};
    d.qkv_dim = d.q_dim + 2 * d.kv_dim;
    return d;
}

static int imax(int a, int b) { return a > b ? a : b; }
static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

static size_t weight_bytes(const ZrWeight *w) {
    return align256(zr_cuw_main_row_bytes(w->type, w->ne0) * (size_t)w->ne1) +
           align256(zr_cuw_side_bytes(w->type, w->ne0, w->ne1));
}

/* Attention split: decode chunks of n_ctx/64 rows, rounded up to 32 and kept within 32..256
 * (at most 1024 chunks); prefill chunks of up to 4096 rows (the block keeps a chunk's scores
 * in shared memory). A decode block's P.V loop walks its chunk row by row, so short chunks
 * keep it short at the start of a context (tg128: positions 0..127); the cap of 64 chunks (for
 * n_ctx <= 16384) bounds the blocks that exit at once past the sequence. */
static void attn_chunks(int n_ctx, int *chunk_d, int *n_d, int *chunk_p, int *n_p) {
    int cd = (n_ctx / 64 + 31) / 32 * 32;
    cd = cd < 32 ? 32 : cd > 256 ? 256 : cd;
    if ((n_ctx + cd - 1) / cd > 1024) cd = ((n_ctx + 1023) / 1024 + 31) / 32 * 32;
    *chunk_d = cd;
    *n_d = (n_ctx + cd - 1) / cd;
    const int cp = n_ctx < 4096 ? n_ctx : 4096;
    *chunk_p = cp;
    *n_p = (n_ctx + cp - 1) / cp;
}

/* The dequantization buffer holds the largest layer matrix (stacked), at least 16 Mi values;
 * larger matrices (the output) go through it in row slices. */
static size_t wbuf_elems_of(const Dims *d) {
    size_t e = (size_t)d->n_embd * d->qkv_dim;
    size_t g = (size_t)d->n_embd * 2 * d->n_ff;
    if (g > e) e = g;
    if ((size_t)d->n_embd * d->q_dim > e) e = (size_t)d->n_embd * d->q_dim;
    if (e < ((size_t)16 << 20)) e = (size_t)16 << 20;
    return e;
}

void zr_cuf_plan(const ZrModel *m, int n_ctx, size_t *weights, size_t *kv, size_t *work) {
    const Dims d = dims_of(m);
    size_t w = weight_bytes(&m->tok_embd) + align256((size_t)d.n_embd * 4) + 4096;
    if (!m->tied_output) w += weight_bytes(&m->output);
    for (int il = 0; il < d.n_layer; il++) {
        const ZrLayer *L = &m->layers[il];
        const ZrWeight *mats[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < 7; i++) w += weight_bytes(mats[i]) + 256;
        w += 3 * align256((size_t)d.n_embd * 4) + align256((size_t)d.qkv_dim * 4) + 2 * align256((size_t)d.head_dim * 4);
    }
    *weights = w;
    *kv = 2 * (size_t)d.n_layer * n_ctx * d.kv_dim * sizeof(float);
    int cd, nd, cp, np;
    attn_chunks(n_ctx, &cd, &nd, &cp, &np);
    const size_t UB = ZR_CUF_UBATCH, f = sizeof(float);
    const int wmax = imax(imax(d.n_embd, d.q_dim), d.n_ff);
    *work = UB * f * ((size_t)2 * d.n_embd + d.qkv_dim + d.q_dim + 3 * (size_t)d.n_ff) +
            (size_t)ZR_CUF_LOGIT_ROWS * d.n_vocab * f + (size_t)d.n_head * nd * (d.head_dim + 2) * f +
            UB * d.n_head * np * (size_t)(d.head_dim + 2) * f + UB * wmax * 2 + wbuf_elems_of(&d) * 2 +
            ((size_t)32 << 20) + UB * 4 + 64 * 256 + align256((size_t)m->hp.n_head * 4);
}

/* The decode attention is the fused kernel (attn_decode_f32) wherever it takes the shape
 * (zr_cuf_attn_decode_fits); else rope_kv_f32 + attn_part_f32 + attn_combine_f32. The fused
 * kernel won its measurement: H100 tg128 graph, 1B Q4_0 1501 -> 1835 t/s, 8B Q4_0 386 -> 447
 * (cu/PERF.md). */

/* The fused kernel's chunks: a block per (query head, chunk) with 16 warps takes 128 rows
 * (head_dim 128; 256 at 64) in one batch of loads, so chunks of 128 rows (the split path's
 * chunk_d when larger) leave nothing to merge up to position 127 and few chunks after: at short
 * contexts a merge (fence, atomic, partials) costs more round trips than the block's rows.
 * Never fewer than chunk_d, so n_chunks <= n_chunks_d and the split path's partials buffer holds
 * the fused kernel's. */
static void attn_fused_chunks(const ZrCuForward *f, int *chunk, int *n_chunks) {
    *chunk = 128 < f->n_ctx ? 128 : f->n_ctx;
    if (*chunk < f->chunk_d) *chunk = f->chunk_d;
    *n_chunks = cdiv(f->n_ctx, *chunk);
}

/* ---- allocation and upload ---- */

static int dalloc(ZrCuForward *f, CUdeviceptr *out, size_t bytes, const char *what, ZrError *err) {
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
    int rc = dalloc(f, out, (size_t)w->ne0 * w->ne1 * 4, w->name, err);
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
    int rc = dalloc(f, out, total * sizeof(float), ws[0]->name, err);
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
    int rc = dalloc(f, &out->main, mb, ws[0]->name, err);
    if (!rc && sb) rc = dalloc(f, &out->side, sb, ws[0]->name, err);
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
        ++*n_out;
        i = k;
    }
    return ZR_OK;
}

static int upload_rope(ZrCuForward *f, ZrError *err) {
    const ZrHparams *hp = &f->m->hp;
    const int half = hp->rope_dim / 2;
    double *h = calloc(half > 0 ? half : 1, sizeof *h);
    if (!h) return zr_err(err, ZR_E_NOMEM, "cuda forward: out of host memory");
    const float *ff = f->m->rope_freqs.data;
    if (ff && (f->m->rope_freqs.type != ZR_TYPE_F32 || f->m->rope_freqs.ne0 < half)) {
        free(h);
        return zr_err(err, ZR_E_FORMAT, "rope_freqs.weight: expected f32 [%d]", half);
    }
    for (int i = 0; i < half; i++) {
        double fr = (double)hp->rope_freq_scale * pow((double)hp->rope_theta, -2.0 * i / hp->rope_dim);
        if (ff) fr /= ff[i];
        h[i] = fr;
    }
    int rc = dalloc(f, &f->rope_freq, sizeof(double) * (half > 0 ? half : 1), "rope frequencies", err);
    if (!rc) rc = zr_cuda_h2d(f->cuda, f->rope_freq, h, sizeof(double) * half, err);
    if (!rc) rc = zr_cuda_sync(f->cuda, err);
    free(h);
    return rc;
}

int zr_cuf_init(ZrCuForward *f, const ZrModel *m, ZrCuda *cuda, ZrLauncher *l, ZrCublasLt *lt, ZrCuKernels *k,
                int n_ctx, ZrError *err) {
    memset(f, 0, sizeof *f);
    f->m = m;
    f->cuda = cuda;
    f->launcher = l;
    f->lt = lt;
    f->k = k;
    f->n_ctx = n_ctx;
    const Dims d = dims_of(m);
    f->n_embd = d.n_embd;
    f->q_dim = d.q_dim;
    f->kv_dim = d.kv_dim;
    f->qkv_dim = d.qkv_dim;
    f->n_ff = d.n_ff;
    f->n_vocab = d.n_vocab;
    f->head_dim = d.head_dim;
    const ZrHparams *hp = &m->hp;
    if (hp->n_head % hp->n_head_kv)
        return zr_err(err, ZR_E_UNSUPPORTED, "%d query heads are not a multiple of %d KV heads", hp->n_head, hp->n_head_kv);
    if (hp->rope_dim > hp->head_dim || hp->rope_dim % 2)
        return zr_err(err, ZR_E_UNSUPPORTED, "rope over %d of %d head values", hp->rope_dim, hp->head_dim);

    /* all of it must fit: say how much is needed before allocating any of it */
    size_t wb, kvb, workb, free_b = 0, total_b = 0;
    zr_cuf_plan(m, n_ctx, &wb, &kvb, &workb);
    if (cuda->drv->cuMemGetInfo(&free_b, &total_b) == CUDA_SUCCESS && wb + kvb + workb > free_b)
        return zr_err(err, ZR_E_NOMEM,
                      "out of GPU memory: the model needs %.1f MiB (weights %.1f MiB, KV cache for %d tokens %.1f MiB, "
                      "workspace %.1f MiB) and %.1f MiB of %.1f MiB are free on %s; use a smaller -c or a smaller model",
                      (wb + kvb + workb) / 1048576.0, wb / 1048576.0, n_ctx, kvb / 1048576.0, workb / 1048576.0,
                      free_b / 1048576.0, total_b / 1048576.0, cuda->props.name);

    int rc;
    const ZrWeight *one[1] = {&m->tok_embd};
    int n1, off1[1];
    if ((rc = upload_group(f, one, 1, &f->tok_embd, &n1, off1, err))) goto fail;
    if (m->tied_output) {
        f->output = f->tok_embd;
    } else {
        one[0] = &m->output;
        if ((rc = upload_group(f, one, 1, &f->output, &n1, off1, err))) goto fail;
    }
    if ((rc = upload_f32(f, &m->output_norm, &f->output_norm, err))) goto fail;
    if ((rc = upload_rope(f, err))) goto fail;
    f->layers = calloc(d.n_layer, sizeof *f->layers);
    if (!f->layers) {
        rc = zr_err(err, ZR_E_NOMEM, "cuda forward: out of host memory");
        goto fail;
    }
    for (int il = 0; il < d.n_layer; il++) {
        const ZrLayer *L = &m->layers[il];
        ZrCuLayer *G = &f->layers[il];
        const ZrWeight *qkv[3] = {&L->wq, &L->wk, &L->wv}, *gu[2] = {&L->w_gate, &L->w_up};
        if ((rc = upload_f32(f, &L->attn_norm, &G->attn_norm, err))) goto fail;
        if ((rc = upload_f32(f, &L->ffn_norm, &G->ffn_norm, err))) goto fail;
        if ((rc = upload_group(f, qkv, 3, G->qkv, &G->n_qkv, G->qkv_off, err))) goto fail;
        if (L->bq.data || L->bk.data || L->bv.data) {
            const ZrWeight *b[3] = {&L->bq, &L->bk, &L->bv};
            const int lens[3] = {d.q_dim, d.kv_dim, d.kv_dim};
            if ((rc = upload_f32_cat(f, b, lens, 3, &G->bias, err))) goto fail;
        }
        if ((rc = upload_f32(f, &L->q_norm, &G->q_norm, err))) goto fail;
        if ((rc = upload_f32(f, &L->k_norm, &G->k_norm, err))) goto fail;
        one[0] = &L->wo;
        if ((rc = upload_group(f, one, 1, &G->wo, &n1, off1, err))) goto fail;
        if ((rc = upload_group(f, gu, 2, G->gu, &G->n_gu, G->gu_off, err))) goto fail;
        one[0] = &L->w_down;
        if ((rc = upload_group(f, one, 1, &G->down, &n1, off1, err))) goto fail;
    }

    const size_t UB = ZR_CUF_UBATCH, fl = sizeof(float);
    const int wmax = imax(imax(d.n_embd, d.q_dim), d.n_ff);
    attn_chunks(n_ctx, &f->chunk_d, &f->n_chunks_d, &f->chunk_p, &f->n_chunks_p);
    f->wbuf_elems = wbuf_elems_of(&d);
    f->lt_ws_bytes = (size_t)32 << 20;
    struct {
        CUdeviceptr *p;
        size_t bytes;
        const char *what;
    } bufs[] = {
        {&f->kc, (size_t)d.n_layer * n_ctx * d.kv_dim * fl, "the K cache"},
        {&f->vc, (size_t)d.n_layer * n_ctx * d.kv_dim * fl, "the V cache"},
        {&f->d_tok, 256 + UB * sizeof(int32_t), "token ids and position"},
        {&f->x, UB * d.n_embd * fl, "activations"},
        {&f->xn, UB * d.n_embd * fl, "activations"},
        {&f->qkv, UB * d.qkv_dim * fl, "activations"},
        {&f->att, UB * d.q_dim * fl, "activations"},
        {&f->gu, UB * 2 * (size_t)d.n_ff * fl, "activations"},
        {&f->ff, UB * d.n_ff * fl, "activations"},
        {&f->logits, (size_t)ZR_CUF_LOGIT_ROWS * d.n_vocab * fl, "logits"},
        {&f->d_pick, ZR_PICK_BYTES, "the greedy pick"},
        {&f->part_d, (size_t)d.n_head * f->n_chunks_d * (d.head_dim + 2) * fl, "attention partials"},
        {&f->part_p, UB * d.n_head * f->n_chunks_p * (size_t)(d.head_dim + 2) * fl, "attention partials"},
        {&f->attn_count, (size_t)hp->n_head * sizeof(int32_t), "attention counters"},
        {&f->xh, UB * wmax * 2, "f16 activations"},
        {&f->wbuf, f->wbuf_elems * 2, "f16 weight buffer"},
        {&f->lt_ws, f->lt_ws_bytes, "cuBLASLt workspace"},
    };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if ((rc = dalloc(f, bufs[i].p, bufs[i].bytes, bufs[i].what, err))) goto fail;
    f->d_pos = f->d_tok + 4;
    f->d_ptok = f->d_tok + 256;
    /* a decode step before any token must not read garbage ids or positions */
    if ((rc = zr_cuda_memset8(cuda, f->d_tok, 0, 256 + UB * sizeof(int32_t), err))) goto fail;
    if ((rc = zr_cuda_memset8(cuda, f->d_pick, 0, ZR_PICK_BYTES, err))) goto fail; /* its block counter */
    if ((rc = zr_cuda_memset8(cuda, f->attn_count, 0, (size_t)hp->n_head * sizeof(int32_t), err))) goto fail;
    attn_fused_chunks(f, &f->chunk_f, &f->n_chunks_f);
    f->attn_fused = zr_cuf_attn_decode_fits(hp->n_head, hp->n_head_kv, d.head_dim, hp->rope_dim, f->chunk_f);
    if ((rc = zr_cuda_sync(cuda, err))) goto fail;
    return ZR_OK;
fail:
    zr_cuf_free(f);
    return rc;
}

void zr_cuf_forget(ZrCuForward *f) {
    f->n_allocs = 0;
    zr_cuf_free(f);
}

void zr_cuf_free(ZrCuForward *f) {
    if (!f) return;
    for (int i = 0; i < f->n_allocs; i++) zr_cuda_free(f->cuda, f->allocs[i]);
    free(f->allocs);
    free(f->layers);
    f->allocs = NULL;
    f->layers = NULL;
    f->n_allocs = f->cap_allocs = 0;
}

/* ---- launches ---- */

ZrMvShape zr_cuf_mv_shape(const ZrCuKernels *k, const ZrCuWeight *w, int mode) {
    /* Measured on an H100 (tools/mv_bench.c over every shape, cu/PERF.md run 3): blocks of 8
     * row groups (the block stages x once for all of them, so fewer, larger blocks win), and
     * each row split over S warps (split-K) only while the grid has fewer than 16 warps per SM
     * AND each warp's share of its rows stays >= 4 KiB (short rows of quantized weights lose by
     * splitting: the FFN down and the small F16/Q8_0 matrices gain). This pick is within 3% of
     * the best measured shape on every 1B and 8B matrix. */
    const int R = zr_cuf_mv_rows_per_warp(w->type), glu = (mode & ZR_CUF_MV_GLU) != 0;
    const long per_warp = glu ? R / 2 : R, results = glu ? w->n_out / 2 : w->n_out;
    const long groups = (results + per_warp - 1) / per_warp;
    const long items = w->n_in / mv_item_values(w->type);
    const double warp_bytes =
        (double)R * (zr_cuw_main_row_bytes(w->type, w->n_in) + zr_cuw_side_bytes(w->type, w->n_in, 1));
    int split = 1;
    while (split < 4 && groups * split < 16L * k->sm_count && warp_bytes / (2 * split) >= 4096 &&
           items / (2 * split) >= 32)
        split *= 2;
    return (ZrMvShape){.groups = split <= 2 ? 8 : 4, .split = split};
}

int zr_cuf_matvec_shaped(ZrLauncher *l, const ZrCuKernels *k, const ZrCuWeight *w, CUdeviceptr x, CUdeviceptr y,
                         CUdeviceptr add, CUdeviceptr norm_w, float eps, int mode, ZrMvShape shape, ZrError *err) {
    if (w->type >= ZR_TYPE_COUNT || !k->has_mv[w->type])
        return zr_err(err, ZR_E_UNSUPPORTED, "no matrix-vector kernel for type %s", zr_type_name(w->type));
    const ZrKernel *kern = &k->mv[w->type];
    const int R = zr_cuf_mv_rows_per_warp(w->type);
    if (shape.groups < 1 || shape.split < 1 || shape.groups * shape.split * 32 > ZR_CUF_MV_MAX_THREADS ||
        ((mode & ZR_CUF_MV_GLU) && (R % 2 || w->n_out % 2)))
        return zr_err(err, ZR_E_INTERNAL, "%s: no launch for %d x %d warps (%d rows each), mode %d", kern->name,
                      shape.groups, shape.split, R, mode);
    const int per_warp = mode & ZR_CUF_MV_GLU ? R / 2 : R;
    const int results = mode & ZR_CUF_MV_GLU ? w->n_out / 2 : w->n_out;
    const unsigned groups = cdiv((size_t)results, (size_t)per_warp);
    return ZR_LAUNCH(l, kern, ZR_DIM1(cdiv(groups, (size_t)shape.groups)), ZR_DIM1(32 * shape.groups * shape.split),
                     (unsigned)mv_smem(w->n_in), err, (void *)&w->main, (void *)&w->side, &x, &y, &add, &norm_w, &eps,
                     (void *)&w->n_in, (void *)&w->n_out, &mode, (void *)&shape.split);
}

int zr_cuf_matvec(ZrLauncher *l, const ZrCuKernels *k, const ZrCuWeight *w, CUdeviceptr x, CUdeviceptr y,
                  CUdeviceptr add, CUdeviceptr norm_w, float eps, int mode, ZrError *err) {
    if (w->type >= ZR_TYPE_COUNT || !k->has_mv[w->type])
        return zr_err(err, ZR_E_UNSUPPORTED, "no matrix-vector kernel for type %s", zr_type_name(w->type));
    return zr_cuf_matvec_shaped(l, k, w, x, y, add, norm_w, eps, mode, zr_cuf_mv_shape(k, w, mode), err);
}

/* y[n_out] = W x (+ add) */
static int mv(ZrCuForward *f, const ZrCuWeight *w, CUdeviceptr x, CUdeviceptr y, CUdeviceptr add, ZrError *err) {
    return zr_cuf_matvec(f->launcher, f->k, w, x, y, add, 0, 0.0f, ZR_CUF_MV_PLAIN, err);
}

/* y[n_out] = W RMSNorm(x) * norm_w (+ add): the block's input norm fused into its projection */
static int mv_norm(ZrCuForward *f, const ZrCuWeight *w, CUdeviceptr x, CUdeviceptr norm_w, CUdeviceptr y,
                   CUdeviceptr add, ZrError *err) {
    return zr_cuf_matvec(f->launcher, f->k, w, x, y, add, norm_w, f->m->hp.rms_eps, ZR_CUF_MV_RMSNORM, err);
}

static CUdeviceptr fptr(CUdeviceptr base, size_t floats) { return base + floats * sizeof(float); }

/* rows x [rows][n] (stride xs) -> y (stride ys); `pieces` norms of n per row (q/k head norms) */
static int rmsnorm(ZrCuForward *f, CUdeviceptr x, int xs, CUdeviceptr w, CUdeviceptr y, int ys, int n, int pieces,
                   int rows, ZrError *err) {
    const float eps = f->m->hp.rms_eps;
    return ZR_LAUNCH(f->launcher, &f->k->rmsnorm, ZR_DIM3(pieces, rows, 1), ZR_DIM1(256), 0, err, &x, &xs, &w, &y, &ys,
                     &n, (void *)&eps);
}

/* Q/K head norms (qwen3), rope of Q and K, and the K/V cache write, for `rows` rows of f->qkv at
 * positions d_pos[0].. (decode and prefill). */
static int qk_norm_rope(ZrCuForward *f, int il, int rows, ZrError *err) {
    const ZrHparams *hp = &f->m->hp;
    const ZrCuLayer *G = &f->layers[il];
    int rc;
    if (G->q_norm && (rc = rmsnorm(f, f->qkv, f->qkv_dim, G->q_norm, f->qkv, f->qkv_dim, f->head_dim, hp->n_head, rows, err)))
        return rc;
    if (G->k_norm && (rc = rmsnorm(f, fptr(f->qkv, f->q_dim), f->qkv_dim, G->k_norm, fptr(f->qkv, f->q_dim), f->qkv_dim,
                                   f->head_dim, hp->n_head_kv, rows, err)))
        return rc;
    const int neox = hp->rope_neox ? 1 : 0;
    const size_t layer = (size_t)il * f->n_ctx * f->kv_dim;
    CUdeviceptr kc = fptr(f->kc, layer), vc = fptr(f->vc, layer);
    const size_t threads = (size_t)(hp->n_head + hp->n_head_kv) * (hp->rope_dim / 2) + f->kv_dim +
                           (size_t)hp->n_head_kv * (f->head_dim - hp->rope_dim);
    return ZR_LAUNCH(f->launcher, &f->k->rope_kv, ZR_DIM3(cdiv(threads, 128), rows, 1), ZR_DIM1(128), 0, err, &f->qkv,
                     &f->qkv_dim, (void *)&hp->n_head, (void *)&hp->n_head_kv, &f->head_dim, (void *)&hp->rope_dim,
                     (void *)&neox, &f->rope_freq, &f->d_pos, &kc, &vc);
}

/* Everything from the QKV projection's output to the attention output, for `rows` rows at
 * positions d_pos[0].. (the decode step; the prefill's fallback). */
static int attention(ZrCuForward *f, int il, int rows, CUdeviceptr part, int chunk, int n_chunks, ZrError *err) {
    const ZrHparams *hp = &f->m->hp;
    int rc;
    if ((rc = qk_norm_rope(f, il, rows, err))) return rc;
    const size_t layer = (size_t)il * f->n_ctx * f->kv_dim;
    CUdeviceptr kc = fptr(f->kc, layer), vc = fptr(f->vc, layer);
    const float scale = 1.0f / sqrtf((float)f->head_dim);
    const unsigned smem = (unsigned)((f->head_dim + chunk + 128) * sizeof(float));
    if ((rc = ZR_LAUNCH(f->launcher, &f->k->attn_part, ZR_DIM3(hp->n_head, n_chunks, rows), ZR_DIM1(128), smem, err,
                        &f->qkv, &f->qkv_dim, &kc, &vc, &part, &f->d_pos, (void *)&hp->n_head, (void *)&hp->n_head_kv,
                        &f->head_dim, &chunk, &n_chunks, (void *)&scale)))
        return rc;
    return ZR_LAUNCH(f->launcher, &f->k->attn_combine, ZR_DIM3(hp->n_head, rows, 1), ZR_DIM1(128), 0, err, &part, &f->att,
                     &f->q_dim, &f->d_pos, (void *)&hp->n_head, &f->head_dim, &chunk, &n_chunks);
}

bool zr_cuf_attn_decode_fits(int n_head, int n_kv, int head_dim, int rope_dim, int chunk) {
    return n_kv > 0 && n_head % n_kv == 0 && head_dim % 4 == 0 && head_dim >= 4 && head_dim <= 128 &&
           rope_dim <= head_dim && rope_dim % 2 == 0 && chunk > 0;
}

int zr_cuf_attn_decode(ZrLauncher *l, const ZrCuKernels *k, const ZrCuAttnDecode *a, ZrError *err) {
    if (!zr_cuf_attn_decode_fits(a->n_head, a->n_kv, a->head_dim, a->rope_dim, a->chunk))
        return zr_err(err, ZR_E_INTERNAL, "attn_decode_f32: no kernel for %d/%d heads of %d (rope %d), chunks of %d",
                      a->n_head, a->n_kv, a->head_dim, a->rope_dim, a->chunk);
    const float scale = 1.0f / sqrtf((float)a->head_dim);
    return ZR_LAUNCH(l, &k->attn_decode, ZR_DIM3(a->n_head, a->n_chunks, 1), ZR_DIM1(512), 0, err, (void *)&a->qkv,
                     (void *)&a->kc, (void *)&a->vc, (void *)&a->part, (void *)&a->count, (void *)&a->out,
                     (void *)&a->freq, (void *)&a->pos, (void *)&a->n_head, (void *)&a->n_kv, (void *)&a->head_dim,
                     (void *)&a->rope_dim, (void *)&a->neox, (void *)&a->chunk, (void *)&a->n_chunks, (void *)&scale);
}

/* The decode step's attention: the q/k norms (qwen3) when present, then one fused launch. */
static int attention_decode(ZrCuForward *f, int il, ZrError *err) {
    const ZrHparams *hp = &f->m->hp;
    const ZrCuLayer *G = &f->layers[il];
    if (!f->attn_fused) return attention(f, il, 1, f->part_d, f->chunk_d, f->n_chunks_d, err);
    int rc;
    if (G->q_norm && (rc = rmsnorm(f, f->qkv, f->qkv_dim, G->q_norm, f->qkv, f->qkv_dim, f->head_dim, hp->n_head, 1, err)))
        return rc;
    if (G->k_norm && (rc = rmsnorm(f, fptr(f->qkv, f->q_dim), f->qkv_dim, G->k_norm, fptr(f->qkv, f->q_dim), f->qkv_dim,
                                   f->head_dim, hp->n_head_kv, 1, err)))
        return rc;
    const size_t layer = (size_t)il * f->n_ctx * f->kv_dim;
    const ZrCuAttnDecode a = {.qkv = f->qkv, .kc = fptr(f->kc, layer), .vc = fptr(f->vc, layer), .part = f->part_d,
                              .count = f->attn_count, .out = f->att, .freq = f->rope_freq, .pos = f->d_pos,
                              .n_head = hp->n_head, .n_kv = hp->n_head_kv, .head_dim = f->head_dim,
                              .rope_dim = hp->rope_dim, .neox = hp->rope_neox ? 1 : 0, .chunk = f->chunk_f,
                              .n_chunks = f->n_chunks_f};
    return zr_cuf_attn_decode(f->launcher, f->k, &a, err);
}

int zr_cuf_decode_step(ZrCuForward *f, ZrError *err) {
    const ZrHparams *hp = &f->m->hp;
    int rc;
    if ((rc = ZR_LAUNCH(f->launcher, &f->k->embed[f->tok_embd.type], ZR_DIM3(cdiv(f->n_embd, 256), 1, 1), ZR_DIM1(256), 0,
                        err, &f->tok_embd.main, &f->tok_embd.side, &f->d_tok, &f->x, &f->n_embd, &f->n_vocab)))
        return rc;
    for (int il = 0; il < hp->n_layer; il++) {
        const ZrCuLayer *G = &f->layers[il];
        /* attention block: norm fused into the QKV projection (bias as its addend), rope + KV
         * write, split attention, output projection adding into the residual */
        for (int i = 0; i < G->n_qkv; i++)
            if ((rc = mv_norm(f, &G->qkv[i], f->x, G->attn_norm, fptr(f->qkv, G->qkv_off[i]),
                              G->bias ? fptr(G->bias, G->qkv_off[i]) : 0, err)))
                return rc;
        if ((rc = attention_decode(f, il, err))) return rc;
        if ((rc = mv(f, &G->wo, f->att, f->x, f->x, err))) return rc;
        /* FFN block: norm fused into gate|up; stacked gate|up also applies SwiGLU to its own
         * results (GLU), else SwiGLU is fused into down's staging; down adds into the residual */
        if (G->n_gu == 1) {
            if ((rc = zr_cuf_matvec(f->launcher, f->k, &G->gu[0], f->x, f->ff, 0, G->ffn_norm, f->m->hp.rms_eps,
                                    ZR_CUF_MV_RMSNORM | ZR_CUF_MV_GLU, err)))
                return rc;
            if ((rc = mv(f, &G->down, f->ff, f->x, f->x, err))) return rc;
        } else {
            for (int i = 0; i < G->n_gu; i++)
                if ((rc = mv_norm(f, &G->gu[i], f->x, G->ffn_norm, fptr(f->gu, G->gu_off[i]), 0, err))) return rc;
            if ((rc = zr_cuf_matvec(f->launcher, f->k, &G->down, f->gu, f->x, f->x, 0, 0.0f, ZR_CUF_MV_SWIGLU, err)))
                return rc;
        }
    }
    if ((rc = mv_norm(f, &f->output, f->x, f->output_norm, f->logits, 0, err))) return rc;
    return f->pick_n > 0 ? zr_pick_launch(f->launcher, &f->k->argmax, f->logits, f->pick_n, f->d_pick, err) : ZR_OK;
}

/* ---- prefill ---- */

/* Prefill attention for `rows` rows at positions d_pos[0]..: rope + KV write, then the tiled
 * tensor-core kernel (cu/attention_prefill.cu), which reads each K/V tile once per 64 query rows
 * instead of once per row (H100 pp512 of Llama-3-8B F16 13.4k -> 34.2k t/s, Q4_0 11.2k ->
 * 22.3k: cu/PERF.md). F32 projections keep F32 attention (the split kernels: such models are
 * held to the decode tolerance), as do head sizes other than 64 and 128. */
static int prefill_attention(ZrCuForward *f, int il, int rows, ZrError *err) {
    const ZrHparams *hp = &f->m->hp;
    const ZrKernel *kern = f->head_dim == 64 ? &f->k->attn_prefill[0] : f->head_dim == 128 ? &f->k->attn_prefill[1] : NULL;
    if (!kern || f->layers[il].qkv[0].type == ZR_TYPE_F32)
        return attention(f, il, rows, f->part_p, f->chunk_p, f->n_chunks_p, err);
    int rc;
    if ((rc = qk_norm_rope(f, il, rows, err))) return rc;
    const size_t layer = (size_t)il * f->n_ctx * f->kv_dim;
    CUdeviceptr kc = fptr(f->kc, layer), vc = fptr(f->vc, layer);
    const float scale_log2 = (float)(1.4426950408889634 / sqrt((double)f->head_dim));
    return ZR_LAUNCH(f->launcher, kern, ZR_DIM3(hp->n_head, cdiv(rows, 64), 1), ZR_DIM1(128), 0, err, &f->qkv,
                     &f->qkv_dim, &kc, &vc, &f->att, &f->q_dim, &f->d_pos, &rows, (void *)&hp->n_head,
                     (void *)&hp->n_head_kv, (void *)&scale_log2);
}

/* Y[rows][ldy] (+)= X[rows][n_in] W^T through cuBLASLt. x32 is the F32 input (stride n_in);
 * the F16 copy in f->xh must already hold it for non-F32 weights. beta 1 adds into Y. */
static int gemm(ZrCuForward *f, const ZrCuWeight *w, int rows, CUdeviceptr x32, CUdeviceptr y, int ldy, float beta,
                ZrError *err) {
    const size_t rb = zr_cuw_main_row_bytes(w->type, w->n_in);
    ZrGemm g = {.trans_a = 1, .trans_b = 0, .n = (uint64_t)rows, .k = (uint64_t)w->n_in, .type_b = CUDA_R_16F,
                .b = f->xh, .ldb = w->n_in, .type_d = CUDA_R_32F, .ldd = ldy, .alpha = 1.0f, .beta = beta,
                .workspace = f->lt_ws, .workspace_bytes = f->lt_ws_bytes};
    if (w->type == ZR_TYPE_F32 || w->type == ZR_TYPE_F16) {
        g.m = (uint64_t)w->n_out;
        g.a = w->main;
        g.type_a = w->type == ZR_TYPE_F32 ? CUDA_R_32F : CUDA_R_16F;
        g.lda = (int64_t)(rb / (w->type == ZR_TYPE_F32 ? 4 : 2));
        if (w->type == ZR_TYPE_F32) {
            g.type_b = CUDA_R_32F;
            g.b = x32;
        }
        g.d = y;
        return zr_cublaslt_gemm(f->lt, f->cuda->stream, &g, err);
    }
    /* dequantize row slices into the F16 buffer, one GEMM per slice */
    const int slice = (int)(f->wbuf_elems / (size_t)w->n_in);
    for (int r0 = 0; r0 < w->n_out; r0 += slice) {
        const int nr = w->n_out - r0 < slice ? w->n_out - r0 : slice;
        const size_t threads = (size_t)nr * ((w->n_in + 7) / 8);
        int rc = ZR_LAUNCH(f->launcher, &f->k->dq[w->type], ZR_DIM1(cdiv(threads, 256)), ZR_DIM1(256), 0, err,
                           (void *)&w->main, (void *)&w->side, &f->wbuf, (void *)&w->n_in, (void *)&w->n_out, &r0,
                           (void *)&nr);
        if (rc) return rc;
        g.m = (uint64_t)nr;
        g.a = f->wbuf;
        g.type_a = CUDA_R_16F;
        g.lda = w->n_in;
        g.d = fptr(y, r0);
        if ((rc = zr_cublaslt_gemm(f->lt, f->cuda->stream, &g, err))) return rc;
    }
    return ZR_OK;
}

/* F16 copy of rows x n (contiguous) into f->xh, for the GEMMs of non-F32 weights. */
static int to_f16(ZrCuForward *f, CUdeviceptr x, int n, int rows, ZrError *err) {
    return ZR_LAUNCH(f->launcher, &f->k->convert, ZR_DIM3(cdiv(n, 256), rows, 1), ZR_DIM1(256), 0, err, &x, &n, &f->xh,
                     &n, &n);
}

/* True when no matrix of the group is F32: its GEMMs read only the F16 copy of the input, so
 * the kernel before them may write that copy directly (cu/prefill_f16.cu). */
static bool f16_input(const ZrCuWeight *ws, int n) {
    for (int i = 0; i < n; i++)
        if (ws[i].type == ZR_TYPE_F32) return false;
    return true;
}

/* rows of x [rows][n_embd] RMS-normed with w into f->xn (F32), or straight into the F16 operand
 * f->xh when the group of matrices that reads it takes F16 only (f16 true). */
static int prefill_norm(ZrCuForward *f, CUdeviceptr w, int rows, bool f16, ZrError *err) {
    if (!f16) return rmsnorm(f, f->x, f->n_embd, w, f->xn, f->n_embd, f->n_embd, 1, rows, err);
    const float eps = f->m->hp.rms_eps;
    return ZR_LAUNCH(f->launcher, &f->k->rmsnorm_f16, ZR_DIM3(1, rows, 1), ZR_DIM1(256), 0, err, &f->x, &f->n_embd, &w,
                     &f->xh, &f->n_embd, &f->n_embd, (void *)&eps);
}

/* the GEMMs of a group of matrices sharing the input x [rows][n_in]; in_xh: its F16 copy is
 * already in f->xh */
static int gemm_group(ZrCuForward *f, const ZrCuWeight *ws, int n, const int *off, int rows, CUdeviceptr x,
                      CUdeviceptr y, int ldy, float beta, bool in_xh, ZrError *err) {
    bool converted = in_xh;
    int rc;
    for (int i = 0; i < n; i++) {
        if (ws[i].type != ZR_TYPE_F32 && !converted) {
            if ((rc = to_f16(f, x, ws[i].n_in, rows, err))) return rc;
            converted = true;
        }
        if ((rc = gemm(f, &ws[i], rows, x, fptr(y, off[i]), ldy, beta, err))) return rc;
    }
    return ZR_OK;
}

int zr_cuf_prefill(ZrCuForward *f, const int32_t *tokens, int n, int pos, float *logits, bool all_logits, ZrError *err) {
    const ZrHparams *hp = &f->m->hp;
    int rc;
    if (n < 1 || n > ZR_CUF_UBATCH) return zr_err(err, ZR_E_INTERNAL, "cuda prefill: %d rows (1..%d)", n, ZR_CUF_UBATCH);
    if ((rc = zr_cuda_h2d(f->cuda, f->d_ptok, tokens, sizeof(int32_t) * n, err))) return rc;
    const int32_t p = pos;
    if ((rc = zr_cuda_h2d(f->cuda, f->d_pos, &p, sizeof p, err))) return rc;
    if ((rc = ZR_LAUNCH(f->launcher, &f->k->embed[f->tok_embd.type], ZR_DIM3(cdiv(f->n_embd, 256), n, 1), ZR_DIM1(256), 0,
                        err, &f->tok_embd.main, &f->tok_embd.side, &f->d_ptok, &f->x, &f->n_embd, &f->n_vocab)))
        return rc;
    const int zero = 0;
    for (int il = 0; il < hp->n_layer; il++) {
        const ZrCuLayer *G = &f->layers[il];
        const bool h_qkv = f16_input(G->qkv, G->n_qkv), h_gu = f16_input(G->gu, G->n_gu), h_down = f16_input(&G->down, 1);
        if ((rc = prefill_norm(f, G->attn_norm, n, h_qkv, err))) return rc;
        if ((rc = gemm_group(f, G->qkv, G->n_qkv, G->qkv_off, n, f->xn, f->qkv, f->qkv_dim, 0.0f, h_qkv, err))) return rc;
        if (G->bias && (rc = ZR_LAUNCH(f->launcher, &f->k->add_rows, ZR_DIM3(cdiv(f->qkv_dim, 256), n, 1), ZR_DIM1(256), 0,
                                       err, &f->qkv, &f->qkv_dim, (void *)&G->bias, &f->qkv_dim)))
            return rc;
        if ((rc = prefill_attention(f, il, n, err))) return rc;
        if ((rc = gemm_group(f, &G->wo, 1, &zero, n, f->att, f->x, f->n_embd, 1.0f, false, err))) return rc;
        if ((rc = prefill_norm(f, G->ffn_norm, n, h_gu, err))) return rc;
        if ((rc = gemm_group(f, G->gu, G->n_gu, G->gu_off, n, f->xn, f->gu, 2 * f->n_ff, 0.0f, h_gu, err))) return rc;
        /* SwiGLU into ff (F32), or straight into down's F16 operand */
        const int stride = 2 * f->n_ff;
        if ((rc = ZR_LAUNCH(f->launcher, h_down ? &f->k->swiglu_f16 : &f->k->swiglu, ZR_DIM3(cdiv(f->n_ff, 256), n, 1),
                            ZR_DIM1(256), 0, err, &f->gu, (void *)&stride, h_down ? &f->xh : &f->ff, &f->n_ff)))
            return rc;
        if ((rc = gemm_group(f, &G->down, 1, &zero, n, f->ff, f->x, f->n_embd, 1.0f, h_down, err))) return rc;
    }
    if (logits && !all_logits) {
        /* the last row only: the decode step's F32 matrix-vector product */
        if ((rc = mv_norm(f, &f->output, fptr(f->x, (size_t)(n - 1) * f->n_embd), f->output_norm, f->logits, 0, err)))
            return rc;
        if ((rc = zr_cuda_d2h(f->cuda, logits, f->logits, sizeof(float) * f->n_vocab, err))) return rc;
    } else if (logits) {
        for (int r0 = 0; r0 < n; r0 += ZR_CUF_LOGIT_ROWS) {
            const int nr = n - r0 < ZR_CUF_LOGIT_ROWS ? n - r0 : ZR_CUF_LOGIT_ROWS;
            if ((rc = rmsnorm(f, fptr(f->x, (size_t)r0 * f->n_embd), f->n_embd, f->output_norm, f->xn, f->n_embd,
                              f->n_embd, 1, nr, err)))
                return rc;
            if ((rc = gemm_group(f, &f->output, 1, &zero, nr, f->xn, f->logits, f->n_vocab, 0.0f, false, err))) return rc;
            if ((rc = zr_cuda_d2h(f->cuda, logits + (size_t)r0 * f->n_vocab, f->logits,
                                  sizeof(float) * nr * f->n_vocab, err)))
                return rc;
            if ((rc = zr_cuda_sync(f->cuda, err))) return rc;
        }
    }
    return zr_cuda_sync(f->cuda, err);
}
