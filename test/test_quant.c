/* Weight formats: the type table, f16/bf16 conversions, hand-built blocks of every compute
 * type with known values, dot products against dequantization, quantizer round trips. */
#include <float.h>
#include <stdint.h>

#include "quant.h"
#include "zt.h"

/* ---- helpers ---- */

static void put_u16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)(v & 0xff);
    p[1] = (uint8_t)(v >> 8);
}

static float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* halves used in the hand-built blocks (exact values) */
#define H_0_125 0x3000
#define H_0_25 0x3400
#define H_0_5 0x3800
#define H_1 0x3c00
#define H_2 0x4000
#define H_M1 0xbc00

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}
static float rnd_uniform(void) { return (float)(rnd() & 0xffffff) / 16777216.0f; } /* [0, 1) */
static float rnd_normal(void) {
    float u1 = rnd_uniform() + 1e-7f, u2 = rnd_uniform();
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

static float dequant_one(uint32_t type, const void *block, int idx) {
    float y[256];
    zr_dequant_row(type, block, y, zr_type_info(type)->block);
    return y[idx];
}

/* ---- the type table ---- */

ZT_TEST(type_table_has_ggml_sizes_for_every_defined_id) {
    static const struct { uint32_t id; const char *name; uint32_t block, bytes; bool compute; } want[] = {
        {0, "f32", 1, 4, true},          {1, "f16", 1, 2, true},          {2, "q4_0", 32, 18, true},
        {3, "q4_1", 32, 20, true},       {6, "q5_0", 32, 22, true},       {7, "q5_1", 32, 24, true},
        {8, "q8_0", 32, 34, true},       {9, "q8_1", 32, 36, false},      {10, "q2_K", 256, 84, true},
        {11, "q3_K", 256, 110, true},    {12, "q4_K", 256, 144, true},    {13, "q5_K", 256, 176, true},
        {14, "q6_K", 256, 210, true},    {15, "q8_K", 256, 292, false},   {16, "iq2_xxs", 256, 66, false},
        {17, "iq2_xs", 256, 74, false},  {18, "iq3_xxs", 256, 98, false}, {19, "iq1_s", 256, 50, false},
        {20, "iq4_nl", 32, 18, false},   {21, "iq3_s", 256, 110, false},  {22, "iq2_s", 256, 82, false},
        {23, "iq4_xs", 256, 136, false}, {24, "i8", 1, 1, false},         {25, "i16", 1, 2, false},
        {26, "i32", 1, 4, false},        {27, "i64", 1, 8, false},        {28, "f64", 1, 8, false},
        {29, "iq1_m", 256, 56, false},   {30, "bf16", 1, 2, true},        {34, "tq1_0", 256, 54, false},
        {35, "tq2_0", 256, 66, false},   {39, "mxfp4", 32, 17, false},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const ZrTypeInfo *t = zr_type_info(want[i].id);
        ZT_CHECKF(t != NULL, "id %u", want[i].id);
        ZT_CHECKF(strcmp(t->name, want[i].name) == 0, "id %u: %s", want[i].id, t->name);
        ZT_CHECKF(t->block == want[i].block && t->bytes == want[i].bytes, "id %u: %u/%u", want[i].id, t->block, t->bytes);
        ZT_CHECKF(t->compute == want[i].compute, "id %u", want[i].id);
        ZT_CHECK(strcmp(zr_type_name(want[i].id), want[i].name) == 0);
    }
}

ZT_TEST(type_table_rejects_removed_and_unknown_ids) {
    const uint32_t gone[] = {4, 5, 31, 32, 33, 36, 37, 38, 40, 41, 99, 1000, UINT32_MAX};
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++) {
        ZT_CHECKF(zr_type_info(gone[i]) == NULL, "id %u", gone[i]);
        ZT_CHECK(strcmp(zr_type_name(gone[i]), "?") == 0);
        ZT_CHECK(zr_row_bytes(gone[i], 256) == 0);
    }
}

ZT_TEST(row_bytes_counts_whole_blocks) {
    ZT_CHECK(zr_row_bytes(ZR_TYPE_F32, 172) == 688);
    ZT_CHECK(zr_row_bytes(ZR_TYPE_F16, 172) == 344);
    ZT_CHECK(zr_row_bytes(ZR_TYPE_BF16, 3) == 6);
    ZT_CHECK(zr_row_bytes(ZR_TYPE_Q4_0, 4096) == 128 * 18);
    ZT_CHECK(zr_row_bytes(ZR_TYPE_Q8_0, 64) == 68);
    ZT_CHECK(zr_row_bytes(ZR_TYPE_Q4_K, 4096) == 16 * 144);
    ZT_CHECK(zr_row_bytes(ZR_TYPE_Q6_K, 14336) == 56 * 210);
    ZT_CHECK(zr_row_bytes(ZR_TYPE_Q8_0, 0) == 0);
}

/* ---- f16 / bf16 ---- */

