// The upload's repack on the GPU (issue 19): ggml's block layout, uploaded as it is in the file,
// rewritten into the decode kernels' layout (cu/quant.cuh) in the matrix's final buffer. The
// host's zr_cuw_repack_row (src/cuda/weights.c) is the reference: for every type the bytes are
// the same (test/gpu/test_repack.c), so the weights and the logits are what they were.
//
// repack_rows: rows [row0, row0 + n_rows) of a stacked matrix [n_in, n_out] whose raw ggml rows
// (zr_row_bytes each, back to back) are at src, into main (rows of main_row bytes) and side
// (per-block scales; Q5_0/Q5_1 put qh first and d after all n_out rows' blocks, so the side
// stream's layout needs n_out). One thread per block of a row (an element for the float types,
// whose row padding the last element's thread zeroes). grid ceil(n_rows * blocks / 256), 256.
#include <stdint.h>

#include "common.cuh"
#include "quant.cuh"

struct ZrRepackType {
    int block, bytes, main;
};

__device__ __forceinline__ ZrRepackType zr_repack_type(int type) {
    switch (type) {
#define ZR_TYPE(id, E, name, block, bytes, kernel, item, main, side) \
    case id: return ZrRepackType{block, bytes, main};
#include "../src/zr_types.def"
    default: return ZrRepackType{0, 0, 0};
    }
}

__device__ __forceinline__ void zr_cpy(uint8_t *d, const uint8_t *s, int n) {
#pragma unroll 1
    for (int i = 0; i < n; i++) d[i] = s[i];
}

