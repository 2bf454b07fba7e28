/* Typed launch wrappers: one function per kernel of cu/kernels.def that the forward pass
 * launches, taking the kernel's parameters as C values and its launch shape from its sizes. The
 * only place that knows each kernel's grid, block, shared memory and parameter order (the
 * kernels' files document the same), so the forward pass reads as what it computes. Every
 * wrapper launches through the launcher (recorded for the decode graph) and checks the launch.
 * Pointers are device addresses; [rows][n] buffers are row-major with the given row strides. */
#pragma once
#include <stdbool.h>

#include "cuda/kreg.h"
#include "cuda/launch.h"
#include "cuda/mm_small.h"
#include "cuda/mv_shape.h"
#include "cuda/weights.h"

/* matvec_<type>: y[n_out] = W x' (+ add) with shape (mv_shape.h has the modes; post: ADDNORM's
 * vectors, or NULL); checks the shape; with shape.blocks > 0 kern must be matvec_<type>_tall */
int zr_k_matvec(ZrLauncher *l, const ZrKernel *kern, int rows_per_warp, const ZrCuWeight *w, CUdeviceptr x,
                CUdeviceptr y, CUdeviceptr add, CUdeviceptr norm_w, float eps, int mode, ZrMvShape shape,
                const ZrMvPost *post, ZrError *err);
/* matvec_q6_k_mma: the same product of a Q6_K W on the tensor cores (cu/matvec_mma.cu), on
 * `blocks` blocks of 512 threads (at most a wave: each loops over tiles of 16 rows a warp) */
int zr_k_matvec_mma(ZrLauncher *l, const ZrKernel *kern, const ZrCuWeight *w, CUdeviceptr x, CUdeviceptr y,
                    CUdeviceptr add, CUdeviceptr norm_w, float eps, int mode, unsigned blocks, const ZrMvPost *post,
                    ZrError *err);
/* matvec_glu_flat_q4_k: the gate|up product (mode GLU) of a Q4_K W, each warp a flat run of
 * (result, item) pairs (cu/matvec_glu_flat.cu), on `blocks` blocks of 512 threads (one wave);
 * matvec_glu_flat_an_q4_k for ADDNORM input, the other for RMSNORM (each refused for any other) */
int zr_k_matvec_glu_flat(ZrLauncher *l, const ZrKernel *kern, const ZrCuWeight *w, CUdeviceptr x, CUdeviceptr y,
                         CUdeviceptr norm_w, float eps, int mode, unsigned blocks, const ZrMvPost *post, ZrError *err);
/* matvec_glu_bal_<type>: the gate|up product (mode GLU) of W of a type that has one, each block's
 * results in whole rounds of one a warp and a remainder cut into steps (cu/matvec_glu_bal.cu), on
 * `blocks` blocks of 512 threads (one wave); matvec_glu_bal_an_<type> for ADDNORM input, as above */
int zr_k_matvec_glu_bal(ZrLauncher *l, const ZrKernel *kern, const ZrCuWeight *w, CUdeviceptr x, CUdeviceptr y,
                        CUdeviceptr norm_w, float eps, int mode, unsigned blocks, const ZrMvPost *post, ZrError *err);
/* embed_<type>: x[rows][n_embd] = rows tok[0..rows) of W (w: [n_embd, n_vocab]) * scale */
int zr_k_embed(ZrLauncher *l, const ZrCuKernels *k, const ZrCuWeight *w, CUdeviceptr tok, CUdeviceptr x, int n_embd,
               int n_vocab, int rows, float scale, ZrError *err);
/* The same, and the decode step's start time: t_begin0 (not 0) is &ring[0].t_begin of the decode
 * records (cuda/sample.h); thread 0 writes %globaltimer into the record of position tok[1]. */
int zr_k_embed_stamp(ZrLauncher *l, const ZrCuKernels *k, const ZrCuWeight *w, CUdeviceptr tok, CUdeviceptr x,
                     int n_embd, int n_vocab, int rows, float scale, CUdeviceptr t_begin0, int n_slots,
                     ZrError *err);