ZT_TEST(f16_decodes_special_and_subnormal_values) {
    ZT_CHECK(zr_f16_to_f32(0x0000) == 0.0f && !signbit(zr_f16_to_f32(0x0000)));
    ZT_CHECK(zr_f16_to_f32(0x8000) == 0.0f && signbit(zr_f16_to_f32(0x8000)));
    ZT_CHECK(zr_f16_to_f32(0x0001) == 0x1p-24f);           /* smallest subnormal */
    ZT_CHECK(zr_f16_to_f32(0x03ff) == 1023 * 0x1p-24f);    /* largest subnormal */
    ZT_CHECK(zr_f16_to_f32(0x8001) == -0x1p-24f);
    ZT_CHECK(zr_f16_to_f32(0x0400) == 0x1p-14f);           /* smallest normal */
    ZT_CHECK(zr_f16_to_f32(0x3c00) == 1.0f);
    ZT_CHECK(zr_f16_to_f32(0x3c01) == 1.0f + 0x1p-10f);
    ZT_CHECK(zr_f16_to_f32(0xc000) == -2.0f);
    ZT_CHECK(zr_f16_to_f32(0x7bff) == 65504.0f);           /* largest finite */
    ZT_CHECK(isinf(zr_f16_to_f32(0x7c00)) && zr_f16_to_f32(0x7c00) > 0);
    ZT_CHECK(isinf(zr_f16_to_f32(0xfc00)) && zr_f16_to_f32(0xfc00) < 0);
    ZT_CHECK(isnan(zr_f16_to_f32(0x7e00)));
    ZT_CHECK(isnan(zr_f16_to_f32(0x7c01))); /* signalling nan stays a nan */
    ZT_CHECK(isnan(zr_f16_to_f32(0xfe00)) && signbit(zr_f16_to_f32(0xfe00)));
}

ZT_TEST(f16_encodes_with_round_to_nearest_even) {
    ZT_CHECK(zr_f32_to_f16(1.0f) == 0x3c00);
    ZT_CHECK(zr_f32_to_f16(1.0f + 0x1p-11f) == 0x3c00);        /* tie, to even (down) */
    ZT_CHECK(zr_f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3c02);    /* tie, to even (up) */
    ZT_CHECK(zr_f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f) == 0x3c01); /* above the tie */
    ZT_CHECK(zr_f32_to_f16(-0.0f) == 0x8000);
    ZT_CHECK(zr_f32_to_f16(65504.0f) == 0x7bff);
    ZT_CHECK(zr_f32_to_f16(65519.0f) == 0x7bff);               /* below the inf tie */
    ZT_CHECK(zr_f32_to_f16(65520.0f) == 0x7c00);               /* tie rounds to inf (even) */
    ZT_CHECK(zr_f32_to_f16(1e10f) == 0x7c00);
    ZT_CHECK(zr_f32_to_f16(-INFINITY) == 0xfc00);
    uint16_t n = zr_f32_to_f16(NAN);
    ZT_CHECK((n & 0x7c00) == 0x7c00 && (n & 0x3ff) != 0);
    /* subnormal results */
    ZT_CHECK(zr_f32_to_f16(0x1p-24f) == 0x0001);
    ZT_CHECK(zr_f32_to_f16(0x1p-25f) == 0x0000);               /* tie between 0 and 1, to 0 */
    ZT_CHECK(zr_f32_to_f16(0x1p-25f * 1.0001f) == 0x0001);
    ZT_CHECK(zr_f32_to_f16(1.5f * 0x1p-24f) == 0x0002);        /* tie between 1 and 2, to 2 */
    ZT_CHECK(zr_f32_to_f16(2.5f * 0x1p-24f) == 0x0002);        /* tie between 2 and 3, to 2 */
    ZT_CHECK(zr_f32_to_f16(1023.5f * 0x1p-24f) == 0x0400);     /* rounds up into the normals */
    ZT_CHECK(zr_f32_to_f16(0x1p-30f) == 0x0000);
    ZT_CHECK(zr_f32_to_f16(-0x1p-24f) == 0x8001);
    ZT_CHECK(zr_f32_to_f16(FLT_TRUE_MIN) == 0x0000);
}

ZT_TEST(f16_round_trips_every_half) {
    for (uint32_t h = 0; h < 65536; h++) {
        float f = zr_f16_to_f32((uint16_t)h);
        uint16_t back = zr_f32_to_f16(f);
        if (isnan(f)) {
            ZT_CHECKF((back & 0x7c00) == 0x7c00 && (back & 0x3ff) != 0 && (back & 0x8000) == (h & 0x8000), "h %04x", h);
        } else {
            ZT_CHECKF(back == h, "h %04x -> %a -> %04x", h, (double)f, back);
        }
    }
}

ZT_TEST(f16_encoding_is_the_nearest_half) {
    /* random f32s across the half range: the chosen half is never farther than its neighbours */
    for (int i = 0; i < 200000; i++) {
        float f = ldexpf(1.0f + rnd_uniform(), (int)(rnd() % 64) - 31) * ((rnd() & 1) ? -1.0f : 1.0f); /* 2^-31 .. 2^33 */
        uint16_t h = zr_f32_to_f16(f);
        if ((h & 0x7fff) >= 0x7c00) {
            ZT_CHECKF(fabsf(f) >= 65520.0f, "%a", (double)f);
            continue;
        }
        double v = zr_f16_to_f32(h), e = fabs(v - f);
        uint16_t up = (uint16_t)(h + 1), dn = (uint16_t)(h - 1);
        if ((up & 0x7fff) < 0x7c00) ZT_CHECKF(e <= fabs((double)zr_f16_to_f32(up) - f), "%a", (double)f);
        if ((h & 0x7fff) != 0) ZT_CHECKF(e <= fabs((double)zr_f16_to_f32(dn) - f), "%a", (double)f);
    }
}

