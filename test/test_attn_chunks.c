/* The decode attention's choices on the host. Its chunks (cuda/attn.h zr_cuf_attn_fused_chunks): a block of
 * attn_decode_f32 / attn_decode_f32_d256 loads one batch of cache rows before it waits (128 rows of
 * heads up to 128 values, 64 of heads up to 256), and its chunks are that batch, so no block asks
 * for a second batch after the first arrives; never fewer rows than the split path's chunk_d
 * (the partials buffer is sized by it). Its kernels by position (zr_cuf_attn_group_at / _next):
 * blocks of query-head groups from ZR_CUF_ATTN_GROUP_POS where the heads have such a kernel, and
 * a queue of steps never reaching past the switch before it is taken. No GPU needed. */
#include <limits.h>
#include <string.h>

#include "cuda/attn.h"
#include "zt.h"

static void fused(int n_ctx, int head_dim, int *chunk, int *n_chunks) {
    int cd, nd, cp, np;
    zr_cuf_attn_chunks(n_ctx, &cd, &nd, &cp, &np);
    zr_cuf_attn_fused_chunks(n_ctx, cd, head_dim, chunk, n_chunks);
    ZT_CHECKF(*chunk >= cd && *n_chunks <= nd, "n_ctx %d, heads of %d: chunks of %d (%d), the split path's %d (%d)", n_ctx,
              head_dim, *chunk, *n_chunks, cd, nd);
}

ZT_TEST(heads_of_256_take_chunks_of_one_64_row_batch) {
    int c, n;
    fused(512, 256, &c, &n); /* tg128's context: zrun bench -p 512 -n 128 */
    ZT_CHECKF(c == 64 && n == 8, "n_ctx 512, heads of 256: chunks of %d (%d)", c, n);
    fused(4096, 256, &c, &n);
    ZT_CHECKF(c == 64 && n == 64, "n_ctx 4096, heads of 256: chunks of %d (%d)", c, n);
    fused(32768, 256, &c, &n); /* long contexts keep the split path's chunks (bounded grids) */
    ZT_CHECKF(c == 256 && n == 128, "n_ctx 32768, heads of 256: chunks of %d (%d)", c, n);
    fused(40, 256, &c, &n);
    ZT_CHECKF(c == 40 && n == 1, "n_ctx 40, heads of 256: chunks of %d (%d)", c, n);
}

ZT_TEST(heads_of_up_to_128_keep_chunks_of_128) {
    int c, n;
    for (int hd = 64; hd <= 128; hd += 32) {
        fused(512, hd, &c, &n);
        ZT_CHECKF(c == 128 && n == 4, "n_ctx 512, heads of %d: chunks of %d (%d)", hd, c, n);
        fused(4096, hd, &c, &n);
        ZT_CHECKF(c == 128 && n == 32, "n_ctx 4096, heads of %d: chunks of %d (%d)", hd, c, n);
    }
}

/* A forward pass with n_head query heads on n_kv KV heads of head_dim values (what the choice reads) */
typedef struct Heads {
    ZrModel m;
    ZrCuForward f;
} Heads;

static void heads(Heads *h, int n_head, int n_kv, int head_dim) {
    memset(h, 0, sizeof *h);
    h->m.hp.n_head = n_head;
    h->m.hp.n_head_kv = n_kv;
    h->f.m = &h->m;
    h->f.head_dim = head_dim;
}

ZT_TEST(the_decode_attention_takes_query_head_groups_from_its_position_once) {
    Heads h;
    heads(&h, 32, 8, 128); /* Llama-3-8B */
    ZrCuForward *f = &h.f;
    ZT_CHECK(zr_cuf_attn_group_next(f, 0, 0) == ZR_CUF_ATTN_GROUP_POS); /* 0: the backend's position */
    ZT_CHECK(!zr_cuf_attn_group_at(f, ZR_CUF_ATTN_GROUP_POS - 1, 0) && !f->attn_grouped);
    ZT_CHECK(zr_cuf_attn_group_next(f, 8, 20) == 20);
    /* the loop asks from its last queued position: at and past the switch, not yet taken, it is
     * due there (a queue stops at once; before the fix the answer was "never", and the queue ran
     * past it with the other kernel's graph) */
    ZT_CHECK(zr_cuf_attn_group_next(f, 20, 20) == 20);
    ZT_CHECK(zr_cuf_attn_group_next(f, 23, 20) == 23);
    ZT_CHECK(!zr_cuf_attn_group_at(f, 19, 20));
    ZT_CHECK(zr_cuf_attn_group_at(f, 20, 20) && f->attn_grouped); /* changed: the caller moves its epoch */
    ZT_CHECK(!zr_cuf_attn_group_at(f, 21, 20));                    /* once */
    ZT_CHECK(zr_cuf_attn_group_next(f, 21, 20) == INT_MAX);
    ZT_CHECK(zr_cuf_attn_group_at(f, 8, 20) && !f->attn_grouped); /* a new run from an earlier position */
    ZT_CHECK(zr_cuf_attn_group_at(f, 5000, 0) && f->attn_grouped);
}

ZT_TEST(heads_without_a_grouped_kernel_never_change) {
    const int shapes[][3] = {{28, 4, 128}, /* 7 query heads a KV head (Qwen2.5-7B) */
                             {8, 4, 256},  /* heads of 256 (gemma) */
                             {32, 32, 96}}; /* no GQA (Phi-3-mini) */
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        Heads h;
        heads(&h, shapes[i][0], shapes[i][1], shapes[i][2]);
        ZT_CHECK(!zr_cuf_attn_group_at(&h.f, 100000, 0) && !h.f.attn_grouped);
        ZT_CHECK(zr_cuf_attn_group_next(&h.f, 0, 0) == INT_MAX);
    }
    Heads h;
    heads(&h, 12, 2, 128); /* 6 a KV head: groups of 2 */
    ZT_CHECK(zr_cuf_attn_group_at(&h.f, ZR_CUF_ATTN_GROUP_POS, 0));
}

