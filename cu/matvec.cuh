// The decode matrix-vector product y[n_out] = W[n_out, n_in] x[n_in] (+ add[n_out]), F32
// activations and F32 accumulation for every weight type.
//
// Why it is shaped like this: at batch 1 every weight byte is read once per token, so the
// kernel must stream weights at memory bandwidth. Each lane issues 128-bit coalesced loads of
// one "item" (16 B of quants plus its scales) for R rows at once (R loads in flight per lane),
// the x values of the item are read once from shared memory and reused for the R rows, and
// the quant -> float conversion avoids the slow converter (zr_byte_f). x is staged in shared
// memory with 4 floats of padding every 32 so the per-lane 16-byte reads do not conflict.
// Q2_K, Q4_K, Q5_K, Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1 instead stage x as 23-bit integers in int8
// planes and sum with dp4a (ZrMvQ2Ki, ZrMvQ4Ki, ZrMvQ5Ki, ZrMvQ8i, ZrMvQ4xi: the products are
// bound by their arithmetic, not by memory; cu/PERF.md session 14).
//
// Launch (src/cuda/mv_shape.c picks the shape per matrix): block 32*G*S threads (at most
// ZR_MV_MAX_THREADS) = G row groups of R rows, each split over S warps along the row (split-K,
// for matrices with too few rows to fill the GPU); grid ceil(row groups / G); dynamic shared
// memory zr_mv_smem_bytes(n_in) = (n_in + 4*ceil(n_in/32)) * 4. x must be 16-byte aligned.
// y and add may alias (residual update in place): each y[r] is read and written by one lane.
// mode: how x is read (ZR_MV_IN: as is, RMSNorm(x) * norm_w (eps), or SwiGLU of x's two
// halves) plus ZR_MV_GLU (gated output) and ZR_MV_GELU (GeGLU gates); every block computes the norm of the whole x itself
// (the same arithmetic in each: deterministic).
#pragma once
#include "kernels.cuh"
#include "quant.cuh"
#include "gelu.cuh"

#define ZR_MV_MAX_THREADS 1024

__device__ __forceinline__ int zr_xpad(int e) { return e + ((e >> 5) << 2); }

// 16 consecutive x values starting at e (e % 16 == 0) from the padded shared copy.
__device__ __forceinline__ void zr_x16(const float *xs, int e, float v[16]) {
    const float4 *p = (const float4 *)(xs + zr_xpad(e));
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const float4 t = p[k];
        v[4 * k] = t.x; v[4 * k + 1] = t.y; v[4 * k + 2] = t.z; v[4 * k + 3] = t.w;
    }
}

// sum_k x[k] * (byte k of the 4 words) - off*... : bytes are values with the offset folded in.
__device__ __forceinline__ float zr_dot16_bytes(const uint32_t q[4], const float x[16], float off) {
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < 4; k++) {
#pragma unroll
        for (int i = 0; i < 4; i++) s = fmaf(x[4 * k + i], zr_byte_f(q[k], i, off), s);
    }
    return s;
}

__device__ __forceinline__ uint4 zr_ld16(const uint8_t *p) { return __ldg((const uint4 *)p); }

// --- per-type items. Each type defines: EPI (elements per item), the row pointers (Row), the
// raw data of one item of one row (F), load() which issues its 128-bit loads, and comp<R>()
// which adds the item's contribution of R rows to acc. Loading and computing are separate so
// the loop can keep the next item's loads in flight while it computes the current one. ---

struct ZrMvF32 {
    static constexpr int EPI = 4;
    struct Row { const uint8_t *p; };
    struct F { float4 w; };
    __device__ static Row row(const uint8_t *w, const uint8_t *, int n_in, int, int r) {
        return {w + (size_t)r * zr_main_row_bytes(ZR_T_F32, n_in)};
    }
    __device__ static void load(const Row &rw, int it, F &f) { f.w = __ldg((const float4 *)rw.p + it); }
    template <int R> __device__ static void comp(const F (&f)[R], int it, const float *xs, float (&acc)[R]) {
        const float4 xv = *(const float4 *)(xs + zr_xpad(4 * it));
#pragma unroll
        for (int r = 0; r < R; r++)
            acc[r] = fmaf(f[r].w.w, xv.w, fmaf(f[r].w.z, xv.z, fmaf(f[r].w.y, xv.y, fmaf(f[r].w.x, xv.x, acc[r]))));
    }
    __device__ static float elem(const Row &rw, int e) { return ((const float *)rw.p)[e]; }
};

// F16 and BF16: item = 8 values (16 bytes); each word's two values widened by pair (half2 ->
// float2; bf16: the low half shifted up, the high half masked), all four words first, then added
// against x in order (the float chain and the machine code are the two types' former copies').
template <int TYPE> struct ZrMvH16 {
    static constexpr int EPI = 8;
    struct Row { const uint8_t *p; };
    struct F { uint4 w; };
    __device__ static Row row(const uint8_t *w, const uint8_t *, int n_in, int, int r) {
        return {w + (size_t)r * zr_main_row_bytes(TYPE, n_in)};
    }
    __device__ static void load(const Row &rw, int it, F &f) { f.w = zr_ld16(rw.p + 16 * (size_t)it); }
    __device__ static float2 pair(const uint32_t &u) {
        if (TYPE == ZR_T_F16) return __half22float2(*(const __half2 *)&u);
        return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u));
    }
    template <int R> __device__ static void comp(const F (&f)[R], int it, const float *xs, float (&acc)[R]) {
        const float *xp = xs + zr_xpad(8 * it);
        const float4 x0 = *(const float4 *)xp, x1 = *(const float4 *)(xp + 4);
        const float xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
        for (int r = 0; r < R; r++) {
            const uint32_t u[4] = {f[r].w.x, f[r].w.y, f[r].w.z, f[r].w.w};
            float2 v[4];
#pragma unroll
            for (int k = 0; k < 4; k++) v[k] = pair(u[k]);
            float s = acc[r];
#pragma unroll
            for (int k = 0; k < 4; k++) {
                s = fmaf(v[k].x, xv[2 * k], s);
                s = fmaf(v[k].y, xv[2 * k + 1], s);
            }
            acc[r] = s;
        }
    }
    __device__ static float elem(const Row &rw, int e) {
        if (TYPE == ZR_T_F16) return __half2float(((const __half *)rw.p)[e]);
        return zr_bf2f(((const uint16_t *)rw.p)[e]);
    }
};
using ZrMvF16 = ZrMvH16<ZR_T_F16>;
using ZrMvBF16 = ZrMvH16<ZR_T_BF16>;

// The small product's two sum arrays (an item's low and high runs), rows T0..T1-1 of x zeroed.
template <int R, int N, int T0, int T1>
__device__ __forceinline__ void zr_mm_zero2(float (&a)[N][R], float (&b)[N][R]) {
#pragma unroll
    for (int t = T0; t < T1; t++)
#pragma unroll
        for (int r = 0; r < R; r++) a[t][r] = b[t][r] = 0.f;
}

// The small product's step (comp_n): four decoded weights of each of R rows, wv, against the four
// x values at x + t * xst of each row t of x in T0..T1, added into s[t][r] in the values' order.
template <int R, int N, int T0, int T1>
__device__ __forceinline__ void zr_mm_fma4(const float *x, int xst, const float (&wv)[R][4], float (&s)[N][R]) {
#pragma unroll
    for (int t = T0; t < T1; t++) {
        const float4 a = *(const float4 *)(x + t * xst);
        const float va[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int i = 0; i < 4; i++) s[t][r] = fmaf(va[i], wv[r][i], s[t][r]);
    }
}

// q8_0: item = half a block (16 int8); bytes are biased by 0x80 to use the unsigned magic.
struct ZrMvQ8_0 {
    static constexpr int EPI = 16;
    struct Row { const uint8_t *q; const __half *d; };
    struct F { uint4 q; float d; };
    __device__ static Row row(const uint8_t *w, const uint8_t *ws, int n_in, int, int r) {
        const int nb = n_in / 32;
        return {w + (size_t)r * nb * 32, (const __half *)ws + (size_t)r * nb};
    }
    __device__ static void load(const Row &rw, int it, F &f) {
        f.q = zr_ld16(rw.q + 16 * (size_t)it);
        f.d = __half2float(__ldg(rw.d + (it >> 1)));
    }
    // The item's product of R rows with N rows of x at once (the small product,
    // cu/matmul_small.cu; the decode's is ZrMvQ8i's): row t's x at xs + t * xst, each word decoded
    // once for all N, each byte read as a float by the unsigned magic
    template <int R, int N, int T0 = 0, int T1 = N>
    __device__ static void comp_n(const F (&f)[R], int it, const float *xs, int xst, float (&acc)[N][R]) {
        float s[N][R];
#pragma unroll
        for (int t = T0; t < T1; t++)
#pragma unroll
            for (int r = 0; r < R; r++) s[t][r] = 0.f;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            float wv[R][4];
#pragma unroll
            for (int r = 0; r < R; r++) {
                const uint32_t q = (k == 0 ? f[r].q.x : k == 1 ? f[r].q.y : k == 2 ? f[r].q.z : f[r].q.w) ^ 0x80808080u;
#pragma unroll
                for (int i = 0; i < 4; i++) wv[r][i] = zr_byte_f(q, i, ZR_MAGIC + 128.f);
            }
            zr_mm_fma4<R, N, T0, T1>(xs + zr_xpad(16 * it) + 4 * k, xst, wv, s);
        }
#pragma unroll
        for (int t = T0; t < T1; t++)
#pragma unroll
            for (int r = 0; r < R; r++) acc[t][r] = fmaf(f[r].d, s[t][r], acc[t][r]);
    }
};

