// The prefill's grouped expert product (issue 15): every routed token's rows of one expert
// matrix in ONE launch over all experts, the weights read in their device layouts (cu/quant.cuh)
// and dequantized to F16 in shared memory only (never an F16 copy in global memory), multiplied
// on the tensor cores (mma.sync m16n8k16, F16 operands, F32 accumulation).
//
// moe_mm_<type>_n32 / _n64: tiles [n_tiles][4] i32 = (expert e, first row r0, rows n, 0), each
// tile n <= BN (32 / 64) consecutive rows of the token layout, all of expert e; e < 0: no tile. W is the stacked
// expert matrix [n_in, n_out] (expert e's rows [e rpe, (e + 1) rpe)). For a tile and output o < rpe:
//   y[ydst(r)][o] = sum_k W[e rpe + o][k] X[xsrc(r)][k]      r = r0 .. r0 + n - 1
// with xsrc(r) = xidx ? xidx[r] : r (x: F16 [.][ldx]), ydst(r) = yidx ? yidx[r] : r (y: F32 [.][ldy]).
// grid (n_tiles, ceil(rpe / 128)), block 256, dynamic shared memory zr_moe_mm_smem(BN) bytes
// (src/cuda/moe.c says the same number). Needs n_in % 64 == 0, ldx % 8 == 0 (16-byte rows of X).
//
// Block: 128 weight rows x BN tokens, k in steps of 64. 8 warps as 4 (rows) x 2 (tokens), each
// warp 32 rows x BN/2 tokens: warp column wn takes the groups of 16 tokens wn, wn + 2, .., so a
// tile of few rows keeps both columns busy, and a warp skips its groups past the tile's rows. Per step, double-buffered in shared memory: the raw weight bytes of
// step s + 1 are loaded into registers and the token tile copied with cp.async while the mma of
// step s runs, then the weights are dequantized into the other buffer; one barrier a step.
// Weight tile: thread t dequantizes 32 values of row t / 2 (the per-type Raw/load/put below:
// Q2_K..Q6_K, Q8_0, Q4_0 read 16-32 bytes at once; the other types element by element with zr_dq).
// Rows past rpe read the expert's last row (their outputs are not written); token rows past n are
// zero (cp.async zero-fill) and not written.
// Precision: weights as F16 (dequantized in F32, rounded once), X as F16, sums in F32: the
// cuBLASLt path's operands and accumulation.
// Needs sm_80+ (mma.sync.m16n8k16, ldmatrix, cp.async).
#include "kernels.cuh"
#include "mma.cuh"
#include "quant.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "moe_mm.cu needs sm_80 or newer (mma.sync m16n8k16, ldmatrix, cp.async)"
#endif

#define ZR_GM_BM 128 // weight rows per block
#define ZR_GM_BK 64  // k per step
#define ZR_GM_LD 72  // halves per shared row: 64 + 8, so ldmatrix's 8 rows hit 8 distinct 16-byte bank groups


// 8 values -> one 16-byte shared store
__device__ __forceinline__ void zr_gm_put8(__half *dst, const float *v) {
    *(uint4 *)dst = make_uint4(zr_mma_pack(v[0], v[1]), zr_mma_pack(v[2], v[3]), zr_mma_pack(v[4], v[5]), zr_mma_pack(v[6], v[7]));
}

// The weight tile's per-type reader: load(r, k0, q) fetches what thread half q (0/1) of row r needs
// for the 64 values k0 .. k0 + 63 (k0 % 64 == 0); put writes its 32 values into the shared row
// (64 halves). Generic: element by element through zr_dq (any type, slow).
template <int TYPE> struct ZrGmA {
    struct Raw {
        int r, k0;
    };
    static __device__ __forceinline__ void load(Raw &raw, const uint8_t *, const uint8_t *, int, int r, int k0, int) {
        raw.r = r, raw.k0 = k0;
    }
    static __device__ __forceinline__ void put(const Raw &raw, const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws,
                                               int n_in, int n_out, int q, __half *row) {
#pragma unroll 1 // 4 zr_dq at a time: 8 spill Q5_K's under the 128-register cap of __launch_bounds__(256, 2)
        for (int c = 0; c < 8; c++) {
            float v[4];
#pragma unroll
            for (int i = 0; i < 4; i++) v[i] = zr_dq<TYPE>(w, ws, n_in, n_out, raw.r, raw.k0 + 32 * q + 4 * c + i);
            *(uint2 *)(row + 32 * q + 4 * c) = make_uint2(zr_mma_pack(v[0], v[1]), zr_mma_pack(v[2], v[3]));
        }
    }
};