ZT_TEST(bf16_converts_with_round_to_nearest_even) {
    ZT_CHECK(zr_bf16_to_f32(0x3f80) == 1.0f);
    ZT_CHECK(zr_bf16_to_f32(0xc040) == -3.0f);
    ZT_CHECK(zr_bf16_to_f32(0x0001) == u2f(0x00010000u)); /* subnormal */
    ZT_CHECK(isinf(zr_bf16_to_f32(0x7f80)));
    ZT_CHECK(isnan(zr_bf16_to_f32(0x7fc0)));
    ZT_CHECK(zr_f32_to_bf16(1.0f) == 0x3f80);
    ZT_CHECK(zr_f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80);           /* tie, to even */
    ZT_CHECK(zr_f32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82);       /* tie, to even (up) */
    ZT_CHECK(zr_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 0x3f81);
    ZT_CHECK(zr_f32_to_bf16(-0.0f) == 0x8000);
    ZT_CHECK(zr_f32_to_bf16(u2f(0x00018000u)) == 0x0002);         /* subnormal tie, to even */
    ZT_CHECK(zr_f32_to_bf16(FLT_MAX) == 0x7f80);                   /* rounds to inf */
    ZT_CHECK(zr_f32_to_bf16(INFINITY) == 0x7f80);
    uint16_t n = zr_f32_to_bf16(u2f(0x7f800001u)); /* a nan whose payload is all in the low half */
    ZT_CHECK((n & 0x7f80) == 0x7f80 && (n & 0x7f) != 0);
    for (uint32_t h = 0; h < 65536; h++) {
        float f = zr_bf16_to_f32((uint16_t)h);
        if (!isnan(f)) ZT_CHECKF(zr_f32_to_bf16(f) == h, "%04x", h);
    }
}

/* ---- hand-built blocks ---- */

ZT_TEST(q4_0_block_is_d_times_nibble_minus_8) {
    uint8_t b[18];
    put_u16(b, H_0_5);
    for (int j = 0; j < 16; j++) b[2 + j] = (uint8_t)(j | ((15 - j) << 4));
    float y[32];
    zr_dequant_row(ZR_TYPE_Q4_0, b, y, 32);
    for (int j = 0; j < 16; j++) {
        ZT_CHECKF(y[j] == 0.5f * (float)(j - 8), "y[%d] = %g", j, (double)y[j]);           /* low nibbles first */
        ZT_CHECKF(y[j + 16] == 0.5f * (float)(7 - j), "y[%d] = %g", j + 16, (double)y[j + 16]); /* then high */
    }
}

ZT_TEST(q4_1_block_is_d_times_nibble_plus_m) {
    uint8_t b[20] = {0};
    put_u16(b, H_0_25);
    put_u16(b + 2, H_M1);
    b[4 + 3] = 0xa5;
    b[4 + 15] = 0xf0;
    ZT_CHECK(dequant_one(ZR_TYPE_Q4_1, b, 0) == -1.0f);
    ZT_CHECK(dequant_one(ZR_TYPE_Q4_1, b, 3) == 0.25f);   /* 5 * 0.25 - 1 */
    ZT_CHECK(dequant_one(ZR_TYPE_Q4_1, b, 19) == 1.5f);   /* 10 * 0.25 - 1 */
    ZT_CHECK(dequant_one(ZR_TYPE_Q4_1, b, 15) == -1.0f);
    ZT_CHECK(dequant_one(ZR_TYPE_Q4_1, b, 31) == 2.75f);  /* 15 * 0.25 - 1 */
}

ZT_TEST(q5_0_block_takes_the_fifth_bit_from_qh) {
    uint8_t b[22] = {0};
    put_u16(b, H_1);
    uint32_t qh = (1u << 0) | (1u << 16) | (1u << 31) | (1u << 9);
    memcpy(b + 2, &qh, 4);
    b[6 + 0] = 0x21;  /* elements 0 (1) and 16 (2) */
    b[6 + 9] = 0x0f;  /* elements 9 (15) and 25 (0) */
    b[6 + 15] = 0xf0; /* elements 15 (0) and 31 (15) */
    float y[32];
    zr_dequant_row(ZR_TYPE_Q5_0, b, y, 32);
    ZT_CHECK(y[0] == 1.0f);    /* (1 | 16) - 16 */
    ZT_CHECK(y[16] == 2.0f);   /* (2 | 16) - 16 */
    ZT_CHECK(y[9] == 15.0f);   /* (15 | 16) - 16 */
    ZT_CHECK(y[25] == -16.0f); /* bit 25 clear */
    ZT_CHECK(y[15] == -16.0f);
    ZT_CHECK(y[31] == 15.0f);  /* (15 | 16) - 16 */
    ZT_CHECK(y[1] == -16.0f);
}

