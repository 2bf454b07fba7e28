#include "cuda/attn.h"

#include <limits.h>

/* Decode chunks of n_ctx/64 rows, rounded up to 32 and kept within 32..256 (at most 1024
 * chunks); prefill chunks of up to 4096 rows (the block keeps a chunk's scores in shared
 * memory). A decode block's P.V loop walks its chunk row by row, so short chunks keep it short
 * at the start of a context (tg128: positions 0..127); the cap of 64 chunks (for n_ctx <= 16384)
 * bounds the blocks that exit at once past the sequence. */
void zr_cuf_attn_chunks(int n_ctx, int *chunk_d, int *n_d, int *chunk_p, int *n_p) {
    int cd = (n_ctx / 64 + 31) / 32 * 32;
    cd = cd < 32 ? 32 : cd > 256 ? 256 : cd;
    if ((n_ctx + cd - 1) / cd > 1024) cd = ((n_ctx + 1023) / 1024 + 31) / 32 * 32;
    *chunk_d = cd;
    *n_d = (n_ctx + cd - 1) / cd;
    const int cp = n_ctx < 4096 ? n_ctx : 4096;
    *chunk_p = cp;
    *n_p = (n_ctx + cp - 1) / cp;
}

/* A block per (query head, chunk) with 16 warps takes 128 rows (head_dim 128; 256 at 64) in one
 * batch of loads, so chunks of 128 rows (the split path's chunk_d when larger) leave nothing to
 * merge up to position 127 and few chunks after: at short contexts a merge (fence, atomic,
 * partials) costs more round trips than the block's rows (H100 1B Q4_0 tg128: chunks of 128
 * 1835 t/s, of 64 1790; cu/PERF.md). Heads of up to 256 (gemma; attn_decode_f32_d256, two
 * float4s a lane) take 64 rows a batch: their chunks are 64 rows, so no block waits on a second
 * batch that it could only request after the first; past position 63 two blocks on two SMs each
 * read half the rows (a head's 64 rows are 128 KiB of K and V, one SM's share of the bandwidth
 * for ~1 us) and the merge runs instead of the second batch (cu/PERF.md, gemma6). */
void zr_cuf_attn_fused_chunks(int n_ctx, int chunk_d, int head_dim, int *chunk, int *n_chunks) {
    const int batch = head_dim > 128 ? 64 : 128;
    *chunk = batch < n_ctx ? batch : n_ctx;
    if (*chunk < chunk_d) *chunk = chunk_d;
    *n_chunks = (n_ctx + *chunk - 1) / *chunk;
}

static CUdeviceptr fptr(CUdeviceptr base, size_t floats) { return base + floats * sizeof(float); }

/* The caches of layer il: base + il n_ctx kv_dim cached values */
static CUdeviceptr kv_layer(const ZrCuForward *f, CUdeviceptr base, int il) {
    return base + (size_t)il * f->n_ctx * f->kv_dim * zr_cuf_kv_value_bytes(f->kv16);
}

/* Q/K head norms (facts.qk_norm: qwen3) of `rows` rows of f->qkv, in place. */
static int qk_norm(ZrCuForward *f, int il, int rows, ZrError *err) {
    const ZrHparams *hp = &f->m->hp;
    const ZrCuLayer *G = &f->layers[il];
    const float eps = hp->rms_eps;
    int rc;
    if (!f->m->layers[il].facts.qk_norm) return ZR_OK;
    if (G->q_norm && (rc = zr_k_rmsnorm(f->launcher, f->k, f->qkv, f->qkv_dim, G->q_norm, f->qkv, f->qkv_dim,
                                        f->head_dim, eps, hp->n_head, rows, err)))
        return rc;
    if (G->k_norm && (rc = zr_k_rmsnorm(f->launcher, f->k, fptr(f->qkv, f->q_dim), f->qkv_dim, G->k_norm,
                                        fptr(f->qkv, f->q_dim), f->qkv_dim, f->head_dim, eps, hp->n_head_kv, rows,
                                        err)))
        return rc;
    return ZR_OK;
}

/* The rope attention factor applied to the rotated values themselves (rope_scale_f32): only
 * where part of each head rotates (Phi-4-mini); a whole rotating head has it folded into the
 * scores' scale (scores_scale). */
static bool rope_scaled(const ZrCuForward *f) {
    const ZrHparams *hp = &f->m->hp;
    return hp->rope_attn_factor != 1.0f && hp->rope_dim != hp->head_dim;
}

/* Q/K head norms, rope of Q and K, and the K/V cache write, for `rows` rows of f->qkv at
 * positions d_pos[0].. (decode and prefill). */
