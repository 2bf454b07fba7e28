/* The decode product's launch shape (cuda/mv_shape.h zr_cuf_mv_shape) on an H200's 132
 * multiprocessors: the picks sessions 9, 11, 18, 19 and 40 measured in the model (cu/PERF.md). Rows
 * too short for the 4 KiB split rule split in two on blocks of 8 row groups (from 2 KiB a warp's
 * half, the K-quants from 1 KiB; an expert's matrix from 2 KiB on blocks of 4); a split grid of 1 to
 * 2 such blocks a multiprocessor takes blocks of 16 (1024 threads), one a multiprocessor (session
 * 19), or ceil(row groups / SMs) where those would leave a third of the SMs idle (session 40); F16
 * and Q8_0 take the tall kernel from 2 waves of tiles, every other type from 8, and quantized
 * gate|up products from 1 where a lane has 2 items of a row (session 40; 3 in Q6_K and Q3_K,
 * session 12) or 2.5 (sessions 16, 19 and 20; not Q6_K, Q3_K); quantized types run it on 2 blocks
 * of 16 row groups a multiprocessor (1 where the kernel holds no block of 1024 threads: the
 * experts' Q5_0, Q5_1), F16 on 4 of 8; a product that writes SSQ pieces is never tall. A split
 * grid of at most one block a multiprocessor asks for over half of a multiprocessor's shared
 * memory (session 39). No GPU needed: the pick reads only sizes, types and the multiprocessor
 * count; the launch is recorded on the driver double. */

#include "cuda/klaunch.h"
#include "cuda/launch.h"
#include "cuda/module.h"
#include "cuda/mv_shape.h"
#include "quant.h"
#include "test_launch_double.h"
#include "zt.h"
#include "zt_kattrs.h"

/* the pick for a matrix of n_out rows of n_in values: groups x split, blocks (0: a block per tile) */
static ZrMvShape pick(uint32_t type, int n_in, int n_out, int mode) {
    const ZrCuKernels k = zt_kernels(132);
    const ZrCuWeight w = {.type = type, .n_in = n_in, .n_out = n_out};
    return zr_cuf_mv_shape(&k, &w, mode);
}

static void check(uint32_t type, int n_in, int n_out, int mode, int groups, int split, int blocks) {
    const ZrMvShape s = pick(type, n_in, n_out, mode);
    ZT_CHECKF(s.groups == groups && s.split == split && s.blocks == blocks,
              "%s [%d x %d] mode %d: %dx%d on %d blocks, expected %dx%d on %d", zr_type_name(type), n_in, n_out, mode,
              s.groups, s.split, s.blocks, groups, split, blocks);
}

ZT_TEST(q8_0_rows_of_1928_to_3855_values_split_in_two_on_eight_row_groups) {
    const int P = ZR_CUF_MV_PLAIN, R = ZR_CUF_MV_RMSNORM, S = ZR_CUF_MV_SSQ;
    check(ZR_TYPE_Q8_0, 2048, 2048, P, 8, 2, 0); /* llama3.2-1b wo: 128 blocks */
    check(ZR_TYPE_Q8_0, 2048, 3072, R, 8, 2, 0); /* its QKV: 192 blocks, normed x */
    /* llama3.2-3b's wo and gemma3-4b's (with its sums of squares): 1 to 2 blocks of 8 row groups
     * a multiprocessor, so blocks of 16 (96 of them), or one a multiprocessor where those would
     * leave a third idle (gemma3-4b: 80 of 16, 128 of 10) */
    check(ZR_TYPE_Q8_0, 3072, 3072, P, 16, 2, 0);
    check(ZR_TYPE_Q8_0, 2048, 2560, S, 10, 2, 0);
    /* a grid of 16 warps a multiprocessor already (3b QKV: 2560 row pairs) does not split */
    check(ZR_TYPE_Q8_0, 3072, 5120, R, 8, 1, 0);
    /* rows long enough for the 4 KiB rule keep its split (llama3-8b wo: 16x2) */
    check(ZR_TYPE_Q8_0, 4096, 4096, P, 16, 2, 0);
    /* rows shorter than 1928 values do not split */
    check(ZR_TYPE_Q8_0, 1024, 1024, P, 8, 1, 0);
    /* rows of 1-2 KiB a warp's half split in the K-quants alone, shorter ones in no type */
    check(ZR_TYPE_Q4_0, 2048, 2048, P, 8, 1, 0);
    check(ZR_TYPE_Q4_K, 2048, 2048, P, 8, 2, 0); /* llama3.2-1b Q4_K_M wo: 1152 B */
    check(ZR_TYPE_Q4_K, 1024, 1024, P, 8, 1, 0);
    check(ZR_TYPE_F16, 2048, 2048, P, 8, 2, 0); /* 4 KiB a warp: the rule's own split */
}

ZT_TEST(short_rows_of_every_type_split_in_two_the_general_rule_only_q8_0s) {
    const int P = ZR_CUF_MV_PLAIN, R = ZR_CUF_MV_RMSNORM;
    check(ZR_TYPE_Q4_K, 4096, 2048, P, 8, 2, 0);  /* qwen3-30b-a3b wo: 2304 B a row */
    check(ZR_TYPE_Q4_K, 4096, 4096, P, 16, 2, 0); /* llama3-8b wo (blocks of 16: 128 of them) */
    check(ZR_TYPE_Q6_K, 2560, 1024, R, 8, 2, 0);  /* gemma3-4b Q4_K_M's v: 2100 B */
    check(ZR_TYPE_Q4_K, 3072, 3072, P, 16, 2, 0); /* llama3.2-3b wo: 1728 B, a K-quant's from 1 KiB */
    check(ZR_TYPE_Q4_0, 3072, 3072, P, 8, 1, 0); /* 1728 B of Q4_0: too short */
    check(ZR_TYPE_Q4_K, 4096, 5120, R, 8, 1, 0); /* 2560 row pairs: 16 warps a multiprocessor already */
    const ZrCuKernels k = zt_kernels(132);
    const ZrCuWeight q4 = {.type = ZR_TYPE_Q4_K, .n_in = 4096, .n_out = 2048}, q8 = {.type = ZR_TYPE_Q8_0, .n_in = 2048, .n_out = 2048};
    const ZrMvShape g4 = zr_cuf_mv_shape_general(&k, &q4, P), g8 = zr_cuf_mv_shape_general(&k, &q8, P);
    ZT_CHECK(g4.groups == 8 && g4.split == 1 && g8.groups == 4 && g8.split == 2);
}

/* A split grid of blocks of 8 row groups that takes 1 to 2 of them a multiprocessor (133 to 264
 * blocks on 132) takes blocks of 16 row groups (1024 threads, one a multiprocessor: x staged once
 * an SM; session 19): a dense product of x as is (or SwiGLU's) only, in types whose kernel holds
 * 1024 threads (every dense one since session 29; not the experts' Q5_0 and Q5_1, at 72 and 119
 * registers). */
