// Decode attention (M = 1) of one layer on the tensor cores, for an F16 cache past long contexts:
// a block serves every query head of one KV head, so each cached K/V row crosses DRAM and L2 once
// a layer, and the G query heads' dot products and P.V sums are one mma.sync each per 16 rows.
// The same contract as attention_decode.cu's kernels (head norms, rope, the cache write of the
// current position, a sliding window, soft-capped scores, the merge of the blocks by the last
// one), for heads of D = 64 or 128 values and G = n_head / n_kv <= 16 query heads a KV head.
//
// attn_decode_mma_d64_kvh / _d128_kvh: grid (n_kv, n_split), block ZR_ADM_THREADS (4 warps),
//   ZrAdm<D>::SMEM bytes of dynamic shared memory.
//   - The rows the query sees, [first, pos] (first = pos + 1 - window on a local layer, else 0),
//     are cut into T tiles of 16 rows from `first`; block y of the nb = min(n_split, ceil(T /
//     ZR_ADM_BLOCK_TILES)) blocks with rows takes tiles [y T / nb, (y + 1) T / nb), and its warp
//     w every NW-th of them (a short context in fewer blocks: fewer partials to merge, none up to
//     128 rows). A warp
//     streams its tiles through its own ring of ZR_ADM_STAGES slots in shared memory (cp.async,
//     rows past pos zero-filled; row pos, written to the cache by this launch, is copied into
//     its slot from shared memory, rounded as cached), keeping the next tiles in flight while it
//     computes one. The first tiles are requested before the grid wait (they are rows < pos,
//     which no kernel of this step writes).
//   - The prologue after the wait is short, because 4 warps run it alone on the SM: a warp
//     takes whole vectors in turn (the G q heads, then K and V of row pos), a lane D / 32 values
//     of each, its next vector loaded while it works one; the rope's angles and pairs and the
//     norm weights are the lane's registers from before the wait (cu/PERF.md session 33: the
//     prologue of a thread an element in turn ran ~680 instructions a warp after the wait for
//     G = 4; Llama-3-8B +2.3% with these groups from position 0).
//   - S = Q K^T and O += P V by mma.sync m16n8k16 (F16 operands, F32 accumulation), with the
//     query heads as the 16 rows of A (heads past G are zeros). Q and P are each split into two
//     halves, hi = half(x) and lo = half(x - hi), and both are multiplied: Q and P then carry ~22
//     bits, K and V are the cache's halves exactly, so the scores and the output keep F32's
//     precision (the CUDA-core kernels' tolerance in test_kernels), for twice the mma.sync, which
//     the DRAM stream hides.
//   - An online softmax per head in F32 (expf) over each warp's tiles; the warps merged in warp
//     order, then the blocks as attention_decode.cu's (partials, count[kvh], the last block
//     merges in block order: replay equals eager bit for bit).
// Needs sm_80+ (mma.sync m16n8k16, ldmatrix, cp.async).
#include "attn_decode.cuh"
#include "common.cuh"
#include "kv.cuh"
#include "mma.cuh"
#include "rope.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "attention_decode_mma.cu needs sm_80 or newer (mma.sync m16n8k16, ldmatrix)"
#endif

#define ZR_ADM_THREADS 128
#define ZR_ADM_WARPS (ZR_ADM_THREADS / 32)
#define ZR_ADM_STAGES 4 // tiles in a warp's ring: one computed, the others in flight
#define ZR_ADM_TILE 16  // cache rows a tile
#define ZR_ADM_HEADS 16 // query heads a block at most (the rows of an mma)
#define ZR_ADM_BLOCK_TILES 8 // tiles a block at least (two a warp), where the context allows
#define ZR_ADM_PRE 16        // partials the merge loads at once (a head's blocks: n_kv x them fill the SMs)

