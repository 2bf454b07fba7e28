#include "cuda/mv_shape.h"

#include "cuda/klaunch.h"
#include "quant.h"

/* Rows of W each warp computes in the matrix-vector kernel of a type (cu/matvec_*.cu: the R
 * of each ZR_MATVEC line, 2 for every type since run 3; a mismatch leaves rows unwritten,
 * which the gpu tests catch). */
int zr_cuf_mv_rows_per_warp(uint32_t type) {
    (void)type;
    return 2;
}

int zr_cuf_kernel_max_threads(const ZrKernel *kern) {
    return kern->max_threads > 0 && kern->max_threads < 1024 ? kern->max_threads : 1024;
}

int zr_cuf_kernel_blocks_per_sm(const ZrKernel *kern, int threads) {
    const int regs = kern->regs > 0 ? kern->regs : 64, warps = (threads + 31) / 32;
    const int warp_regs = (regs * 32 + 255) / 256 * 256; /* allocated a warp at a time, in units of 256 */
    const int by_regs = 65536 / (warp_regs * warps), by_threads = 2048 / (32 * warps);
    return threads > zr_cuf_kernel_max_threads(kern) ? 0 : by_regs < by_threads ? by_regs : by_threads;
}

/* cu/matvec.cuh zr_mv_smem_bytes: x padded with 4 floats after every 32, or its integer planes */
size_t zr_cuf_mv_smem(int n_in) {
    /* x' padded (4 floats after every 32), or as integer planes: 864 bytes a super-block of 256
     * values, a partial last one too (cu/matvec.cuh ZR_XQ_SB; less than the floats from 256 values) */
    const size_t floats = ((size_t)n_in + 4 * (size_t)((n_in + 31) / 32)) * sizeof(float);
    const size_t planes = (size_t)((n_in + 255) / 256) * 864;
    return floats > planes ? floats : planes;
}

/* x' padded, then per item of 32 values its hi and lo halves (64 halves), then 24 words (16 zero),
 * then the scale records (cu/matvec_mma.cu) */
size_t zr_cuf_mv_mma_smem(int n_in) {
    /* and each warp's two buffers of a tile's scale records: 2 x 16 rows x n_in / 256 x 18 bytes */
    const size_t records = (size_t)ZR_CUF_MV_MMA_THREADS / 32 * 2 * 16 * (size_t)(n_in / 256) * 18;
    return zr_cuf_mv_smem(n_in) + 4 * (size_t)n_in + 24 * 4 + records;
}

/* The float product's warp takes a row's items (32 values) 32 at a time, so a row's last step
 * leaves lanes idle where its items are no multiple of 32: a third of Gemma-3-4B's 80 items' steps
 * is half idle (its vocabulary output, 262144 x 2560, 550 MB a token). The tensor-core product
 * takes 4 items a quad instead. H200 tg128 (cu/PERF.md session 25): rows of 80 items (idle: 16 of
 * 96 lane-steps) Gemma-3-4B 603.1 -> 612.1, 604.1 -> 608.8, 603.3 -> 609.0 t/s; of 120 (8 of 128)
 * Gemma-3-12B 300.4 -> 298.1; of 64, 96 and 128 (none) Llama-3.2-1B 1741 -> 1755 and 1741 ->
 * 1745, Llama-3.2-3B 884.4 -> 885.8 and 883.2 -> 878.6, Llama-3-8B 501.7 -> 500.8 and 500.7 ->
 * 496.8, Qwen3-30B-A3B 538.3 -> 537.2. So it takes rows that leave more than an eighth of the
 * float product's lane-steps idle (Gemma-3-4B's; gemma2-2b's 72 items and gemma3-1b's 36 too, not
 * measured), and the others keep the float one. */
static bool lanes_idle(long items) {
    const long steps = (items + 31) / 32, idle = 32 * steps - items;
    return 8 * idle > 32 * steps;
}

bool zr_cuf_mv_mma_takes(const ZrCuKernels *k, const ZrCuWeight *w, int mode, ZrMvShape shape) {
    return shape.blocks > 0 && w->type == ZR_TYPE_Q6_K && w->n_in % 256 == 0 && lanes_idle(w->n_in / 32) &&
           zr_cuf_mv_mma_smem(w->n_in) <= k->mma_smem && w->side % 16 == 0 &&
           !(mode & (ZR_CUF_MV_GLU | ZR_CUF_MV_SSQ)) && (mode & 3) != ZR_CUF_MV_SWIGLU;
}

/* One wave of kern's blocks of `threads` (persistent blocks that loop over their work), at most
 * `work` blocks */
static long one_wave(const ZrCuKernels *k, const ZrKernel *kern, int threads, long work) {
    const int per_sm = zr_cuf_kernel_blocks_per_sm(kern, threads);
    const long blocks = (long)k->sm_count * (per_sm > 0 ? per_sm : 1);
    return blocks < work ? blocks : work;
}