/* dequant_<type>_f16: out f16 [n_rows][n_in] = rows row0.. of W */
int zr_k_dequant_f16(ZrLauncher *l, const ZrCuKernels *k, const ZrCuWeight *w, CUdeviceptr out, int row0, int n_rows,
                     ZrError *err);
/* matmul_small_<type>: y[n][ldy] (+ beta y) = x[n][ldx] W^T for n <= ZR_CUF_MM_COLS rows, with
 * shape s and its shared memory smem (zr_cuf_mm_smem); checks the shape, and that rows of a
 * multiple of 4 values come at 16-byte strides (the K-quants' staged sums need the float4 path) */
int zr_k_matmul_small(ZrLauncher *l, const ZrKernel *kern, const ZrCuWeight *w, CUdeviceptr x, int ldx, CUdeviceptr y,
                      int ldy, float beta, int n, ZrMmShape s, size_t smem, ZrError *err);
/* rmsnorm_f32: rows x `pieces` norms of n values: y[r][p n..] = RMSNorm(x[r][p n..]) * w */
int zr_k_rmsnorm(ZrLauncher *l, const ZrCuKernels *k, CUdeviceptr x, int xs, CUdeviceptr w, CUdeviceptr y, int ys,
                 int n, float eps, int pieces, int rows, ZrError *err);
/* rmsnorm_f32_f16: the same, one norm per row, into F16 y */
int zr_k_rmsnorm_f16(ZrLauncher *l, const ZrCuKernels *k, CUdeviceptr x, int xs, CUdeviceptr w, CUdeviceptr y, int ys,
                     int n, float eps, int rows, ZrError *err);
/* Every function below that takes the caches kc, vc takes kv16 too: they hold halves (the
 * kernels' _kvh twins, cu/kv.cuh), else floats. */
/* rope_kv_f32: rope of q and k in rows of qkv [rows][qkv_stride] at positions pos[0].., and the
 * K/V rows into the layer's caches kc, vc [n_ctx][n_kv head_dim] */
int zr_k_rope_kv(ZrLauncher *l, const ZrCuKernels *k, bool kv16, CUdeviceptr qkv, int qkv_stride, int n_head, int n_kv,
                 int head_dim, int rope_dim, int neox, CUdeviceptr freq, CUdeviceptr pos, CUdeviceptr kc,
                 CUdeviceptr vc, int rows, ZrError *err);
/* attn_part_f32 + attn_combine_f32: causal attention of rows queries (q in rows of qkv) over the
 * caches, in n_chunks chunks of `chunk` rows (partials in part: rows x n_head x n_chunks x
 * (head_dim + 2) floats), merged into out [rows][out_stride]; scores scaled by `scale` (the
 * model's attn_scale); keys restricted to the last `window` positions of each query (0: all);
 * scores soft-capped as tanh(s / softcap) * softcap (0: not) */
int zr_k_attn_split(ZrLauncher *l, const ZrCuKernels *k, bool kv16, CUdeviceptr qkv, int qkv_stride, CUdeviceptr kc,
                    CUdeviceptr vc, CUdeviceptr part, CUdeviceptr pos, CUdeviceptr out, int out_stride, int n_head,
                    int n_kv, int head_dim, float scale, int window, float softcap, int chunk, int n_chunks, int rows,
                    ZrError *err);

/* The decode attention of one layer in one launch (cu/attention_decode.cu): the q/k head norms,
 * rope of q and k, the KV-cache write of row pos[0], attention over rows 0..pos[0] (or the last
 * `window` of them) in chunks of `chunk` (of n_chunks), and the merge; n_split blocks a head
 * (0: one a chunk; at most n_chunks, and with a window at most the ceil(window / chunk) + 1
 * chunks it touches), each taking every n_split-th live chunk. qkv: the decode row
 * [n_head*head_dim | kv_dim | kv_dim] before the norms and rope (read only); kc, vc: the layer's
 * caches [n_ctx][kv_dim]; part: n_head * n_chunks * (head_dim + 2) floats; count: i32 [n_head],
 * zero (and left zero); out: [n_head*head_dim]; freq: f64 [rope_dim/2] (rope.cu); pos: i32 [1];
 * q_norm, k_norm: [head_dim] RMSNorm weights of each q / k head with eps (0: none); scale: the
 * scores' scale (attn_scale); window: the last `window` positions (0: all); softcap: scores
 * soft-capped as tanh(s / softcap) * softcap (0: not). With qg > 1, n_split counts the blocks of
 * a group of qg query heads. Zeroed new fields keep llama's kernel. */