static int qk_norm_rope(ZrCuForward *f, int il, int rows, ZrError *err) {
    const ZrHparams *hp = &f->m->hp;
    int rc = qk_norm(f, il, rows, err);
    if (rc) return rc;
    rc = zr_k_rope_kv(f->launcher, f->k, f->kv16, f->qkv, f->qkv_dim, hp->n_head, hp->n_head_kv, f->head_dim, hp->rope_dim,
                      hp->rope == ZR_ROPE_NEOX, f->layers[il].rope_freq, f->d_pos, kv_layer(f, f->kc, il), kv_layer(f, f->vc, il), rows,
                      err);
    if (rc || !rope_scaled(f)) return rc;
    return zr_k_rope_scale(f->launcher, f->k, f->kv16, f->qkv, f->qkv_dim, hp->n_head, hp->n_head_kv, f->head_dim, hp->rope_dim,
                           hp->rope_attn_factor, f->d_pos, kv_layer(f, f->kc, il), rows, err);
}

/* The scores' scale: attn_scale, times the rope attention factor squared when the file has one
 * and the whole head rotates (phi3's LongRoPE: ggml multiplies cos and sin by it, so every q.k
 * by its square; the rope kernels rotate without it). With partial rotation rope_scale_f32
 * scales the rotated values instead (rope_scaled). */
static float scores_scale(const ZrCuForward *f) {
    const ZrHparams *hp = &f->m->hp;
    const float a = hp->rope_attn_factor;
    return a == 1.0f || rope_scaled(f) ? hp->attn_scale : hp->attn_scale * (a * a);
}

/* Everything from the QKV projection's output to the attention output through the split
 * kernels, for `rows` rows at positions d_pos[0].. (the fallback of both paths). */
static int attention_split(ZrCuForward *f, int il, int rows, CUdeviceptr part, int chunk, int n_chunks, ZrError *err) {
    const ZrHparams *hp = &f->m->hp;
    int rc = qk_norm_rope(f, il, rows, err);
    if (rc) return rc;
    return zr_k_attn_split(f->launcher, f->k, f->kv16, f->qkv, f->qkv_dim, kv_layer(f, f->kc, il), kv_layer(f, f->vc, il), part,
                           f->d_pos, f->att, f->q_dim, hp->n_head, hp->n_head_kv, f->head_dim, scores_scale(f),
                           f->m->layers[il].facts.window, hp->attn_softcap, chunk, n_chunks, rows, err);
}

/* The fused decode attention's blocks per head (per group of qg query heads): one wave (a block
 * of 512 threads is resident alone on an SM: every head's blocks together at most the SMs), each block looping over its
 * share of the chunks, so the grid does not grow with the context (cu/attention_decode.cu). H200
 * tg128 after 16384 positions, Llama-3-8B Q4_K_M: 2 waves rounded up 192.7 t/s, 2 down 224.9,
 * 4 down 209.4, one 234.4 (the 1B: 674.6 / 792.9 / 701.1 / 843.9); cu/PERF.md session 21. The
 * tensor-core kernel (qg = G: a block per KV head, one resident an SM for its rings) by the same rule. */
static int decode_split(const ZrCuForward *f, int qg) {
    const int n = f->k->sm_count / (f->m->hp.n_head / qg);
    return n < 1 ? 1 : n;
}

/* Query heads a grouped decode block serves: 4 of one KV head, 2 where G is no multiple of 4;
 * heads of 256 (gemma) keep a block a head: Gemma-3-4B with blocks of 2 was slower at every
 * depth (484.4 -> 447.7 t/s after 16384 positions; cu/PERF.md session 22). */
static int decode_qg(const ZrCuForward *f) {
    const int G = f->m->hp.n_head / f->m->hp.n_head_kv;
    if (f->head_dim > 128 || (f->kv16 && f->head_dim % 8)) return 1; /* an F16 cache's groups: slots of 8 halves */
    return G % 4 == 0 ? 4 : G % 2 == 0 ? 2 : 1;
}

/* Whether the grouped decode takes the tensor-core kernel, a block per KV head (an F16 cache, heads of
 * 64 or 128, 2 to 16 query heads a KV head), from ZR_CUF_ATTN_MMA_POS per 4 of them: H200 tg128
 * (Q4_K_M) after 16384 positions, Llama-3-8B 316.0 -> 381.1 t/s, Qwen3-30B-A3B 278.5 -> 356.2,
 * Llama-3.2-3B 384.5 -> 580.2, Llama-3.2-1B 1080.7 -> 1230.0 (cu/PERF.md session 32). It takes the
 * heads the CUDA-core groups do not (Llama-3.2-3B's 3 a KV head, Qwen2.5-7B's 7). */
static bool decode_mma(const ZrCuForward *f) {
    const ZrHparams *hp = &f->m->hp;
    return zr_k_attn_decode_mma_fits(f->k, f->kv16, hp->n_head, hp->n_head_kv, f->head_dim) &&
           hp->n_head / hp->n_head_kv >= 2;
}

/* Whether the model's heads have a grouped decode kernel */
static bool decode_groups(const ZrCuForward *f) { return decode_mma(f) || decode_qg(f) > 1; }

/* The switch position: the caller's, or for 0 the model's (attn.h) */
static int group_pos_or_default(const ZrCuForward *f, int group_pos) {
    if (group_pos > 0) return group_pos;
    if (!decode_mma(f)) return ZR_CUF_ATTN_GROUP_POS;
    const int G = f->m->hp.n_head / f->m->hp.n_head_kv;
    return ZR_CUF_ATTN_MMA_POS * f->head_dim / 128 * ((G + 3) / 4);
}