/* The tall gate|up product gives a warp a result at a time (its gate and up rows), its lanes over
 * the result's items: where those leave lanes idle and a wave of warps takes a fraction of a
 * result each (Gemma-3-4B's 10240 results of 80 Q4_K items on 4224 warps: 2.42 results, the warps
 * with 3 taking 9 steps of 32 items where the work is 6.06), the flat product cuts each block's
 * results x items into equal runs, one a warp (cu/matvec_glu_flat.cu). H200 tg128 (cu/PERF.md
 * session 26): Gemma-3-4B Q4_K_M 610.2 -> 625.8 t/s (+2.6%; its gate|up ran at 1.62 TB/s in the
 * graph against Llama-3.2-3B's 2.13); where the tall product's lanes are full it lost: Llama-3.2-3B
 * Q4_K_M 887.4 -> 847.1 (96 items), Q8_0 on Gemma-3-4B (160 items of 16 values: 5 full steps)
 * 536.5 -> 534.6, on Llama-3.2-3B 739.2 -> 697.2 (the Q8_0 kernel was deleted). So it takes Q4_K
 * gate|up products on the tall shape whose items leave more than an eighth of the tall product's
 * lane-steps idle, where a warp's run spans at most ZR_CUF_MV_FLAT_KMAX results (Gemma-3-4B's and
 * Qwen3-4B's 2560-wide rows; Gemma-3-12B's 3840 would span 5), of RMSNORM or ADDNORM input (its
 * kernels are built for those alone). */
static long flat_blocks(const ZrCuKernels *k, int mode, long n_res) { /* at most a block a result */
    return one_wave(k, zr_cuf_mv_flat_kernel(k, mode), ZR_CUF_MV_FLAT_THREADS, n_res);
}

const ZrKernel *zr_cuf_mv_flat_kernel(const ZrCuKernels *k, int mode) {
    return (mode & 3) == ZR_CUF_MV_ADDNORM ? &k->mv_glu_flat_an_q4_k : &k->mv_glu_flat_q4_k;
}

bool zr_cuf_mv_flat_takes(const ZrCuKernels *k, const ZrCuWeight *w, int mode, ZrMvShape shape) {
    if (w->type != ZR_TYPE_Q4_K || shape.blocks <= 0 || !(mode & ZR_CUF_MV_GLU) || (mode & ZR_CUF_MV_SSQ) ||
        ((mode & 3) != ZR_CUF_MV_RMSNORM && (mode & 3) != ZR_CUF_MV_ADDNORM) || w->n_out % 2 || w->n_in % 256 ||
        zr_cuf_mv_smem(w->n_in) > k->flat_smem)
        return false;
    const long items = w->n_in / 32, n_res = w->n_out / 2, blocks = flat_blocks(k, mode, n_res);
    if (items < 32 || !lanes_idle(items)) return false;
    /* a block's results, its pairs, a warp's run (the kernel cuts at floor(v nf / 16) rounded
     * down to a multiple of 32) and the results a run of that length may touch */
    const long per_block = (n_res + blocks - 1) / blocks;
    const long run = (per_block * items + ZR_CUF_MV_FLAT_THREADS / 32 - 1) / (ZR_CUF_MV_FLAT_THREADS / 32) + 31;
    return (run - 1) / items + 2 <= ZR_CUF_MV_FLAT_KMAX;
}

static int matvec_glu_flat(ZrLauncher *l, const ZrCuKernels *k, const ZrCuWeight *w, CUdeviceptr x, CUdeviceptr y,
                           CUdeviceptr norm_w, float eps, int mode, const ZrMvPost *post, ZrError *err) {
    return zr_k_matvec_glu_flat(l, zr_cuf_mv_flat_kernel(k, mode), w, x, y, norm_w, eps, mode,
                                (unsigned)flat_blocks(k, mode, w->n_out / 2), post, err);
}

const ZrKernel *zr_cuf_mv_bal_kernel(const ZrCuKernels *k, uint32_t type, int mode) {
    const bool an = (mode & 3) == ZR_CUF_MV_ADDNORM;
    switch (type) {
    case ZR_TYPE_Q4_K: return an ? &k->mv_glu_bal_an_q4_k : &k->mv_glu_bal_q4_k;
    case ZR_TYPE_Q8_0: return an ? &k->mv_glu_bal_an_q8_0 : &k->mv_glu_bal_q8_0;
    case ZR_TYPE_Q4_0: return an ? &k->mv_glu_bal_an_q4_0 : &k->mv_glu_bal_q4_0;
    case ZR_TYPE_Q4_1: return an ? &k->mv_glu_bal_an_q4_1 : &k->mv_glu_bal_q4_1;
    case ZR_TYPE_Q5_0: return an ? &k->mv_glu_bal_an_q5_0 : &k->mv_glu_bal_q5_0;
    case ZR_TYPE_Q5_1: return an ? &k->mv_glu_bal_an_q5_1 : &k->mv_glu_bal_q5_1;
    case ZR_TYPE_Q5_K: return an ? &k->mv_glu_bal_an_q5_k : &k->mv_glu_bal_q5_k;
    case ZR_TYPE_Q2_K: return an ? &k->mv_glu_bal_an_q2_k : &k->mv_glu_bal_q2_k;
    default: return NULL;
    }
}

const ZrKernel *zr_cuf_mv_tall_kernel(const ZrCuKernels *k, uint32_t type, int mode) {
    if (type >= ZR_TYPE_COUNT || !k->has_mvt[type]) return NULL;
    const bool rn = (mode & 3) == ZR_CUF_MV_RMSNORM && k->has_mvt_rn[type] &&
                    (!ZR_KTYPES_TALL_RN_GLU(type) || (mode & ZR_CUF_MV_GLU));
    return rn ? &k->mvt_rn[type] : &k->mvt[type];
}

