#include "cuda/forward.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/attn.h"
#include "cuda/buffers.h"
#include "cuda/mm_small.h"
#include "cuda/moe.h"
#include "cuda/pick.h"
#include "cuda/upload.h"

static CUdeviceptr fptr(CUdeviceptr base, size_t floats) { return base + floats * sizeof(float); }

/* ---- setup ---- */

int zr_cuf_init(ZrCuForward *f, const ZrModel *m, ZrCuda *cuda, ZrLauncher *l, ZrCublasLt *lt, ZrCuKernels *k,
                int n_ctx, bool kv16, const ZrCuProgress *progress, ZrError *err) {
    memset(f, 0, sizeof *f);
    f->kv16 = kv16;
    if (progress) f->progress = *progress;
    f->m = m;
    f->cuda = cuda;
    f->launcher = l;
    f->lt = lt;
    f->k = k;
    f->n_ctx = n_ctx;
    const ZrHparams *hp = &m->hp;
    f->n_embd = hp->n_embd;
    f->q_dim = hp->n_head * hp->head_dim;
    f->kv_dim = hp->n_head_kv * hp->head_dim;
    f->qkv_dim = f->q_dim + 2 * f->kv_dim;
    f->n_ff = hp->n_ff;
    f->n_vocab = hp->n_vocab;
    f->head_dim = hp->head_dim;
    if (hp->n_head % hp->n_head_kv)
        return zr_err(err, ZR_E_UNSUPPORTED, "%d query heads are not a multiple of %d KV heads", hp->n_head, hp->n_head_kv);
    if (hp->rope_dim > hp->head_dim || hp->rope_dim % 2)
        return zr_err(err, ZR_E_UNSUPPORTED, "rope over %d of %d head values", hp->rope_dim, hp->head_dim);

    /* all of it must fit: say how much is needed before allocating any of it */
    size_t wb, kvb, workb, free_b = 0, total_b = 0;
    zr_cuf_plan(m, n_ctx, kv16, &wb, &kvb, &workb);
    if (cuda->drv->cuMemGetInfo(&free_b, &total_b) == CUDA_SUCCESS && wb + kvb + workb > free_b)
        return zr_err(err, ZR_E_NOMEM,
                      "out of GPU memory: the model needs %.1f MiB (weights %.1f MiB, KV cache for %d tokens %.1f MiB, "
                      "workspace %.1f MiB) and %.1f MiB of %.1f MiB are free on %s; use a smaller -c or a smaller model",
                      (wb + kvb + workb) / 1048576.0, wb / 1048576.0, n_ctx, kvb / 1048576.0, workb / 1048576.0,
                      free_b / 1048576.0, total_b / 1048576.0, cuda->props.name);

    int rc;
    f->progress_total = wb;
    zr_cuf_attn_chunks(n_ctx, &f->chunk_d, &f->n_chunks_d, &f->chunk_p, &f->n_chunks_p);
    if ((rc = zr_cuf_buffers_alloc(f, err))) goto fail;
    if (f->progress.buffers) f->progress.buffers(f->progress.buffers_ctx, f);
    if ((rc = zr_cuf_upload(f, err))) goto fail;
    if (f->progress.fn) f->progress.fn(f->progress.ctx, wb, wb); /* done == total once, at the end */
    if ((rc = zr_cuf_moe_buffers(f, err))) goto fail;
    const size_t UB = ZR_CUF_UBATCH;
    f->d_pos = f->d_tok + 4;
    f->d_ptok = f->d_tok + 256;
    /* a decode step before any token must not read garbage ids or positions */
    if ((rc = zr_cuda_memset8(cuda, f->d_tok, 0, 256 + UB * sizeof(int32_t), err))) goto fail;
    if ((rc = zr_cuda_memset8(cuda, f->d_pick, 0, ZR_PICK_BYTES, err))) goto fail; /* its block counter */
    if ((rc = zr_cuda_memset8(cuda, f->attn_count, 0, (size_t)hp->n_head * sizeof(int32_t), err))) goto fail;
    zr_cuf_attn_fused_chunks(n_ctx, f->chunk_d, f->head_dim, &f->chunk_f, &f->n_chunks_f);
    f->attn_fused = zr_cuf_attn_decode_fits(hp->n_head, hp->n_head_kv, f->head_dim, hp->rope_dim, f->chunk_f);
    if ((rc = zr_cuda_sync(cuda, err))) goto fail;
    return ZR_OK;
fail:
    if (f->progress.buffers) f->progress.buffers(f->progress.buffers_ctx, NULL); /* they go: nobody may use them */
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
    free(f->moe);
    f->allocs = NULL;
    f->layers = NULL;
    f->moe = NULL;
    f->n_allocs = f->cap_allocs = 0;
}

