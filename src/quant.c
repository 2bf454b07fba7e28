/* Weight formats: ggml's type table, block layouts (ggml-common.h), row dequantization,
 * dot products against F32 vectors, and quantizers (ggml's reference ones for the simple
 * types, a plain scale search for the K-quants). */
#include "quant.h"

#include <math.h>
#include <string.h>

/* The block decoders are inlined into every (multiversioned) row loop: an out-of-line copy
 * would be compiled for the baseline target only. */
#define ZR_INLINE static inline __attribute__((always_inline))

/* ---- the type table (src/zr_types.def; ggml.c type_traits) ---- */

static const ZrTypeInfo type_table[ZR_TYPE_COUNT] = {
#define ZR_TYPE(id, E, name, block, bytes, kernel, item, main, side) \
    [id] = {name, block, bytes, true, #kernel, item, main, side},
#define ZR_TYPE_SIZE(id, E, name, block, bytes) [id] = {name, block, bytes, false, NULL, 0, 0, 0},
#include "zr_types.def"
};

const ZrTypeInfo *zr_type_info(uint32_t type) {
    if (type >= ZR_TYPE_COUNT || type_table[type].name == NULL) return NULL;
    return &type_table[type];
}

const char *zr_type_name(uint32_t type) {
    const ZrTypeInfo *t = zr_type_info(type);
    return t ? t->name : "?";
}

const char *zr_type_kernel_suffix(uint32_t type) {
    const ZrTypeInfo *t = zr_type_info(type);
    return t ? t->kernel : NULL;
}

static const struct {
    uint32_t id, type;
    const char *name;
} file_types[] = {
#define ZR_FTYPE(id, E, type) {id, ZR_TYPE_##type, #E},
#include "zr_types.def"
};

const char *zr_file_type_name(uint32_t ftype) {
    for (size_t i = 0; i < sizeof file_types / sizeof file_types[0]; i++)
        if (file_types[i].id == ftype) return file_types[i].name;
    return NULL;
}

uint32_t zr_file_type_of(uint32_t type) {
    for (size_t i = 0; i < sizeof file_types / sizeof file_types[0]; i++)
        if (file_types[i].type == type) return file_types[i].id;
    return UINT32_MAX;
}

size_t zr_row_bytes(uint32_t type, int64_t n) {
    const ZrTypeInfo *t = zr_type_info(type);
    if (!t || n < 0) return 0;
    return (size_t)(n / t->block) * t->bytes;
}

/* ---- half precision ---- */

/* Branch-free: the exponent/mantissa bits placed in an f32 and scaled by 2^112 give every
 * finite half exactly, subnormals included. f16x8 below does the same on 8 lanes. */
ZR_INLINE float f16_to_f32(uint16_t h) {
    uint32_t em = (uint32_t)(h & 0x7fffu) << 13;
    float f;
    memcpy(&f, &em, 4);
    f *= 0x1p112f;
    uint32_t bits;
    memcpy(&bits, &f, 4);
    /* inf and nan: the scaled exponent (143) is a subset of all-ones, so OR-ing them in gives
     * the right bits; nan is quieted as F16C does */
    uint32_t special = 0u - (uint32_t)((h & 0x7c00u) == 0x7c00u);
    uint32_t quiet = (h & 0x3ffu) ? 0x400000u : 0u;
    bits |= special & (0x7f800000u | quiet);
    bits |= (uint32_t)(h & 0x8000u) << 16;
    memcpy(&f, &bits, 4);
    return f;
}

float zr_f16_to_f32(uint16_t h) { return f16_to_f32(h); }

/* Round to nearest even without a loop or table: normals round by adding half an ulp (plus
 * the kept bit's parity) before truncating; subnormal results let the FPU do the rounding by
 * adding a magic number whose ulp is the half's smallest subnormal. */
uint16_t zr_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    const uint32_t sign = x & 0x80000000u;
    x ^= sign;
    uint32_t o;
    if (x >= 0x47800000u) {                 /* >= 65536, inf or nan */
        o = x > 0x7f800000u ? 0x7e00u : 0x7c00u;
    } else if (x < 0x38800000u) {           /* < 2^-14: a subnormal half or zero */
        const uint32_t magic_bits = 0x3f000000u; /* 0.5: its ulp is 2^-24 */
        float magic, v;
        memcpy(&magic, &magic_bits, 4);
        memcpy(&v, &x, 4);
        v += magic;
        memcpy(&o, &v, 4);
        o -= magic_bits;
    } else {
        const uint32_t odd = (x >> 13) & 1u;
        x += 0xc8000fffu + odd;             /* rebias 127 -> 15, add half an ulp (ties to even) */
        o = x >> 13;                        /* a carry into the exponent is the right result, 65520+ -> inf */
    }
    return (uint16_t)(o | (sign >> 16));
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

/* ---- block layouts (byte offsets as in ggml-common.h; all little-endian) ----
 * q4_0  18 B / 32:  d f16 | qs[16]                    x = d * (q - 8),   q = nibble
 * q4_1  20 B / 32:  d f16 | m f16 | qs[16]            x = d * q + m
 * q5_0  22 B / 32:  d f16 | qh u32 | qs[16]           x = d * (q - 16),  q = nibble | qh bit << 4
 * q5_1  24 B / 32:  d f16 | m f16 | qh u32 | qs[16]   x = d * q + m
 * q8_0  34 B / 32:  d f16 | qs i8[32]                 x = d * q
 *   In the 32-element types byte j holds element j (low nibble) and j + 16 (high nibble);
 *   qh bit j is element j's fifth bit.
 * q2_K  84 B / 256:  scales[16] | qs[64] | d f16 | dmin f16
 *   16 sub-blocks of 16: x = d * (sc & 15) * q - dmin * (sc >> 4), q in 0..3
 * q3_K 110 B / 256:  hmask[32] | qs[64] | scales[12] | d f16
 *   16 sub-blocks of 16: x = d * (s - 32) * (q - 4), s 6 bits, q = 2 low bits | hmask bit << 2
 * q4_K 144 B / 256:  d f16 | dmin f16 | scales[12] | qs[128]
 *   8 sub-blocks of 32: x = d * s * q - dmin * m, s and m 6 bits, q in 0..15
 * q5_K 176 B / 256:  d f16 | dmin f16 | scales[12] | qh[32] | qs[128]     q in 0..31
 * q6_K 210 B / 256:  ql[128] | qh[64] | scales i8[16] | d f16
 *   16 sub-blocks of 16: x = d * sc * (q - 32), q = 4 low bits | 2 high bits << 4
 * Element e of a 256-block sits, for the 2-bit fields, in byte 32*(e/128) + e%32 at bit
 * 2*((e%128)/32); that is, each 128-half is four 32-element planes of one byte array. */

ZR_INLINE float ld_f16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return f16_to_f32(h);
}

