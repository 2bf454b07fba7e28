// The vocabulary output of Q6_K files (the LM head of Q4_K_M and Q5_K_M files) on the tensor
// cores, where its rows' items leave the float product's lanes idle (Gemma-3-4B's: the rule and
// its measurements in src/cuda/mv_shape.c):
// y[n_out] = W[n_out, n_in] x'[n_in] (+ add), x' as the other products stage it (as is,
// RMSNorm(x) * norm_w, or gemma's ADDNORM), one launch per token.
//
// Why: the float product (ZrMvQ6K in matvec.cuh) builds each 6-bit weight as a float by a byte
// permute and an add, then multiplies it: ncu counts 5.5-5.8 thread instructions a weight, and the
// LM head is bound by them (0.75 of an issue slot a cycle, DRAM at 45-52%), more so where a row
// of 80 items leaves half the lanes idle in its last step: Gemma-3-4B's 262144 x 2560 took 200 us
// for 550 MB (cu/PERF.md session 25). Here a weight's 6 bits are put together by masks (as the
// float item), two of them made one f16x2 by one byte permute (0x64XX is the half 1024 + XX) and one
// subtraction, and one mma.sync.m16n8k16 takes the multiply-adds of 16 rows x 16 values (ncu: 3.2
// thread instructions a weight against 5.8, 67 M warp instructions against 145 M). It is not
// bound by its instructions (issue 0.53) nor by the bytes it has in flight (more warps, or a
// cp.async ring, measured slower), and where the float product's lanes are full it gains nothing.
// Its rows' scale records (18 bytes a super-block: 16 int8 scales and d) come a tile at a time into
// shared memory by whole-line copies (cp.async), not as each lane's 2-byte loads every step (H200,
// session 26: Gemma-3-4B's output 168.4 -> 163.7 us in the graph, tg128 +0.4-0.5%).
//
// Exactness: a weight q - 32 (-32..31) is exact in f16. x' is split into two halves, hi + lo
// (x' s = hi + lo with |error| <= 2^-22 |x' s|, after scaling by the power of two s that puts the
// block's largest |x'| in [2^13, 2^14): no overflow, and the lo parts of small values lose
// nothing that matters next to the largest). Each product q * hi, q * lo is exact in the f32
// sums of the mma; the 16 values of one Q6_K scale group are summed there, then each group's
// sum is scaled by d * sc in f32 as in the float item. The results are within the float path's
// distance of the CPU reference (test_kernels), not its bits.
//
// How one mma serves four scale groups: the 16 k-slots of m16n8k16 are split among the 4 lanes t
// of a quad (lane t holds A's and B's k-slots 2t, 2t+1, 2t+8, 2t+9), and B's 8 columns are 4 pairs
// (hi, lo): column 2t (hi) and 2t+1 (lo) hold x' only in lane t's k-slots, zero elsewhere. So D's
// columns 2t, 2t+1, which lane t holds, are the dots of lane t's k-slots alone: lane t feeds item
// 4m + t of the step (its 4 values of word j a mma; 4 mmas a scale group of 16), and reads that
// item's two group sums for rows g and g + 8 back in its own registers. A warp takes a tile of 16
// rows over the whole row, 4 items a step; no shuffles but the quad's final sum.
//
// Launch: grid up to one wave (blocks loop over tiles of 16 rows x 16 warps), block 512 threads,
// dynamic shared memory zr_cuf_mv_mma_smem(n_in): x' padded as matvec.cuh stages it, then B
// (n_in / 32 items x 2 planes x 32 halves), 24 words (16 zero words from the 8th), then each
// warp's two buffers of a tile's scale records (2 x 16 rows x n_in / 256 x 18 bytes). n_in % 256 ==
// 0; ws 16-byte aligned (the host's rule).
#include "matvec.cuh"
#include "mma.cuh"

#define ZR_MVM_THREADS 512
#define ZR_MVM_WARPS (ZR_MVM_THREADS / 32)

// One step for one row: item it's 16 bytes of low bits and 8 of high bits (loaded), its two
// scales and its super-block's d (read from the tile's scale records in shared memory).
struct ZrMvmItem {
    uint4 q;
    uint2 h;
    uint32_t sc; // the two int8 scales in bits 0..15
    uint32_t d;  // the half d in bits 0..15
};

