// Causal attention for a prefill of M query rows (flash-attention style, tensor cores).
// Query row i (of M) is at position pos[0] + i and attends to cache rows 0 .. pos[0] + i (a
// prefill may continue a context: pos[0] > 0). The K/V rows of this prefill must already be in
// the caches (rope_kv_f32 wrote them).
//
// attn_prefill_f16_d64 / _d96 / _d128: head_dim 64 / 96 (Phi-3) / 128. grid (n_head, ceil(M / 64)),
//   block 128.
//   Block (h, t) takes 64 query rows of head h (tiles in reverse order, so the blocks with the
//   most keys start first); each of its 4 warps owns 16 rows. The block streams the keys of KV
//   head h / (n_head / n_kv) in tiles of 64 rows through shared memory (F32 cache -> F16, so
//   the tile is read from L2 once per 64 query rows instead of once per row), and each warp
//   computes S = Q K^T and O += P V with mma.sync m16n8k16 (F16 operands, F32 accumulation)
//   and an online softmax in F32 (base 2: Q is pre-scaled by scale * log2(e)).
//   out[i*out_stride + h*D + d] = softmax(q_i . K^T * scale) V, rows i < M only.
// Precision: Q, K, V and the probabilities are rounded to F16 (relative 2^-11 each); scores,
// their maximum, the sums and O accumulate in F32. test/gpu/test_kernels.c bounds the error.
// Caches: [n_ctx, n_kv*D] F32 per layer. q row i at q + i*q_stride, head h at +h*D.
// Needs sm_80+ (mma.sync.m16n8k16 with F16, ldmatrix).
#include "common.cuh"
#include "mma.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "attention_prefill.cu needs sm_80 or newer (mma.sync m16n8k16, ldmatrix)"
#endif

#define ZR_AP_BQ 64      // query rows per block (4 warps x 16)
#define ZR_AP_BK 64      // keys per shared-memory tile
#define ZR_AP_THREADS 128

template <int D>
__device__ __forceinline__ void attn_prefill(const float *__restrict__ q, int q_stride, const float *__restrict__ kc,
                                             const float *__restrict__ vc, float *__restrict__ out, int out_stride,
                                             const int *__restrict__ pos, int M, int n_head, int n_kv, float scale_log2) {
    constexpr int LD = D + 8;        // shared row stride in halves: 16-byte rows, conflict-free fragments
    constexpr int KT = D / 16;       // k-steps of S = Q K^T
    constexpr int NT = D / 8;        // n-tiles of O
    constexpr int ST = ZR_AP_BK / 8; // n-tiles of S
    constexpr int LU = D == 64 ? 8 : 4; // tile loads in flight per thread: all 8 (D=64) or 4 of 16 (D=128; D=96: 12),
                                        // (166-168 registers: 3 blocks per SM)
    __shared__ __align__(16) __half ks[ZR_AP_BK * LD];  // [key][d]
    __shared__ __align__(16) __half vs[ZR_AP_BK * LD];  // [key][d]

    zr_grid_enter();
    const int h = blockIdx.x, tile = gridDim.y - 1 - blockIdx.y;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, c = lane & 3;
    const int p0 = pos[0];
    const int kvh = h / (n_head / n_kv), kv_dim = n_kv * D;
    const int row0 = tile * ZR_AP_BQ, wrow = row0 + warp * 16;
    // keys this block needs: 0 .. p0 + last row; rows past M only pad the last tile
    const int kv_end = p0 + min(row0 + ZR_AP_BQ, M);
    const int n_tiles = (kv_end + ZR_AP_BK - 1) / ZR_AP_BK;
    const int wkey_max = p0 + min(wrow + 15, M - 1);  // the warp's last key (its rows < M)
    const bool warp_live = wrow < M;

    // Q fragments (A of S = Q K^T), pre-scaled; rows past M are zero
    uint32_t qa[KT][4];
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
            qa[kt][0] = zr_mma_pack(a.x * scale_log2, a.y * scale_log2);
            qa[kt][1] = zr_mma_pack(b.x * scale_log2, b.y * scale_log2);
            qa[kt][2] = zr_mma_pack(e.x * scale_log2, e.y * scale_log2);
            qa[kt][3] = zr_mma_pack(f.x * scale_log2, f.y * scale_log2);
        }
    }

    float o[NT][4];