// q4_0 / q4_1 / q5_0 / q5_1: item = one block of 32 (16 bytes of nibbles: byte j holds element j
// in its low and element j+16 in its high nibble).
template <int TYPE>
struct ZrMvQ4x {
    static constexpr int EPI = 32;
    static constexpr bool has_m = TYPE == ZR_T_Q4_1 || TYPE == ZR_T_Q5_1;
    static constexpr bool has_h = TYPE == ZR_T_Q5_0 || TYPE == ZR_T_Q5_1;
    struct Row { const uint8_t *q; const uint8_t *s1; const uint8_t *s2; };
    struct F { uint4 q; float d, m; uint32_t qh; };
    __device__ static Row row(const uint8_t *w, const uint8_t *ws, int n_in, int n_out, int r) {
        const int nb = n_in / 32;
        const size_t g = (size_t)r * nb, N = (size_t)n_out * nb;
        if (TYPE == ZR_T_Q4_0) return {w + g * 16, ws + 2 * g, nullptr};
        if (TYPE == ZR_T_Q4_1) return {w + g * 16, ws + 4 * g, nullptr};
        if (TYPE == ZR_T_Q5_0) return {w + g * 16, ws + 4 * g, ws + 4 * N + 2 * g};
        return {w + g * 16, ws + 4 * g, ws + 4 * N + 4 * g};
    }
    __device__ static void load(const Row &rw, int it, F &f) {
        f.q = zr_ld16(rw.q + 16 * (size_t)it);
        f.m = 0.f;
        f.qh = 0;
        if (TYPE == ZR_T_Q4_0) f.d = __half2float(__ldg((const __half *)rw.s1 + it));
        if (TYPE == ZR_T_Q4_1) {
            const float2 dm = __half22float2(__ldg((const __half2 *)rw.s1 + it));
            f.d = dm.x; f.m = dm.y;
        }
        if (has_h) f.qh = __ldg((const uint32_t *)rw.s1 + it);
        if (TYPE == ZR_T_Q5_0) f.d = __half2float(__ldg((const __half *)rw.s2 + it));
        if (TYPE == ZR_T_Q5_1) {
            const float2 dm = __half22float2(__ldg((const __half2 *)rw.s2 + it));
            f.d = dm.x; f.m = dm.y;
        }
    }
    // The item's product of R rows with N rows of x (the small product; the decode's is
    // ZrMvQ4xi's): row t at xs + t * xst, each word decoded once; word k of an item holds elements
    // 4k..4k+3 (low nibbles) and 16+4k.. (high)
    template <int R, int N, int T0 = 0, int T1 = N>
    __device__ static void comp_n(const F (&f)[R], int it, const float *xs, int xst, float (&acc)[N][R]) {
        const float off = ZR_MAGIC + (TYPE == ZR_T_Q4_0 ? 8.f : TYPE == ZR_T_Q5_0 ? 16.f : 0.f);
        const int x0 = zr_xpad(32 * it);
        float s[N][R], xsum[N];
#pragma unroll
        for (int t = T0; t < T1; t++) {
            xsum[t] = 0.f;
#pragma unroll
            for (int r = 0; r < R; r++) s[t][r] = 0.f;
        }
#pragma unroll
        for (int k = 0; k < 4; k++) {
            float wl[R][4], wh[R][4];
#pragma unroll
            for (int r = 0; r < R; r++) {
                const uint32_t w4 = k == 0 ? f[r].q.x : k == 1 ? f[r].q.y : k == 2 ? f[r].q.z : f[r].q.w;
                uint32_t lo = w4 & 0x0F0F0F0Fu, hi = (w4 >> 4) & 0x0F0F0F0Fu;
                if (has_h) {
                    lo |= zr_expand4_bit4((f[r].qh >> (4 * k)) & 0xF);
                    hi |= zr_expand4_bit4((f[r].qh >> (16 + 4 * k)) & 0xF);
                }
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    wl[r][i] = zr_byte_f(lo, i, off);
                    wh[r][i] = zr_byte_f(hi, i, off);
                }
            }
#pragma unroll
            for (int t = T0; t < T1; t++) {
                const float *xp = xs + t * xst + x0;
                const float4 a = *(const float4 *)(xp + 4 * k), b = *(const float4 *)(xp + 16 + 4 * k);
                const float xl[4] = {a.x, a.y, a.z, a.w}, xh[4] = {b.x, b.y, b.z, b.w};
                if (has_m) xsum[t] += (a.x + a.y) + (a.z + a.w) + (b.x + b.y) + (b.z + b.w);
#pragma unroll
                for (int r = 0; r < R; r++) {
                    float v = s[t][r];
#pragma unroll
                    for (int i = 0; i < 4; i++) v = fmaf(xl[i], wl[r][i], v);
#pragma unroll
                    for (int i = 0; i < 4; i++) v = fmaf(xh[i], wh[r][i], v);
                    s[t][r] = v;
                }
            }
        }
#pragma unroll
        for (int t = T0; t < T1; t++)
#pragma unroll
            for (int r = 0; r < R; r++) {
                acc[t][r] = fmaf(f[r].d, s[t][r], acc[t][r]);
                if (has_m) acc[t][r] = fmaf(f[r].m, xsum[t], acc[t][r]);
            }
    }
};

// q2_K's and q3_K's item (64 values, four groups s of 16): each group's words as bytes q << 4 under
// the exponent 0x3F (T::bytes: the float 0.5 + q/16, one PRMT a weight) against its 16 values of x,
// then T::group with the group's staged sum (zr_mv_stage_x<true>: slot s & 1 of the pad after its
// 32 values). x's value o < 64 of the item is at xp + o + 4 (o >= 32).
template <class T, int R>
__device__ __forceinline__ void zr_k23_comp(const typename T::F (&f)[R], int it, const float *xs, float (&acc)[R]) {
    const float *xp = xs + zr_xpad(64 * it);
#pragma unroll
    for (int s = 0; s < 4; s++) {
        float t[R];
#pragma unroll
        for (int r = 0; r < R; r++) t[r] = 0.f;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const float4 a = *(const float4 *)(xp + 16 * s + 4 * k + 4 * (s >> 1));
            const float va[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
            for (int r = 0; r < R; r++) {
                const uint32_t w4 = k == 0 ? f[r].q.x : k == 1 ? f[r].q.y : k == 2 ? f[r].q.z : f[r].q.w;
                const uint32_t q = T::bytes(f[r], w4, s, k);
                float v = t[r];
#pragma unroll
                for (int i = 0; i < 4; i++)
                    v = fmaf(va[i], __uint_as_float(__byte_perm(q, 0x3F000000u, 0x7044u | ((uint32_t)i << 8))), v);
                t[r] = v;
            }
        }
        const float S = xs[36 * (2 * it + (s >> 1)) + 32 + (s & 1)];
#pragma unroll
        for (int r = 0; r < R; r++) acc[r] = T::group(f[r], s, t[r], S, acc[r]);
    }
}

// q2_K (device layout in cu/quant.cuh): item = the 64 elements 64 it.. of the row: 16 bytes of
// 2-bit quants placed as q3_K's low bits, the item's 4 scale|min bytes (one word) and (d, dmin):
// 24 B per item and row, 6 registers (ggml's block as it was: 36 B per item, the header's 16
// scale bytes loaded by every lane). q is read as the float 0.5 + q/16 as in q3_K: sum x q =
// 16 T - 8 S against the group's staged sum S, which the mins need anyway. The small product's
// (cu/matmul_small.cu); the decode's products are ZrMvQ2Ki's.
struct ZrMvQ2K {
    static constexpr int EPI = 64;
    struct Row { const uint8_t *w, *ws; uint32_t g; };  // as q4_K's
    struct F { uint4 q; uint32_t sc; __half2 dm; };
    __device__ static Row row(const uint8_t *w, const uint8_t *ws, int n_in, int, int r) {
        return {w, ws, (uint32_t)r * (uint32_t)(n_in / 256)};
    }
    __device__ static void load(const Row &rw, int it, F &f) {
        const uint32_t sb = rw.g + (it >> 2);
        const uint8_t *s = rw.ws + (size_t)sb * 20;
        f.q = zr_ld16(rw.w + (size_t)sb * 64 + 16 * (it & 3));
        f.sc = __ldg((const uint32_t *)s + (it & 3));
        f.dm = __ldg((const __half2 *)(s + 16));
    }
    // word k's quants of group s as bytes q << 4 (bits 4..5; bit 7 clear)
    __device__ static uint32_t bytes(const F &, uint32_t w4, int s, int) {
        return (2 * s <= 4 ? w4 << (4 - 2 * s) : w4 >> (2 * s - 4)) & 0x30303030u;
    }
    // group s's sum T of the floats 0.5 + q/16 against x and x's staged sum S: sum x q = 16 T - 8 S
    __device__ static float group(const F &f, int s, float t, float S, float acc) {
        const float2 dm = __half22float2(f.dm);
        const float sc = zr_byte_f(f.sc & 0x0F0F0F0Fu, s, ZR_MAGIC);
        const float m = zr_byte_f((f.sc >> 4) & 0x0F0F0F0Fu, s, ZR_MAGIC);
        acc = fmaf(dm.x * sc, fmaf(16.f, t, -8.f * S), acc);
        return fmaf(-dm.y * m, S, acc);
    }
    template <int R> __device__ static void comp(const F (&f)[R], int it, const float *xs, float (&acc)[R]) {
        zr_k23_comp<ZrMvQ2K, R>(f, it, xs, acc);
    }
};

// q3_K (device layout in cu/quant.cuh): item = the 64 elements 64 it.. of the row: 16 bytes of
// low bits (group s = 0..3 of 16 values at bits 2s), 8 bytes of their high bits, the item's 4
// int8 scales (one word) and d: 30 B per item and row, 8 registers (ggml's block as it was: 48 B,
// and all 16 scales decoded per item and row). Each 3-bit q is read as the float 0.5 + q/16 by
// one PRMT (byte q << 4 under 0x3F), so a weight costs PRMT + FFMA: sum x (q - 4) = 16 T - 12 S
// with T the sum of the floats and S the group's staged sum of x (zr_mv_stage_x<true>).
struct ZrMvQ3K {
    static constexpr int EPI = 64;
    struct Row { const uint8_t *w, *ws; uint32_t g; };  // as q4_K's
    struct F { uint4 q; uint2 h; uint32_t sc; __half d; };
    __device__ static Row row(const uint8_t *w, const uint8_t *ws, int n_in, int, int r) {
        return {w, ws, (uint32_t)r * (uint32_t)(n_in / 256)};
    }
    __device__ static void load(const Row &rw, int it, F &f) {
        const uint32_t sb = rw.g + (it >> 2);
        const uint8_t *b = rw.w + (size_t)sb * 96, *s = rw.ws + (size_t)sb * 20;
        f.q = zr_ld16(b + 16 * (it & 3));
        f.h = __ldg((const uint2 *)(b + 64) + (it & 3));
        f.sc = __ldg((const uint32_t *)s + (it & 3));
        f.d = __ldg((const __half *)(s + 16));
    }
    // word k's quants of group s as bytes q << 4 (low bits at 4..5, high bit at 6, bit 7 clear)
    __device__ static uint32_t bytes(const F &f, uint32_t w4, int s, int k) {
        const uint32_t hw = s < 2 ? f.h.x : f.h.y;
        const int hb = 4 * (s & 1) + k; // the high bits' place in each byte of hw
        return ((2 * s <= 4 ? w4 << (4 - 2 * s) : w4 >> (2 * s - 4)) & 0x30303030u) |
               ((hb <= 6 ? hw << (6 - hb) : hw >> (hb - 6)) & 0x40404040u);
    }
    // group s's sum T of the floats 0.5 + q/16 against x and x's staged sum S: sum x (q - 4) = 16 T - 12 S
    __device__ static float group(const F &f, int s, float t, float S, float acc) {
        const float sc = zr_byte_f(f.sc ^ 0x80808080u, s, ZR_MAGIC + 128.f);
        return fmaf(__half2float(f.d) * sc, fmaf(16.f, t, -12.f * S), acc);
    }
    template <int R> __device__ static void comp(const F (&f)[R], int it, const float *xs, float (&acc)[R]) {
        zr_k23_comp<ZrMvQ3K, R>(f, it, xs, acc);
    }
};

// the traits of q2_K and q3_K by type id
template <int TYPE> struct ZrMvQ23KOf;
template <> struct ZrMvQ23KOf<ZR_T_Q2_K> { using T = ZrMvQ2K; };
template <> struct ZrMvQ23KOf<ZR_T_Q3_K> { using T = ZrMvQ3K; };
template <int TYPE> using ZrMvQ23K = typename ZrMvQ23KOf<TYPE>::T;

// q4_K's and q5_K's decoded scale word (cu/quant.cuh): the item's two sub-blocks' scales and mins
// as floats (sc0, sc1, m0, m1).
__device__ __forceinline__ float4 zr_k_scales(uint32_t sm) {
    return make_float4(zr_byte_f(sm, 0, ZR_MAGIC), zr_byte_f(sm, 1, ZR_MAGIC), zr_byte_f(sm, 2, ZR_MAGIC),
                       zr_byte_f(sm, 3, ZR_MAGIC));
}