// Q8_0: block k0 / 32 + q: 32 int8 and d. Values 32q .. 32q + 31 of the tile row.
template <> struct ZrGmA<ZR_T_Q8_0> {
    struct Raw {
        uint4 a, b;
        float d;
    };
    static __device__ __forceinline__ void load(Raw &raw, const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws, int n_in,
                                                int r, int k0, int q) {
        const int blk = (k0 >> 5) + q;
        const uint8_t *p = w + (size_t)r * n_in + 32 * blk;
        raw.a = *(const uint4 *)p;
        raw.b = *(const uint4 *)(p + 16);
        raw.d = zr_ldh(ws + 2 * ((size_t)r * (n_in >> 5) + blk));
    }
    static __device__ __forceinline__ void put(const Raw &raw, const uint8_t *, const uint8_t *, int, int, int q, __half *row) {
        const uint32_t u[8] = {raw.a.x, raw.a.y, raw.a.z, raw.a.w, raw.b.x, raw.b.y, raw.b.z, raw.b.w};
#pragma unroll
        for (int c = 0; c < 4; c++) {
            float v[8];
#pragma unroll
            for (int i = 0; i < 8; i++) // int8 = (byte ^ 0x80) - 128, exact through the magic float
                v[i] = raw.d * zr_byte_f(u[2 * c + (i >> 2)] ^ 0x80808080u, i & 3, ZR_MAGIC + 128.0f);
            zr_gm_put8(row + 32 * q + 8 * c, v);
        }
    }
};

// Q4_K: the 64 values k0.. are group j = (k0 % 256) / 64 of super-block k0 / 256: 32 quant bytes
// whose low nibbles are values l, high nibbles values 32 + l (l = 0..31), scales/mins sm[j].
// Thread half q takes bytes 16q .. 16q + 15: values 16q.. (low) and 32 + 16q.. (high).
template <> struct ZrGmA<ZR_T_Q4_K> {
    struct Raw {
        uint4 qs;
        uint32_t sm;
        __half2 dm;
    };
    static __device__ __forceinline__ void load(Raw &raw, const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws, int n_in,
                                                int r, int k0, int q) {
        const int nb = n_in >> 8, sb = k0 >> 8, j = (k0 >> 6) & 3;
        const size_t g = (size_t)r * nb + sb;
        raw.qs = *(const uint4 *)(w + g * 128 + 32 * j + 16 * q);
        raw.sm = *(const uint32_t *)(ws + 20 * g + 4 * j);
        raw.dm = *(const __half2 *)(ws + 20 * g + 16);
    }
    static __device__ __forceinline__ void put(const Raw &raw, const uint8_t *, const uint8_t *, int, int, int q, __half *row) {
        const float2 dm = __half22float2(raw.dm);
        const float a0 = dm.x * (float)(raw.sm & 0xFF), a1 = dm.x * (float)((raw.sm >> 8) & 0xFF);
        const float b0 = dm.y * (float)((raw.sm >> 16) & 0xFF), b1 = dm.y * (float)(raw.sm >> 24);
        const uint32_t u[4] = {raw.qs.x, raw.qs.y, raw.qs.z, raw.qs.w};
#pragma unroll
        for (int h = 0; h < 2; h++) { // h = 0: low nibbles (scale 0), 1: high (scale 1)
            const float a = h ? a1 : a0, b = h ? b1 : b0;
#pragma unroll
            for (int c = 0; c < 2; c++) {
                float v[8];
#pragma unroll
                for (int i = 0; i < 8; i++) {
                    const uint32_t nib = (u[2 * c + (i >> 2)] >> (4 * h)) & 0x0F0F0F0Fu;
                    v[i] = __fmaf_rn(a, zr_byte_f(nib, i & 3, ZR_MAGIC), -b);
                }
                zr_gm_put8(row + 32 * h + 16 * q + 8 * c, v);
            }
        }
    }
};