ZT_TEST(a_split_grid_of_one_to_two_blocks_an_sm_takes_blocks_of_1024_threads) {
    const int P = ZR_CUF_MV_PLAIN;
    check(ZR_TYPE_Q4_K, 14336, 4096, P, 16, 2, 0); /* llama3-8b down: 2048 row groups */
    check(ZR_TYPE_Q4_K, 14336, 4096, ZR_CUF_MV_SWIGLU, 16, 2, 0);
    check(ZR_TYPE_Q4_K, 14336, 4096, ZR_CUF_MV_PLAIN | ZR_CUF_MV_SSQ, 16, 2, 0);
    /* normed x keeps blocks of 8 (the RMSNorm's sum in the block's order; a mix launch's parts) */
    check(ZR_TYPE_Q4_K, 14336, 4096, ZR_CUF_MV_RMSNORM, 8, 2, 0);
    check(ZR_TYPE_Q4_K, 14336, 4096, ZR_CUF_MV_ADDNORM, 8, 2, 0);
    check(ZR_TYPE_Q6_K, 14336, 4096, P, 16, 2, 0);
    check(ZR_TYPE_Q4_K, 4096, 2 * 2111, P, 16, 2, 0);   /* 264 blocks of 8, 132 of 16 */
    check(ZR_TYPE_Q4_K, 4096, 2 * 2112, P, 8, 1, 0);    /* 16 warps an SM: no split */
    check(ZR_TYPE_Q4_K, 4096, 2 * 8 * 132, P, 8, 2, 0); /* 132 blocks of 8: one an SM already */
    check(ZR_TYPE_Q4_K, 4096, 2 * 8 * 132 + 2, P, 9, 2, 0); /* 133 blocks of 8: 118 of 9 (67 of 16) */
    check(ZR_TYPE_Q5_0, 14336, 4096, P, 16, 2, 0); /* 64 registers since session 29 */
    check(ZR_TYPE_Q5_1, 14336, 4096, P, 16, 2, 0);
    /* the general rule and an expert's matrix keep their blocks */
    const ZrCuKernels k = zt_kernels(132);
    ZT_CHECK(zr_cuf_kernel_max_threads(&k.mv_id[ZR_TYPE_Q5_0]) < 1024 && zr_cuf_kernel_max_threads(&k.mv_id[ZR_TYPE_Q5_1]) < 1024 &&
             zr_cuf_kernel_max_threads(&k.mv[ZR_TYPE_Q4_K]) == 1024 && zr_cuf_kernel_max_threads(&k.mv[ZR_TYPE_F16]) == 1024);
    const ZrCuWeight dn = {.type = ZR_TYPE_Q8_0, .n_in = 14336, .n_out = 4096};
    const ZrMvShape g = zr_cuf_mv_shape_general(&k, &dn, P), e = zr_cuf_mv_shape_expert(&k, &dn, P);
    ZT_CHECKF(g.groups == 8 && g.split == 2 && e.groups == 8 && e.split == 2, "general %dx%d, expert %dx%d", g.groups,
              g.split, e.groups, e.split);
}

/* Where those blocks of 16 row groups leave a third of the multiprocessors or more idle, the row
 * groups go to one block a multiprocessor: ceil(groups / SMs) a block, any count (cu/matvec.cuh
 * finds a one-tile block's first row group by a multiply). H200 (cu/PERF.md session 40):
 * Gemma-3-4B Q4_K_M +2.1%, Q8_0 +1.45%; Llama-3.2-3B's 96 and Gemma-3-12B's 120 blocks of 16 keep
 * them (Q8_0, Q3_K_M and Gemma-3-12B lost with blocks of 12 and 15). */
ZT_TEST(a_split_grid_whose_blocks_of_16_leave_a_third_of_the_sms_idle_takes_one_block_an_sm) {
    const int P = ZR_CUF_MV_PLAIN, SW = ZR_CUF_MV_SWIGLU;
    check(ZR_TYPE_Q4_K, 2048, 2560, P, 10, 2, 0);  /* gemma3-4b wo: 80 blocks of 16, 128 of 10 */
    check(ZR_TYPE_Q6_K, 10240, 2560, SW, 10, 2, 0); /* its down */
    check(ZR_TYPE_Q8_0, 10240, 2560, P, 10, 2, 0);  /* its Q8_0 down */
    check(ZR_TYPE_Q4_K, 9216, 2304, P, 9, 2, 0);    /* gemma2-2b down: 72 of 16, 128 of 9 */
    check(ZR_TYPE_Q4_K, 8192, 2 * 88 * 16, P, 11, 2, 0); /* 88 blocks of 16 (two thirds): 128 of 11 */
    check(ZR_TYPE_Q4_K, 8192, 2 * 89 * 16, P, 16, 2, 0); /* 89 stay */
    check(ZR_TYPE_Q4_K, 8192, 3072, SW, 16, 2, 0);  /* llama3.2-3b down: 96 of 16 stay */
    check(ZR_TYPE_Q4_K, 15360, 3840, SW, 16, 2, 0); /* gemma3-12b down: 120 of 16 stay */
    check(ZR_TYPE_Q4_K, 14336, 4096, SW, 16, 2, 0); /* llama3-8b down: 128 of 16 already */
    check(ZR_TYPE_Q4_K, 8192, 2048, SW, 8, 2, 0);   /* llama3.2-1b down: 128 of 8, never larger */
    check(ZR_TYPE_Q4_K, 8192, 3072, ZR_CUF_MV_RMSNORM, 8, 2, 0); /* normed x keeps blocks of 8 */
    const ZrCuKernels k = zt_kernels(132);
    const ZrCuWeight dn = {.type = ZR_TYPE_Q6_K, .n_in = 10240, .n_out = 2560};
    const ZrMvShape s = zr_cuf_mv_shape(&k, &dn, SW);
    ZT_CHECKF(zr_cuf_mv_grid(&dn, SW, s) == 128, "%u blocks", zr_cuf_mv_grid(&dn, SW, s));
    /* on a GPU of 114 multiprocessors (an H100 PCIe) the same down's 80 blocks of 16 leave less than
     * a third idle; gemma2-2b's 72 go to 105 blocks of 11 */
    const ZrCuKernels k114 = zt_kernels(114);
    const ZrMvShape s114 = zr_cuf_mv_shape(&k114, &dn, SW);
    ZT_CHECKF(s114.groups == 16, "%dx%d", s114.groups, s114.split);
    const ZrCuWeight g2 = {.type = ZR_TYPE_Q4_K, .n_in = 9216, .n_out = 2304};
    const ZrMvShape t114 = zr_cuf_mv_shape(&k114, &g2, P);
    ZT_CHECKF(t114.groups == 11 && zr_cuf_mv_grid(&g2, P, t114) == 105, "%dx%d on %u blocks", t114.groups,
              t114.split, zr_cuf_mv_grid(&g2, P, t114));
}

/* An expert's matrix splits short rows from 2 KiB a warp's half only, on blocks of 4 row groups:
 * qwen3-30b-a3b's gate|up of one expert (2048 wide, 1152 B a half) lost 16% split (session 18). */
