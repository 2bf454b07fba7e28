#include "cuda/klaunch.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "quant.h"

static unsigned cdiv(size_t a, size_t b) { return (unsigned)((a + b - 1) / b); }

/* cu/matvec.cuh's zr_matvec finds its split-K part by shifts, and a tall block its tiles: S must
 * be a power of two, and G too where the grid is tall */
static bool pow2(int v) { return v > 0 && (v & (v - 1)) == 0; }

/* The checks every decode product shares: ADDNORM comes with its post vectors (and only with them),
 * the mode's n_ss bits are still free, and the count of r's sum-of-squares pieces is sane */
static bool post_fits(int mode, const ZrMvPost *post) {
    return ((mode & 3) == ZR_CUF_MV_ADDNORM) == (post != NULL) && (mode >> ZR_CUF_MV_NSS_SHIFT) == 0 &&
           (!post || (post->n_ss >= 1 && post->n_ss <= (1 << 20)));
}

/* kern is prefix's kernel for W's type (its name: prefix, then the type's kernel suffix) */
static bool named_for(const ZrKernel *kern, const char *prefix, uint32_t type) {
    const char *suffix = zr_type_kernel_suffix(type);
    const size_t n = strlen(prefix);
    return suffix && strncmp(kern->name, prefix, n) == 0 && strcmp(kern->name + n, suffix) == 0;
}

/* kern is built for RMSNORM input alone (cu/matvec.cuh ZR_MATVEC_RN: a name ending in _tall_rn) */
static bool rmsnorm_only(const ZrKernel *kern) {
    const size_t n = strlen(kern->name), m = strlen("_tall_rn");
    return n >= m && strcmp(kern->name + n - m, "_tall_rn") == 0;
}

/* Launches a decode product (cu/matvec.cuh's ZR_MV_KPARAMS) on blocks x threads with smem bytes of
 * dynamic shared memory, the post's n_ss folded into the mode's high bits */
static int launch_product(ZrLauncher *l, const ZrKernel *kern, unsigned blocks, unsigned threads, unsigned smem,
                          const ZrCuWeight *w, CUdeviceptr x, CUdeviceptr y, CUdeviceptr add, CUdeviceptr norm_w,
                          float eps, int mode, int split, const ZrMvPost *post, ZrError *err) {
    const ZrMvPost none = {0}, *p = post ? post : &none;
    if (post) mode |= p->n_ss << ZR_CUF_MV_NSS_SHIFT;
    return ZR_LAUNCH(l, kern, ZR_DIM1(blocks), ZR_DIM1(threads), smem, err, (void *)&w->main, (void *)&w->side, &x, &y,
                     &add, &norm_w, &eps, (void *)&w->n_in, (void *)&w->n_out, &mode, &split, (void *)&p->r,
                     (void *)&p->post_w, (void *)&p->x_out);
}

int zr_k_matvec(ZrLauncher *l, const ZrKernel *kern, int rows_per_warp, const ZrCuWeight *w, CUdeviceptr x,
                CUdeviceptr y, CUdeviceptr add, CUdeviceptr norm_w, float eps, int mode, ZrMvShape shape,
                const ZrMvPost *post, ZrError *err) {
    const int R = rows_per_warp;
    if (shape.groups < 1 || (shape.blocks > 0 && !pow2(shape.groups)) || !pow2(shape.split) || shape.blocks < 0 ||
        shape.groups * shape.split * 32 > zr_cuf_kernel_max_threads(kern) || ((mode & ZR_CUF_MV_GLU) && (R % 2 || w->n_out % 2)) ||
        !post_fits(mode, post) || ((mode & ZR_CUF_MV_SSQ) && shape.blocks > 0) ||
        (rmsnorm_only(kern) && (mode & 3) != ZR_CUF_MV_RMSNORM))
        return zr_err(err, ZR_E_INTERNAL, "%s: no launch for %d x %d warps (%d rows each), mode %d", kern->name,
                      shape.groups, shape.split, R, mode);
    const unsigned smem = (unsigned)zr_cuf_mv_smem(w->n_in);
    return launch_product(l, kern, zr_cuf_mv_grid(w, mode, shape), (unsigned)(32 * shape.groups * shape.split),
                          smem > shape.smem ? smem : shape.smem, w, x, y, add, norm_w, eps, mode, shape.split, post, err);
}

int zr_k_matvec_mma(ZrLauncher *l, const ZrKernel *kern, const ZrCuWeight *w, CUdeviceptr x, CUdeviceptr y,
                    CUdeviceptr add, CUdeviceptr norm_w, float eps, int mode, unsigned blocks, const ZrMvPost *post,
                    ZrError *err) {
    if (w->type != ZR_TYPE_Q6_K || w->n_in % 256 || blocks < 1 || (mode & (ZR_CUF_MV_GLU | ZR_CUF_MV_SSQ)) ||
        (mode & 3) == ZR_CUF_MV_SWIGLU || !post_fits(mode, post))
        return zr_err(err, ZR_E_INTERNAL, "%s: no launch for %s [%d x %d] in mode %d", kern->name, zr_type_name(w->type),
                      w->n_out, w->n_in, mode);
    return launch_product(l, kern, blocks, ZR_CUF_MV_MMA_THREADS, (unsigned)zr_cuf_mv_mma_smem(w->n_in), w, x, y, add,
                          norm_w, eps, mode, 1, post, err);
}

