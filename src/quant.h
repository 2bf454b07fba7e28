/* Weight formats: the ggml tensor types zrun reads, their block layouts and sizes, row
 * dequantization and reference dot products (the CPU oracle the GPU kernels are tested
 * against). Layouts follow ggml's ggml-common.h. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Values are ggml's type ids, as stored in GGUF tensor infos. */
typedef enum ZrType {
    ZR_TYPE_F32 = 0,
    ZR_TYPE_F16 = 1,
    ZR_TYPE_Q4_0 = 2,
    ZR_TYPE_Q4_1 = 3,
    ZR_TYPE_Q5_0 = 6,
    ZR_TYPE_Q5_1 = 7,
    ZR_TYPE_Q8_0 = 8,
    ZR_TYPE_Q8_1 = 9,
    ZR_TYPE_Q2_K = 10,
    ZR_TYPE_Q3_K = 11,
    ZR_TYPE_Q4_K = 12,
    ZR_TYPE_Q5_K = 13,
    ZR_TYPE_Q6_K = 14,
    ZR_TYPE_Q8_K = 15,
    ZR_TYPE_BF16 = 30,
    ZR_TYPE_COUNT = 40 /* ids below this are known to the table (some only by size) */
} ZrType;

typedef struct ZrTypeInfo {
    const char *name;   /* "q4_K" etc., as llama.cpp prints them */
    uint32_t block;     /* elements per block */
    uint32_t bytes;     /* bytes per block */
    bool compute;       /* zrun can dequantize / dot it (else: known size only, refused by model) */
} ZrTypeInfo;

/* NULL for an id ggml does not define (or a removed one, e.g. 4, 5). */
const ZrTypeInfo *zr_type_info(uint32_t type);
const char *zr_type_name(uint32_t type); /* "type 99" style text for unknown ids (static buffer-free: returns "?") */
/* Bytes of a row of n elements; n must be a multiple of the block size. */
size_t zr_row_bytes(uint32_t type, int64_t n);

/* dst[0..n) = dequantized row. n is a multiple of the type's block size. */
void zr_dequant_row(uint32_t type, const void *src, float *dst, int64_t n);
/* sum_i dequant(row)[i] * x[i], accumulated in float (double where cheap is fine). */
float zr_dot_row(uint32_t type, const void *row, const float *x, int64_t n);

float zr_f16_to_f32(uint16_t h);
uint16_t zr_f32_to_f16(float f);  /* round to nearest even */
float zr_bf16_to_f32(uint16_t h);
uint16_t zr_f32_to_bf16(float f); /* round to nearest even */

/* Quantize a row (for the model synthesizer and tests). Supported: F32, F16, BF16, Q8_0,
 * Q4_0, Q4_1, Q5_0, Q5_1 and the K-quants Q2_K..Q6_K (simple per-block scale search, not
 * llama.cpp's imatrix-quality search). Returns false for other types. */
bool zr_quantize_row(uint32_t type, const float *src, void *dst, int64_t n);