static inline void st_f16(uint8_t *p, float f) {
    uint16_t h = zr_f32_to_f16(f);
    memcpy(p, &h, 2);
}

/* q4_K / q5_K: 8 (scale, min) pairs of 6 bits in 12 bytes. Pairs 0..3 are the low 6 bits of
 * bytes 0..3 (scales) and 4..7 (mins); pairs 4..7 are nibbles of bytes 8..11 with their top
 * two bits in the spare top bits of bytes 0..7. */
ZR_INLINE void k4_scale_min(const uint8_t *s, int j, float *sc, float *m) {
    if (j < 4) {
        *sc = (float)(s[j] & 63);
        *m = (float)(s[j + 4] & 63);
    } else {
        *sc = (float)((s[j + 4] & 0xf) | ((s[j - 4] >> 6) << 4));
        *m = (float)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

/* q3_K: 16 six-bit scales in 12 bytes: scale j's low nibble is byte j%8 (low nibble for
 * j < 8, high for j >= 8), its top two bits are bits 2*(j/4) of byte 8 + j%4. */
ZR_INLINE int k3_scale(const uint8_t *s, int j) {
    int lo = j < 8 ? (s[j] & 0xf) : (s[j - 8] >> 4);
    int hi = (s[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
    return (lo | (hi << 4)) - 32;
}

/* Block decoding works on 8 elements at a time with GCC/Clang vector extensions (plain C
 * everywhere else in the file): the compiler lowers them to AVX2 in the x86-64-v3 clones of
 * the row functions, to SSE2 otherwise, and to scalar code on other targets. Written as loops
 * over bytes, gcc 12 unrolls and then fails to vectorize the u8 -> f32 widening (measured:
 * 1.2 G elements/s for q4_0 versus 8+ with the vectors). */
typedef uint8_t ZrU8x8 __attribute__((vector_size(8)));
typedef uint16_t ZrU16x4 __attribute__((vector_size(8)));
typedef uint16_t ZrU16x8 __attribute__((vector_size(16)));
typedef int32_t ZrI32x8 __attribute__((vector_size(32)));
typedef uint32_t ZrU32x8 __attribute__((vector_size(32)));
typedef float ZrF32x8 __attribute__((vector_size(32)));

ZR_INLINE ZrU8x8 ld8(const uint8_t *p) {
    ZrU8x8 v;
    memcpy(&v, p, 8);
    return v;
}

/* Byte shifts through 16-bit lanes (x86 has no byte shift; gcc would go scalar), masking off
 * the bits that cross from the neighbouring byte. */
ZR_INLINE ZrU8x8 shr8(ZrU8x8 v, int s) { return (ZrU8x8)((ZrU16x4)v >> s) & (uint8_t)(0xffu >> s); }
ZR_INLINE ZrU8x8 shl8(ZrU8x8 v, int s) { return (ZrU8x8)((ZrU16x4)v << s) & (uint8_t)(0xffu << s); }

/* y[0..8) = (q - bias) * s */
ZR_INLINE void put8s(float *restrict y, ZrU8x8 q, int bias, float s) {
    ZrI32x8 i = __builtin_convertvector(q, ZrI32x8) - bias;
    ZrF32x8 f = __builtin_convertvector(i, ZrF32x8) * s;
    memcpy(y, &f, sizeof f);
}

/* y[0..8) = q * s + o */
ZR_INLINE void put8a(float *restrict y, ZrU8x8 q, float s, float o) {
    ZrF32x8 f = __builtin_convertvector(__builtin_convertvector(q, ZrI32x8), ZrF32x8) * s + o;
    memcpy(y, &f, sizeof f);
}

/* 0x10 in each lane whose bit is set in `byte` (lane i <-> bit i): the fifth bit of q5_0/q5_1 */
ZR_INLINE ZrU8x8 bit4_lanes(uint8_t byte) {
    const ZrU8x8 bit = {1, 2, 4, 8, 16, 32, 64, 128};
    ZrU8x8 b = (ZrU8x8){0} + byte;
    return (ZrU8x8)((b & bit) != 0) & 0x10;
}

/* 8 halves (16 bytes) to f32, the same arithmetic as f16_to_f32 lane-wise */
ZR_INLINE void f16x8(float *restrict y, const uint8_t *p) {
    ZrU16x8 h;
    memcpy(&h, p, 16);
    ZrU32x8 u = __builtin_convertvector(h, ZrU32x8);
    ZrU32x8 bits = (ZrU32x8)((ZrF32x8)((u & 0x7fffu) << 13) * 0x1p112f);
    ZrU32x8 nan_quiet = (ZrU32x8)((u & 0x3ffu) != 0) & 0x400000u;
    bits |= (ZrU32x8)((u & 0x7c00u) == 0x7c00u) & (0x7f800000u | nan_quiet);
    bits |= (u & 0x8000u) << 16;
    memcpy(y, &bits, sizeof bits);
}

/* One block each: b points at the block, y receives its 32 or 256 values. */

ZR_INLINE void deq_q4_0(const uint8_t *restrict b, float *restrict y) {
    const float d = ld_f16(b);
    for (int h = 0; h < 2; h++) {
        ZrU8x8 v = ld8(b + 2 + 8 * h);
        put8s(y + 8 * h, v & 0xf, 8, d);
        put8s(y + 16 + 8 * h, shr8(v, 4), 8, d);
    }
}

ZR_INLINE void deq_q4_1(const uint8_t *restrict b, float *restrict y) {
    const float d = ld_f16(b), m = ld_f16(b + 2);
    for (int h = 0; h < 2; h++) {
        ZrU8x8 v = ld8(b + 4 + 8 * h);
        put8a(y + 8 * h, v & 0xf, d, m);
        put8a(y + 16 + 8 * h, shr8(v, 4), d, m);
    }
}

ZR_INLINE void deq_q5_0(const uint8_t *restrict b, float *restrict y) {
    const float d = ld_f16(b);
    const uint8_t *qh = b + 2; /* u32 little-endian: byte g holds the bits of elements 8g..8g+7 */
    for (int h = 0; h < 2; h++) {
        ZrU8x8 v = ld8(b + 6 + 8 * h);
        put8s(y + 8 * h, (v & 0xf) | bit4_lanes(qh[h]), 16, d);
        put8s(y + 16 + 8 * h, shr8(v, 4) | bit4_lanes(qh[2 + h]), 16, d);
    }
}

ZR_INLINE void deq_q5_1(const uint8_t *restrict b, float *restrict y) {
    const float d = ld_f16(b), m = ld_f16(b + 2);
    const uint8_t *qh = b + 4;
    for (int h = 0; h < 2; h++) {
        ZrU8x8 v = ld8(b + 8 + 8 * h);
        put8a(y + 8 * h, (v & 0xf) | bit4_lanes(qh[h]), d, m);
        put8a(y + 16 + 8 * h, shr8(v, 4) | bit4_lanes(qh[2 + h]), d, m);
    }
}

ZR_INLINE void deq_q8_0(const uint8_t *restrict b, float *restrict y) {
    const float d = ld_f16(b);
    /* int8 q read as a byte: q ^ 0x80 = q + 128 */
    for (int g = 0; g < 4; g++) put8s(y + 8 * g, ld8(b + 2 + 8 * g) ^ 0x80, 128, d);
}

ZR_INLINE void deq_q2_K(const uint8_t *restrict b, float *restrict y) {
    const uint8_t *sc = b, *qs = b + 16;
    const float d = ld_f16(b + 80), dmin = ld_f16(b + 82);
    for (int half = 0; half < 2; half++) {
        for (int plane = 0; plane < 4; plane++) {
            for (int sub = 0; sub < 2; sub++) {
                const int is = half * 8 + plane * 2 + sub;
                const float dl = d * (float)(sc[is] & 0xf), ml = dmin * (float)(sc[is] >> 4);
                const uint8_t *q = qs + half * 32 + sub * 16;
                float *out = y + half * 128 + plane * 32 + sub * 16;
                for (int k = 0; k < 2; k++) put8a(out + 8 * k, shr8(ld8(q + 8 * k), 2 * plane) & 3, dl, -ml);
            }
        }
    }
}

ZR_INLINE void deq_q3_K(const uint8_t *restrict b, float *restrict y) {
    const uint8_t *hmask = b, *qs = b + 32, *sc = b + 96;
    const float d = ld_f16(b + 108);
    for (int half = 0; half < 2; half++) {
        for (int plane = 0; plane < 4; plane++) {
            const int hbit = half * 4 + plane;
            for (int sub = 0; sub < 2; sub++) {
                const float dl = d * (float)k3_scale(sc, half * 8 + plane * 2 + sub);
                const uint8_t *q = qs + half * 32 + sub * 16, *hm = hmask + sub * 16;
                float *out = y + half * 128 + plane * 32 + sub * 16;
                for (int k = 0; k < 2; k++) {
                    /* 3-bit value: 2 low bits | high bit << 2, minus 4 (high bit clear means -4) */
                    ZrU8x8 v = (shr8(ld8(q + 8 * k), 2 * plane) & 3) | shl8(shr8(ld8(hm + 8 * k), hbit) & 1, 2);
                    put8s(out + 8 * k, v, 4, dl);
                }
            }
        }
    }
}

ZR_INLINE void deq_q4_K(const uint8_t *restrict b, float *restrict y) {
    const float d = ld_f16(b), dmin = ld_f16(b + 2);
    const uint8_t *sc = b + 4, *qs = b + 16;
    for (int p = 0; p < 4; p++) {
        float s0, m0, s1, m1;
        k4_scale_min(sc, 2 * p, &s0, &m0);
        k4_scale_min(sc, 2 * p + 1, &s1, &m1);
        const float d0 = d * s0, n0 = dmin * m0, d1 = d * s1, n1 = dmin * m1;
        for (int k = 0; k < 4; k++) {
            ZrU8x8 v = ld8(qs + 32 * p + 8 * k);
            put8a(y + 64 * p + 8 * k, v & 0xf, d0, -n0);
            put8a(y + 64 * p + 32 + 8 * k, shr8(v, 4), d1, -n1);
        }
    }
}

ZR_INLINE void deq_q5_K(const uint8_t *restrict b, float *restrict y) {
    const float d = ld_f16(b), dmin = ld_f16(b + 2);
    const uint8_t *sc = b + 4, *qh = b + 16, *qs = b + 48;
    for (int p = 0; p < 4; p++) {
        float s0, m0, s1, m1;
        k4_scale_min(sc, 2 * p, &s0, &m0);
        k4_scale_min(sc, 2 * p + 1, &s1, &m1);
        const float d0 = d * s0, n0 = dmin * m0, d1 = d * s1, n1 = dmin * m1;
        for (int k = 0; k < 4; k++) {
            ZrU8x8 v = ld8(qs + 32 * p + 8 * k), h = ld8(qh + 8 * k);
            put8a(y + 64 * p + 8 * k, (v & 0xf) | shl8(shr8(h, 2 * p) & 1, 4), d0, -n0);
            put8a(y + 64 * p + 32 + 8 * k, shr8(v, 4) | shl8(shr8(h, 2 * p + 1) & 1, 4), d1, -n1);
        }
    }
}

ZR_INLINE void deq_q6_K(const uint8_t *restrict b, float *restrict y) {
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    const float d = ld_f16(b + 208);
    for (int half = 0; half < 2; half++) {
        const uint8_t *l4 = ql + 64 * half, *h2 = qh + 32 * half;
        const int8_t *s = sc + 8 * half;
        float *out = y + 128 * half;
        for (int l = 0; l < 32; l += 8) {
            const int sub = l / 16;
            ZrU8x8 a = ld8(l4 + l), c = ld8(l4 + 32 + l), h = ld8(h2 + l);
            put8s(out + l, (a & 0xf) | shl8(h & 3, 4), 32, d * (float)s[sub]);
            put8s(out + l + 32, (c & 0xf) | shl8(shr8(h, 2) & 3, 4), 32, d * (float)s[sub + 2]);
            put8s(out + l + 64, shr8(a, 4) | shl8(shr8(h, 4) & 3, 4), 32, d * (float)s[sub + 4]);
            put8s(out + l + 96, shr8(c, 4) | shl8(shr8(h, 6), 4), 32, d * (float)s[sub + 6]);
        }
    }
}

ZR_INLINE void deq_f16(const uint8_t *restrict b, float *restrict y) {
    for (int g = 0; g < 4; g++) f16x8(y + 8 * g, b + 16 * g);
}

ZR_INLINE void deq_bf16(const uint8_t *restrict b, float *restrict y) {
    for (int g = 0; g < 4; g++) {
        ZrU16x8 h;
        memcpy(&h, b + 16 * g, 16);
        ZrU32x8 u = __builtin_convertvector(h, ZrU32x8) << 16;
        memcpy(y + 8 * g, &u, sizeof u);
    }
}

ZR_INLINE void deq_f32(const uint8_t *restrict b, float *restrict y) {
    for (int g = 0; g < 4; g++) {
        ZrF32x8 v;
        memcpy(&v, b + 32 * g, sizeof v);
        memcpy(y + 8 * g, &v, sizeof v);
    }
}

/* ---- rows ----
 * The float types are handled in chunks of 32 elements (CHUNK) so every type walks a row the
 * same way: one "unit" of (elements, bytes) at a time. */

#define CHUNK 32

/* The dot products are the CPU backend's inner loop (every weight row of every token goes
 * through them), so they are built twice on x86-64 Linux: for x86-64-v3 (AVX2, FMA) and for
 * the baseline, picked at load time (ifunc). fp-contract lets the AVX2 clone fuse the
 * multiply-adds, so its sums differ from the baseline's in the last bits. clang before 15
 * leaves a target_clones function that another file calls undefined at link time. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define ZR_HOT __attribute__((optimize("fp-contract=fast"), target_clones("arch=x86-64-v3", "default")))
#elif defined(__clang__) && __clang_major__ >= 15 && defined(__x86_64__) && defined(__linux__)
#define ZR_HOT __attribute__((target_clones("arch=x86-64-v3", "default"))) /* contraction: ZR_CONTRACT_FAST */
#else
#define ZR_HOT
#endif
/* Dequantization is multiversioned too, but never contracted: both clones compute the same
 * products and sums as ggml's reference formulas, bit for bit on every machine. */
#if defined(__x86_64__) && defined(__linux__) && (!defined(__clang__) || __clang_major__ >= 15) && defined(__GNUC__)
#define ZR_HOT_EXACT __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define ZR_HOT_EXACT
#endif
#if defined(__clang__)
#pragma clang fp contract(off)
#define ZR_CONTRACT_FAST _Pragma("clang fp contract(fast)")
#else
#define ZR_CONTRACT_FAST
#endif

/* The decoded block goes through a small aligned buffer: stored and reloaded as whole 8-lane
 * vectors so the loads are forwarded from the stores. Two vector accumulators (16 partial
 * sums) keep the multiply-adds independent. */
#define DEFINE_ROW_FUNCS(name, elems, bytes)                                                  \
    ZR_HOT_EXACT static void deq_row_##name(const uint8_t *src, float *dst, int64_t n) {      \
        for (int64_t i = 0; i < n / (elems); i++) deq_##name(src + i * (bytes), dst + i * (elems)); \
    }                                                                                         \
    ZR_HOT static float dot_row_##name(const uint8_t *row, const float *x, int64_t n) {        \
        ZR_CONTRACT_FAST                                                                      \
        ZrF32x8 acc0 = {0}, acc1 = {0};                                                       \
        _Alignas(32) float w[elems]; /* one decoded block */                                  \
        for (int64_t i = 0; i < n / (elems); i++) {                                           \
            deq_##name(row + i * (bytes), w);                                                 \
            const float *xb = x + i * (elems);                                                \
            for (int k = 0; k < (elems); k += 16) {                                           \
                ZrF32x8 w0, w1, x0, x1;                                                       \
                memcpy(&w0, w + k, 32);                                                       \
                memcpy(&w1, w + k + 8, 32);                                                   \
                memcpy(&x0, xb + k, 32);                                                      \
                memcpy(&x1, xb + k + 8, 32);                                                  \
                acc0 += w0 * x0;                                                              \
                acc1 += w1 * x1;                                                              \
            }                                                                                 \
        }                                                                                     \
        float lane[8];                                                                        \
        acc0 += acc1;                                                                         \
        memcpy(lane, &acc0, sizeof lane);                                                     \
        return ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7])); \
    }

