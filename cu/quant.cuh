// Weight layouts on the device and element-wise dequantization.
//
// Weights are uploaded once, repacked from ggml's block layout (ggml-common.h) into a "main"
// stream whose per-row pieces are multiples of 16 bytes (so every lane can use 128-bit loads)
// and, for some types, a "side" stream of per-block scales. The host side of the same layout is
// src/cuda/weights.c (zr_cuw_repack_row); the two must agree. The bytes per block of each stream
// are the main and side columns of the type table, src/zr_types.def, which both read. For a
// matrix [n_in, n_out] (n_in = row length, n_out = rows) with nb blocks per row and global block
// index g = row*nb + b:
//
//   type   main (per block, in row order)                    side (per block g)
//   f32    rows of n_in floats, row stride rounded up to 16 B  -
//   f16    rows of n_in halves, stride rounded up to 16 B       -
//   bf16   rows of n_in bf16, stride rounded up to 16 B         -
//   q8_0   qs[32] int8 (32 B)                                   half d
//   q4_0   qs[16] (16 B)                                        half d
//   q4_1   qs[16]                                               half2 (d, m)
//   q5_0   qs[16]                                               u32 qh[N] then half d[N]   (N = n_out*nb)
//   q5_1   qs[16]                                               u32 qh[N] then half2 dm[N]
//   q2_K   qs[64] (64 B, regrouped as q3_K's low bits)          scales[16], half2 (d, dmin) (20 B)
//   q3_K   qs[64] hb[32] (96 B, regrouped, below)               int8 sc[16], half d, pad[2] (20 B)
//   q4_K   qs[128] (128 B, as ggml)                             u32 sm[4], half2 dm (20 B)
//   q5_K   qs[128] qh[32] (160 B: q4_K's quants, fifth bits)     u32 sm[4], half2 dm (20 B, as q4_K)
//   q6_K   nib[128] hb[64] (192 B, regrouped, below)            int8 sc[16], half d (18 B)
//
// q3_K main: element 64u + 16s + 4k + i of a super-block (u = 0..3: the 16-byte item; s: its
// 16-value group; k, i = 0..3) has its 2 low bits at bits 2s of qs[16u + 4k + i] and its high bit
// (ggml's hmask) at bit 4(s&1) + k of hb[8u + 4(s>>1) + i], so an item's high bits are one uint2
// and ((word >> 2s) & 0x03030303) are the low bits of the 4 bytes of quant word k at group s.
// side: sc[t] = ggml's 6-bit scale t (elements 16t..16t+15) minus 32, as int8; d as ggml.
// q2_K main: the 2-bit values placed as q3_K's low bits; side: ggml's scales[16] (scale t: low
// nibble the scale, high nibble the min of elements 16t..16t+15), then (d, dmin).
// K-quant side streams are pre-decoded so the matrix-vector kernel reads one small word per
// item instead of unpacking 6-bit fields of a 16-byte header on every lane (one record per
// super-block, in row order, so a row's side data starts at one pointer):
//   q4_K  sm[j] = bytes (sc[2j], sc[2j+1], m[2j], m[2j+1]) of the 6-bit scales and mins of the
//         64 values 64j.. (j = 0..3); dm = (d, dmin). 20 B per super-block (ggml: 16).
//   q5_K  main: qs[128] as q4_K's (item u = 2j + hf: bytes 16u.., low nibbles the elements 64j +
//         16hf + l, high 64j + 32 + 16hf + l), then qh[32] = a 32-bit word per item u whose
//         byte i holds at bit 2k + t the fifth bit of quant byte 4k + i's nibble t (t = 0: low)
//         -- so (word << (6 - 2k)) & 0x40404040 puts the low nibbles' fifth bits of quant word k
//         at bit 6 of each byte (the high ones: shifted by 5 - 2k). side as q4_K's.
//   q6_K  the 6-bit value of element e = 32u + 16t + i (u = 0..7, t = 0/1, i = 0..15) of a
//         super-block: low nibble in nib[16u + i] (t = 0: bits 0..3, t = 1: bits 4..7), its two
//         high bits in the 32-bit word hb[8u + 4t ..] at bits 8*(i&3) + 2*(i>>2) .. +1 -- so
//         ((word >> 2k) & 0x03030303) << 4 are the high bits of the 4 bytes of nibble word k.
//         sc[16] = ggml's int8 scales (scale s covers elements 16s..16s+15); d as ggml.
#pragma once
#include "common.cuh"