// q4_K / q5_K: the 6-bit scale (or min) of sub-block j (0..7) from ggml's 12 bytes
__device__ __forceinline__ uint8_t zr_k4_scale(const uint8_t *s, int j) {
    return j < 4 ? (uint8_t)(s[j] & 63) : (uint8_t)((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
}
__device__ __forceinline__ uint8_t zr_k4_min(const uint8_t *s, int j) {
    return j < 4 ? (uint8_t)(s[j + 4] & 63) : (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
}

// q4_K / q5_K: the side record of a block (d dmin scales[12] ...): 4 words of decoded (scale,
// scale, min, min) bytes, then (d, dmin)
__device__ __forceinline__ void zr_k4_side(const uint8_t *blk, uint8_t *sm) {
    const uint8_t *sc = blk + 4;
    for (int j = 0; j < 4; j++) {
        sm[4 * j + 0] = zr_k4_scale(sc, 2 * j);
        sm[4 * j + 1] = zr_k4_scale(sc, 2 * j + 1);
        sm[4 * j + 2] = zr_k4_min(sc, 2 * j);
        sm[4 * j + 3] = zr_k4_min(sc, 2 * j + 1);
    }
    zr_cpy(sm + 16, blk, 4);
}

// q3_K: scale j (0..15) from ggml's 12 bytes, minus 32
__device__ __forceinline__ int zr_k3_scale(const uint8_t *s, int j) {
    const int lo = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4), hi = (s[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
    return (lo | hi << 4) - 32;
}

// q2_K / q3_K: the 2 low bits of element e (0..255) from ggml's qs[64]
__device__ __forceinline__ int zr_k23_q2(const uint8_t *qs, int e) {
    return (qs[32 * (e >> 7) + (e & 31)] >> (2 * ((e >> 5) & 3))) & 3;
}

// q6_K element e (0..255): its low nibble and its high two bits in ggml's ql[128] qh[64]
__device__ __forceinline__ int zr_q6_lo(const uint8_t *blk, int e) {
    const int h = e >> 7, g4 = (e >> 5) & 3, l = e & 31;
    const uint8_t q = blk[64 * h + 32 * (g4 & 1) + l];
    return (g4 & 2) ? q >> 4 : q & 0xF;
}
__device__ __forceinline__ int zr_q6_hi(const uint8_t *blk, int e) {
    const int h = e >> 7, g4 = (e >> 5) & 3, l = e & 31;
    return (blk[128 + 32 * h + l] >> (2 * g4)) & 3;
}

ZR_KERNEL void __launch_bounds__(256) repack_rows(const uint8_t *src, uint8_t *main, uint8_t *side, int type, int n_in,
                                                  int row0, int n_rows, int n_out) {
    zr_grid_enter();
    const ZrRepackType t = zr_repack_type(type);
    if (!t.block) return;
    const int nb = n_in / t.block;
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)n_rows * nb) return;
    const int64_t rl = i / nb, b = i % nb, r = row0 + rl;
    const uint8_t *blk = src + rl * ((int64_t)nb * t.bytes) + b * t.bytes;
    const size_t main_row = ((size_t)nb * t.main + 15) & ~(size_t)15;
    uint8_t *m = main + (size_t)r * main_row;
    const size_t g = (size_t)r * nb + b, Nb = (size_t)n_out * nb; // this block among all; blocks in all
    if (t.block == 1) { // the float types: the element as it is, the row's padding zeroed
        zr_cpy(m + b * t.bytes, blk, t.bytes);
        if (b == nb - 1)
            for (size_t p = (size_t)nb * t.bytes; p < main_row; p++) m[p] = 0;
        return;
    }
    switch (type) {
    case ZR_T_Q8_0: zr_cpy(side + 2 * g, blk, 2); zr_cpy(m + 32 * b, blk + 2, 32); break;
    case ZR_T_Q4_0: zr_cpy(side + 2 * g, blk, 2); zr_cpy(m + 16 * b, blk + 2, 16); break;
    case ZR_T_Q4_1: zr_cpy(side + 4 * g, blk, 4); zr_cpy(m + 16 * b, blk + 4, 16); break;
    case ZR_T_Q5_0:
        zr_cpy(side + 4 * g, blk + 2, 4);
        zr_cpy(side + 4 * Nb + 2 * g, blk, 2);
        zr_cpy(m + 16 * b, blk + 6, 16);
        break;
    case ZR_T_Q5_1:
        zr_cpy(side + 4 * g, blk + 4, 4);
        zr_cpy(side + 4 * Nb + 4 * g, blk, 4);
        zr_cpy(m + 16 * b, blk + 8, 16);
        break;
    case ZR_T_Q2_K: { // element 64u + 16s + c at bits 2s of byte 16u + c; side: scales, (d, dmin)
        uint8_t *q = m + 64 * b;
#pragma unroll 1
        for (int u = 0; u < 4; u++)
            for (int c = 0; c < 16; c++) {
                int v = 0;
                for (int s = 0; s < 4; s++) v |= zr_k23_q2(blk + 16, 64 * u + 16 * s + c) << (2 * s);
                q[16 * u + c] = (uint8_t)v;
            }
        zr_cpy(side + 20 * g, blk, 16);
        zr_cpy(side + 20 * g + 16, blk + 80, 4);
        break;
    }
    case ZR_T_Q3_K: { // element 64u + 16s + 4k + i: low bits at bits 2s of byte 16u + 4k + i, high
                      // bit at bit 4(s&1) + k of byte 64 + 8u + 4(s>>1) + i; side: int8 scales, d, 0, 0
        uint8_t *q = m + 96 * b, *sd = side + 20 * g;
#pragma unroll 1
        for (int u = 0; u < 4; u++)
            for (int c = 0; c < 16; c++) { // byte 4k + i of quants, bits of all four s
                int v = 0;
                for (int s = 0; s < 4; s++) v |= zr_k23_q2(blk + 32, 64 * u + 16 * s + c) << (2 * s);
                q[16 * u + c] = (uint8_t)v;
            }
#pragma unroll 1
        for (int u = 0; u < 4; u++)
            for (int c = 0; c < 8; c++) { // byte 4(s>>1) + i of the high bits
                const int s1 = c >> 2, i = c & 3;
                int v = 0;
                for (int t = 0; t < 2; t++)
                    for (int k = 0; k < 4; k++) {
                        const int e = 64 * u + 16 * (2 * s1 + t) + 4 * k + i;
                        v |= ((blk[e & 31] >> (4 * (e >> 7) + ((e >> 5) & 3))) & 1) << (4 * t + k);
                    }
                q[64 + 8 * u + c] = (uint8_t)v;
            }
        for (int j = 0; j < 16; j++) sd[j] = (uint8_t)(int8_t)zr_k3_scale(blk + 96, j);
        zr_cpy(sd + 16, blk + 108, 2);
        sd[18] = sd[19] = 0;
        break;
    }
    case ZR_T_Q4_K: // 128 B of quants; the side record
        zr_k4_side(blk, side + 20 * g);
        zr_cpy(m + 128 * b, blk + 16, 128);
        break;
    case ZR_T_Q5_K: { // q4_K's quants and side record; a word of fifth bits per item u: the bit of
                      // quant byte 4k + i's nibble t (ggml: bit 2(u/2) + t of qh[16(u%2) + 4k + i])
                      // at bit 2k + t of the word's byte i
        zr_k4_side(blk, side + 20 * g);
        uint8_t *q = m + 160 * b;
        zr_cpy(q, blk + 48, 128);
#pragma unroll 1
        for (int u = 0; u < 8; u++)
            for (int i = 0; i < 4; i++) {
                int v = 0;
                for (int k = 0; k < 4; k++)
                    for (int t = 0; t < 2; t++)
                        v |= ((blk[16 + 16 * (u & 1) + 4 * k + i] >> (2 * (u >> 1) + t)) & 1) << (2 * k + t);
                q[128 + 4 * u + i] = (uint8_t)v;
            }
        break;
    }
    case ZR_T_Q6_K: { // nib[128]: element 32u + 16t + i's low nibble at bit 4t of byte 16u + i;
                      // hb[64]: its high bits at bit 2*(i>>2) of byte 8u + 4t + (i&3)
        uint8_t *q = m + 192 * b;
#pragma unroll 1
        for (int u = 0; u < 8; u++)
            for (int i = 0; i < 16; i++)
                q[16 * u + i] = (uint8_t)(zr_q6_lo(blk, 32 * u + i) | zr_q6_lo(blk, 32 * u + 16 + i) << 4);
#pragma unroll 1
        for (int u = 0; u < 8; u++)
            for (int tt = 0; tt < 2; tt++)
                for (int k = 0; k < 4; k++) {
                    int v = 0;
                    for (int j = 0; j < 4; j++) v |= zr_q6_hi(blk, 32 * u + 16 * tt + 4 * j + k) << (2 * j);
                    q[128 + 8 * u + 4 * tt + k] = (uint8_t)v;
                }
        zr_cpy(side + 18 * g, blk + 192, 16);
        zr_cpy(side + 18 * g + 16, blk + 208, 2);
        break;
    }
    default: break;
    }
}
