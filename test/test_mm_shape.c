/* The launch shapes of the prefill's small-batch product (src/cuda/mm_small.c), chosen on the
 * host: what the kernel (cu/matmul_small.cu) needs of them holds for every weight type, row
 * count and size, and the shared memory stays within what zrun asks the device for. */
#include <string.h>

#include "cuda/mm_small.h"
#include "quant.h"
#include "zt.h"

static const uint32_t types[] = {ZR_TYPE_F32, ZR_TYPE_F16,  ZR_TYPE_BF16, ZR_TYPE_Q8_0, ZR_TYPE_Q4_0,
                                 ZR_TYPE_Q4_1, ZR_TYPE_Q5_0, ZR_TYPE_Q5_1, ZR_TYPE_Q2_K, ZR_TYPE_Q3_K,
                                 ZR_TYPE_Q4_K, ZR_TYPE_Q5_K, ZR_TYPE_Q6_K};
static const int sizes[][2] = {{256, 33}, {2048, 2048}, {4096, 1024}, {4096, 4096}, {4096, 28672}, {14336, 4096},
                               {3072, 128256}, {2051, 19}, {5376, 5376}, {27392, 5376}};
static const int sms[] = {1, 26, 132, 170};

ZT_TEST(every_shape_is_a_launch_the_kernel_takes) {
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
            for (size_t d = 0; d < sizeof sms / sizeof sms[0]; d++)
                for (int n = 1; n <= ZR_CUF_MM_COLS; n++) {
                    const int n_in = sizes[z][0], n_out = sizes[z][1], item = (int)zr_type_info(types[t])->item;
                    const ZrMmShape s = zr_cuf_mm_shape(sms[d], n_in, n_out, item, n);
                    ZT_CHECKF(s.groups >= 1 && s.split >= 1 && s.groups * s.split == ZR_CUF_MM_WARPS,
                              "%s [%d x %d] n %d: %d x %d warps", zr_type_name(types[t]), n_in, n_out, n, s.groups,
                              s.split);
                    ZT_CHECKF((s.split & (s.split - 1)) == 0, "split %d: a power of two", s.split);
                    ZT_CHECKF(s.chunk >= ZR_CUF_MM_UNIT && s.chunk % ZR_CUF_MM_UNIT == 0, "chunk %d", s.chunk);
                    /* every lane of every warp has an item in a whole chunk */
                    ZT_CHECKF(s.split == 1 || s.chunk / item >= 32 * s.split, "%s chunk %d split %d",
                              zr_type_name(types[t]), s.chunk, s.split);
                    /* no chunk longer than the row needs */
                    ZT_CHECKF(s.chunk < n_in + ZR_CUF_MM_UNIT, "chunk %d for rows of %d", s.chunk, n_in);
                    ZT_CHECKF(zr_cuf_mm_smem(s, n) <= zr_cuf_mm_smem_max(), "%zu bytes over the %zu raised at load",
                              zr_cuf_mm_smem(s, n), zr_cuf_mm_smem_max());
                    ZT_CHECKF(zr_cuf_mm_smem(s, n) <= ZR_CUF_MM_SMEM_BUDGET || s.chunk == ZR_CUF_MM_UNIT,
                              "n %d chunk %d: %zu bytes over the budget", n, s.chunk, zr_cuf_mm_smem(s, n));
                }
}

ZT_TEST(the_shared_memory_is_n_padded_rows_of_a_chunk) {
    /* 4 floats after every 32 values (cu/matvec.cuh zr_xpad) */
    const ZrMmShape s = {.groups = 8, .split = 1, .chunk = 2048};
    ZT_CHECK(zr_cuf_mm_smem(s, 1) == 2304 * 4);
    ZT_CHECK(zr_cuf_mm_smem(s, 8) == 8 * 2304 * 4);
    /* below 227 KiB (an H100's per-block limit) with room for the kernel's static arrays */
    ZT_CHECK(zr_cuf_mm_smem_max() + 2048 <= 227 * 1024);
}