ZT_TEST(an_expert_matrix_splits_short_rows_from_2_kib_on_four_row_groups) {
    const ZrCuKernels k = zt_kernels(132);
    const ZrCuWeight gu = {.type = ZR_TYPE_Q4_K, .n_in = 2048, .n_out = 1536}, wo = {.type = ZR_TYPE_Q4_K, .n_in = 4096, .n_out = 2048};
    const ZrMvShape a = zr_cuf_mv_shape_expert(&k, &gu, ZR_CUF_MV_RMSNORM | ZR_CUF_MV_GLU);
    const ZrMvShape b = zr_cuf_mv_shape_expert(&k, &wo, ZR_CUF_MV_PLAIN), c = zr_cuf_mv_shape(&k, &gu, ZR_CUF_MV_RMSNORM | ZR_CUF_MV_GLU);
    ZT_CHECKF(a.groups == 8 && a.split == 1 && a.blocks == 0, "gate|up %dx%d on %d", a.groups, a.split, a.blocks);
    ZT_CHECKF(b.groups == 4 && b.split == 2 && b.blocks == 0, "2304 B rows %dx%d on %d", b.groups, b.split, b.blocks);
    ZT_CHECKF(c.groups == 8 && c.split == 2, "the dense rule splits the same matrix: %dx%d", c.groups, c.split);
}

/* The expert kernels have no tall form: Mixtral's expert gate|up (4096 x 28672, 1792 tiles) keeps
 * blocks of 8 row groups where a dense matrix of its shape is tall (session 19: the tall shape's
 * blocks of 512 threads gave the flat grid one block an SM). */
ZT_TEST(an_expert_matrix_never_takes_the_tall_shape) {
    const ZrCuKernels k = zt_kernels(132);
    const ZrCuWeight gu = {.type = ZR_TYPE_Q4_K, .n_in = 4096, .n_out = 28672};
    const int glu = ZR_CUF_MV_RMSNORM | ZR_CUF_MV_GLU;
    const ZrMvShape e = zr_cuf_mv_shape_expert(&k, &gu, glu), d = zr_cuf_mv_shape(&k, &gu, glu);
    ZT_CHECKF(e.groups == 8 && e.split == 1 && e.blocks == 0, "expert %dx%d on %d", e.groups, e.split, e.blocks);
    ZT_CHECKF(d.blocks == 2 * 132, "dense on %d blocks", d.blocks);
    const ZrCuWeight q8 = {.type = ZR_TYPE_Q8_0, .n_in = 4096, .n_out = 28672};
    ZT_CHECK(zr_cuf_mv_shape_expert(&k, &q8, glu).blocks == 0);
}

/* An expert's down over its slots (zr_k_matvec_id, the mix fused): where one expert's shape splits
 * but every slot's row groups fit one block of 32 an SM, blocks of 32 row groups unsplit (session
 * 20: Mixtral's down, 128 blocks in one round instead of 512 in two). */
ZT_TEST(an_experts_down_over_its_slots_takes_one_block_of_1024_threads_an_sm) {
    const ZrCuKernels k = zt_kernels(132);
    const int P = ZR_CUF_MV_PLAIN, SW = ZR_CUF_MV_SWIGLU;
    const ZrCuWeight q4 = {.type = ZR_TYPE_Q4_K, .n_in = 14336, .n_out = 4096}, q6 = {.type = ZR_TYPE_Q6_K, .n_in = 14336, .n_out = 4096};
    const ZrMvShape one = zr_cuf_mv_shape_expert(&k, &q4, P);
    ZT_CHECKF(one.groups == 8 && one.split == 2, "mixtral down, one expert: %dx%d", one.groups, one.split);
    for (int m = 0; m < 2; m++) {
        const int mode = m ? SW : P;
        const ZrMvShape a = zr_cuf_mv_shape_expert_slots(&k, &q4, mode, 2), b = zr_cuf_mv_shape_expert_slots(&k, &q6, mode, 2);
        ZT_CHECKF(a.groups == 32 && a.split == 1 && a.blocks == 0, "q4_K down, 2 slots: %dx%d", a.groups, a.split);
        ZT_CHECKF(b.groups == 32 && b.split == 1 && b.blocks == 0, "q6_K down, 2 slots: %dx%d", b.groups, b.split);
    }
    /* 2 slots x 64 blocks of 32 row groups fit 132 SMs; 3 slots (192) do not: one expert's shape */
    const ZrMvShape three = zr_cuf_mv_shape_expert_slots(&k, &q4, P, 3);
    ZT_CHECK(three.groups == one.groups && three.split == one.split && three.blocks == 0);
    const ZrCuKernels k130 = zt_kernels(130); /* 128 blocks on 130 SMs: still one round */
    ZT_CHECK(zr_cuf_mv_shape_expert_slots(&k130, &q4, P, 2).groups == 32);
    /* the experts' Q5_0 and Q5_1 hold no block of 1024 threads; a GLU product and an unsplit expert keep theirs */
    const ZrCuWeight q5 = {.type = ZR_TYPE_Q5_0, .n_in = 14336, .n_out = 4096};
    const ZrMvShape q5s = zr_cuf_mv_shape_expert_slots(&k, &q5, P, 2), q5e = zr_cuf_mv_shape_expert(&k, &q5, P);
    ZT_CHECK(q5s.groups == q5e.groups && q5s.split == q5e.split);
    const ZrCuWeight gu = {.type = ZR_TYPE_Q4_K, .n_in = 4096, .n_out = 28672};
    const int glu = ZR_CUF_MV_RMSNORM | ZR_CUF_MV_GLU;
    ZT_CHECK(zr_cuf_mv_shape_expert_slots(&k, &gu, glu, 2).groups == zr_cuf_mv_shape_expert(&k, &gu, glu).groups);
    const ZrCuWeight q30 = {.type = ZR_TYPE_Q6_K, .n_in = 768, .n_out = 2048}; /* qwen3-30b-a3b's down: 8 slots */
    const ZrMvShape q30s = zr_cuf_mv_shape_expert_slots(&k, &q30, P, 8), q30e = zr_cuf_mv_shape_expert(&k, &q30, P);
    ZT_CHECK(q30s.groups == q30e.groups && q30s.split == q30e.split);
}

/* The flat expert gate|up's grid: the blocks 132 multiprocessors hold of the type's flat kernel (its
 * registers: 72 for Q4_K, 3 blocks of 256 threads and 1 of 512; 64 for Q8_0, 4 of 256), at most 1024
 * threads an SM, the tiles spread evenly over as few rounds a block as fit. */