/* The kernel of a product of `shape` (a tall one: zr_cuf_mv_tall_kernel) */
static const ZrKernel *mv_kernel(const ZrCuKernels *k, uint32_t type, int mode, ZrMvShape shape) {
    return shape.blocks > 0 ? zr_cuf_mv_tall_kernel(k, type, mode) : &k->mv[type];
}

/* The steps of 32 items its slowest warp takes: p results a block, whole rounds of 16, then the
 * remainder's chunks (results x steps) dealt to 16 warps */
static long bal_steps(long p, long steps) {
    return p / 16 * steps + (p % 16 * steps + 15) / 16;
}

/* Where the tall gate|up product's tiles of 16 results are no multiple of its wave of blocks, its
 * warps that take a tile more set the time: Llama-3-8B's 14336 results of 4096 values on 264 x 16
 * warps take 4 x 4 steps of Q4_K items where the work is 13.6, Gemma-3-4B's Q8_0 gate|up 3 x 5 where
 * it is 12.1. The balanced product takes whole rounds of a result a warp and cuts the rest into
 * steps (cu/matvec_glu_bal.cu): 3 x 4 + 2 and 2 x 5 + 3. H200 (cu/PERF.md session 27), tg128 and
 * the gate|up in the graph: Llama-3-8B Q4_K_M +2.8% (27.65 -> 23.25 us), Gemma-3-12B Q4_K_M +1.6%
 * (16 -> 15 steps), Gemma-3-4B Q8_0 +1.9% (20.45 -> 19.37 us), Llama-3-8B Q8_0 +0.9% (32 -> 28);
 * Gemma-3-12B Q8_0 lost 1.2% (32 -> 30 steps) on Q8_0's float arithmetic, so session 27 held Q8_0
 * to an eighth fewer steps; on its integer planes it gains 0.14% (240.26 -> 240.60 t/s, session 28),
 * so the eighth is gone. Session 28, Llama-3-8B's other types (the tall product on 264 blocks, 4 x
 * 4 steps; here 3 x 4 + 2): Q4_0 519.1 -> 536.8 (+3.4%), Q4_1 443.1 -> 461.6 (+4.2%), Q5_K_M 402.3
 * -> 423.3 (+5.2%), a qwen2.5-14b Q2_K file 223.4 -> 236.2 (+5.7%); Q5_0 lost 0.4% (its tall
 * product of 79 registers ran one block of 512 an SM, 132 of them: 6.8 tiles a block, 7 for the
 * slowest, already near the balance). Session 29, Q5_0 and Q5_1 on integer planes at 64 registers
 * (two blocks an SM): 440.6 -> 466.7 (+5.9%) and 402.8 -> 423.8 (+5.2%). So it takes GLU products on the tall
 * shape of the same wave (two blocks of 512 an SM, so a warp's steps compare) where its slowest
 * warp takes fewer steps than the tall product's (not Llama-3.2-3B's 8192 results: 2 x 3 either
 * way), in the types that have the kernel (zr_cuf_mv_bal_kernel). */
bool zr_cuf_mv_bal_takes(const ZrCuKernels *k, const ZrCuWeight *w, int mode, ZrMvShape shape) {
    const ZrKernel *kern = zr_cuf_mv_bal_kernel(k, w->type, mode);
    if (!kern || shape.blocks <= 0 || shape.split != 1 || !(mode & ZR_CUF_MV_GLU) || (mode & ZR_CUF_MV_SSQ) ||
        (mode & 3) == ZR_CUF_MV_SWIGLU || w->n_out % 2 || w->n_in % zr_type_info(w->type)->block ||
        zr_cuf_mv_smem(w->n_in) > k->bal_smem)
        return false;
    const long items = w->n_in / (long)zr_type_info(w->type)->item, steps = (items + 31) / 32, n_res = w->n_out / 2;
    const long blocks = one_wave(k, kern, ZR_CUF_MV_BAL_THREADS, n_res), p = (n_res + blocks - 1) / blocks;
    if (items < 32 || 15 * steps > ZR_CUF_MV_BAL_CHUNKS || shape.blocks != blocks) return false;
    const long tiles = (n_res + shape.groups - 1) / shape.groups, tall = (tiles + shape.blocks - 1) / shape.blocks * steps;
    const long bal = p > 1 && bal_steps(p - 1, steps) > bal_steps(p, steps) ? bal_steps(p - 1, steps) : bal_steps(p, steps);
    return bal < tall;
}

static int matvec_glu_bal(ZrLauncher *l, const ZrCuKernels *k, const ZrCuWeight *w, CUdeviceptr x, CUdeviceptr y,
                          CUdeviceptr norm_w, float eps, int mode, const ZrMvPost *post, ZrError *err) {
    const ZrKernel *kern = zr_cuf_mv_bal_kernel(k, w->type, mode);
    return zr_k_matvec_glu_bal(l, kern, w, x, y, norm_w, eps, mode,
                               (unsigned)one_wave(k, kern, ZR_CUF_MV_BAL_THREADS, w->n_out / 2), post, err);
}

