/* GGUF v2/v3 reader. The file is parsed from a (ptr, len) buffer (an mmap of the file) and
 * validated completely up front; afterwards every accessor is bounds-safe by construction.
 * Strings point into the buffer (not NUL-terminated: use ZrStr lengths). Two allocations in
 * all (the key table and the tensor table), none per key or tensor. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "hash.h"

#define ZR_GGUF_MAX_DIMS 4
#define ZR_GGUF_DEFAULT_ALIGNMENT 32

typedef enum ZrGgufValueType {
    ZR_GGUF_UINT8 = 0,
    ZR_GGUF_INT8 = 1,
    ZR_GGUF_UINT16 = 2,
    ZR_GGUF_INT16 = 3,
    ZR_GGUF_UINT32 = 4,
    ZR_GGUF_INT32 = 5,
    ZR_GGUF_FLOAT32 = 6,
    ZR_GGUF_BOOL = 7,
    ZR_GGUF_STRING = 8,
    ZR_GGUF_ARRAY = 9,
    ZR_GGUF_UINT64 = 10,
    ZR_GGUF_INT64 = 11,
    ZR_GGUF_FLOAT64 = 12,
    ZR_GGUF_N_VALUE_TYPES
} ZrGgufValueType;

typedef struct ZrStr {
    const char *ptr; /* into the file buffer; not NUL-terminated */
    uint64_t len;
} ZrStr;

typedef struct ZrGgufKv {
    ZrStr key;
    uint32_t type;        /* ZrGgufValueType */
    uint32_t elem_type;   /* for ARRAY: type of the elements (may itself be ARRAY) */
    uint64_t n;           /* for ARRAY: element count; otherwise 1 */
    const uint8_t *value; /* raw little-endian value bytes in the buffer (for ARRAY: first element) */
    uint64_t value_bytes; /* bytes the value occupies in the buffer */
} ZrGgufKv;

typedef struct ZrGgufTensor {
    ZrStr name;
    uint32_t n_dims;
    int64_t ne[ZR_GGUF_MAX_DIMS]; /* ne[0] = row length (innermost); unused dims are 1 */
    uint32_t type;                /* ZrType (quant.h) */
    uint64_t offset;              /* relative to the data section */
    uint64_t nbytes;
    const void *data;             /* = base + data_offset + offset */
} ZrGgufTensor;

typedef struct ZrGguf {
    const char *path; /* for messages; may be a label such as "<buffer>" */
    const uint8_t *base;
    uint64_t len;
    uint32_t version;
    uint64_t n_kv;
    uint64_t n_tensors;
    ZrGgufKv *kv;
    ZrGgufTensor *tensors;
    uint64_t alignment;
    uint64_t data_offset; /* start of the tensor data section in the buffer */
    void *map;            /* mmap owned by zr_gguf_open, else NULL */
    uint64_t map_len;
    /* name -> index hash indexes (open addressing, slot = index + 1, 0 = empty); each lives
     * in the same allocation as its table */
    uint32_t *kv_hash;
    uint64_t kv_hash_mask;
    uint32_t *tensor_hash;
    uint64_t tensor_hash_mask;
    ZrHashKey hash_key; /* drawn per parse: names cannot be chosen to collide (hash.h) */
} ZrGguf;

/* Parses and validates buf[0..len) (zero-initializes *g first; on failure *g holds nothing
 * to free). label names the input in error messages. On success the
 * ZrGguf references buf, which must outlive it. */
int zr_gguf_parse(ZrGguf *g, const void *buf, size_t len, const char *label, ZrError *err);
/* mmaps path read-only and parses it. */
int zr_gguf_open(ZrGguf *g, const char *path, ZrError *err);
void zr_gguf_close(ZrGguf *g);

const ZrGgufKv *zr_gguf_find(const ZrGguf *g, const char *key);
const ZrGgufTensor *zr_gguf_tensor(const ZrGguf *g, const char *name);
const char *zr_gguf_type_name(uint32_t value_type);
bool zr_str_eq(ZrStr s, const char *cstr);
/* A string from the file as text that is safe to print: at most cap - 4 of its bytes (its
 * length may be anything up to 2^64 - 1: only what is shown is read), printable ASCII kept,
 * every other byte (controls, escapes, NUL) as '?', and "..." when cut. Returns out. */
const char *zr_str_printable(ZrStr s, char *out, size_t cap);

/* Typed getters. Integer getters accept any integer type whose value fits (bool too for
 * get_bool); float getters accept FLOAT32/FLOAT64. They fail with ZR_E_FORMAT naming the file,
 * key, expected and found type; a missing key gives ZR_E_FORMAT too unless the _opt form is used
 * (which returns 0 and leaves *out untouched when the key is absent). */
int zr_gguf_get_u32(const ZrGguf *g, const char *key, uint32_t *out, ZrError *err);
int zr_gguf_get_u64(const ZrGguf *g, const char *key, uint64_t *out, ZrError *err);
int zr_gguf_get_i64(const ZrGguf *g, const char *key, int64_t *out, ZrError *err);
int zr_gguf_get_f32(const ZrGguf *g, const char *key, float *out, ZrError *err);
int zr_gguf_get_bool(const ZrGguf *g, const char *key, bool *out, ZrError *err);
int zr_gguf_get_str(const ZrGguf *g, const char *key, ZrStr *out, ZrError *err);
int zr_gguf_get_u32_opt(const ZrGguf *g, const char *key, uint32_t *out, ZrError *err);
int zr_gguf_get_f32_opt(const ZrGguf *g, const char *key, float *out, ZrError *err);
int zr_gguf_get_bool_opt(const ZrGguf *g, const char *key, bool *out, ZrError *err);
int zr_gguf_get_str_opt(const ZrGguf *g, const char *key, ZrStr *out, ZrError *err);
/* A string that names something (an architecture, a tokenizer, a pre-tokenizer, a scaling
 * type): as get_str, and refused with ZR_E_FORMAT when it holds a NUL byte, which would make
 * "default\0" name "default" wherever the name becomes a C string. */
int zr_gguf_get_name(const ZrGguf *g, const char *key, ZrStr *out, ZrError *err);
int zr_gguf_get_name_opt(const ZrGguf *g, const char *key, ZrStr *out, ZrError *err);

/* Arrays. get_arr checks the element type (pass ZR_GGUF_N_VALUE_TYPES to accept any). */
int zr_gguf_get_arr(const ZrGguf *g, const char *key, uint32_t elem_type, const ZrGgufKv **out, ZrError *err);
/* Fills out[0..kv->n) with the strings of a STRING array (validated at parse time). */
void zr_gguf_arr_strings(const ZrGgufKv *kv, ZrStr *out);
/* Element i of an array (any element type, nested arrays included) as a kv view: type is the
 * element type, key is the array's key. O(i) for string and nested arrays. 1 if i is out of
 * range or kv is not an array. */
int zr_gguf_arr_elem(const ZrGgufKv *kv, uint64_t i, ZrGgufKv *out);
/* Element i of a numeric array, converted. */
double zr_gguf_arr_num(const ZrGgufKv *kv, uint64_t i);
/* Scalar value of a numeric kv as double / int64 (bool as 0/1). */
double zr_gguf_kv_num(const ZrGgufKv *kv);
