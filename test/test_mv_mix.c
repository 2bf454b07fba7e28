/* The plan of the mixed-type Q/K/V launch (cuda/mv_shape.h zr_cuf_mv_mix_plan, cu/matvec_mix.cu)
 * on the host: which groups of matrices become one launch, and that each part keeps the shape
 * zr_cuf_mv_shape gives its matrix alone (its split, its block size, its own launch's tiles), the
 * condition for the outputs to equal the per-type launches bit for bit (test/gpu/test_matvec_mix.c
 * checks that on a GPU), or, where those shapes would take the launch past one wave, the general
 * rule's (zr_cuf_mv_shape_general) for every part. No GPU needed: the plan reads only sizes, types
 * and the device's multiprocessor count. Last, the launch itself on the driver double: one block
 * per tile of every part, no more. */
#include <stdint.h>
#include <string.h>

#include "cuda/klaunch.h"
#include "cuda/launch.h"
#include "cuda/module.h"
#include "cuda/mv_shape.h"
#include "quant.h"
#include "test_launch_double.h"
#include "zt.h"
#include "zt_kattrs.h"

/* an H100 SXM's kernels as the plan sees them: every pair loaded, every tall kernel present */
static ZrCuKernels kernels(int sm_count) {
    ZrCuKernels k = zt_kernels(sm_count);
    for (int i = 0; i < ZR_KMIX_COUNT; i++) k.has_mv_mix[i] = true;
    return k;
}

static ZrCuWeight mat(uint32_t type, int n_in, int n_out) {
    return (ZrCuWeight){.type = type, .n_in = n_in, .n_out = n_out};
}

/* A layer's q|k (type a) and v (type b) as the upload stacks them, for a model of n_embd with
 * n_head query heads and n_kv KV heads (heads of n_embd / n_head values). */
static void qkv(ZrCuWeight out[2], uint32_t a, uint32_t b, int n_embd, int n_head, int n_kv) {
    const int hd = n_embd / n_head;
    out[0] = mat(a, n_embd, (n_head + n_kv) * hd);
    out[1] = mat(b, n_embd, n_kv * hd);
}

/* The tiles of a launch of w alone with shape s (ceil(ceil(results / rows per warp) / row groups)). */
static int own_tiles(const ZrCuWeight *w, int mode, ZrMvShape s) {
    const int R = zr_cuf_mv_rows_per_warp(w->type), per = mode & ZR_CUF_MV_GLU ? R / 2 : R;
    const int results = mode & ZR_CUF_MV_GLU ? w->n_out / 2 : w->n_out;
    return ((results + per - 1) / per + s.groups - 1) / s.groups;
}

/* Whether the parts' own shapes fit one launch: one block size, at most the mix kernels' largest,
 * within one wave (32 warps a multiprocessor). */
static bool own_shapes_fit(const ZrCuKernels *k, const ZrCuWeight *w, int n, int mode) {
    long warps = 0;
    int threads = 0;
    for (int p = 0; p < n; p++) {
        const ZrMvShape s = zr_cuf_mv_shape(k, &w[p], mode);
        if ((p > 0 && 32 * s.groups * s.split != threads) || 32 * s.groups * s.split > ZR_CUF_MV_MAX_THREADS) return false;
        threads = 32 * s.groups * s.split;
        warps += (long)own_tiles(&w[p], mode, s) * s.groups * s.split;
    }
    return warps <= 32L * k->sm_count;
}

/* The plan's part p against a launch of its matrix alone: the shape that launch takes (its
 * zr_cuf_mv_shape, or the general rule's where the group's own shapes differ in block size or pass
 * one wave) and the grid of zr_k_matvec written out. */
