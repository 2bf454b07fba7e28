/* Which MoE layers the decode's one-launch FFN takes (cuda/moe.h zr_cuf_moe_ffn_fits, cu/moe_ffn.cu)
 * on the host: the layers of the files issue 15 targets (Qwen3-30B-A3B's Q4_K_M layers, Q4_K gate|up
 * with Q6_K or Q4_K down, and its Q8_0), and none whose launch would not compute exactly what the
 * three launches compute or would not fit one block's shared memory (Mixtral's 14336-wide experts,
 * split gate and up, a router that is not F32 or has more than 256 experts, more than 32 chosen,
 * experts of a width that is not a multiple of 32). No GPU needed: sizes, types and the device's
 * multiprocessor count (test/gpu/test_moe_cuda.c runs the kernel). */
#include <string.h>

#include "cuda/moe.h"
#include "quant.h"
#include "zt.h"

/* an H100 SXM's kernels as the plan sees them: every kernel loaded */
static ZrCuKernels kernels(void) {
    ZrCuKernels k;
    memset(&k, 0, sizeof k);
    k.sm_count = 132;
    for (int i = 0; i < ZR_KMOE_COUNT; i++) k.has_moe_ffn[i] = true;
    for (int t = 0; t < ZR_TYPE_COUNT; t++) k.has_mvt[t] = k.has_mv[t] = zr_type_kernel_suffix(t) != NULL;
    return k;
}

/* a layer of ne experts (k used) of ff values on rows of d, the gate|up of type g stacked, down of type dn */
static ZrCuMoeLayer layer(int d, int ne, int k, int ff, uint32_t g, uint32_t dn) {
    ZrCuMoeLayer E;
    memset(&E, 0, sizeof E);
    E.n_expert = ne, E.n_used = k, E.n_ff = ff;
    E.router = (ZrCuWeight){.type = ZR_TYPE_F32, .n_in = d, .n_out = ne, .main = 1};
    E.gu = (ZrCuWeight){.type = g, .n_in = d, .n_out = ne * 2 * ff, .main = 1};
    E.down = (ZrCuWeight){.type = dn, .n_in = ff, .n_out = ne * d, .main = 1};
    return E;
}

ZT_TEST(every_ZR_KMOE_line_is_found_by_its_types) {
    ZT_CHECK(zr_cuf_moe_ffn_kernel(ZR_TYPE_Q4_K, ZR_TYPE_Q6_K) == ZR_KMOE_q4_k_q6_k);
    ZT_CHECK(zr_cuf_moe_ffn_kernel(ZR_TYPE_Q4_K, ZR_TYPE_Q4_K) == ZR_KMOE_q4_k_q4_k);
    ZT_CHECK(zr_cuf_moe_ffn_kernel(ZR_TYPE_Q8_0, ZR_TYPE_Q8_0) == ZR_KMOE_q8_0_q8_0);
    ZT_CHECK(zr_cuf_moe_ffn_kernel(ZR_TYPE_Q5_K, ZR_TYPE_Q6_K) == ZR_KMOE_q5_k_q6_k);
    ZT_CHECK(zr_cuf_moe_ffn_kernel(ZR_TYPE_Q6_K, ZR_TYPE_Q4_K) == -1); /* the order matters: gate|up, then down */
    ZT_CHECK(zr_cuf_moe_ffn_kernel(ZR_TYPE_F32, ZR_TYPE_F32) == -1);
}