/* A gate|up product kernel of its own (cu/matvec.cuh ZR_MV_GLU_KERNEL): kern is family's kernel
 * for W's type and the mode's input (matvec_glu_<family>_an_<type> for ADDNORM, else
 * matvec_glu_<family>_<type>; PLAIN only where plain_ok), on `blocks` blocks of `threads` */
static int launch_glu(ZrLauncher *l, const ZrKernel *kern, const char *family, bool plain_ok, unsigned threads,
                      const ZrCuWeight *w, CUdeviceptr x, CUdeviceptr y, CUdeviceptr norm_w, float eps, int mode,
                      unsigned blocks, const ZrMvPost *post, ZrError *err) {
    char prefix[32];
    snprintf(prefix, sizeof prefix, "matvec_glu_%s_%s", family, (mode & 3) == ZR_CUF_MV_ADDNORM ? "an_" : "");
    if (!named_for(kern, prefix, w->type) || (!plain_ok && (mode & 3) == ZR_CUF_MV_PLAIN) || !(mode & ZR_CUF_MV_GLU) ||
        w->n_out % 2 || blocks < 1 || (int)blocks > w->n_out / 2 || (mode & ZR_CUF_MV_SSQ) ||
        (mode & 3) == ZR_CUF_MV_SWIGLU || !post_fits(mode, post))
        return zr_err(err, ZR_E_INTERNAL, "%s: no launch for %s [%d x %d] in mode %d", kern->name, zr_type_name(w->type),
                      w->n_out, w->n_in, mode);
    return launch_product(l, kern, blocks, threads, (unsigned)zr_cuf_mv_smem(w->n_in), w, x, y, 0, norm_w, eps, mode, 1,
                          post, err);
}

int zr_k_matvec_glu_flat(ZrLauncher *l, const ZrKernel *kern, const ZrCuWeight *w, CUdeviceptr x, CUdeviceptr y,
                         CUdeviceptr norm_w, float eps, int mode, unsigned blocks, const ZrMvPost *post, ZrError *err) {
    return launch_glu(l, kern, "flat", false, ZR_CUF_MV_FLAT_THREADS, w, x, y, norm_w, eps, mode, blocks, post, err);
}

int zr_k_matvec_glu_bal(ZrLauncher *l, const ZrKernel *kern, const ZrCuWeight *w, CUdeviceptr x, CUdeviceptr y,
                        CUdeviceptr norm_w, float eps, int mode, unsigned blocks, const ZrMvPost *post, ZrError *err) {
    return launch_glu(l, kern, "bal", true, ZR_CUF_MV_BAL_THREADS, w, x, y, norm_w, eps, mode, blocks, post, err);
}

int zr_k_embed(ZrLauncher *l, const ZrCuKernels *k, const ZrCuWeight *w, CUdeviceptr tok, CUdeviceptr x, int n_embd,
               int n_vocab, int rows, float scale, ZrError *err) {
    return zr_k_embed_stamp(l, k, w, tok, x, n_embd, n_vocab, rows, scale, 0, 1, err);
}

int zr_k_embed_stamp(ZrLauncher *l, const ZrCuKernels *k, const ZrCuWeight *w, CUdeviceptr tok, CUdeviceptr x,
                     int n_embd, int n_vocab, int rows, float scale, CUdeviceptr t_begin0, int n_slots,
                     ZrError *err) {
    return ZR_LAUNCH(l, &k->embed[w->type], ZR_DIM3(cdiv(n_embd, 256), rows, 1), ZR_DIM1(256), 0, err,
                     (void *)&w->main, (void *)&w->side, &tok, &x, &n_embd, &n_vocab, &t_begin0, &n_slots, &scale);
}

int zr_k_dequant_f16(ZrLauncher *l, const ZrCuKernels *k, const ZrCuWeight *w, CUdeviceptr out, int row0, int n_rows,
                     ZrError *err) {
    const size_t threads = (size_t)n_rows * ((w->n_in + 7) / 8); /* 8 values each */
    return ZR_LAUNCH(l, &k->dq[w->type], ZR_DIM1(cdiv(threads, 256)), ZR_DIM1(256), 0, err, (void *)&w->main,
                     (void *)&w->side, &out, (void *)&w->n_in, (void *)&w->n_out, &row0, &n_rows);
}