DEFINE_ROW_FUNCS(f32, CHUNK, CHUNK * 4)
DEFINE_ROW_FUNCS(f16, CHUNK, CHUNK * 2)
DEFINE_ROW_FUNCS(bf16, CHUNK, CHUNK * 2)
DEFINE_ROW_FUNCS(q4_0, 32, 18)
DEFINE_ROW_FUNCS(q4_1, 32, 20)
DEFINE_ROW_FUNCS(q5_0, 32, 22)
DEFINE_ROW_FUNCS(q5_1, 32, 24)
DEFINE_ROW_FUNCS(q8_0, 32, 34)
DEFINE_ROW_FUNCS(q2_K, 256, 84)
DEFINE_ROW_FUNCS(q3_K, 256, 110)
DEFINE_ROW_FUNCS(q4_K, 256, 144)
DEFINE_ROW_FUNCS(q5_K, 256, 176)
DEFINE_ROW_FUNCS(q6_K, 256, 210)

/* The float types accept any n; their last n % CHUNK elements are done one by one. */
static int64_t float_tail(uint32_t type, int64_t n) {
    return (type == ZR_TYPE_F32 || type == ZR_TYPE_F16 || type == ZR_TYPE_BF16) ? n % CHUNK : 0;
}

static float scalar_at(uint32_t type, const uint8_t *p, int64_t i) {
    uint16_t h;
    float f;
    switch (type) {
    case ZR_TYPE_F32: memcpy(&f, p + 4 * i, 4); return f;
    case ZR_TYPE_F16: memcpy(&h, p + 2 * i, 2); return f16_to_f32(h);
    default: memcpy(&h, p + 2 * i, 2); return zr_bf16_to_f32(h);
    }
}