static void check_part(const ZrCuKernels *k, const ZrMvMix *m, int p, const ZrCuWeight *ws, int n, int mode) {
    const ZrCuWeight *w = &ws[p];
    const bool general = !own_shapes_fit(k, ws, n, mode);
    const ZrMvShape s = general ? zr_cuf_mv_shape_general(k, w, mode) : zr_cuf_mv_shape(k, w, mode);
    ZT_CHECKF(m->general == general, "part %d: the plan's general rule %d, expected %d", p, m->general, general);
    const int R = zr_cuf_mv_rows_per_warp(w->type), per = mode & ZR_CUF_MV_GLU ? R / 2 : R;
    const int results = mode & ZR_CUF_MV_GLU ? w->n_out / 2 : w->n_out, tiles = own_tiles(w, mode, s);
    ZT_CHECKF(s.blocks == 0, "part %d would be tall", p);
    ZT_CHECKF(m->threads == 32 * s.groups * s.split, "part %d: %d threads, its own launch %d", p, m->threads,
              32 * s.groups * s.split);
    ZT_CHECKF(m->split[p] == s.split, "part %d: split %d, its own launch %d", p, m->split[p], s.split);
    ZT_CHECKF(m->tiles[p] == tiles, "part %d: %d tiles, its own launch %d", p, m->tiles[p], tiles);
    /* the block's row groups (threads / 32 / split) cover the results, the last tile not empty */
    const int G = m->threads / 32 / m->split[p];
    ZT_CHECK(G == s.groups && (long)m->tiles[p] * G * per >= results && (long)(m->tiles[p] - 1) * G * per < results);
}

ZT_TEST(every_kmix_line_names_two_known_types_and_is_found_in_either_order) {
    int found[ZR_KMIX_COUNT] = {0};
    for (uint32_t a = 0; a < ZR_TYPE_COUNT; a++)
        for (uint32_t b = 0; b < ZR_TYPE_COUNT; b++) {
            bool sw = false, sw2 = false;
            const int i = zr_cuf_mv_mix_kernel(a, b, &sw);
            if (i < 0) continue;
            ZT_CHECK(i < ZR_KMIX_COUNT && a != b);
            ZT_CHECK(zr_cuf_mv_mix_kernel(b, a, &sw2) == i && sw2 != sw);
            found[i]++;
        }
    for (int i = 0; i < ZR_KMIX_COUNT; i++) ZT_CHECKF(found[i] == 2, "line %d found %d times", i, found[i]);
    bool sw = true;
    ZT_CHECK(zr_cuf_mv_mix_kernel(ZR_TYPE_Q4_K, ZR_TYPE_Q6_K, &sw) == ZR_KMIX_q4_k_q6_k && !sw);
    ZT_CHECK(zr_cuf_mv_mix_kernel(ZR_TYPE_Q6_K, ZR_TYPE_Q4_K, &sw) == ZR_KMIX_q4_k_q6_k && sw);
    ZT_CHECK(zr_cuf_mv_mix_kernel(ZR_TYPE_F16, ZR_TYPE_Q8_0, &sw) < 0);
    ZT_CHECK(zr_cuf_mv_mix_kernel(ZR_TYPE_Q8_1, ZR_TYPE_Q8_0, &sw) < 0); /* no kernels for Q8_1 */
}

ZT_TEST(q4_k_m_qkv_of_1b_3b_8b_shapes_is_one_launch_each_part_with_its_own_shape) {
    const int dims[][3] = {{2048, 32, 8}, {3072, 24, 8}, {4096, 32, 8}}; /* n_embd, heads, KV heads */
    const int sms[] = {132, 114, 108, 46};
    for (size_t s = 0; s < sizeof sms / sizeof sms[0]; s++) {
        const ZrCuKernels k = kernels(sms[s]);
        for (int d = 0; d < 3; d++) {
            ZrCuWeight w[2];
            qkv(w, ZR_TYPE_Q4_K, ZR_TYPE_Q6_K, dims[d][0], dims[d][1], dims[d][2]);
            ZrMvMix m;
            ZT_CHECKF(zr_cuf_mv_mix_plan(&k, w, 2, ZR_CUF_MV_RMSNORM, &m), "n_embd %d, %d SMs", dims[d][0], sms[s]);
            ZT_CHECK(m.kernel == ZR_KMIX_q4_k_q6_k && m.n_parts == 2 && m.b_mask == 2u);
            for (int p = 0; p < 2; p++) check_part(&k, &m, p, w, 2, ZR_CUF_MV_RMSNORM);
        }
    }
    /* the 8B layer on an H100: 5120 Q4_K rows in 320 blocks of 8 row groups (unsplit: 2560 row
     * pairs are 16 warps a multiprocessor already), the 1024 Q6_K rows (3360 B: short) would split
     * in two on blocks of 8 row groups: 512 threads against 256, so both take the general rule
     * (v unsplit, 64 blocks) */
    const ZrCuKernels k = kernels(132);
    const ZrCuWeight w[2] = {mat(ZR_TYPE_Q4_K, 4096, 5120), mat(ZR_TYPE_Q6_K, 4096, 1024)};
    ZrMvMix m;
    ZT_CHECK(zr_cuf_mv_mix_plan(&k, w, 2, ZR_CUF_MV_RMSNORM, &m));
    ZT_CHECKF(m.general && m.threads == 256 && m.split[0] == 1 && m.split[1] == 1 && m.tiles[0] == 320 && m.tiles[1] == 64,
              "%d threads, splits %d %d, tiles %d %d", m.threads, m.split[0], m.split[1], m.tiles[0], m.tiles[1]);
}

