// Causal attention for a prefill of M query rows (flash-attention style, tensor cores).
// Query row i (of M) is at position p = pos[0] + i and attends to cache rows 0 .. p, or on a
// sliding-window layer (window > 0) to rows p + 1 - window .. p (llama.cpp masks key k for query
// p when p - k >= window); a prefill may continue a context (pos[0] > 0). The K/V rows of this
// prefill must already be in the caches (rope_kv_f32 wrote them).
//
// attn_prefill_f16_d64 / _d96 / _d128 / _d128_swa / _d256: head_dim 64 / 96 (Phi-3) / 128 / 256
// (gemma); _d128_swa and _d256 read the window and the cap, the others take both as 0.
//   grid (n_head, ceil(M / 64)), block 128; _d256 takes ZrAp<256>::SMEM bytes of dynamic shared
//   memory.
//   Block (h, t) takes 64 query rows of head h (tiles in reverse order, so the blocks with the
//   most keys start first); each of its 4 warps owns 16 rows. The block streams the keys of KV
//   head h / (n_head / n_kv) in tiles of BK rows through shared memory (F32 cache -> F16, so
//   the tile is read from L2 once per 64 query rows instead of once per row), from the tile of
//   its first row's oldest key, and each warp computes S = Q K^T and O += P V with mma.sync
//   m16n8k16 (F16 operands, F32 accumulation) and an online softmax in F32 (base 2).
//   q_scale: scale * log2(e), or with soft-capped scores (gemma2: s = cap tanh(q.k scale / cap))
//   scale / cap, and cap_log2 = cap * log2(e) (0: no cap).
//   out[i*out_stride + h*D + d] = softmax(scores of q_i) V, rows i < M only.
// Precision: Q, K, V and the probabilities are rounded to F16 (relative 2^-11 each); scores,
// their maximum, the sums and O accumulate in F32. test/gpu/test_kernels.c bounds the error.
// Caches: [n_ctx, n_kv*D] per layer, F32 (attn_prefill_f16_*) or F16 (attn_prefill_f16_*_kvh,
// cu/kv.cuh: the tiles' halves copied as they are, the bits an F32 cache's rows round to).
// q row i at q + i*q_stride, head h at +h*D.
// Needs sm_80+ (mma.sync.m16n8k16 with F16, ldmatrix).
#include "common.cuh"
#include "kv.cuh"
#include "mma.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "attention_prefill.cu needs sm_80 or newer (mma.sync m16n8k16, ldmatrix)"
#endif

#define ZR_AP_BQ 64      // query rows per block (4 warps x 16)
#define ZR_AP_THREADS 128

// Keys a block holds in shared memory at once: 64 for heads up to 128 (Q's fragments live in
// registers), 32 for heads of 256 (Q in shared memory too: 33 + 2 x 17 KiB dynamic; the O
// accumulator alone is 128 registers a lane).
template <int D> struct ZrAp {
    static constexpr bool QS = D > 128;        // Q's fragments read from shared memory
    static constexpr int BK = QS ? 32 : 64;    // keys per shared-memory tile
    static constexpr int LD = D + 8;           // shared row stride in halves: conflict-free fragments
    static constexpr int SMEM = QS ? (2 * BK + ZR_AP_BQ) * LD * 2 : 0;  // dynamic bytes
};