void zr_dequant_row(uint32_t type, const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    int64_t tail = float_tail(type, n), body = n - tail;
    switch (type) {
    case ZR_TYPE_F32: deq_row_f32(p, dst, body); break;
    case ZR_TYPE_F16: deq_row_f16(p, dst, body); break;
    case ZR_TYPE_BF16: deq_row_bf16(p, dst, body); break;
    case ZR_TYPE_Q4_0: deq_row_q4_0(p, dst, n); break;
    case ZR_TYPE_Q4_1: deq_row_q4_1(p, dst, n); break;
    case ZR_TYPE_Q5_0: deq_row_q5_0(p, dst, n); break;
    case ZR_TYPE_Q5_1: deq_row_q5_1(p, dst, n); break;
    case ZR_TYPE_Q8_0: deq_row_q8_0(p, dst, n); break;
    case ZR_TYPE_Q2_K: deq_row_q2_K(p, dst, n); break;
    case ZR_TYPE_Q3_K: deq_row_q3_K(p, dst, n); break;
    case ZR_TYPE_Q4_K: deq_row_q4_K(p, dst, n); break;
    case ZR_TYPE_Q5_K: deq_row_q5_K(p, dst, n); break;
    case ZR_TYPE_Q6_K: deq_row_q6_K(p, dst, n); break;
    default:
        for (int64_t i = 0; i < n; i++) dst[i] = NAN; /* not a compute type: callers check first */
        return;
    }
    for (int64_t i = body; i < n; i++) dst[i] = scalar_at(type, p, i);
}