ZT_TEST(the_flat_expert_grid_is_the_blocks_the_sms_hold_of_its_kernel) {
    const ZrCuKernels k = zt_kernels(132);
    const ZrKernel *q4 = &k.mv_idflat[ZR_TYPE_Q4_K], *q8 = &k.mv_idflat[ZR_TYPE_Q8_0];
    const ZrMvShape s8 = {.groups = 8, .split = 1}, s16 = {.groups = 16, .split = 1};
    ZT_CHECKF(zr_cuf_mv_flat_blocks(&k, q4, 3584, s8) == 359, "mixtral: %u", zr_cuf_mv_flat_blocks(&k, q4, 3584, s8)); /* 10 tiles each */
    ZT_CHECKF(zr_cuf_mv_flat_blocks(&k, q4, 768, s8) == 384, "qwen3-30b-a3b: %u", zr_cuf_mv_flat_blocks(&k, q4, 768, s8));
    ZT_CHECK(zr_cuf_mv_flat_blocks(&k, q8, 768, s8) == 384); /* its Q8_0 file: 528 resident, the same grid */
    ZT_CHECK(zr_cuf_mv_flat_blocks(&k, q4, 396, s8) == 396 && zr_cuf_mv_flat_blocks(&k, q4, 397, s8) == 199);
    ZT_CHECK(zr_cuf_mv_flat_blocks(&k, q8, 528, s8) == 528 && zr_cuf_mv_flat_blocks(&k, q8, 529, s8) == 265);
    ZT_CHECK(zr_cuf_mv_flat_blocks(&k, q4, 1, s8) == 1);
    ZT_CHECK(zr_cuf_mv_flat_blocks(&k, q4, 1792, s16) == 128); /* 132 resident: 14 tiles each */
    /* residency by registers: 64 -> 4 blocks of 256 (2048 threads allow 8), 72 -> 3, 80 -> 3, 128 -> 2 */
    ZT_CHECK(zr_cuf_kernel_blocks_per_sm(q8, 256) == 4 && zr_cuf_kernel_blocks_per_sm(q4, 256) == 3 &&
             zr_cuf_kernel_blocks_per_sm(q4, 512) == 1 && zr_cuf_kernel_blocks_per_sm(q8, 1024) == 1);
    ZT_CHECK(zr_cuf_kernel_blocks_per_sm(&k.mv_idflat[ZR_TYPE_Q5_1], 256) == 2 && zr_cuf_kernel_blocks_per_sm(&k.mv_idflat[ZR_TYPE_Q5_1], 1024) == 0);
    const ZrKernel unknown = {.regs = 0, .max_threads = 0}; /* a driver that reported nothing: 64, 1024 */
    ZT_CHECK(zr_cuf_kernel_blocks_per_sm(&unknown, 256) == 4 && zr_cuf_kernel_max_threads(&unknown) == 1024);
}

ZT_TEST(f16_and_q8_0_take_the_tall_kernel_from_two_waves_of_tiles_other_types_from_eight) {
    const int GLU = ZR_CUF_MV_RMSNORM | ZR_CUF_MV_GLU, blocks = 4 * 132, two = 2 * blocks, q = 2 * 132;
    /* llama3-8b gate|up: 14336 results, 1792 tiles of 8 row groups (3.4 waves); quantized types
     * on 2 blocks of 16 row groups a multiprocessor, F16 on 4 of 8 (Q4_0: 2.5 items a lane, below) */
    check(ZR_TYPE_Q8_0, 4096, 28672, GLU, 16, 1, q);
    check(ZR_TYPE_F16, 4096, 28672, GLU, 8, 1, blocks);
    check(ZR_TYPE_Q6_K, 4096, 28672, GLU, 8, 1, 0);
    check(ZR_TYPE_BF16, 4096, 28672, GLU, 8, 1, 0);
    /* gemma3-4b gate|up with the post norm folded in: 1280 tiles */
    check(ZR_TYPE_Q8_0, 2560, 20480, ZR_CUF_MV_ADDNORM | ZR_CUF_MV_GLU | ZR_CUF_MV_GELU, 16, 1, q);
    /* exactly 2 waves of tiles (GLU: 8 results a tile) */
    check(ZR_TYPE_Q8_0, 4096, 2 * 8 * two, GLU, 16, 1, q);
    check(ZR_TYPE_F16, 4096, 2 * 8 * two, GLU, 8, 1, blocks);
    check(ZR_TYPE_F16, 4096, 2 * 8 * (two - 1), GLU, 8, 1, 0);
    /* a vocabulary output takes it in every type (8 waves and more) */
    check(ZR_TYPE_Q4_K, 4096, 128256, ZR_CUF_MV_RMSNORM, 16, 1, q);
    check(ZR_TYPE_Q6_K, 2560, 262144, ZR_CUF_MV_RMSNORM, 16, 1, q);
    check(ZR_TYPE_F16, 2048, 128256, ZR_CUF_MV_RMSNORM, 8, 1, blocks);
}

/* Session 12: from 3 items a lane (Q6_K and Q3_K); session 40: from 2 in the other types */
ZT_TEST(quantized_gate_up_of_one_to_two_waves_is_tall_from_two_items_a_lane_q6_k_q3_k_from_three) {
    const int GLU = ZR_CUF_MV_RMSNORM | ZR_CUF_MV_GLU, blocks = 4 * 132, q = 2 * 132;
    /* llama3.2-3b / 1b gate|up: 8192 results, 1024 tiles (1.9 waves) */
    check(ZR_TYPE_Q4_K, 3072, 16384, GLU, 16, 1, q); /* 96 items a row: 3 a lane */
    check(ZR_TYPE_Q8_0, 3072, 16384, GLU, 16, 1, q);
    check(ZR_TYPE_Q8_0, 2048, 16384, GLU, 16, 1, q); /* 128 items: 4 a lane */
    check(ZR_TYPE_Q4_K, 2048, 16384, GLU, 16, 1, q); /* 64 items: 2 a lane (llama3.2-1b, +5.1%) */
    check(ZR_TYPE_Q4_0, 2048, 16384, GLU, 16, 1, q);
    check(ZR_TYPE_Q5_K, 2048, 16384, GLU, 16, 1, q);
    check(ZR_TYPE_Q6_K, 2048, 16384, GLU, 8, 1, 0);  /* Q6_K from 3 (-4.1% with 2) */
    check(ZR_TYPE_Q6_K, 3072, 16384, GLU, 16, 1, q);
    check(ZR_TYPE_Q4_K, 1536, 16384, GLU, 8, 1, 0);  /* 48 items: 1.5 a lane */
    check(ZR_TYPE_F16, 3072, 16384, GLU, 8, 1, 0);   /* F16 from 2 waves */
    /* one wave of tiles exactly, and one tile fewer */
    check(ZR_TYPE_Q4_K, 3072, 2 * 8 * blocks, GLU, 16, 1, q);
    check(ZR_TYPE_Q4_K, 3072, 2 * 8 * (blocks - 1), GLU, 8, 1, 0);
    /* the same rows without GLU (a plain product of 1.9 waves) keep a block per tile */
    check(ZR_TYPE_Q4_K, 3072, 2 * 8 * 1024, ZR_CUF_MV_RMSNORM, 8, 1, 0);
}

/* Sessions 16, 19 and 20: from 2.5 items a lane in any number of waves, every quantized type but Q6_K
 * and Q3_K (Q5_0 and Q5_1 on two blocks an SM too since session 29: 64 registers) */