template <int D> struct ZrAdm {
    static constexpr int LD = D + 8;                              // a row's stride in halves: conflict-free ldmatrix
    static constexpr int SLOT = 2 * ZR_ADM_TILE * LD;             // halves of a slot: K rows, then V rows
    static constexpr int RING = ZR_ADM_STAGES * SLOT;             // halves of a warp's ring
    static constexpr int SMEM = ZR_ADM_WARPS * RING * 2;          // dynamic bytes
    // the warps' outputs after the loop reuse the rings
    static_assert(ZR_ADM_WARPS * ZR_ADM_HEADS * D * 4 <= SMEM, "the warps' outputs fit the rings");
};

// A tile's rows r0 .. r0 + 15 of this KV head into a slot (K then V) in 16-byte pieces, whole rows
// a request (32 / (D / 8) rows a warp's copy); rows at or past n_cached (row pos and later) are
// zero-filled, not read. One address a lane, moved a few rows a step: this kernel's few warps run
// its straight-line code from the instruction cache's misses (cu/PERF.md session 32).
template <int D>
__device__ __forceinline__ void zr_adm_issue(__half *slot, const __half *kc, const __half *vc, int kv_dim, int r0,
                                             int n_cached, int lane) {
    constexpr int PR = D / 8, RS = 32 / PR, LD = ZrAdm<D>::LD; // pieces a row; rows a step
    const int r = lane / PR, p = lane % PR;
    const __half *k = kc + (size_t)(r0 + r) * kv_dim + 8 * p, *v = vc + (size_t)(r0 + r) * kv_dim + 8 * p;
    __half *ks = slot + r * LD + 8 * p;
#pragma unroll
    for (int j = 0; j < ZR_ADM_TILE / RS; j++) {
        const bool in = r0 + r + j * RS < n_cached;
        zr_cp16_if(ks + j * RS * LD, in ? k + (size_t)j * RS * kv_dim : kc, in);
        zr_cp16_if(ks + (ZR_ADM_TILE + j * RS) * LD, in ? v + (size_t)j * RS * kv_dim : vc, in);
    }
}

// vector v of a block's prologue: q head v of the group (v < G), else K (G) or V (G + 1) of row pos
__device__ __forceinline__ const float *zr_adm_vec(const float *qsrc, const float *ksrc, int v, int G, int D, int kv_dim) {
    return v < G ? qsrc + v * D : ksrc + (v - G) * kv_dim;
}

// x as two F16 pairs: hi = half(x), lo = half(x - hi)
__device__ __forceinline__ void zr_adm_split(float a, float b, uint32_t &hi, uint32_t &lo) {
    const __half2 h = __floats2half2_rn(a, b);
    const float2 f = __half22float2(h);
    hi = *(const uint32_t *)&h;
    lo = zr_mma_pack(a - f.x, b - f.y);
}