// SWA: the window and the soft cap are read (false: both taken as 0, the llama kernels' code
// and registers as before they existed)
template <int D, bool SWA, typename KV>
__device__ __forceinline__ void attn_prefill(const float *__restrict__ q, int q_stride, const KV *__restrict__ kc,
                                             const KV *__restrict__ vc, float *__restrict__ out, int out_stride,
                                             const int *__restrict__ pos, int M, int n_head, int n_kv, float q_scale,
                                             int window_, float cap_log2_, __half *ks, __half *vs, __half *qsm) {
    const int window = SWA ? window_ : 0;
    const float cap_log2 = SWA ? cap_log2_ : 0.f;
    constexpr bool QS = ZrAp<D>::QS;
    constexpr int BK = ZrAp<D>::BK, LD = ZrAp<D>::LD;
    constexpr int KT = D / 16;       // k-steps of S = Q K^T
    constexpr int NT = D / 8;        // n-tiles of O
    constexpr int ST = BK / 8;       // n-tiles of S
    constexpr int LU = D == 64 ? 8 : 4; // tile loads in flight per thread: all 8 (D=64) or 4 of 16 (D=128; D=96: 12;
                                        // D=256: 4 of 16) (d128: 166-168 registers, 3 blocks per SM)
    zr_grid_enter();
    const int h = blockIdx.x, tile = gridDim.y - 1 - blockIdx.y;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, c = lane & 3;
    const int p0 = pos[0];
    const int kvh = h / (n_head / n_kv), kv_dim = n_kv * D;
    const int row0 = tile * ZR_AP_BQ, wrow = row0 + warp * 16;
    // keys this block needs: 0 (or its first row's oldest key in the window) .. p0 + last row;
    // rows past M only pad the last tile
    const int kv_end = p0 + min(row0 + ZR_AP_BQ, M);
    const int n_tiles = (kv_end + BK - 1) / BK;
    const int kv_first = window > 0 ? max(0, p0 + row0 + 1 - window) : 0;
    const int t_first = kv_first / BK;
    const int wkey_max = p0 + min(wrow + 15, M - 1);                         // the warp's last key (its rows < M)
    const int wkey_min = window > 0 ? max(0, p0 + wrow + 1 - window) : 0;    // and its first
    const bool warp_live = wrow < M;

    // Q (A of S = Q K^T), pre-scaled; rows past M are zero. In registers, or (QS) in the warp's
    // 16 rows of shared memory
    uint32_t qa[QS ? 1 : KT][4];
    __half *qw = qsm + (QS ? warp * 16 * LD : 0);
    {
        const int r_lo = wrow + g, r_hi = r_lo + 8;
        const float *ql = q + (size_t)r_lo * q_stride + (size_t)h * D, *qh = q + (size_t)r_hi * q_stride + (size_t)h * D;
#pragma unroll
        for (int kt = 0; kt < KT; kt++) {
            const int d = kt * 16 + 2 * c;
            float2 a = make_float2(0.f, 0.f), b = a, e = a, f = a;
            if (r_lo < M) {
                a = *(const float2 *)(ql + d);
                e = *(const float2 *)(ql + d + 8);
            }
            if (r_hi < M) {
                b = *(const float2 *)(qh + d);
                f = *(const float2 *)(qh + d + 8);
            }
            const uint32_t w[4] = {zr_mma_pack(a.x * q_scale, a.y * q_scale), zr_mma_pack(b.x * q_scale, b.y * q_scale),
                                   zr_mma_pack(e.x * q_scale, e.y * q_scale), zr_mma_pack(f.x * q_scale, f.y * q_scale)};
            if constexpr (QS) {
                *(uint32_t *)&qw[g * LD + d] = w[0];
                *(uint32_t *)&qw[(g + 8) * LD + d] = w[1];
                *(uint32_t *)&qw[g * LD + d + 8] = w[2];
                *(uint32_t *)&qw[(g + 8) * LD + d + 8] = w[3];
            } else {
#pragma unroll
                for (int i = 0; i < 4; i++) qa[kt][i] = w[i];
            }
        }
    }

    float o[NT][4];
#pragma unroll
    for (int n = 0; n < NT; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    float m_lo = -INFINITY, m_hi = -INFINITY, l_lo = 0.f, l_hi = 0.f;  // this lane's share of l
    const int pos_lo = p0 + wrow + g, pos_hi = pos_lo + 8;              // the rows' positions
    // and their oldest keys (a sliding window lets key k in for position p when p - k < window)
    const int first_lo = window > 0 ? pos_lo + 1 - window : 0, first_hi = window > 0 ? pos_hi + 1 - window : 0;

    const KV *kbase = kc + (size_t)kvh * D, *vbase = vc + (size_t)kvh * D;
    for (int t = t_first; t < n_tiles; t++) {
        const int key0 = t * BK;
        __syncthreads();  // the previous tile's fragments are read (QS: and the warps' Q rows written)
        // K and V tiles, F32 -> F16; keys past kv_end (not written yet, or past n_ctx) and before
        // kv_first (outside every row's window) are zero: a masked key's P is 0, and 0 V stays 0
#pragma unroll LU
        for (int i = tid; i < BK * D / 4; i += ZR_AP_THREADS) {
            const int key = i / (D / 4), d = (i % (D / 4)) * 4, gk = key0 + key;
            if constexpr (ZrKv<KV>::HALF) {
                uint2 kv = make_uint2(0u, 0u), vv = kv;
                if (gk < kv_end && gk >= kv_first) {
                    kv = ZrKv<KV>::load4(kbase + (size_t)gk * kv_dim + d);
                    vv = ZrKv<KV>::load4(vbase + (size_t)gk * kv_dim + d);
                }
                *(uint2 *)&ks[key * LD + d] = kv;
                *(uint2 *)&vs[key * LD + d] = vv;
            } else {
                float4 kv = make_float4(0.f, 0.f, 0.f, 0.f), vv = kv;
                if (gk < kv_end && gk >= kv_first) {
                    kv = *(const float4 *)(kbase + (size_t)gk * kv_dim + d);
                    vv = *(const float4 *)(vbase + (size_t)gk * kv_dim + d);
                }
                *(uint2 *)&ks[key * LD + d] = make_uint2(zr_mma_pack(kv.x, kv.y), zr_mma_pack(kv.z, kv.w));
                *(uint2 *)&vs[key * LD + d] = make_uint2(zr_mma_pack(vv.x, vv.y), zr_mma_pack(vv.z, vv.w));
            }
        }
        __syncthreads();
        // every key of this tile is after the warp's rows, or before its window
        if (!warp_live || key0 > wkey_max || key0 + BK <= wkey_min) continue;

        // S = Q K^T: 16 rows x BK keys; lane holds (row g | g+8, keys n*8 + 2c, +1)
        float s[ST][4];
#pragma unroll
        for (int n = 0; n < ST; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
        if constexpr (QS) {
#pragma unroll 4
            for (int kt = 0; kt < KT; kt++) {
                const uint32_t a[4] = {*(const uint32_t *)&qw[g * LD + kt * 16 + 2 * c],
                                       *(const uint32_t *)&qw[(g + 8) * LD + kt * 16 + 2 * c],
                                       *(const uint32_t *)&qw[g * LD + kt * 16 + 2 * c + 8],
                                       *(const uint32_t *)&qw[(g + 8) * LD + kt * 16 + 2 * c + 8]};
#pragma unroll
                for (int n = 0; n < ST; n++) {
                    const __half *kr = ks + (n * 8 + g) * LD + 2 * c + kt * 16;
                    zr_mma_16816(s[n], a, *(const uint32_t *)kr, *(const uint32_t *)(kr + 8));
                }
            }
        } else {
#pragma unroll
            for (int n = 0; n < ST; n++) {
                const __half *kr = ks + (n * 8 + g) * LD + 2 * c;
#pragma unroll
                for (int kt = 0; kt < KT; kt++)
                    zr_mma_16816(s[n], qa[kt], *(const uint32_t *)(kr + kt * 16), *(const uint32_t *)(kr + kt * 16 + 8));
            }
        }
        // soft-capped scores (gemma2): Q was scaled by scale / cap, so s = cap log2(e) tanh(s)
        if (cap_log2 != 0.f) {
#pragma unroll
            for (int n = 0; n < ST; n++)
#pragma unroll
                for (int i = 0; i < 4; i++) s[n][i] = cap_log2 * tanhf(s[n][i]);
        }
        // the causal edge, or the window's oldest key, crosses this tile
        if (key0 + BK - 1 > p0 + wrow || (window > 0 && key0 < p0 + wrow + 16 - window)) {
#pragma unroll
            for (int n = 0; n < ST; n++) {
                const int k = key0 + n * 8 + 2 * c;
                if (k > pos_lo || k < first_lo) s[n][0] = -INFINITY;
                if (k + 1 > pos_lo || k + 1 < first_lo) s[n][1] = -INFINITY;
                if (k > pos_hi || k < first_hi) s[n][2] = -INFINITY;
                if (k + 1 > pos_hi || k + 1 < first_hi) s[n][3] = -INFINITY;
            }
        }
        // online softmax (base 2). Without a window tile 0 holds key 0, which every row sees, so
        // m stays finite; with one a row may see no key of this tile yet (its oldest key is in a
        // later tile): its max stays -inf, and the exponents then take 0 for it (exp2(-inf - 0)
        // = 0 rather than NaN)
        float mx_lo = m_lo, mx_hi = m_hi;
#pragma unroll
        for (int n = 0; n < ST; n++) {
            mx_lo = fmaxf(mx_lo, fmaxf(s[n][0], s[n][1]));
            mx_hi = fmaxf(mx_hi, fmaxf(s[n][2], s[n][3]));
        }
        mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, 1));
        mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, 2));
        mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, 1));
        mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, 2));
        const float mu_lo = SWA && mx_lo == -INFINITY ? 0.f : mx_lo, mu_hi = SWA && mx_hi == -INFINITY ? 0.f : mx_hi;
        const float al_lo = exp2f(m_lo - mu_lo), al_hi = exp2f(m_hi - mu_hi);  // 0 until a row sees a key
        m_lo = mx_lo;
        m_hi = mx_hi;
        l_lo *= al_lo;
        l_hi *= al_hi;