ZT_TEST(gate_up_of_one_wave_and_more_is_tall_from_two_and_a_half_items_a_lane) {
    const int GLU = ZR_CUF_MV_RMSNORM | ZR_CUF_MV_GLU, blocks = 4 * 132, q = 2 * 132;
    /* gemma3-4b: 10240 results of 2560 values (80 items), 1280 tiles (2.4 waves); qwen3-4b 1216 tiles */
    check(ZR_TYPE_Q4_K, 2560, 20480, ZR_CUF_MV_ADDNORM | ZR_CUF_MV_GLU, 16, 1, q);
    check(ZR_TYPE_Q4_K, 2560, 19456, GLU, 16, 1, q);
    /* llama3-8b (3.4 waves), a qwen2.5-7b (18944 results: 4.5 waves) and 9 waves */
    check(ZR_TYPE_Q4_K, 4096, 28672, GLU, 16, 1, q);
    check(ZR_TYPE_Q4_K, 3584, 37888, GLU, 16, 1, q);
    check(ZR_TYPE_Q4_K, 2560, 2 * 8 * 9 * blocks, GLU, 16, 1, q);
    const uint32_t wide[] = {ZR_TYPE_Q4_0, ZR_TYPE_Q4_1, ZR_TYPE_Q5_K, ZR_TYPE_Q5_0, ZR_TYPE_Q5_1};
    for (int i = 0; i < 5; i++) check(wide[i], 4096, 28672, GLU, 16, 1, q);
    check(ZR_TYPE_Q2_K, 5120, 2 * 13824, GLU, 16, 1, q); /* 80 items of 64 values */
    check(ZR_TYPE_Q2_K, 4096, 28672, GLU, 8, 1, 0);      /* 64: 2 a lane */
    /* one wave of tiles exactly, and one tile fewer */
    check(ZR_TYPE_Q4_0, 2560, 2 * 8 * blocks, GLU, 16, 1, q);
    check(ZR_TYPE_Q4_0, 2560, 2 * 8 * (blocks - 1), GLU, 8, 1, 0);
    /* 2 items a lane (2048 values) stay a block per tile, and Q6_K and Q3_K past 2 waves */
    check(ZR_TYPE_Q4_K, 2048, 20480, GLU, 8, 1, 0);
    check(ZR_TYPE_Q6_K, 2560, 20480, GLU, 8, 1, 0);
    check(ZR_TYPE_Q3_K, 5120, 2 * 13824, GLU, 8, 1, 0);
}

ZT_TEST(a_product_that_writes_sums_of_squares_is_never_tall) {
    /* the tall kernel has no SSQ (cu/matvec.cuh): rows that would be tall take a block per tile */
    const ZrMvShape s = pick(ZR_TYPE_Q8_0, 4096, 28672, ZR_CUF_MV_SSQ);
    ZT_CHECKF(s.blocks == 0, "SSQ product on %d blocks", s.blocks);
    const ZrMvShape v = pick(ZR_TYPE_Q6_K, 2560, 262144, ZR_CUF_MV_SSQ);
    ZT_CHECKF(v.blocks == 0, "SSQ vocabulary-sized product on %d blocks", v.blocks);
}

/* The balanced gate|up product (each block's whole rounds of a result a warp, the rest cut into
 * steps) takes a GLU product on the tall shape where its slowest warp takes fewer steps than the
 * tall product's, in the types that have the kernel (sessions 27-28): Llama-3-8B's 14336 results
 * (3 x 4 + 2 steps against 4 x 4) in Q4_K, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (session 29), Q5_K,
 * Gemma-3-12B's Q8_0 (30 against 32), a 14B's Q2_K; not Q6_K, Q3_K (none), nor Llama-3.2-3B's 8192
 * results (2 x 3 either way), nor a product that is not GLU. */
static bool bal(uint32_t type, int n_in, int n_res, int mode) {
    ZrCuKernels k = zt_kernels(132);
    k.bal_smem = 227 * 1024;
    const ZrCuWeight w = {.type = type, .n_in = n_in, .n_out = 2 * n_res};
    return zr_cuf_mv_bal_takes(&k, &w, mode, zr_cuf_mv_shape(&k, &w, mode));
}

ZT_TEST(the_balanced_gate_up_takes_its_types_where_its_warps_take_fewer_steps) {
    const int GLU = ZR_CUF_MV_RMSNORM | ZR_CUF_MV_GLU;
    const uint32_t takes[] = {ZR_TYPE_Q4_K, ZR_TYPE_Q8_0, ZR_TYPE_Q4_0, ZR_TYPE_Q4_1, ZR_TYPE_Q5_0, ZR_TYPE_Q5_1, ZR_TYPE_Q5_K};
    for (size_t i = 0; i < sizeof takes / sizeof takes[0]; i++)
        ZT_CHECKF(bal(takes[i], 4096, 14336, GLU), "%s: llama3-8b's gate|up not balanced", zr_type_name(takes[i]));
    ZT_CHECK(bal(ZR_TYPE_Q8_0, 3840, 15360, GLU));
    ZT_CHECK(bal(ZR_TYPE_Q2_K, 5120, 13824, GLU));
    const uint32_t keeps[] = {ZR_TYPE_Q6_K, ZR_TYPE_Q3_K, ZR_TYPE_F16};
    for (size_t i = 0; i < sizeof keeps / sizeof keeps[0]; i++)
        ZT_CHECKF(!bal(keeps[i], 4096, 14336, GLU), "%s: llama3-8b's gate|up balanced", zr_type_name(keeps[i]));
    ZT_CHECK(!bal(ZR_TYPE_Q4_K, 3072, 8192, GLU));
    ZT_CHECK(!bal(ZR_TYPE_Q8_0, 3072, 8192, GLU));
    ZT_CHECK(!bal(ZR_TYPE_Q4_K, 4096, 14336, ZR_CUF_MV_RMSNORM));
    /* without room for x beside its remainder sums it takes nothing */
    ZrCuKernels k = zt_kernels(132);
    const ZrCuWeight w = {.type = ZR_TYPE_Q4_0, .n_in = 4096, .n_out = 2 * 14336};
    ZT_CHECK(!zr_cuf_mv_bal_takes(&k, &w, GLU, zr_cuf_mv_shape(&k, &w, GLU)));
    /* a tall kernel whose registers hold one block of 512 an SM runs another wave (132 blocks):
     * its warps' steps do not compare, and it keeps the tall product */
    k.bal_smem = 227 * 1024;
    ZT_CHECK(zr_cuf_mv_bal_takes(&k, &w, GLU, zr_cuf_mv_shape(&k, &w, GLU)));
    k.mvt[ZR_TYPE_Q4_0].regs = k.mvt_rn[ZR_TYPE_Q4_0].regs = 80; /* (its gate|up runs the RMSNORM twin) */
    const ZrMvShape one = zr_cuf_mv_shape(&k, &w, GLU);
    ZT_CHECKF(one.blocks == 132 && !zr_cuf_mv_bal_takes(&k, &w, GLU, one), "tall on %d blocks", one.blocks);
}