float zr_dot_row(uint32_t type, const void *row, const float *x, int64_t n) {
    const uint8_t *p = row;
    int64_t tail = float_tail(type, n), body = n - tail;
    float s;
    switch (type) {
    case ZR_TYPE_F32: s = dot_row_f32(p, x, body); break;
    case ZR_TYPE_F16: s = dot_row_f16(p, x, body); break;
    case ZR_TYPE_BF16: s = dot_row_bf16(p, x, body); break;
    case ZR_TYPE_Q4_0: return dot_row_q4_0(p, x, n);
    case ZR_TYPE_Q4_1: return dot_row_q4_1(p, x, n);
    case ZR_TYPE_Q5_0: return dot_row_q5_0(p, x, n);
    case ZR_TYPE_Q5_1: return dot_row_q5_1(p, x, n);
    case ZR_TYPE_Q8_0: return dot_row_q8_0(p, x, n);
    case ZR_TYPE_Q2_K: return dot_row_q2_K(p, x, n);
    case ZR_TYPE_Q3_K: return dot_row_q3_K(p, x, n);
    case ZR_TYPE_Q4_K: return dot_row_q4_K(p, x, n);
    case ZR_TYPE_Q5_K: return dot_row_q5_K(p, x, n);
    case ZR_TYPE_Q6_K: return dot_row_q6_K(p, x, n);
    default: return NAN;
    }
    for (int64_t i = body; i < n; i++) s += scalar_at(type, p, i) * x[i];
    return s;
}