// The small product's item (comp_n) of q4_K and q5_K, N rows of x at once: row t at xs + t * xst,
// x staged in item order (ZrMvItemOrder: the item's 16 low-nibble values at 36 it, its 16 high at
// 36 it + 16, their two sums at 36 it + 32 and 33: the lanes' float4 reads hit distinct banks),
// each word's quants read as floats by T::lo_bytes / T::hi_bytes under the exponent 0x3F (q4_K: 1 +
// q/16, q5_K: 0.5 + q/64) once for all N rows (low nibbles, then high: independent chains), the
// offset taken out against the staged sums and the mins applied.
template <class T, int R, int N, int T0, int T1>
__device__ __forceinline__ void zr_k_comp_n(const typename T::F (&f)[R], int it, const float *xs, int xst,
                                            float (&acc)[N][R]) {
    const int xl0 = 36 * it, xh0 = 36 * it + 16;
    float slo[N][R], shi[N][R];
    zr_mm_zero2<R, N, T0, T1>(slo, shi);
#pragma unroll
    for (int k = 0; k < 4; k++) {
#pragma unroll
        for (int h = 0; h < 2; h++) { // the low nibbles, then the high
            float(&sh)[N][R] = h ? shi : slo;
            float wv[R][4];
#pragma unroll
            for (int r = 0; r < R; r++) {
                const uint32_t w4 = k == 0 ? f[r].q.x : k == 1 ? f[r].q.y : k == 2 ? f[r].q.z : f[r].q.w;
                const uint32_t q = h ? T::hi_bytes(f[r], w4, k) : T::lo_bytes(f[r], w4, k);
#pragma unroll
                for (int i = 0; i < 4; i++)
                    wv[r][i] = __uint_as_float(__byte_perm(q, 0x3F000000u, 0x7044u | ((uint32_t)i << 8)));
            }
            zr_mm_fma4<R, N, T0, T1>(xs + (h ? xh0 : xl0) + 4 * k, xst, wv, sh);
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
        const float2 dm = __half22float2(f[r].dm);
        const uint32_t sm = f[r].sm;
        const float4 scm = zr_k_scales(sm);
        const float sc0 = scm.x, sc1 = scm.y, m0 = scm.z, m1 = scm.w;
#pragma unroll
        for (int t = T0; t < T1; t++) {
            const float2 sum = *(const float2 *)(xs + t * xst + 36 * it + 32);  // low, high
            const float sum_lo = sum.x, sum_hi = sum.y;
            if constexpr (T::FIVE) { // sum x q = 64 (s - S/2): the 64 goes into d (a power of two: exact)
                const float q = fmaf(sc0, fmaf(-0.5f, sum_lo, slo[t][r]), sc1 * fmaf(-0.5f, sum_hi, shi[t][r]));
                acc[t][r] = fmaf(64.f * dm.x, q, acc[t][r]);
            } else { // sum x q = 16 (s - S)
                acc[t][r] = fmaf(16.f * dm.x, fmaf(sc0, slo[t][r] - sum_lo, sc1 * (shi[t][r] - sum_hi)), acc[t][r]);
            }
            acc[t][r] = fmaf(-dm.y, fmaf(m0, sum_lo, m1 * sum_hi), acc[t][r]);
        }
    }
}

// q4_K (device layout in cu/quant.cuh): item = 16 bytes of nibbles, one of 8 per super-block:
// chunk j = u/2 of 64 elements, half hf = u%2; low nibbles are elements 64j + 16hf + l (sub-block
// 2j), high nibbles 64j + 32 + 16hf + l (sub-block 2j+1). Besides the quants a lane loads one
// word of decoded scales/mins and (d, dmin): 24 B per item and row, 6 registers.
struct ZrMvQ4K {
    static constexpr int EPI = 32;
    // the row's first super-block g: the stream pointers are the kernel's (shared by every
    // row), so a row costs one register, not four
    struct Row { const uint8_t *w, *ws; uint32_t g; };
    struct F { uint4 q; uint32_t sm; __half2 dm; };
    __device__ static Row row(const uint8_t *w, const uint8_t *ws, int n_in, int, int r) {
        return {w, ws, (uint32_t)r * (uint32_t)(n_in / 256)};
    }
    __device__ static void load(const Row &rw, int it, F &f) {
        const uint32_t sb = rw.g + (it >> 3);
        const uint8_t *s = rw.ws + (size_t)sb * 20;
        f.q = zr_ld16(rw.w + (size_t)rw.g * 128 + 16 * it);
        f.sm = __ldg((const uint32_t *)s + ((it >> 1) & 3));
        f.dm = __ldg((const __half2 *)(s + 16));
    }
    // The item's products: the sums of x over each 16 values that the mins need come from the
    // block's staged copy (zr_mv_stage_x<true> writes them into the pad after every 32 values)
    // instead of being added up for every item, and each nibble q is read as the float 1 + q/16
    // by one PRMT (exponent and nibble placed by one shift and one LOP3 per 4 nibbles):
    // sum x (1 + q/16) = S + (sum x q)/16 with S the staged sum, so a weight costs PRMT + FFMA
    // instead of PRMT + FADD + FFMA. The offset is at most ~2x the part kept (q/16 < 1), so the
    // cancellation costs ~1-2 bits of the F32 sum, not the ~5 of Q4_0's removed 0.5 + q/256
    // variant (PERF.md run 3). The small product's only (zr_k_comp_n, N rows of x at once); the
    // decode's products are ZrMvQ4Ki's.
    static constexpr bool FIVE = false; // zr_k_comp_n: q4_K's offset
    // word k's low and high nibbles as bytes under the exponent 0x3F: 0x80 | q << 3 (bit 7 is the
    // exponent's low bit), the float 1 + q/16
    __device__ static uint32_t lo_bytes(const F &, uint32_t w4, int) { return ((w4 << 3) & 0x78787878u) | 0x80808080u; }
    __device__ static uint32_t hi_bytes(const F &, uint32_t w4, int) { return ((w4 >> 1) & 0x78787878u) | 0x80808080u; }
    template <int R, int N, int T0 = 0, int T1 = N>
    __device__ static void comp_n(const F (&f)[R], int it, const float *xs, int xst, float (&acc)[N][R]) {
        zr_k_comp_n<ZrMvQ4K, R, N, T0, T1>(f, it, xs, xst, acc);
    }
};

// q4_K on integer dot products (ZrMvXq): zr_mv_put_x4<.., true> stages x as integers q = rint(x Q /
// amax), Q = 2^22 - 1, per block of 32 values (the amax and the scale d = amax / Q of each block),
// in three int8 planes q = 65536 hi + 256 mid + lo (hi signed, mid and lo unsigned). A word of 8
// nibbles is then two dp4a a plane (the low nibbles masked in place against the low run, the high
// nibbles masked in place, 16 q, against the high run: the 16 goes into the scale, exact), the
// planes added in integers and float: the item's dp4a and masks are ~1 instruction a weight, the
// whole item loop ~2.8, the whole launch 5-6.5 (ncu, cu/PERF.md session 15). The products are bound
// by their arithmetic, not by memory (cu/PERF.md session 14: without any weight byte from DRAM the
// 3B decodes 11% faster, without the item arithmetic 2.7x). 23 bits keep the F32 path's accuracy: a
// block's rounding error is amax 2^-23 (F32's is |x| 2^-24), test_cuda_backend's fixtures stay
// within 5e-6 of llama.cpp's exact logits (3e-5 allowed); 8-bit x (llama.cpp's q8_1) was 0.03-0.07
// off, 15-bit 2.4e-4..5.7e-4 (cu/PERF.md).
// Layout, per super-block (256 values, 864 bytes): per plane the 8 items' low runs (16 bytes each,
// elements 64 j + 16 hf + 0..15 of item u = 2 j + hf) then their high runs (+32), 256 bytes a
// plane; the 8 block scales (32 B); the items' (low, high) sums of the rounded values (64 B, q sums
// times d: the mins' term then meets the same rounding as the quants', so the rounding errors of x
// meet the weight d sc q - dmin m rather than d sc q, 2.5x less error for 8-bit x). An item's lanes
// read 16-byte runs 16 bytes apart: no bank conflict. 3.4 bytes a value: within
// zr_mv_smem_bytes(n_in), the float copy's 4.5.
#define ZR_XQ_SB 864
#define ZR_XQ_Q 4194303.f
__device__ __forceinline__ int zr_dp4a_us(uint32_t a, uint32_t b, int c) {
    int d;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}
__device__ __forceinline__ int zr_dp4a_ss(uint32_t a, uint32_t b, int c) {
    int d;
    asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}
__device__ __forceinline__ int zr_dp4a_su(uint32_t a, uint32_t b, int c) {
    int d;
    asm("dp4a.s32.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}
__device__ __forceinline__ int zr_dp4a_uu(uint32_t a, uint32_t b, int c) {
    uint32_t d;
    asm("dp4a.u32.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"((uint32_t)c));
    return (int)d;
}
struct ZrMvQ4Ki : ZrMvQ4K {
    // the dot of one plane (low and high runs at p, p + 128) with R rows' masked words: sums of at
    // most 16 products of 240 by 255 (no overflow)
    template <int R, bool SIGNED>
    __device__ static void plane(const uint8_t *p, const uint32_t (&lo)[R][4], const uint32_t (&hi)[R][4],
                                 int (&sl)[R], int (&sh)[R]) {
        const uint4 xl = *(const uint4 *)p, xh = *(const uint4 *)(p + 128);
        const uint32_t al[4] = {xl.x, xl.y, xl.z, xl.w}, ah[4] = {xh.x, xh.y, xh.z, xh.w};
#pragma unroll
        for (int r = 0; r < R; r++) {
            int a = 0, b = 0;
#pragma unroll
            for (int k = 0; k < 4; k++) {
                a = SIGNED ? zr_dp4a_us(lo[r][k], al[k], a) : zr_dp4a_uu(lo[r][k], al[k], a);
                b = SIGNED ? zr_dp4a_us(hi[r][k], ah[k], b) : zr_dp4a_uu(hi[r][k], ah[k], b);
            }
            sl[r] = a;
            sh[r] = b;
        }
    }
    template <int R> __device__ static void comp(const F (&f)[R], int it, const float *xs, float (&acc)[R]) {
        uint32_t lo[R][4], hi[R][4];
#pragma unroll
        for (int r = 0; r < R; r++) {
            const uint32_t w[4] = {f[r].q.x, f[r].q.y, f[r].q.z, f[r].q.w};
#pragma unroll
            for (int k = 0; k < 4; k++) {
                lo[r][k] = w[k] & 0x0F0F0F0Fu;
                hi[r][k] = w[k] & 0xF0F0F0F0u;
            }
        }
        planes<R>(f, it, xs, lo, hi, 0.0625f, acc);
    }
    // the item's three planes against R rows' quants lo (the low runs') and hi (the high runs',
    // times hf: q4_K's masked in place are 16 q, hf 1/16), then the scales and the mins against the
    // staged sums; FF: q4_K's or q5_K's item (dm, sm)
    template <int R, class FF>
    __device__ static void planes(const FF (&f)[R], int it, const float *xs, const uint32_t (&lo)[R][4],
                                  const uint32_t (&hi)[R][4], float hf, float (&acc)[R]) {
        const uint8_t *g = (const uint8_t *)xs + ZR_XQ_SB * (it >> 3) + 16 * (it & 7);
        int tl[R], th[R], sl[R], sh[R];
        plane<R, true>(g, lo, hi, tl, th);        // hi plane: |sum| <= 16 * 240 * 64
        plane<R, false>(g + 256, lo, hi, sl, sh); // mid plane
#pragma unroll
        for (int r = 0; r < R; r++) tl[r] = tl[r] * 256 + sl[r], th[r] = th[r] * 256 + sh[r]; // < 2^26
        plane<R, false>(g + 512, lo, hi, sl, sh); // lo plane
        const int u = it & 7;
        const uint8_t *gs = (const uint8_t *)xs + ZR_XQ_SB * (it >> 3) + 768;
        const float2 dx = *(const float2 *)(gs + 4 * (u & 6)); // blocks 2 j (low run), 2 j + 1 (high)
        const float2 sx = *(const float2 *)(gs + 32 + 8 * u);
#pragma unroll
        for (int r = 0; r < R; r++) {
            const float fl = fmaf((float)tl[r], 256.f, (float)sl[r]), fh = fmaf((float)th[r], 256.f, (float)sh[r]);
            const float2 dm = __half22float2(f[r].dm);
            const uint32_t sm = f[r].sm;
            const float4 scm = zr_k_scales(sm);
            const float sc0 = scm.x, sc1 = scm.y, m0 = scm.z, m1 = scm.w;
            acc[r] = fmaf(dm.x, fmaf(sc0 * dx.x, fl, (sc1 * dx.y * hf) * fh), acc[r]);
            acc[r] = fmaf(-dm.y, fmaf(m0, sx.x, m1 * sx.y), acc[r]);
        }
    }
};

// q8_0 on integer dot products: x staged as q4_K's three int8 planes (23-bit integers per block
// of 32, ZR_XQ_Q / max|x|), in natural order (XQ 2 in zr_mv_put_x4: item it's 16 values at
// 16 (it % 16) of its super-block's planes, the block's scale at 768 + 4 (it % 16 / 2)); the
// weights' signed bytes against each plane by 4 dp4a (signed x signed for the high plane, signed
// x unsigned for the others), the planes combined in integers and floats as q4_K's: 12 dp4a and
// ~6 more instructions for 16 weights of a row, where the float product takes ~2 a weight. Sums
// of 16 products of 127 by 64 (high) or 255: no overflow; hi 256 + mid < 2^26.
struct ZrMvQ8i : ZrMvQ8_0 {
    template <int R> __device__ static void comp(const F (&f)[R], int it, const float *xs, float (&acc)[R]) {
        const uint8_t *g = (const uint8_t *)xs + ZR_XQ_SB * (it >> 4);
        const uint4 vh = *(const uint4 *)(g + 16 * (it & 15)), vm = *(const uint4 *)(g + 256 + 16 * (it & 15)),
                    vl = *(const uint4 *)(g + 512 + 16 * (it & 15));
        const float dx = *(const float *)(g + 768 + 4 * ((it & 15) >> 1));
        const uint32_t xh[4] = {vh.x, vh.y, vh.z, vh.w}, xm[4] = {vm.x, vm.y, vm.z, vm.w}, xl[4] = {vl.x, vl.y, vl.z, vl.w};
#pragma unroll
        for (int r = 0; r < R; r++) {
            const uint32_t q[4] = {f[r].q.x, f[r].q.y, f[r].q.z, f[r].q.w};
            int h = 0, m = 0, l = 0;
#pragma unroll
            for (int k = 0; k < 4; k++) {
                h = zr_dp4a_ss(q[k], xh[k], h);
                m = zr_dp4a_su(q[k], xm[k], m);
                l = zr_dp4a_su(q[k], xl[k], l);
            }
            acc[r] = fmaf(f[r].d * dx, fmaf((float)(h * 256 + m), 256.f, (float)l), acc[r]);
        }
    }
};

// q4_0 / q4_1 / q5_0 / q5_1 on integer dot products: x staged as q4_K's three int8 planes (23-bit
// integers per block of 32, ZR_XQ_Q / max|x|), each block of 32 as its low run (values 0..15)
// and high run (16..31), which are the item's low and high nibbles (XQ 3 and 4 in zr_mv_put_x4:
// block u of a super-block's 8 has its low run at 16 u of each plane, its high run at 128 + 16 u,
// its scale at 768 + 4 u; XQ 3 also the sum of its rounded values times the scale at 800 + 4 u).
// q4_0 and q5_0 (XQ 4) read their quants as signed bytes (q - 8) 16 and (q - 16) 8: the value
// moved to the byte's top bits, whose top bit is flipped (one LOP3 for q4_0's high nibbles), so
// the offset needs no sum; q4_1 and q5_1 (XQ 3) take their unsigned quants and the min against
// the staged sum. Each plane by 8 dp4a, the planes combined in integers and floats as q8_0's: 24
// dp4a and a mask or two a word for 32 weights of a row, where the float product converts and
// multiplies each weight. Sums of 32 products of 128 by 64 (high) or 255: hi 256 + mid < 2^27, no
// overflow. H200 tg128 (cu/PERF.md session 29): Llama-3-8B Q4_0 +9.1%, Q4_1 +12.8%, Q5_0 +21.3%,
// Q5_1 +22.9% (these two also from 64 registers, two blocks an SM, and the balanced gate|up).
// Lanes take consecutive items: a phase of 8 lanes reads 128 contiguous bytes of a plane, no
// bank conflict.
template <int TYPE>
struct ZrMvQ4xi : ZrMvQ4x<TYPE> {
    using B = ZrMvQ4x<TYPE>;
    using F = typename B::F;
    static constexpr bool SIGNED_Q = !B::has_m;
    // word k's quants of the low runs (HI false) or the high runs, as dp4a takes them
    template <bool HI> __device__ static uint32_t quants(const F &f, uint32_t w, int k) {
        if (!B::has_h) {
            const uint32_t q = (HI ? w : w << 4) & 0xF0F0F0F0u; // 16 q
            return SIGNED_Q ? q ^ 0x80808080u : q >> 4;
        }
        const uint32_t b4 = (f.qh >> (4 * k + (HI ? 16 : 0))) & 0xF;
        if (!SIGNED_Q) return ((HI ? w >> 4 : w) & 0x0F0F0F0Fu) | zr_expand4_bit4(b4);
        // 8 (q - 16): the nibble at bits 3..6, bit 7 the fifth bit flipped
        return ((HI ? w >> 1 : w << 3) & 0x78787878u) | ((((b4 ^ 0xF) * 0x00204081u) & 0x01010101u) << 7);
    }
    // the low runs or the high runs: R rows' quants against the three planes' run at p, added into
    // h, m, l (one half at a time: fewer live registers)
    template <int R, bool HI>
    __device__ static void half(const F (&f)[R], const uint8_t *p, int (&h)[R], int (&m)[R], int (&l)[R]) {
        const uint4 vh = *(const uint4 *)p, vm = *(const uint4 *)(p + 256), vl = *(const uint4 *)(p + 512);
        const uint32_t xh[4] = {vh.x, vh.y, vh.z, vh.w}, xm[4] = {vm.x, vm.y, vm.z, vm.w}, xl[4] = {vl.x, vl.y, vl.z, vl.w};
#pragma unroll
        for (int r = 0; r < R; r++) {
            const uint32_t w[4] = {f[r].q.x, f[r].q.y, f[r].q.z, f[r].q.w};
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const uint32_t q = quants<HI>(f[r], w[k], k);
                h[r] = SIGNED_Q ? zr_dp4a_ss(q, xh[k], h[r]) : zr_dp4a_us(q, xh[k], h[r]);
                m[r] = SIGNED_Q ? zr_dp4a_su(q, xm[k], m[r]) : zr_dp4a_uu(q, xm[k], m[r]);
                l[r] = SIGNED_Q ? zr_dp4a_su(q, xl[k], l[r]) : zr_dp4a_uu(q, xl[k], l[r]);
            }
        }
    }
    template <int R> __device__ static void comp(const F (&f)[R], int it, const float *xs, float (&acc)[R]) {
        const int u = it & 7;
        const uint8_t *g = (const uint8_t *)xs + ZR_XQ_SB * (it >> 3);
        int h[R], m[R], l[R];
#pragma unroll
        for (int r = 0; r < R; r++) h[r] = m[r] = l[r] = 0;
        half<R, false>(f, g + 16 * u, h, m, l);
        half<R, true>(f, g + 128 + 16 * u, h, m, l);
        // the quants' factor (16 or 8 for the signed ones) goes into the scale: exact
        const float dx = *(const float *)(g + 768 + 4 * u) * (!SIGNED_Q ? 1.f : B::has_h ? 0.125f : 0.0625f);
#pragma unroll
        for (int r = 0; r < R; r++) {
            const float t = fmaf((float)(h[r] * 256 + m[r]), 256.f, (float)l[r]);
            if (B::has_m) acc[r] = fmaf(f[r].d * dx, t, fmaf(f[r].m, *(const float *)(g + 800 + 4 * u), acc[r]));
            else acc[r] = fmaf(f[r].d * dx, t, acc[r]);
        }
    }
};

// q2_K on integer dot products (ZrMvXq 5): x as q8_0's integer planes in natural order (an item's
// group s of 16 values at 64 (it % 4) + 16 s of its super-block's planes, its block of 32's scale at
// 768 + 4 (2 (it % 4) + s / 2)), with the sum of each 16 rounded values times its block's scale at
// 800 + 4 (4 (it % 4) + s) for the mins (their term then meets the quants' rounding, as q4_K's).
// The 2-bit q of quant word k at group s are the unsigned bytes (w >> 2 s) & 0x03030303 (two
// instructions), against each plane by dp4a, the planes combined in integers and floats as q8_0's
// a group at a time: 5 instructions for 4 weights of a row where the float item takes 10 (the same
// 2, then PRMT and FFMA a weight). Two words of each plane at a time and the mins once an item, after the groups (the
// item's whole x at once and the mins a group at a time spilled 28-92 bytes in the tall and
// balanced kernels under their cap of 64: now 12 and 20). A group's sums: 16 products of 3 by 64
// (high) or 255: (hi 256 + mid) 256 < 2^28. H200 tg128 (cu/PERF.md session 31): Llama-3.2-3B in
// llama.cpp's Q2_K mix +5.6%. q3_K's like form (each q the signed byte 32 (q - 4), no sums) lost
// 1.5% on Llama-3-8B Q3_K_M and was deleted.
struct ZrMvQ2Ki : ZrMvQ2K {
    template <int R> __device__ static void comp(const F (&f)[R], int it, const float *xs, float (&acc)[R]) {
        const int u = it & 3;
        const uint8_t *g = (const uint8_t *)xs + ZR_XQ_SB * (it >> 2);
#pragma unroll
        for (int s = 0; s < 4; s++) {
            const uint8_t *p = g + 64 * u + 16 * s;
            int h[R], m[R], l[R];
#pragma unroll
            for (int r = 0; r < R; r++) h[r] = m[r] = l[r] = 0;
#pragma unroll
            for (int kh = 0; kh < 4; kh += 2) { // two words of each plane at a time: 6 registers of x
                const uint2 vh = *(const uint2 *)(p + 4 * kh), vm = *(const uint2 *)(p + 256 + 4 * kh),
                            vl = *(const uint2 *)(p + 512 + 4 * kh);
                const uint32_t xh[2] = {vh.x, vh.y}, xm[2] = {vm.x, vm.y}, xl[2] = {vl.x, vl.y};
#pragma unroll
                for (int r = 0; r < R; r++) {
                    const uint32_t w[4] = {f[r].q.x, f[r].q.y, f[r].q.z, f[r].q.w};
#pragma unroll
                    for (int k = 0; k < 2; k++) {
                        const uint32_t q = (w[kh + k] >> (2 * s)) & 0x03030303u;
                        h[r] = zr_dp4a_us(q, xh[k], h[r]);
                        m[r] = zr_dp4a_uu(q, xm[k], m[r]);
                        l[r] = zr_dp4a_uu(q, xl[k], l[r]);
                    }
                }
            }
            const float dx = *(const float *)(g + 768 + 8 * u + 4 * (s >> 1));
#pragma unroll
            for (int r = 0; r < R; r++) {
                const float sc = zr_byte_f(f[r].sc & 0x0F0F0F0Fu, s, ZR_MAGIC);
                acc[r] = fmaf(__low2float(f[r].dm) * dx * sc, (float)((h[r] * 256 + m[r]) * 256 + l[r]), acc[r]);
            }
        }
        const float4 sx = *(const float4 *)(g + 800 + 16 * u); // the groups' sums, for the mins
#pragma unroll
        for (int r = 0; r < R; r++) {
            const uint32_t mn = (f[r].sc >> 4) & 0x0F0F0F0Fu;
            const float t = fmaf(zr_byte_f(mn, 0, ZR_MAGIC), sx.x, zr_byte_f(mn, 1, ZR_MAGIC) * sx.y) +
                            fmaf(zr_byte_f(mn, 2, ZR_MAGIC), sx.z, zr_byte_f(mn, 3, ZR_MAGIC) * sx.w);
            acc[r] = fmaf(-__high2float(f[r].dm), t, acc[r]);
        }
    }
};

// q5_K (device layout in cu/quant.cuh): q4_K's item (16 bytes of nibbles, the same elements) and
// one word of the item's fifth bits, plus q4_K's scale word and (d, dmin): 28 B per item and
// row, 7 registers. The arithmetic is q4_K's: staged sums of x per 16 values for the mins, and
// each 5-bit q read as a float by one PRMT -- here 0.5 + q/64 (byte q << 2 under 0x3F: the
// exponent's low bit stays 0, so no constant is ORed in), the fifth bit moved to bit 6 of each
// byte by one shift and the nibble to bits 2..5 by another.
struct ZrMvQ5K {
    static constexpr int EPI = 32;
    struct Row { const uint8_t *w, *ws; uint32_t g; };  // as q4_K's
    struct F { uint4 q; uint32_t qh, sm; __half2 dm; };
    __device__ static Row row(const uint8_t *w, const uint8_t *ws, int n_in, int, int r) {
        return {w, ws, (uint32_t)r * (uint32_t)(n_in / 256)};
    }
    __device__ static void load(const Row &rw, int it, F &f) {
        const uint32_t sb = rw.g + (it >> 3);
        const uint8_t *b = rw.w + (size_t)sb * 160, *s = rw.ws + (size_t)sb * 20;
        f.q = zr_ld16(b + 16 * (it & 7));
        f.qh = __ldg((const uint32_t *)(b + 128) + (it & 7));
        f.sm = __ldg((const uint32_t *)s + ((it >> 1) & 3));
        f.dm = __ldg((const __half2 *)(s + 16));
    }
    // sum x (0.5 + q/64) = S/2 + (sum x q)/64 with S the staged sum: the offset is at most ~1x
    // the part kept (q/64 < 0.5), as q4_K's 1 + q/16. The small product's only (zr_k_comp_n);
    // the decode's products are ZrMvQ5Ki's.
    static constexpr bool FIVE = true; // zr_k_comp_n: q5_K's offset
    // word k's low and high 5-bit quants as bytes under the exponent 0x3F: q << 2 (nibble at bits
    // 2..5, fifth bit at 6; bit 7, the exponent's low bit, is 0), the float 0.5 + q/64
    __device__ static uint32_t lo_bytes(const F &f, uint32_t w4, int k) {
        return ((w4 << 2) & 0x3C3C3C3Cu) | (((f.qh >> (2 * k)) << 6) & 0x40404040u);
    }
    __device__ static uint32_t hi_bytes(const F &f, uint32_t w4, int k) {
        return ((w4 >> 2) & 0x3C3C3C3Cu) | (((f.qh >> (2 * k)) << 5) & 0x40404040u);
    }
    template <int R, int N, int T0 = 0, int T1 = N>
    __device__ static void comp_n(const F (&f)[R], int it, const float *xs, int xst, float (&acc)[N][R]) {
        zr_k_comp_n<ZrMvQ5K, R, N, T0, T1>(f, it, xs, xst, acc);
    }
};

// q5_K on integer dot products (ZrMvXq 1): x as q4_K's integer planes in q4_K's item order (a
// q5_K item holds q4_K's elements), each 5-bit q as an unsigned byte (the nibble masked, the fifth
// bit moved to bit 4) against each plane, the scales, mins and staged sums by ZrMvQ4Ki::planes as
// q4_K's. Sums of 16 products of 31 by 64 (high) or 255: hi 256 + mid < 2^24. The decode's dense and
// expert products (the prefill's small product keeps ZrMvQ5K's floats). H200 tg128, Q5_K_M files
// (cu/PERF.md session 29): Llama-3-8B +8.0%, Llama-3.2-3B +8.9%, Llama-3.2-1B +2.9%, Gemma-3-4B +6.5%;
// the experts' (session 30) Qwen3-30B-A3B +3.7%.
struct ZrMvQ5Ki : ZrMvQ5K {
    template <int R> __device__ static void comp(const F (&f)[R], int it, const float *xs, float (&acc)[R]) {
        uint32_t lo[R][4], hi[R][4];
#pragma unroll
        for (int r = 0; r < R; r++) {
            const uint32_t w[4] = {f[r].q.x, f[r].q.y, f[r].q.z, f[r].q.w};
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const uint32_t hk = f[r].qh >> (2 * k); // byte i: bit 0 the low nibble's fifth bit, bit 1 the high's
                lo[r][k] = (w[k] & 0x0F0F0F0Fu) | ((hk << 4) & 0x10101010u);
                hi[r][k] = ((w[k] >> 4) & 0x0F0F0F0Fu) | ((hk << 3) & 0x10101010u);
            }
        }
        ZrMvQ4Ki::planes<R>(f, it, xs, lo, hi, 1.f, acc);
    }
};

// q6_K (regrouped layout in cu/quant.cuh): item = 32 elements 32 it.. of the row: 16 bytes of
// nibbles (low: elements +0..15, high: +16..31) and 8 bytes of their high bits, plus the two
// int8 scales of the item (one u16) and d: 26 B per item and row, 8 registers.
struct ZrMvQ6K {
    static constexpr int EPI = 32;
    struct Row { const uint8_t *w, *ws; uint32_t g; };  // as q4_K's
    struct F { uint4 q; uint2 h; uint32_t sc; __half d; };
    __device__ static Row row(const uint8_t *w, const uint8_t *ws, int n_in, int, int r) {
        return {w, ws, (uint32_t)r * (uint32_t)(n_in / 256)};
    }
    __device__ static void load(const Row &rw, int it, F &f) {
        const uint32_t sb = rw.g + (it >> 3);
        const uint8_t *b = rw.w + (size_t)sb * 192, *s = rw.ws + (size_t)sb * 18;
        f.q = zr_ld16(b + 16 * (it & 7));
        f.h = __ldg((const uint2 *)(b + 128 + 8 * (it & 7)));
        f.sc = __ldg((const uint16_t *)s + (it & 7));
        f.d = __ldg((const __half *)(s + 16));
    }
    template <int R> __device__ static void comp(const F (&f)[R], int it, const float *xs, float (&acc)[R]) {
        const float *xp = xs + zr_xpad(32 * it);  // 32 values after a padded start: no pad inside
        float slo[R], shi[R];
#pragma unroll
        for (int r = 0; r < R; r++) slo[r] = shi[r] = 0.f;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const float4 a = *(const float4 *)(xp + 4 * k), b = *(const float4 *)(xp + 16 + 4 * k);
            const float va[4] = {a.x, a.y, a.z, a.w}, vb[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
            for (int r = 0; r < R; r++) {
                const uint32_t w4 = k == 0 ? f[r].q.x : k == 1 ? f[r].q.y : k == 2 ? f[r].q.z : f[r].q.w;
                const uint32_t lo = (w4 & 0x0F0F0F0Fu) | (((f[r].h.x >> (2 * k)) & 0x03030303u) << 4);
                const uint32_t hi = ((w4 >> 4) & 0x0F0F0F0Fu) | (((f[r].h.y >> (2 * k)) & 0x03030303u) << 4);
                float tl = slo[r], th = shi[r];
#pragma unroll
                for (int i = 0; i < 4; i++) tl = fmaf(va[i], zr_byte_f(lo, i, ZR_MAGIC + 32.f), tl);
#pragma unroll
                for (int i = 0; i < 4; i++) th = fmaf(vb[i], zr_byte_f(hi, i, ZR_MAGIC + 32.f), th);
                slo[r] = tl;
                shi[r] = th;
            }
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
            const float sc0 = (float)(int8_t)(f[r].sc & 0xFF), sc1 = (float)(int8_t)(f[r].sc >> 8);
            acc[r] = fmaf(__half2float(f[r].d), fmaf(sc0, slo[r], sc1 * shi[r]), acc[r]);
        }
    }
    // comp<R> for N rows of x (row t at xs + t * xst), each word decoded once for all N (low
    // nibbles, then high: independent chains); comp's order per row
    template <int R, int N, int T0 = 0, int T1 = N>
    __device__ static void comp_n(const F (&f)[R], int it, const float *xs, int xst, float (&acc)[N][R]) {
        const int x0 = zr_xpad(32 * it);
        float slo[N][R], shi[N][R];
        zr_mm_zero2<R, N, T0, T1>(slo, shi);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            float wv[R][4];
#pragma unroll
            for (int r = 0; r < R; r++) {
                const uint32_t w4 = k == 0 ? f[r].q.x : k == 1 ? f[r].q.y : k == 2 ? f[r].q.z : f[r].q.w;
                const uint32_t lo = (w4 & 0x0F0F0F0Fu) | (((f[r].h.x >> (2 * k)) & 0x03030303u) << 4);
#pragma unroll
                for (int i = 0; i < 4; i++) wv[r][i] = zr_byte_f(lo, i, ZR_MAGIC + 32.f);
            }
            zr_mm_fma4<R, N, T0, T1>(xs + x0 + 4 * k, xst, wv, slo);
#pragma unroll
            for (int r = 0; r < R; r++) {
                const uint32_t w4 = k == 0 ? f[r].q.x : k == 1 ? f[r].q.y : k == 2 ? f[r].q.z : f[r].q.w;
                const uint32_t hi = ((w4 >> 4) & 0x0F0F0F0Fu) | (((f[r].h.y >> (2 * k)) & 0x03030303u) << 4);
#pragma unroll
                for (int i = 0; i < 4; i++) wv[r][i] = zr_byte_f(hi, i, ZR_MAGIC + 32.f);
            }
            zr_mm_fma4<R, N, T0, T1>(xs + x0 + 16 + 4 * k, xst, wv, shi);
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
            const float d = __half2float(f[r].d);
            const float sc0 = (float)(int8_t)(f[r].sc & 0xFF), sc1 = (float)(int8_t)(f[r].sc >> 8);
#pragma unroll
            for (int t = T0; t < T1; t++) acc[t][r] = fmaf(d, fmaf(sc0, slo[t][r], sc1 * shi[t][r]), acc[t][r]);
        }
    }
};