/* cu/matvec.cuh finds a warp's split-K part by shifts, and a tall block its tiles: a launch whose
 * split is not a power of two, or a tall one whose row groups are not, is refused before anything
 * is launched (no launcher needed); a one-tile launch of 10 row groups is not (test below) */
ZT_TEST(a_launch_shape_that_is_not_a_power_of_two_is_refused) {
    const ZrKernel kern = {.name = "matvec_q4_k"};
    const ZrCuWeight w = {.type = ZR_TYPE_Q4_K, .n_in = 4096, .n_out = 1024};
    const ZrMvShape bad[] = {{.groups = 3, .split = 1, .blocks = 264}, {.groups = 8, .split = 3}, {.groups = 6, .split = 2, .blocks = 132},
                             {.groups = 0, .split = 2}};
    for (int i = 0; i < 4; i++) {
        ZrError e = {0};
        ZT_CHECK(zr_k_matvec(NULL, &kern, 2, &w, 0, 0, 0, 0, 0.0f, ZR_CUF_MV_PLAIN, bad[i], NULL, &e) != 0);
        ZT_CHECK(e.code == ZR_E_INTERNAL);
    }
}

/* cu/moe_matvec_mix.cu walks a warp's (slot, item) pairs a whole row at a time: rows of no values
 * would never end the walk, so the fused down refuses them (and takes what Qwen3-30B-A3B has) */
ZT_TEST(the_fused_expert_down_refuses_rows_of_no_values) {
    const ZrCuWeight empty = {.type = ZR_TYPE_F32, .n_in = 0, .n_out = 2048};
    ZT_CHECK(!zr_k_matvec_id_mix_fits(&empty, 8));
    ZrError e = {0};
    const ZrKernel kern = {.name = "matvec_id_mix_f32"};
    ZT_CHECK(zr_k_matvec_id_mix(NULL, &kern, &empty, 16, 0, 8, 0, 0, 0, &e) != 0);
    ZT_CHECK(e.code == ZR_E_INTERNAL);
    const ZrCuWeight down = {.type = ZR_TYPE_Q4_K, .n_in = 768, .n_out = 128 * 2048};
    ZT_CHECK(zr_k_matvec_id_mix_fits(&down, 8));
}

int main(void) { return zt_run(); }

/* The narrow products (a split grid of at most one block a multiprocessor, of blocks two of which
 * could share one: Llama-3.2-1B's wo and down, 128 blocks of 512 threads) ask for over half of a
 * multiprocessor's shared memory, so no two of their blocks share one (H200: the 1B's down on 128
 * multiprocessors, not 80; cu/PERF.md session 39). Blocks one a multiprocessor by their registers
 * (Gemma-3-4B's wo, 128 of 640 threads; Llama-3.2-3B's, 96 of 1024), wider grids (a Q6_K gate|up
 * of the 1B's shape), tall shapes, an expert's matrix and a GPU whose kernels cannot opt in to it
 * (alone_smem 0) ask for nothing more. */