typedef struct ZrCuAttnDecode {
    CUdeviceptr qkv, kc, vc, part, count, out, freq, pos, q_norm, k_norm;
    int n_head, n_kv, head_dim, rope_dim, neox, chunk, n_chunks, n_split, window;
    float scale, eps, softcap;
    int qg; /* query heads of one KV head a block: 1 (or 0), 2 or 4 (heads of up to 128, with kv16 a multiple of
             * 8; dividing n_head / n_kv) */
    bool kv16; /* the caches hold halves */
    bool mma;  /* the tensor-core kernel: a block per KV head, qg unused (kv16, heads of 64 or 128, at most 16 query
                * heads a KV head: zr_k_attn_decode_mma_fits) */
} ZrCuAttnDecode;
/* Whether attn_decode_f32(_d256) handles this shape (n_head a multiple of n_kv, head_dim % 4 == 0
 * and <= 256, any chunk); else the decode uses rope_kv_f32, attn_part_f32 and attn_combine_f32. */
bool zr_cuf_attn_decode_fits(int n_head, int n_kv, int head_dim, int rope_dim, int chunk);
/* Whether attn_decode_mma_d<D>_kvh takes these heads: an F16 cache, heads of 64 or 128 values, at most 16
 * query heads a KV head, and a GPU that allows its shared memory. */
bool zr_k_attn_decode_mma_fits(const ZrCuKernels *k, bool kv16, int n_head, int n_kv, int head_dim);
int zr_k_attn_decode(ZrLauncher *l, const ZrCuKernels *k, const ZrCuAttnDecode *a, ZrError *err);

/* attn_prefill_f16_d64 / _d96 / _d128 / _d128_swa / _d256: the tiled causal attention of rows
 * queries at positions pos[0].. (the K/V rows already in the caches), scores q.k scale, or with
 * softcap > 0 softcap tanh(q.k scale / softcap); window > 0: query p sees keys p + 1 - window .. p.
 * Only for head_dim 64, 96 (Phi-3) and 128, and 256 (gemma) where the GPU allows the kernel's
 * shared memory; a window or a cap only on heads of 128 and 256 (zr_k_attn_prefill_fits). */
bool zr_k_attn_prefill_fits(const ZrCuKernels *k, int head_dim, int window, float softcap);
int zr_k_attn_prefill(ZrLauncher *l, const ZrCuKernels *k, bool kv16, CUdeviceptr qkv, int qkv_stride, CUdeviceptr kc,
                      CUdeviceptr vc, CUdeviceptr out, int out_stride, CUdeviceptr pos, int n_head, int n_kv,
                      int head_dim, float scale, int window, float softcap, int rows, ZrError *err);
/* swiglu_f32 (f16 false) / swiglu_f32_f16: out[rows][n_ff] = silu(gate) * up of gu [rows][stride] */
int zr_k_swiglu(ZrLauncher *l, const ZrCuKernels *k, bool f16, CUdeviceptr gu, int stride, CUdeviceptr out, int n_ff,
                int rows, ZrError *err);
/* add_rows_f32: y[r][0..n) += b for rows rows of stride `stride` */
int zr_k_add_rows(ZrLauncher *l, const ZrCuKernels *k, CUdeviceptr y, int stride, CUdeviceptr b, int n, int rows,
                  ZrError *err);
/* convert_f32_f16: y f16 [rows][n] = x [rows][n] (both contiguous) */
int zr_k_convert(ZrLauncher *l, const ZrCuKernels *k, CUdeviceptr x, CUdeviceptr y, int n, int rows, ZrError *err);
/* gemma (issue 14). softcap_f32: x[n] = tanh(x / cap) * cap */
int zr_k_softcap(ZrLauncher *l, const ZrCuKernels *k, CUdeviceptr x, float cap, int n, ZrError *err);
/* geglu_f32 (f16 false) / geglu_f32_f16: out[rows][n_ff] = gelu_tanh(gate) * up of gu [rows][stride] */
int zr_k_geglu(ZrLauncher *l, const ZrCuKernels *k, bool f16, CUdeviceptr gu, int stride, CUdeviceptr out, int n_ff,
               int rows, ZrError *err);