// How x reaches the product (mode & ZR_MV_IN): as is, RMS-normalized with a weight (the
// block's input norm fused into the projections that follow it), or as SwiGLU of its two halves
// (x has 2*n_in values: gate then up). ZR_MV_GLU: the output instead of the input is gated:
// W stacks [gate; up] (n_out = 2 n_half rows) and y[i] = silu(gate_i . x) * (up_i . x) for
// i < n_half, so the FFN's gate/up product hands the down projection its input directly.
// ZR_MV_GELU: both gates (SWIGLU's and GLU's) are GELU-tanh instead of SiLU (gemma's GeGLU).
// ZR_MV_ADDNORM: gemma's norm after a block folded into the product that follows it: the
// residual is x' = x + RMSNorm(post_r) * post_w (the block's output post_r), staged as
// RMSNorm(x') * norm_w; block 0 also writes x' to x_out (when not null), which must not be x:
// every block reads x. Both norms use eps. post_r's sum of squares is not taken here: the
// product that wrote post_r left it in pieces after it (ZR_MV_SSQ), post_r[n_in + k] for k <
// mode >> ZR_MV_NSS_SHIFT, and every warp adds those in one order (zr_mv_post_inv).
// ZR_MV_SSQ: the product also writes the sum of the squares of its results, one per block, to
// y[n_res + blockIdx.x] (n_res: its results; a warp's rows added in a warp sum, then the warps
// in warp order): the pieces ADDNORM reads, so no block of the next product takes that sum
// over the whole row again. Not in the tall kernels (a sum carried over the tiles made ptxas
// spill 4-44 more bytes in them; no block output before a post norm is that tall).
#define ZR_MV_PLAIN 0
#define ZR_MV_RMSNORM 1
#define ZR_MV_SWIGLU 2
#define ZR_MV_ADDNORM 3
#define ZR_MV_IN 3
#define ZR_MV_GLU 4
#define ZR_MV_GELU 8
#define ZR_MV_SSQ 16
#define ZR_MV_NSS_SHIFT 8