static int matvec_mma(ZrLauncher *l, const ZrCuKernels *k, const ZrCuWeight *w, CUdeviceptr x, CUdeviceptr y,
                      CUdeviceptr add, CUdeviceptr norm_w, float eps, int mode, const ZrMvPost *post, ZrError *err) {
    const long per_block = ZR_CUF_MV_MMA_THREADS / 32 * 16; /* rows: 16 a warp */
    const long tiles = ((long)w->n_out + per_block - 1) / per_block;
    const long blocks = one_wave(k, &k->mv_q6k_mma, ZR_CUF_MV_MMA_THREADS, tiles); /* each looping over its tiles */
    return zr_k_matvec_mma(l, &k->mv_q6k_mma, w, x, y, add, norm_w, eps, mode, (unsigned)blocks, post, err);
}

/* The products that take some shapes from the float and dp4a kernels (the tensor-core output, the
 * flat and the balanced gate|up, which add no vector), tried in this order; 1 when one launched
 * (its result in *rc), 0 when none takes the shape */
static int special_product(ZrLauncher *l, const ZrCuKernels *k, const ZrCuWeight *w, CUdeviceptr x, CUdeviceptr y,
                           CUdeviceptr add, CUdeviceptr norm_w, float eps, int mode, ZrMvShape shape,
                           const ZrMvPost *post, int *rc, ZrError *err) {
    if (zr_cuf_mv_mma_takes(k, w, mode, shape))
        *rc = matvec_mma(l, k, w, x, y, add, norm_w, eps, mode, post, err);
    else if (zr_cuf_mv_flat_takes(k, w, mode, shape) && add == 0)
        *rc = matvec_glu_flat(l, k, w, x, y, norm_w, eps, mode, post, err);
    else if (zr_cuf_mv_bal_takes(k, w, mode, shape) && add == 0)
        *rc = matvec_glu_bal(l, k, w, x, y, norm_w, eps, mode, post, err);
    else
        return 0;
    return 1;
}

/* Which rule shape_of follows: a dense product's own launch (zr_cuf_mv_shape; a mix launch's
 * parts take it too), the general rule (zr_cuf_mv_shape_general: rows too short for the 4 KiB rule
 * split in Q8_0 alone) and one expert's matrix (zr_cuf_mv_shape_expert). */
enum rule { RULE_DENSE, RULE_GENERAL, RULE_EXPERT };