/* rmsnorm_add_f32: y[r] += RMSNorm(x[r]) * w for rows rows of n (x, y contiguous [rows][n]) */
int zr_k_rmsnorm_add(ZrLauncher *l, const ZrCuKernels *k, CUdeviceptr x, CUdeviceptr w, CUdeviceptr y, int n, float eps,
                     int rows, ZrError *err);
/* rope_scale_f32: after zr_k_rope_kv, the rotated values (first rope_dim of each head) of q in rows
 * of qkv and of the K rows at pos[0].. of kc times factor */
int zr_k_rope_scale(ZrLauncher *l, const ZrCuKernels *k, bool kv16, CUdeviceptr qkv, int qkv_stride, int n_head, int n_kv,
                    int head_dim, int rope_dim, float factor, CUdeviceptr pos, CUdeviceptr kc, int rows, ZrError *err);
/* mixture of experts (issue 15). matvec_id_<type>: for each slot j < n_used, y + j y_stride =
 * expert ids[j]'s rows of the stacked expert matrix w (n_out = n_rows per expert x experts) times
 * x' of x + j x_stride (modes as zr_k_matvec; GLU: n_rows = 2 x the results); shape as
 * zr_cuf_mv_shape_expert picks for one expert's matrix. fuse (NULL: neither) folds in the routing and
 * the mix (cu/moe_matvec.cu): */
typedef struct ZrMvIdFuse {
    CUdeviceptr logits;  /* f32 [n_expert]: route from these (n_used <= 32, n_expert <= 256) and write ids, weights [n_used]; 0: read ids */
    int n_expert;
    CUdeviceptr weights; /* f32 [n_used]: written when routing, read when mixing */
    CUdeviceptr mix_x;   /* f32 [n_rows]: += sum_j weights[j] y[j] in slot order (no GLU); 0: no mix */
    CUdeviceptr done;    /* u32 [row-group blocks], zeroed once: each block of the mix leaves its count at 0 */
} ZrMvIdFuse;
int zr_k_matvec_id(ZrLauncher *l, const ZrKernel *kern, int rows_per_warp, const ZrCuWeight *w, int n_rows, CUdeviceptr ids,
                   int n_used, CUdeviceptr x, int x_stride, CUdeviceptr y, int y_stride, CUdeviceptr norm_w, float eps,
                   int mode, ZrMvShape shape, const ZrMvIdFuse *fuse, ZrError *err);
/* The row-group blocks of a matvec_id launch (the mix's done counts): one expert's launch grid.x. */
unsigned zr_k_matvec_id_blocks(int rows_per_warp, int n_rows, int mode, ZrMvShape shape);
/* matvec_id_<type>_flat (cu/moe_matvec.cu): matvec_id's GLU launch (x shared by every slot,
 * fuse->logits as there, no mix) with slot j's n_rows/2 results at y + j n_rows/2, over `blocks`
 * blocks (at most the tiles: zr_k_matvec_id_flat_tiles) that each take every blocks-th tile of
 * (slot, row group). */
unsigned zr_k_matvec_id_flat_tiles(int rows_per_warp, int n_rows, int n_used, ZrMvShape shape);
int zr_k_matvec_id_flat(ZrLauncher *l, const ZrKernel *kern, int rows_per_warp, const ZrCuWeight *w, int n_rows, CUdeviceptr ids,
                        int n_used, CUdeviceptr x, CUdeviceptr y, CUdeviceptr norm_w, float eps, int mode, ZrMvShape shape,
                        unsigned blocks, const ZrMvIdFuse *fuse, ZrError *err);
/* matvec_id_mix_<type> (cu/moe_matvec_mix.cu): mix_x[r] += sum_j weights[j] (W_ids[j] x_j)[r] for r <
 * n_rows (the rows of one expert of the stacked w), x [n_used][n_in] contiguous; a warp per row
 * over every slot's items (spread over its lanes), no per-slot output. Only where
 * zr_k_matvec_id_mix_fits. */
