/* A small GGUF writer: metadata of any value type (nested arrays included) and tensors with
 * their type, shape and data, laid out at the alignment. Used by the model synthesizer
 * (streaming: meta first, then each tensor's rows) and by tests, which also use it to
 * hand-build malformed files: the writer checks nothing about what it is given, and the
 * header fields can be overridden.
 *
 *   ZrGgufWriter w; zr_gguf_w_init(&w);
 *   zr_gguf_w_str(&w, "general.architecture", "llama");
 *   zr_gguf_w_tensor(&w, "token_embd.weight", ZR_TYPE_F32, 2, (int64_t[]){64, 512}, data);
 *   zr_gguf_w_to_mem(&w, &buf, &len, &err);  (or zr_gguf_w_write(&w, f, &err))
 *   zr_gguf_w_free(&w);
 */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "err.h"
#include "gguf.h"

typedef struct ZrGgufWTensor {
    uint64_t name_off; /* into names */
    uint64_t name_len;
    uint32_t n_dims;
    int64_t ne[ZR_GGUF_MAX_DIMS];
    uint32_t type;
    uint64_t offset; /* relative to the data section */
    uint64_t nbytes;
    const void *data; /* borrowed; NULL = zeros (or written by the caller when streaming) */
} ZrGgufWTensor;

typedef struct ZrGgufWriter {
    /* header, as written (tests may change them) */
    char magic[4];           /* "GGUF" */
    uint32_t version;        /* 3 */
    int64_t n_kv_override;   /* -1: the real count */
    int64_t n_tensors_override;
    uint64_t alignment;      /* layout alignment; set before adding tensors (zr_gguf_w_alignment) */
    /* key/value section bytes, as they go into the file */
    uint8_t *meta;
    uint64_t meta_len, meta_cap;
    uint64_t n_kv;
    /* tensor table */
    ZrGgufWTensor *tensors;
    uint64_t n_tensors, tensors_cap;
    char *names;
    uint64_t names_len, names_cap;
    uint64_t data_size; /* end of the furthest tensor's data, padded */
    bool oom;           /* an allocation failed: writing reports ZR_E_NOMEM */
} ZrGgufWriter;

void zr_gguf_w_init(ZrGgufWriter *w);
void zr_gguf_w_free(ZrGgufWriter *w);

/* Sets the layout alignment and writes the general.alignment key (uint32). */
void zr_gguf_w_alignment(ZrGgufWriter *w, uint32_t alignment);

/* Scalars and strings. */
void zr_gguf_w_u8(ZrGgufWriter *w, const char *key, uint8_t v);
void zr_gguf_w_i8(ZrGgufWriter *w, const char *key, int8_t v);
void zr_gguf_w_u16(ZrGgufWriter *w, const char *key, uint16_t v);
void zr_gguf_w_i16(ZrGgufWriter *w, const char *key, int16_t v);
void zr_gguf_w_u32(ZrGgufWriter *w, const char *key, uint32_t v);
void zr_gguf_w_i32(ZrGgufWriter *w, const char *key, int32_t v);
void zr_gguf_w_f32(ZrGgufWriter *w, const char *key, float v);
void zr_gguf_w_bool(ZrGgufWriter *w, const char *key, bool v);
void zr_gguf_w_u64(ZrGgufWriter *w, const char *key, uint64_t v);
void zr_gguf_w_i64(ZrGgufWriter *w, const char *key, int64_t v);
void zr_gguf_w_f64(ZrGgufWriter *w, const char *key, double v);
void zr_gguf_w_str(ZrGgufWriter *w, const char *key, const char *v);
/* Arrays: n numeric elements of elem_type, packed little-endian in elems. */
void zr_gguf_w_arr(ZrGgufWriter *w, const char *key, uint32_t elem_type, uint64_t n, const void *elems);
/* Arrays of strings (NUL-terminated, or with lengths). */
void zr_gguf_w_arr_str(ZrGgufWriter *w, const char *key, uint64_t n, const char *const *strs);
void zr_gguf_w_arr_zrstr(ZrGgufWriter *w, const char *key, uint64_t n, const ZrStr *strs);
/* A kv of a parsed file, copied as it is (any type). */
void zr_gguf_w_copy_kv(ZrGgufWriter *w, const ZrGgufKv *kv);

/* Raw building blocks (nested arrays, malformed files): a key and its value type (counted as
 * one kv), then the value's bytes by hand. An array value is zr_gguf_w_raw_arr_head followed by
 * its elements; a nested array's elements are array heads with their elements again. */
void zr_gguf_w_key(ZrGgufWriter *w, const char *key, uint32_t type);
void zr_gguf_w_raw_arr_head(ZrGgufWriter *w, uint32_t elem_type, uint64_t n);
void zr_gguf_w_raw_u32(ZrGgufWriter *w, uint32_t v);
void zr_gguf_w_raw_u64(ZrGgufWriter *w, uint64_t v);
void zr_gguf_w_raw_str(ZrGgufWriter *w, const char *s); /* u64 length + bytes */
void zr_gguf_w_raw_bytes(ZrGgufWriter *w, const void *p, uint64_t n);

/* A tensor at the next aligned offset; nbytes from the type and shape. data may be NULL
 * (zeros, or written by the caller when streaming). Returns the tensor's index. */
uint64_t zr_gguf_w_tensor(ZrGgufWriter *w, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
                          const void *data);
/* A tensor info with everything given (no data; offset and nbytes as told). n_dims is written
 * as given, followed by min(n_dims, 4) values of ne (so n_dims > 4 can be built). */
uint64_t zr_gguf_w_tensor_raw(ZrGgufWriter *w, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
                              uint64_t offset, uint64_t nbytes);

/* Byte sizes of the pieces of the file, and where tensor info i starts in it. */
uint64_t zr_gguf_w_header_size(const ZrGgufWriter *w);    /* magic, version, counts: 24 */
uint64_t zr_gguf_w_infos_offset(const ZrGgufWriter *w);   /* end of the kv section */
uint64_t zr_gguf_w_info_offset(const ZrGgufWriter *w, uint64_t i);
uint64_t zr_gguf_w_data_offset(const ZrGgufWriter *w);    /* start of the tensor data */
uint64_t zr_gguf_w_file_size(const ZrGgufWriter *w);

/* Header, metadata, tensor infos and the padding up to the data section. */
int zr_gguf_w_write_meta(const ZrGgufWriter *w, FILE *f, ZrError *err);
/* Zero padding after a tensor of nbytes written by the caller (streaming). */
int zr_gguf_w_write_pad(const ZrGgufWriter *w, FILE *f, uint64_t nbytes, ZrError *err);
/* The whole file: meta, then every tensor's data at its offset (zeros where data is NULL). */
int zr_gguf_w_write(const ZrGgufWriter *w, FILE *f, ZrError *err);
/* The whole file in memory (malloc'ed, *len bytes). */
int zr_gguf_w_to_mem(const ZrGgufWriter *w, uint8_t **buf, size_t *len, ZrError *err);