__device__ __forceinline__ void zr_mvm_load(const uint8_t *__restrict__ w, uint32_t sb0, int it, ZrMvmItem &f) {
    const uint32_t sb = sb0 + (uint32_t)(it >> 3);
    const uint8_t *b = w + (size_t)sb * 192;
    f.q = zr_ld16(b + 16 * (it & 7));
    f.h = __ldg((const uint2 *)(b + 128 + 8 * (it & 7)));
}

// Bytes 0,1 (sel 0x4140) or 2,3 (0x4342) of v as an f16x2 of v - 32: 0x64XX is 1024 + XX.
__device__ __forceinline__ uint32_t zr_mvm_h2(uint32_t v, uint32_t sel) {
    const uint32_t h = __byte_perm(v, 0x64646464u, sel);
    uint32_t r;
    asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(h), "r"(0x64206420u)); // 1056 = 1024 + 32
    return r;
}

// Word j of group grp (0: low nibbles, values 4j..4j+3 of the item; 1: high nibbles, 16 + 4j..)
// with its two high bits: four 6-bit values in bytes 0..3 (as ZrMvQ6K::comp builds them).
__device__ __forceinline__ uint32_t zr_mvm_word(const ZrMvmItem &f, int grp, int j) {
    const uint32_t w4 = j == 0 ? f.q.x : j == 1 ? f.q.y : j == 2 ? f.q.z : f.q.w;
    return grp == 0 ? (w4 & 0x0F0F0F0Fu) | (((f.h.x >> (2 * j)) & 0x03030303u) << 4)
                    : ((w4 >> 4) & 0x0F0F0F0Fu) | (((f.h.y >> (2 * j)) & 0x03030303u) << 4);
}