bool zr_k_matvec_id_mix_fits(const ZrCuWeight *w, int n_used);
int zr_k_matvec_id_mix(ZrLauncher *l, const ZrKernel *kern, const ZrCuWeight *w, int n_rows, CUdeviceptr ids, int n_used,
                       CUdeviceptr x, CUdeviceptr weights, CUdeviceptr mix_x, ZrError *err);
/* moe_route_f32: ids, weights [rows][k] from logits [rows][n_expert] (softmax, top k, renormalized) */
int zr_k_moe_route(ZrLauncher *l, const ZrCuKernels *k, CUdeviceptr logits, int n_expert, int n_used, CUdeviceptr ids,
                   CUdeviceptr weights, int rows, ZrError *err);
/* moe_combine_f32: x[r][0..n) += sum_j weights[r][j] out[r][j][0..n) */
int zr_k_moe_combine(ZrLauncher *l, const ZrCuKernels *k, CUdeviceptr out, CUdeviceptr weights, int n_used, CUdeviceptr x,
                     int n, int rows, ZrError *err);
/* moe_gather_f32: out[i] = x[idx[i]] / moe_scatter_f32: out[slot[i]] = src[i], rows of n floats, i < rows */
int zr_k_moe_gather(ZrLauncher *l, const ZrCuKernels *k, CUdeviceptr x, CUdeviceptr idx, CUdeviceptr out, int n, int rows,
                    ZrError *err);
int zr_k_moe_scatter(ZrLauncher *l, const ZrCuKernels *k, CUdeviceptr src, CUdeviceptr slot, CUdeviceptr out, int n, int rows,
                     ZrError *err);
/* moe_group_i32: the nk slots of ids (slot s: token s / k) grouped by expert into idx, slot
 * (i32 [nk]: each row's token and slot, expert e's rows after e - 1's) and tiles (i32
 * [tiles_max][4], moe_mm's; (-1, 0, 0, 0) past the last); n_expert <= 1024, tiles_max >= nk / bn
 * + n_expert (checked) */
int zr_k_moe_group(ZrLauncher *l, const ZrCuKernels *k, CUdeviceptr ids, int nk, int n_used, int n_expert, int bn, CUdeviceptr idx,
                   CUdeviceptr slot, CUdeviceptr tiles, int tiles_max, ZrError *err);
/* moe_mm_<type>_n32 / _n64 (cu/moe_mm.cu; bn 32 or 64 tokens a tile): for each of the n_tiles
 * tiles (i32 [n_tiles][4]: expert e, first row r0, rows n <= bn, 0; e < 0: none) and o < rpe,
 * y[ydst(r)][o] = sum_k W[e rpe + o][k] x[xsrc(r)][k] for rows r of the tile, xsrc(r) = xidx[r]
 * (xidx 0: r), ydst(r) = yidx[r] (0: r); x f16 [.][ldx], y f32 [.][ldy]. Checks n_in % 64 == 0,
 * ldx % 8 == 0 and that the type has the kernel. */
int zr_k_moe_mm(ZrLauncher *l, const ZrCuKernels *k, int bn, const ZrCuWeight *w, int rpe, CUdeviceptr x, int ldx,
                CUdeviceptr xidx, CUdeviceptr y, int ldy, CUdeviceptr yidx, CUdeviceptr tiles, int n_tiles, ZrError *err);
/* matvec_mix_<a>_<b> (cu/matvec_mix.cu): the products of ws[0..mix->n_parts) sharing x in one
 * launch of zr_cuf_mv_mix_plan's shape: y + off[p] = W_p x' (+ add + off[p]; add 0: none), off in
 * floats; modes and post as zr_k_matvec's (post->x_out is written once) */
int zr_k_matvec_mix(ZrLauncher *l, const ZrCuKernels *k, const ZrMvMix *mix, const ZrCuWeight *ws, const int *off,
                    CUdeviceptr x, CUdeviceptr y, CUdeviceptr add, CUdeviceptr norm_w, float eps, int mode,
                    const ZrMvPost *post, ZrError *err);