int zr_k_matmul_small(ZrLauncher *l, const ZrKernel *kern, const ZrCuWeight *w, CUdeviceptr x, int ldx, CUdeviceptr y,
                      int ldy, float beta, int n, ZrMmShape s, size_t smem, ZrError *err) {
    if (n < 1 || n > ZR_CUF_MM_COLS || s.groups < 1 || s.split < 1 || s.groups * s.split > 16 || s.chunk < 1 ||
        s.chunk % ZR_CUF_MM_UNIT || ldx < w->n_in || (w->n_in % 4 == 0 && ldx % 4)) /* float4 rows: 16-byte strides */
        return zr_err(err, ZR_E_INTERNAL, "%s: no launch for %d rows, %d x %d warps, chunk %d", kern->name, n, s.groups,
                      s.split, s.chunk);
    const unsigned blocks = cdiv(cdiv((size_t)w->n_out, 2), (size_t)s.groups);
    return ZR_LAUNCH(l, kern, ZR_DIM1(blocks), ZR_DIM1(32 * s.groups * s.split), (unsigned)smem, err, (void *)&w->main,
                     (void *)&w->side, &x, &ldx, &y, &ldy, &beta, (void *)&w->n_in, (void *)&w->n_out, &n,
                     (void *)&s.split, (void *)&s.chunk);
}

int zr_k_rmsnorm(ZrLauncher *l, const ZrCuKernels *k, CUdeviceptr x, int xs, CUdeviceptr w, CUdeviceptr y, int ys,
                 int n, float eps, int pieces, int rows, ZrError *err) {
    return ZR_LAUNCH(l, &k->rmsnorm, ZR_DIM3(pieces, rows, 1), ZR_DIM1(256), 0, err, &x, &xs, &w, &y, &ys, &n, &eps);
}

int zr_k_rmsnorm_f16(ZrLauncher *l, const ZrCuKernels *k, CUdeviceptr x, int xs, CUdeviceptr w, CUdeviceptr y, int ys,
                     int n, float eps, int rows, ZrError *err) {
    return ZR_LAUNCH(l, &k->rmsnorm_f16, ZR_DIM3(1, rows, 1), ZR_DIM1(256), 0, err, &x, &xs, &w, &y, &ys, &n, &eps);
}

int zr_k_rope_kv(ZrLauncher *l, const ZrCuKernels *k, bool kv16, CUdeviceptr qkv, int qkv_stride, int n_head, int n_kv,
                 int head_dim, int rope_dim, int neox, CUdeviceptr freq, CUdeviceptr pos, CUdeviceptr kc,
                 CUdeviceptr vc, int rows, ZrError *err) {
    /* a thread per rotated pair of q and k, per K/V cache value, per unrotated k value */
    const size_t threads = (size_t)(n_head + n_kv) * (rope_dim / 2) + (size_t)n_kv * head_dim +
                           (size_t)n_kv * (head_dim - rope_dim);
    return ZR_LAUNCH(l, kv16 ? &k->rope_kv_h : &k->rope_kv, ZR_DIM3(cdiv(threads, 128), rows, 1), ZR_DIM1(128), 0, err, &qkv, &qkv_stride,
                     &n_head, &n_kv, &head_dim, &rope_dim, &neox, &freq, &pos, &kc, &vc);
}

int zr_k_attn_split(ZrLauncher *l, const ZrCuKernels *k, bool kv16, CUdeviceptr qkv, int qkv_stride, CUdeviceptr kc,
                    CUdeviceptr vc, CUdeviceptr part, CUdeviceptr pos, CUdeviceptr out, int out_stride, int n_head,
                    int n_kv, int head_dim, float scale, int window, float softcap, int chunk, int n_chunks, int rows,
                    ZrError *err) {
    /* q, a chunk of scores and the block's reduction scratch */
    const unsigned smem = (unsigned)((head_dim + chunk + 128) * sizeof(float));
    int rc = ZR_LAUNCH(l, kv16 ? &k->attn_part_h : &k->attn_part, ZR_DIM3(n_head, n_chunks, rows), ZR_DIM1(128), smem, err, &qkv, &qkv_stride,
                       &kc, &vc, &part, &pos, &n_head, &n_kv, &head_dim, &chunk, &n_chunks, (void *)&scale, &window,
                       (void *)&softcap);
    if (rc) return rc;
    return ZR_LAUNCH(l, &k->attn_combine, ZR_DIM3(n_head, rows, 1), ZR_DIM1(128), 0, err, &part, &out, &out_stride,
                     &pos, &n_head, &head_dim, &chunk, &n_chunks);
}

bool zr_cuf_attn_decode_fits(int n_head, int n_kv, int head_dim, int rope_dim, int chunk) {
    return n_kv > 0 && n_head % n_kv == 0 && head_dim % 4 == 0 && head_dim >= 4 && head_dim <= 256 &&
           rope_dim <= head_dim && rope_dim % 2 == 0 && chunk > 0;
}

bool zr_k_attn_decode_mma_fits(const ZrCuKernels *k, bool kv16, int n_head, int n_kv, int head_dim) {
    return kv16 && k->has_attn_decode_mma && (head_dim == 64 || head_dim == 128) && n_kv > 0 && n_head % n_kv == 0 &&
           n_head / n_kv <= 16;
}

/* attn_decode_mma_d<D>_kvh: grid (n_kv, split), its blocks cut the rows the query sees into tiles of 16
 * (cu/attention_decode_mma.cu); split stays within the partials' slots (n_chunks a head) and, on a local
 * layer, within the window's tiles */
