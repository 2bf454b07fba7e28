// The decode matrix-vector product y[n_out] = W[n_out, n_in] x[n_in] (+ add[n_out]), F32
// activations and F32 accumulation for every weight type.
//
// Why it is shaped like this: at batch 1 every weight byte is read once per token, so the
// kernel must stream weights at memory bandwidth. Each lane issues 128-bit coalesced loads of
// one "item" (16 B of quants plus its scales) for R rows at once (R loads in flight per lane),
// the x values of the item are read once from shared memory and reused for the R rows, and
// the quant -> float conversion avoids the slow converter (zr_byte_f). x is staged in shared
// memory with 4 floats of padding every 32 so the per-lane 16-byte reads do not conflict.
//
// Launch: block ZR_MV_THREADS, grid ceil(n_out / (ZR_MV_THREADS/32 * R)), dynamic shared
// memory zr_mv_smem_bytes(n_in) = (n_in + 4*ceil(n_in/32)) * 4. x must be 16-byte aligned.
// y and add may alias (residual update in place): each y[r] is read and written by one lane.
#pragma once
#include "quant.cuh"

#define ZR_MV_THREADS 128

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

__device__ __forceinline__ float zr_sum16(const float v[16]) {
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < 16; k++) s += v[k];
    return s;
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

// --- per-type items. Each type defines: EPI (elements per item), items(n_in), the row
// pointers (Row), and dot<R>() which adds the item's contribution of R rows to acc. ---

struct ZrMvF32 {
    static constexpr int EPI = 4;
    struct Row { const uint8_t *p; };
    __device__ static Row row(const uint8_t *w, const uint8_t *, int n_in, int, int r) {
        return {w + (size_t)r * zr_main_row_bytes(ZR_T_F32, n_in)};
    }
    template <int R> __device__ static void dot(const Row (&rw)[R], int it, const float *xs, float (&acc)[R]) {
        float4 wv[R];
#pragma unroll
        for (int r = 0; r < R; r++) wv[r] = __ldg((const float4 *)rw[r].p + it);
        const float4 xv = *(const float4 *)(xs + zr_xpad(4 * it));
#pragma unroll
        for (int r = 0; r < R; r++)
            acc[r] = fmaf(wv[r].w, xv.w, fmaf(wv[r].z, xv.z, fmaf(wv[r].y, xv.y, fmaf(wv[r].x, xv.x, acc[r]))));
    }
    __device__ static float elem(const Row &rw, int e) { return ((const float *)rw.p)[e]; }
};

struct ZrMvF16 {
    static constexpr int EPI = 8;
    struct Row { const uint8_t *p; };
    __device__ static Row row(const uint8_t *w, const uint8_t *, int n_in, int, int r) {
        return {w + (size_t)r * zr_main_row_bytes(ZR_T_F16, n_in)};
    }
    template <int R> __device__ static void dot(const Row (&rw)[R], int it, const float *xs, float (&acc)[R]) {
        uint4 wv[R];
#pragma unroll
        for (int r = 0; r < R; r++) wv[r] = zr_ld16(rw[r].p + 16 * (size_t)it);
        const float *xp = xs + zr_xpad(8 * it);
        const float4 x0 = *(const float4 *)xp, x1 = *(const float4 *)(xp + 4);
#pragma unroll
        for (int r = 0; r < R; r++) {
            const float2 a = __half22float2(*(const __half2 *)&wv[r].x);
            const float2 b = __half22float2(*(const __half2 *)&wv[r].y);
            const float2 c = __half22float2(*(const __half2 *)&wv[r].z);
            const float2 d = __half22float2(*(const __half2 *)&wv[r].w);
            float s = acc[r];
            s = fmaf(a.x, x0.x, s); s = fmaf(a.y, x0.y, s); s = fmaf(b.x, x0.z, s); s = fmaf(b.y, x0.w, s);
            s = fmaf(c.x, x1.x, s); s = fmaf(c.y, x1.y, s); s = fmaf(d.x, x1.z, s); s = fmaf(d.y, x1.w, s);
            acc[r] = s;
        }
    }
    __device__ static float elem(const Row &rw, int e) { return __half2float(((const __half *)rw.p)[e]); }
};