// ggml type ids: ZR_T_<E> here is ZR_TYPE_<E> of src/quant.h, both made from the one type table
// (plain C macro calls, so host and kernels include the same file).
enum {
#define ZR_TYPE(id, E, name, block, bytes, kernel, item, main, side) ZR_T_##E = id,
#define ZR_TYPE_SIZE(id, E, name, block, bytes) ZR_T_##E = id,
#include "../src/zr_types.def"
};

// Byte i of w (0..255) as an exact float minus `off`, without the slow int->float converter:
// 0x4B0000bb is the float 2^23 + bb; subtracting (2^23 + off) is exact.
#define ZR_MAGIC 8388608.0f
__device__ __forceinline__ float zr_byte_f(uint32_t w, int i, float magic_off) {
    return __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7440u | (uint32_t)i)) - magic_off;
}

// 4 bits b0..b3 -> 0x10 in byte i where bit i is set (the 5th bit of q5 values).
__device__ __forceinline__ uint32_t zr_expand4_bit4(uint32_t bits4) {
    return ((bits4 * 0x00204081u) & 0x01010101u) << 4;
}

__device__ __forceinline__ float zr_h2f(const __half h) { return __half2float(h); }
__device__ __forceinline__ float zr_bf2f(uint16_t b) { return __uint_as_float((uint32_t)b << 16); }
__device__ __forceinline__ float zr_ldh(const uint8_t *p) { return __half2float(*(const __half *)p); }

// Bytes of a row of the main stream (the host's zr_cuw_main_row_bytes). Only the 1-element
// "blocks" of the float types need the padding to 16 bytes: the others' main bytes per block are
// multiples of 16 (test_quant checks it), so their rows are plain products.
__device__ __forceinline__ size_t zr_main_row_bytes(int type, int n_in) {
    switch (type) {
#define ZR_TYPE(id, E, name, block, bytes, kernel, item, main, side)                                    \
    case id: return (block) == 1 ? (((size_t)n_in * (main) + 15) & ~(size_t)15) : (size_t)(n_in / (block)) * (main);
#include "../src/zr_types.def"
    default: return 0;
    }
}