/* ---- quantizers ----
 * The 32-element types follow ggml's reference quantizers (quantize_row_*_ref), so files
 * written here match llama.cpp's reference output. The K-quants use a plain scale search:
 * per sub-block a least-error choice among a few candidate scales, then the super-block
 * scale(s) from the largest sub-block scale. Valid blocks, not llama.cpp's quality. */

static inline float absmax_signed(const float *x, int n) {
    float amax = 0, max = 0;
    for (int j = 0; j < n; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

static inline float maxf(float a, float b) { return a > b ? a : b; } /* ggml's MAX; no libm call */

/* v rounded to the nearest integer (ties to even), clamped to [lo, hi]; NaN gives lo. Adding
 * 1.5 * 2^23 leaves the rounded integer in the low mantissa bits (|v| < 2^22 after the clamp). */
static inline int nearest_in(float v, int lo, int hi) {
    if (!(v > (float)lo)) return lo;
    if (v > (float)hi) return hi;
    float t = v + 12582912.0f;
    int32_t i;
    memcpy(&i, &t, 4);
    return (i & 0x7fffff) - 0x400000;
}

static void q_q4_0(const float *x, uint8_t *b) {
    const float d = absmax_signed(x, 32) / -8, id = d != 0 ? 1.0f / d : 0.0f;
    st_f16(b, d);
    for (int j = 0; j < 16; j++) {
        int lo = (int8_t)(x[j] * id + 8.5f), hi = (int8_t)(x[j + 16] * id + 8.5f);
        b[2 + j] = (uint8_t)((lo < 15 ? lo : 15) | ((hi < 15 ? hi : 15) << 4));
    }
}

static void minmax(const float *x, int n, float *mn, float *mx) {
    *mn = INFINITY;
    *mx = -INFINITY;
    for (int j = 0; j < n; j++) {
        if (x[j] < *mn) *mn = x[j];
        if (x[j] > *mx) *mx = x[j];
    }
}

static void q_q4_1(const float *x, uint8_t *b) {
    float mn, mx;
    minmax(x, 32, &mn, &mx);
    const float d = (mx - mn) / 15, id = d != 0 ? 1.0f / d : 0.0f;
    st_f16(b, d);
    st_f16(b + 2, mn);
    for (int j = 0; j < 16; j++) {
        int lo = (int8_t)((x[j] - mn) * id + 0.5f), hi = (int8_t)((x[j + 16] - mn) * id + 0.5f);
        b[4 + j] = (uint8_t)((lo < 15 ? lo : 15) | ((hi < 15 ? hi : 15) << 4));
    }
}

static void q_q5_0(const float *x, uint8_t *b) {
    const float d = absmax_signed(x, 32) / -16, id = d != 0 ? 1.0f / d : 0.0f;
    st_f16(b, d);
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        int lo = (int8_t)(x[j] * id + 16.5f), hi = (int8_t)(x[j + 16] * id + 16.5f);
        lo = lo < 31 ? lo : 31;
        hi = hi < 31 ? hi : 31;
        b[6 + j] = (uint8_t)((lo & 0xf) | ((hi & 0xf) << 4));
        qh |= (uint32_t)((lo >> 4) & 1) << j;
        qh |= (uint32_t)((hi >> 4) & 1) << (j + 16);
    }
    memcpy(b + 2, &qh, 4);
}

static void q_q5_1(const float *x, uint8_t *b) {
    float mn, mx;
    minmax(x, 32, &mn, &mx);
    const float d = (mx - mn) / 31, id = d != 0 ? 1.0f / d : 0.0f;
    st_f16(b, d);
    st_f16(b + 2, mn);
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        uint8_t lo = (uint8_t)((x[j] - mn) * id + 0.5f), hi = (uint8_t)((x[j + 16] - mn) * id + 0.5f);
        b[8 + j] = (uint8_t)((lo & 0xf) | ((hi & 0xf) << 4));
        qh |= (uint32_t)((lo >> 4) & 1) << j;
        qh |= (uint32_t)((hi >> 4) & 1) << (j + 16);
    }
    memcpy(b + 4, &qh, 4);
}