static int attn_decode_mma(ZrLauncher *l, const ZrCuKernels *k, const ZrCuAttnDecode *a, ZrError *err) {
    if (!zr_k_attn_decode_mma_fits(k, a->kv16, a->n_head, a->n_kv, a->head_dim))
        return zr_err(err, ZR_E_INTERNAL, "attn_decode_mma: no kernel for %d/%d heads of %d%s", a->n_head, a->n_kv,
                      a->head_dim, a->kv16 ? "" : " (an F32 cache)");
    int split = a->n_split > 0 && a->n_split < a->n_chunks ? a->n_split : a->n_chunks;
    const int wt = (a->window + 15) / 16;
    if (a->window > 0 && wt < split) split = wt;
    const ZrKernel *kern = a->head_dim == 64 ? &k->attn_decode_mma64_h : &k->attn_decode_mma128_h;
    return ZR_LAUNCH(l, kern, ZR_DIM3(a->n_kv, split, 1), ZR_DIM1(128), ZR_K_ATTN_DECODE_MMA_SMEM(a->head_dim), err,
                     (void *)&a->qkv, (void *)&a->kc, (void *)&a->vc, (void *)&a->part, (void *)&a->count,
                     (void *)&a->out, (void *)&a->freq, (void *)&a->pos, (void *)&a->q_norm, (void *)&a->k_norm,
                     (void *)&a->n_head, (void *)&a->n_kv, (void *)&a->head_dim, (void *)&a->rope_dim,
                     (void *)&a->neox, (void *)&a->chunk, (void *)&split, (void *)&a->scale, (void *)&a->eps,
                     (void *)&a->window, (void *)&a->softcap);
}

int zr_k_attn_decode(ZrLauncher *l, const ZrCuKernels *k, const ZrCuAttnDecode *a, ZrError *err) {
    if (!zr_cuf_attn_decode_fits(a->n_head, a->n_kv, a->head_dim, a->rope_dim, a->chunk) || a->window < 0)
        return zr_err(err, ZR_E_INTERNAL, "attn_decode_f32: no kernel for %d/%d heads of %d (rope %d), chunks of %d",
                      a->n_head, a->n_kv, a->head_dim, a->rope_dim, a->chunk);
    if (a->mma) return attn_decode_mma(l, k, a, err);
    const int qg = a->qg > 1 ? a->qg : 1;
    if (!(qg == 1 || ((qg == 2 || qg == 4) && a->head_dim <= 128 && (!a->kv16 || a->head_dim % 8 == 0))) ||
        (a->n_head / a->n_kv) % qg)
        return zr_err(err, ZR_E_INTERNAL, "attn_decode_f32: no kernel for %d query heads a block (%d/%d heads of %d)", qg,
                      a->n_head, a->n_kv, a->head_dim);
    const ZrKernel *kern = a->head_dim > 128 ? (a->kv16 ? &k->attn_decode_d256_h : &k->attn_decode_d256)
                           : qg == 1         ? (a->kv16 ? &k->attn_decode_h : &k->attn_decode)
                           : qg == 2         ? (a->kv16 ? &k->attn_decode_g2_h : &k->attn_decode_g2)
                                             : (a->kv16 ? &k->attn_decode_g4_h : &k->attn_decode_g4);
    /* a window's rows touch at most ceil(window / chunk) + 1 chunks: a local layer launches at
     * most that many blocks per head (or group), whatever the context's length */
    int split = a->n_split > 0 && a->n_split < a->n_chunks ? a->n_split : a->n_chunks;
    const int wc = (a->window + a->chunk - 1) / a->chunk + 1;
    if (a->window > 0 && wc < split) split = wc;
    return ZR_LAUNCH(l, kern, ZR_DIM3(a->n_head / qg, split, 1), ZR_DIM1(512), 0, err, (void *)&a->qkv,
                     (void *)&a->kc, (void *)&a->vc, (void *)&a->part, (void *)&a->count, (void *)&a->out,
                     (void *)&a->freq, (void *)&a->pos, (void *)&a->q_norm, (void *)&a->k_norm, (void *)&a->n_head,
                     (void *)&a->n_kv, (void *)&a->head_dim, (void *)&a->rope_dim, (void *)&a->neox, (void *)&a->chunk,
                     (void *)&split, (void *)&a->scale, (void *)&a->eps, (void *)&a->window,
                     (void *)&a->softcap);
}

bool zr_k_attn_prefill_fits(const ZrCuKernels *k, int head_dim, int window, float softcap) {
    if (head_dim == 64 || head_dim == 96) return window <= 0 && softcap <= 0.0f; /* the plain kernels only */
    return head_dim == 128 || (head_dim == 256 && k->has_attn_prefill_d256);
}

