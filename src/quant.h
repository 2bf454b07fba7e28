/* Weight formats: the ggml tensor types zrun reads, their block layouts and sizes, row
 * dequantization and reference dot products (the CPU oracle the GPU kernels are tested
 * against). Layouts follow ggml's ggml-common.h. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The types and their facts are one table, src/zr_types.def, read by host and kernels. */

/* ZR_TYPE_<E> = ggml's type id, as stored in GGUF tensor infos. */
typedef enum ZrType {
#define ZR_TYPE(id, E, name, block, bytes, kernel, item, main, side) ZR_TYPE_##E = id,
#define ZR_TYPE_SIZE(id, E, name, block, bytes) ZR_TYPE_##E = id,
#include "zr_types.def"
    /* ids below this are known to the table (some only by size): the size of a union with a
     * member of id + 1 bytes per type is the largest id + 1, so a new line moves it */
    ZR_TYPE_COUNT = sizeof(union {
#define ZR_TYPE(id, E, name, block, bytes, kernel, item, main, side) char E[(id) + 1];
#define ZR_TYPE_SIZE(id, E, name, block, bytes) char E[(id) + 1];
#include "zr_types.def"
    })
} ZrType;

/* ZR_FTYPE_<E> = llama.cpp's general.file_type value of the mix E ("Q4_K_M"). */
typedef enum ZrFileType {
#define ZR_FTYPE(id, E, type) ZR_FTYPE_##E = id,
#include "zr_types.def"
} ZrFileType;

typedef struct ZrTypeInfo {
    const char *name;   /* "q4_K" etc., as llama.cpp prints them */
    uint32_t block;     /* elements per block */
    uint32_t bytes;     /* bytes per block */
    bool compute;       /* zrun can dequantize / dot it (else: known size only, refused by model) */
    /* The GPU's repacked layout and kernels (cu/quant.cuh, src/cuda/weights.c); for computed
     * types only, else NULL / 0. */
    const char *kernel; /* kernel name suffix: matvec_<kernel>, "q4_k" */
    uint32_t item;      /* values per 16-byte item of the matrix-vector kernel */
    uint32_t main;      /* bytes per block in the main stream (rows padded to 16 bytes) */
    uint32_t side;      /* bytes per block in the side stream (0: none) */
} ZrTypeInfo;

/* NULL for an id ggml does not define (or a removed one, e.g. 4, 5). */
const ZrTypeInfo *zr_type_info(uint32_t type);
const char *zr_type_name(uint32_t type); /* "type 99" style text for unknown ids (static buffer-free: returns "?") */
/* Bytes of a row of n elements; n must be a multiple of the block size. */
size_t zr_row_bytes(uint32_t type, int64_t n);
/* The suffix of the type's kernel names ("q4_k": matvec_q4_k, embed_q4_k, dequant_q4_k_f16);
 * NULL for a type without GPU kernels. */
const char *zr_type_kernel_suffix(uint32_t type);

/* The name of a general.file_type value ("Q4_K_M"); NULL for one zrun does not name. */
const char *zr_file_type_name(uint32_t ftype);
/* The plain general.file_type of a file of one weight type (Q4_K: Q4_K_S, as llama.cpp
 * writes it); UINT32_MAX for a type no file type is named after. */
uint32_t zr_file_type_of(uint32_t type);

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