static ZrMvShape shape_of(const ZrCuKernels *k, const ZrCuWeight *w, int mode, enum rule rule) {
    const bool short_split = rule != RULE_GENERAL, expert = rule == RULE_EXPERT;
    /* Measured on an H100 (tools/mv_bench.c over every shape, cu/PERF.md run 3): blocks of 8
     * row groups (the block stages x once for all of them, so fewer, larger blocks win), and
     * each row split over S warps (split-K) only while the grid has fewer than 16 warps per SM
     * AND each warp's share of its rows stays >= 4 KiB (short rows of quantized weights lose by
     * splitting: the FFN down and the small F16/Q8_0 matrices gain). This pick is within 3% of
     * the best measured shape on every 1B and 8B matrix. */
    const int R = zr_cuf_mv_rows_per_warp(w->type), glu = (mode & ZR_CUF_MV_GLU) != 0;
    const long per_warp = glu ? R / 2 : R, results = glu ? w->n_out / 2 : w->n_out;
    const long groups = (results + per_warp - 1) / per_warp;
    const long items = w->n_in / (long)zr_type_info(w->type)->item /* values per 16-byte item (cu/matvec.cuh EPI) */;
    const double warp_bytes =
        (double)R * (zr_cuw_main_row_bytes(w->type, w->n_in) + zr_cuw_side_bytes(w->type, w->n_in, 1));
    int split = 1;
    while (split < 4 && groups * split < 16L * k->sm_count && warp_bytes / (2 * split) >= 4096 &&
           items / (2 * split) >= 32)
        split *= 2;
    int G = split <= 2 ? 8 : 4;
    /* Rows too short for that rule (a warp's two rows of 2-4 KiB: an attention output or QKV)
     * still split in two while the grid is under 16 warps a multiprocessor, on blocks of 8 row
     * groups (512 threads: each stages half as much of x as in a block of 256, and an SM stages
     * x half as often as on blocks of 4 row groups). Q8_0 (session 9, zrun-mv-bench's best shape
     * on the H200): llama3.2-1b tg128 1557 -> 1643 t/s, llama3.2-3b 681 -> 692, gemma3-4b 501 ->
     * 506. Every other type (session 11, H200 tg128, the Q4_K attention outputs of 4096 values):
     * qwen3-30b-a3b Q4_K_M 434.9 -> 445.4, llama3-8b Q4_K_M 405.5 -> 414.0. The K-quants from 1
     * KiB a warp's half: x is staged with the sums of its runs of 16 or on integer planes (Q4_K),
     * which the split halves for each thread (a Q4_K_M mix's Q6_K parts go with them). Blocks of
     * 8 row groups, and the K-quants' 1 KiB (session 18, H200 tg128, Q4_K_M): llama3.2-1b +6.0%,
     * llama3.2-3b +1.7%, llama3-8b +2.3%, gemma3-4b +1.3%, qwen3-4b +2.9%; llama3.2-3b Q3_K_M
     * +2.1%, llama3-8b Q4_0 +1.3% (blocks alone); llama3.2-1b Q4_0 lost 1.8% split from 1 KiB, Q8_0
     * 0.3% on blocks of 8 (gemma3-4b Q8_0 gained 0.4%: cu/PERF.md). An expert's
     * matrix keeps 2 KiB on blocks of 4 row groups: the flat gate|up of qwen3-30b-a3b (1152 B a
     * half) lost 16% split. The general rule (Q8_0's split alone) keeps blocks of 4 row groups:
     * 256 threads, as the unsplit parts of a mix launch that takes it. */
    const bool k_quant = zr_type_info(w->type)->block == 256;
    if (split == 1 && (short_split || w->type == ZR_TYPE_Q8_0) && groups < 16L * k->sm_count &&
        warp_bytes / 2 >= (k_quant && !expert ? 1024 : 2048) && items / 2 >= 32) {
        split = 2;
        G = expert || !short_split ? 4 : 8;
    }
    /* A split grid of blocks of 8 row groups that takes one to two of them a multiprocessor takes
     * blocks of 16 (1024 threads; a split grid has under 16 row groups an SM, so one block of 16
     * an SM holds it) where the type's kernel holds that block: each multiprocessor then
     * stages x once, not twice (its warps and rows are the same). Products of normed x keep blocks
     * of 8: the RMSNorm's sum is added in the block's order, and a mix launch's parts (Q/K/V, always
     * normed) take the shapes of their own launches, in blocks of at most 512 threads. Session 19,
     * H200 tg128 (the downs and wo): llama3-8b Q4_K_M +1.3%, Q8_0 +1.2%, gemma3-12b Q4_K_M +1.6%, a
     * qwen2.5-7b Q4_K_M +2.1%. */
    const int in = mode & 3;
    if (rule == RULE_DENSE && (in == ZR_CUF_MV_PLAIN || in == ZR_CUF_MV_SWIGLU) && split == 2 && G == 8 &&
        (groups + 7) / 8 > k->sm_count && zr_cuf_kernel_max_threads(&k->mv[w->type]) >= 1024) {
        G = 16;
        /* Where blocks of 16 leave a third of the multiprocessors or more idle (Gemma-3-4B's and
         * Qwen3-4B's wo and down, 2560 rows: 80 blocks on 132), the rows go to one block a
         * multiprocessor, G the row groups it takes (10: 128 blocks of 640 threads). A K-quant
         * block's sums take time in proportion to its rows (H200 timeline, cu/PERF.md session 40:
         * Gemma-3-4B's Q6_K down 9.06 -> 6.10 us). H200 tg128: Gemma-3-4B Q4_K_M +2.1%, Q8_0
         * +1.45%, Qwen3-4B +2.6%. Where fewer multiprocessors are idle the gain is smaller than what
         * the launch beside it loses (its blocks find no room early): on Llama-3.2-3B's 96 blocks
         * (12 row groups) Q4_K_M gained 0.75%, Q5_K_M 1.2% (the down alone), but Q8_0 lost 0.5% (0.7%
         * the down alone) and Q3_K_M 0.6% (the down alone); Gemma-3-12B's 120 (15) lost 0.65%. */
        if (3 * ((groups + 15) / 16) <= 2L * k->sm_count) G = (int)((groups + k->sm_count - 1) / k->sm_count);
    }
    /* An expert's matrix: the expert kernels have no tall form (the flat gate|up sizes its own grid:
     * src/cuda/moe.c) */
    if (expert) return (ZrMvShape){.groups = G, .split = split, .blocks = 0};
    /* Tall matrices (a vocabulary output: 262144 rows on gemma3, 8 or more blocks' worth of
     * tiles per resident block; F16 and Q8_0 from 2, below) take the tall kernel on one wave of
     * blocks (4 of 256 threads a multiprocessor at 64 registers; 2 of 512 for quantized types,
     * below), each staging x once for all of its tiles: a block per tile staged x (and the norm
     * weights, and ADDNORM's block output and post-norm weight) for every 16 rows, 40 KB of L2
     * reads per 34 KB of weights on gemma3-4b's Q6_K output. */
    const long tiles = (groups + G - 1) / G, blocks = 4L * k->sm_count;
    /* F16 and Q8_0 take it from 2 waves of tiles (their gate|up products; H200 tg128: llama3-8b
     * F16 230.7 -> 238.2 t/s, Q8_0 359 -> 366, gemma3-4b Q8_0 487.1 -> 500.8); Q4_0 (llama3-8b
     * 462.3 -> 457.2) and Q4_K (393.1 against 404.3) measured slower from 2 waves, the other
     * types were not measured: they keep 8 (cu/PERF.md, session 9). SSQ products have no tall
     * kernel. */
    const long waves = w->type == ZR_TYPE_F16 || w->type == ZR_TYPE_Q8_0 ? 2 : 8;
    const bool quant = zr_type_info(w->type)->block > 1, can_tall = split == 1 && k->has_mvt[w->type] && !(mode & ZR_CUF_MV_SSQ);
    /* A gate|up product of a quantized type with 1 to 2 waves of tiles (Llama-3.2-1B's and 3B's:
     * 8192 results, 1024 tiles) takes it too where each lane has 3 or more items of a row (H200
     * tg128, session 12: llama3.2-3b Q4_K_M +3.0%, Q8_0 +3.3%, llama3.2-1b Q8_0 +3.2%): the tall
     * block takes its tiles one after another, each opening on the latency of its first loads,
     * which rows of 2 items a lane cannot hide (llama3.2-1b Q4_K_M lost 3.1%). From 2.5 items a lane
     * it takes any number of waves (the block stages x once for all its tiles): Q4_K up to 3 waves
     * since session 16 (the 2560-wide gate|up of gemma3-4b and qwen3-4b, H200 tg128: +4.2% and
     * +3.5%), every wave and every type but Q6_K, Q2_K and Q3_K since session 19 (3.4 to 4.5 waves:
     * llama3-8b Q4_K_M +6.7%, gemma3-12b Q4_K_M +8.3%, a qwen2.5-14b Q4_K_M +5.5%, a qwen2.5-7b
     * Q4_K_M +8.4%; llama3-8b Q4_0 +3.4%, Q4_1 +1.3%, Q5_0 +5.8%, Q5_1 +9.9%, Q5_K_M +0.9%), Q2_K
     * since session 20 (64-value items: 2.5 a lane from 5120 values; a qwen2.5-14b Q2_K file +0.6%).
     * Q6_K lost 0.85% (llama3-8b), Q3_K 3.0% (a qwen2.5-14b Q3_K_M file). Since session 40 every type
     * but those two takes it from 2 items a lane on 1 to 2 waves (Llama-3.2-1B's 64 items; the tall
     * kernels had gained the next tile's first requests issued with the current one's sums, session
     * 19): H200 tg128 Q4_K_M +5.1%, its default sampling +4.8%, Q4_0 +3.6%, Q5_K_M +2.6%;
     * a Q6_K gate|up lost 4.1% (cu/PERF.md). */
    const bool tall_type = w->type != ZR_TYPE_Q6_K && w->type != ZR_TYPE_Q3_K;
    const bool wide_glu = tall_type && 2 * items >= 5 * 32;
    const bool glu_tall = quant && (mode & ZR_CUF_MV_GLU) && tiles >= blocks &&
                          ((tiles < 2 * blocks && items >= (tall_type ? 2 : 3) * 32) || wide_glu);
    if (!can_tall || (tiles < waves * blocks && !glu_tall)) {
        /* A product whose blocks number at most the multiprocessors and could share one (Llama-3.2-1B's
         * wo and down: 128 blocks of 512 threads) asks for over half a multiprocessor's shared memory
         * (ZR_CUF_MV_ALONE_SMEM), so no two of its blocks share one: placed early beside the launch
         * before it (the gate|up, the attention) they took the first multiprocessors to empty, two
         * each, 79-110 of 132, and the pairs set the end (the down's run 9.4 us where its blocks'
         * phases add to 6.4). H200 tg128 (cu/PERF.md session 39): Llama-3.2-1B Q4_K_M 1779 -> 1863
         * t/s (+4.7%), its down 9.7 -> 6.7 us on 128 multiprocessors; Q8_0 +0.4%, Q4_0 +1.3%, F16
         * 0.0%; Qwen3-30B-A3B Q4_K_M (its wo) +1.8%. Blocks that one multiprocessor holds
         * alone by their registers ask for nothing (Llama-3.2-3B's 96 and Llama-3-8B's 128 of 1024
         * threads, Gemma-3-4B's 128 of 640). */
        ZrMvShape s = {.groups = G, .split = split, .blocks = 0};
        if (rule == RULE_DENSE && k->alone_smem && tiles <= k->sm_count && /* the grid: a block a tile */
            zr_cuf_kernel_blocks_per_sm(&k->mv[w->type], 32 * G * split) >= 2)
            s.smem = (unsigned)k->alone_smem;
        return s;
    }
    /* Quantized types run it with blocks of 16 row groups, 2 a multiprocessor (the same 1024
     * threads an SM): half the blocks stage x (H200 tg128, session 12: gemma3-4b Q8_0 +2.0%,
     * llama3-8b Q8_0 +1.5%, the Q4_K_M files' Q6_K outputs +0.25-0.5%); F16 keeps 8 and 4
     * (zrun-mv-bench: 16 and 2 no faster on its outputs). A kernel whose registers hold one such
     * block an SM (the float Q5_0, Q5_1 until session 29: 79 and 125) gets one block an SM, not two
     * in two rounds (session 20, llama3-8b tg128: Q5_0 +2.6%, Q5_1 +2.6%). */
    if (quant) {
        const int per_sm = zr_cuf_kernel_blocks_per_sm(zr_cuf_mv_tall_kernel(k, w->type, mode), 32 * 16);
        return (ZrMvShape){.groups = 16, .split = 1, .blocks = (per_sm < 2 ? 1 : 2) * k->sm_count};
    }
    return (ZrMvShape){.groups = G, .split = split, .blocks = (int)blocks};
}