/* A local layer's window shorter than the switch position keeps a block a head past it; global
 * layers and windows that reach it take the groups (Gemma-3-27B: heads of 128, 2 a KV head, 5
 * local layers of 1024 rows to a global one). */
ZT_TEST(local_layers_whose_window_is_short_of_the_switch_keep_a_block_a_head) {
    Heads h;
    heads(&h, 32, 16, 128);
    ZrLayer layers[3];
    memset(layers, 0, sizeof layers);
    layers[0].facts.window = 1024; /* local */
    layers[2].facts.window = ZR_CUF_ATTN_GROUP_POS; /* a window that reaches the switch */
    h.m.layers = layers;
    ZrCuForward *f = &h.f;
    for (int il = 0; il < 3; il++) ZT_CHECK(zr_cuf_attn_layer_qg(f, il) == 1); /* before the switch */
    ZT_CHECK(zr_cuf_attn_group_at(f, ZR_CUF_ATTN_GROUP_POS, 0));
    ZT_CHECK(zr_cuf_attn_layer_qg(f, 0) == 1);
    ZT_CHECK(zr_cuf_attn_layer_qg(f, 1) == 2);
    ZT_CHECK(zr_cuf_attn_layer_qg(f, 2) == 2);
    /* a test's switch position under the window: every layer takes the groups */
    ZT_CHECK(zr_cuf_attn_group_at(f, 10, 8) == false && f->attn_grouped);
    ZT_CHECK(zr_cuf_attn_layer_qg(f, 0) == 2);
    ZT_CHECK(zr_cuf_attn_group_at(f, 10, 2000) && !f->attn_grouped); /* a new run: 10 < 2000 */
    ZT_CHECK(zr_cuf_attn_group_at(f, 3000, 2000) && zr_cuf_attn_layer_qg(f, 0) == 1);
}

/* With an F16 cache and a GPU that allows its shared memory, the groups are the tensor-core kernel's, a
 * block per KV head: for 2 to 16 query heads a KV head and heads of 64 or 128, the counts the CUDA-core
 * groups do not take (3 a KV head: Llama-3.2-3B; 7: Qwen2.5-7B) included; an F32 cache, heads of 96 or
 * 256, one query head a KV head and 17 keep the CUDA-core kernels. */
/* h as heads() makes it with one global layer, an F16 cache and the kernels k */
static void heads_f16(Heads *h, const int shape[3], ZrLayer *layer, ZrCuKernels *k) {
    heads(h, shape[0], shape[1], shape[2]);
    memset(layer, 0, sizeof *layer);
    h->m.layers = layer;
    h->f.k = k;
    h->f.kv16 = true;
}

ZT_TEST(an_f16_cache_takes_the_tensor_core_groups_where_its_heads_fit) {
    static ZrCuKernels k;
    k.has_attn_decode_mma = true;
    /* heads, KV heads, head size, and the switch position measured for them (cu/PERF.md session
     * 33: 512 per 4 query heads a KV head, 256 for heads of 64) */
    const int take[][4] = {{24, 8, 128, 512}, {28, 4, 128, 1024}, {32, 8, 128, 512},
                           {32, 4, 128, 1024}, {32, 8, 64, 256},  {32, 2, 128, 2048}, {14, 2, 64, 512}};
    for (size_t i = 0; i < sizeof take / sizeof take[0]; i++) {
        Heads h;
        ZrLayer layer;
        heads_f16(&h, take[i], &layer, &k);
        ZT_CHECK(!zr_cuf_attn_layer_mma(&h.f, 0)); /* before the switch: a block a head */
        const int G = take[i][0] / take[i][1], at = take[i][3];
        ZT_CHECK(zr_cuf_attn_group_next(&h.f, 0, 0) == at && !zr_cuf_attn_group_at(&h.f, at - 1, 0));
        ZT_CHECKF(zr_cuf_attn_group_at(&h.f, at, 0), "%d/%d heads of %d", take[i][0], take[i][1], take[i][2]);
        ZT_CHECK(zr_cuf_attn_layer_mma(&h.f, 0) && zr_cuf_attn_layer_qg(&h.f, 0) == G);
        h.f.kv16 = false; /* an F32 cache: the CUDA-core groups where they exist */
        ZT_CHECK(!zr_cuf_attn_layer_mma(&h.f, 0));
    }
    const int keep[][3] = {{8, 4, 256}, {32, 32, 96}, {32, 32, 128}, {34, 2, 128}};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        Heads h;
        ZrLayer layer;
        heads_f16(&h, keep[i], &layer, &k);
        zr_cuf_attn_group_at(&h.f, 100000, 0);
        ZT_CHECKF(!zr_cuf_attn_layer_mma(&h.f, 0), "%d/%d heads of %d", keep[i][0], keep[i][1], keep[i][2]);
    }
    k.has_attn_decode_mma = false; /* a GPU without the shared memory: Llama-3.2-3B's heads never change */
    Heads h;
    ZrLayer layer;
    heads_f16(&h, take[0], &layer, &k);
    ZT_CHECK(!zr_cuf_attn_group_at(&h.f, 100000, 0) && zr_cuf_attn_group_next(&h.f, 0, 0) == INT_MAX);
}

int main(void) { return zt_run(); }