/* ---- the decode step ---- */

/* y[n_out] = W x (+ add) */
static int mv(ZrCuForward *f, const ZrCuWeight *w, CUdeviceptr x, CUdeviceptr y, CUdeviceptr add, ZrError *err) {
    return zr_cuf_matvec(f->launcher, f->k, w, x, y, add, 0, 0.0f, ZR_CUF_MV_PLAIN, err);
}

/* y[n_out] = W RMSNorm(x) * norm_w (+ add): the block's input norm fused into its projection */
static int mv_norm(ZrCuForward *f, const ZrCuWeight *w, CUdeviceptr x, CUdeviceptr norm_w, CUdeviceptr y,
                   CUdeviceptr add, ZrError *err) {
    return zr_cuf_matvec(f->launcher, f->k, w, x, y, add, norm_w, f->m->hp.rms_eps, ZR_CUF_MV_RMSNORM, err);
}

/* A block's output y [rows][n_embd] through the norm after the block (gemma) into the residual
 * (the prefill's; the decode step folds it into the next product: Resid). */
static int post_norm_add(ZrCuForward *f, CUdeviceptr y, CUdeviceptr norm_w, int rows, ZrError *err) {
    return zr_k_rmsnorm_add(f->launcher, f->k, y, norm_w, f->x, f->n_embd, f->m->hp.rms_eps, rows, err);
}

/* The decode step's residual [n_embd]: row 0 of f->x, or row 1 after a gemma post norm. A block
 * output to be normed after the block (gemma) waits in f->xn with its norm weight pend_w and,
 * right after it (xn[n_embd ..]), the pend_n per-block sums of squares its product wrote
 * (ZR_CUF_MV_SSQ); the next product that norms the residual adds it in (ZR_CUF_MV_ADDNORM,
 * taking its RMS from those pieces) and writes the sum to the other row, which then is the
 * residual: the two post norms of a layer cost no launch. */
typedef struct Resid {
    CUdeviceptr x, pend_w;
    int pend_n;
} Resid;

static CUdeviceptr other_row(const ZrCuForward *f, CUdeviceptr x) { return x == f->x ? fptr(f->x, f->n_embd) : f->x; }

/* y[n_out] = W RMSNorm(residual) * norm_w (+ add), mode | RMSNORM: the block's input norm fused
 * into its projection, and a pending post norm with it (the first product of a group that shares
 * the input writes the new residual; resid_settle then moves to it). */
static int mv_in(ZrCuForward *f, const Resid *r, bool first, const ZrCuWeight *w, CUdeviceptr norm_w, CUdeviceptr y,
                 CUdeviceptr add, int mode, ZrError *err) {
    const float eps = f->m->hp.rms_eps;
    if (!r->pend_w) return zr_cuf_matvec(f->launcher, f->k, w, r->x, y, add, norm_w, eps, ZR_CUF_MV_RMSNORM | mode, err);
    if (add) return zr_err(err, ZR_E_INTERNAL, "decode: a norm after a block before a projection with a bias");
    const ZrMvPost p = {.r = f->xn, .post_w = r->pend_w, .x_out = first ? other_row(f, r->x) : 0, .n_ss = r->pend_n};
    return zr_cuf_matvec_post(f->launcher, f->k, w, r->x, &p, y, norm_w, eps, mode, err);
}

/* A layer's Q/K/V projections into f->qkv (bias as the addend), norm fused as mv_in's: matrices
 * of two types in one launch where cuda/mv_shape.h's plan allows (cu/matvec_mix.cu: Q4_K_M's Q4_K
 * q|k and Q6_K v), else a launch per matrix. */