// float4s of x each thread stages per round: all of a round's loads are issued before any is
// used, so staging costs a few L2 round trips, not one per float4.
#define ZR_MV_STAGE 2

// Types whose comp reads the staged sums of each 16 x values (zr_mv_stage_x<true>); the others
// stage x alone, at no cost.
template <class T> struct ZrMvXsum {
    static constexpr bool value = false;
};
template <> struct ZrMvXsum<ZrMvQ4K> {
    static constexpr bool value = true;
};
template <> struct ZrMvXsum<ZrMvQ5K> {
    static constexpr bool value = true;
};
template <> struct ZrMvXsum<ZrMvQ3K> {
    static constexpr bool value = true;
};
template <> struct ZrMvXsum<ZrMvQ2K> {
    static constexpr bool value = true;
};

// Types whose comp_n reads x staged in item order (q4_K, q5_K: an item's values are two runs of
// 16, 32 apart): the small product stages each item's 32 values contiguously, the low run then
// the high, with their two 16-value sums in the pad after them (zr_mm_item_order4). In the
// decode's order a warp's items sit 16 and 56 floats apart, so two lanes of every 8 read the same
// banks (each float4 read took two passes) and the sums' loads four; in item order every item
// is 36 floats after the last, as q4_0's and q6_K's are: one pass.
template <class T> struct ZrMvItemOrder {
    static constexpr bool value = false;
};
template <> struct ZrMvItemOrder<ZrMvQ4K> {
    static constexpr bool value = true;
};
template <> struct ZrMvItemOrder<ZrMvQ5K> {
    static constexpr bool value = true;
};