// P steps of loads in flight a lane (P - 1 ahead of the one it computes).
template <int P>
__device__ __forceinline__ void zr_matvec_q6k_mma(const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws,
                                                  const float *__restrict__ x, float *y, const float *add,
                                                  const float *__restrict__ norm_w, float eps, int n_in, int n_out,
                                                  int mode, const float *__restrict__ post_r,
                                                  const float *__restrict__ post_w, float *x_out) {
    extern __shared__ float4 zr_mv_smem[];
    __shared__ float red_ss[ZR_MVM_WARPS], red_max[ZR_MVM_WARPS];
    float *xs = (float *)zr_mv_smem;
    const int n_pad = zr_xpad(n_in);
    uint32_t *bw = (uint32_t *)(xs + n_pad); // [item][plane: hi, lo][16 words of 2 halves], then the zero words
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
    const int in_mode = mode & ZR_MV_IN, items = n_in >> 5, steps = items >> 2, nsb = n_in >> 8;
    const int n_tiles = (n_out + 15) >> 4, tile_step = gridDim.x * ZR_MVM_WARPS;

    int tile = blockIdx.x * ZR_MVM_WARPS + warp;
    uint32_t sb_g = 0, sb_g8 = 0; // rows g and g + 8 of the tile (clamped): their first super-block
    ZrMvmItem f[P][2];
    auto load_step = [&](int m, ZrMvmItem (&dst)[2]) {
        zr_mvm_load(w, sb_g, 4 * m + t, dst[0]);
        zr_mvm_load(w, sb_g8, 4 * m + t, dst[1]);
    };
    // a tile's scale records (16 rows x nsb x 18 bytes, contiguous and 16-byte aligned) copied by
    // the warp in 16-byte pieces into one of its two buffers, after the B planes: a few requests
    // of whole lines instead of each lane's 2-byte scales and d of every step
    const int tsc = nsb * 18 * 16;
    uint8_t *scb = (uint8_t *)(bw + items * 32 + 24) + (size_t)warp * 2 * tsc;
    auto issue_scales = [&](int tl, int b) {
        const size_t total = (size_t)n_out * nsb * 18, base = (size_t)tl * tsc;
        for (int c = lane; c < tsc / 16; c += 32) {
            const size_t off = base + 16 * (size_t)c;
            const int n = off >= total ? 0 : (int)min((size_t)16, total - off);
            zr_cp16(scb + b * tsc + 16 * c, ws + (n ? off : 0), n);
        }
    };
    // tile tl's rows, and its first P - 1 steps requested
    auto begin_tile = [&](int tl) {
        const int r0 = min(tl * 16 + g, n_out - 1), r1 = min(tl * 16 + g + 8, n_out - 1);
        sb_g = (uint32_t)r0 * (uint32_t)nsb;
        sb_g8 = (uint32_t)r1 * (uint32_t)nsb;
#pragma unroll
        for (int q = 0; q < P - 1; q++)
            if (q < steps) load_step(q, f[q]);
    };
    if (tile < n_tiles) {
        begin_tile(tile);
        issue_scales(tile, 0);
    }
    zr_cp_commit();
    // everything above reads weights only
    zr_grid_enter_after_loads(w);

    float ss = zr_mv_stage_x<false, true, false>(x, norm_w, xs, n_in, in_mode, tid, ZR_MVM_THREADS, false, post_r,
                                                 post_w, x_out, eps, mode >> ZR_MV_NSS_SHIFT);
    if (zr_mv_normed(in_mode)) {
        ss = zr_warp_sum(ss);
        if (lane == 0) red_ss[warp] = ss;
    }
    __syncthreads();
    float amax = 0.f; // the block's largest |x'|
    for (int v = tid; v < n_in; v += ZR_MVM_THREADS) amax = fmaxf(amax, fabsf(xs[zr_xpad(v)]));
    amax = zr_warp_max(amax);
    if (lane == 0) red_max[warp] = amax;
    __syncthreads();
    amax = 0.f;
#pragma unroll
    for (int k = 0; k < ZR_MVM_WARPS; k++) amax = fmaxf(amax, red_max[k]);
    int e = 0;
    frexpf(amax, &e); // amax in [2^(e-1), 2^e)
    const float s = amax > 0.f && amax <= 3.0e38f ? ldexpf(1.f, min(14 - e, 126)) : 1.f;
    __half *bh = (__half *)bw;
    for (int v = tid; v < n_in; v += ZR_MVM_THREADS) {
        const float val = xs[zr_xpad(v)] * s;
        const __half hi = __float2half_rn(val), lo = __float2half_rn(val - __half2float(hi));
        const int at = (v >> 5) * 64 + (v & 31); // item v / 32 (64 halves), plane 0; plane 1 at + 32
        bh[at] = hi;
        bh[at + 32] = lo;
    }
    if (tid < 16) bw[items * 32 + 8 + tid] = 0u; // (8 words on: other banks than the planes' reads)
    __syncthreads();
    const float inv = zr_mv_normed(in_mode) ? zr_mv_inv_rms(red_ss, ZR_MVM_WARPS, n_in, eps) : 1.f;
    const float out_scale = inv / s; // (1/s a power of two)
    // lane (g, t): B's column g holds x' in the k-slots of lane g / 2 (hi for even g, lo for odd)
    const bool feeds = (g >> 1) == t;
    const uint32_t *bsrc = feeds ? bw + (g & 1) * 16 : bw + items * 32 + 8; // + item * 32 words (feeds)
    const int bstep = feeds ? 4 * 32 : 0;                                 // words a step (4 items)

    for (int buf = 0; tile < n_tiles; tile += tile_step, buf ^= 1) {
        // the next tile's records requested into the other buffer (the last tile's reads of it
        // are done), then this tile's awaited
        __syncwarp();
        if (tile + tile_step < n_tiles) issue_scales(tile + tile_step, buf ^ 1);
        zr_cp_commit();
        zr_cp_wait<1>();
        __syncwarp();
        const uint8_t *sr0 = scb + buf * tsc + g * nsb * 18, *sr1 = sr0 + 8 * nsb * 18;
        float acc0 = 0.f, acc1 = 0.f; // rows g, g + 8: this lane's items' sums
        const uint32_t *bp = bsrc + (feeds ? t * 32 : 0);
        for (int m0 = 0; m0 < steps; m0 += P) {
#pragma unroll
            for (int q = 0; q < P; q++) {
                const int mi = m0 + q;
                if (mi < steps) {
                    if (mi + P - 1 < steps) load_step(mi + P - 1, f[(q + P - 1) % P]);
                    ZrMvmItem &r0 = f[q][0], &r1 = f[q][1];
                    {
                        const int o = (mi >> 1) * 18; // the step's super-block; item 4 (mi & 1) + t
                        r0.sc = *(const uint16_t *)(sr0 + o + 2 * (4 * (mi & 1) + t));
                        r1.sc = *(const uint16_t *)(sr1 + o + 2 * (4 * (mi & 1) + t));
                        r0.d = *(const uint16_t *)(sr0 + o + 16);
                        r1.d = *(const uint16_t *)(sr1 + o + 16);
                    }
                    uint4 bq[4];
#pragma unroll
                    for (int k = 0; k < 4; k++) bq[k] = *(const uint4 *)(bp + 4 * k);
                    const uint32_t b[16] = {bq[0].x, bq[0].y, bq[0].z, bq[0].w, bq[1].x, bq[1].y, bq[1].z, bq[1].w,
                                            bq[2].x, bq[2].y, bq[2].z, bq[2].w, bq[3].x, bq[3].y, bq[3].z, bq[3].w};
                    bp += bstep;
#pragma unroll
                    for (int grp = 0; grp < 2; grp++) {
                        float d[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
                        for (int j = 0; j < 4; j++) {
                            const uint32_t u0 = zr_mvm_word(r0, grp, j), u1 = zr_mvm_word(r1, grp, j);
                            const uint32_t a[4] = {zr_mvm_h2(u0, 0x4140), zr_mvm_h2(u1, 0x4140), zr_mvm_h2(u0, 0x4342),
                                                   zr_mvm_h2(u1, 0x4342)};
                            zr_mma_16816(d, a, b[grp * 8 + 2 * j], b[grp * 8 + 2 * j + 1]);
                        }
                        const float s0 = __half2float(__ushort_as_half((unsigned short)r0.d)) *
                                         (float)(int8_t)(r0.sc >> (8 * grp));
                        const float s1 = __half2float(__ushort_as_half((unsigned short)r1.d)) *
                                         (float)(int8_t)(r1.sc >> (8 * grp));
                        acc0 = fmaf(s0, d[0] + d[1], acc0);
                        acc1 = fmaf(s1, d[2] + d[3], acc1);
                    }
                }
            }
        }
        acc0 += __shfl_xor_sync(0xffffffffu, acc0, 1);
        acc1 += __shfl_xor_sync(0xffffffffu, acc1, 1);
        acc0 += __shfl_xor_sync(0xffffffffu, acc0, 2);
        acc1 += __shfl_xor_sync(0xffffffffu, acc1, 2);
        const int row0 = tile * 16 + g, row1 = row0 + 8;
        if (t == 0 && row0 < n_out) y[row0] = acc0 * out_scale + (add ? add[row0] : 0.f);
        if (t == 0 && row1 < n_out) y[row1] = acc1 * out_scale + (add ? add[row1] : 0.f);
        if (tile + tile_step < n_tiles) begin_tile(tile + tile_step);
    }
}

#define ZR_MVM_KERNEL(NAME, P)                                                                                 \
    ZR_KERNEL void __launch_bounds__(ZR_MVM_THREADS, 1) NAME(ZR_MV_KPARAMS) {                                  \
        ZR_TL_EXIT;                                                                                           \
        (void)split;                                                                                          \
        zr_matvec_q6k_mma<P>(w, ws, x, y, add, norm_w, eps, n_in, n_out, mode, post_r, post_w, x_out);        \
    }

// P = 3 (107 registers, one block an SM; 101 since the scales come from shared memory): H200
// tg128 Gemma-3-4B 603.1 -> 612.1 t/s, where P = 2
// (84 registers) gave 606.0, blocks of 256 threads three an SM (P = 2, 76 registers) 602.3, and a
// cp.async ring of 4 or 6 steps in shared memory 590.9 / 586.4 (cu/PERF.md session 25)
ZR_MVM_KERNEL(matvec_q6_k_mma, 3)