struct ZrMvBF16 {
    static constexpr int EPI = 8;
    struct Row { const uint8_t *p; };
    __device__ static Row row(const uint8_t *w, const uint8_t *, int n_in, int, int r) {
        return {w + (size_t)r * zr_main_row_bytes(ZR_T_BF16, n_in)};
    }
    template <int R> __device__ static void dot(const Row (&rw)[R], int it, const float *xs, float (&acc)[R]) {
        uint4 wv[R];
#pragma unroll
        for (int r = 0; r < R; r++) wv[r] = zr_ld16(rw[r].p + 16 * (size_t)it);
        const float *xp = xs + zr_xpad(8 * it);
        const float4 x0 = *(const float4 *)xp, x1 = *(const float4 *)(xp + 4);
#pragma unroll
        for (int r = 0; r < R; r++) {
            const uint32_t u[4] = {wv[r].x, wv[r].y, wv[r].z, wv[r].w};
            const float xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
            float s = acc[r];
#pragma unroll
            for (int k = 0; k < 4; k++) {
                s = fmaf(__uint_as_float(u[k] << 16), xv[2 * k], s);
                s = fmaf(__uint_as_float(u[k] & 0xffff0000u), xv[2 * k + 1], s);
            }
            acc[r] = s;
        }
    }
    __device__ static float elem(const Row &rw, int e) { return zr_bf2f(((const uint16_t *)rw.p)[e]); }
};

// q8_0: item = half a block (16 int8); bytes are biased by 0x80 to use the unsigned magic.
struct ZrMvQ8_0 {
    static constexpr int EPI = 16;
    struct Row { const uint8_t *q; const __half *d; };
    __device__ static Row row(const uint8_t *w, const uint8_t *ws, int n_in, int, int r) {
        const int nb = n_in / 32;
        return {w + (size_t)r * nb * 32, (const __half *)ws + (size_t)r * nb};
    }
    template <int R> __device__ static void dot(const Row (&rw)[R], int it, const float *xs, float (&acc)[R]) {
        uint4 wv[R];
        float d[R];
#pragma unroll
        for (int r = 0; r < R; r++) {
            wv[r] = zr_ld16(rw[r].q + 16 * (size_t)it);
            d[r] = __half2float(__ldg(rw[r].d + (it >> 1)));
        }
        float xv[16];
        zr_x16(xs, 16 * it, xv);
#pragma unroll
        for (int r = 0; r < R; r++) {
            const uint32_t q[4] = {wv[r].x ^ 0x80808080u, wv[r].y ^ 0x80808080u, wv[r].z ^ 0x80808080u,
                                   wv[r].w ^ 0x80808080u};
            acc[r] = fmaf(d[r], zr_dot16_bytes(q, xv, ZR_MAGIC + 128.f), acc[r]);
        }
    }
};

// q4_0 / q4_1 / q5_0 / q5_1: item = one block of 32 (16 bytes of nibbles: byte j holds element j
// in its low and element j+16 in its high nibble).
template <int TYPE>
struct ZrMvQ4x {
    static constexpr int EPI = 32;
    struct Row { const uint8_t *q; const uint8_t *s1; const uint8_t *s2; };
    __device__ static Row row(const uint8_t *w, const uint8_t *ws, int n_in, int n_out, int r) {
        const int nb = n_in / 32;
        const size_t g = (size_t)r * nb, N = (size_t)n_out * nb;
        if (TYPE == ZR_T_Q4_0) return {w + g * 16, ws + 2 * g, nullptr};
        if (TYPE == ZR_T_Q4_1) return {w + g * 16, ws + 4 * g, nullptr};
        if (TYPE == ZR_T_Q5_0) return {w + g * 16, ws + 4 * g, ws + 4 * N + 2 * g};
        return {w + g * 16, ws + 4 * g, ws + 4 * N + 4 * g};
    }
    template <int R> __device__ static void dot(const Row (&rw)[R], int it, const float *xs, float (&acc)[R]) {
        constexpr bool has_m = TYPE == ZR_T_Q4_1 || TYPE == ZR_T_Q5_1;
        constexpr bool has_h = TYPE == ZR_T_Q5_0 || TYPE == ZR_T_Q5_1;
        uint4 wv[R];
        float d[R], m[R];
        uint32_t qh[R];
#pragma unroll
        for (int r = 0; r < R; r++) {
            wv[r] = zr_ld16(rw[r].q + 16 * (size_t)it);
            if (TYPE == ZR_T_Q4_0) { d[r] = __half2float(__ldg((const __half *)rw[r].s1 + it)); }
            if (TYPE == ZR_T_Q4_1) {
                const float2 dm = __half22float2(__ldg((const __half2 *)rw[r].s1 + it));
                d[r] = dm.x; m[r] = dm.y;
            }
            if (has_h) qh[r] = __ldg((const uint32_t *)rw[r].s1 + it);
            if (TYPE == ZR_T_Q5_0) d[r] = __half2float(__ldg((const __half *)rw[r].s2 + it));
            if (TYPE == ZR_T_Q5_1) {
                const float2 dm = __half22float2(__ldg((const __half2 *)rw[r].s2 + it));
                d[r] = dm.x; m[r] = dm.y;
            }
        }
        float xlo[16], xhi[16];
        zr_x16(xs, 32 * it, xlo);
        zr_x16(xs, 32 * it + 16, xhi);
        float xsum = 0.f;
        if (has_m) xsum = zr_sum16(xlo) + zr_sum16(xhi);
        const float off = ZR_MAGIC + (TYPE == ZR_T_Q4_0 ? 8.f : TYPE == ZR_T_Q5_0 ? 16.f : 0.f);
#pragma unroll
        for (int r = 0; r < R; r++) {
            const uint32_t w4[4] = {wv[r].x, wv[r].y, wv[r].z, wv[r].w};
            uint32_t lo[4], hi[4];
#pragma unroll
            for (int k = 0; k < 4; k++) {
                lo[k] = w4[k] & 0x0F0F0F0Fu;
                hi[k] = (w4[k] >> 4) & 0x0F0F0F0Fu;
                if (has_h) {
                    lo[k] |= zr_expand4_bit4((qh[r] >> (4 * k)) & 0xF);
                    hi[k] |= zr_expand4_bit4((qh[r] >> (16 + 4 * k)) & 0xF);
                }
            }
            const float s = zr_dot16_bytes(lo, xlo, off) + zr_dot16_bytes(hi, xhi, off);
            acc[r] = fmaf(d[r], s, acc[r]);
            if (has_m) acc[r] = fmaf(m[r], xsum, acc[r]);
        }
    }
};