int zr_k_attn_prefill(ZrLauncher *l, const ZrCuKernels *k, bool kv16, CUdeviceptr qkv, int qkv_stride, CUdeviceptr kc,
                      CUdeviceptr vc, CUdeviceptr out, int out_stride, CUdeviceptr pos, int n_head, int n_kv,
                      int head_dim, float scale, int window, float softcap, int rows, ZrError *err) {
    if (!zr_k_attn_prefill_fits(k, head_dim, window, softcap))
        return zr_err(err, ZR_E_INTERNAL, "attn_prefill_f16: no kernel for heads of %d (window %d, cap %g)", head_dim,
                      window, (double)softcap);
    /* the plain kernels take neither a window nor a cap (their registers: 3 blocks an SM) */
    const bool swa = window > 0 || softcap > 0.0f;
    const ZrKernel *kern = head_dim == 64    ? (kv16 ? &k->attn_prefill_d64_h : &k->attn_prefill_d64)
                           : head_dim == 96  ? (kv16 ? &k->attn_prefill_d96_h : &k->attn_prefill_d96)
                           : head_dim == 256 ? (kv16 ? &k->attn_prefill_d256_h : &k->attn_prefill_d256)
                           : swa             ? (kv16 ? &k->attn_prefill_d128_swa_h : &k->attn_prefill_d128_swa)
                                             : (kv16 ? &k->attn_prefill_d128_h : &k->attn_prefill_d128);
    /* softmax in base 2: log2(e) goes into Q's scale, or with a cap into the cap (Q then takes
     * scale / cap: the kernel's scores are cap log2(e) tanh(q.k scale / cap)) */
    const double log2e = 1.4426950408889634;
    const float q_scale = (float)(softcap > 0.0f ? (double)scale / softcap : log2e * scale);
    const float cap_log2 = (float)(softcap > 0.0f ? log2e * softcap : 0.0);
    const unsigned smem = head_dim == 256 ? ZR_K_ATTN_PREFILL_D256_SMEM : 0;
    return ZR_LAUNCH(l, kern, ZR_DIM3(n_head, cdiv(rows, 64), 1), ZR_DIM1(128), smem, err, &qkv, &qkv_stride, &kc,
                     &vc, &out, &out_stride, &pos, &rows, &n_head, &n_kv, (void *)&q_scale, &window, (void *)&cap_log2);
}

int zr_k_swiglu(ZrLauncher *l, const ZrCuKernels *k, bool f16, CUdeviceptr gu, int stride, CUdeviceptr out, int n_ff,
                int rows, ZrError *err) {
    return ZR_LAUNCH(l, f16 ? &k->swiglu_f16 : &k->swiglu, ZR_DIM3(cdiv(n_ff, 256), rows, 1), ZR_DIM1(256), 0, err,
                     &gu, &stride, &out, &n_ff);
}

int zr_k_add_rows(ZrLauncher *l, const ZrCuKernels *k, CUdeviceptr y, int stride, CUdeviceptr b, int n, int rows,
                  ZrError *err) {
    return ZR_LAUNCH(l, &k->add_rows, ZR_DIM3(cdiv(n, 256), rows, 1), ZR_DIM1(256), 0, err, &y, &stride, &b, &n);
}

int zr_k_convert(ZrLauncher *l, const ZrCuKernels *k, CUdeviceptr x, CUdeviceptr y, int n, int rows, ZrError *err) {
    return ZR_LAUNCH(l, &k->convert, ZR_DIM3(cdiv(n, 256), rows, 1), ZR_DIM1(256), 0, err, &x, &n, &y, &n, &n);
}

int zr_k_softcap(ZrLauncher *l, const ZrCuKernels *k, CUdeviceptr x, float cap, int n, ZrError *err) {
    return ZR_LAUNCH(l, &k->softcap, ZR_DIM1(cdiv(n, 256)), ZR_DIM1(256), 0, err, &x, &cap, &n);
}

int zr_k_geglu(ZrLauncher *l, const ZrCuKernels *k, bool f16, CUdeviceptr gu, int stride, CUdeviceptr out, int n_ff,
               int rows, ZrError *err) {
    return ZR_LAUNCH(l, f16 ? &k->geglu_f16 : &k->geglu, ZR_DIM3(cdiv(n_ff, 256), rows, 1), ZR_DIM1(256), 0, err,
                     &gu, &stride, &out, &n_ff);
}

int zr_k_rmsnorm_add(ZrLauncher *l, const ZrCuKernels *k, CUdeviceptr x, CUdeviceptr w, CUdeviceptr y, int n, float eps,
                     int rows, ZrError *err) {
    return ZR_LAUNCH(l, &k->rmsnorm_add, ZR_DIM3(1, rows, 1), ZR_DIM1(256), 0, err, &x, &w, &y, &n, &eps);
}

int zr_k_rope_scale(ZrLauncher *l, const ZrCuKernels *k, bool kv16, CUdeviceptr qkv, int qkv_stride, int n_head, int n_kv,
                    int head_dim, int rope_dim, float factor, CUdeviceptr pos, CUdeviceptr kc, int rows, ZrError *err) {
    const size_t threads = (size_t)(n_head + n_kv) * rope_dim;
    return ZR_LAUNCH(l, kv16 ? &k->rope_scale_h : &k->rope_scale, ZR_DIM3(cdiv(threads, 128), rows, 1), ZR_DIM1(128), 0, err, &qkv, &qkv_stride,
                     &n_head, &n_kv, &head_dim, &rope_dim, &factor, &pos, &kc);
}

unsigned zr_k_matvec_id_blocks(int rows_per_warp, int n_rows, int mode, ZrMvShape shape) {
    const int per_warp = mode & ZR_CUF_MV_GLU ? rows_per_warp / 2 : rows_per_warp;
    const int results = mode & ZR_CUF_MV_GLU ? n_rows / 2 : n_rows;
    return (unsigned)cdiv(cdiv((size_t)results, (size_t)per_warp), (size_t)shape.groups);
}