/* gemma3-12b's Q4_K_M layer (3840 wide, 16 heads and 8 KV heads of 256): its Q6_K v would split
 * (3150 B a row) on blocks of 512 threads beside q|k's unsplit 256 on 132 multiprocessors: the
 * whole launch keeps the general rule (v in 128 blocks of 8 row groups). On 264 multiprocessors
 * both parts split (q|k's 3072 row pairs are then under 16 warps a multiprocessor too) on 384 and
 * 128 blocks of 8 row groups, 8192 warps, within the wave of 8448. */
ZT_TEST(a_launch_past_one_wave_or_of_two_block_sizes_keeps_the_general_rule) {
    const ZrCuWeight w[2] = {mat(ZR_TYPE_Q4_K, 3840, 6144), mat(ZR_TYPE_Q6_K, 3840, 2048)};
    const ZrCuKernels k = kernels(132);
    ZrMvMix m;
    ZT_CHECK(zr_cuf_mv_shape(&k, &w[1], ZR_CUF_MV_RMSNORM).split == 2);
    ZT_CHECK(zr_cuf_mv_mix_plan(&k, w, 2, ZR_CUF_MV_ADDNORM, &m));
    ZT_CHECKF(m.threads == 256 && m.split[0] == 1 && m.split[1] == 1 && m.tiles[0] == 384 && m.tiles[1] == 128,
              "%d threads, splits %d %d, tiles %d %d", m.threads, m.split[0], m.split[1], m.tiles[0], m.tiles[1]);
    for (int p = 0; p < 2; p++) check_part(&k, &m, p, w, 2, ZR_CUF_MV_ADDNORM);
    const ZrCuKernels big = kernels(264);
    ZT_CHECK(zr_cuf_mv_mix_plan(&big, w, 2, ZR_CUF_MV_ADDNORM, &m));
    ZT_CHECKF(m.split[0] == 2 && m.split[1] == 2 && m.tiles[0] == 384 && m.tiles[1] == 128, "splits %d %d, tiles %d %d",
              m.split[0], m.split[1], m.tiles[0], m.tiles[1]);
    for (int p = 0; p < 2; p++) check_part(&big, &m, p, w, 2, ZR_CUF_MV_ADDNORM);
}

ZT_TEST(every_listed_pair_of_a_llama_quantize_mix_is_one_launch) {
    const ZrCuKernels k = kernels(132);
    const uint32_t pairs[][2] = {{ZR_TYPE_Q4_K, ZR_TYPE_Q6_K}, {ZR_TYPE_Q5_K, ZR_TYPE_Q6_K}, {ZR_TYPE_Q3_K, ZR_TYPE_Q4_K},
                                 {ZR_TYPE_Q3_K, ZR_TYPE_Q5_K}, {ZR_TYPE_Q2_K, ZR_TYPE_Q3_K}, {ZR_TYPE_Q2_K, ZR_TYPE_Q4_K},
                                 {ZR_TYPE_Q4_K, ZR_TYPE_Q5_K}, {ZR_TYPE_Q5_0, ZR_TYPE_Q8_0}, {ZR_TYPE_Q5_1, ZR_TYPE_Q8_0}};
    ZT_CHECK(sizeof pairs / sizeof pairs[0] == ZR_KMIX_COUNT);
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        ZrCuWeight w[2];
        qkv(w, pairs[i][0], pairs[i][1], 3072, 24, 8);
        ZrMvMix m;
        ZT_CHECKF(zr_cuf_mv_mix_plan(&k, w, 2, ZR_CUF_MV_RMSNORM, &m), "%s + %s", zr_type_name(pairs[i][0]),
                  zr_type_name(pairs[i][1]));
        for (int p = 0; p < 2; p++) check_part(&k, &m, p, w, 2, ZR_CUF_MV_RMSNORM);
    }
}