bool zr_cuf_attn_group_at(ZrCuForward *f, int pos, int group_pos) {
    const int gp = group_pos_or_default(f, group_pos);
    f->attn_group_rows = gp;
    const bool want = pos >= gp && decode_groups(f);
    if (want == f->attn_grouped) return false;
    f->attn_grouped = want;
    return true;
}

int zr_cuf_attn_group_next(const ZrCuForward *f, int pos, int group_pos) {
    const int gp = group_pos_or_default(f, group_pos);
    if (f->attn_grouped || !decode_groups(f)) return INT_MAX;
    return pos > gp ? pos : gp; /* due now when pos is past it (not yet taken) */
}

int zr_cuf_attn_layer_qg(const ZrCuForward *f, int il) {
    const int window = f->m->layers[il].facts.window;
    if (!f->attn_grouped || (window > 0 && window < f->attn_group_rows)) return 1;
    return decode_mma(f) ? f->m->hp.n_head / f->m->hp.n_head_kv : decode_qg(f);
}

/* Whether a layer whose decode takes qg query heads a block takes the tensor-core groups */
static bool layer_mma_at(const ZrCuForward *f, int qg) { return decode_mma(f) && qg > 1; }

bool zr_cuf_attn_layer_mma(const ZrCuForward *f, int il) { return layer_mma_at(f, zr_cuf_attn_layer_qg(f, il)); }

/* The fused kernel (one launch per layer, the q/k head norms, a sliding window and soft-capped
 * scores included) wherever it takes the shape: H100 tg128 graph, 1B Q4_0 1501 -> 1835 t/s, 8B
 * Q4_0 386 -> 447 over the split kernels (cu/PERF.md). */
int zr_cuf_attn_decode_layer(ZrCuForward *f, int il, ZrError *err) {
    const ZrHparams *hp = &f->m->hp;
    if (!f->attn_fused || rope_scaled(f)) return attention_split(f, il, 1, f->part_d, f->chunk_d, f->n_chunks_d, err);
    const ZrCuLayer *G = &f->layers[il];
    const bool qk = f->m->layers[il].facts.qk_norm;
    const int window = f->m->layers[il].facts.window;
    const int qg = zr_cuf_attn_layer_qg(f, il);
    const ZrCuAttnDecode a = {.qkv = f->qkv, .kc = kv_layer(f, f->kc, il), .vc = kv_layer(f, f->vc, il), .part = f->part_d,
                              .count = f->attn_count, .out = f->att, .freq = G->rope_freq, .pos = f->d_pos,
                              .q_norm = qk ? G->q_norm : 0, .k_norm = qk ? G->k_norm : 0, .n_head = hp->n_head,
                              .n_kv = hp->n_head_kv, .head_dim = f->head_dim, .rope_dim = hp->rope_dim,
                              .neox = hp->rope == ZR_ROPE_NEOX, .chunk = f->chunk_f, .n_chunks = f->n_chunks_f,
                              .n_split = decode_split(f, qg), .qg = qg,
                              .window = window, .scale = scores_scale(f), .eps = hp->rms_eps,
                              .softcap = hp->attn_softcap, .kv16 = f->kv16, .mma = layer_mma_at(f, qg)};
    return zr_k_attn_decode(f->launcher, f->k, &a, err);
}

/* Rope + KV write, then the tiled tensor-core kernel (cu/attention_prefill.cu), which reads each
 * K/V tile once per 64 query rows instead of once per row (H100 pp512 of Llama-3-8B F16 13.4k ->
 * 34.2k t/s, Q4_0 11.2k -> 22.3k: cu/PERF.md), sliding windows and soft caps included. F32
 * projections keep F32 attention (the split kernels: such models are held to the decode
 * tolerance), as do the shapes the tiled kernels do not take (zr_k_attn_prefill_fits: head sizes
 * other than 64, 96, 128 and 256, a window or a cap on heads of 64 or 96). */
int zr_cuf_attn_prefill_layer(ZrCuForward *f, int il, int rows, ZrError *err) {
    const ZrHparams *hp = &f->m->hp;
    const int window = f->m->layers[il].facts.window;
    if (!zr_k_attn_prefill_fits(f->k, f->head_dim, window, hp->attn_softcap) || f->layers[il].qkv[0].type == ZR_TYPE_F32)
        return attention_split(f, il, rows, f->part_p, f->chunk_p, f->n_chunks_p, err);
    int rc = qk_norm_rope(f, il, rows, err);
    if (rc) return rc;
    return zr_k_attn_prefill(f->launcher, f->k, f->kv16, f->qkv, f->qkv_dim, kv_layer(f, f->kc, il), kv_layer(f, f->vc, il), f->att,
                             f->q_dim, f->d_pos, hp->n_head, hp->n_head_kv, f->head_dim, scores_scale(f), window,
                             hp->attn_softcap, rows, err);
}
