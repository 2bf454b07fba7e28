/* Hand-built GGUF files: a few good ones and one bad one per validation rule of the reader.
 * Bad files start from a good base (or from raw writer calls) and are truncated or patched at
 * offsets the writer reports, so each breaks exactly one rule. */
#include "gguf_cases.h"

#include <stdlib.h>
#include <string.h>

#include "gguf_write.h"
#include "quant.h"

/* ---- helpers ----------------------------------------------------------------------------- */

static int finish(ZrGgufWriter *w, uint8_t **buf, size_t *len) {
    ZrError e;
    int rc = zr_gguf_w_to_mem(w, buf, len, &e);
    zr_gguf_w_free(w);
    return rc;
}

static void put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

/* File offset where the next kv written to w starts. */
static uint64_t here(const ZrGgufWriter *w) { return zr_gguf_w_header_size(w) + w->meta_len; }

static const float k_embd[32] = {0.5f, -1.0f, 2.0f, 0.25f, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
                                 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28};

/* The base file: 5 kvs (a long string, then string, u32, u32 array, string array) and 3
 * tensors (the first with a long name). The long first entries keep the reader's quick count
 * checks (n_kv x 13 bytes, n_tensors x 32 bytes must fit) satisfied when a later entry is
 * truncated, so truncation tests reach the entry itself. */
typedef struct Base {
    uint64_t kv[4];   /* file offsets of kvs #1..#4 */
    uint64_t info[2]; /* file offsets of tensor infos #1 and #2 */
    uint64_t infos_end, data;
} Base;

static void base(ZrGgufWriter *w, Base *b) {
    static const uint32_t arr[4] = {1, 2, 3, 4};
    static const char *const toks[3] = {"<unk>", "a", "bc"};
    char pad[201];
    memset(pad, 'd', 200);
    pad[200] = 0;
    zr_gguf_w_str(w, "general.description", pad);
    b->kv[0] = here(w);
    zr_gguf_w_str(w, "general.architecture", "llama");
    b->kv[1] = here(w);
    zr_gguf_w_u32(w, "llama.block_count", 2);
    b->kv[2] = here(w);
    zr_gguf_w_arr(w, "test.u32arr", ZR_GGUF_UINT32, 4, arr);
    b->kv[3] = here(w);
    zr_gguf_w_arr_str(w, "tokenizer.ggml.tokens", 3, toks);
    memset(pad, 'p', 100);
    pad[100] = 0;
    zr_gguf_w_tensor(w, pad, ZR_TYPE_F32, 1, (const int64_t[]){2}, k_embd);
    zr_gguf_w_tensor(w, "token_embd.weight", ZR_TYPE_F32, 2, (const int64_t[]){8, 4}, k_embd);
    zr_gguf_w_tensor(w, "blk.0.attn_q.weight", ZR_TYPE_Q8_0, 2, (const int64_t[]){32, 2}, NULL);
    b->info[0] = zr_gguf_w_info_offset(w, 1);
    b->info[1] = zr_gguf_w_info_offset(w, 2);
    b->infos_end = zr_gguf_w_info_offset(w, 3);
    b->data = zr_gguf_w_data_offset(w);
}

/* The base file truncated to `cut` bytes (cut computed from its offsets by f). */
static int base_cut(uint8_t **buf, size_t *len, uint64_t (*f)(const Base *)) {
    ZrGgufWriter w;
    Base b;
    zr_gguf_w_init(&w);
    base(&w, &b);
    int rc = finish(&w, buf, len);
    if (!rc) *len = f(&b);
    return rc;
}