ZT_TEST(the_type_order_in_the_group_sets_the_mask_not_the_kernel) {
    const ZrCuKernels k = kernels(132);
    const ZrCuWeight w[2] = {mat(ZR_TYPE_Q6_K, 4096, 4096), mat(ZR_TYPE_Q4_K, 4096, 2048)};
    ZrMvMix m;
    ZT_CHECK(zr_cuf_mv_mix_plan(&k, w, 2, ZR_CUF_MV_RMSNORM, &m));
    ZT_CHECK(m.kernel == ZR_KMIX_q4_k_q6_k && m.b_mask == 1u); /* part 0 is the line's second type */
}

ZT_TEST(a_group_of_three_parts_in_two_types_is_one_launch) {
    const ZrCuKernels k = kernels(132);
    const ZrCuWeight w[3] = {mat(ZR_TYPE_Q4_K, 2048, 2048), mat(ZR_TYPE_Q6_K, 2048, 512), mat(ZR_TYPE_Q4_K, 2048, 511)};
    ZrMvMix m;
    ZT_CHECK(zr_cuf_mv_mix_plan(&k, w, 3, ZR_CUF_MV_ADDNORM, &m));
    ZT_CHECK(m.n_parts == 3 && m.b_mask == 2u && m.kernel == ZR_KMIX_q4_k_q6_k);
    for (int p = 0; p < 3; p++) check_part(&k, &m, p, w, 3, ZR_CUF_MV_ADDNORM);
}

ZT_TEST(one_type_three_types_an_unlisted_pair_or_unshared_x_keep_a_launch_per_matrix) {
    const ZrCuKernels k = kernels(132);
    ZrMvMix m;
    const ZrCuWeight one[1] = {mat(ZR_TYPE_Q4_K, 4096, 6144)};
    ZT_CHECK(!zr_cuf_mv_mix_plan(&k, one, 1, ZR_CUF_MV_RMSNORM, &m));
    const ZrCuWeight three[3] = {mat(ZR_TYPE_Q4_K, 4096, 4096), mat(ZR_TYPE_Q5_K, 4096, 1024), mat(ZR_TYPE_Q6_K, 4096, 1024)};
    ZT_CHECK(!zr_cuf_mv_mix_plan(&k, three, 3, ZR_CUF_MV_RMSNORM, &m));
    const ZrCuWeight unlisted[2] = {mat(ZR_TYPE_F16, 4096, 5120), mat(ZR_TYPE_Q8_0, 4096, 1024)};
    ZT_CHECK(!zr_cuf_mv_mix_plan(&k, unlisted, 2, ZR_CUF_MV_RMSNORM, &m));
    const ZrCuWeight rows[2] = {mat(ZR_TYPE_Q4_K, 4096, 5120), mat(ZR_TYPE_Q6_K, 2048, 1024)};
    ZT_CHECK(!zr_cuf_mv_mix_plan(&k, rows, 2, ZR_CUF_MV_RMSNORM, &m));
    const ZrCuWeight same[2] = {mat(ZR_TYPE_Q4_K, 4096, 5120), mat(ZR_TYPE_Q4_K, 4096, 1024)};
    ZT_CHECK(!zr_cuf_mv_mix_plan(&k, same, 2, ZR_CUF_MV_RMSNORM, &m));
}

ZT_TEST(a_pair_whose_kernel_is_not_loaded_keeps_a_launch_per_matrix) {
    ZrCuKernels k = kernels(132);
    const ZrCuWeight w[2] = {mat(ZR_TYPE_Q4_K, 4096, 5120), mat(ZR_TYPE_Q6_K, 4096, 1024)};
    ZrMvMix m;
    k.has_mv_mix[ZR_KMIX_q4_k_q6_k] = false;
    ZT_CHECK(!zr_cuf_mv_mix_plan(&k, w, 2, ZR_CUF_MV_RMSNORM, &m));
}

/* 14B class Q4_K_M (n_embd 5120, 40 heads, 8 KV heads): Q4_K q|k in blocks of 256 threads (no
 * split), the Q6_K v alone split in two (512 threads); a 70B's Q4_K_M (n_embd 8192, V raised to
 * Q5_K) the same. In one launch either part would add its RMSNorm sum over another block size, so
 * the group stays two launches. */