// Item order within a super-block, in float4s: staged float4 k holds float4 src of the row with
// bits 2 and 3 swapped (k: 4 float4s of a run, low|high, half hf, chunk j of 64 values; the row:
// 4 float4s, half hf, low|high, j). Its own inverse; needs runs at 16-value multiples from a
// super-block start (chunks start at multiples of ZR_MM_UNIT).
__device__ __forceinline__ int zr_mm_item_order4(int k) { return (k & ~12) | ((k & 4) << 1) | ((k & 8) >> 1); }

// Types with comp_n<R, N> (N rows of x per decoded item: the small product, cu/matmul_small.cu);
// the others call comp<R> once per row. comp_n<R, N, T0, T1> adds rows T0..T1-1 of x only (the
// small product may decode an item twice, for rows 0..3 and 4..N-1, to halve the live sums).
template <class T> struct ZrMvCompN {
    static constexpr bool value = false;
};
template <> struct ZrMvCompN<ZrMvQ8_0> {
    static constexpr bool value = true;
};
template <int TYPE> struct ZrMvCompN<ZrMvQ4x<TYPE>> {
    static constexpr bool value = true;
};
template <> struct ZrMvCompN<ZrMvQ4K> {
    static constexpr bool value = true;
};
template <> struct ZrMvCompN<ZrMvQ5K> {
    static constexpr bool value = true;
};
template <> struct ZrMvCompN<ZrMvQ6K> {
    static constexpr bool value = true;
};

__device__ __forceinline__ float zr_silu(float v) { return v / (1.0f + expf(-v)); }

// Input modes whose staged x is RMS-normalized (its 1/rms applied to the results).
__device__ __forceinline__ bool zr_mv_normed(int in_mode) { return in_mode == ZR_MV_RMSNORM || in_mode == ZR_MV_ADDNORM; }

// The gate of a GLU: SiLU, or GELU-tanh with ZR_MV_GELU (gelu true).
__device__ __forceinline__ float zr_mv_gate(float v, bool gelu) { return gelu ? zr_gelu_tanh(v) : zr_silu(v); }

// ADDNORM's 1/rms of post_r [n_in] from the n_ss sums of squares its producer wrote after it
// (ZR_MV_SSQ): each lane adds every 32nd piece in index order, then a butterfly, so every warp of
// every block gets the same bits with no barrier. Gemma-3-4B's producers write 160 pieces (5 a
// lane), 12B's 240. BATCH: the loads of 8 pieces a lane go out together (one L2 round trip up to
// 256 pieces); the tall kernels stage once for dozens of tiles and take them one at a time (the
// batch made ptxas spill in matvec_q6_k_tall, every Q4_K_M vocabulary output). The sums are the
// same either way.
template <bool BATCH>
__device__ __forceinline__ float zr_mv_post_inv(const float *__restrict__ post_r, int n_in, int n_ss, float eps) {
    const float *ssq = post_r + n_in;
    const int lane = threadIdx.x & 31;
    float s = 0.f;
    if (BATCH) {
        constexpr int U = 8;
        for (int k0 = 0; k0 < n_ss; k0 += 32 * U) {
            float v[U];
#pragma unroll
            for (int j = 0; j < U; j++) v[j] = __ldg(ssq + min(k0 + 32 * j + lane, n_ss - 1)); // no branch per load
#pragma unroll
            for (int j = 0; j < U; j++) s += k0 + 32 * j + lane < n_ss ? v[j] : 0.f;
        }
    } else {
        for (int k = lane; k < n_ss; k += 32) s += __ldg(ssq + k);
    }
    s = zr_warp_sum(s);
    return 1.0f / sqrtf(s / (float)n_in + eps);
}

// RMSNorm's 1/rms from the block's per-warp sums of squares (warps in index order)
__device__ __forceinline__ float zr_mv_inv_rms(const float *red_ss, int n_warps, int n_in, float eps) {
    float tot = 0.f;
    for (int k = 0; k < n_warps; k++) tot += red_ss[k];
    return 1.0f / sqrtf(tot / (float)n_in + eps);
}

// ADDNORM's float4 i: x' = x + r * pinv * pw into x_out (when not null) and ss, x' * u returned.
__device__ __forceinline__ float4 zr_mv_addnorm4(float4 t, float4 r, float4 pw, float4 u, float pinv, float *x_out, int i,
                                                 float &ss) {
    t.x += r.x * pinv * pw.x; t.y += r.y * pinv * pw.y;
    t.z += r.z * pinv * pw.z; t.w += r.w * pinv * pw.w;
    if (x_out) *((float4 *)x_out + i) = t;
    ss = fmaf(t.x, t.x, fmaf(t.y, t.y, fmaf(t.z, t.z, fmaf(t.w, t.w, ss))));
    t.x *= u.x; t.y *= u.y; t.z *= u.z; t.w *= u.w;
    return t;
}

// Types whose one-tile products request add (the residual) right after the grid wait, into a
// register held over the item loop, instead of at the store: a round trip less at the block's end
// (H200 tg128: Llama-3.2-1B Q4_K_M +1.0%, Q8_0 +1.7%, Llama-3.2-3B +0.8%, Qwen3-4B +0.95%). The
// others spilled with that register at their 64 (Q5_K 16 bytes, Q3_K 4, Q2_K 8, Q4_0 12, Q4_1,
// Q5_0 and Q5_1 more than before; Llama-3.2-3B Q5_K_M -1.3%, Q3_K_M -0.9%: cu/PERF.md session 42).
template <class T> struct ZrMvAddFirst : std::false_type {};
template <> struct ZrMvAddFirst<ZrMvQ4Ki> : std::true_type {};
template <> struct ZrMvAddFirst<ZrMvQ6K> : std::true_type {};
template <> struct ZrMvAddFirst<ZrMvQ8i> : std::true_type {};
template <> struct ZrMvAddFirst<ZrMvF32> : std::true_type {};
template <> struct ZrMvAddFirst<ZrMvF16> : std::true_type {};
template <> struct ZrMvAddFirst<ZrMvBF16> : std::true_type {};

// Types whose comp reads x as integers (ZrMvQ4Ki's and ZrMvQ5Ki's planes in q4_K's item order: 1;
// ZrMvQ8i's in natural order: 2; ZrMvQ4xi's in blocks of 32, with sums: 3, without: 4; ZrMvQ2Ki's
// in natural order with the sums of runs of 16: 5) instead of the floats (0).
template <class T> struct ZrMvXq {
    static constexpr int value = 0;
};
template <> struct ZrMvXq<ZrMvQ4Ki> {
    static constexpr int value = 1;
};
template <> struct ZrMvXq<ZrMvQ5Ki> {
    static constexpr int value = 1;
};
template <> struct ZrMvXq<ZrMvQ8i> {
    static constexpr int value = 2;
};
template <int TYPE> struct ZrMvXq<ZrMvQ4xi<TYPE>> {
    static constexpr int value = ZrMvQ4xi<TYPE>::SIGNED_Q ? 4 : 3;
};
template <> struct ZrMvXq<ZrMvQ2Ki> {
    static constexpr int value = 5;
};

// float4 i of the staged x' into the padded copy xs; XS: and the sums of its 16 values (below).
// XQ: into the integer planes instead (ZrMvQ4Ki): the 8 threads of a block of 32 (float4s
// 8b..8b+7, adjacent lanes: whole warps stage, n_in % 128 == 0) share its max by 3 shuffles, the 4
// of a run of 16 its sum by 2.
// XQ 2 (ZrMvQ8i): the same planes and block scales in natural order (float4 i at 4 (i % 64) of
// super-block i / 64's planes), no sums; the 8 threads of a block of 32 shuffle among themselves
// only (q8_0 rows are multiples of 32 values, not of 128: a warp's last threads may be past the
// row, each block's 8 threads all within it or all past it).
// XQ 3 and 4 (ZrMvQ4xi): XQ 2's, each block of 32 as its low and high runs; XQ 3 also the sum of
// its rounded values times its scale (3 more shuffles among the same 8 threads).
// XQ 5 (ZrMvQ2Ki): XQ 2's, and the sum of each run of 16 rounded values times its block's scale at
// 800 + 4 (i % 64 / 4) (2 more shuffles among the same 8 threads).
template <bool XS, int XQ = 0>
__device__ __forceinline__ void zr_mv_put_x4(float *xs, int i, float4 t) {
    if (XQ >= 2) {
        const unsigned gm = 0xffu << (threadIdx.x & 24);
        float m = fmaxf(fmaxf(fabsf(t.x), fabsf(t.y)), fmaxf(fabsf(t.z), fabsf(t.w)));
        m = fmaxf(m, __shfl_xor_sync(gm, m, 1));
        m = fmaxf(m, __shfl_xor_sync(gm, m, 2));
        m = fmaxf(m, __shfl_xor_sync(gm, m, 4));
        const float id = m != 0.f ? ZR_XQ_Q * __frcp_rn(m) : 0.f, d = m * (1.f / ZR_XQ_Q);
        const int q0 = __float2int_rn(t.x * id), q1 = __float2int_rn(t.y * id), q2 = __float2int_rn(t.z * id),
                  q3 = __float2int_rn(t.w * id);
        uint8_t *g = (uint8_t *)xs + ZR_XQ_SB * (i >> 6);
        // XQ 3, 4: block u = i % 64 / 8's low run (i % 8 < 4) at 16 u, its high run at 128 + 16 u
        const int at = XQ == 2 || XQ == 5 ? (i & 63) << 2 : ((i & 4) << 5) | ((i & 0x38) << 1) | ((i & 3) << 2);
        const uint32_t a = __byte_perm(q0, q1, 0x5140), c = __byte_perm(q2, q3, 0x5140);
        const uint32_t e = __byte_perm(q0, q1, 0x0062), f = __byte_perm(q2, q3, 0x0062);
        *(uint32_t *)(g + at) = __byte_perm(e, f, 0x5410);
        *(uint32_t *)(g + 256 + at) = __byte_perm(a, c, 0x7632);
        *(uint32_t *)(g + 512 + at) = __byte_perm(a, c, 0x5410);
        if (XQ == 3) { // |sum of 32| < 2^27
            int sq = (q0 + q1) + (q2 + q3);
            sq += __shfl_xor_sync(gm, sq, 1);
            sq += __shfl_xor_sync(gm, sq, 2);
            sq += __shfl_xor_sync(gm, sq, 4);
            if ((i & 7) == 0) *(float *)(g + 800 + ((i >> 1) & 0x1c)) = (float)sq * d;
        }
        if (XQ == 5) { // each run of 16's: |sum| < 2^26
            int sq = (q0 + q1) + (q2 + q3);
            sq += __shfl_xor_sync(gm, sq, 1);
            sq += __shfl_xor_sync(gm, sq, 2);
            if ((i & 3) == 0) *(float *)(g + 800 + (i & 0x3c)) = (float)sq * d;
        }
        if ((i & 7) == 0) *(float *)(g + 768 + ((i >> 1) & 0x1c)) = d;
        return;
    }
    if (XQ == 1) {
        float m = fmaxf(fmaxf(fabsf(t.x), fabsf(t.y)), fmaxf(fabsf(t.z), fabsf(t.w)));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 4));
        // |q| <= Q + 1 < 2^22 (id within an ulp of Q / m): hi = q >> 16 fits a signed byte
        const float id = m != 0.f ? ZR_XQ_Q * __frcp_rn(m) : 0.f, d = m * (1.f / ZR_XQ_Q);
        const int q0 = __float2int_rn(t.x * id), q1 = __float2int_rn(t.y * id), q2 = __float2int_rn(t.z * id),
                  q3 = __float2int_rn(t.w * id);
        int sq = (q0 + q1) + (q2 + q3); // |sum of 16| < 2^26
        sq += __shfl_xor_sync(0xffffffffu, sq, 1);
        sq += __shfl_xor_sync(0xffffffffu, sq, 2);
        // run rho = i / 4 of 16 values: super-block rho / 16, within it r = rho % 16 (i's bits
        // 2..5), j = r / 4 (chunk of 64), high = r / 2 % 2, hf = r % 2, item u = 2 j + hf; the
        // run's words at 128 high + 16 u + 4 (i % 4), its sum at 800 + 8 u + 4 high, the block's
        // scale at 768 + 4 (r / 2): each offset by masks and shifts of i's bits
        uint8_t *g = (uint8_t *)xs + ZR_XQ_SB * (i >> 6);
        const int at = ((i & 7) << 2) | ((i & 0x30) << 1) | ((i & 8) << 4);
        // plane b's word: byte b of q0..q3 (two's complement: byte 2 is q >> 16), by 7 byte
        // permutes (a: q0's and q1's bytes 0 and 1 interleaved, c: q2's and q3's; e, f: byte 2)
        const uint32_t a = __byte_perm(q0, q1, 0x5140), c = __byte_perm(q2, q3, 0x5140);
        const uint32_t e = __byte_perm(q0, q1, 0x0062), f = __byte_perm(q2, q3, 0x0062);
        *(uint32_t *)(g + at) = __byte_perm(e, f, 0x5410);
        *(uint32_t *)(g + 256 + at) = __byte_perm(a, c, 0x7632);
        *(uint32_t *)(g + 512 + at) = __byte_perm(a, c, 0x5410);
        if ((i & 3) == 0) *(float *)(g + 800 + (i & 0x30) + ((i & 4) << 1) + ((i & 8) >> 1)) = (float)sq * d;
        if ((i & 7) == 0) *(float *)(g + 768 + ((i >> 1) & 0x1c)) = d;
        return;
    }
    *(float4 *)(xs + zr_xpad(4 * i)) = t;
    if (XS) {
        float s = (t.x + t.y) + (t.z + t.w);
        s += __shfl_xor_sync(0xffffffffu, s, 1);
        s += __shfl_xor_sync(0xffffffffu, s, 2);
        if ((i & 3) == 0) xs[36 * (i >> 3) + 32 + ((i >> 2) & 1)] = s;
    }
}