ZT_TEST(qwen3_30b_a3b_layers_take_the_one_launch_ffn) {
    const ZrCuKernels k = kernels();
    ZrCuMoeLayer E = layer(2048, 128, 8, 768, ZR_TYPE_Q4_K, ZR_TYPE_Q6_K);
    ZT_CHECK(zr_cuf_moe_ffn_fits(&k, &E, 2048, 768) == ZR_KMOE_q4_k_q6_k);
    E = layer(2048, 128, 8, 768, ZR_TYPE_Q4_K, ZR_TYPE_Q4_K);
    ZT_CHECK(zr_cuf_moe_ffn_fits(&k, &E, 2048, 768) == ZR_KMOE_q4_k_q4_k);
    E = layer(2048, 128, 8, 768, ZR_TYPE_Q8_0, ZR_TYPE_Q8_0);
    ZT_CHECK(zr_cuf_moe_ffn_fits(&k, &E, 2048, 768) == ZR_KMOE_q8_0_q8_0);
    /* the tests' small models: 40 of 5 on rows of 256, 256 of 32 */
    E = layer(256, 40, 5, 256, ZR_TYPE_Q6_K, ZR_TYPE_Q6_K);
    ZT_CHECK(zr_cuf_moe_ffn_fits(&k, &E, 256, 256) == ZR_KMOE_q6_k_q6_k);
    E = layer(512, 256, 32, 64, ZR_TYPE_Q8_0, ZR_TYPE_Q8_0);
    ZT_CHECK(zr_cuf_moe_ffn_fits(&k, &E, 512, 64) == ZR_KMOE_q8_0_q8_0);
}

ZT_TEST(layers_the_kernel_would_not_compute_exactly_keep_the_three_launches) {
    ZrCuKernels k = kernels();
    /* Mixtral-8x7B: 2 slots of 14336 values do not fit one block's staging */
    ZrCuMoeLayer E = layer(4096, 8, 2, 14336, ZR_TYPE_Q4_K, ZR_TYPE_Q6_K);
    ZT_CHECK(zr_cuf_moe_ffn_fits(&k, &E, 4096, 14336) == -1);
    /* Qwen3-235B-A22B's 8 slots of 1536 (49 KiB of staging) */
    E = layer(4096, 128, 8, 1536, ZR_TYPE_Q4_K, ZR_TYPE_Q6_K);
    ZT_CHECK(zr_cuf_moe_ffn_fits(&k, &E, 4096, 1536) == -1);
    /* gate and up apart (a mixed quantization) */
    E = layer(2048, 128, 8, 768, ZR_TYPE_Q4_K, ZR_TYPE_Q6_K);
    E.up = E.gu;
    ZT_CHECK(zr_cuf_moe_ffn_fits(&k, &E, 2048, 768) == -1);
    /* a router that is not F32, or of more than 256 experts */
    E = layer(2048, 128, 8, 768, ZR_TYPE_Q4_K, ZR_TYPE_Q6_K);
    E.router.type = ZR_TYPE_F16;
    ZT_CHECK(zr_cuf_moe_ffn_fits(&k, &E, 2048, 768) == -1);
    E = layer(2048, 512, 8, 128, ZR_TYPE_Q4_K, ZR_TYPE_Q6_K);
    ZT_CHECK(zr_cuf_moe_ffn_fits(&k, &E, 2048, 128) == -1);
    /* more than 32 chosen; slots not contiguous (ff_stride past n_ff); experts 40 wide */
    E = layer(512, 64, 33, 64, ZR_TYPE_Q8_0, ZR_TYPE_Q8_0);
    ZT_CHECK(zr_cuf_moe_ffn_fits(&k, &E, 512, 64) == -1);
    E = layer(2048, 128, 8, 768, ZR_TYPE_Q4_K, ZR_TYPE_Q6_K);
    ZT_CHECK(zr_cuf_moe_ffn_fits(&k, &E, 2048, 772) == -1);
    E = layer(512, 16, 4, 40, ZR_TYPE_Q8_0, ZR_TYPE_Q8_0);
    ZT_CHECK(zr_cuf_moe_ffn_fits(&k, &E, 512, 40) == -1);
    /* no kernel for the types, or the kernel not loaded */
    E = layer(2048, 128, 8, 768, ZR_TYPE_Q4_0, ZR_TYPE_Q4_0);
    ZT_CHECK(zr_cuf_moe_ffn_fits(&k, &E, 2048, 768) == -1);
    E = layer(2048, 128, 8, 768, ZR_TYPE_Q4_K, ZR_TYPE_Q6_K);
    k.has_moe_ffn[ZR_KMOE_q4_k_q6_k] = false;
    ZT_CHECK(zr_cuf_moe_ffn_fits(&k, &E, 2048, 768) == -1);
}

int main(void) { return zt_run(); }
