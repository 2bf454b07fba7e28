/* The decode attention's chunks on the host (cuda/attn.h zr_cuf_attn_fused_chunks): a block of
 * attn_decode_f32 / attn_decode_f32_d256 loads one batch of cache rows before it waits (128 rows of
 * heads up to 128 values, 64 of heads up to 256), and its chunks are that batch, so no block asks
 * for a second batch after the first arrives; never fewer rows than the split path's chunk_d
 * (the partials buffer is sized by it). No GPU needed. */
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

int main(void) { return zt_run(); }