// Stages x' (mode & ZR_MV_IN: x, x * norm_w, or SwiGLU of x's two halves) into the padded
// shared copy xs (4 floats after every 32) with threads tid of nthr; returns this thread's part
// of sum(x^2) for RMSNorm (its 1/rms is applied to the results: one number for the whole row).
// Every load of a round is issued before any is used, so staging costs a few L2 round trips.
// XS (ZrMvXsum<T>, the K-quants with mins): also the sum of each 16 staged values, written into
// the pad after their 32 (pad slot 0: values 0..15, slot 1: 16..31); 4 adjacent threads hold
// the 16 values (float4 i goes to thread i mod nthr), so 2 shuffles per float4. Needs
// n_in % 128 == 0, so every shuffle runs with the whole warp (K-quant rows are 256-multiples).
// ADDNORM: post_r's 1/rms from its producer's n_ss pieces (zr_mv_post_inv), then x' in one pass
// of its own (one barrier after it, as RMSNORM's): a float4 of x, norm_w, post_r and post_w a
// round (as many registers as the two float4s of x and norm_w of the other modes' rounds; two
// more float4s of post_r and post_w a round made ptxas spill 4-80 bytes in 18 matvec kernels).
// The tall kernels (staging once for dozens of tiles) keep the rounds of the other modes with
// post_r and post_w loaded in their compute half (the pass of their own spilled them).
template <bool XS = false, bool TALL = false, int XQ = 0>
__device__ __forceinline__ float zr_mv_stage_x(const float *__restrict__ x, const float *__restrict__ norm_w, float *xs,
                                               int n_in, int in_mode, int tid, int nthr, bool gelu = false,
                                               const float *__restrict__ post_r = nullptr,
                                               const float *__restrict__ post_w = nullptr, float *x_out = nullptr,
                                               float eps = 0.f, int n_ss = 0) {
    float ss = 0.f, pinv = 0.f;
    if (in_mode == ZR_MV_ADDNORM) {
        pinv = zr_mv_post_inv<!TALL>(post_r, n_in, n_ss, eps);
        if (blockIdx.x != 0) x_out = nullptr;
    }
    if ((n_in & 3) == 0 && in_mode == ZR_MV_ADDNORM && !TALL) {
        // a float4 of each of the four vectors a round, the four loads issued before any is
        // used: one L2 round trip a round (in the loop below, with post_r's and post_w's loads
        // in the compute half, a round of two float4s took up to three: 2560-wide rows on 256
        // threads, 5 against 3 here)
        const int n4 = n_in >> 2;
#pragma unroll 1
        for (int i = tid; i < n4; i += nthr) {
            const float4 xv = __ldg((const float4 *)x + i), u = __ldg((const float4 *)norm_w + i);
            const float4 r = __ldg((const float4 *)post_r + i), pw = __ldg((const float4 *)post_w + i);
            zr_mv_put_x4<XS, XQ>(xs, i, zr_mv_addnorm4(xv, r, pw, u, pinv, x_out, i, ss));
        }
    } else if ((n_in & 3) == 0) {
        const int n4 = n_in >> 2;
        const float4 *x4 = (const float4 *)x;
        const float4 *o4 = in_mode == ZR_MV_SWIGLU ? x4 + n4 : (const float4 *)norm_w;
        for (int i0 = tid; i0 < n4; i0 += ZR_MV_STAGE * nthr) {
            float4 v[ZR_MV_STAGE], u[ZR_MV_STAGE];
#pragma unroll
            for (int b = 0; b < ZR_MV_STAGE; b++) {
                const int i = i0 + b * nthr;
                if (i < n4) {
                    v[b] = __ldg(x4 + i);
                    if (in_mode != ZR_MV_PLAIN) u[b] = __ldg(o4 + i);
                }
            }
#pragma unroll
            for (int b = 0; b < ZR_MV_STAGE; b++) {
                const int i = i0 + b * nthr;
                if (i < n4) {
                    float4 t = v[b];
                    if (in_mode == ZR_MV_SWIGLU) {
                        t.x = zr_mv_gate(t.x, gelu) * u[b].x; t.y = zr_mv_gate(t.y, gelu) * u[b].y;
                        t.z = zr_mv_gate(t.z, gelu) * u[b].z; t.w = zr_mv_gate(t.w, gelu) * u[b].w;
                    } else if (in_mode == ZR_MV_ADDNORM) { // the tall kernels (once a block)
                        const float4 r = __ldg((const float4 *)post_r + i), pw = __ldg((const float4 *)post_w + i);
                        t = zr_mv_addnorm4(t, r, pw, u[b], pinv, x_out, i, ss);
                    } else if (in_mode == ZR_MV_RMSNORM) {
                        ss = fmaf(t.x, t.x, fmaf(t.y, t.y, fmaf(t.z, t.z, fmaf(t.w, t.w, ss))));
                        t.x *= u[b].x; t.y *= u[b].y; t.z *= u[b].z; t.w *= u[b].w;
                    }
                    zr_mv_put_x4<XS, XQ>(xs, i, t);
                }
            }
        }
    } else {
        for (int i = tid; i < n_in; i += nthr) {
            float v = x[i];
            if (in_mode == ZR_MV_SWIGLU) v = zr_mv_gate(v, gelu) * x[n_in + i];
            else if (in_mode == ZR_MV_ADDNORM) {
                v += post_r[i] * pinv * post_w[i];
                if (x_out) x_out[i] = v;
                ss = fmaf(v, v, ss);
                v *= norm_w[i];
            } else if (in_mode == ZR_MV_RMSNORM) {
                ss = fmaf(v, v, ss);
                v *= norm_w[i];
            }
            xs[zr_xpad(i)] = v;
        }
    }
    return ss;
}