ZrMvShape zr_cuf_mv_shape(const ZrCuKernels *k, const ZrCuWeight *w, int mode) { return shape_of(k, w, mode, RULE_DENSE); }

ZrMvShape zr_cuf_mv_shape_general(const ZrCuKernels *k, const ZrCuWeight *w, int mode) {
    return shape_of(k, w, mode, RULE_GENERAL);
}

ZrMvShape zr_cuf_mv_shape_expert(const ZrCuKernels *k, const ZrCuWeight *w, int mode) {
    return shape_of(k, w, mode, RULE_EXPERT);
}

/* Mixtral-8x7B's down (2 slots of 2048 row groups of 14336 values) took one expert's shape, split
 * in two on blocks of 8 row groups: 512 blocks of 512 threads, 264 resident, the rest in a second
 * round that staged x again (the last resident 22.7 us after the first: cu/PERF.md, session 19).
 * Counted over every slot it needs no split to fill the GPU: 128 blocks of 32 row groups, one
 * round, each multiprocessor staging x once. H200 tg128, session 20: 294.1 -> 306.2 t/s (+4.1%);
 * blocks of 16 row groups (two an SM) 305.6. Unsplit on blocks of 8 (4 an SM, each thread staging
 * twice as much of x) had lost 1.3% (session 19). */