#pragma unroll
        for (int n = 0; n < NT; n++) {
            o[n][0] *= al_lo;
            o[n][1] *= al_lo;
            o[n][2] *= al_hi;
            o[n][3] *= al_hi;
        }
#pragma unroll
        for (int n = 0; n < ST; n++) {
            s[n][0] = exp2f(s[n][0] - mu_lo);
            s[n][1] = exp2f(s[n][1] - mu_lo);
            s[n][2] = exp2f(s[n][2] - mu_hi);
            s[n][3] = exp2f(s[n][3] - mu_hi);
            l_lo += s[n][0] + s[n][1];
            l_hi += s[n][2] + s[n][3];
        }
        // O += P V: the accumulator layout of S tiles 2j, 2j+1 is the A layout of keys 16j..16j+15
#pragma unroll
        for (int j = 0; j < BK / 16; j++) {
            const uint32_t pa[4] = {zr_mma_pack(s[2 * j][0], s[2 * j][1]), zr_mma_pack(s[2 * j][2], s[2 * j][3]),
                                    zr_mma_pack(s[2 * j + 1][0], s[2 * j + 1][1]),
                                    zr_mma_pack(s[2 * j + 1][2], s[2 * j + 1][3])};
            // matrices: keys 16j+0..7 | 16j+8..15, for d n*8.. then (n+1)*8..
            const __half *vr = vs + (j * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + (lane >> 4) * 8;
#pragma unroll
            for (int n = 0; n < NT; n += 2) {
                uint32_t b[4];
                zr_ldmatrix_x4_t(b, vr + n * 8);
                zr_mma_16816(o[n], pa, b[0], b[1]);
                zr_mma_16816(o[n + 1], pa, b[2], b[3]);
            }
        }
    }

    l_lo += __shfl_xor_sync(0xffffffffu, l_lo, 1);
    l_lo += __shfl_xor_sync(0xffffffffu, l_lo, 2);
    l_hi += __shfl_xor_sync(0xffffffffu, l_hi, 1);
    l_hi += __shfl_xor_sync(0xffffffffu, l_hi, 2);
    const int r_lo = wrow + g, r_hi = r_lo + 8;
    const float inv_lo = 1.0f / l_lo, inv_hi = 1.0f / l_hi;
    float *ol = out + (size_t)r_lo * out_stride + (size_t)h * D + 2 * c;
    float *oh = out + (size_t)r_hi * out_stride + (size_t)h * D + 2 * c;