// Block = G row groups x S warps (split-K): warp (g, k) computes R rows of row group
// t*G + g of each tile t it takes over the items k*32 + lane + j*32*S; the S partial sums of a
// row are added in k order through shared memory (deterministic). With GLU a row group is R/2
// gate rows and the R/2 up rows of the same outputs. blockDim.x = 32*G*S (the host picks G and
// S per matrix). The block computes tile blockIdx.x (G row groups); with TALL (matvec_<type>_tall,
// for very tall matrices: src/cuda/mv_shape.c) the grid may have fewer blocks than tiles and
// block b takes tiles b, b + gridDim.x, ..., staging x once for all of them (each warp requests
// the next tile's first items right after it wrote the current one's results: issued before
// the sums, they made ptxas spill matvec_q6_k_tall under its 64-register cap). A row's
// arithmetic does not depend on the grid or on TALL. tile0 >= 0: the block's tile is tile0, not
// blockIdx.x (cu/matvec_mix.cu packs its parts' tiles in one grid; no TALL, no SSQ there).
// POST false (the expert products, cu/moe_matvec.cu): no ADDNORM and no SSQ compiled in (their
// code cost matvec_id_q4_1 a spill under its register cap). ADD_EARLY false: add at the store
// even in the types of ZrMvAddFirst (a mix kernel whose other part's type is not one of them).
// IN >= 0: x is read that way whatever mode says (a kernel built for one input: _tall_rn below).
template <class T, int R, int P, bool TALL = false, bool POST = true, bool ADD_EARLY = true, int IN = -1>
__device__ __forceinline__ void zr_matvec(const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws,
                                          const float *__restrict__ x, float *y, const float *add,
                                          const float *__restrict__ norm_w, float eps, int n_in, int n_out, int mode,
                                          int split, const float *__restrict__ post_r, const float *__restrict__ post_w,
                                          float *x_out, int tile0 = -1) {
    static_assert(R % 2 == 0, "GLU pairs R/2 gate rows with R/2 up rows");
    extern __shared__ float4 zr_mv_smem[];
    __shared__ float red_ss[ZR_MV_MAX_THREADS / 32];     // per-warp sums of squares (RMSNorm)
    __shared__ float red_part[ZR_MV_MAX_THREADS / 32][R]; // per-warp row partials (split-K)
    __shared__ float red_sq[ZR_MV_MAX_THREADS / 32];      // per-warp sums of squared results (SSQ)
    __shared__ float red_inv[ZR_MV_MAX_THREADS / 32];    // TALL, RMSNorm: each warp's 1/rms (once a warp)
    float *xs = (float *)zr_mv_smem;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nthr = blockDim.x;
    // S is a power of two, and G too with TALL (the launchers check): shifts, not the ~25
    // instructions of an emulated division each (the tall kernels ran four before a warp's first
    // load); a one-tile block finds its tile's first row group by a multiply, so any G
    const int S = split, lS = __ffs(S) - 1, G = (nthr >> 5) >> lS, lG = __ffs(G) - 1;
    const int g = warp >> lS, ks = warp & (S - 1);
    const int in_mode = IN >= 0 ? IN : !POST && (mode & ZR_MV_IN) == ZR_MV_ADDNORM ? ZR_MV_PLAIN : mode & ZR_MV_IN;
    const bool glu = (mode & ZR_MV_GLU) != 0, gelu = (mode & ZR_MV_GELU) != 0;
    const bool ssq = POST && !TALL && (mode & ZR_MV_SSQ) != 0;
    constexpr int H = R / 2;
    static_assert((R & (R - 1)) == 0, "R is a power of two (results per row group by shifts)");
    constexpr int lR = zr_log2(R), lH = lR - 1;
    // output rows: plain rows rg*R + r; GLU: gate rows rg*H + r and up rows n_half + rg*H + r
    const int n_res = glu ? n_out >> 1 : n_out;   // results
    const int per = glu ? H : R, lper = glu ? lH : lR; // results per row group
    const int n_tiles = (((n_res + per - 1) >> lper) + G - 1) >> lG;
    const int items = n_in / T::EPI;
    const int step = 32 * S;
    static_assert(P >= 2, "at least one step in flight while one is computed");
    typename T::Row rw[R];
    // P-stage register pipeline: buf[q] holds the items of step j+q; the first P-1 steps of a
    // tile are requested before anything waits on them (the first tile's before x is staged, so
    // the two latencies overlap)
    typename T::F buf[P][R];
    const int it0 = ks * 32 + lane;
    int res0 = 0;      // first result of this warp in the tile
    bool live = false; // the warp has rows in the tile
    auto begin_tile = [&](int tile) {
        res0 = ((TALL ? tile << lG : tile * G) + g) << lper;
        live = res0 < n_res;
#pragma unroll
        for (int r = 0; r < R; r++) {
            int row;
            if (glu) row = min(res0 + (r % H), n_res - 1) + (r < H ? 0 : n_res);
            else row = min(res0 + r, n_out - 1);
            rw[r] = T::row(w, ws, n_in, n_out, row);
        }
#pragma unroll
        for (int q = 0; q < P - 1; q++) {
            const int itq = it0 + q * step;
            if (live && itq < items) {
#pragma unroll
                for (int r = 0; r < R; r++) T::load(rw[r], itq, buf[q][r]);
            }
        }
    };
    const int b0 = tile0 >= 0 ? tile0 : (int)blockIdx.x; // the block's (first) tile
    begin_tile(b0);
    // everything above reads weights only; activations, add and y belong to earlier kernels
    zr_grid_enter_after_loads(w);
    // a one-tile block of the types of ZrMvAddFirst: this lane's value of add, requested beside
    // x's loads (at the store it was a round trip of its own after the sums)
    constexpr bool ADD_FIRST = ADD_EARLY && !TALL && ZrMvAddFirst<T>::value;
    float add_v = 0.f;
    if (ADD_FIRST && add && !glu && ks == 0 && live && lane < R && res0 + lane < n_out) add_v = add[res0 + lane];
    // stage x (padded: 4 floats after every 32) -- gated or times the norm weight on the way in;
    // RMSNorm's 1/rms is applied to the results (it is one number for the whole row)
    float ss = zr_mv_stage_x<ZrMvXsum<T>::value, TALL, ZrMvXq<T>::value>(
        x, norm_w, xs, n_in, in_mode, tid, nthr, gelu, post_r, post_w, x_out, eps, mode >> ZR_MV_NSS_SHIFT);
    float wsq = 0.f; // SSQ: the sum of this warp's squared results
    if (zr_mv_normed(in_mode)) {
        ss = zr_warp_sum(ss);
        if (lane == 0) red_ss[warp] = ss;
    }
    __syncthreads();
    if (TALL && zr_mv_normed(in_mode)) {
        // 1/rms once a warp, kept in shared memory (a register across the tile loop made ptxas
        // spill under the 64-register cap); the same sum in the same order as a one-tile block's
        const float inv = zr_mv_inv_rms(red_ss, nthr >> 5, n_in, eps);
        if (lane == 0) red_inv[warp] = inv;
        __syncwarp();
    }
    ZR_TL_MARK(0); // x staged
    for (int tile = b0; !TALL || tile < n_tiles; tile += gridDim.x) {
        float acc[R];
#pragma unroll
        for (int r = 0; r < R; r++) acc[r] = 0.f;
        if (live) {
            // unrolled by P so every buffer index is a compile-time constant (registers, not
            // local memory): at step j+q compute buf[q], after requesting step j+q+P-1 into the
            // buffer step j+q-1 freed
            for (int j = 0; it0 + j * step < items; j += P) {
#pragma unroll
                for (int q = 0; q < P; q++) {
                    const int itq = it0 + (j + q) * step;
                    if (itq < items) {
                        const int itn = itq + (P - 1) * step;
                        if (itn < items) {
#pragma unroll
                            for (int r = 0; r < R; r++) T::load(rw[r], itn, buf[(q + P - 1) % P][r]);
                        }
                        T::template comp<R>(buf[q], itq, xs, acc);
                    }
                }
            }
            if constexpr (T::EPI <= 8) {  // float types: rows whose length is not a multiple of the item
                const int e = items * T::EPI + lane;
                if (ks == 0 && e < n_in) {
                    const float xv = xs[zr_xpad(e)];
#pragma unroll
                    for (int r = 0; r < R; r++) acc[r] = fmaf(T::elem(rw[r], e), xv, acc[r]);
                }
            }
        }
        if (tile == b0) ZR_TL_MARK(1); // the first tile's items summed (warp 0)
        float out = 0.f;  // lane r: row r's sum over this warp's items
#pragma unroll
        for (int r = 0; r < R; r++) {
            const float v = zr_warp_sum(acc[r]);
            if (lane == r) out = v;
        }
        if (S > 1) {  // every warp gets here (the tile loop is the same for the whole block)
            if (lane < R) red_part[warp][lane] = out;
            __syncthreads();
            if (ks == 0 && lane < R) {
                float t = 0.f;
                for (int k = 0; k < S; k++) t += red_part[warp + k][lane];
                out = t;
            }
            if (TALL && tile + (int)gridDim.x < n_tiles) __syncthreads();  // read before the next tile writes it
        }
        if (!TALL && !ssq && (ks != 0 || !live)) return; // (SSQ: every warp reaches the block's sum)
        if (ks == 0 && live) {
            if (zr_mv_normed(in_mode)) {
                out *= TALL ? red_inv[warp] : zr_mv_inv_rms(red_ss, nthr >> 5, n_in, eps);
            }
            float v = 0.f; // this lane's result as stored (SSQ)
            bool has = false;
            if (glu) {
                const float up = __shfl_down_sync(0xffffffffu, out, H);  // lane r < H: its up row's result
                has = lane < H && res0 + lane < n_res;
                if (has) y[res0 + lane] = v = zr_mv_gate(out, gelu) * up;
            } else if (lane < R && res0 + lane < n_out) {
                has = true;
                y[res0 + lane] = v = out + (ADD_FIRST ? add_v : add ? add[res0 + lane] : 0.f);
            }
            if (ssq) wsq += zr_warp_sum(has ? __fmul_rn(v, v) : 0.f); // (no fma: a test repeats it on the host)
        }
        if (!TALL) break;
        if (tile + (int)gridDim.x < n_tiles) begin_tile(tile + gridDim.x);
    }
    if (ssq) { // block-uniform
        if (lane == 0) red_sq[warp] = wsq;
        __syncthreads();
        if (tid == 0) {
            float t = 0.f;
            for (int k = 0; k < (nthr >> 5); k++) t += red_sq[k];
            y[n_res + blockIdx.x] = t;
        }
    }
}

// The parameters of every decode product kernel (kernels.def's "PPPPPPFIIIIPPP": matvec_<type>,
// _tall, the tensor-core and flat ones)
#define ZR_MV_KPARAMS                                                                                   \
    const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws, const float *__restrict__ x, float *y, \
        const float *add, const float *__restrict__ norm_w, float eps, int n_in, int n_out, int mode,   \
        int split, const float *__restrict__ post_r, const float *__restrict__ post_w, float *x_out

// The gate|up products of their own (cu/matvec_glu_flat.cu, cu/matvec_glu_bal.cu): x' staged for T
// as the tall product stages it (ADDNORM's rounds, block 0's x_out; TALL false: as a one-tile
// product, the balanced ADDNORM twins), RMSNorm's sum of squares a warp into red_ss, then the
// block's barrier
template <class T, bool TALL = true>
__device__ __forceinline__ void zr_mv_glu_stage(const float *__restrict__ x, const float *__restrict__ norm_w, float *xs,
                                                int n_in, int mode, int nthr, const float *__restrict__ post_r,
                                                const float *__restrict__ post_w, float *x_out, float eps, float *red_ss) {
    const int in_mode = mode & ZR_MV_IN, tid = threadIdx.x;
    float ss = zr_mv_stage_x<ZrMvXsum<T>::value, TALL, ZrMvXq<T>::value>(
        x, norm_w, xs, n_in, in_mode, tid, nthr, (mode & ZR_MV_GELU) != 0, post_r, post_w, x_out, eps,
        mode >> ZR_MV_NSS_SHIFT);
    if (zr_mv_normed(in_mode)) {
        ss = zr_warp_sum(ss);
        if ((tid & 31) == 0) red_ss[tid >> 5] = ss;
    }
    __syncthreads();
}

// A gate|up product kernel of its own (cu/matvec_glu_flat.cu, cu/matvec_glu_bal.cu): the product
// FN (a function template with its arguments: zr_matvec_glu_bal<ZrMvQ8i, true>) on blocks of
// THREADS, two a multiprocessor; the mv parameters, add and split unused
#define ZR_MV_GLU_KERNEL(NAME, THREADS, ...)                                                                  \
    ZR_KERNEL void __launch_bounds__(THREADS, 2) NAME(ZR_MV_KPARAMS) {                                        \
        ZR_TL_EXIT;                                                                                           \
        (void)add;                                                                                            \
        (void)split;                                                                                          \
        __VA_ARGS__(w, ws, x, y, norm_w, eps, n_in, n_out, mode, post_r, post_w, x_out);                      \
    }

// NREG caps the registers (so enough warps fit per SM to keep loads in flight). A block of 1024
// threads (ZR_MV_MAX_THREADS) launches at 64 registers; every kernel takes blocks of 512 (the host
// reads which take 1024 from the driver: src/cuda/mv_shape.c zr_cuf_kernel_max_threads).
// NAME##_tall: the same product taking several tiles per block (TALL above).
#define ZR_MATVEC_KERNEL(NAME, TRAITS, R, P, NREG, TALL, IN)                                               \
    ZR_KERNEL void __maxnreg__(NREG) NAME(ZR_MV_KPARAMS) {                                              \
        ZR_TL_EXIT;                                                                                     \
        zr_matvec<TRAITS, R, P, TALL, true, true, IN>(w, ws, x, y, add, norm_w, eps, n_in, n_out, mode, \
                                                      split, post_r, post_w, x_out);                    \
    }
#define ZR_MATVEC(NAME, TRAITS, R, P, NREG)                                                                \
    static_assert(NREG * 512 <= 65536, "register cap too high for a block of 512 threads");             \
    ZR_MATVEC_KERNEL(NAME, TRAITS, R, P, NREG, false, -1)                                               \
    ZR_KCHECK_FAMILY(mv, NAME);                                                                         \
    ZR_MATVEC_KERNEL(NAME##_tall, TRAITS, R, P, NREG, true, -1)                                         \
    ZR_KCHECK_FAMILY(mvt, NAME##_tall);
// ZR_MATVEC and NAME##_tall_rn: the tall product built for RMSNORM input alone (the vocabulary
// outputs and the tall gate|up products; src/cuda/mv_shape.c zr_cuf_mv_tall_kernel). Without the
// other modes' code ptxas spills less under the cap (cu/PERF.md session 44); the types of
// cu/kernels.def's ZR_KTYPES_TALL_RN.
#define ZR_MATVEC_RN(NAME, TRAITS, R, P, NREG)                                                             \
    ZR_MATVEC(NAME, TRAITS, R, P, NREG)                                                                 \
    ZR_MATVEC_KERNEL(NAME##_tall_rn, TRAITS, R, P, NREG, true, ZR_MV_RMSNORM)                           \
    ZR_KCHECK_FAMILY(mvt_rn, NAME##_tall_rn);