ZT_TEST(short_k_and_v_projections_split_their_rows_to_fill_the_device) {
    /* Llama-3-8B's 1024-row K/V at one row of x on 132 multiprocessors: 64 blocks of 16 rows
     * unsplit; the shape splits until the grid has 2 blocks per multiprocessor */
    const ZrMmShape s = zr_cuf_mm_shape(132, 4096, 1024, 32, 1);
    ZT_CHECK(s.split > 1);
    ZT_CHECK((1024 / 2 + s.groups - 1) / s.groups >= 132);
    /* at 5 rows of x the 2048-value chunk's 64 items per row stop it at 2 (zrun-mm-bench: as
     * fast as any split there) */
    const ZrMmShape kv = zr_cuf_mm_shape(132, 4096, 1024, 32, 5);
    ZT_CHECK(kv.groups == 4 && kv.split == 2);
    /* the FFN's 14336 rows fill it unsplit */
    ZT_CHECK(zr_cuf_mm_shape(132, 4096, 14336, 32, 8).split == 1);
    /* more rows of x, smaller chunks: 8 rows of 4096 values in 2048-value chunks */
    ZT_CHECK(zr_cuf_mm_shape(132, 4096, 4096, 32, 8).chunk == 2048);
    ZT_CHECK(zr_cuf_mm_shape(132, 4096, 4096, 32, 1).chunk == 4096);
}

/* 8B's 4096-row Q, attention output and FFN down make 256 blocks of 8 row groups on an H100's
 * 132 multiprocessors: unsplit (8 x 1), which zrun-mm-bench measured ~10-25% faster than the
 * 4 x 2 that a 2-blocks-per-multiprocessor rule gave them (Q6_K wo at n 5: 23.4 us, 30.4 us) */
ZT_TEST(matrices_of_at_least_one_block_per_multiprocessor_stay_unsplit) {
    const int mats[][2] = {{4096, 4096}, {14336, 4096}, {4096, 28672}};
    for (int m = 0; m < 3; m++)
        for (int n = 2; n <= ZR_CUF_MM_COLS; n++) {
            const ZrMmShape s = zr_cuf_mm_shape(132, mats[m][0], mats[m][1], 32, n);
            ZT_CHECKF(s.groups == ZR_CUF_MM_WARPS && s.split == 1, "[%d x %d] n %d: %d x %d", mats[m][0], mats[m][1],
                      n, s.groups, s.split);
        }
    /* Llama-3.2-1B's 2048-row Q at 132: 128 blocks unsplit, fewer than the multiprocessors */
    ZT_CHECK(zr_cuf_mm_shape(132, 2048, 2048, 32, 5).split == 2);
}

/* The prefill's choice: quantized (and BF16) weights times at most 8 rows, within the shared
 * memory the kernels were given; F32 and F16 stay cuBLASLt's, and so does every longer prompt. */
ZT_TEST(the_prefill_takes_the_small_product_for_quantized_weights_and_up_to_8_rows) {
    ZrCuKernels k;
    memset(&k, 0, sizeof k);
    k.sm_count = 132;
    k.mm_smem = zr_cuf_mm_smem_max();
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) k.has_mm[types[t]] = true;
    ZrCuWeight w = {.type = ZR_TYPE_Q4_K, .n_in = 4096, .n_out = 4096};
    for (int n = 1; n <= ZR_CUF_MM_COLS; n++) ZT_CHECKF(zr_cuf_mm_takes(&k, &w, n), "n %d", n);
    ZT_CHECK(!zr_cuf_mm_takes(&k, &w, 0));
    ZT_CHECK(!zr_cuf_mm_takes(&k, &w, ZR_CUF_MM_COLS + 1));
    ZT_CHECK(!zr_cuf_mm_takes(&k, &w, 512));
    w.type = ZR_TYPE_BF16;
    ZT_CHECK(zr_cuf_mm_takes(&k, &w, 5));
    w.type = ZR_TYPE_F16;
    ZT_CHECK(!zr_cuf_mm_takes(&k, &w, 5));
    w.type = ZR_TYPE_F32;
    ZT_CHECK(!zr_cuf_mm_takes(&k, &w, 5));
    /* a GPU left at 47 KiB: the rows whose staging fits it only */
    w.type = ZR_TYPE_Q4_0;
    k.mm_smem = 47 * 1024;
    ZT_CHECK(zr_cuf_mm_takes(&k, &w, 1));
    ZT_CHECK(!zr_cuf_mm_takes(&k, &w, ZR_CUF_MM_COLS));
    for (int n = 1; n <= ZR_CUF_MM_COLS; n++) {
        const ZrMmShape s = zr_cuf_mm_shape(k.sm_count, w.n_in, w.n_out, 32, n);
        ZT_CHECKF(zr_cuf_mm_takes(&k, &w, n) == (zr_cuf_mm_smem(s, n) <= k.mm_smem), "n %d", n);
    }
    /* no kernel for the type (a build without it): never */
    k.mm_smem = zr_cuf_mm_smem_max();
    k.has_mm[ZR_TYPE_Q4_0] = false;
    ZT_CHECK(!zr_cuf_mm_takes(&k, &w, 1));
}

int main(void) { return zt_run(); }