ZT_TEST(q5_1_block_is_d_times_5_bits_plus_m) {
    uint8_t b[24] = {0};
    put_u16(b, H_0_5);
    put_u16(b + 2, H_2);
    uint32_t qh = (1u << 7) | (1u << 30);
    memcpy(b + 4, &qh, 4);
    b[8 + 7] = 0x3f;  /* element 7: 15 | 16 = 31; element 23: 3 */
    b[8 + 14] = 0x90; /* element 14: 0; element 30: 9 | 16 = 25 */
    ZT_CHECK(dequant_one(ZR_TYPE_Q5_1, b, 7) == 17.5f);  /* 31 * 0.5 + 2 */
    ZT_CHECK(dequant_one(ZR_TYPE_Q5_1, b, 23) == 3.5f);  /* 3 * 0.5 + 2 */
    ZT_CHECK(dequant_one(ZR_TYPE_Q5_1, b, 14) == 2.0f);
    ZT_CHECK(dequant_one(ZR_TYPE_Q5_1, b, 30) == 14.5f); /* 25 * 0.5 + 2 */
}

ZT_TEST(q8_0_block_is_d_times_signed_bytes) {
    uint8_t b[34] = {0};
    put_u16(b, H_0_25);
    b[2 + 0] = 0x80;  /* -128 */
    b[2 + 1] = 0x7f;  /* 127 */
    b[2 + 2] = 0xff;  /* -1 */
    b[2 + 31] = 0x05;
    float y[32];
    zr_dequant_row(ZR_TYPE_Q8_0, b, y, 32);
    ZT_CHECK(y[0] == -32.0f);
    ZT_CHECK(y[1] == 31.75f);
    ZT_CHECK(y[2] == -0.25f);
    ZT_CHECK(y[3] == 0.0f);
    ZT_CHECK(y[31] == 1.25f);
}

/* q2_K: element e's 2 bits sit in qs[32*(e/128) + e%32] at bit 2*((e%128)/32); its scale
 * byte is scales[e/16] (low nibble scale, high nibble min). */
ZT_TEST(q2_K_block_places_planes_scales_and_mins) {
    uint8_t b[84] = {0};
    put_u16(b + 80, H_1);   /* d */
    put_u16(b + 82, H_0_5); /* dmin */
    for (int j = 0; j < 16; j++) b[j] = (uint8_t)((j % 15 + 1) | ((15 - j) << 4));
    uint8_t *qs = b + 16;
    qs[0] = 0x03 | (0x01 << 2) | (0x02 << 4) | (0x03 << 6); /* elements 0, 32, 64, 96 */
    qs[32 + 31] = 0x02 << 6;                                 /* element 128 + 96 + 31 = 255 */
    qs[17] = 0x01;                                           /* element 17 */
    float y[256];
    zr_dequant_row(ZR_TYPE_Q2_K, b, y, 256);
    /* y = d * (sc & 15) * q - dmin * (sc >> 4) */
    ZT_CHECK(y[0] == 1 * 3 - 0.5f * 15);   /* sub-block 0: scale 1, min 15 */
    ZT_CHECK(y[32] == 3 * 1 - 0.5f * 13);  /* sub-block 2: scale 3, min 13 */
    ZT_CHECK(y[64] == 5 * 2 - 0.5f * 11);  /* sub-block 4 */
    ZT_CHECK(y[96] == 7 * 3 - 0.5f * 9);   /* sub-block 6 */
    ZT_CHECK(y[17] == 2 * 1 - 0.5f * 14);  /* sub-block 1: scale 2, min 14 */
    ZT_CHECK(y[255] == 1 * 2 - 0.5f * 0);  /* sub-block 15: scale 15 % 15 + 1 = 1, min 0 */
    ZT_CHECK(y[1] == -0.5f * 15);
    ZT_CHECK(y[128] == -0.5f * 7);         /* sub-block 8: min 7 */
}

/* q3_K: 16 six-bit scales, stored offset by 32: low nibbles in bytes 0..7 (scales 0..7 low
 * nibble, 8..15 high nibble), top two bits in byte 8 + j%4 at bit 2*(j/4). */
static void q3k_set_scale(uint8_t *sc, int j, int value) {
    int u = value + 32;
    if (j < 8) sc[j] = (uint8_t)((sc[j] & 0xf0) | (u & 0xf));
    else sc[j - 8] = (uint8_t)((sc[j - 8] & 0x0f) | ((u & 0xf) << 4));
    int sh = 2 * (j / 4);
    sc[8 + j % 4] = (uint8_t)((sc[8 + j % 4] & ~(3 << sh)) | ((u >> 4) << sh));
}

