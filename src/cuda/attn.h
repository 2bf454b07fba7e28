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

/* The decode step's attention of layer il: from the QKV projection's output f->qkv (row 0) to
 * f->att, writing the KV cache row at d_pos[0]. */
int zr_cuf_attn_decode_layer(ZrCuForward *f, int il, ZrError *err);
/* The prefill's attention of layer il for `rows` rows at positions d_pos[0].. */
int zr_cuf_attn_prefill_layer(ZrCuForward *f, int il, int rows, ZrError *err);