// q2_K / q3_K: item = 16 bytes of 2-bit quants (one of 4 per super-block: n = half of 128, lh =
// which 16 of the 32 bytes), i.e. 4 runs of 16 elements at 128n + 32j + 16lh (j = 0..3, bits
// 2j..2j+1), each run with its own scale index 8n + 2j + lh.
template <int TYPE>
struct ZrMvQ23K {
    static constexpr int EPI = 64;
    static constexpr int SB = TYPE == ZR_T_Q2_K ? 80 : 112;
    struct Row { const uint8_t *p; const __half2 *dm; };
    __device__ static Row row(const uint8_t *w, const uint8_t *ws, int n_in, int, int r) {
        const int nsb = n_in / 256;
        return {w + (size_t)r * nsb * SB, (const __half2 *)ws + (size_t)r * nsb};
    }
    template <int R> __device__ static void dot(const Row (&rw)[R], int it, const float *xs, float (&acc)[R]) {
        const int sb = it >> 2, n = (it >> 1) & 1, lh = it & 1;
        uint4 qv[R], hv[R], sv[R];
        float d[R], dmin[R];
#pragma unroll
        for (int r = 0; r < R; r++) {
            const uint8_t *b = rw[r].p + (size_t)sb * SB;
            if (TYPE == ZR_T_Q2_K) {
                qv[r] = zr_ld16(b + 16 + 32 * n + 16 * lh);
                sv[r] = zr_ld16(b);
                const float2 f = __half22float2(__ldg(rw[r].dm + sb));
                d[r] = f.x; dmin[r] = f.y;
            } else {
                qv[r] = zr_ld16(b + 32 + 32 * n + 16 * lh);
                hv[r] = zr_ld16(b + 16 * lh);
                sv[r] = zr_ld16(b + 96);
            }
        }
        const int e0 = 256 * sb + 128 * n + 16 * lh;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            float xv[16];
            zr_x16(xs, e0 + 32 * j, xv);
            const float xsum = TYPE == ZR_T_Q2_K ? zr_sum16(xv) : 0.f;
            const int idx = 8 * n + 2 * j + lh;  // scale index; word idx>>2 = 2n + (j>>1)
#pragma unroll
            for (int r = 0; r < R; r++) {
                const uint32_t q4[4] = {qv[r].x, qv[r].y, qv[r].z, qv[r].w};
                uint32_t q[4];
                if (TYPE == ZR_T_Q2_K) {
#pragma unroll
                    for (int k = 0; k < 4; k++) q[k] = (q4[k] >> (2 * j)) & 0x03030303u;
                    const uint32_t sw[4] = {sv[r].x, sv[r].y, sv[r].z, sv[r].w};
                    const uint32_t word = n ? sw[2 + (j >> 1)] : sw[j >> 1];
                    const uint32_t sc = (word >> (8 * (idx & 3))) & 0xFF;
                    const float s = zr_dot16_bytes(q, xv, ZR_MAGIC);
                    acc[r] = fmaf(d[r] * (float)(sc & 0xF), s, acc[r]);
                    acc[r] = fmaf(-dmin[r] * (float)(sc >> 4), xsum, acc[r]);
                } else {
                    const uint32_t h4[4] = {hv[r].x, hv[r].y, hv[r].z, hv[r].w};
#pragma unroll
                    for (int k = 0; k < 4; k++)
                        q[k] = ((q4[k] >> (2 * j)) & 0x03030303u) | (((h4[k] >> (4 * n + j)) & 0x01010101u) << 2);
                    uint32_t s4[4];
                    zr_q3k_scales(sv[r].x, sv[r].y, sv[r].z, s4);
                    const uint32_t word = n ? s4[2 + (j >> 1)] : s4[j >> 1];
                    const int sc = (int)((word >> (8 * (idx & 3))) & 0xFF) - 32;
                    const float dd = __half2float(__ushort_as_half((unsigned short)(sv[r].w & 0xFFFF)));
                    acc[r] = fmaf(dd * (float)sc, zr_dot16_bytes(q, xv, ZR_MAGIC + 4.f), acc[r]);
                }
            }
        }
    }
};