// Q5_K: Q4_K's quants and scales (the main row 160 bytes a super-block: qs[128], then qh[32]) and
// the fifth bits of item u = 2j + q (thread half q's 16 quant bytes): byte i of qh word u holds at
// bit 2k + t the fifth bit of quant byte 4k + i's nibble t (t = 0: low).
template <> struct ZrGmA<ZR_T_Q5_K> {
    struct Raw {
        uint4 qs;
        uint32_t qh, sm;
        __half2 dm;
    };
    static __device__ __forceinline__ void load(Raw &raw, const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws, int n_in,
                                                int r, int k0, int q) {
        const int nb = n_in >> 8, sb = k0 >> 8, j = (k0 >> 6) & 3;
        const size_t g = (size_t)r * nb + sb;
        raw.qs = *(const uint4 *)(w + g * 160 + 32 * j + 16 * q);
        raw.qh = *(const uint32_t *)(w + g * 160 + 128 + 4 * (2 * j + q));
        raw.sm = *(const uint32_t *)(ws + 20 * g + 4 * j);
        raw.dm = *(const __half2 *)(ws + 20 * g + 16);
    }
    static __device__ __forceinline__ void put(const Raw &raw, const uint8_t *, const uint8_t *, int, int, int q, __half *row) {
        const float2 dm = __half22float2(raw.dm);
        const float a0 = dm.x * (float)(raw.sm & 0xFF), a1 = dm.x * (float)((raw.sm >> 8) & 0xFF);
        const float b0 = dm.y * (float)((raw.sm >> 16) & 0xFF), b1 = dm.y * (float)(raw.sm >> 24);
        const uint32_t u[4] = {raw.qs.x, raw.qs.y, raw.qs.z, raw.qs.w};
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const float a = h ? a1 : a0, b = h ? b1 : b0;
#pragma unroll
            for (int c = 0; c < 2; c++) {
                float v[8];
#pragma unroll
                for (int i = 0; i < 8; i++) {
                    const int k = 2 * c + (i >> 2);
                    const uint32_t q5 = ((u[k] >> (4 * h)) & 0x0F0F0F0Fu) | (((raw.qh >> (2 * k + h)) & 0x01010101u) << 4);
                    v[i] = __fmaf_rn(a, zr_byte_f(q5, i & 3, ZR_MAGIC), -b);
                }
                zr_gm_put8(row + 32 * h + 16 * q + 8 * c, v);
            }
        }
    }
};

// Q4_0: block k0 / 32 + q: 16 quant bytes (low nibbles values 0..15, high 16..31) and d.
template <> struct ZrGmA<ZR_T_Q4_0> {
    struct Raw {
        uint4 qs;
        float d;
    };
    static __device__ __forceinline__ void load(Raw &raw, const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws, int n_in,
                                                int r, int k0, int q) {
        const size_t g = (size_t)r * (n_in >> 5) + (k0 >> 5) + q;
        raw.qs = *(const uint4 *)(w + g * 16);
        raw.d = zr_ldh(ws + 2 * g);
    }
    static __device__ __forceinline__ void put(const Raw &raw, const uint8_t *, const uint8_t *, int, int, int q, __half *row) {
        const uint32_t u[4] = {raw.qs.x, raw.qs.y, raw.qs.z, raw.qs.w};
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int c = 0; c < 2; c++) {
                float v[8];
#pragma unroll
                for (int i = 0; i < 8; i++)
                    v[i] = raw.d * zr_byte_f((u[2 * c + (i >> 2)] >> (4 * h)) & 0x0F0F0F0Fu, i & 3, ZR_MAGIC + 8.0f);
                zr_gm_put8(row + 32 * q + 16 * h + 8 * c, v);
            }
    }
};