ZT_TEST(parts_whose_own_blocks_differ_in_size_stay_separate_launches) {
    const ZrCuKernels k = kernels(132);
    const ZrCuWeight groups[][2] = {{mat(ZR_TYPE_Q4_K, 5120, 6144), mat(ZR_TYPE_Q6_K, 5120, 1024)},
                                    {mat(ZR_TYPE_Q4_K, 8192, 9216), mat(ZR_TYPE_Q5_K, 8192, 1024)}};
    for (int i = 0; i < 2; i++) {
        const ZrCuWeight *w = groups[i];
        const ZrMvShape a = zr_cuf_mv_shape(&k, &w[0], ZR_CUF_MV_RMSNORM), b = zr_cuf_mv_shape(&k, &w[1], ZR_CUF_MV_RMSNORM);
        ZT_CHECKF(a.groups * a.split != b.groups * b.split, "%dx%d vs %dx%d", a.groups, a.split, b.groups, b.split);
        ZrMvMix m;
        ZT_CHECK(!zr_cuf_mv_mix_plan(&k, w, 2, ZR_CUF_MV_RMSNORM, &m));
    }
}

ZT_TEST(an_8192_wide_layer_splits_both_parts_in_one_launch) {
    const ZrCuKernels k = kernels(132);
    const ZrCuWeight w[2] = {mat(ZR_TYPE_Q4_K, 8192, 1280), mat(ZR_TYPE_Q6_K, 8192, 256)};
    ZrMvMix m;
    ZT_CHECK(zr_cuf_mv_mix_plan(&k, w, 2, ZR_CUF_MV_RMSNORM, &m));
    ZT_CHECK(m.threads == 512 && m.split[0] == 2 && m.split[1] == 2);
}

/* Parts split differently but in blocks of one size (8 groups x 2 and 4 groups x 4 warps) are one
 * launch with a split per part. */
ZT_TEST(parts_of_one_block_size_keep_each_its_own_split) {
    const ZrCuKernels k = kernels(132);
    const ZrCuWeight w[2] = {mat(ZR_TYPE_Q5_0, 8192, 1280), mat(ZR_TYPE_Q8_0, 8192, 256)};
    ZrMvMix m;
    ZT_CHECK(zr_cuf_mv_mix_plan(&k, w, 2, ZR_CUF_MV_RMSNORM, &m));
    ZT_CHECKF(m.threads == 512 && m.split[0] == 2 && m.split[1] == 4, "%d threads, splits %d %d", m.threads, m.split[0],
              m.split[1]);
    for (int p = 0; p < 2; p++) check_part(&k, &m, p, w, 2, ZR_CUF_MV_RMSNORM);
}

ZT_TEST(a_part_tall_enough_for_the_tall_kernel_stays_separate) {
    const ZrCuKernels k = kernels(132);
    const ZrCuWeight w[2] = {mat(ZR_TYPE_Q4_K, 2048, 16 * 8 * 4 * 132 * 8), mat(ZR_TYPE_Q6_K, 2048, 512)};
    ZT_CHECK(zr_cuf_mv_shape(&k, &w[0], ZR_CUF_MV_RMSNORM).blocks > 0);
    ZrMvMix m;
    ZT_CHECK(!zr_cuf_mv_mix_plan(&k, w, 2, ZR_CUF_MV_RMSNORM, &m));
}

ZT_TEST(gated_parts_count_results_not_rows_and_need_even_rows) {
    const ZrCuKernels k = kernels(132);
    /* (4000 results: under a wave of tiles, so no part is tall) */
    ZrCuWeight w[2] = {mat(ZR_TYPE_Q4_K, 2048, 2 * 4000), mat(ZR_TYPE_Q6_K, 2048, 2 * 1000)};
    ZrMvMix m;
    ZT_CHECK(zr_cuf_mv_mix_plan(&k, w, 2, ZR_CUF_MV_RMSNORM | ZR_CUF_MV_GLU, &m));
    for (int p = 0; p < 2; p++) check_part(&k, &m, p, w, 2, ZR_CUF_MV_RMSNORM | ZR_CUF_MV_GLU);
    w[1].n_out = 2001;
    ZT_CHECK(!zr_cuf_mv_mix_plan(&k, w, 2, ZR_CUF_MV_RMSNORM | ZR_CUF_MV_GLU, &m));
}

int main(void) { return zt_run(); }

/* each mixed pair's parameter string (cu/kernels.def) */
static const char *const mix_params[] = {
#define ZR_KMIX(a, b, params) params,
#include "cu/kernels.def"
};