ZrMvShape zr_cuf_mv_shape_expert_slots(const ZrCuKernels *k, const ZrCuWeight *w, int mode, int n_used) {
    const ZrMvShape s = shape_of(k, w, mode, RULE_EXPERT), slots = {.groups = 32, .split = 1, .blocks = 0};
    const long R = zr_cuf_mv_rows_per_warp(w->type), groups = ((long)w->n_out + R - 1) / R;
    const long blocks = (long)n_used * ((groups + slots.groups - 1) / slots.groups);
    const bool fits = zr_cuf_kernel_max_threads(&k->mv_id[w->type]) >= 32 * slots.groups;
    return !(mode & ZR_CUF_MV_GLU) && s.split > 1 && blocks <= k->sm_count && fits ? slots : s;
}

/* Counted as 1024 threads a multiprocessor (four blocks of 256, which 72 registers a thread do not
 * fit: three do), Mixtral's gate|up of 3584 tiles took 512 blocks, 116 of them in a second round
 * after the first ones' 7 tiles; session 19's tall rule gave it blocks of 512 threads (one a
 * multiprocessor), 124 of 256 in a second round: the last blocks resident 34 us after the first
 * (timeline, cu/PERF.md). Three blocks of 256 an SM: 359 blocks of 10 tiles, H200 tg128 +6.8%.
 * The blocks an SM holds are the kernel's own (its registers, read at load; session 19 counted the
 * flat kernels' largest cap, 72, for every type), at most 1024 threads. */
unsigned zr_cuf_mv_flat_blocks(const ZrCuKernels *k, const ZrKernel *kern, unsigned tiles, ZrMvShape shape) {
    const int threads = 32 * shape.groups * shape.split, by_kernel = zr_cuf_kernel_blocks_per_sm(kern, threads);
    const int per_sm = by_kernel < 1024 / threads ? by_kernel : 1024 / threads;
    const unsigned resident = (unsigned)k->sm_count * (unsigned)(per_sm > 1 ? per_sm : 1);
    const unsigned waves = (tiles + resident - 1) / resident;
    return (tiles + waves - 1) / waves;
}

unsigned zr_cuf_mv_grid(const ZrCuWeight *w, int mode, ZrMvShape shape) {
    const long R = zr_cuf_mv_rows_per_warp(w->type), glu = (mode & ZR_CUF_MV_GLU) != 0;
    const long per_warp = glu ? R / 2 : R, results = glu ? w->n_out / 2 : w->n_out;
    const long groups = (results + per_warp - 1) / per_warp, tiles = (groups + shape.groups - 1) / shape.groups;
    return (unsigned)(shape.blocks > 0 && shape.blocks < tiles ? shape.blocks : tiles);
}

int zr_cuf_matvec_shaped(ZrLauncher *l, const ZrCuKernels *k, const ZrCuWeight *w, CUdeviceptr x, CUdeviceptr y,
                         CUdeviceptr add, CUdeviceptr norm_w, float eps, int mode, ZrMvShape shape, ZrError *err) {
    if (w->type >= ZR_TYPE_COUNT || !k->has_mv[w->type])
        return zr_err(err, ZR_E_UNSUPPORTED, "no matrix-vector kernel for type %s", zr_type_name(w->type));
    if (shape.blocks > 0 && !k->has_mvt[w->type])
        return zr_err(err, ZR_E_UNSUPPORTED, "no tall matrix-vector kernel for type %s", zr_type_name(w->type));
    return zr_k_matvec(l, mv_kernel(k, w->type, mode, shape), zr_cuf_mv_rows_per_warp(w->type), w, x, y, add, norm_w,
                       eps, mode, shape, NULL, err);
}

int zr_cuf_matvec_post(ZrLauncher *l, const ZrCuKernels *k, const ZrCuWeight *w, CUdeviceptr x, const ZrMvPost *p,
                       CUdeviceptr y, CUdeviceptr norm_w, float eps, int mode, ZrError *err) {
    if (w->type >= ZR_TYPE_COUNT || !k->has_mv[w->type])
        return zr_err(err, ZR_E_UNSUPPORTED, "no matrix-vector kernel for type %s", zr_type_name(w->type));
    if (p->x_out == x) return zr_err(err, ZR_E_INTERNAL, "%s: ADDNORM writes its residual over its input", k->mv[w->type].name);
    mode = (mode & ~3) | ZR_CUF_MV_ADDNORM;
    const ZrMvShape shape = zr_cuf_mv_shape(k, w, mode);
    int rc;
    if (special_product(l, k, w, x, y, 0, norm_w, eps, mode, shape, p, &rc, err)) return rc;
    return zr_k_matvec(l, mv_kernel(k, w->type, mode, shape), zr_cuf_mv_rows_per_warp(w->type), w, x, y, 0, norm_w, eps,
                       mode, shape, p, err);
}

