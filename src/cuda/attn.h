/* The forward pass's attention: which kernels a layer's attention takes (chosen by shape, not
 * by a switch: the fast kernels where they take the model's heads, the split kernels
 * attn_part_f32 + attn_combine_f32 where they do not), and how the KV cache is cut into chunks
 * (which sizes the partials buffers). */
#pragma once
#include "cuda/forward.h"

/* Attention split: decode chunks (chunk_d rows, n_d of them) and prefill chunks (chunk_p, n_p). */
void zr_cuf_attn_chunks(int n_ctx, int *chunk_d, int *n_d, int *chunk_p, int *n_p);
/* The fused decode kernel's chunks for heads of head_dim values: one batch of a block's loads (128
 * rows, 64 for heads over 128), never fewer rows than chunk_d (so its partials fit the split
 * path's buffer). */
void zr_cuf_attn_fused_chunks(int n_ctx, int chunk_d, int head_dim, int *chunk, int *n_chunks);

/* Past a long context the decode attention is bound by the cache rows each SM has in flight and
 * by L2, which a block a query head reads G times a row; blocks of a group of query heads of one
 * KV head (attn_decode_f32_g2/_g4) load each row once for all of them, but their fewer blocks
 * take short contexts' rows in more round trips. So the decode step takes them from this
 * position on. H200 tg128 (Q4_K_M), a block a head / blocks of 4: Llama-3-8B after 16384
 * positions 235.8 / 266.4 t/s, after 4096 377.1 / 375.2, from position 0 502.1 / 465.1;
 * Qwen3-30B-A3B (G = 8) after 16384 196.4 / 227.3 (cu/PERF.md session 22). */
#define ZR_CUF_ATTN_GROUP_POS 4096
/* The tensor-core groups (an F16 cache, heads of 64 or 128: attn_decode_mma_d*_kvh, a block per KV
 * head) from this position per 4 query heads a KV head for heads of 128, scaled by the head's
 * length (a cached row's bytes): G = 2 to 4: 512; 8: 1024; 16: 2048; heads of 64 half of that.
 * Their fixed cost (G heads' prologue and the tiles in 4 warps, the merge) loses to a block a head
 * before it and grows with G. H200 tg128 (Q4_K_M), against session 32 (a block a head before 1024
 * per 4 query heads, this kernel with its older prologue from there): Llama-3-8B +0.4%, +1.0%,
 * +0.5%, +0.5% after 512, 1024, 4096, 16384 positions (-1.2% after 256, -0.7% after 384);
 * Llama-3.2-3B (G = 3) +0.9% after 512; Qwen3-30B-A3B (G = 8) +2.0% after 1024, +2.4% after 4096
 * (-2.4% after 512); Llama-3.2-1B (heads of 64) +2.4% after 256, +2.0% after 384, +3.7% after
 * 512; from position 0 -3.0% on the 8B, -6.2% with G = 8, -1.9% on the 1B (cu/PERF.md sessions 32
 * and 33). */
#define ZR_CUF_ATTN_MMA_POS 512
/* Sets f->attn_grouped for a decode step at pos (from group_pos, 0: the model's own switch,
 * ZR_CUF_ATTN_MMA_POS per 4 query heads for the tensor-core groups, else ZR_CUF_ATTN_GROUP_POS,
 * where the model's heads have a grouped kernel); true when it changed: the step launches
 * another kernel than a graph recorded before (the caller moves its epoch). Both kernels are
 * exact at every position, so the choice is speed alone. */
bool zr_cuf_attn_group_at(ZrCuForward *f, int pos, int group_pos);
/* The first position >= pos at which zr_cuf_attn_group_at would change the choice (pos itself
 * when the change is due and not yet taken; INT_MAX: none in a run whose positions grow): a
 * queue of recorded steps stops before it, so the step there is taken with nothing queued. */
int zr_cuf_attn_group_next(const ZrCuForward *f, int pos, int group_pos);
/* The query heads a decode block of layer il serves (1: a block a head): the groups once
 * f->attn_grouped is set, but for a local layer whose window is shorter than the switch position
 * (the caller's or ZR_CUF_ATTN_GROUP_POS): it never reads as many rows as the groups need to gain
 * (gemma3's windows of 1024 on Gemma-3-27B's heads of 128: H200 tg128 after 16384 positions 114.4
 * -> 116.5 t/s, cu/PERF.md session 24), so it keeps a block a head. */
int zr_cuf_attn_layer_qg(const ZrCuForward *f, int il);
/* Whether layer il's grouped blocks are the tensor-core kernel's (a block per KV head, qg = G above;
 * an F16 cache, heads of 64 or 128, 2 <= G <= 16). */
bool zr_cuf_attn_layer_mma(const ZrCuForward *f, int il);

/* The decode step's attention of layer il: from the QKV projection's output f->qkv (row 0) to
 * f->att, writing the KV cache row at d_pos[0]. */
int zr_cuf_attn_decode_layer(ZrCuForward *f, int il, ZrError *err);
/* The prefill's attention of layer il for `rows` rows at positions d_pos[0].. */
int zr_cuf_attn_prefill_layer(ZrCuForward *f, int il, int rows, ZrError *err);