int zr_k_matvec_id(ZrLauncher *l, const ZrKernel *kern, int rows_per_warp, const ZrCuWeight *w, int n_rows, CUdeviceptr ids,
                   int n_used, CUdeviceptr x, int x_stride, CUdeviceptr y, int y_stride, CUdeviceptr norm_w, float eps,
                   int mode, ZrMvShape shape, const ZrMvIdFuse *fuse, ZrError *err) {
    const int R = rows_per_warp;
    if (!pow2(shape.groups) || !pow2(shape.split) || shape.groups * shape.split * 32 > zr_cuf_kernel_max_threads(kern) || n_rows < 1 ||
        w->n_out % n_rows || n_used < 1 || ((mode & ZR_CUF_MV_GLU) && (R % 2 || n_rows % 2)))
        return zr_err(err, ZR_E_INTERNAL, "%s: no launch for %d x %d warps (%d rows each), %d of %d rows per expert, mode %d",
                      kern->name, shape.groups, shape.split, R, n_rows, w->n_out, mode);
    const ZrMvIdFuse none = {0};
    if (!fuse) fuse = &none;
    if (fuse->logits && (n_used > 32 || fuse->n_expert < n_used || fuse->n_expert > 256 || !fuse->weights))
        return zr_err(err, ZR_E_INTERNAL, "%s: no fused routing of %d of %d experts (at most 32 of 256)", kern->name, n_used, fuse->n_expert);
    if (fuse->mix_x && ((mode & ZR_CUF_MV_GLU) || !fuse->weights || !fuse->done || fuse->logits))
        return zr_err(err, ZR_E_INTERNAL, "%s: a fused mix needs plain rows, weights, counts and no routing", kern->name);
    const unsigned blocks = zr_k_matvec_id_blocks(R, n_rows, mode, shape);
    return ZR_LAUNCH(l, kern, ZR_DIM3(blocks, (unsigned)n_used, 1), ZR_DIM1(32 * shape.groups * shape.split),
                     (unsigned)zr_cuf_mv_smem(w->n_in), err, (void *)&w->main, (void *)&w->side, &x, &x_stride, &y, &y_stride,
                     &norm_w, &eps, (void *)&w->n_in, &n_rows, &mode, (void *)&shape.split, &ids, (void *)&w->n_out,
                     (void *)&fuse->logits, (void *)&fuse->n_expert, (void *)&fuse->weights, (void *)&fuse->mix_x,
                     (void *)&fuse->done);
}

unsigned zr_k_matvec_id_flat_tiles(int rows_per_warp, int n_rows, int n_used, ZrMvShape shape) {
    /* cu/matvec.cuh's tiles of the GLU matrix of n_used n_rows rows: G row groups of R/2 results */
    const size_t results = (size_t)n_used * (size_t)(n_rows / 2);
    return cdiv(cdiv(results, (size_t)(rows_per_warp / 2)), (size_t)shape.groups);
}

int zr_k_matvec_id_flat(ZrLauncher *l, const ZrKernel *kern, int rows_per_warp, const ZrCuWeight *w, int n_rows, CUdeviceptr ids,
                        int n_used, CUdeviceptr x, CUdeviceptr y, CUdeviceptr norm_w, float eps, int mode, ZrMvShape shape,
                        unsigned blocks, const ZrMvIdFuse *fuse, ZrError *err) {
    const int R = rows_per_warp;
    if (!pow2(shape.groups) || !pow2(shape.split) || shape.groups * shape.split * 32 > ZR_CUF_MV_MAX_THREADS || n_rows < 2 || n_rows % 2 ||
        w->n_out % n_rows || R % 2 || !(mode & ZR_CUF_MV_GLU) || n_used < 1 || n_used > 32 || blocks < 1 ||
        blocks > zr_k_matvec_id_flat_tiles(R, n_rows, n_used, shape))
        return zr_err(err, ZR_E_INTERNAL, "%s: no flat launch of %u blocks for %d x %d warps (%d rows each), %d slots of %d of %d rows, mode %d",
                      kern->name, blocks, shape.groups, shape.split, R, n_used, n_rows, w->n_out, mode);
    const ZrMvIdFuse none = {0};
    if (!fuse) fuse = &none;
    if (fuse->mix_x || (fuse->logits && (fuse->n_expert < n_used || fuse->n_expert > 256 || !fuse->weights)))
        return zr_err(err, ZR_E_INTERNAL, "%s: no mix, and fused routing of %d of %d experts (at most 32 of 256)", kern->name, n_used,
                      fuse->n_expert);
    return ZR_LAUNCH(l, kern, ZR_DIM1(blocks), ZR_DIM1(32 * shape.groups * shape.split), (unsigned)zr_cuf_mv_smem(w->n_in), err,
                     (void *)&w->main, (void *)&w->side, &x, &y, &norm_w, &eps, (void *)&w->n_in, &n_rows, &mode, (void *)&shape.split,
                     &ids, &n_used, (void *)&w->n_out, (void *)&fuse->logits, (void *)&fuse->n_expert, (void *)&fuse->weights);
}