static int qkv_in(ZrCuForward *f, const Resid *r, const ZrCuLayer *G, ZrError *err) {
    const int mode = r->pend_w ? ZR_CUF_MV_ADDNORM : ZR_CUF_MV_RMSNORM;
    ZrMvMix mix;
    int rc;
    if (!zr_cuf_mv_mix_plan(f->k, G->qkv, G->n_qkv, mode, &mix)) {
        for (int i = 0; i < G->n_qkv; i++)
            if ((rc = mv_in(f, r, i == 0, &G->qkv[i], G->attn_norm, fptr(f->qkv, G->qkv_off[i]),
                            G->bias ? fptr(G->bias, G->qkv_off[i]) : 0, 0, err)))
                return rc;
        return ZR_OK;
    }
    if (r->pend_w && G->bias) return zr_err(err, ZR_E_INTERNAL, "decode: a norm after a block before a projection with a bias");
    const ZrMvPost p = {.r = f->xn, .post_w = r->pend_w, .x_out = other_row(f, r->x), .n_ss = r->pend_n};
    return zr_k_matvec_mix(f->launcher, f->k, &mix, G->qkv, G->qkv_off, r->x, f->qkv, G->bias, G->attn_norm,
                           f->m->hp.rms_eps, mode, r->pend_w ? &p : NULL, err);
}

static void resid_settle(const ZrCuForward *f, Resid *r) {
    if (!r->pend_w) return;
    r->x = other_row(f, r->x);
    r->pend_w = 0;
    r->pend_n = 0;
}

/* A block's output projection: into the residual, or with a norm after the block (gemma) into
 * f->xn, pending, with its per-block sums of squares after it (SSQ: xn has UB rows). */
static int block_out(ZrCuForward *f, Resid *r, const ZrCuWeight *w, CUdeviceptr x, CUdeviceptr post_norm,
                     int mode, ZrError *err) {
    const CUdeviceptr y = post_norm ? f->xn : r->x, add = post_norm ? 0 : r->x;
    r->pend_w = post_norm;
    r->pend_n = 0;
    if (post_norm) {
        mode |= ZR_CUF_MV_SSQ;
        r->pend_n = (int)zr_cuf_mv_grid(w, mode, zr_cuf_mv_shape(f->k, w, mode));
        if (w->n_out != f->n_embd || (size_t)r->pend_n > (size_t)(ZR_CUF_UBATCH - 1) * (size_t)f->n_embd)
            return zr_err(err, ZR_E_INTERNAL, "decode: a post-normed block output of %d rows and %d pieces", w->n_out,
                          r->pend_n);
    }
    return zr_cuf_matvec(f->launcher, f->k, w, x, y, add, 0, 0.0f, mode, err);
}

/* gemma's FFN (facts.act gelu_tanh), launched as llama's SwiGLU with GELU gates: norm (and the
 * pending post-attention norm) fused into gate|up, stacked gate|up gating its own results
 * (GLU | GELU) or GeGLU fused into down's staging (SWIGLU | GELU); down adds into the residual
 * or, with the post-FFN norm, leaves its output pending. */
static int ffn_geglu_decode(ZrCuForward *f, Resid *r, const ZrCuLayer *G, ZrError *err) {
    const int gelu = ZR_CUF_MV_GELU;
    CUdeviceptr down_in = f->ff;
    int rc, down_mode = ZR_CUF_MV_PLAIN;
    if (G->n_gu == 1) {
        if ((rc = mv_in(f, r, true, &G->gu[0], G->ffn_norm, f->ff, 0, ZR_CUF_MV_GLU | gelu, err))) return rc;
    } else {
        for (int i = 0; i < G->n_gu; i++)
            if ((rc = mv_in(f, r, i == 0, &G->gu[i], G->ffn_norm, fptr(f->gu, G->gu_off[i]), 0, 0, err))) return rc;
        down_in = f->gu;
        down_mode = ZR_CUF_MV_SWIGLU | gelu;
    }
    resid_settle(f, r);
    return block_out(f, r, &G->down, down_in, G->post_ffn_norm, down_mode, err);
}