// Q3_K and Q2_K: the 64 values k0.. are item u = (k0 % 256) / 64 of super-block k0 / 256, whose 16
// quant bytes hold at bits 2s the low bits of values 16s + 4k + c (byte 4k + c); thread half q
// takes the groups s = 2q, 2q + 1: values 32q .. 32q + 31. Q3_K's high bits: bit 4 (s & 1) + k of
// byte c of hb word 2u + q, scale sc[4u + s] (int8), q - 4; Q2_K: scale byte 4u + s (low nibble the
// scale, high the min): d sc q - dmin m.
template <> struct ZrGmA<ZR_T_Q3_K> {
    struct Raw {
        uint4 qs;
        uint32_t hb;
        float s0, s1; // d sc[4u + 2q], d sc[4u + 2q + 1]
    };
    static __device__ __forceinline__ void load(Raw &raw, const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws, int n_in,
                                                int r, int k0, int q) {
        const int nb = n_in >> 8, sb = k0 >> 8, u = (k0 >> 6) & 3;
        const size_t g = (size_t)r * nb + sb;
        raw.qs = *(const uint4 *)(w + g * 96 + 16 * u);
        raw.hb = *(const uint32_t *)(w + g * 96 + 64 + 8 * u + 4 * q);
        const float d = zr_ldh(ws + 20 * g + 16);
        raw.s0 = d * (float)(int8_t)ws[20 * g + 4 * u + 2 * q];
        raw.s1 = d * (float)(int8_t)ws[20 * g + 4 * u + 2 * q + 1];
    }
    static __device__ __forceinline__ void put(const Raw &raw, const uint8_t *, const uint8_t *, int, int, int q, __half *row) {
        const uint32_t u[4] = {raw.qs.x, raw.qs.y, raw.qs.z, raw.qs.w};
#pragma unroll
        for (int t = 0; t < 2; t++) {
            const int sh = 2 * (2 * q + t); // q is the thread's: a run-time shift
            const float sc = t ? raw.s1 : raw.s0;
#pragma unroll
            for (int c = 0; c < 2; c++) {
                float v[8];
#pragma unroll
                for (int i = 0; i < 8; i++) {
                    const int k = 2 * c + (i >> 2);
                    const uint32_t qv = ((u[k] >> sh) & 0x03030303u) | (((raw.hb >> (4 * t + k)) & 0x01010101u) << 2);
                    v[i] = sc * zr_byte_f(qv, i & 3, ZR_MAGIC + 4.0f);
                }
                zr_gm_put8(row + 32 * q + 16 * t + 8 * c, v);
            }
        }
    }
};

template <> struct ZrGmA<ZR_T_Q2_K> {
    struct Raw {
        uint4 qs;
        uint32_t sc; // scale bytes 4u .. 4u + 3
        __half2 dm;
    };
    static __device__ __forceinline__ void load(Raw &raw, const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws, int n_in,
                                                int r, int k0, int q) {
        const int nb = n_in >> 8, sb = k0 >> 8, u = (k0 >> 6) & 3;
        const size_t g = (size_t)r * nb + sb;
        raw.qs = *(const uint4 *)(w + g * 64 + 16 * u);
        raw.sc = *(const uint32_t *)(ws + 20 * g + 4 * u);
        raw.dm = *(const __half2 *)(ws + 20 * g + 16);
    }
    static __device__ __forceinline__ void put(const Raw &raw, const uint8_t *, const uint8_t *, int, int, int q, __half *row) {
        const float2 dm = __half22float2(raw.dm);
        const uint32_t u[4] = {raw.qs.x, raw.qs.y, raw.qs.z, raw.qs.w};
#pragma unroll
        for (int t = 0; t < 2; t++) {
            const int sh = 2 * (2 * q + t);
            const uint32_t scb = (raw.sc >> (8 * (2 * q + t))) & 0xFF;
            const float a = dm.x * (float)(scb & 0xF), b = dm.y * (float)(scb >> 4);
#pragma unroll
            for (int c = 0; c < 2; c++) {
                float v[8];
#pragma unroll
                for (int i = 0; i < 8; i++) {
                    const uint32_t qv = (u[2 * c + (i >> 2)] >> sh) & 0x03030303u;
                    v[i] = __fmaf_rn(a, zr_byte_f(qv, i & 3, ZR_MAGIC), -b);
                }
                zr_gm_put8(row + 32 * q + 16 * t + 8 * c, v);
            }
        }
    }
};