ZT_TEST(a_split_grid_of_at_most_one_block_a_multiprocessor_asks_for_half_its_shared_memory) {
    const int P = ZR_CUF_MV_PLAIN, A = ZR_CUF_MV_ADDNORM, S = ZR_CUF_MV_SSQ;
    ZrCuKernels k = zt_kernels(132);
    k.alone_smem = ZR_CUF_MV_ALONE_SMEM; /* an H100's or H200's (228 KiB a multiprocessor) */
    static const struct {
        uint32_t type;
        int n_in, n_out, mode;
        unsigned grid;
        bool alone;
        const char *what;
    } cases[] = {
        {ZR_TYPE_Q4_K, 2048, 2048, A, 128, true, "llama3.2-1b wo"},
        {ZR_TYPE_Q6_K, 8192, 2048, A, 128, true, "llama3.2-1b down (q6_K)"},
        {ZR_TYPE_Q4_K, 8192, 2048, A, 128, true, "llama3.2-1b down (q4_K)"},
        {ZR_TYPE_Q4_K, 2048, 2560, S, 128, false, "gemma3-4b wo (blocks of 640 threads)"},
        {ZR_TYPE_Q4_K, 3072, 3072, P, 96, false, "llama3.2-3b wo (blocks of 1024 threads)"},
        {ZR_TYPE_Q4_K, 4096, 4096, P, 128, false, "llama3-8b wo (blocks of 1024 threads)"},
        {ZR_TYPE_Q6_K, 2048, 2 * 8192, ZR_CUF_MV_GLU, 1024, false, "a q6_K gate|up of llama3.2-1b's shape"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const ZrCuWeight w = {.type = cases[i].type, .n_in = cases[i].n_in, .n_out = cases[i].n_out};
        const ZrMvShape s = zr_cuf_mv_shape(&k, &w, cases[i].mode);
        const unsigned grid = zr_cuf_mv_grid(&w, cases[i].mode, s);
        ZT_CHECKF(s.blocks == 0 && grid == cases[i].grid, "%s: %u blocks (tall %d), expected %u", cases[i].what, grid,
                  s.blocks, cases[i].grid);
        ZT_CHECKF(s.smem == (cases[i].alone ? k.alone_smem : 0), "%s: %u bytes asked for", cases[i].what, s.smem);
        const ZrMvShape e = zr_cuf_mv_shape_expert(&k, &w, cases[i].mode);
        ZT_CHECKF(e.smem == 0, "%s as an expert's matrix: %u bytes asked for", cases[i].what, e.smem);
    }
    /* a tall shape (Llama-3.2-1B's Q6_K output, one wave of 264 blocks) */
    const ZrCuWeight out = {.type = ZR_TYPE_Q6_K, .n_in = 2048, .n_out = 128256};
    const ZrMvShape t = zr_cuf_mv_shape(&k, &out, P);
    ZT_CHECKF(t.blocks > 0 && t.smem == 0, "the output: %d blocks, %u bytes asked for", t.blocks, t.smem);
    k.alone_smem = 0;
    const ZrCuWeight wo = {.type = ZR_TYPE_Q4_K, .n_in = 2048, .n_out = 2048};
    ZT_CHECKF(zr_cuf_mv_shape(&k, &wo, A).smem == 0, "no opt-in, yet %u bytes", zr_cuf_mv_shape(&k, &wo, A).smem);
}

/* A recording of one launch on the driver double: rec_open opens kernel fk (its cu/kernels.def
 * parameters) and starts recording (*ok false where it failed), rec_close stops and tells whether
 * exactly one launch was recorded (into *rec) */
typedef struct Rec {
    ZrCuda cuda;
    ZrKernel kern;
    ZrLauncher l;
} Rec;

static void rec_open(Rec *r, const FakeKernel *fk, const char *params, bool *ok) {
    ZrError err = {0};
    *ok = !fake_open_kernel(fk, params, &r->cuda, &r->kern, &err);
    ZT_CHECKF(*ok, "%s", err.msg);
    zr_launcher_init(&r->l, r->cuda.drv, r->cuda.stream);
    zr_launcher_record_begin(&r->l);
}

static void rec_close(Rec *r, ZrLaunchRecord *rec, bool *one) {
    zr_launcher_record_end(&r->l);
    *one = r->l.rec.n == 1;
    if (*one) *rec = r->l.rec.recs[0];
    zr_launcher_free(&r->l);
    zr_cuda_close(&r->cuda);
    ZT_CHECK(*one);
}

/* Records one zr_k_matvec launch of matvec_q4_k on the driver double: W of n_out rows of n_in
 * values, x as is, shape s, into *rec; *one false (a check failed) where none was recorded */
static void record_product(int n_in, int n_out, ZrMvShape s, ZrLaunchRecord *rec, bool *one) {
    static const FakeKernel fk = {"matvec_q4_k", 14, {0}, NULL};
    Rec r;
    *one = false;
    bool ok;
    rec_open(&r, &fk, "PPPPPPFIIIIPPP", &ok);
    if (!ok) return;
    static float buf[8192];
    const CUdeviceptr dev = (CUdeviceptr)(uintptr_t)buf;
    const ZrCuWeight w = {.type = ZR_TYPE_Q4_K, .n_in = n_in, .n_out = n_out, .main = dev, .side = dev};
    ZrError err = {0};
    ZT_CHECKF(!zr_k_matvec(&r.l, &r.kern, zr_cuf_mv_rows_per_warp(w.type), &w, dev, dev, 0, dev, 1e-6f, ZR_CUF_MV_PLAIN, s,
                           NULL, &err),
              "%s", err.msg);
    rec_close(&r, rec, one);
}

/* zr_k_matvec launches with the larger of the product's own staging and the shape's request. */
ZT_TEST(the_launch_asks_for_the_larger_of_its_staging_and_the_shapes_shared_memory) {
    const unsigned own = (unsigned)zr_cuf_mv_smem(2048), asks[3] = {0, 116736, own / 2};
    for (int i = 0; i < 3; i++) {
        ZrLaunchRecord r;
        bool one;
        record_product(2048, 2048, (ZrMvShape){.groups = 8, .split = 2, .blocks = 0, .smem = asks[i]}, &r, &one);
        if (!one) break;
        const unsigned want = asks[i] > own ? asks[i] : own;
        ZT_CHECKF(r.shared_bytes == want, "asked for %u: %u bytes launched, expected %u", asks[i], r.shared_bytes, want);
    }
}

/* A one-tile launch of 10 row groups (Gemma-3-4B's wo: 2560 rows) goes out as 128 blocks of 640
 * threads; the kernel finds each block's rows by a multiply. */
ZT_TEST(a_one_tile_launch_of_ten_row_groups_is_128_blocks_of_640_threads) {
    ZrLaunchRecord r;
    bool one;
    record_product(2048, 2560, (ZrMvShape){.groups = 10, .split = 2, .blocks = 0}, &r, &one);
    if (one)
        ZT_CHECKF(r.grid.x == 128 && r.block.x == 640, "%u blocks of %u threads", r.grid.x, r.block.x);
}

/* The experts' fused down + mix (Qwen3-30B-A3B's: 2048 rows, 8 slots of 768 values) goes out as
 * 128 blocks of 512 threads: one block a multiprocessor at the kernel's 128 registers, so each
 * stages the slots' x once (two blocks of 256 staged it twice: cu/PERF.md session 41); as 256
 * blocks of 256 where the kernel as loaded holds fewer than 512 threads. */
ZT_TEST(the_fused_expert_down_is_128_blocks_of_512_threads_on_qwen3_30b_a3b) {
    static const FakeKernel fk = {"matvec_id_mix_q4_k", 10, {0}, NULL};
    static float buf[64];
    const CUdeviceptr dev = (CUdeviceptr)(uintptr_t)buf;
    const ZrCuWeight down = {.type = ZR_TYPE_Q4_K, .n_in = 768, .n_out = 128 * 2048, .main = dev, .side = dev};
    const int max_threads[2] = {0 /* the double's: 1024 */, 384}, want_blocks[2] = {128, 256}, want_threads[2] = {512, 256};
    for (int i = 0; i < 2; i++) {
        Rec r;
        bool ok, one;
        rec_open(&r, &fk, "PPPIIPIIPP", &ok);
        if (!ok) return;
        if (max_threads[i]) r.kern.max_threads = max_threads[i];
        ZrError err = {0};
        ZT_CHECKF(!zr_k_matvec_id_mix(&r.l, &r.kern, &down, 2048, dev, 8, dev, dev, dev, &err), "%s", err.msg);
        ZrLaunchRecord rec = {0};
        rec_close(&r, &rec, &one);
        if (one)
            ZT_CHECKF(rec.grid.x == (unsigned)want_blocks[i] && rec.block.x == (unsigned)want_threads[i],
                      "kernel of %d threads at most: %u blocks of %u threads", max_threads[i], rec.grid.x, rec.block.x);
    }
}

/* Which launcher check_launch calls: zr_k_matvec_glu_bal, _glu_flat, or zr_k_matvec with a tall shape */
enum launch { L_BAL, L_FLAT, L_TALL };

/* Records a launch of kernel `name` on the driver double in `mode` (Gemma-3-4B's Q8_0 or Q4_K
 * gate|up, ADDNORM with its post-norm pieces; L_TALL: Llama-3.2-1B's Q6_K output on 264 blocks) and
 * checks that the launcher took it (exactly one launch recorded) as `want` says, or refused it (none
 * recorded). */
static void check_launch(const char *name, enum launch how, int mode, bool want) {
    const FakeKernel fk = {name, 14, {0}, NULL};
    static float buf[64];
    const CUdeviceptr dev = (CUdeviceptr)(uintptr_t)buf;
    const uint32_t type = how == L_FLAT ? ZR_TYPE_Q4_K : how == L_TALL ? ZR_TYPE_Q6_K : ZR_TYPE_Q8_0;
    const ZrCuWeight w = how == L_TALL
                             ? (ZrCuWeight){.type = type, .n_in = 2048, .n_out = 128256, .main = dev, .side = dev}
                             : (ZrCuWeight){.type = type, .n_in = 2560, .n_out = 2 * 10240, .main = dev, .side = dev};
    const ZrMvPost post = {.r = dev, .post_w = dev, .x_out = dev, .n_ss = 160};
    const ZrMvPost *p = (mode & 3) == ZR_CUF_MV_ADDNORM ? &post : NULL;
    Rec r;
    bool ok;
    rec_open(&r, &fk, "PPPPPPFIIIIPPP", &ok);
    if (!ok) return;
    ZrError err = {0};
    const ZrMvShape tall = {.groups = 16, .split = 1, .blocks = 264};
    const int rc = how == L_FLAT ? zr_k_matvec_glu_flat(&r.l, &r.kern, &w, dev, dev, dev, 1e-6f, mode, 264, p, &err)
                   : how == L_BAL
                       ? zr_k_matvec_glu_bal(&r.l, &r.kern, &w, dev, dev, dev, 1e-6f, mode, 264, p, &err)
                       : zr_k_matvec(&r.l, &r.kern, zr_cuf_mv_rows_per_warp(type), &w, dev, dev, 0, dev, 1e-6f, mode,
                                     tall, p, &err);
    zr_launcher_record_end(&r.l);
    const int n = (int)r.l.rec.n;
    zr_launcher_free(&r.l);
    zr_cuda_close(&r.cuda);
    ZT_CHECKF((rc == 0) == want && n == (want ? 1 : 0),
              "%s in mode %d: the launcher returned %d (%s), %d launches recorded", name, mode, rc, err.msg, n);
}

/* Gemma's gate|up of ADDNORM input (the block's pending post norm folded in) goes to the balanced
 * kernels built for that input alone (cu/matvec.cuh ZR_MV_GLU_KERNEL's AN: x' staged as a one-tile
 * product stages it, no code of the other modes); every other input keeps the kernels of every
 * mode, and the launcher takes neither for the other's input. The flat product's twins split the
 * same way (its ADDNORM one staging x' as the tall product does). */
ZT_TEST(an_addnorm_gate_up_takes_the_kernels_built_for_that_input) {
    const ZrCuKernels k = zt_kernels(132);
    const int AN = ZR_CUF_MV_ADDNORM | ZR_CUF_MV_GLU | ZR_CUF_MV_GELU, RN = ZR_CUF_MV_RMSNORM | ZR_CUF_MV_GLU;
    ZT_CHECK(zr_cuf_mv_bal_kernel(&k, ZR_TYPE_Q8_0, AN) == &k.mv_glu_bal_an_q8_0);
    ZT_CHECK(zr_cuf_mv_bal_kernel(&k, ZR_TYPE_Q4_K, AN) == &k.mv_glu_bal_an_q4_k);
    ZT_CHECK(zr_cuf_mv_bal_kernel(&k, ZR_TYPE_Q5_1, AN) == &k.mv_glu_bal_an_q5_1);
    ZT_CHECK(zr_cuf_mv_bal_kernel(&k, ZR_TYPE_Q8_0, RN) == &k.mv_glu_bal_q8_0);
    ZT_CHECK(zr_cuf_mv_bal_kernel(&k, ZR_TYPE_Q6_K, AN) == NULL);
    check_launch("matvec_glu_bal_an_q8_0", L_BAL, AN, true);
    check_launch("matvec_glu_bal_q8_0", L_BAL, AN, false);
    check_launch("matvec_glu_bal_an_q8_0", L_BAL, RN, false);
    check_launch("matvec_glu_bal_q8_0", L_BAL, RN, true);
    check_launch("matvec_glu_flat_an_q4_k", L_FLAT, AN, true);
    check_launch("matvec_glu_flat_q4_k", L_FLAT, AN, false);
    check_launch("matvec_glu_flat_an_q4_k", L_FLAT, RN, false);
    check_launch("matvec_glu_flat_q4_k", L_FLAT, RN, true);
    check_launch("matvec_glu_flat_q4_k", L_FLAT, ZR_CUF_MV_PLAIN | ZR_CUF_MV_GLU, false);
    check_launch("matvec_glu_bal_q8_0", L_BAL, ZR_CUF_MV_PLAIN | ZR_CUF_MV_GLU, true);
    ZT_CHECK(zr_cuf_mv_flat_kernel(&k, AN) == &k.mv_glu_flat_an_q4_k);
    ZT_CHECK(zr_cuf_mv_flat_kernel(&k, RN) == &k.mv_glu_flat_q4_k);
}

/* A tall product of RMSNORM input (the vocabulary outputs, the tall gate|up products) takes the
 * kernel built for that input alone where the type has one (cu/kernels.def mvt_rn: the K-quants,
 * Q4_1 and Q8_0; Q4_0 in its gate|up products alone); every other input, and the other types, keep
 * the kernel of every mode, and the launcher takes the RMSNORM kernel for no other input. */
ZT_TEST(a_tall_rmsnorm_product_takes_the_kernel_built_for_that_input) {
    const ZrCuKernels k = zt_kernels(132);
    const int P = ZR_CUF_MV_PLAIN, RN = ZR_CUF_MV_RMSNORM, AN = ZR_CUF_MV_ADDNORM, GLU = ZR_CUF_MV_GLU;
    static const uint32_t rn[] = {ZR_TYPE_Q2_K, ZR_TYPE_Q3_K, ZR_TYPE_Q4_K, ZR_TYPE_Q5_K,
                                  ZR_TYPE_Q6_K, ZR_TYPE_Q4_1, ZR_TYPE_Q8_0};
    for (size_t i = 0; i < sizeof rn / sizeof rn[0]; i++) {
        const uint32_t t = rn[i];
        ZT_CHECKF(zr_cuf_mv_tall_kernel(&k, t, RN) == &k.mvt_rn[t] &&
                      zr_cuf_mv_tall_kernel(&k, t, RN | GLU) == &k.mvt_rn[t],
                  "%s: RMSNORM not on the kernel built for it", zr_type_name(t));
        ZT_CHECKF(zr_cuf_mv_tall_kernel(&k, t, P) == &k.mvt[t] && zr_cuf_mv_tall_kernel(&k, t, AN | GLU) == &k.mvt[t] &&
                      zr_cuf_mv_tall_kernel(&k, t, ZR_CUF_MV_SWIGLU) == &k.mvt[t],
                  "%s: another input on the RMSNORM kernel", zr_type_name(t));
    }
    ZT_CHECK(zr_cuf_mv_tall_kernel(&k, ZR_TYPE_Q5_0, RN) == &k.mvt[ZR_TYPE_Q5_0]);
    ZT_CHECK(zr_cuf_mv_tall_kernel(&k, ZR_TYPE_Q4_0, RN) == &k.mvt[ZR_TYPE_Q4_0]);
    ZT_CHECK(zr_cuf_mv_tall_kernel(&k, ZR_TYPE_Q4_0, RN | GLU) == &k.mvt_rn[ZR_TYPE_Q4_0]);
    ZT_CHECK(zr_cuf_mv_tall_kernel(&k, ZR_TYPE_Q4_0, AN | GLU) == &k.mvt[ZR_TYPE_Q4_0]);
    ZT_CHECK(zr_cuf_mv_tall_kernel(&k, ZR_TYPE_F16, RN) == &k.mvt[ZR_TYPE_F16]);
    ZT_CHECK(zr_cuf_mv_tall_kernel(&k, ZR_TYPE_COUNT, RN) == NULL);
    check_launch("matvec_q6_k_tall_rn", L_TALL, RN, true);
    check_launch("matvec_q6_k_tall_rn", L_TALL, P, false);
    check_launch("matvec_q6_k_tall_rn", L_TALL, AN, false);
    check_launch("matvec_q6_k_tall", L_TALL, P, true);
    check_launch("matvec_q6_k_tall", L_TALL, RN, true);
}