/* matvec_id_mix's block: 16 warps, one output row each (at its 128-register cap, one block an SM,
 * so each multiprocessor stages the slots' x once, not twice as on two blocks of 8 warps: H200
 * tg128, Qwen3-30B-A3B Q4_K_M +0.8%, Q8_0 +1.2%, cu/PERF.md session 41); 8 where the kernel as the
 * driver loaded it holds fewer than 512 threads */
static int mv_id_mix_warps(const ZrKernel *kern) { return zr_cuf_kernel_max_threads(kern) >= 512 ? 16 : 8; }

bool zr_k_matvec_id_mix_fits(const ZrCuWeight *w, int n_used) {
    /* every slot's x staged at once within the default 48 KiB (less the kernel's static 256 B),
     * each slot's copy starting on a pad boundary (n_in % 32), at most 32 slots; rows of no
     * values would never end the kernel's walk over the (slot, item) pairs */
    return n_used >= 1 && n_used <= 32 && w->n_in > 0 && w->n_in % 32 == 0 && zr_cuf_mv_smem(n_used * w->n_in) + 1024 <= 48 * 1024;
}

int zr_k_matvec_id_mix(ZrLauncher *l, const ZrKernel *kern, const ZrCuWeight *w, int n_rows, CUdeviceptr ids, int n_used,
                       CUdeviceptr x, CUdeviceptr weights, CUdeviceptr mix_x, ZrError *err) {
    if (!zr_k_matvec_id_mix_fits(w, n_used) || n_rows < 1 || w->n_out % n_rows)
        return zr_err(err, ZR_E_INTERNAL, "%s: no launch for %d slots of %d rows of %d values (%d rows in all)", kern->name, n_used,
                      n_rows, w->n_in, w->n_out);
    const int warps = mv_id_mix_warps(kern);
    return ZR_LAUNCH(l, kern, ZR_DIM1((unsigned)cdiv((size_t)n_rows, (size_t)warps)), ZR_DIM1(32 * (unsigned)warps),
                     (unsigned)zr_cuf_mv_smem(n_used * w->n_in), err, (void *)&w->main, (void *)&w->side, &x, (void *)&w->n_in,
                     &n_rows, &ids, &n_used, (void *)&w->n_out, &weights, &mix_x);
}

int zr_k_moe_route(ZrLauncher *l, const ZrCuKernels *k, CUdeviceptr logits, int n_expert, int n_used, CUdeviceptr ids,
                   CUdeviceptr weights, int rows, ZrError *err) {
    return ZR_LAUNCH(l, &k->moe_route, ZR_DIM1((unsigned)rows), ZR_DIM1(32), 0, err, &logits, &n_expert, &n_used, &ids, &weights);
}

int zr_k_moe_combine(ZrLauncher *l, const ZrCuKernels *k, CUdeviceptr out, CUdeviceptr weights, int n_used, CUdeviceptr x,
                     int n, int rows, ZrError *err) {
    return ZR_LAUNCH(l, &k->moe_combine, ZR_DIM3(cdiv((size_t)n, 256), (unsigned)rows, 1), ZR_DIM1(256), 0, err, &out, &weights,
                     &n_used, &x, &n);
}

int zr_k_moe_gather(ZrLauncher *l, const ZrCuKernels *k, CUdeviceptr x, CUdeviceptr idx, CUdeviceptr out, int n, int rows,
                    ZrError *err) {
    return ZR_LAUNCH(l, &k->moe_gather, ZR_DIM3(cdiv((size_t)n, 256), (unsigned)rows, 1), ZR_DIM1(256), 0, err, &x, &idx, &out, &n);
}

int zr_k_moe_scatter(ZrLauncher *l, const ZrCuKernels *k, CUdeviceptr src, CUdeviceptr slot, CUdeviceptr out, int n, int rows,
                     ZrError *err) {
    return ZR_LAUNCH(l, &k->moe_scatter, ZR_DIM3(cdiv((size_t)n, 256), (unsigned)rows, 1), ZR_DIM1(256), 0, err, &src, &slot, &out,
                     &n);
}

int zr_k_moe_group(ZrLauncher *l, const ZrCuKernels *k, CUdeviceptr ids, int nk, int n_used, int n_expert, int bn, CUdeviceptr idx,
                   CUdeviceptr slot, CUdeviceptr tiles, int tiles_max, ZrError *err) {
    if (n_expert < 1 || n_expert > 1024 || n_used < 1 || bn < 1 || nk < 1 || tiles_max < nk / bn + n_expert)
        return zr_err(err, ZR_E_INTERNAL, "moe_group: no launch for %d slots of %d experts, tiles of %d (at most %d)", nk, n_expert, bn,
                      tiles_max);
    return ZR_LAUNCH(l, &k->moe_group, ZR_DIM1(1), ZR_DIM1(1024), 0, err, &ids, &nk, &n_used, &n_expert, &bn, &idx, &slot, &tiles,
                     &tiles_max);
}