ZT_TEST(q3_K_block_unpacks_six_bit_scales_and_high_mask) {
    uint8_t b[110] = {0};
    uint8_t *hmask = b, *qs = b + 32, *sc = b + 96;
    put_u16(b + 108, H_0_5);
    const int scales[16] = {-32, 31, 0, 1, -1, 17, -17, 5, 9, -9, 30, -30, 2, -2, 16, -16};
    for (int j = 0; j < 16; j++) q3k_set_scale(sc, j, scales[j]);
    /* element 0: low bits 3, high bit set -> 3; element 1: low 0, high clear -> -4 */
    qs[0] = 3;
    hmask[0] = 1;
    /* element 16 + 32 = 48 (sub-block 3, plane 1): low bits 2, high bit clear -> -2 */
    qs[16] = 2 << 2;
    /* element 128 + 96 + 20 = 244 (sub-block 15, half 1, plane 3): low 1, high set -> 1 */
    qs[32 + 20] = 1 << 6;
    hmask[20] = 1 << 7;
    /* element 200 = 128 + 64 + 8 (sub-block 12, plane 2): low 3, high clear -> -1 */
    qs[32 + 8] = 3 << 4;
    /* element 165 = 128 + 32 + 5 (sub-block 10, half 1, plane 1): high bit is bit 5 -> 2 */
    qs[32 + 5] = 2 << 2;
    hmask[5] = 1 << 5;
    /* element 67 = 64 + 3 (sub-block 4, half 0, plane 2): high bit is bit 2 -> 1 */
    qs[3] = 1 << 4;
    hmask[3] = 1 << 2;
    float y[256];
    zr_dequant_row(ZR_TYPE_Q3_K, b, y, 256);
    ZT_CHECK(y[165] == 0.5f * 30 * 2);
    ZT_CHECK(y[67] == 0.5f * -1 * 1);
    ZT_CHECK(y[0] == 0.5f * -32 * 3);
    ZT_CHECK(y[1] == 0.5f * -32 * -4);
    ZT_CHECK(y[48] == 0.5f * 1 * -2);
    ZT_CHECK(y[244] == 0.5f * -16 * 1);
    ZT_CHECK(y[200] == 0.5f * 2 * -1);
    /* every other element is q = -4 times its sub-block's scale */
    for (int e = 0; e < 256; e++) {
        if (e == 0 || e == 48 || e == 244 || e == 200 || e == 165 || e == 67) continue;
        ZT_CHECKF(y[e] == 0.5f * (float)scales[e / 16] * -4, "y[%d] = %g", e, (double)y[e]);
    }
}

/* q4_K / q5_K scales: pairs 0..3 in the low 6 bits of bytes 0..3 (scale) and 4..7 (min);
 * pairs 4..7 as nibbles of bytes 8..11 with their top bits in bits 6..7 of bytes 0..7. */
static void k4_set(uint8_t *sc, int j, int scale, int min) {
    if (j < 4) {
        sc[j] = (uint8_t)((sc[j] & 0xc0) | scale);
        sc[j + 4] = (uint8_t)((sc[j + 4] & 0xc0) | min);
    } else {
        sc[j + 4] = (uint8_t)((scale & 0xf) | ((min & 0xf) << 4));
        sc[j - 4] = (uint8_t)((sc[j - 4] & 0x3f) | ((scale >> 4) << 6));
        sc[j] = (uint8_t)((sc[j] & 0x3f) | ((min >> 4) << 6));
    }
}

static const int k4_scales[8] = {63, 1, 40, 17, 63, 33, 2, 50};
static const int k4_mins[8] = {0, 63, 5, 48, 63, 21, 60, 1};

ZT_TEST(q4_K_block_unpacks_scales_mins_and_nibbles) {
    uint8_t b[144] = {0};
    put_u16(b, H_0_5);       /* d */
    put_u16(b + 2, H_0_125); /* dmin */
    for (int j = 0; j < 8; j++) k4_set(b + 4, j, k4_scales[j], k4_mins[j]);
    uint8_t *qs = b + 16;
    /* element e: byte 32*(e/64) + e%32, low nibble for even sub-blocks, high for odd */
    for (int e = 0; e < 256; e++) {
        int q = (e * 7) % 16;
        qs[32 * (e / 64) + e % 32] |= (uint8_t)(q << (4 * ((e / 32) & 1)));
    }
    float y[256];
    zr_dequant_row(ZR_TYPE_Q4_K, b, y, 256);
    for (int e = 0; e < 256; e++) {
        int j = e / 32;
        float want = 0.5f * (float)k4_scales[j] * (float)((e * 7) % 16) - 0.125f * (float)k4_mins[j];
        ZT_CHECKF(y[e] == want, "y[%d] = %g, want %g", e, (double)y[e], (double)want);
    }
    ZT_CHECK(y[255] == 0.5f * 50 * ((255 * 7) % 16) - 0.125f * 1);
}

ZT_TEST(q5_K_block_adds_the_high_bit_per_sub_block) {
    uint8_t b[176] = {0};
    put_u16(b, H_0_25);
    put_u16(b + 2, H_1);
    for (int j = 0; j < 8; j++) k4_set(b + 4, j, k4_scales[j], k4_mins[j]);
    uint8_t *qh = b + 16, *qs = b + 48;
    for (int e = 0; e < 256; e++) {
        int q = (e * 13 + 5) % 32;
        qs[32 * (e / 64) + e % 32] |= (uint8_t)((q & 0xf) << (4 * ((e / 32) & 1)));
        qh[e % 32] |= (uint8_t)((q >> 4) << (e / 32)); /* sub-block j's fifth bits: bit j of qh[] */
    }
    float y[256];
    zr_dequant_row(ZR_TYPE_Q5_K, b, y, 256);
    for (int e = 0; e < 256; e++) {
        int j = e / 32;
        float want = 0.25f * (float)k4_scales[j] * (float)((e * 13 + 5) % 32) - 1.0f * (float)k4_mins[j];
        ZT_CHECKF(y[e] == want, "y[%d] = %g, want %g", e, (double)y[e], (double)want);
    }
}