int zr_cuf_decode_step(ZrCuForward *f, ZrError *err) {
    const ZrHparams *hp = &f->m->hp;
    Resid R = {.x = f->x};
    int rc;
    /* with a tail, the step's start time goes into its record (the idle gap between steps) */
    const CUdeviceptr t_begin0 = f->tail != ZR_TAIL_NONE ? f->tail_io.ring + offsetof(ZrPickRecord, t_begin) : 0;
    /* gemma's embedding scale in the lookup (x * s, one rounding; a launch less per step) */
    if ((rc = zr_k_embed_stamp(f->launcher, f->k, &f->tok_embd, f->d_tok, f->x, f->n_embd, f->n_vocab, 1, hp->embd_scale,
                               t_begin0, f->tail != ZR_TAIL_NONE ? f->tail_io.n_slots : 1, err)))
        return rc;
    for (int il = 0; il < hp->n_layer; il++) {
        const ZrCuLayer *G = &f->layers[il];
        /* attention block: norm fused into the QKV projection (bias as its addend), rope + KV
         * write + attention (cuda/attn.c), output projection adding into the residual */
        if ((rc = qkv_in(f, &R, G, err))) return rc;
        resid_settle(f, &R);
        if ((rc = zr_cuf_attn_decode_layer(f, il, err))) return rc;
        if ((rc = block_out(f, &R, &G->wo, f->att, G->post_attn_norm, ZR_CUF_MV_PLAIN, err))) return rc;
        /* FFN block: norm fused into gate|up; stacked gate|up also applies SwiGLU to its own
         * results (GLU), else SwiGLU is fused into down's staging; down adds into the residual */
        if (f->m->layers[il].facts.n_expert) {
            if (R.pend_w) /* no architecture has both (the model refuses it); the norm would be lost */
                return zr_err(err, ZR_E_INTERNAL, "cuda decode: layer %d: a post-attention norm before experts", il);
            if ((rc = zr_cuf_moe_ffn(f, il, R.x, G->ffn_norm, err))) return rc;
        } else if (f->m->layers[il].facts.act == ZR_ACT_GELU_TANH) {
            if ((rc = ffn_geglu_decode(f, &R, G, err))) return rc;
        } else if (G->n_gu == 1) {
            if ((rc = mv_in(f, &R, true, &G->gu[0], G->ffn_norm, f->ff, 0, ZR_CUF_MV_GLU, err))) return rc;
            resid_settle(f, &R);
            if ((rc = mv(f, &G->down, f->ff, R.x, R.x, err))) return rc;
        } else {
            for (int i = 0; i < G->n_gu; i++)
                if ((rc = mv_in(f, &R, i == 0, &G->gu[i], G->ffn_norm, fptr(f->gu, G->gu_off[i]), 0, 0, err))) return rc;
            resid_settle(f, &R);
            if ((rc = zr_cuf_matvec(f->launcher, f->k, &G->down, f->gu, R.x, R.x, 0, 0.0f, ZR_CUF_MV_SWIGLU, err)))
                return rc;
        }
    }
    if ((rc = mv_in(f, &R, false, &f->output, f->output_norm, f->logits, 0, 0, err))) return rc;
    if (hp->final_softcap != 0.0f && (rc = zr_k_softcap(f->launcher, f->k, f->logits, hp->final_softcap, f->n_vocab, err)))
        return rc;
    if (f->tail == ZR_TAIL_GREEDY) return zr_pick_greedy_launch(f->launcher, f->k, &f->tail_io, f->d_pick, err);
    if (f->tail == ZR_TAIL_SAMPLE) return zr_sample_launch(f->launcher, f->k, f->tail_sample, &f->tail_io, err);
    return f->pick_n > 0 ? zr_pick_launch(f->launcher, &f->k->argmax, f->logits, f->pick_n, f->d_pick, err) : ZR_OK;
}

/* ---- prefill ---- */

/* Y[rows][ldy] (+)= X[rows][n_in] W^T through cuBLASLt. x32 is the F32 input (stride n_in);
 * the F16 copy in f->xh must already hold it for non-F32 weights. beta 1 adds into Y. */