#pragma unroll
    for (int n = 0; n < NT; n++) {
        if (r_lo < M) *(float2 *)(ol + n * 8) = make_float2(o[n][0] * inv_lo, o[n][1] * inv_lo);
        if (r_hi < M) *(float2 *)(oh + n * 8) = make_float2(o[n][2] * inv_hi, o[n][3] * inv_hi);
    }
}

#define ZR_AP_PARAMS(KV)                                                                                            \
    const float *__restrict__ q, int q_stride, const KV *__restrict__ kc, const KV *__restrict__ vc,               \
        float *__restrict__ out, int out_stride, const int *__restrict__ pos, int M, int n_head, int n_kv,          \
        float q_scale, int window, float cap_log2
#define ZR_AP_ARGS q, q_stride, kc, vc, out, out_stride, pos, M, n_head, n_kv, q_scale, window, cap_log2

// heads up to 128: the K/V tiles in static shared memory (2 x 64 x (D + 8) halves)
// (NAME: the kernel's name after attn_prefill_f16_; SWA as above; an F16 cache's kernel ends in _kvh)
#define ZR_AP_STATIC1(NAME, D, SWA, KV)                                                                            \
    ZR_KERNEL void __launch_bounds__(ZR_AP_THREADS) NAME(ZR_AP_PARAMS(KV)) {                                        \
        __shared__ __align__(16) __half ks[ZrAp<D>::BK * ZrAp<D>::LD];  /* [key][d] */                              \
        __shared__ __align__(16) __half vs[ZrAp<D>::BK * ZrAp<D>::LD];                                              \
        attn_prefill<D, SWA, KV>(ZR_AP_ARGS, ks, vs, nullptr);                                                      \
    }