/* The launch of a plan (cu/matvec_mix.cu): a 1-D grid of every part's tiles, part 0's first, so no
 * block returns idle. Its grid was (the largest part's tiles, parts): on Gemma-3-4B's layers with a
 * Q6_K V, 384 blocks of 512 threads for 256 tiles, more than one wave, whose idle blocks were
 * placed only as the products finished and held back the attention after them (cu/PERF.md,
 * session 38). Recorded on the driver double: grid, block and each part's tiles as passed. */
ZT_TEST(the_mixed_launch_is_one_block_per_tile_of_every_part_and_no_idle_block) {
    static const FakeKernel fk = {"matvec_mix_q4_k_q6_k", 30, {0}, NULL};
    ZrCuda cuda;
    ZrError err = {0};
    ZrCuKernels k = kernels(132);
    /* its cu/kernels.def line */
    ZT_CHECKF(!fake_open_kernel(&fk, mix_params[ZR_KMIX_q4_k_q6_k], &cuda, &k.mv_mix[ZR_KMIX_q4_k_q6_k], &err), "%s",
              err.msg);
    ZrLauncher l;
    zr_launcher_init(&l, cuda.drv, cuda.stream);
    /* Gemma-3-4B (2560 wide, 8 heads and 4 KV heads of 256): q|k Q4_K, v Q6_K; a three-part
     * group too (q, k in Q4_K, v in Q6_K between them) */
    const ZrCuWeight two[2] = {mat(ZR_TYPE_Q4_K, 2560, 3072), mat(ZR_TYPE_Q6_K, 2560, 1024)};
    const ZrCuWeight three[3] = {mat(ZR_TYPE_Q4_K, 2560, 2048), mat(ZR_TYPE_Q6_K, 2560, 1024),
                                 mat(ZR_TYPE_Q4_K, 2560, 1024)};
    const ZrCuWeight *groups[2] = {two, three};
    static float buf[8192];
    const CUdeviceptr dev = (CUdeviceptr)(uintptr_t)buf;
    for (int gi = 0; gi < 2; gi++) {
        const int n = gi ? 3 : 2, off[3] = {0, 3072, 4096};
        ZrMvMix m;
        ZT_CHECK(zr_cuf_mv_mix_plan(&k, groups[gi], n, ZR_CUF_MV_RMSNORM, &m));
        zr_launcher_record_begin(&l);
        ZT_CHECKF(!zr_k_matvec_mix(&l, &k, &m, groups[gi], off, dev, dev, 0, dev, 1e-6f, ZR_CUF_MV_RMSNORM, NULL, &err),
                  "%s", err.msg);
        zr_launcher_record_end(&l);
        ZT_CHECK(l.rec.n == 1);
        if (l.rec.n != 1) break;
        const ZrLaunchRecord *r = &l.rec.recs[0];
        unsigned sum = 0, biggest = 0;
        for (int p = 0; p < n; p++) {
            int tiles;
            memcpy(&tiles, zr_recording_param(&l.rec, 0, 7 * p + 6), sizeof tiles);
            ZT_CHECKF(tiles == m.tiles[p], "part %d: %d tiles passed, the plan's %d", p, tiles, m.tiles[p]);
            sum += (unsigned)m.tiles[p];
            biggest = (unsigned)m.tiles[p] > biggest ? (unsigned)m.tiles[p] : biggest;
        }
        ZT_CHECKF(r->grid.x == sum && r->grid.y == 1 && r->grid.z == 1 && r->block.x == (unsigned)m.threads,
                  "%d parts: grid %u x %u x %u of %u threads, expected %u x 1 x 1 of %d (no idle blocks)", n, r->grid.x,
                  r->grid.y, r->grid.z, r->block.x, sum, m.threads);
        ZT_CHECKF(sum < biggest * (unsigned)n, "%d parts of tiles summing to %u: no idle block to avoid", n, sum);
    }
    /* Gemma-3-4B's: 256 blocks of 512 threads, within one wave of 132 multiprocessors (2048 threads each) */
    ZrMvMix m;
    ZT_CHECK(zr_cuf_mv_mix_plan(&k, two, 2, ZR_CUF_MV_RMSNORM, &m));
    ZT_CHECKF(m.tiles[0] + m.tiles[1] == 256 && m.threads == 512, "tiles %d + %d of %d threads", m.tiles[0], m.tiles[1],
              m.threads);
    zr_launcher_free(&l);
    zr_cuda_close(&cuda);
}