#pragma unroll
    for (int n = 0; n < NT; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    float m_lo = -INFINITY, m_hi = -INFINITY, l_lo = 0.f, l_hi = 0.f;  // this lane's share of l
    const int pos_lo = p0 + wrow + g, pos_hi = pos_lo + 8;              // the rows' positions

    const float *kbase = kc + (size_t)kvh * D, *vbase = vc + (size_t)kvh * D;
    for (int t = 0; t < n_tiles; t++) {
        const int key0 = t * ZR_AP_BK;
        __syncthreads();  // the previous tile's fragments are read
        // K and V tiles, F32 -> F16; keys past kv_end (not written yet, or past n_ctx) are zero
#pragma unroll LU
        for (int i = tid; i < ZR_AP_BK * D / 4; i += ZR_AP_THREADS) {
            const int key = i / (D / 4), d = (i % (D / 4)) * 4, gk = key0 + key;
            float4 kv = make_float4(0.f, 0.f, 0.f, 0.f), vv = kv;
            if (gk < kv_end) {
                kv = *(const float4 *)(kbase + (size_t)gk * kv_dim + d);
                vv = *(const float4 *)(vbase + (size_t)gk * kv_dim + d);
            }
            *(uint2 *)&ks[key * LD + d] = make_uint2(zr_mma_pack(kv.x, kv.y), zr_mma_pack(kv.z, kv.w));
            *(uint2 *)&vs[key * LD + d] = make_uint2(zr_mma_pack(vv.x, vv.y), zr_mma_pack(vv.z, vv.w));
        }
        __syncthreads();
        if (!warp_live || key0 > wkey_max) continue;  // every key of this tile is after the warp's rows

        // S = Q K^T: 16 rows x 64 keys; lane holds (row g | g+8, keys n*8 + 2c, +1)
        float s[ST][4];
#pragma unroll
        for (int n = 0; n < ST; n++) {
            s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
            const __half *kr = ks + (n * 8 + g) * LD + 2 * c;
#pragma unroll
            for (int kt = 0; kt < KT; kt++)
                zr_mma_16816(s[n], qa[kt], *(const uint32_t *)(kr + kt * 16), *(const uint32_t *)(kr + kt * 16 + 8));
        }
        if (key0 + ZR_AP_BK - 1 > p0 + wrow) {  // the causal edge crosses this tile
#pragma unroll
            for (int n = 0; n < ST; n++) {
                const int k = key0 + n * 8 + 2 * c;
                if (k > pos_lo) s[n][0] = -INFINITY;
                if (k + 1 > pos_lo) s[n][1] = -INFINITY;
                if (k > pos_hi) s[n][2] = -INFINITY;
                if (k + 1 > pos_hi) s[n][3] = -INFINITY;
            }
        }
        // online softmax (base 2); tile 0 holds key 0, which every row sees, so m stays finite
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
        const float al_lo = exp2f(m_lo - mx_lo), al_hi = exp2f(m_hi - mx_hi);  // 0 on the first tile
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
            s[n][0] = exp2f(s[n][0] - m_lo);
            s[n][1] = exp2f(s[n][1] - m_lo);
            s[n][2] = exp2f(s[n][2] - m_hi);
            s[n][3] = exp2f(s[n][3] - m_hi);
            l_lo += s[n][0] + s[n][1];
            l_hi += s[n][2] + s[n][3];
        }
        // O += P V: the accumulator layout of S tiles 2j, 2j+1 is the A layout of keys 16j..16j+15
#pragma unroll
        for (int j = 0; j < ZR_AP_BK / 16; j++) {
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

ZR_KERNEL void __launch_bounds__(ZR_AP_THREADS)
    attn_prefill_f16_d64(const float *__restrict__ q, int q_stride, const float *__restrict__ kc,
                         const float *__restrict__ vc, float *__restrict__ out, int out_stride,
                         const int *__restrict__ pos, int M, int n_head, int n_kv, float scale_log2) {
    attn_prefill<64>(q, q_stride, kc, vc, out, out_stride, pos, M, n_head, n_kv, scale_log2);
}

// Phi-3's heads of 96: 6 k-steps, 12 n-tiles; rows of 104 halves (13 x 16 bytes: conflict-free)
ZR_KERNEL void __launch_bounds__(ZR_AP_THREADS)
    attn_prefill_f16_d96(const float *__restrict__ q, int q_stride, const float *__restrict__ kc,
                         const float *__restrict__ vc, float *__restrict__ out, int out_stride,
                         const int *__restrict__ pos, int M, int n_head, int n_kv, float scale_log2) {
    attn_prefill<96>(q, q_stride, kc, vc, out, out_stride, pos, M, n_head, n_kv, scale_log2);
}

ZR_KERNEL void __launch_bounds__(ZR_AP_THREADS)
    attn_prefill_f16_d128(const float *__restrict__ q, int q_stride, const float *__restrict__ kc,
                          const float *__restrict__ vc, float *__restrict__ out, int out_stride,
                          const int *__restrict__ pos, int M, int n_head, int n_kv, float scale_log2) {
    attn_prefill<128>(q, q_stride, kc, vc, out, out_stride, pos, M, n_head, n_kv, scale_log2);
}