#define ZR_AP_STATIC(NAME, D, SWA)                                                                                 \
    ZR_AP_STATIC1(attn_prefill_f16_##NAME, D, SWA, float)                                                          \
    ZR_AP_STATIC1(attn_prefill_f16_##NAME##_kvh, D, SWA, __half)
// window and cap ignored (0): the host takes these only for layers with neither
ZR_AP_STATIC(d64, 64, false)
// Phi-3's heads of 96: 6 k-steps, 12 n-tiles; rows of 104 halves (13 x 16 bytes: conflict-free)
ZR_AP_STATIC(d96, 96, false)
ZR_AP_STATIC(d128, 128, false)
// gemma2-27B's and gemma3-27B's heads of 128 (sliding windows; gemma2's soft cap): 207 registers,
// 2 blocks an SM where the plain kernel's 168 hold 3
ZR_AP_STATIC(d128_swa, 128, true)

// gemma's heads of 256: K, V (32 keys each) and Q (64 rows) in ZrAp<256>::SMEM = 67584 bytes of
// dynamic shared memory (src/cuda/kreg.c opts in; ZR_AP_D256_SMEM there)
static_assert(ZrAp<256>::SMEM == 67584, "src/cuda/kreg.c's ZR_AP_D256_SMEM");
#define ZR_AP_D256(NAME, KV)                                                                                       \
    ZR_KERNEL void __launch_bounds__(ZR_AP_THREADS) NAME(ZR_AP_PARAMS(KV)) {                                        \
        extern __shared__ __align__(16) uint4 zr_ap_smem[];                                                         \
        __half *ks = (__half *)zr_ap_smem, *vs = ks + ZrAp<256>::BK * ZrAp<256>::LD;                                \
        __half *qs = vs + ZrAp<256>::BK * ZrAp<256>::LD;                                                            \
        attn_prefill<256, true, KV>(ZR_AP_ARGS, ks, vs, qs);                                                        \
    }
ZR_AP_D256(attn_prefill_f16_d256, float)
ZR_AP_D256(attn_prefill_f16_d256_kvh, __half)