int zr_cuf_matvec(ZrLauncher *l, const ZrCuKernels *k, const ZrCuWeight *w, CUdeviceptr x, CUdeviceptr y,
                  CUdeviceptr add, CUdeviceptr norm_w, float eps, int mode, ZrError *err) {
    if (w->type >= ZR_TYPE_COUNT || !k->has_mv[w->type])
        return zr_err(err, ZR_E_UNSUPPORTED, "no matrix-vector kernel for type %s", zr_type_name(w->type));
    const ZrMvShape shape = zr_cuf_mv_shape(k, w, mode);
    int rc;
    if (special_product(l, k, w, x, y, add, norm_w, eps, mode, shape, NULL, &rc, err)) return rc;
    return zr_cuf_matvec_shaped(l, k, w, x, y, add, norm_w, eps, mode, shape, err);
}

/* each computed type's id by its kernel suffix (ZR_KSUF_q4_k == ZR_TYPE_Q4_K) */
enum {
#define ZR_TYPE(id, E, name, block, bytes, kernel, item, main, side) ZR_KSUF_##kernel = id,
#include "zr_types.def"
};

/* cu/kernels.def's ZR_KMIX lines: each pair's two types */
static const uint32_t mix_pairs[][2] = {
#define ZR_KMIX(a, b, params) {ZR_KSUF_##a, ZR_KSUF_##b},
#include "cu/kernels.def"
};

int zr_cuf_mv_mix_kernel(uint32_t a, uint32_t b, bool *swapped) {
    for (int i = 0; i < ZR_KMIX_COUNT; i++) {
        if ((mix_pairs[i][0] == a && mix_pairs[i][1] == b) || (mix_pairs[i][0] == b && mix_pairs[i][1] == a)) {
            *swapped = mix_pairs[i][0] == b;
            return i;
        }
    }
    return -1;
}

/* The mix launch of ws with each part's shape_of (short_split as there); false where the parts'
 * shapes do not fit one launch. */
static bool mix_plan(const ZrCuKernels *k, const ZrCuWeight *ws, int n, int mode, int kern, uint32_t second,
                     bool short_split, ZrMvMix *out) {
    ZrMvMix p = {.kernel = kern, .n_parts = n, .general = !short_split};
    for (int i = 0; i < n; i++) {
        const ZrMvShape s = shape_of(k, &ws[i], mode, short_split ? RULE_DENSE : RULE_GENERAL);
        const int threads = 32 * s.groups * s.split;
        const int R = zr_cuf_mv_rows_per_warp(ws[i].type), glu = (mode & ZR_CUF_MV_GLU) != 0;
        if (s.blocks > 0 || threads > ZR_CUF_MV_MAX_THREADS || (i > 0 && threads != p.threads) || (glu && (R % 2 || ws[i].n_out % 2))) return false;
        p.threads = threads;
        p.split[i] = s.split;
        p.tiles[i] = (int)zr_cuf_mv_grid(&ws[i], mode, s); /* this matrix's own launch: a block per tile */
        if (ws[i].type == second) p.b_mask |= 1u << i;
    }
    *out = p;
    return true;
}

/* The warps of a mix launch (its parts' tiles in one grid). */
static long mix_warps(const ZrMvMix *p) {
    long tiles = 0;
    for (int i = 0; i < p->n_parts; i++) tiles += p->tiles[i];
    return tiles * (p->threads / 32);
}

bool zr_cuf_mv_mix_plan(const ZrCuKernels *k, const ZrCuWeight *ws, int n, int mode, ZrMvMix *out) {
    if (n < 2 || n > ZR_CUF_MV_MIX_PARTS) return false;
    uint32_t a = ws[0].type, b = a;
    for (int i = 1; i < n; i++) {
        if (ws[i].n_in != ws[0].n_in) return false; /* they must share x */
        if (ws[i].type == a || ws[i].type == b) continue;
        if (b != a) return false; /* a third type */
        b = ws[i].type;
    }
    bool swapped = false;
    const int kern = b != a ? zr_cuf_mv_mix_kernel(a, b, &swapped) : -1;
    if (kern < 0 || !k->has_mv_mix[kern]) return false;
    const uint32_t second = swapped ? a : b;
    /* Each part's own shape (zr_cuf_mv_shape) while the whole launch stays within one wave of the
     * mix kernels (64 registers: 32 warps a multiprocessor); where the short rows' split would
     * take it past one, every part takes the general rule's (zr_cuf_mv_shape_general). Session
     * 11, H200 tg128, Q4_K_M's Q6_K v split: gemma3-4b (a launch of 0.6 waves) 510.6 -> 513.6
     * t/s; gemma3-12b (1.2 waves) 238.6 -> 235.5 with it, 238.0 without (cu/PERF.md). */
    if (mix_plan(k, ws, n, mode, kern, second, true, out) && mix_warps(out) <= 32L * k->sm_count) return true;
    return mix_plan(k, ws, n, mode, kern, second, false, out);
}