// Element e of row r, dequantized (used by embedding lookup and the prefill dequantizers, which
// are not on the decode critical path; the matrix-vector kernels have their own fast paths).
template <int TYPE>
__device__ __forceinline__ float zr_dq(const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws,
                                       int n_in, int n_out, int r, int e) {
    const uint8_t *row = w + (size_t)r * zr_main_row_bytes(TYPE, n_in);
    if (TYPE == ZR_T_F32) return ((const float *)row)[e];
    if (TYPE == ZR_T_F16) return __half2float(((const __half *)row)[e]);
    if (TYPE == ZR_T_BF16) return zr_bf2f(((const uint16_t *)row)[e]);
    if (TYPE == ZR_T_Q8_0 || TYPE == ZR_T_Q4_0 || TYPE == ZR_T_Q4_1 || TYPE == ZR_T_Q5_0 ||
        TYPE == ZR_T_Q5_1) {
        const int nb = n_in / 32, b = e >> 5, j = e & 31;
        const size_t g = (size_t)r * nb + b, N = (size_t)n_out * nb;
        if (TYPE == ZR_T_Q8_0) return zr_ldh(ws + 2 * g) * (float)(int8_t)row[32 * b + j];
        const uint8_t qb = row[16 * b + (j & 15)];
        int q = j < 16 ? (qb & 0xF) : (qb >> 4);
        if (TYPE == ZR_T_Q4_0) return zr_ldh(ws + 2 * g) * (float)(q - 8);
        if (TYPE == ZR_T_Q4_1) return zr_ldh(ws + 4 * g) * (float)q + zr_ldh(ws + 4 * g + 2);
        const uint32_t qh = ((const uint32_t *)ws)[g];
        q |= (int)((qh >> j) & 1) << 4;
        if (TYPE == ZR_T_Q5_0) return zr_ldh(ws + 4 * N + 2 * g) * (float)(q - 16);
        return zr_ldh(ws + 4 * N + 4 * g) * (float)q + zr_ldh(ws + 4 * N + 4 * g + 2);
    }
    const int sb = e >> 8, i = e & 255;
    const size_t g = (size_t)r * (n_in / 256) + sb;
    if (TYPE == ZR_T_Q2_K) {
        const int q = (row[64 * sb + 16 * (i >> 6) + (i & 15)] >> (2 * ((i >> 4) & 3))) & 3;
        const int sc = ws[20 * g + (i >> 4)];
        return zr_ldh(ws + 20 * g + 16) * (float)(sc & 0xF) * (float)q - zr_ldh(ws + 20 * g + 18) * (float)(sc >> 4);
    }
    if (TYPE == ZR_T_Q3_K) {
        const uint8_t *b = row + 96 * sb;
        const int u = i >> 6, s = (i >> 4) & 3, k = (i >> 2) & 3, c = i & 3;
        const int lo = (b[16 * u + 4 * k + c] >> (2 * s)) & 3;
        const int q = lo | ((b[64 + 8 * u + 4 * (s >> 1) + c] >> (4 * (s & 1) + k)) & 1) << 2;
        return zr_ldh(ws + 20 * g + 16) * (float)(int8_t)ws[20 * g + (i >> 4)] * (float)(q - 4);
    }
    if (TYPE == ZR_T_Q4_K) {
        const int j = i >> 6, hi = (i >> 5) & 1, l = i & 31;
        const uint8_t *sm = ws + 20 * g + 4 * j;
        const float2 dm = __half22float2(*(const __half2 *)(ws + 20 * g + 16));
        const uint8_t qb = row[128 * sb + 32 * j + l];
        const int q = hi ? (qb >> 4) : (qb & 0xF);
        return dm.x * (float)sm[hi] * (float)q - dm.y * (float)sm[2 + hi];
    }
    if (TYPE == ZR_T_Q5_K) {
        const int j = i >> 6, hi = (i >> 5) & 1, l = i & 31, u = 2 * j + (l >> 4);
        const uint8_t *sm = ws + 20 * g + 4 * j, *b = row + 160 * sb;
        const float2 dm = __half22float2(*(const __half2 *)(ws + 20 * g + 16));
        const uint8_t qb = b[32 * j + l];
        int q = hi ? (qb >> 4) : (qb & 0xF);
        q |= ((b[128 + 4 * u + (l & 3)] >> (2 * ((l >> 2) & 3) + hi)) & 1) << 4;
        return dm.x * (float)sm[hi] * (float)q - dm.y * (float)sm[2 + hi];
    }
    // Q6_K (regrouped layout above)
    const uint8_t *b = row + 192 * sb;
    const int u = i >> 5, t = (i >> 4) & 1, k = i & 15;
    const int lo = t ? (b[16 * u + k] >> 4) : (b[16 * u + k] & 0xF);
    const uint32_t hw = *(const uint32_t *)(b + 128 + 8 * u + 4 * t);
    const int q = (lo | (int)(((hw >> (8 * (k & 3) + 2 * (k >> 2))) & 3) << 4)) - 32;
    const int sc = (int8_t)ws[18 * g + (i >> 4)];
    return zr_ldh(ws + 18 * g + 16) * (float)sc * (float)q;
}
