/* The device layout of the K-quants (cu/quant.cuh, src/cuda/weights.c): a row repacked for the
 * GPU, read back by the layout's own description (written out again here, independently of the
 * kernels), gives zr_dequant_row's values. The GPU tests then check that the kernels read the
 * same layout; this test runs everywhere and pins the layout itself. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/weights.h"
#include "quant.h"
#include "zt.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float rnd(void) { /* [-1, 1) */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)(rng >> 40) / 8388608.0f - 1.0f;
}

static float h2f(const uint8_t *p) { return zr_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

/* element e of row r of a repacked [n_in, n_out] matrix, by the documented layout */
static float q4_k_elem(const uint8_t *m, const uint8_t *s, int n_in, int r, int e) {
    const size_t g = (size_t)r * (n_in / 256) + e / 256;
    const int i = e % 256, j = i / 64, hi = (i / 32) % 2, l = i % 32;
    const uint8_t *sm = s + 20 * g + 4 * j, qb = m[128 * g + 32 * j + l];
    const int q = hi ? qb >> 4 : qb & 15;
    return h2f(s + 20 * g + 16) * sm[hi] * q - h2f(s + 20 * g + 18) * sm[2 + hi];
}

/* q2_K: element 64u + 16s + c at bits 2s of quant byte 16u + c; ggml's scale|min byte per 16
 * values, then (d, dmin) */
static float q2_k_elem(const uint8_t *m, const uint8_t *s, int n_in, int r, int e) {
    const size_t g = (size_t)r * (n_in / 256) + e / 256;
    const int i = e % 256, q = (m[64 * g + 16 * (i / 64) + i % 16] >> (2 * ((i / 16) % 4))) & 3, sc = s[20 * g + i / 16];
    return h2f(s + 20 * g + 16) * (float)(sc & 15) * (float)q - h2f(s + 20 * g + 18) * (float)(sc >> 4);
}

/* q3_K: element 64u + 16s + 4k + i has its low bits at bits 2s of quant byte 16u + 4k + i and its
 * high bit at bit 4(s&1) + k of byte 64 + 8u + 4(s>>1) + i; int8 scale per 16 values, then d */
static int q3_k_q(const uint8_t *b, int i) {
    const int u = i / 64, s = (i / 16) % 4, k = (i / 4) % 4, c = i % 4;
    return ((b[16 * u + 4 * k + c] >> (2 * s)) & 3) | ((b[64 + 8 * u + 4 * (s / 2) + c] >> (4 * (s % 2) + k)) & 1) << 2;
}
static float q3_k_elem(const uint8_t *m, const uint8_t *s, int n_in, int r, int e) {
    const size_t g = (size_t)r * (n_in / 256) + e / 256;
    const int i = e % 256;
    return h2f(s + 20 * g + 16) * (float)(int8_t)s[20 * g + i / 16] * (float)(q3_k_q(m + 96 * g, i) - 4);
}

/* q5_K: q4_K's quants and side record; the fifth bit of the element in quant byte 4k + i of item
 * u = 2j + hf (nibble t) is bit 2k + t of byte i of the word at 128 + 4u */
static float q5_k_elem(const uint8_t *m, const uint8_t *s, int n_in, int r, int e) {
    const size_t g = (size_t)r * (n_in / 256) + e / 256;
    const int i = e % 256, j = i / 64, t = (i / 32) % 2, l = i % 32, u = 2 * j + l / 16, k = (l % 16) / 4;
    const uint8_t *b = m + 160 * g, *sm = s + 20 * g + 4 * j;
    const int q = ((b[32 * j + l] >> (4 * t)) & 15) | ((b[128 + 4 * u + l % 4] >> (2 * k + t)) & 1) << 4;
    return h2f(s + 20 * g + 16) * sm[t] * q - h2f(s + 20 * g + 18) * sm[2 + t];
}

static float q6_k_elem(const uint8_t *m, const uint8_t *s, int n_in, int r, int e) {
    const size_t g = (size_t)r * (n_in / 256) + e / 256;
    const int i = e % 256, u = i / 32, t = (i / 16) % 2, k = i % 16;
    const uint8_t *b = m + 192 * g;
    const int lo = (b[16 * u + k] >> (4 * t)) & 15;
    const uint8_t *hw = b + 128 + 8 * u + 4 * t; /* a little-endian word: bit n is bit n%8 of byte n/8 */
    const int bit = 8 * (k % 4) + 2 * (k / 4);
    const int hb = (hw[bit / 8] >> (bit % 8)) & 3;
    return h2f(s + 18 * g + 16) * (float)(int8_t)s[18 * g + i / 16] * (float)((lo | hb << 4) - 32);
}

static void check_type(uint32_t type, float (*elem)(const uint8_t *, const uint8_t *, int, int, int)) {
    const int n_in = 512, n_out = 3;
    const size_t rb = zr_row_bytes(type, n_in), mrb = zr_cuw_main_row_bytes(type, n_in),
                 sb = zr_cuw_side_bytes(type, n_in, n_out);
    ZT_CHECK(mrb % 16 == 0);
    uint8_t *w = malloc(rb * n_out), *m = malloc(mrb * n_out), *s = malloc(sb);
    float *x = malloc(sizeof(float) * n_in), *ref = malloc(sizeof(float) * n_in);
    for (int r = 0; r < n_out; r++) {
        for (int i = 0; i < n_in; i++) x[i] = 0.1f * (float)(r + 1) * rnd() + 0.02f;
        ZT_CHECK(zr_quantize_row(type, x, w + rb * r, n_in));
    }
    memset(m, 0xAA, mrb * n_out);
    memset(s, 0xAA, sb);
    /* rows in reverse order: a row's place comes from r, not from the call order */
    for (int r = n_out - 1; r >= 0; r--) zr_cuw_repack_row(type, w + rb * r, n_in, r, n_out, m, s);
    int bad = 0;
    for (int r = 0; r < n_out; r++) {
        zr_dequant_row(type, w + rb * r, ref, n_in);
        float amax = 0.f;
        for (int e = 0; e < n_in; e++) amax = fmaxf(amax, fabsf(ref[e]));
        /* rounding differs (the order of d * scale * q - dmin * min); a misplaced bit, scale or
         * nibble is off by a quantization step, ~1e-2 of amax or more */
        for (int e = 0; e < n_in; e++) {
            const float v = elem(m, s, n_in, r, e);
            if (fabsf(v - ref[e]) > 1e-5f * amax && bad++ < 5)
                ZT_CHECKF(0, "%s row %d [%d]: layout gives %g, zr_dequant_row %g", zr_type_name(type), r, e, v, ref[e]);
        }
    }
    ZT_CHECKF(bad == 0, "%s: %d values differ", zr_type_name(type), bad);
    free(w), free(m), free(s), free(x), free(ref);
}

/* A file with general.alignment = 1 hands the upload rows at any address: every type's repack
 * reads its source bytewise, so a row one byte off gives the same device bytes (and, under
 * UBSan in CI, no misaligned load). */
ZT_TEST(rows_at_odd_addresses_repack_like_aligned_ones) {
    for (uint32_t type = 0; type < ZR_TYPE_COUNT; type++) {
        if (!zr_cuw_supported(type)) continue;
        const int n_in = 512, N = 2;
        const size_t row = zr_row_bytes(type, n_in), mb = zr_cuw_main_row_bytes(type, n_in) * N,
                     sb = zr_cuw_side_bytes(type, n_in, N) + 1;
        uint8_t *src = malloc(2 * row + 1), *m1 = calloc(1, mb), *m2 = calloc(1, mb), *s1 = calloc(1, sb), *s2 = calloc(1, sb);
        ZT_CHECK(src && m1 && m2 && s1 && s2);
        for (size_t i = 0; i < 2 * row + 1; i++) src[i] = (uint8_t)(rng = rng * 6364136223846793005ull + 1, rng >> 56);
        uint8_t *aligned = malloc(2 * row);
        ZT_CHECK(aligned != NULL);
        memcpy(aligned, src + 1, 2 * row);
        for (int r = 0; r < N; r++) {
            zr_cuw_repack_row(type, aligned + r * row, n_in, r, N, m1, s1);
            zr_cuw_repack_row(type, src + 1 + r * row, n_in, r, N, m2, s2);
        }
        bool same = memcmp(m1, m2, mb) == 0 && memcmp(s1, s2, sb) == 0;
        free(src);
        free(aligned);
        free(m1);
        free(m2);
        free(s1);
        free(s2);
        ZT_CHECKF(same, "type %s", zr_type_name(type));
    }
}

ZT_TEST(q4_k_rows_repack_to_quants_and_decoded_scales_and_mins) { check_type(ZR_TYPE_Q4_K, q4_k_elem); }
ZT_TEST(q2_k_rows_repack_to_regrouped_quants_and_scale_bytes) { check_type(ZR_TYPE_Q2_K, q2_k_elem); }
ZT_TEST(q3_k_rows_repack_to_regrouped_low_and_high_bits_and_int8_scales) { check_type(ZR_TYPE_Q3_K, q3_k_elem); }
ZT_TEST(q5_k_rows_repack_to_quants_fifth_bit_words_and_decoded_scales_and_mins) { check_type(ZR_TYPE_Q5_K, q5_k_elem); }
/* The matrix-vector kernel's reading of a q5_K item (cu/matvec.cuh ZrMvQ5K::comp), done here on
 * the same words: quant word k and the item's fifth-bit word h give, per byte, q << 2 for the
 * low and the high nibbles' elements, and that byte under 0x3F is the float 0.5 + q/64. Every q of
 * a repacked row must be ggml's (its qs nibble and qh bit, read from the file's block). */
ZT_TEST(q5_k_items_decode_to_ggml_quants_the_way_the_kernel_reads_them) {
    const int n_in = 512;
    uint8_t w[2 * 176], m[2 * 160], s[2 * 20];
    float x[512];
    for (int i = 0; i < n_in; i++) x[i] = rnd();
    ZT_CHECK(zr_quantize_row(ZR_TYPE_Q5_K, x, w, n_in));
    zr_cuw_repack_row(ZR_TYPE_Q5_K, w, n_in, 0, 1, m, s);
    int bad = 0, fifth = 0;
    for (int it = 0; it < n_in / 32; it++) {
        const int sb = it / 8, u = it % 8, j = u / 2, hf = u % 2;
        const uint8_t *blk = w + 176 * sb, *item = m + 160 * sb + 16 * u, *hw = m + 160 * sb + 128 + 4 * u;
        const uint32_t h = (uint32_t)hw[0] | (uint32_t)hw[1] << 8 | (uint32_t)hw[2] << 16 | (uint32_t)hw[3] << 24;
        for (int k = 0; k < 4; k++) {
            const uint8_t *p = item + 4 * k;
            const uint32_t w4 = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
            const uint32_t hk = h >> (2 * k);
            const uint32_t lo = ((w4 << 2) & 0x3C3C3C3Cu) | ((hk << 6) & 0x40404040u);
            const uint32_t hi = ((w4 >> 2) & 0x3C3C3C3Cu) | ((hk << 5) & 0x40404040u);
            for (int i = 0; i < 8; i++) {
                const int t = i / 4, l = 16 * hf + 4 * k + i % 4; /* t: high nibble */
                const uint32_t bits = 0x3F000000u | ((((t ? hi : lo) >> (8 * (i % 4))) & 0xFF) << 16);
                float f;
                memcpy(&f, &bits, 4);
                const int got = (int)((f - 0.5f) * 64.0f);
                const int want = ((blk[48 + 32 * j + l] >> (4 * t)) & 15) | ((blk[16 + l] >> (2 * j + t)) & 1) << 4;
                fifth += want >> 4;
                if ((got != want || (f - 0.5f) * 64.0f != (float)got) && bad++ < 5)
                    ZT_CHECKF(0, "item %d word %d byte %d: the kernel's reading gives %g, ggml's q is %d", it, k, i,
                              (double)((f - 0.5f) * 64.0f), want);
            }
        }
    }
    ZT_CHECKF(bad == 0, "%d quants differ", bad);
    ZT_CHECKF(fifth > 0 && fifth < n_in, "the row sets %d fifth bits of %d: both kinds must occur", fifth, n_in);
}

/* The same for q3_K (cu/matvec.cuh ZrMvQ3K::comp): quant word k at group s and the item's high-bit
 * word of s give, per byte, q << 4 (q = the 3-bit value), the float 0.5 + q/16 under 0x3F; every
 * q - 4 of a repacked row is ggml's (qs bits and hmask bit of the file's block), and the scales
 * the kernel reads (int8 bytes of one word per item) are ggml's. */
ZT_TEST(q3_k_items_decode_to_ggml_quants_the_way_the_kernel_reads_them) {
    const int n_in = 512;
    uint8_t w[2 * 110], m[2 * 96], sd[2 * 20];
    float x[512];
    for (int i = 0; i < n_in; i++) x[i] = rnd();
    ZT_CHECK(zr_quantize_row(ZR_TYPE_Q3_K, x, w, n_in));
    zr_cuw_repack_row(ZR_TYPE_Q3_K, w, n_in, 0, 1, m, sd);
    int bad = 0, high = 0;
    for (int it = 0; it < n_in / 64; it++) {
        const int sb = it / 4, u = it % 4;
        const uint8_t *blk = w + 110 * sb, *item = m + 96 * sb + 16 * u, *hp = m + 96 * sb + 64 + 8 * u;
        for (int s = 0; s < 4; s++) {
            const uint8_t *hq = hp + 4 * (s / 2);
            const uint32_t hw = (uint32_t)hq[0] | (uint32_t)hq[1] << 8 | (uint32_t)hq[2] << 16 | (uint32_t)hq[3] << 24;
            const int sc = (int8_t)sd[20 * sb + 4 * u + s];
            /* ggml's scale of the group: k3 packing, minus 32 */
            const int t = 4 * u + s, sl = t < 8 ? blk[96 + t] & 15 : blk[96 + t - 8] >> 4;
            const int want_sc = (sl | ((blk[104 + t % 4] >> (2 * (t / 4))) & 3) << 4) - 32;
            if (sc != want_sc && bad++ < 5) ZT_CHECKF(0, "item %d group %d: scale %d, ggml's %d", it, s, sc, want_sc);
            for (int k = 0; k < 4; k++) {
                const uint8_t *p = item + 4 * k;
                const uint32_t w4 = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
                const int hb = 4 * (s % 2) + k;
                const uint32_t lo = 2 * s <= 4 ? w4 << (4 - 2 * s) : w4 >> (2 * s - 4);
                const uint32_t hi = hb <= 6 ? hw << (6 - hb) : hw >> (hb - 6);
                const uint32_t q = (lo & 0x30303030u) | (hi & 0x40404040u);
                for (int i = 0; i < 4; i++) {
                    const uint32_t bits = 0x3F000000u | ((q >> (8 * i)) & 0xFF) << 16;
                    float f;
                    memcpy(&f, &bits, 4);
                    const float got = (f - 0.5f) * 16.0f - 4.0f;
                    const int e = 64 * u + 16 * s + 4 * k + i, n = e / 128, j = (e / 32) % 4, l = e % 32;
                    const int hbit = (blk[l] >> (4 * n + j)) & 1;
                    const int want = ((blk[32 + 32 * n + l] >> (2 * j)) & 3) - (hbit ? 0 : 4);
                    high += hbit;
                    if (got != (float)want && bad++ < 5)
                        ZT_CHECKF(0, "item %d group %d word %d byte %d: the kernel's reading gives %g, ggml's q is %d", it,
                                  s, k, i, (double)got, want);
                }
            }
        }
    }
    ZT_CHECKF(bad == 0, "%d quants or scales differ", bad);
    ZT_CHECKF(high > 0 && high < n_in, "the row sets %d high bits of %d: both kinds must occur", high, n_in);
}

/* The same for q2_K (cu/matvec.cuh ZrMvQ2K::comp): quant word k at group s gives, per byte, q << 4,
 * the float 0.5 + q/16 under 0x3F; every q of a repacked row is ggml's, and the scale|min byte
 * the kernel reads for the group is ggml's. */
ZT_TEST(q2_k_items_decode_to_ggml_quants_the_way_the_kernel_reads_them) {
    const int n_in = 512;
    uint8_t w[2 * 84], m[2 * 64], sd[2 * 20];
    float x[512];
    for (int i = 0; i < n_in; i++) x[i] = rnd();
    ZT_CHECK(zr_quantize_row(ZR_TYPE_Q2_K, x, w, n_in));
    zr_cuw_repack_row(ZR_TYPE_Q2_K, w, n_in, 0, 1, m, sd);
    int bad = 0, seen[4] = {0};
    for (int it = 0; it < n_in / 64; it++) {
        const int sb = it / 4, u = it % 4;
        const uint8_t *blk = w + 84 * sb, *item = m + 64 * sb + 16 * u;
        for (int s = 0; s < 4; s++) {
            if (sd[20 * sb + 4 * u + s] != blk[4 * u + s] && bad++ < 5)
                ZT_CHECKF(0, "item %d group %d: scale byte %d, ggml's %d", it, s, sd[20 * sb + 4 * u + s], blk[4 * u + s]);
            for (int k = 0; k < 4; k++) {
                const uint8_t *p = item + 4 * k;
                const uint32_t w4 = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
                const uint32_t q = (2 * s <= 4 ? w4 << (4 - 2 * s) : w4 >> (2 * s - 4)) & 0x30303030u;
                for (int i = 0; i < 4; i++) {
                    const uint32_t bits = 0x3F000000u | ((q >> (8 * i)) & 0xFF) << 16;
                    float f;
                    memcpy(&f, &bits, 4);
                    const float got = (f - 0.5f) * 16.0f;
                    const int e = 64 * u + 16 * s + 4 * k + i, n = e / 128, j = (e / 32) % 4, l = e % 32;
                    const int want = (blk[16 + 32 * n + l] >> (2 * j)) & 3;
                    seen[want]++;
                    if (got != (float)want && bad++ < 5)
                        ZT_CHECKF(0, "item %d group %d word %d byte %d: the kernel's reading gives %g, ggml's q is %d", it,
                                  s, k, i, (double)got, want);
                }
            }
        }
        ZT_CHECKF(memcmp(sd + 20 * sb + 16, blk + 80, 4) == 0, "super-block %d: (d, dmin) differ", sb);
    }
    ZT_CHECKF(bad == 0, "%d quants or scales differ", bad);
    ZT_CHECKF(seen[0] && seen[1] && seen[2] && seen[3], "every 2-bit value occurs: %d %d %d %d", seen[0], seen[1], seen[2],
              seen[3]);
}

ZT_TEST(q6_k_rows_repack_to_nibbles_high_bits_and_scales) { check_type(ZR_TYPE_Q6_K, q6_k_elem); }

int main(void) { return zt_run(); }