// q4_K / q5_K: item = 16 bytes of nibbles (one of 8 per super-block: chunk j = u/2 of 64
// elements, half hf = u%2): low nibbles are elements 64j + 16hf + l (sub-block 2j), high
// nibbles 64j + 32 + 16hf + l (sub-block 2j+1).
template <int TYPE>
struct ZrMvQ45K {
    static constexpr int EPI = 32;
    static constexpr int SB = TYPE == ZR_T_Q4_K ? 144 : 176;
    struct Row { const uint8_t *p; };
    __device__ static Row row(const uint8_t *w, const uint8_t *, int n_in, int, int r) {
        return {w + (size_t)r * (n_in / 256) * SB};
    }
    template <int R> __device__ static void dot(const Row (&rw)[R], int it, const float *xs, float (&acc)[R]) {
        const int sb = it >> 3, j = (it >> 1) & 3, hf = it & 1;
        uint4 qv[R], hd[R], hv[R];
#pragma unroll
        for (int r = 0; r < R; r++) {
            const uint8_t *b = rw[r].p + (size_t)sb * SB;
            hd[r] = zr_ld16(b);
            if (TYPE == ZR_T_Q4_K) {
                qv[r] = zr_ld16(b + 16 + 32 * j + 16 * hf);
            } else {
                qv[r] = zr_ld16(b + 48 + 32 * j + 16 * hf);
                hv[r] = zr_ld16(b + 16 + 16 * hf);
            }
        }
        const int e0 = 256 * sb + 64 * j + 16 * hf;
        float xlo[16], xhi[16];
        zr_x16(xs, e0, xlo);
        zr_x16(xs, e0 + 32, xhi);
        const float slo = zr_sum16(xlo), shi = zr_sum16(xhi);
#pragma unroll
        for (int r = 0; r < R; r++) {
            const float2 dm = __half22float2(*(const __half2 *)&hd[r].x);
            float sc0, m0, sc1, m1;
            zr_scale_min_k4w(2 * j, hd[r].y, hd[r].z, hd[r].w, &sc0, &m0);
            zr_scale_min_k4w(2 * j + 1, hd[r].y, hd[r].z, hd[r].w, &sc1, &m1);
            const uint32_t w4[4] = {qv[r].x, qv[r].y, qv[r].z, qv[r].w};
            uint32_t lo[4], hi[4];
#pragma unroll
            for (int k = 0; k < 4; k++) {
                lo[k] = w4[k] & 0x0F0F0F0Fu;
                hi[k] = (w4[k] >> 4) & 0x0F0F0F0Fu;
            }
            if (TYPE == ZR_T_Q5_K) {
                const uint32_t h4[4] = {hv[r].x, hv[r].y, hv[r].z, hv[r].w};
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    lo[k] |= ((h4[k] >> (2 * j)) & 0x01010101u) << 4;
                    hi[k] |= ((h4[k] >> (2 * j + 1)) & 0x01010101u) << 4;
                }
            }
            const float a = dm.x * sc0 * zr_dot16_bytes(lo, xlo, ZR_MAGIC) - dm.y * m0 * slo;
            const float b = dm.x * sc1 * zr_dot16_bytes(hi, xhi, ZR_MAGIC) - dm.y * m1 * shi;
            acc[r] += a + b;
        }
    }
};