ZT_TEST(q6_K_block_combines_low_and_high_bits_with_signed_scales) {
    uint8_t b[210] = {0};
    uint8_t *ql = b, *qh = b + 128;
    int8_t sc[16] = {-128, 127, 1, -1, 64, -64, 3, -3, 100, -100, 7, -7, 50, -50, 2, -2};
    memcpy(b + 192, sc, 16);
    put_u16(b + 208, H_0_125);
    /* element e: half = e/128, r = e%128, plane = r/32, i = r%32:
     * low 4 bits in ql[64*half + 32*(plane&1) + i] (low nibble for planes 0,1, high for 2,3),
     * high 2 bits in qh[32*half + i] at bit 2*plane; value q - 32; scale sc[e/16] */
    for (int e = 0; e < 256; e++) {
        int half = e / 128, r = e % 128, plane = r / 32, i = r % 32;
        int q = (e * 11 + 3) % 64;
        if (e == 0) q = 0;   /* -32 */
        if (e == 255) q = 63; /* 31 */
        ql[64 * half + 32 * (plane & 1) + i] |= (uint8_t)((q & 0xf) << (4 * (plane >> 1)));
        qh[32 * half + i] |= (uint8_t)((q >> 4) << (2 * plane));
    }
    float y[256];
    zr_dequant_row(ZR_TYPE_Q6_K, b, y, 256);
    ZT_CHECK(y[0] == 0.125f * -128 * -32);
    ZT_CHECK(y[255] == 0.125f * -2 * 31);
    for (int e = 1; e < 255; e++) {
        float want = 0.125f * (float)sc[e / 16] * (float)((e * 11 + 3) % 64 - 32);
        ZT_CHECKF(y[e] == want, "y[%d] = %g, want %g", e, (double)y[e], (double)want);
    }
}

ZT_TEST(float_rows_of_any_length_dequantize_exactly) {
    float src[173], y[173];
    uint8_t buf[173 * 4];
    for (int i = 0; i < 173; i++) src[i] = (float)(i - 86) * 0.25f;
    const uint32_t types[] = {ZR_TYPE_F32, ZR_TYPE_F16, ZR_TYPE_BF16};
    const int lens[] = {1, 31, 32, 33, 64, 172, 173};
    for (size_t t = 0; t < 3; t++) {
        for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
            int n = lens[k];
            ZT_CHECK(zr_quantize_row(types[t], src, buf, n));
            memset(y, 0xff, sizeof y);
            zr_dequant_row(types[t], buf, y, n);
            for (int i = 0; i < n; i++) ZT_CHECKF(y[i] == src[i], "type %u n %d i %d: %g", types[t], n, i, (double)y[i]);
        }
    }
}

/* ---- dot products ---- */

/* fills a row with random bytes, then gives every f16 scale a sane value */
static void random_row(uint32_t type, uint8_t *row, int64_t n) {
    const ZrTypeInfo *t = zr_type_info(type);
    size_t bytes = zr_row_bytes(type, n);
    for (size_t i = 0; i < bytes; i++) row[i] = (uint8_t)rnd();
    int offs[2] = {-1, -1};
    switch (type) {
    case ZR_TYPE_Q4_0: case ZR_TYPE_Q5_0: case ZR_TYPE_Q8_0: offs[0] = 0; break;
    case ZR_TYPE_Q4_1: case ZR_TYPE_Q5_1: case ZR_TYPE_Q4_K: case ZR_TYPE_Q5_K: offs[0] = 0; offs[1] = 2; break;
    case ZR_TYPE_Q2_K: offs[0] = 80; offs[1] = 82; break;
    case ZR_TYPE_Q3_K: offs[0] = 108; break;
    case ZR_TYPE_Q6_K: offs[0] = 208; break;
    default: break;
    }
    for (int64_t b = 0; b < n / t->block; b++)
        for (int k = 0; k < 2; k++)
            if (offs[k] >= 0) put_u16(row + b * t->bytes + offs[k], zr_f32_to_f16((rnd_uniform() - 0.3f) * 0.01f));
    if (type == ZR_TYPE_F16 || type == ZR_TYPE_BF16)
        for (int64_t i = 0; i < n; i++) {
            float v = rnd_normal();
            put_u16(row + 2 * i, type == ZR_TYPE_F16 ? zr_f32_to_f16(v) : zr_f32_to_bf16(v));
        }
    if (type == ZR_TYPE_F32)
        for (int64_t i = 0; i < n; i++) {
            float v = rnd_normal();
            memcpy(row + 4 * i, &v, 4);
        }
}

static const uint32_t compute_types[] = {ZR_TYPE_F32, ZR_TYPE_F16, ZR_TYPE_BF16, ZR_TYPE_Q8_0, ZR_TYPE_Q4_0,
                                         ZR_TYPE_Q4_1, ZR_TYPE_Q5_0, ZR_TYPE_Q5_1, ZR_TYPE_Q2_K, ZR_TYPE_Q3_K,
                                         ZR_TYPE_Q4_K, ZR_TYPE_Q5_K, ZR_TYPE_Q6_K};
#define N_COMPUTE (sizeof compute_types / sizeof compute_types[0])

ZT_TEST(compute_flags_match_the_types_zrun_dequantizes) {
    int n = 0;
    for (uint32_t id = 0; id < ZR_TYPE_COUNT; id++) n += zr_type_info(id) && zr_type_info(id)->compute;
    ZT_CHECK(n == (int)N_COMPUTE);
    for (size_t i = 0; i < N_COMPUTE; i++) ZT_CHECK(zr_type_info(compute_types[i])->compute);
}

