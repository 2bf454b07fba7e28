/* Weight formats: ggml's type table, block layouts (ggml-common.h), row dequantization,
 * dot products against F32 vectors, and quantizers (ggml's reference ones for the simple
 * types, a plain scale search for the K-quants). */
#include "quant.h"

#include <math.h>
#include <string.h>

/* ---- the type table (ggml.c type_traits: name, block size, bytes per block) ---- */

static const ZrTypeInfo type_table[ZR_TYPE_COUNT] = {
    [0] = {"f32", 1, 4, true},
    [1] = {"f16", 1, 2, true},
    [2] = {"q4_0", 32, 18, true},
    [3] = {"q4_1", 32, 20, true},
    /* 4, 5: Q4_2 and Q4_3, removed from ggml */
    [6] = {"q5_0", 32, 22, true},
    [7] = {"q5_1", 32, 24, true},
    [8] = {"q8_0", 32, 34, true},
    [9] = {"q8_1", 32, 36, false},
    [10] = {"q2_K", 256, 84, true},
    [11] = {"q3_K", 256, 110, true},
    [12] = {"q4_K", 256, 144, true},
    [13] = {"q5_K", 256, 176, true},
    [14] = {"q6_K", 256, 210, true},
    [15] = {"q8_K", 256, 292, false},
    [16] = {"iq2_xxs", 256, 66, false},
    [17] = {"iq2_xs", 256, 74, false},
    [18] = {"iq3_xxs", 256, 98, false},
    [19] = {"iq1_s", 256, 50, false},
    [20] = {"iq4_nl", 32, 18, false},
    [21] = {"iq3_s", 256, 110, false},
    [22] = {"iq2_s", 256, 82, false},
    [23] = {"iq4_xs", 256, 136, false},
    [24] = {"i8", 1, 1, false},
    [25] = {"i16", 1, 2, false},
    [26] = {"i32", 1, 4, false},
    [27] = {"i64", 1, 8, false},
    [28] = {"f64", 1, 8, false},
    [29] = {"iq1_m", 256, 56, false},
    [30] = {"bf16", 1, 2, true},
    /* 31..33: Q4_0_4_4, Q4_0_4_8, Q4_0_8_8, removed (repacking is done at load time now) */
    [34] = {"tq1_0", 256, 54, false},
    [35] = {"tq2_0", 256, 66, false},
    /* 36..38: IQ4_NL_4_4, IQ4_NL_4_8, IQ4_NL_8_8, removed */
    [39] = {"mxfp4", 32, 17, false},
};

const ZrTypeInfo *zr_type_info(uint32_t type) {
    if (type >= ZR_TYPE_COUNT || type_table[type].name == NULL) return NULL;
    return &type_table[type];
}

const char *zr_type_name(uint32_t type) {
    const ZrTypeInfo *t = zr_type_info(type);
    return t ? t->name : "?";
}

size_t zr_row_bytes(uint32_t type, int64_t n) {
    const ZrTypeInfo *t = zr_type_info(type);
    if (!t || n < 0) return 0;
    return (size_t)(n / t->block) * t->bytes;
}

/* ---- half precision ---- */

float zr_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0); /* inf; nan quieted as F16C does */
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    } else {
        /* zero or subnormal: man * 2^-24, exact in f32 */
        float f = (float)man * 0x1p-24f;
        memcpy(&bits, &f, 4);
        bits |= sign;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t zr_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu)); /* nan stays nan */
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
    if (ax < 0x38800000u) {
        /* result is subnormal (or zero): value / 2^-24, rounded to nearest even */
        if (ax < 0x33000000u) return sign; /* < 2^-25: rounds to zero (2^-25 itself ties to 0) */
        uint32_t e = ax >> 23;              /* 102..112 */
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e;           /* m * 2^(e-150) / 2^-24 = m >> (126 - e) */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = ax - 0x38000000u; /* rebias exponent 127 -> 15 (in the f32 bit position) */
    uint32_t q = r >> 13;
    uint32_t rem = r & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1))) q++; /* carries into the exponent correctly */
    return (uint16_t)(sign | q);
}

float zr_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t zr_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet nan */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

/* ---- rows (first cut: the float types; block types follow) ---- */

void zr_dequant_row(uint32_t type, const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        switch (type) {
        case ZR_TYPE_F32: memcpy(&dst[i], p + 4 * i, 4); break;
        case ZR_TYPE_F16: memcpy(&h, p + 2 * i, 2); dst[i] = zr_f16_to_f32(h); break;
        case ZR_TYPE_BF16: memcpy(&h, p + 2 * i, 2); dst[i] = zr_bf16_to_f32(h); break;
        default: dst[i] = NAN; break;
        }
    }
}

float zr_dot_row(uint32_t type, const void *row, const float *x, int64_t n) {
    const uint8_t *p = row;
    float s = 0;
    for (int64_t i = 0; i < n; i++) {
        float v;
        zr_dequant_row(type, p + zr_row_bytes(type, i), &v, 1);
        s += v * x[i];
    }
    return s;
}

bool zr_quantize_row(uint32_t type, const float *src, void *dst, int64_t n) {
    uint8_t *p = dst;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        switch (type) {
        case ZR_TYPE_F32: memcpy(p + 4 * i, &src[i], 4); break;
        case ZR_TYPE_F16: h = zr_f32_to_f16(src[i]); memcpy(p + 2 * i, &h, 2); break;
        case ZR_TYPE_BF16: h = zr_f32_to_bf16(src[i]); memcpy(p + 2 * i, &h, 2); break;
        default: return false;
        }
    }
    return true;
}