static int gemm(ZrCuForward *f, const ZrCuWeight *w, int rows, CUdeviceptr x32, CUdeviceptr y, int ldy, float beta,
                ZrError *err) {
    const size_t rb = zr_cuw_main_row_bytes(w->type, w->n_in);
    ZrGemm g = {.trans_a = 1, .trans_b = 0, .n = (uint64_t)rows, .k = (uint64_t)w->n_in, .type_b = CUDA_R_16F,
                .b = f->xh, .ldb = w->n_in, .type_d = CUDA_R_32F, .ldd = ldy, .alpha = 1.0f, .beta = beta,
                .workspace = f->lt_ws, .workspace_bytes = ZR_CUF_LT_WS_BYTES};
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
        int rc = zr_k_dequant_f16(f->launcher, f->k, w, f->wbuf, r0, nr, err);
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
    return zr_k_convert(f->launcher, f->k, x, f->xh, n, rows, err);
}

/* True when no matrix of the group is F32 or taken by the small product for `rows` rows (both
 * read the F32 input): its GEMMs read only the F16 copy of the input, so the kernel before them
 * may write that copy directly (cu/prefill_f16.cu). */
static bool f16_input(const ZrCuForward *f, const ZrCuWeight *ws, int n, int rows) {
    for (int i = 0; i < n; i++)
        if (ws[i].type == ZR_TYPE_F32 || zr_cuf_mm_takes(f->k, &ws[i], rows)) return false;
    return true;
}

/* rows of x [rows][n_embd] RMS-normed with w into f->xn (F32), or straight into the F16 operand
 * f->xh when the group of matrices that reads it takes F16 only (f16 true). */
static int prefill_norm(ZrCuForward *f, CUdeviceptr w, int rows, bool f16, ZrError *err) {
    const float eps = f->m->hp.rms_eps;
    if (!f16) return zr_k_rmsnorm(f->launcher, f->k, f->x, f->n_embd, w, f->xn, f->n_embd, f->n_embd, eps, 1, rows, err);
    return zr_k_rmsnorm_f16(f->launcher, f->k, f->x, f->n_embd, w, f->xh, f->n_embd, f->n_embd, eps, rows, err);
}

/* the GEMMs of a group of matrices sharing the input x [rows][n_in]; in_xh: its F16 copy is
 * already in f->xh. A quantized matrix times a few rows reads its weights once from the F32 x
 * (cuda/mm_small.h) instead of going through F16. */