template <int D>
__device__ __forceinline__ void zr_attn_decode_mma(const float *__restrict__ qkv, __half *__restrict__ kc,
                                                   __half *__restrict__ vc, float *__restrict__ part,
                                                   int *__restrict__ count, float *__restrict__ out,
                                                   const double *__restrict__ freq, const int *__restrict__ pos_p,
                                                   const float *__restrict__ q_norm, const float *__restrict__ k_norm,
                                                   int n_head, int n_kv, int rope_dim, int neox, int n_split, float scale,
                                                   float eps, int window, float softcap) {
    constexpr int LD = ZrAdm<D>::LD, KS = D / 16, NT = D / 8;
    constexpr int VPL = D / 32; // values of a vector a lane holds: d = lane + 32 i
    extern __shared__ __align__(16) __half adm_ring[];
    __shared__ float raw[(ZR_ADM_HEADS + 1) * D]; // the q heads, then k of row pos: normed, not rotated
    __shared__ __align__(16) __half qhs[ZR_ADM_HEADS * LD], qls[ZR_ADM_HEADS * LD]; // rotated q * scale: hi, lo
    __shared__ __align__(16) __half knh[D], vnh[D]; // row pos of K and V, as cached
    __shared__ float wm[ZR_ADM_WARPS * ZR_ADM_HEADS], wl[ZR_ADM_WARPS * ZR_ADM_HEADS];
    __shared__ int last;

    const int kvh = blockIdx.x, y = blockIdx.y, t = threadIdx.x, warp = t >> 5, lane = t & 31;
    const int G = n_head / n_kv, h = kvh * G, kv_dim = n_kv * D;
    // first, beside the position's load: what no kernel writes and the position does not change,
    // each of the lane's values' rope pair (i0, i1), its frequency and its norm weights (as
    // attention_decode.cu does). Loaded after the position and its branch they were a second
    // round trip before the wait: H200 tg128 after 8192 positions, Llama-3-8B Q4_K_M +1.0 to
    // +1.2%, a Qwen3-4B-shaped Q4_K_M +1.1% (cu/PERF.md, session 39)
    int p0[VPL], p1[VPL];
    double fq[VPL];
    float wq[VPL], wk[VPL];
#pragma unroll
    for (int i = 0; i < VPL; i++) {
        const int d = lane + 32 * i, half = rope_dim >> 1, j = zr_rope_pair_of(d, half, neox);
        zr_rope_pair_values(j, half, neox, &p0[i], &p1[i]);
        fq[i] = d < rope_dim ? freq[j] : 0.0;
        wq[i] = q_norm ? q_norm[d] : 1.f;
        wk[i] = k_norm ? k_norm[d] : 1.f;
    }
    const int pos = pos_p[0], seq = pos + 1;
    const int first = window > 0 && seq > window ? seq - window : 0;
    const int tiles = (seq - first + ZR_ADM_TILE - 1) / ZR_ADM_TILE;
    // at least ZR_ADM_BLOCK_TILES tiles a block: a short context's rows in fewer blocks, whose
    // partials the last one merges (one block: no merge)
    const int blocks = min(n_split, (tiles + ZR_ADM_BLOCK_TILES - 1) / ZR_ADM_BLOCK_TILES);
    if (y >= blocks) return;
    // (in 32 bits: n_split <= the partials' 1024 slots a head, tiles <= n_ctx / 16)
    const int t0 = (int)((unsigned)(y * tiles) / (unsigned)blocks);
    const int t1 = (int)((unsigned)((y + 1) * tiles) / (unsigned)blocks);
    const bool cur = y == blocks - 1; // the block whose last tile holds row pos
    const int mine = (t1 - t0 - warp + ZR_ADM_WARPS - 1) / ZR_ADM_WARPS; // this warp's tiles: t0 + warp + i NW
    const __half *kb = kc + (size_t)kvh * D, *vb = vc + (size_t)kvh * D;
    __half *ring = adm_ring + warp * ZrAdm<D>::RING;

    // before the wait (none of it is written by a kernel of this step; pos by host copies before
    // it): the first tiles (a commit group per tile, empty past the warp's last), the rows of q
    // past G as zeros, and for each of the lane's values its rope pair (i0, i1), angle and norm weights
#pragma unroll 1
    for (int s = 0; s < ZR_ADM_STAGES - 1; s++) {
        if (s < mine)
            zr_adm_issue<D>(ring + s * ZrAdm<D>::SLOT, kb, vb, kv_dim, first + (t0 + warp + s * ZR_ADM_WARPS) * ZR_ADM_TILE,
                            pos, lane);
        zr_cp_commit();
    }
    for (int i = t; i < (ZR_ADM_HEADS - G) * D / 8; i += ZR_ADM_THREADS) {
        const int v = G + i / (D / 8), d8 = i % (D / 8);
        *(uint4 *)(qhs + v * LD + 8 * d8) = make_uint4(0u, 0u, 0u, 0u);
        *(uint4 *)(qls + v * LD + 8 * d8) = make_uint4(0u, 0u, 0u, 0u);
    }
    float rc[VPL], rs[VPL];
#pragma unroll
    for (int i = 0; i < VPL; i++) {
        rc[i] = rs[i] = 0.f;
        if (lane + 32 * i < rope_dim) zr_rope_cos_sin(pos, fq[i], &rc[i], &rs[i]);
    }
    zr_grid_enter();

    // Vectors G + 2 at most, a warp each in turn: the q heads (adjacent in qkv), then in the block
    // that holds pos the new K and V rows. Each vector: its head norm (rmsnorm_f32's 1/rms: its
    // squares in one warp's order), its rope (rope_kv_f32's arithmetic: the pair's other value
    // from shared memory), q times scale as two halves, k and v rounded into the cache and shared
    // memory.
    const float *qsrc = qkv + (size_t)h * D, *ksrc = qkv + (size_t)n_head * D + (size_t)kvh * D;
    const size_t row_pos = (size_t)pos * kv_dim + (size_t)kvh * D;
    const int n_vec = G + (cur ? 2 : 0);
    float xn[VPL]; // the warp's next vector, loaded while the one before it is worked
    if (warp < n_vec) {
#pragma unroll
        for (int i = 0; i < VPL; i++) xn[i] = zr_adm_vec(qsrc, ksrc, warp, G, D, kv_dim)[lane + 32 * i];
    }
#pragma unroll 1
    for (int v = warp; v < n_vec; v += ZR_ADM_WARPS) {
        float x[VPL];
#pragma unroll
        for (int i = 0; i < VPL; i++) x[i] = xn[i];
        const int vn = v + ZR_ADM_WARPS;
        if (vn < n_vec) {
#pragma unroll
            for (int i = 0; i < VPL; i++) xn[i] = zr_adm_vec(qsrc, ksrc, vn, G, D, kv_dim)[lane + 32 * i];
        }
        if (v == G + 1) { // the V row: rounded as cached
#pragma unroll
            for (int i = 0; i < VPL; i++) {
                const __half hv = __float2half_rn(x[i]);
                vnh[lane + 32 * i] = hv;
                vc[row_pos + lane + 32 * i] = hv;
            }
            continue;
        }
        const bool isk = v == G, on = isk ? k_norm != nullptr : q_norm != nullptr;
        float rr = 1.0f;
        if (on) {
            float ss = 0.f;
#pragma unroll
            for (int i = 0; i < VPL; i++) ss = fmaf(x[i], x[i], ss);
            ss = zr_warp_sum(ss);
            rr = 1.0f / sqrtf(ss / (float)D + eps);
        }
        float *xs = raw + v * D;
#pragma unroll
        for (int i = 0; i < VPL; i++) {
            if (on) x[i] = x[i] * rr * (isk ? wk[i] : wq[i]);
            xs[lane + 32 * i] = x[i];
        }
        __syncwarp();
#pragma unroll
        for (int i = 0; i < VPL; i++) {
            const int d = lane + 32 * i;
            float val = x[i];
            if (d < rope_dim) {
                const float a = xs[p0[i]], b = xs[p1[i]];
                val = d == p0[i] ? zr_rope_first(a, b, rc[i], rs[i]) : zr_rope_second(a, b, rc[i], rs[i]);
            }
            if (isk) {
                const __half hv = __float2half_rn(val);
                knh[d] = hv;
                kc[row_pos + d] = hv;
            } else {
                val *= scale;
                const __half hi = __float2half_rn(val);
                qhs[v * LD + d] = hi;
                qls[v * LD + d] = __float2half_rn(val - __half2float(hi));
            }
        }
    }
    __syncthreads();

    // Q's A fragments (rows: the heads), hi and lo halves, by ldmatrix: matrices (rows 0-7, cols
    // 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15) of each k-step
    const int g = lane >> 2, c = lane & 3;
    uint32_t qh[KS][4], ql[KS][4];
    {
        const int qo = ((lane & 7) + 8 * ((lane >> 3) & 1)) * LD + 8 * (lane >> 4);
#pragma unroll
        for (int ks = 0; ks < KS; ks++) {
            zr_ldmatrix_x4(qh[ks], qhs + qo + 16 * ks);
            zr_ldmatrix_x4(ql[ks], qls + qo + 16 * ks);
        }
    }

    float o[NT][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f}; // rows g and g + 8
#pragma unroll
    for (int n = 0; n < NT; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    const float inv_cap = softcap > 0.f ? 1.0f / softcap : 0.f;
    // ldmatrix addresses: lane l gives row l % 8 of matrix l / 8
    const int lr = lane & 7, lm = lane >> 3;
    for (int i = 0; i < mine; i++) {
        const int s = i % ZR_ADM_STAGES, nx = i + ZR_ADM_STAGES - 1;
        if (nx < mine)
            zr_adm_issue<D>(ring + (nx % ZR_ADM_STAGES) * ZrAdm<D>::SLOT, kb, vb, kv_dim,
                            first + (t0 + warp + nx * ZR_ADM_WARPS) * ZR_ADM_TILE, pos, lane);
        zr_cp_commit();
        zr_cp_wait<ZR_ADM_STAGES - 1>();
        __half *ks_ = ring + s * ZrAdm<D>::SLOT, *vs_ = ks_ + ZR_ADM_TILE * LD;
        const int r0 = first + (t0 + warp + i * ZR_ADM_WARPS) * ZR_ADM_TILE;
        if (cur && pos - r0 < ZR_ADM_TILE) { // row pos is in this tile: from shared memory
            const int r = pos - r0;
            for (int d = lane; d < D; d += 32) {
                ks_[r * LD + d] = knh[d];
                vs_[r * LD + d] = vnh[d];
            }
        }
        __syncwarp();

        // S = Q K^T: two n-tiles of 8 rows; B from K's rows (non-transposed ldmatrix)
        float sh[2][4] = {}, sl[2][4] = {};
#pragma unroll
        for (int ks = 0; ks < KS; ks++) {
            uint32_t b[4];
            zr_ldmatrix_x4(b, ks_ + ((lm >> 1) * 8 + lr) * LD + 16 * ks + 8 * (lm & 1));
            zr_mma_16816(sh[0], qh[ks], b[0], b[1]);
            zr_mma_16816(sl[0], ql[ks], b[0], b[1]);
            zr_mma_16816(sh[1], qh[ks], b[2], b[3]);
            zr_mma_16816(sl[1], ql[ks], b[2], b[3]);
        }
        // the online softmax of rows g (e = 0, 1) and g + 8 (e = 2, 3); cache row r0 + 8 j + 2 c + (e & 1)
        float p[2][4], mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int j = 0; j < 2; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float v = sh[j][e] + sl[j][e];
                if (softcap > 0.f) v = tanhf(v * inv_cap) * softcap;
                if (r0 + 8 * j + 2 * c + (e & 1) >= seq) v = -INFINITY;
                p[j][e] = v;
                mx[e >> 1] = fmaxf(mx[e >> 1], v);
            }
        float corr[2];
#pragma unroll
        for (int e = 0; e < 2; e++) {
            mx[e] = fmaxf(mx[e], __shfl_xor_sync(0xffffffffu, mx[e], 1));
            mx[e] = fmaxf(mx[e], __shfl_xor_sync(0xffffffffu, mx[e], 2));
            const float mn = fmaxf(m[e], mx[e]); // a tile holds row r0 < seq: finite
            corr[e] = expf(m[e] - mn);
            m[e] = mn;
            l[e] *= corr[e];
        }
#pragma unroll
        for (int j = 0; j < 2; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                p[j][e] = expf(p[j][e] - m[e >> 1]);
                l[e >> 1] += p[j][e];
            }
#pragma unroll
        for (int n = 0; n < NT; n++) {
            o[n][0] *= corr[0];
            o[n][1] *= corr[0];
            o[n][2] *= corr[1];
            o[n][3] *= corr[1];
        }
        // P's A fragment (the S fragments' layout: rows g, g + 8; k = rows 2c.. of n-tile 0, then 1)
        uint32_t ph[4], pl[4];
        zr_adm_split(p[0][0], p[0][1], ph[0], pl[0]);
        zr_adm_split(p[0][2], p[0][3], ph[1], pl[1]);
        zr_adm_split(p[1][0], p[1][1], ph[2], pl[2]);
        zr_adm_split(p[1][2], p[1][3], ph[3], pl[3]);
        // O += P V: B from V's rows (transposed ldmatrix), two n-tiles of 8 values a load
#pragma unroll
        for (int n = 0; n < NT; n += 2) {
            uint32_t b[4];
            zr_ldmatrix_x4_t(b, vs_ + ((lm & 1) * 8 + lr) * LD + 8 * (n + (lm >> 1)));
            zr_mma_16816(o[n], ph, b[0], b[1]);
            zr_mma_16816(o[n], pl, b[0], b[1]);
            zr_mma_16816(o[n + 1], ph, b[2], b[3]);
            zr_mma_16816(o[n + 1], pl, b[2], b[3]);
        }
        __syncwarp(); // the slot is free for the next request
    }
    zr_cp_wait<0>();
#pragma unroll
    for (int e = 0; e < 2; e++) {
        l[e] += __shfl_xor_sync(0xffffffffu, l[e], 1);
        l[e] += __shfl_xor_sync(0xffffffffu, l[e], 2);
    }
    __syncthreads(); // every warp is done with its ring: the rings take the warps' outputs
    float *wo = (float *)adm_ring; // [warp][head][D]
#pragma unroll
    for (int e = 0; e < 2; e++) {
        const int row = g + 8 * e;
        if (c == 0) {
            wm[warp * ZR_ADM_HEADS + row] = mine > 0 ? m[e] : -INFINITY;
            wl[warp * ZR_ADM_HEADS + row] = l[e];
        }
#pragma unroll
        for (int n = 0; n < NT; n++)
            *(float2 *)(wo + (warp * ZR_ADM_HEADS + row) * D + 8 * n + 2 * c) = make_float2(o[n][2 * e], o[n][2 * e + 1]);
    }
    __syncthreads();

    // the block's output (one block with rows) or partials: float4 tt of head g, a thread each
    constexpr int D4 = D / 4;
    float *po = part, *pml = part + (size_t)n_head * n_split * D;
    for (int i = t; i < G * D4; i += ZR_ADM_THREADS)
        zr_ad_block_put<ZR_ADM_WARPS>(wm, wl, (const float4 *)wo, ZR_ADM_HEADS, D4, i / D4, i % D4, h + i / D4, y,
                                      n_split, blocks, D, po, pml, out);
    if (blocks == 1) return;
    __threadfence(); // the partials are visible device-wide before the count says so
    __syncthreads();
    if (t == 0) last = atomicAdd(&count[kvh], 1) == blocks - 1;
    __syncthreads();
    if (!last) return;
    __threadfence(); // every other block's partials are visible to this one
    if (t == 0) count[kvh] = 0; // no other block of this launch touches it again
    for (int i = t; i < G * D4; i += ZR_ADM_THREADS) zr_ad_merge<ZR_ADM_PRE>(po, pml, h + i / D4, i % D4, n_split, blocks, D, out);
}