// Q6_K: the 64 values k0.. are items u0, u0 + 1 (u0 = (k0 % 256) / 32) of super-block k0 / 256; thread
// half q takes item u = u0 + q: values 32q + 16t + i (t = 0, 1; i = 0..15) from nibble byte i (t:
// low / high nibble), high bits in word t of hb[8u..] at bits 8 (i & 3) + 2 (i >> 2), scale sc[2u + t].
template <> struct ZrGmA<ZR_T_Q6_K> {
    struct Raw {
        uint4 nib;
        uint2 hb;
        float s0, s1; // d sc[2u], d sc[2u + 1]
    };
    static __device__ __forceinline__ void load(Raw &raw, const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws, int n_in,
                                                int r, int k0, int q) {
        const int nb = n_in >> 8, sb = k0 >> 8, u = ((k0 & 255) >> 5) + q;
        const size_t g = (size_t)r * nb + sb;
        const uint8_t *b = w + g * 192;
        raw.nib = *(const uint4 *)(b + 16 * u);
        raw.hb = *(const uint2 *)(b + 128 + 8 * u);
        const float d = zr_ldh(ws + 18 * g + 16);
        raw.s0 = d * (float)(int8_t)ws[18 * g + 2 * u];
        raw.s1 = d * (float)(int8_t)ws[18 * g + 2 * u + 1];
    }
    static __device__ __forceinline__ void put(const Raw &raw, const uint8_t *, const uint8_t *, int, int, int q, __half *row) {
        const uint32_t u[4] = {raw.nib.x, raw.nib.y, raw.nib.z, raw.nib.w};
#pragma unroll
        for (int t = 0; t < 2; t++) {
            const uint32_t hw = t ? raw.hb.y : raw.hb.x;
            const float s = t ? raw.s1 : raw.s0;
#pragma unroll
            for (int c = 0; c < 2; c++) {
                float v[8];
#pragma unroll
                for (int i = 0; i < 8; i++) {
                    const int k = 2 * c + (i >> 2); // nibble word k: bytes 4k .. 4k + 3
                    const uint32_t qv = ((u[k] >> (4 * t)) & 0x0F0F0F0Fu) | (((hw >> (2 * k)) & 0x03030303u) << 4);
                    v[i] = s * zr_byte_f(qv, i & 3, ZR_MAGIC + 32.0f);
                }
                zr_gm_put8(row + 32 * q + 16 * t + 8 * c, v);
            }
        }
    }
};

template <int TYPE, int BN>
__device__ __forceinline__ void zr_moe_mm(const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws, const __half *__restrict__ x,
                                          int ldx, const int *__restrict__ xidx, float *__restrict__ y, int ldy,
                                          const int *__restrict__ yidx, const int4 *__restrict__ tiles, int n_in, int n_out, int rpe) {
    constexpr int BM = ZR_GM_BM, BK = ZR_GM_BK, LD = ZR_GM_LD;
    constexpr int G = BN / 32; // groups of 16 tokens per warp: warp column wn takes groups wn, wn + 2, ..
    constexpr int BCH = BN * BK / 8 / 256;  // 16-byte chunks of the token tile per thread
    extern __shared__ __align__(16) uint8_t zr_gm_smem[];
    __half *sA = (__half *)zr_gm_smem;      // [2][BM][LD]
    __half *sB = sA + 2 * BM * LD;          // [2][BN][LD]
    zr_grid_enter();
    const int4 tile = tiles[blockIdx.x];
    const int e = tile.x, r0 = tile.y, nr = tile.z, m0 = blockIdx.y * BM;
    if (e < 0) return; // past the last tile (moe_group_i32 sizes the grid by a bound)
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, wm = warp & 3, wn = warp >> 2;
    // this thread's weight row (past rpe: the expert's last row, not written) and token chunks
    const int am = tid >> 1, aq = tid & 1;
    const int ar = e * rpe + min(m0 + am, rpe - 1);
    const __half *bsrc[BCH];
    bool bok[BCH];
#pragma unroll
    for (int i = 0; i < BCH; i++) {
        const int c = tid + 256 * i, br = c >> 3;
        bok[i] = br < nr;
        const int src = bok[i] ? (xidx ? xidx[r0 + br] : r0 + br) : 0;
        bsrc[i] = x + (size_t)src * ldx + (c & 7) * 8;
    }
    typedef ZrGmA<TYPE> A;
    typename A::Raw raw;
    float acc[2][2 * G][4];
#pragma unroll
    for (int a = 0; a < 2; a++)
#pragma unroll
        for (int b = 0; b < 2 * G; b++)
#pragma unroll
            for (int c = 0; c < 4; c++) acc[a][b][c] = 0.0f;

    const int n_steps = n_in / BK;
    A::load(raw, w, ws, n_in, ar, 0, aq);
#pragma unroll
    for (int i = 0; i < BCH; i++) {
        const int c = tid + 256 * i;
        zr_cp16_if(sB + (c >> 3) * LD + (c & 7) * 8, bsrc[i], bok[i]);
    }
    zr_cp_commit();
    A::put(raw, w, ws, n_in, n_out, aq, sA + am * LD);
    zr_cp_wait<0>();
    __syncthreads();
    for (int s = 0; s < n_steps; s++) {
        const int cur = s & 1;
        const bool more = s + 1 < n_steps;
        if (more) {
            const int k1 = (s + 1) * BK;
            A::load(raw, w, ws, n_in, ar, k1, aq);
            __half *nb = sB + (cur ^ 1) * BN * LD;
#pragma unroll
            for (int i = 0; i < BCH; i++) {
                const int c = tid + 256 * i;
                zr_cp16_if(nb + (c >> 3) * LD + (c & 7) * 8, bsrc[i] + k1, bok[i]);
            }
            zr_cp_commit();
        }
        const __half *ta = sA + cur * BM * LD + (wm * 32) * LD, *tb = sB + cur * BN * LD;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            uint32_t fa[2][4];
#pragma unroll
            for (int mt = 0; mt < 2; mt++) zr_ldmatrix_x4(fa[mt], ta + (mt * 16 + (lane & 15)) * LD + kk + (lane >> 4) * 8);
#pragma unroll
            for (int j = 0; j < G; j++) {
                const int g16 = wn + 2 * j; // tokens 16 g16 .. 16 g16 + 15: skipped (warp-uniform) past the tile's rows
                if (16 * g16 >= nr) continue;
                uint32_t b[4]; // b[0], b[1]: tokens 16 g16 + 0..7; b[2], b[3]: + 8..15
                zr_ldmatrix_x4(b, tb + (16 * g16 + (lane & 7) + ((lane >> 4) << 3)) * LD + kk + ((lane >> 3) & 1) * 8);
#pragma unroll
                for (int mt = 0; mt < 2; mt++) {
                    zr_mma_16816(acc[mt][2 * j], fa[mt], b[0], b[1]);
                    zr_mma_16816(acc[mt][2 * j + 1], fa[mt], b[2], b[3]);
                }
            }
        }
        if (more) {
            A::put(raw, w, ws, n_in, n_out, aq, sA + (cur ^ 1) * BM * LD + am * LD);
            zr_cp_wait<0>();
        }
        __syncthreads();
    }
    // c0, c1: row lane / 4, tokens 2 (lane % 4) + 0, 1; c2, c3: row + 8