static int gemm_group(ZrCuForward *f, const ZrCuWeight *ws, int n, const int *off, int rows, CUdeviceptr x,
                      CUdeviceptr y, int ldy, float beta, bool in_xh, ZrError *err) {
    bool converted = in_xh;
    int rc;
    for (int i = 0; i < n; i++) {
        if (zr_cuf_mm_takes(f->k, &ws[i], rows)) {
            if ((rc = zr_cuf_mm_small(f->launcher, f->k, &ws[i], x, ws[i].n_in, fptr(y, off[i]), ldy, beta, rows, err)))
                return rc;
            continue;
        }
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
    if ((rc = zr_k_embed(f->launcher, f->k, &f->tok_embd, f->d_ptok, f->x, f->n_embd, f->n_vocab, n, hp->embd_scale, err)))
        return rc;
    const int zero = 0;
    for (int il = 0; il < hp->n_layer; il++) {
        const ZrCuLayer *G = &f->layers[il];
        const bool h_qkv = f16_input(f, G->qkv, G->n_qkv, n), h_gu = f16_input(f, G->gu, G->n_gu, n),
                   h_down = f16_input(f, &G->down, 1, n);
        if ((rc = prefill_norm(f, G->attn_norm, n, h_qkv, err))) return rc;
        if ((rc = gemm_group(f, G->qkv, G->n_qkv, G->qkv_off, n, f->xn, f->qkv, f->qkv_dim, 0.0f, h_qkv, err))) return rc;
        if (G->bias && (rc = zr_k_add_rows(f->launcher, f->k, f->qkv, f->qkv_dim, G->bias, f->qkv_dim, n, err)))
            return rc;
        if ((rc = zr_cuf_attn_prefill_layer(f, il, n, err))) return rc;
        if (G->post_attn_norm) { /* gemma: the output projection into xn, normed into the residual */
            if ((rc = gemm_group(f, &G->wo, 1, &zero, n, f->att, f->xn, f->n_embd, 0.0f, false, err))) return rc;
            if ((rc = post_norm_add(f, f->xn, G->post_attn_norm, n, err))) return rc;
        } else if ((rc = gemm_group(f, &G->wo, 1, &zero, n, f->att, f->x, f->n_embd, 1.0f, false, err))) {
            return rc;
        }
        if (f->m->layers[il].facts.n_expert) { /* the routed FFN, rows grouped by expert (cuda/moe.h) */
            if ((rc = zr_cuf_moe_prefill(f, il, n, G->ffn_norm, err))) return rc;
            continue;
        }
        if ((rc = prefill_norm(f, G->ffn_norm, n, h_gu, err))) return rc;
        if ((rc = gemm_group(f, G->gu, G->n_gu, G->gu_off, n, f->xn, f->gu, 2 * f->n_ff, 0.0f, h_gu, err))) return rc;
        /* SwiGLU (GeGLU: gemma) into ff (F32), or straight into down's F16 operand */
        if (f->m->layers[il].facts.act == ZR_ACT_GELU_TANH) {
            if ((rc = zr_k_geglu(f->launcher, f->k, h_down, f->gu, 2 * f->n_ff, h_down ? f->xh : f->ff, f->n_ff, n, err)))
                return rc;
        } else if ((rc = zr_k_swiglu(f->launcher, f->k, h_down, f->gu, 2 * f->n_ff, h_down ? f->xh : f->ff, f->n_ff, n,
                                     err))) {
            return rc;
        }
        if (G->post_ffn_norm) {
            if ((rc = gemm_group(f, &G->down, 1, &zero, n, f->ff, f->xn, f->n_embd, 0.0f, h_down, err))) return rc;
            if ((rc = post_norm_add(f, f->xn, G->post_ffn_norm, n, err))) return rc;
        } else if ((rc = gemm_group(f, &G->down, 1, &zero, n, f->ff, f->x, f->n_embd, 1.0f, h_down, err))) {
            return rc;
        }
    }
    if (logits && !all_logits) {
        /* the last row only: the decode step's F32 matrix-vector product */
        if ((rc = mv_norm(f, &f->output, fptr(f->x, (size_t)(n - 1) * f->n_embd), f->output_norm, f->logits, 0, err)))
            return rc;
        if (hp->final_softcap != 0.0f &&
            (rc = zr_k_softcap(f->launcher, f->k, f->logits, hp->final_softcap, f->n_vocab, err)))
            return rc;
        if ((rc = zr_cuda_d2h(f->cuda, logits, f->logits, sizeof(float) * f->n_vocab, err))) return rc;
    } else if (logits) {
        for (int r0 = 0; r0 < n; r0 += ZR_CUF_LOGIT_ROWS) {
            const int nr = n - r0 < ZR_CUF_LOGIT_ROWS ? n - r0 : ZR_CUF_LOGIT_ROWS;
            if ((rc = zr_k_rmsnorm(f->launcher, f->k, fptr(f->x, (size_t)r0 * f->n_embd), f->n_embd, f->output_norm,
                                   f->xn, f->n_embd, f->n_embd, f->m->hp.rms_eps, 1, nr, err)))
                return rc;
            if ((rc = gemm_group(f, &f->output, 1, &zero, nr, f->xn, f->logits, f->n_vocab, 0.0f, false, err))) return rc;
            if (hp->final_softcap != 0.0f &&
                (rc = zr_k_softcap(f->launcher, f->k, f->logits, hp->final_softcap, nr * f->n_vocab, err)))
                return rc;
            if ((rc = zr_cuda_d2h(f->cuda, logits + (size_t)r0 * f->n_vocab, f->logits,
                                  sizeof(float) * nr * f->n_vocab, err)))
                return rc;
            if ((rc = zr_cuda_sync(f->cuda, err))) return rc;
        }
    }
    return zr_cuda_sync(f->cuda, err);
}