static void q_q8_0(const float *x, uint8_t *b) {
    float amax = 0;
    for (int j = 0; j < 32; j++) amax = maxf(amax, fabsf(x[j]));
    const float d = amax / 127, id = d != 0 ? 1.0f / d : 0.0f;
    st_f16(b, d);
    for (int j = 0; j < 32; j++) b[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
}

/* Signed symmetric sub-block (x = s * q, q in [qmin, qmax]): the scale maps the
 * largest-magnitude value onto qmin (as ggml does, using the longer side of the range), then
 * one least-squares refit of the scale to the levels chosen is kept if it lowers the error. */
static float sq_err(const float *x, int n, float s, int qmin, int qmax) {
    const float inv = 1.0f / s;
    float err = 0;
    for (int j = 0; j < n; j++) {
        float e = x[j] - s * (float)nearest_in(x[j] * inv, qmin, qmax);
        err += e * e;
    }
    return err;
}

static float fit_symmetric(const float *x, int n, int qmin, int qmax) {
    const float max = absmax_signed(x, n);
    if (max == 0) return 0;
    const float s0 = max / (float)qmin, inv = 1.0f / s0;
    float sxq = 0, sqq = 0;
    for (int j = 0; j < n; j++) {
        float q = (float)nearest_in(x[j] * inv, qmin, qmax);
        sxq += x[j] * q;
        sqq += q * q;
    }
    const float s1 = sqq > 0 ? sxq / sqq : s0;
    return s1 != 0 && sq_err(x, n, s1, qmin, qmax) < sq_err(x, n, s0, qmin, qmax) ? s1 : s0;
}

/* Affine sub-block (x = s * q - m, q in [0, qmax], m >= 0): the grid spans [min(x, 0), max]. */
static void fit_affine(const float *x, int n, int qmax, float *s, float *m) {
    float mn, mx;
    minmax(x, n, &mn, &mx);
    if (mn > 0) mn = 0;
    *s = (mx - mn) / (float)qmax;
    *m = -mn;
}

/* Quantizes a 6-bit (or 4-bit) scale index: nearest, clamped. */
static inline int qscale(float v, float d, int lo, int hi) {
    return d != 0 ? nearest_in(v / d, lo, hi) : 0;
}

static void q_q2_K(const float *x, uint8_t *b) {
    float s[16], m[16], smax = 0, mmax = 0;
    for (int j = 0; j < 16; j++) {
        fit_affine(x + 16 * j, 16, 3, &s[j], &m[j]);
        smax = maxf(smax, s[j]);
        mmax = maxf(mmax, m[j]);
    }
    st_f16(b + 80, smax / 15);
    st_f16(b + 82, mmax / 15);
    const float d = ld_f16(b + 80), dmin = ld_f16(b + 82);
    uint8_t *qs = b + 16;
    memset(qs, 0, 64);
    for (int j = 0; j < 16; j++) {
        /* the min is rounded up so the grid still reaches the smallest value */
        int ls = qscale(s[j], d, 0, 15);
        int lm = dmin != 0 ? clampi((int)ceilf(m[j] / dmin), 0, 15) : 0;
        b[j] = (uint8_t)(ls | (lm << 4));
        const float dl = d * (float)ls, ml = dmin * (float)lm;
        for (int l = 0; l < 16; l++) {
            const int e = 16 * j + l;
            int q = dl != 0 ? nearest_in((x[e] + ml) / dl, 0, 3) : 0;
            qs[32 * (e / 128) + e % 32] |= (uint8_t)(q << (2 * ((e % 128) / 32)));
        }
    }
}

static void q_q3_K(const float *x, uint8_t *b) {
    float s[16];
    for (int j = 0; j < 16; j++) s[j] = fit_symmetric(x + 16 * j, 16, -4, 3);
    const float max = absmax_signed(s, 16);
    st_f16(b + 108, max / -32);
    const float d = ld_f16(b + 108);
    uint8_t *hmask = b, *qs = b + 32, *sc = b + 96;
    memset(b, 0, 108);
    for (int j = 0; j < 16; j++) {
        int ls = qscale(s[j], d, -32, 31);
        int u = ls + 32;
        if (j < 8) sc[j] = (uint8_t)(u & 0xf);
        else sc[j - 8] |= (uint8_t)((u & 0xf) << 4);
        sc[8 + j % 4] |= (uint8_t)((u >> 4) << (2 * (j / 4)));
        const float dl = d * (float)ls;
        for (int l = 0; l < 16; l++) {
            const int e = 16 * j + l;
            int q = (dl != 0 ? nearest_in(x[e] / dl, -4, 3) : 0) + 4;
            if (q & 4) hmask[e % 32] |= (uint8_t)(1u << (e / 32));
            qs[32 * (e / 128) + e % 32] |= (uint8_t)((q & 3) << (2 * ((e % 128) / 32)));
        }
    }
}

/* q4_K / q5_K share the sub-block scales: 8 sub-blocks of 32, 6-bit scale and min. Fills the
 * header (d, dmin, scales) and returns each sub-block's (d * scale, dmin * min). */
static void k4_header(const float *x, int qmax, uint8_t *b, float *dl, float *ml) {
    float s[8], m[8], smax = 0, mmax = 0;
    for (int j = 0; j < 8; j++) {
        fit_affine(x + 32 * j, 32, qmax, &s[j], &m[j]);
        smax = maxf(smax, s[j]);
        mmax = maxf(mmax, m[j]);
    }
    st_f16(b, smax / 63);
    st_f16(b + 2, mmax / 63);
    const float d = ld_f16(b), dmin = ld_f16(b + 2);
    uint8_t *sc = b + 4;
    memset(sc, 0, 12);
    for (int j = 0; j < 8; j++) {
        int ls = qscale(s[j], d, 0, 63);
        int lm = dmin != 0 ? clampi((int)ceilf(m[j] / dmin), 0, 63) : 0;
        if (j < 4) {
            sc[j] = (uint8_t)ls;
            sc[j + 4] = (uint8_t)lm;
        } else {
            sc[j + 4] = (uint8_t)((ls & 0xf) | ((lm & 0xf) << 4));
            sc[j - 4] |= (uint8_t)((ls >> 4) << 6);
            sc[j] |= (uint8_t)((lm >> 4) << 6);
        }
        dl[j] = d * (float)ls;
        ml[j] = dmin * (float)lm;
    }
}

static void q_q4_K(const float *x, uint8_t *b) {
    float dl[8], ml[8];
    k4_header(x, 15, b, dl, ml);
    uint8_t *qs = b + 16;
    memset(qs, 0, 128);
    for (int e = 0; e < 256; e++) {
        const int j = e / 32;
        int q = dl[j] != 0 ? nearest_in((x[e] + ml[j]) / dl[j], 0, 15) : 0;
        qs[32 * (e / 64) + e % 32] |= (uint8_t)(q << (4 * (j & 1)));
    }
}

static void q_q5_K(const float *x, uint8_t *b) {
    float dl[8], ml[8];
    k4_header(x, 31, b, dl, ml);
    uint8_t *qh = b + 16, *qs = b + 48;
    memset(qh, 0, 32 + 128);
    for (int e = 0; e < 256; e++) {
        const int j = e / 32;
        int q = dl[j] != 0 ? nearest_in((x[e] + ml[j]) / dl[j], 0, 31) : 0;
        qs[32 * (e / 64) + e % 32] |= (uint8_t)((q & 0xf) << (4 * (j & 1)));
        qh[e % 32] |= (uint8_t)((q >> 4) << j);
    }
}

static void q_q6_K(const float *x, uint8_t *b) {
    float s[16];
    for (int j = 0; j < 16; j++) s[j] = fit_symmetric(x + 16 * j, 16, -32, 31);
    const float max = absmax_signed(s, 16);
    st_f16(b + 208, max / -128);
    const float d = ld_f16(b + 208);
    uint8_t *ql = b, *qh = b + 128;
    int8_t *sc = (int8_t *)(b + 192);
    memset(b, 0, 208);
    for (int j = 0; j < 16; j++) {
        int ls = qscale(s[j], d, -128, 127);
        sc[j] = (int8_t)ls;
        const float dl = d * (float)ls;
        for (int l = 0; l < 16; l++) {
            const int e = 16 * j + l, half = e / 128, r = e % 128, plane = r / 32, i = r % 32;
            int q = (dl != 0 ? nearest_in(x[e] / dl, -32, 31) : 0) + 32;
            ql[64 * half + 32 * (plane & 1) + i] |= (uint8_t)((q & 0xf) << (4 * (plane >> 1)));
            qh[32 * half + i] |= (uint8_t)((q >> 4) << (2 * plane));
        }
    }
}

bool zr_quantize_row(uint32_t type, const float *src, void *dst, int64_t n) {
    const ZrTypeInfo *t = zr_type_info(type);
    if (!t || n < 0 || n % t->block != 0) return false;
    uint8_t *p = dst;
    void (*q)(const float *, uint8_t *);
    switch (type) {
    case ZR_TYPE_F32: memcpy(dst, src, (size_t)n * 4); return true;
    case ZR_TYPE_F16:
        for (int64_t i = 0; i < n; i++) st_f16(p + 2 * i, src[i]);
        return true;
    case ZR_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = zr_f32_to_bf16(src[i]);
            memcpy(p + 2 * i, &h, 2);
        }
        return true;
    case ZR_TYPE_Q4_0: q = q_q4_0; break;
    case ZR_TYPE_Q4_1: q = q_q4_1; break;
    case ZR_TYPE_Q5_0: q = q_q5_0; break;
    case ZR_TYPE_Q5_1: q = q_q5_1; break;
    case ZR_TYPE_Q8_0: q = q_q8_0; break;
    case ZR_TYPE_Q2_K: q = q_q2_K; break;
    case ZR_TYPE_Q3_K: q = q_q3_K; break;
    case ZR_TYPE_Q4_K: q = q_q4_K; break;
    case ZR_TYPE_Q5_K: q = q_q5_K; break;
    case ZR_TYPE_Q6_K: q = q_q6_K; break;
    default: return false;
    }
    for (int64_t i = 0; i < n / t->block; i++) q(src + i * t->block, p + i * t->bytes);
    return true;
}