#pragma unroll
    for (int nt = 0; nt < 2 * G; nt++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int n = 16 * (wn + 2 * (nt >> 1)) + 8 * (nt & 1) + 2 * (lane & 3) + h;
            if (n >= nr) continue;
            const int dst = yidx ? yidx[r0 + n] : r0 + n;
            float *yr = y + (size_t)dst * ldy;
#pragma unroll
            for (int mt = 0; mt < 2; mt++)
#pragma unroll
                for (int g = 0; g < 2; g++) {
                    const int o = m0 + wm * 32 + mt * 16 + (lane >> 2) + 8 * g;
                    if (o < rpe) yr[o] = acc[mt][nt][2 * g + h];
                }
        }
}

#define ZR_MOE_MM(NAME, TYPE, BN, FIELD)                                                                                     \
    ZR_KERNEL void __launch_bounds__(256, 2)                                                                                 \
        NAME(const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws, const __half *__restrict__ x, int ldx,          \
             const int *__restrict__ xidx, float *__restrict__ y, int ldy, const int *__restrict__ yidx,                    \
             const int4 *__restrict__ tiles, int n_in, int n_out, int rpe) {                                                \
        zr_moe_mm<TYPE, BN>(w, ws, x, ldx, xidx, y, ldy, yidx, tiles, n_in, n_out, rpe);                                     \
    }                                                                                                                        \
    ZR_KCHECK_FAMILY(FIELD, NAME);

// moe_mm_<kernel>_n32 and _n64 for every type of the type table
#define ZR_TYPE(id, E, name, block, bytes, kernel, item, main, side) \
    ZR_MOE_MM(moe_mm_##kernel##_n32, ZR_T_##E, 32, moe_mm)           \
    ZR_MOE_MM(moe_mm_##kernel##_n64, ZR_T_##E, 64, moe_mm64)
#include "../src/zr_types.def"