ZT_TEST(dot_equals_the_sum_of_dequantized_products) {
    enum { N = 2048 };
    static uint8_t row[N * 4];
    static float w[N], x[N];
    for (size_t t = 0; t < N_COMPUTE; t++) {
        uint32_t type = compute_types[t];
        const int lens[] = {256, 512, N};
        for (int k = 0; k < 3; k++) {
            int n = lens[k];
            random_row(type, row, n);
            for (int i = 0; i < n; i++) x[i] = rnd_normal();
            zr_dequant_row(type, row, w, n);
            double ref = 0, mag = 0;
            for (int i = 0; i < n; i++) {
                ZT_CHECKF(isfinite(w[i]), "%s i %d", zr_type_name(type), i);
                ref += (double)w[i] * x[i];
                mag += fabs((double)w[i] * x[i]);
            }
            float got = zr_dot_row(type, row, x, n);
            ZT_CHECKF(fabs(got - ref) <= 1e-5 * mag + 1e-30, "%s n %d: %.9g vs %.9g (mag %g)", zr_type_name(type), n,
                      (double)got, ref, mag);
        }
    }
}

ZT_TEST(dot_of_the_dequantized_row_as_f32_gives_the_same_bits) {
    /* The CPU backend's prefill dequantizes a tile of rows once and dots the F32 rows with
     * every token; decode dots the quantized row directly. Both must give the same bits. */
    enum { N = 4096 + 172 };
    static uint8_t row[N * 4];
    static float w[N], x[N];
    for (size_t t = 0; t < N_COMPUTE; t++) {
        uint32_t type = compute_types[t];
        const int lens[] = {256, 1024, 4096, 172, 4096 + 172};
        for (int k = 0; k < 5; k++) {
            int n = lens[k];
            if (n % (int)zr_type_info(type)->block) continue;
            random_row(type, row, n);
            for (int i = 0; i < n; i++) x[i] = rnd_normal();
            zr_dequant_row(type, row, w, n);
            float a = zr_dot_row(type, row, x, n), b = zr_dot_row(ZR_TYPE_F32, w, x, n);
            ZT_CHECKF(memcmp(&a, &b, sizeof a) == 0, "%s n %d: %.9g vs %.9g", zr_type_name(type), n, (double)a, (double)b);
        }
    }
}

ZT_TEST(dot_of_float_rows_handles_lengths_off_the_chunk) {
    float src[172], x[172];
    uint8_t buf[172 * 4];
    for (int i = 0; i < 172; i++) {
        src[i] = rnd_normal();
        x[i] = rnd_normal();
    }
    const uint32_t types[] = {ZR_TYPE_F32, ZR_TYPE_F16, ZR_TYPE_BF16};
    for (int t = 0; t < 3; t++) {
        for (int n = 1; n <= 172; n += 19) {
            zr_quantize_row(types[t], src, buf, n);
            float w[172];
            zr_dequant_row(types[t], buf, w, n);
            double ref = 0, mag = 0;
            for (int i = 0; i < n; i++) {
                ref += (double)w[i] * x[i];
                mag += fabs((double)w[i] * x[i]);
            }
            ZT_NEAR(zr_dot_row(types[t], buf, x, n), ref, 1e-5 * mag);
        }
    }
}

ZT_TEST(dot_is_independent_of_row_alignment) {
    /* mmapped tensors are only 32-byte aligned, and rows of odd-sized blocks are not aligned at all */
    enum { N = 512 };
    static uint8_t store[N * 4 + 64];
    float x[N];
    for (int i = 0; i < N; i++) x[i] = rnd_normal();
    for (size_t t = 0; t < N_COMPUTE; t++) {
        uint32_t type = compute_types[t];
        random_row(type, store + 1, N);
        float a = zr_dot_row(type, store + 1, x, N);
        memmove(store + 8, store + 1, zr_row_bytes(type, N));
        float b = zr_dot_row(type, store + 8, x, N);
        ZT_CHECKF(a == b, "%s: %g vs %g", zr_type_name(type), (double)a, (double)b);
    }
}

/* ---- quantizers ---- */

static double roundtrip_rel_rms(uint32_t type, const float *src, int64_t n) {
    static uint8_t buf[4096 * 4];
    static float back[4096];
    if (!zr_quantize_row(type, src, buf, n)) return INFINITY;
    zr_dequant_row(type, buf, back, n);
    double e = 0, r = 0;
    for (int64_t i = 0; i < n; i++) {
        e += ((double)back[i] - src[i]) * ((double)back[i] - src[i]);
        r += (double)src[i] * src[i];
    }
    return sqrt(e / r);
}