#define CUT_CASE(fname, expr)                                                  \
    static uint64_t fname##_at(const Base *b) { (void)b; return (expr); }     \
    static int fname(uint8_t **buf, size_t *len) { return base_cut(buf, len, fname##_at); }

/* A file of the base with a hook that patches the bytes afterwards. */
#define PATCH_CASE(fname, ...)                                                \
    static int fname(uint8_t **buf, size_t *len) {                             \
        ZrGgufWriter w;                                                        \
        Base b;                                                                \
        zr_gguf_w_init(&w);                                                    \
        base(&w, &b);                                                          \
        if (finish(&w, buf, len)) return 1;                                    \
        uint8_t *p = *buf;                                                     \
        (void)p;                                                               \
        __VA_ARGS__;                                                           \
        return 0;                                                              \
    }

/* A file whose writer gets extra calls after the base (or instead of it). */
#define WRITER_CASE(fname, with_base, ...)                                    \
    static int fname(uint8_t **buf, size_t *len) {                             \
        ZrGgufWriter w;                                                        \
        Base b;                                                                \
        zr_gguf_w_init(&w);                                                    \
        if (with_base) base(&w, &b);                                           \
        (void)b;                                                               \
        __VA_ARGS__;                                                           \
        return finish(&w, buf, len);                                           \
    }

/* ---- good files -------------------------------------------------------------------------- */

WRITER_CASE(good_base, 1, (void)0)
WRITER_CASE(good_empty, 0, (void)0)
WRITER_CASE(good_v2, 1, w.version = 2)

WRITER_CASE(good_every_type, 0, {
    zr_gguf_w_u8(&w, "t.u8", 200);
    zr_gguf_w_i8(&w, "t.i8", -100);
    zr_gguf_w_u16(&w, "t.u16", 60000);
    zr_gguf_w_i16(&w, "t.i16", -30000);
    zr_gguf_w_u32(&w, "t.u32", 4000000000u);
    zr_gguf_w_i32(&w, "t.i32", -2000000000);
    zr_gguf_w_f32(&w, "t.f32", 1.5f);
    zr_gguf_w_bool(&w, "t.bool", true);
    zr_gguf_w_str(&w, "t.str", "h\xc3\xa9llo");
    zr_gguf_w_u64(&w, "t.u64", 18000000000000000000ull);
    zr_gguf_w_i64(&w, "t.i64", -9000000000000000000ll);
    zr_gguf_w_f64(&w, "t.f64", -2.25);
    static const float fa[3] = {0.5f, -1.5f, 3.0f};
    zr_gguf_w_arr(&w, "t.arr_f32", ZR_GGUF_FLOAT32, 3, fa);
    static const int8_t ia[2] = {-1, 7};
    zr_gguf_w_arr(&w, "t.arr_i8", ZR_GGUF_INT8, 2, ia);
    zr_gguf_w_arr(&w, "t.arr_empty", ZR_GGUF_UINT64, 0, NULL);
    static const char *const sa[2] = {"x", ""};
    zr_gguf_w_arr_str(&w, "t.arr_str", 2, sa);
    /* [[1, 2], [], [3]] */
    zr_gguf_w_key(&w, "t.nested", ZR_GGUF_ARRAY);
    zr_gguf_w_raw_arr_head(&w, ZR_GGUF_ARRAY, 3);
    zr_gguf_w_raw_arr_head(&w, ZR_GGUF_UINT32, 2);
    zr_gguf_w_raw_u32(&w, 1);
    zr_gguf_w_raw_u32(&w, 2);
    zr_gguf_w_raw_arr_head(&w, ZR_GGUF_UINT32, 0);
    zr_gguf_w_raw_arr_head(&w, ZR_GGUF_UINT32, 1);
    zr_gguf_w_raw_u32(&w, 3);
    /* [[["a", "bc"]], [[]]] : strings two levels down */
    zr_gguf_w_key(&w, "t.nested_str", ZR_GGUF_ARRAY);
    zr_gguf_w_raw_arr_head(&w, ZR_GGUF_ARRAY, 2);
    zr_gguf_w_raw_arr_head(&w, ZR_GGUF_ARRAY, 1);
    zr_gguf_w_raw_arr_head(&w, ZR_GGUF_STRING, 2);
    zr_gguf_w_raw_str(&w, "a");
    zr_gguf_w_raw_str(&w, "bc");
    zr_gguf_w_raw_arr_head(&w, ZR_GGUF_ARRAY, 1);
    zr_gguf_w_raw_arr_head(&w, ZR_GGUF_STRING, 0);
    zr_gguf_w_tensor(&w, "v", ZR_TYPE_F32, 1, (const int64_t[]){4}, k_embd);
    zr_gguf_w_tensor(&w, "m4", ZR_TYPE_F16, 4, (const int64_t[]){2, 3, 1, 2}, NULL);
    zr_gguf_w_tensor(&w, "k", ZR_TYPE_Q4_K, 2, (const int64_t[]){256, 3}, NULL);
})

WRITER_CASE(good_alignment_64, 0, {
    zr_gguf_w_alignment(&w, 64);
    zr_gguf_w_str(&w, "general.architecture", "llama");
    zr_gguf_w_tensor(&w, "a", ZR_TYPE_F32, 1, (const int64_t[]){3}, k_embd);
    zr_gguf_w_tensor(&w, "b", ZR_TYPE_F32, 2, (const int64_t[]){4, 2}, k_embd + 4);
})

WRITER_CASE(good_alignment_1, 0, {
    zr_gguf_w_alignment(&w, 1);
    zr_gguf_w_tensor(&w, "a", ZR_TYPE_F16, 1, (const int64_t[]){3}, NULL);
    zr_gguf_w_tensor(&w, "b", ZR_TYPE_BF16, 1, (const int64_t[]){5}, NULL);
})

/* ---- header ------------------------------------------------------------------------------ */

PATCH_CASE(bad_magic, p[0] = 'X')
static int bad_too_short(uint8_t **buf, size_t *len) {
    *buf = malloc(3);
    if (!*buf) return 1;
    memcpy(*buf, "GGU", 3);
    *len = 3;
    return 0;
}
PATCH_CASE(bad_version_1, put_u32(p + 4, 1))
PATCH_CASE(bad_version_4, put_u32(p + 4, 4))
PATCH_CASE(bad_version_big_endian, put_u32(p + 4, 0x03000000u))
CUT_CASE(trunc_header, 20)
PATCH_CASE(n_kv_overflows, put_u64(p + 16, UINT64_MAX))
PATCH_CASE(n_kv_beyond_file, put_u64(p + 16, 1000))
PATCH_CASE(n_tensors_overflows, put_u64(p + 8, UINT64_MAX))
PATCH_CASE(n_tensors_beyond_file, put_u64(p + 8, 1000))

/* ---- key/value section ------------------------------------------------------------------- */

CUT_CASE(trunc_kv_key_length, b->kv[0] + 5)
CUT_CASE(trunc_kv_key, b->kv[0] + 8 + 10)
CUT_CASE(trunc_kv_type, b->kv[1] + 8 + 17 + 2)
CUT_CASE(trunc_kv_value, b->kv[1] + 8 + 17 + 4 + 3)
CUT_CASE(trunc_string_value, b->kv[0] + 8 + 20 + 4 + 8 + 2)
CUT_CASE(trunc_array_head, b->kv[2] + 8 + 11 + 4 + 6)
CUT_CASE(trunc_array_elems, b->kv[2] + 8 + 11 + 4 + 12 + 9)
CUT_CASE(trunc_string_array, b->kv[3] + 8 + 21 + 4 + 12 + (8 + 5) + (8 + 1) + 8 + 1)
PATCH_CASE(key_length_beyond_file, put_u64(p + b.kv[0], 1ull << 40))
PATCH_CASE(key_length_huge, put_u64(p + b.kv[0], UINT64_MAX))
PATCH_CASE(string_length_beyond_file, put_u64(p + b.kv[0] + 8 + 20 + 4, 1ull << 63))
PATCH_CASE(array_length_beyond_file, put_u64(p + b.kv[2] + 8 + 11 + 4 + 4, 1000))
PATCH_CASE(array_bytes_overflow, {
    put_u32(p + b.kv[2] + 8 + 11 + 4, ZR_GGUF_UINT64);
    put_u64(p + b.kv[2] + 8 + 11 + 4 + 4, 1ull << 62);
})
PATCH_CASE(string_array_count_beyond_file, put_u64(p + b.kv[3] + 8 + 21 + 4 + 4, 1ull << 60))
PATCH_CASE(string_element_beyond_file, put_u64(p + b.kv[3] + 8 + 21 + 4 + 12 + 13, 1ull << 50))
PATCH_CASE(unknown_value_type, put_u32(p + b.kv[1] + 8 + 17, 13))
PATCH_CASE(unknown_array_elem_type, put_u32(p + b.kv[2] + 8 + 11 + 4, 42))
WRITER_CASE(nested_array_count_beyond_file, 0, {
    zr_gguf_w_key(&w, "t.nested", ZR_GGUF_ARRAY);
    zr_gguf_w_raw_arr_head(&w, ZR_GGUF_ARRAY, 1ull << 61);
    zr_gguf_w_raw_arr_head(&w, ZR_GGUF_UINT8, 0);
})
WRITER_CASE(nested_too_deep, 0, {
    zr_gguf_w_key(&w, "t.deep", ZR_GGUF_ARRAY);
    for (int i = 0; i < 12; i++) zr_gguf_w_raw_arr_head(&w, ZR_GGUF_ARRAY, 1);
    zr_gguf_w_raw_arr_head(&w, ZR_GGUF_UINT8, 0);
})
WRITER_CASE(duplicate_key, 1, zr_gguf_w_u32(&w, "llama.block_count", 3))
WRITER_CASE(alignment_not_power_of_two, 0, {
    zr_gguf_w_u32(&w, "general.alignment", 48);
    zr_gguf_w_tensor(&w, "a", ZR_TYPE_F32, 1, (const int64_t[]){4}, NULL);
})
WRITER_CASE(alignment_zero, 0, zr_gguf_w_u32(&w, "general.alignment", 0))
WRITER_CASE(alignment_wrong_type, 0, zr_gguf_w_str(&w, "general.alignment", "32"))

/* ---- tensor infos ------------------------------------------------------------------------ */

CUT_CASE(trunc_tensor_name, b->info[0] + 8 + 5)
CUT_CASE(trunc_tensor_n_dims, b->info[0] + 8 + 17 + 2)
CUT_CASE(trunc_tensor_dims, b->info[0] + 8 + 17 + 4 + 8 + 3)
CUT_CASE(trunc_tensor_type, b->info[1] + 8 + 19 + 4 + 16 + 1)
CUT_CASE(trunc_tensor_offset, b->info[1] + 8 + 19 + 4 + 16 + 4 + 7)
PATCH_CASE(tensor_name_beyond_file, put_u64(p + b.info[1], 1ull << 62))
PATCH_CASE(n_dims_5, put_u32(p + b.info[0] + 8 + 17, 5))
PATCH_CASE(n_dims_0, put_u32(p + b.info[0] + 8 + 17, 0))
PATCH_CASE(zero_dim, put_u64(p + b.info[0] + 8 + 17 + 4 + 8, 0))
PATCH_CASE(dim_beyond_int64, put_u64(p + b.info[0] + 8 + 17 + 4, 1ull << 63))
WRITER_CASE(element_count_overflow, 0,
            zr_gguf_w_tensor_raw(&w, "big", ZR_TYPE_F32, 3, (const int64_t[]){1ll << 32, 1ll << 16, 1ll << 16}, 0, 0))
WRITER_CASE(byte_size_overflow, 0,
            zr_gguf_w_tensor_raw(&w, "big", ZR_TYPE_F32, 1, (const int64_t[]){1ll << 62}, 0, 0))
PATCH_CASE(unknown_tensor_type, put_u32(p + b.info[0] + 8 + 17 + 4 + 16, 99))
PATCH_CASE(removed_tensor_type, put_u32(p + b.info[0] + 8 + 17 + 4 + 16, 4))
WRITER_CASE(row_not_multiple_of_block, 0,
            zr_gguf_w_tensor_raw(&w, "q", ZR_TYPE_Q4_0, 2, (const int64_t[]){48, 2}, 0, 36))
WRITER_CASE(row_not_multiple_of_k_block, 0,
            zr_gguf_w_tensor_raw(&w, "k", ZR_TYPE_Q4_K, 2, (const int64_t[]){64, 8}, 0, 144))
WRITER_CASE(duplicate_tensor, 1,
            zr_gguf_w_tensor(&w, "token_embd.weight", ZR_TYPE_F32, 1, (const int64_t[]){8}, NULL))
PATCH_CASE(misaligned_offset, put_u64(p + b.info[1] + 8 + 19 + 4 + 16 + 4, 132))
WRITER_CASE(misaligned_offset_custom_alignment, 0, {
    zr_gguf_w_alignment(&w, 64);
    zr_gguf_w_tensor_raw(&w, "a", ZR_TYPE_F32, 1, (const int64_t[]){8}, 0, 32);
    zr_gguf_w_tensor_raw(&w, "b", ZR_TYPE_F32, 1, (const int64_t[]){8}, 32, 32);
})

/* ---- data section ------------------------------------------------------------------------ */

CUT_CASE(trunc_data_padding, b->infos_end + 1)
CUT_CASE(trunc_data, b->data + 160 + 68 - 1)
PATCH_CASE(data_offset_beyond_file, put_u64(p + b.info[1] + 8 + 19 + 4 + 16 + 4, 1ull << 40))
PATCH_CASE(data_offset_wraps, put_u64(p + b.info[1] + 8 + 19 + 4 + 16 + 4, UINT64_MAX - 31))
WRITER_CASE(tensors_overlap, 0, {
    zr_gguf_w_tensor_raw(&w, "a", ZR_TYPE_F32, 1, (const int64_t[]){32}, 0, 128);
    zr_gguf_w_tensor_raw(&w, "b", ZR_TYPE_F32, 1, (const int64_t[]){16}, 64, 64);
})
WRITER_CASE(tensors_same_offset, 0, {
    zr_gguf_w_tensor_raw(&w, "c", ZR_TYPE_F32, 1, (const int64_t[]){8}, 32, 32);
    zr_gguf_w_tensor_raw(&w, "a", ZR_TYPE_F32, 1, (const int64_t[]){8}, 0, 32);
    zr_gguf_w_tensor_raw(&w, "b", ZR_TYPE_F32, 1, (const int64_t[]){8}, 0, 32);
})

/* ---- the table --------------------------------------------------------------------------- */

#define GOOD(n) {#n, n, {NULL, NULL, NULL}}
#define BAD(n, ...) {#n, n, {__VA_ARGS__}}

const GgufCase gguf_cases[] = {
    GOOD(good_base),
    GOOD(good_empty),
    GOOD(good_v2),
    GOOD(good_every_type),
    GOOD(good_alignment_64),
    GOOD(good_alignment_1),
    BAD(bad_magic, "magic", "expected \"GGUF\"", "found \"XGUF\""),
    BAD(bad_too_short, "magic", "3 bytes"),
    BAD(bad_version_1, "version", "expected 2 or 3", "found 1"),
    BAD(bad_version_4, "version", "found 4"),
    BAD(bad_version_big_endian, "version", "big-endian"),
    BAD(trunc_header, "n_kv", "truncated"),
    BAD(n_kv_overflows, "n_kv", "18446744073709551615"),
    BAD(n_kv_beyond_file, "n_kv", "1000 key/value pairs", "bytes left"),
    BAD(n_tensors_overflows, "n_tensors", "18446744073709551615"),
    BAD(n_tensors_beyond_file, "n_tensors", "1000 tensor infos", "bytes left"),
    BAD(trunc_kv_key_length, "kv #1", "key length", "truncated"),
    BAD(trunc_kv_key, "kv #1", "key at byte 263", "length 20 exceeds"),
    BAD(trunc_kv_type, "'llama.block_count'", "value type", "truncated"),
    BAD(trunc_kv_value, "'llama.block_count'", "uint32", "expected 4 bytes, found 3"),
    BAD(trunc_string_value, "'general.architecture'", "string value", "length 5 exceeds the 2 bytes"),
    BAD(trunc_array_head, "'test.u32arr'", "array length", "truncated"),
    BAD(trunc_array_elems, "'test.u32arr'", "4 uint32 elements", "found 9 bytes left"),
    BAD(trunc_string_array, "'tokenizer.ggml.tokens'", "string element 2", "length 2 exceeds the 1 bytes"),
    BAD(key_length_beyond_file, "kv #1", "key", "length 1099511627776 exceeds"),
    BAD(key_length_huge, "kv #1", "key", "length 18446744073709551615 exceeds"),
    BAD(string_length_beyond_file, "'general.architecture'", "string value", "length 9223372036854775808 exceeds"),
    BAD(array_length_beyond_file, "'test.u32arr'", "1000 uint32 elements", "bytes left"),
    BAD(array_bytes_overflow, "'test.u32arr'", "4611686018427387904 uint64 elements", "more than 2^64"),
    BAD(string_array_count_beyond_file, "'tokenizer.ggml.tokens'", "1152921504606846976 string elements", "at least 8 bytes"),
    BAD(string_element_beyond_file, "'tokenizer.ggml.tokens'", "string element 1", "length 1125899906842624 exceeds"),
    BAD(unknown_value_type, "'llama.block_count'", "value type", "found 13"),
    BAD(unknown_array_elem_type, "'test.u32arr'", "array element type", "found 42"),
    BAD(nested_array_count_beyond_file, "'t.nested'", "2305843009213693952 array elements", "at least 12 bytes"),
    BAD(nested_too_deep, "'t.deep'", "nesting depth <= 8"),
    BAD(duplicate_key, "kv #5", "'llama.block_count'", "first as kv #2"),
    BAD(alignment_not_power_of_two, "general.alignment", "power of two", "found 48"),
    BAD(alignment_zero, "general.alignment", "power of two", "found 0"),
    BAD(alignment_wrong_type, "general.alignment", "expected uint32", "found string"),
    BAD(trunc_tensor_name, "tensor #1", "name at byte", "length 17 exceeds the 5 bytes"),
    BAD(trunc_tensor_n_dims, "'token_embd.weight'", "n_dims", "truncated"),
    BAD(trunc_tensor_dims, "'token_embd.weight'", "ne[1]", "truncated"),
    BAD(trunc_tensor_type, "'blk.0.attn_q.weight'", "type at byte", "truncated"),
    BAD(trunc_tensor_offset, "'blk.0.attn_q.weight'", "data offset", "truncated"),
    BAD(tensor_name_beyond_file, "tensor #2", "name", "length 4611686018427387904 exceeds"),
    BAD(n_dims_5, "'token_embd.weight'", "n_dims", "expected 1..4, found 5"),
    BAD(n_dims_0, "'token_embd.weight'", "n_dims", "expected 1..4, found 0"),
    BAD(zero_dim, "'token_embd.weight'", "ne[1]", "found 0"),
    BAD(dim_beyond_int64, "'token_embd.weight'", "ne[0]", "found 9223372036854775808"),
    BAD(element_count_overflow, "'big'", "element count", "overflows"),
    BAD(byte_size_overflow, "'big'", "byte size", "overflows"),
    BAD(unknown_tensor_type, "'token_embd.weight'", "known ggml type", "found 99"),
    BAD(removed_tensor_type, "'token_embd.weight'", "known ggml type", "found 4"),
    BAD(row_not_multiple_of_block, "'q'", "ne[0] = 48", "q4_0's block size 32"),
    BAD(row_not_multiple_of_k_block, "'k'", "ne[0] = 64", "q4_K's block size 256"),
    BAD(duplicate_tensor, "tensor #3", "'token_embd.weight'", "first as tensor #1"),
    BAD(misaligned_offset, "'blk.0.attn_q.weight'", "multiple of the alignment 32", "found 132"),
    BAD(misaligned_offset_custom_alignment, "'b'", "multiple of the alignment 64", "found 32"),
    BAD(trunc_data_padding, "data section", "padding", "truncated"),
    BAD(trunc_data, "'blk.0.attn_q.weight'", "inside the file", "[160, +68)"),
    BAD(data_offset_beyond_file, "'blk.0.attn_q.weight'", "inside the file", "[1099511627776, +68)"),
    BAD(data_offset_wraps, "'blk.0.attn_q.weight'", "inside the file", "18446744073709551584"),
    BAD(tensors_overlap, "'b'", "overlaps tensor 'a'", "[0, 128)"),
    BAD(tensors_same_offset, "'b'", "overlaps tensor 'a'", "[0, 32)"),
};
const int gguf_n_cases = (int)(sizeof gguf_cases / sizeof gguf_cases[0]);

const GgufCase *gguf_case(const char *name) {
    for (int i = 0; i < gguf_n_cases; i++)
        if (!strcmp(gguf_cases[i].name, name)) return &gguf_cases[i];
    return NULL;
}
