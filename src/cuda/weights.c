#include "cuda/weights.h"

#include <string.h>

#include "quant.h"

/* The layout facts of each type (bytes per block in each stream) are columns of the type table,
 * src/zr_types.def; what is per-type code here is the repacking below. */

bool zr_cuw_supported(uint32_t type) { return zr_type_kernel_suffix(type) != NULL; }

size_t zr_cuw_main_row_bytes(uint32_t type, int64_t n_in) {
    const ZrTypeInfo *ti = zr_type_info(type);
    if (!ti || !ti->main) return 0;
    return ((size_t)(n_in / ti->block) * ti->main + 15) & ~(size_t)15;
}

size_t zr_cuw_side_bytes(uint32_t type, int64_t n_in, int64_t n_rows) {
    const ZrTypeInfo *ti = zr_type_info(type);
    if (!ti || !ti->side) return 0;
    return (size_t)ti->side * (size_t)(n_in / ti->block) * (size_t)n_rows;
}

/* q4_K / q5_K: 6-bit scale (or min, at +4) of sub-block j (0..7) from ggml's 12 bytes. */
static uint8_t k4_scale(const uint8_t *s, int j) {
    return j < 4 ? (uint8_t)(s[j] & 63) : (uint8_t)((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
}
static uint8_t k4_min(const uint8_t *s, int j) {
    return j < 4 ? (uint8_t)(s[j + 4] & 63) : (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
}

/* q3_K: scale j (0..15) from ggml's 12 bytes, minus 32 (ggml's k3 packing: low nibble in byte
 * j%8 (high nibble for j >= 8), top two bits at bit 2*(j/4) of byte 8 + j%4). */
static int k3_scale(const uint8_t *s, int j) {
    const int lo = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4), hi = (s[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
    return (lo | hi << 4) - 32;
}

/* q2_K / q3_K: the 2 low bits of element e (0..255) from ggml's qs[64] (element 128n + 32j + l
 * at bits 2j of qs[32n + l]). */
static int k23_q2(const uint8_t *qs, int e) { return (qs[32 * (e >> 7) + (e & 31)] >> (2 * ((e >> 5) & 3))) & 3; }

/* One ggml q2_K block (scales[16] qs[64] d dmin) as 64 B of regrouped 2-bit quants (as q3_K's
 * low bits) and the side record: ggml's 16 scale|min bytes, then (d, dmin) (cu/quant.cuh). */
static void repack_q2_k(const uint8_t *blk, uint8_t *m, uint8_t *sd) {
    memset(m, 0, 64);
    for (int e = 0; e < 256; e++) m[16 * (e >> 6) + (e & 15)] |= (uint8_t)(k23_q2(blk + 16, e) << (2 * ((e >> 4) & 3)));
    memcpy(sd, blk, 16);
    memcpy(sd + 16, blk + 80, 4);
}

/* One ggml q3_K block (hmask[32] qs[64] scales[12] d) as 64 B of regrouped 2-bit quants (element
 * 64u + 16s + 4k + i at bits 2s of byte 16u + 4k + i), 32 B of high bits (its bit at bit 4(s&1) + k
 * of byte 64 + 8u + 4(s>>1) + i) and the side record: the 16 scales minus 32 as int8, d, 2 zero
 * bytes (cu/quant.cuh). */
static void repack_q3_k(const uint8_t *blk, uint8_t *m, uint8_t *sd) {
    memset(m, 0, 96);
    for (int e = 0; e < 256; e++) {
        const int u = e >> 6, s = (e >> 4) & 3, k = (e >> 2) & 3, i = e & 3;
        const int h = (blk[e & 31] >> (4 * (e >> 7) + ((e >> 5) & 3))) & 1;
        m[16 * u + 4 * k + i] |= (uint8_t)(k23_q2(blk + 32, e) << (2 * s));
        m[64 + 8 * u + 4 * (s >> 1) + i] |= (uint8_t)(h << (4 * (s & 1) + k));
    }
    for (int j = 0; j < 16; j++) sd[j] = (uint8_t)(int8_t)k3_scale(blk + 96, j);
    memcpy(sd + 16, blk + 108, 2);
    sd[18] = sd[19] = 0;
}

/* The side record of a q4_K / q5_K block (d dmin scales[12] ...): 4 words of decoded scale/min
 * bytes, then (d, dmin) (cu/quant.cuh). */
static void k4_side(const uint8_t *blk, uint8_t *sm) {
    const uint8_t *sc = blk + 4;
    for (int j = 0; j < 4; j++) {
        sm[4 * j + 0] = k4_scale(sc, 2 * j);
        sm[4 * j + 1] = k4_scale(sc, 2 * j + 1);
        sm[4 * j + 2] = k4_min(sc, 2 * j);
        sm[4 * j + 3] = k4_min(sc, 2 * j + 1);
    }
    memcpy(sm + 16, blk, 4);
}

/* One ggml q4_K block (d dmin scales[12] qs[128]) as 128 B of quants and its side record. */
static void repack_q4_k(const uint8_t *blk, uint8_t *m, uint8_t *sm) {
    k4_side(blk, sm);
    memcpy(m, blk + 16, 128);
}

/* One ggml q5_K block (d dmin scales[12] qh[32] qs[128]) as q4_K's quants and side record, then a
 * word of fifth bits per 16-byte item u = 2j + hf (cu/quant.cuh): the bit of the element in quant
 * byte 4k + i of the item (t = 0: its low nibble, 1: its high one) -- ggml's bit 2j + t of
 * qh[16hf + 4k + i] -- at bit 2k + t of the word's byte i. */
static void repack_q5_k(const uint8_t *blk, uint8_t *m, uint8_t *sm) {
    k4_side(blk, sm);
    memcpy(m, blk + 48, 128);
    memset(m + 128, 0, 32);
    for (int u = 0; u < 8; u++)
        for (int k = 0; k < 4; k++)
            for (int i = 0; i < 4; i++)
                for (int t = 0; t < 2; t++) {
                    const int bit = (blk[16 + 16 * (u & 1) + 4 * k + i] >> (2 * (u >> 1) + t)) & 1;
                    m[128 + 4 * u + i] |= (uint8_t)(bit << (2 * k + t));
                }
}

/* One ggml q6_K block (ql[128] qh[64] scales[16] d) regrouped as nib[128] hb[64] (cu/quant.cuh:
 * element 32u + 16t + i has its low nibble in nib[16u + i] at bit 4t and its high two bits in
 * the word at hb + 8u + 4t, bits 8*(i&3) + 2*(i>>2)), the scales and d into the side stream. */
static void repack_q6_k(const uint8_t *blk, uint8_t *m, uint8_t *sc, uint8_t *d) {
    memset(m, 0, 192);
    for (int e = 0; e < 256; e++) {
        const int h = e >> 7, g4 = (e >> 5) & 3, l = e & 31;
        const uint8_t qlb = blk[64 * h + 32 * (g4 & 1) + l];
        const int lo = (g4 & 2) ? qlb >> 4 : qlb & 0xF;
        const int hi = (blk[128 + 32 * h + l] >> (2 * g4)) & 3;
        const int u = e >> 5, t = (e >> 4) & 1, i = e & 15;
        m[16 * u + i] |= (uint8_t)(lo << (4 * t));
        /* little-endian word: bit 8*(i&3) + 2*(i>>2) is bit 2*(i>>2) of byte i&3 */
        m[128 + 8 * u + 4 * t + (i & 3)] |= (uint8_t)(hi << (2 * (i >> 2)));
    }
    memcpy(sc, blk + 192, 16);
    memcpy(d, blk + 208, 2);
}

void zr_cuw_repack_row(uint32_t type, const void *src, int64_t n_in, int64_t r, int64_t N, uint8_t *main,
                       uint8_t *side) {
    const ZrTypeInfo *ti = zr_type_info(type);
    if (!ti || !ti->main) return; /* no device layout */
    const uint8_t *s = src;
    const size_t rb = zr_cuw_main_row_bytes(type, n_in);
    uint8_t *m = main + (size_t)r * rb;
    const int64_t nb = n_in / ti->block;
    const size_t g0 = (size_t)r * nb, Nb = (size_t)N * nb; /* first block of the row, blocks in all */
    if (ti->block == 1) { /* the float types: the row as it is, padded */
        const size_t n = zr_row_bytes(type, n_in);
        memcpy(m, s, n);
        memset(m + n, 0, rb - n);
        return;
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = s + b * ti->bytes;
        const size_t g = g0 + b;
        switch (type) {
        case ZR_TYPE_Q8_0: memcpy(side + 2 * g, blk, 2); memcpy(m + 32 * b, blk + 2, 32); break;
        case ZR_TYPE_Q4_0: memcpy(side + 2 * g, blk, 2); memcpy(m + 16 * b, blk + 2, 16); break;
        case ZR_TYPE_Q4_1: memcpy(side + 4 * g, blk, 4); memcpy(m + 16 * b, blk + 4, 16); break;
        case ZR_TYPE_Q5_0:
            memcpy(side + 4 * g, blk + 2, 4);
            memcpy(side + 4 * Nb + 2 * g, blk, 2);
            memcpy(m + 16 * b, blk + 6, 16);
            break;
        case ZR_TYPE_Q5_1:
            memcpy(side + 4 * g, blk + 4, 4);
            memcpy(side + 4 * Nb + 4 * g, blk, 4);
            memcpy(m + 16 * b, blk + 8, 16);
            break;
        case ZR_TYPE_Q2_K: repack_q2_k(blk, m + 64 * b, side + 20 * g); break;
        case ZR_TYPE_Q3_K: repack_q3_k(blk, m + 96 * b, side + 20 * g); break;
        case ZR_TYPE_Q4_K: repack_q4_k(blk, m + 128 * b, side + 20 * g); break;
        case ZR_TYPE_Q5_K: repack_q5_k(blk, m + 160 * b, side + 20 * g); break;
        case ZR_TYPE_Q6_K: repack_q6_k(blk, m + 192 * b, side + 18 * g, side + 18 * g + 16); break;
        default: break;
        }
    }
}