ZT_TEST(quantize_round_trips_gaussian_rows_within_the_type_error) {
    /* measured relative RMS errors on N(0, 0.05^2) rows (this implementation): q8_0 0.0054,
     * q4_0 0.086, q4_1 0.08, q5_0 0.043, q5_1 0.039, q2_K 0.3x, q3_K 0.15x, q4_K 0.07x,
     * q5_K 0.036, q6_K 0.018; llama.cpp's quantizer gives similar figures (fixtures). */
    static const struct { uint32_t type; double bound; } cases[] = {
        {ZR_TYPE_F32, 0},        {ZR_TYPE_F16, 4e-4},     {ZR_TYPE_BF16, 3e-3},    {ZR_TYPE_Q8_0, 0.008},
        {ZR_TYPE_Q4_0, 0.11},    {ZR_TYPE_Q4_1, 0.10},    {ZR_TYPE_Q5_0, 0.055},   {ZR_TYPE_Q5_1, 0.05},
        {ZR_TYPE_Q2_K, 0.45},    {ZR_TYPE_Q3_K, 0.22},    {ZR_TYPE_Q4_K, 0.10},    {ZR_TYPE_Q5_K, 0.05},
        {ZR_TYPE_Q6_K, 0.025},
    };
    static float src[4096];
    for (int i = 0; i < 4096; i++) src[i] = 0.05f * rnd_normal();
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        double e = roundtrip_rel_rms(cases[k].type, src, 4096);
        fprintf(stderr, "  round trip %-5s rel RMS %.5f (bound %.4f)\n", zr_type_name(cases[k].type), e, cases[k].bound);
        ZT_CHECKF(e <= cases[k].bound, "%s: %g", zr_type_name(cases[k].type), e);
    }
}

ZT_TEST(quantize_keeps_shifted_and_skewed_rows_representable) {
    /* all-positive rows, one large outlier, tiny values: the K-quants' mins and scales must
     * still cover the data (no clamped garbage) */
    static float src[1024];
    for (size_t t = 3; t < N_COMPUTE; t++) {
        uint32_t type = compute_types[t];
        for (int i = 0; i < 1024; i++) src[i] = 1.0f + 0.1f * rnd_normal();
        double e1 = roundtrip_rel_rms(type, src, 1024);
        ZT_CHECKF(e1 < 0.2, "%s positive: %g", zr_type_name(type), e1);
        for (int i = 0; i < 1024; i++) src[i] = 1e-4f * rnd_normal();
        src[77] = 0.5f;
        double e2 = roundtrip_rel_rms(type, src, 1024);
        ZT_CHECKF(e2 < 0.2, "%s outlier: %g", zr_type_name(type), e2);
        for (int i = 0; i < 1024; i++) src[i] = 1e-3f * rnd_normal();
        double e3 = roundtrip_rel_rms(type, src, 1024);
        ZT_CHECKF(e3 < 0.5, "%s small: %g", zr_type_name(type), e3);
    }
}

ZT_TEST(quantize_of_zeros_gives_zeros) {
    static float zero[512], back[512];
    static uint8_t buf[512 * 4];
    for (size_t t = 0; t < N_COMPUTE; t++) {
        uint32_t type = compute_types[t];
        memset(buf, 0xaa, sizeof buf);
        ZT_CHECK(zr_quantize_row(type, zero, buf, 512));
        zr_dequant_row(type, buf, back, 512);
        for (int i = 0; i < 512; i++) ZT_CHECKF(back[i] == 0.0f, "%s i %d: %g", zr_type_name(type), i, (double)back[i]);
    }
}

ZT_TEST(quantize_q8_0_and_q4_0_match_ggml_reference_rules) {
    /* q8_0: d = amax / 127, q = round(x / d); q4_0: d = (signed max) / -8, q = min(15, (int)(x/d + 8.5)) */
    float src[32];
    for (int i = 0; i < 32; i++) src[i] = (float)(i - 16) / 16.0f; /* -1 .. 0.9375 */
    uint8_t b8[34], b4[18];
    ZT_CHECK(zr_quantize_row(ZR_TYPE_Q8_0, src, b8, 32));
    uint16_t d8;
    memcpy(&d8, b8, 2);
    ZT_CHECK(d8 == zr_f32_to_f16(1.0f / 127));
    ZT_CHECK((int8_t)b8[2] == -127);
    ZT_CHECK((int8_t)b8[2 + 20] == 32); /* 0.25 * 127 = 31.75 */
    ZT_CHECK(zr_quantize_row(ZR_TYPE_Q4_0, src, b4, 32));
    uint16_t d4;
    memcpy(&d4, b4, 2);
    ZT_CHECK(d4 == zr_f32_to_f16(-1.0f / -8)); /* the max-magnitude value is -1 */
    ZT_CHECK((b4[2] & 0xf) == 0);              /* -1 maps to q = 0, i.e. -8 * d */
    ZT_CHECK((b4[2 + 15] >> 4) == 15);         /* 0.9375 / 0.125 + 8.5 = 16 -> clamped to 15 */
    float y[32];
    zr_dequant_row(ZR_TYPE_Q4_0, b4, y, 32);
    ZT_CHECK(y[0] == -1.0f);
    ZT_CHECK(y[16] == 0.0f);
}

ZT_TEST(quantize_refuses_partial_blocks_and_unsupported_types) {
    float src[256] = {0};
    uint8_t buf[1024];
    ZT_CHECK(!zr_quantize_row(ZR_TYPE_Q4_0, src, buf, 31));
    ZT_CHECK(!zr_quantize_row(ZR_TYPE_Q4_K, src, buf, 128));
    ZT_CHECK(!zr_quantize_row(ZR_TYPE_Q8_K, src, buf, 256));
    ZT_CHECK(!zr_quantize_row(ZR_TYPE_Q8_1, src, buf, 32));
    ZT_CHECK(!zr_quantize_row(16, src, buf, 256)); /* iq2_xxs */
    ZT_CHECK(!zr_quantize_row(4, src, buf, 32));   /* removed id */
    ZT_CHECK(zr_quantize_row(ZR_TYPE_Q6_K, src, buf, 256));
}

int main(void) { return zt_run(); }