#define ZR_ADM_KERNEL(NAME, D)                                                                                       \
    ZR_KERNEL void __launch_bounds__(ZR_ADM_THREADS, 1)                                                              \
        NAME(const float *__restrict__ qkv, __half *__restrict__ kc, __half *__restrict__ vc,                        \
             float *__restrict__ part, int *__restrict__ count, float *__restrict__ out,                             \
             const double *__restrict__ freq, const int *__restrict__ pos_p, const float *__restrict__ q_norm,       \
             const float *__restrict__ k_norm, int n_head, int n_kv, int head_dim, int rope_dim, int neox,          \
             int chunk, int n_split, float scale, float eps, int window, float softcap) {                            \
        ZR_TL_EXIT;                                                                                                  \
        (void)head_dim;                                                                                              \
        (void)chunk;                                                                                                 \
        zr_attn_decode_mma<D>(qkv, kc, vc, part, count, out, freq, pos_p, q_norm, k_norm, n_head, n_kv, rope_dim,    \
                              neox, n_split, scale, eps, window, softcap);                                           \
    }

// the parameters of attention_decode.cu's kernels (head_dim is D; chunk unused: the tiles are cut
// from the rows the query sees)
ZR_ADM_KERNEL(attn_decode_mma_d64_kvh, 64)
ZR_ADM_KERNEL(attn_decode_mma_d128_kvh, 128)
static_assert(ZrAdm<64>::SMEM == 4 * 4 * 2 * 16 * 72 * 2 && ZrAdm<128>::SMEM == 4 * 4 * 2 * 16 * 136 * 2,
              "src/cuda/kreg.h's ZR_K_ATTN_DECODE_MMA_SMEM");