int zr_k_moe_mm(ZrLauncher *l, const ZrCuKernels *k, int bn, const ZrCuWeight *w, int rpe, CUdeviceptr x, int ldx,
                CUdeviceptr xidx, CUdeviceptr y, int ldy, CUdeviceptr yidx, CUdeviceptr tiles, int n_tiles, ZrError *err) {
    const bool has = bn == 64 ? k->has_moe_mm64[w->type] : bn == 32 && k->has_moe_mm[w->type];
    if (!has || w->n_in % 64 || ldx % 8 || rpe < 1 || n_tiles < 1)
        return zr_err(err, ZR_E_INTERNAL, "moe_mm: no launch for %s, %d tokens a tile, rows of %d values (x stride %d), %d tiles",
                      zr_type_name(w->type), bn, w->n_in, ldx, n_tiles);
    const ZrKernel *kern = bn == 64 ? &k->moe_mm64[w->type] : &k->moe_mm[w->type];
    return ZR_LAUNCH(l, kern, ZR_DIM3((unsigned)n_tiles, cdiv((size_t)rpe, ZR_CUF_MOE_MM_ROWS), 1), ZR_DIM1(256),
                     ZR_CUF_MOE_MM_SMEM(bn), err, (void *)&w->main, (void *)&w->side, &x, &ldx, &xidx, &y, &ldy, &yidx, &tiles,
                     (void *)&w->n_in, (void *)&w->n_out, &rpe);
}

int zr_k_matvec_mix(ZrLauncher *l, const ZrCuKernels *k, const ZrMvMix *mix, const ZrCuWeight *ws, const int *off,
                    CUdeviceptr x, CUdeviceptr y, CUdeviceptr add, CUdeviceptr norm_w, float eps, int mode,
                    const ZrMvPost *post, ZrError *err) {
    const ZrMvPost none = {0}, *p = post ? post : &none;
    if (mix->kernel < 0 || mix->kernel >= ZR_KMIX_COUNT || !k->has_mv_mix[mix->kernel] || mix->n_parts < 1 ||
        mix->n_parts > ZR_CUF_MV_MIX_PARTS || mix->threads < 32 || !pow2(mix->threads) || mix->threads > ZR_CUF_MV_MAX_THREADS ||
        (((mode & 3) == ZR_CUF_MV_ADDNORM) != (post != NULL)) || (mode & ZR_CUF_MV_SSQ) ||
        (mode >> ZR_CUF_MV_NSS_SHIFT) != 0 || (post && (p->n_ss < 1 || p->n_ss > (1 << 20))))
        return zr_err(err, ZR_E_INTERNAL, "matvec_mix: no launch for %d parts of %d threads, mode %d", mix->n_parts,
                      mix->threads, mode);
    if (post) mode |= p->n_ss << ZR_CUF_MV_NSS_SHIFT; /* the count of r's sum-of-squares pieces */
    /* per part: w, ws, y, add, n_out, split, tiles; the unused parts' are zeros (no block runs them) */
    CUdeviceptr pw[ZR_CUF_MV_MIX_PARTS] = {0}, pws[ZR_CUF_MV_MIX_PARTS] = {0}, py[ZR_CUF_MV_MIX_PARTS] = {0},
                padd[ZR_CUF_MV_MIX_PARTS] = {0};
    int n_out[ZR_CUF_MV_MIX_PARTS] = {0}, split[ZR_CUF_MV_MIX_PARTS] = {1, 1, 1}, tiles[ZR_CUF_MV_MIX_PARTS] = {0};
    unsigned grid = 0;
    for (int i = 0; i < mix->n_parts; i++) {
        if (ws[i].n_in != ws[0].n_in || !pow2(mix->split[i]) || mix->threads % (32 * mix->split[i]) || mix->tiles[i] < 1)
            return zr_err(err, ZR_E_INTERNAL, "%s: part %d does not fit the launch", k->mv_mix[mix->kernel].name, i);
        pw[i] = ws[i].main;
        pws[i] = ws[i].side;
        py[i] = y + (size_t)off[i] * sizeof(float);
        padd[i] = add ? add + (size_t)off[i] * sizeof(float) : 0;
        n_out[i] = ws[i].n_out;
        split[i] = mix->split[i];
        tiles[i] = mix->tiles[i];
        grid += (unsigned)tiles[i]; /* every part's tiles, one after another (cu/matvec_mix.cu) */
    }
    int b_mask = (int)mix->b_mask, n_in = ws[0].n_in;
    return ZR_LAUNCH(l, &k->mv_mix[mix->kernel], ZR_DIM1(grid), ZR_DIM1(mix->threads),
                     (unsigned)zr_cuf_mv_smem(n_in), err, &pw[0], &pws[0], &py[0], &padd[0], &n_out[0], &split[0],
                     &tiles[0], &pw[1], &pws[1], &py[1], &padd[1], &n_out[1], &split[1], &tiles[1], &pw[2], &pws[2],
                     &py[2], &padd[2], &n_out[2], &split[2], &tiles[2], &x, &norm_w, &eps, &n_in, &mode,
                     (void *)&p->r, (void *)&p->post_w, (void *)&p->x_out, &b_mask);
}