// q6_K: item = (h, k): ql bytes 64h+16k.. and 64h+32+16k.., qh bytes 32h+16k..; elements
// 128h + 16k + l + {0, 32, 64, 96} with int8 scales 8h + k + {0, 2, 4, 6}.
struct ZrMvQ6K {
    static constexpr int EPI = 64;
    struct Row { const uint8_t *p; const __half *d; };
    __device__ static Row row(const uint8_t *w, const uint8_t *ws, int n_in, int, int r) {
        const int nsb = n_in / 256;
        return {w + (size_t)r * nsb * 208, (const __half *)ws + (size_t)r * nsb};
    }
    template <int R> __device__ static void dot(const Row (&rw)[R], int it, const float *xs, float (&acc)[R]) {
        const int sb = it >> 2, h = (it >> 1) & 1, k = it & 1;
        uint4 la[R], lb[R], qh[R], sc[R];
        float d[R];
#pragma unroll
        for (int r = 0; r < R; r++) {
            const uint8_t *b = rw[r].p + (size_t)sb * 208;
            la[r] = zr_ld16(b + 64 * h + 16 * k);
            lb[r] = zr_ld16(b + 64 * h + 32 + 16 * k);
            qh[r] = zr_ld16(b + 128 + 32 * h + 16 * k);
            sc[r] = zr_ld16(b + 192);
            d[r] = __half2float(__ldg(rw[r].d + sb));
        }
        const int e0 = 256 * sb + 128 * h + 16 * k;
#pragma unroll
        for (int g = 0; g < 4; g++) {
            float xv[16];
            zr_x16(xs, e0 + 32 * g, xv);
#pragma unroll
            for (int r = 0; r < R; r++) {
                const uint4 l4 = (g & 1) ? lb[r] : la[r];
                const uint32_t lw[4] = {l4.x, l4.y, l4.z, l4.w};
                const uint32_t hw[4] = {qh[r].x, qh[r].y, qh[r].z, qh[r].w};
                uint32_t q[4];
#pragma unroll
                for (int t = 0; t < 4; t++) {
                    const uint32_t nib = (g & 2) ? ((lw[t] >> 4) & 0x0F0F0F0Fu) : (lw[t] & 0x0F0F0F0Fu);
                    q[t] = nib | (((hw[t] >> (2 * g)) & 0x03030303u) << 4);
                }
                // scale index 8h + k + 2g: word 2h + g/2, byte 2(g&1) + k
                const uint32_t sw[4] = {sc[r].x, sc[r].y, sc[r].z, sc[r].w};
                const uint32_t word = h ? sw[2 + (g >> 1)] : sw[g >> 1];
                const float s = (float)(int8_t)(word >> (8 * (2 * (g & 1) + k)));
                acc[r] = fmaf(d[r] * s, zr_dot16_bytes(q, xv, ZR_MAGIC + 32.f), acc[r]);
            }
        }
    }
};

template <class T, int R>
__device__ __forceinline__ void zr_matvec(const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws,
                                          const float *__restrict__ x, float *y, const float *add,
                                          int n_in, int n_out) {
    extern __shared__ float4 zr_mv_smem[];
    float *xs = (float *)zr_mv_smem;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    if ((n_in & 3) == 0) {
        for (int i = tid; i < n_in / 4; i += blockDim.x)
            *(float4 *)(xs + zr_xpad(4 * i)) = __ldg((const float4 *)x + i);
    } else {
        for (int i = tid; i < n_in; i += blockDim.x) xs[zr_xpad(i)] = x[i];
    }
    __syncthreads();
    const int row0 = (blockIdx.x * (blockDim.x >> 5) + warp) * R;
    if (row0 >= n_out) return;
    typename T::Row rw[R];
#pragma unroll
    for (int r = 0; r < R; r++) rw[r] = T::row(w, ws, n_in, n_out, min(row0 + r, n_out - 1));
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; r++) acc[r] = 0.f;
    const int items = n_in / T::EPI;
#pragma unroll 2
    for (int it = lane; it < items; it += 32) T::template dot<R>(rw, it, xs, acc);
    if constexpr (T::EPI <= 8) {  // float types: rows whose length is not a multiple of the item
        const int e = items * T::EPI + lane;
        if (e < n_in) {
            const float xv = xs[zr_xpad(e)];
#pragma unroll
            for (int r = 0; r < R; r++) acc[r] = fmaf(T::elem(rw[r], e), xv, acc[r]);
        }
    }
    float out = 0.f;
#pragma unroll
    for (int r = 0; r < R; r++) {
        const float v = zr_warp_sum(acc[r]);
        if (lane == r) out = v;
    }
    if (lane < R && row0 + lane < n_out) y[row0 + lane] = out + (add ? add[row0 + lane] : 0.f);
}
