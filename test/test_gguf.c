/* The GGUF reader on hand-built files: what it reads back from good ones, and the one rule
 * each bad one breaks (gguf_cases.c builds them). */
#include <fcntl.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf.h"
#include "gguf_cases.h"
#include "gguf_write.h"
#include "quant.h"
#include "zt.h"

#define LABEL "t.gguf"

static uint8_t *make(const char *name, size_t *len) {
    const GgufCase *c = gguf_case(name);
    uint8_t *buf = NULL;
    if (!c || c->make(&buf, len)) return NULL;
    return buf;
}

/* Parses case `name`; a bad case must fail with a message that starts with the file label
 * and contains every expected piece. */
static void check_case(const char *name) {
    const GgufCase *c = gguf_case(name);
    ZT_CHECKF(c != NULL, "no case %s", name);
    size_t len = 0;
    uint8_t *buf = make(name, &len);
    ZT_CHECK(buf != NULL);
    ZrGguf g;
    ZrError e = {0};
    int rc = zr_gguf_parse(&g, buf, len, LABEL, &e);
    if (!rc) zr_gguf_close(&g);
    free(buf);
    if (!c->expect[0]) {
        ZT_CHECKF(rc == 0, "%s", e.msg);
        return;
    }
    ZT_CHECKF(rc != 0, "case %s parsed", name);
    ZT_CHECKF(strncmp(e.msg, LABEL ": ", strlen(LABEL) + 2) == 0, "%s", e.msg);
    for (int i = 0; i < 3 && c->expect[i]; i++) ZT_CHECKF(strstr(e.msg, c->expect[i]) != NULL, "'%s' not in: %s", c->expect[i], e.msg);
    ZT_CHECKF(g.kv == NULL && g.tensors == NULL, "tables left allocated after a failure");
}

#define REJECTS(n) ZT_TEST(rejects_##n) { check_case(#n); }
#define ACCEPTS(n) ZT_TEST(accepts_##n) { check_case(#n); }

/* good files */
ACCEPTS(good_base)
ACCEPTS(good_empty)
ACCEPTS(good_v2)
ACCEPTS(good_every_type)
ACCEPTS(good_alignment_64)
ACCEPTS(good_alignment_1)
/* header */
REJECTS(bad_magic)
REJECTS(bad_too_short)
REJECTS(bad_version_1)
REJECTS(bad_version_4)
REJECTS(bad_version_big_endian)
REJECTS(trunc_header)
REJECTS(n_kv_overflows)
REJECTS(n_kv_beyond_file)
REJECTS(n_tensors_overflows)
REJECTS(n_tensors_beyond_file)
/* key/value section */
REJECTS(trunc_kv_key_length)
REJECTS(trunc_kv_key)
REJECTS(trunc_kv_type)
REJECTS(trunc_kv_value)
REJECTS(trunc_string_value)
REJECTS(trunc_array_head)
REJECTS(trunc_array_elems)
REJECTS(trunc_string_array)
REJECTS(key_length_beyond_file)
REJECTS(key_length_huge)
REJECTS(string_length_beyond_file)
REJECTS(array_length_beyond_file)
REJECTS(array_bytes_overflow)
REJECTS(string_array_count_beyond_file)
REJECTS(string_element_beyond_file)
REJECTS(unknown_value_type)
REJECTS(unknown_array_elem_type)
REJECTS(nested_array_count_beyond_file)
REJECTS(nested_too_deep)
REJECTS(duplicate_key)
REJECTS(alignment_not_power_of_two)
REJECTS(alignment_zero)
REJECTS(alignment_wrong_type)
/* tensor infos */
REJECTS(trunc_tensor_name)
REJECTS(trunc_tensor_n_dims)
REJECTS(trunc_tensor_dims)
REJECTS(trunc_tensor_type)
REJECTS(trunc_tensor_offset)
REJECTS(tensor_name_beyond_file)
REJECTS(n_dims_5)
REJECTS(n_dims_0)
REJECTS(zero_dim)
REJECTS(dim_beyond_int64)
REJECTS(element_count_overflow)
REJECTS(byte_size_overflow)
REJECTS(unknown_tensor_type)
REJECTS(removed_tensor_type)
REJECTS(row_not_multiple_of_block)
REJECTS(row_not_multiple_of_k_block)
REJECTS(duplicate_tensor)
REJECTS(misaligned_offset)
REJECTS(misaligned_offset_custom_alignment)
/* data section */
REJECTS(trunc_data_padding)
REJECTS(trunc_data)
REJECTS(data_offset_beyond_file)
REJECTS(data_offset_wraps)
REJECTS(tensors_overlap)
REJECTS(tensors_same_offset)

ZT_TEST(every_case_in_the_table_has_a_test_here) {
    /* the list above is written out so each rule is its own test; keep it complete */
    ZT_CHECKF(gguf_n_cases == 64, "gguf_cases has %d cases: add a REJECTS/ACCEPTS line for the new one", gguf_n_cases);
}

ZT_TEST(every_truncation_of_a_good_file_is_rejected_with_the_file_named) {
    static const char *const goods[] = {"good_base", "good_every_type", "good_alignment_64"};
    for (int k = 0; k < 3; k++) {
        size_t len;
        uint8_t *buf = make(goods[k], &len);
        ZT_CHECK(buf != NULL);
        /* the padding after the last tensor's data may be cut off: the file is still whole */
        ZrGguf full;
        ZrError fe;
        ZT_CHECK(zr_gguf_parse(&full, buf, len, LABEL, &fe) == 0);
        uint64_t end = full.data_offset;
        for (uint64_t i = 0; i < full.n_tensors; i++)
            if (full.data_offset + full.tensors[i].offset + full.tensors[i].nbytes > end)
                end = full.data_offset + full.tensors[i].offset + full.tensors[i].nbytes;
        zr_gguf_close(&full);
        for (size_t cut = 0; cut < end; cut++) {
            ZrGguf g;
            ZrError e = {0};
            uint8_t *copy = malloc(cut + 1); /* exact-size copy so ASan sees any overread */
            memcpy(copy, buf, cut);
            int rc = zr_gguf_parse(&g, copy, cut, LABEL, &e);
            free(copy);
            if (rc == 0) zr_gguf_close(&g);
            if (rc == 0 || strncmp(e.msg, LABEL ": ", 8) != 0) {
                free(buf);
                ZT_CHECKF(0, "%s cut at %zu of %zu: rc %d msg %s", goods[k], cut, len, rc, e.msg);
            }
        }
        free(buf);
    }
}

ZT_TEST(every_value_type_reads_back) {
    size_t len;
    uint8_t *buf = make("good_every_type", &len);
    ZrGguf g;
    ZrError e;
    ZT_CHECK(buf && zr_gguf_parse(&g, buf, len, LABEL, &e) == 0);
    uint32_t u32 = 0;
    uint64_t u64 = 0;
    int64_t i64 = 0;
    float f = 0;
    bool b = false;
    ZrStr s;
    bool ok = !zr_gguf_get_u32(&g, "t.u8", &u32, &e) && u32 == 200 && !zr_gguf_get_i64(&g, "t.i8", &i64, &e) &&
              i64 == -100 && !zr_gguf_get_u32(&g, "t.u16", &u32, &e) && u32 == 60000 &&
              !zr_gguf_get_i64(&g, "t.i16", &i64, &e) && i64 == -30000 && !zr_gguf_get_u32(&g, "t.u32", &u32, &e) &&
              u32 == 4000000000u && !zr_gguf_get_i64(&g, "t.i32", &i64, &e) && i64 == -2000000000 &&
              !zr_gguf_get_f32(&g, "t.f32", &f, &e) && f == 1.5f && !zr_gguf_get_bool(&g, "t.bool", &b, &e) && b &&
              !zr_gguf_get_str(&g, "t.str", &s, &e) && zr_str_eq(s, "h\xc3\xa9llo") &&
              !zr_gguf_get_u64(&g, "t.u64", &u64, &e) && u64 == 18000000000000000000ull &&
              !zr_gguf_get_i64(&g, "t.i64", &i64, &e) && i64 == -9000000000000000000ll &&
              !zr_gguf_get_f32(&g, "t.f64", &f, &e) && f == -2.25f;
    const ZrGgufKv *kv = zr_gguf_find(&g, "t.u16");
    bool types = kv && kv->type == ZR_GGUF_UINT16 && zr_gguf_kv_num(kv) == 60000.0 &&
                 zr_gguf_find(&g, "t.i64")->type == ZR_GGUF_INT64 && zr_gguf_kv_num(zr_gguf_find(&g, "t.i8")) == -100.0 &&
                 zr_gguf_kv_num(zr_gguf_find(&g, "t.f64")) == -2.25 && g.n_kv == 18;
    zr_gguf_close(&g);
    free(buf);
    ZT_CHECKF(ok, "%s", e.msg);
    ZT_CHECK(types);
}

ZT_TEST(arrays_and_nested_arrays_read_back) {
    size_t len;
    uint8_t *buf = make("good_every_type", &len);
    ZrGguf g;
    ZrError e;
    ZT_CHECK(buf && zr_gguf_parse(&g, buf, len, LABEL, &e) == 0);
    const ZrGgufKv *fa = NULL, *ia = NULL, *ea = NULL, *sa = NULL, *na = NULL, *ns = NULL;
    int rc = zr_gguf_get_arr(&g, "t.arr_f32", ZR_GGUF_FLOAT32, &fa, &e) | zr_gguf_get_arr(&g, "t.arr_i8", ZR_GGUF_INT8, &ia, &e) |
             zr_gguf_get_arr(&g, "t.arr_empty", ZR_GGUF_N_VALUE_TYPES, &ea, &e) |
             zr_gguf_get_arr(&g, "t.arr_str", ZR_GGUF_STRING, &sa, &e) | zr_gguf_get_arr(&g, "t.nested", ZR_GGUF_ARRAY, &na, &e) |
             zr_gguf_get_arr(&g, "t.nested_str", ZR_GGUF_ARRAY, &ns, &e);
    bool ok = rc == 0;
    ZrStr strs[2] = {{0}};
    ZrGgufKv x0, x1, x2, y0, y00, y1, y10;
    if (ok) {
        zr_gguf_arr_strings(sa, strs);
        ok = fa->n == 3 && zr_gguf_arr_num(fa, 1) == -1.5 && zr_gguf_arr_num(fa, 2) == 3.0 && ia->n == 2 &&
             zr_gguf_arr_num(ia, 0) == -1.0 && zr_gguf_arr_num(ia, 1) == 7.0 && ea->n == 0 && ea->elem_type == ZR_GGUF_UINT64 &&
             sa->n == 2 && zr_str_eq(strs[0], "x") && zr_str_eq(strs[1], "") &&
             /* [[1, 2], [], [3]] */
             na->n == 3 && !zr_gguf_arr_elem(na, 0, &x0) && !zr_gguf_arr_elem(na, 1, &x1) && !zr_gguf_arr_elem(na, 2, &x2) &&
             zr_gguf_arr_elem(na, 3, &x2) == 1 && x0.type == ZR_GGUF_ARRAY && x0.elem_type == ZR_GGUF_UINT32 && x0.n == 2 &&
             zr_gguf_arr_num(&x0, 1) == 2.0 && x1.n == 0 && x2.n == 1 && zr_gguf_arr_num(&x2, 0) == 3.0 &&
             /* [[["a", "bc"]], [[]]] */
             ns->n == 2 && !zr_gguf_arr_elem(ns, 0, &y0) && y0.n == 1 && y0.elem_type == ZR_GGUF_ARRAY &&
             !zr_gguf_arr_elem(&y0, 0, &y00) && y00.elem_type == ZR_GGUF_STRING && y00.n == 2 &&
             !zr_gguf_arr_elem(ns, 1, &y1) && !zr_gguf_arr_elem(&y1, 0, &y10) && y10.n == 0 && y10.elem_type == ZR_GGUF_STRING;
    }
    ZrGgufKv s1;
    bool strings_ok = ok && !zr_gguf_arr_elem(&y00, 1, &s1) && s1.type == ZR_GGUF_STRING && s1.value_bytes == 2 &&
                      memcmp(s1.value, "bc", 2) == 0;
    if (ok) {
        zr_gguf_arr_strings(&y00, strs);
        strings_ok = strings_ok && zr_str_eq(strs[0], "a") && zr_str_eq(strs[1], "bc");
    }
    zr_gguf_close(&g);
    free(buf);
    ZT_CHECKF(rc == 0, "%s", e.msg);
    ZT_CHECK(ok);
    ZT_CHECK(strings_ok);
}

ZT_TEST(tensors_have_their_shape_type_size_and_data) {
    size_t len;
    uint8_t *buf = make("good_every_type", &len);
    ZrGguf g;
    ZrError e;
    ZT_CHECK(buf && zr_gguf_parse(&g, buf, len, LABEL, &e) == 0);
    const ZrGgufTensor *v = zr_gguf_tensor(&g, "v"), *m4 = zr_gguf_tensor(&g, "m4"), *k = zr_gguf_tensor(&g, "k");
    bool ok = v && m4 && k && g.n_tensors == 3 && v->n_dims == 1 && v->ne[0] == 4 && v->ne[1] == 1 && v->type == ZR_TYPE_F32 &&
              v->nbytes == 16 && ((const float *)v->data)[0] == 0.5f && ((const float *)v->data)[2] == 2.0f &&
              m4->n_dims == 4 && m4->ne[0] == 2 && m4->ne[1] == 3 && m4->ne[2] == 1 && m4->ne[3] == 2 && m4->nbytes == 24 &&
              k->type == ZR_TYPE_Q4_K && k->nbytes == 3 * 144 && g.data_offset % 32 == 0 && k->offset % 32 == 0 &&
              (const uint8_t *)k->data == buf + g.data_offset + k->offset && zr_gguf_tensor(&g, "nope") == NULL &&
              zr_gguf_tensor(&g, "") == NULL;
    zr_gguf_close(&g);
    free(buf);
    ZT_CHECK(ok);
}

ZT_TEST(version_2_reads_like_version_3) {
    size_t len;
    uint8_t *buf = make("good_v2", &len);
    ZrGguf g;
    ZrError e;
    ZT_CHECK(buf && zr_gguf_parse(&g, buf, len, LABEL, &e) == 0);
    ZrStr arch = {0};
    bool ok = g.version == 2 && !zr_gguf_get_str(&g, "general.architecture", &arch, &e) && zr_str_eq(arch, "llama") &&
              zr_gguf_tensor(&g, "blk.0.attn_q.weight") != NULL;
    zr_gguf_close(&g);
    free(buf);
    ZT_CHECK(ok);
}

ZT_TEST(general_alignment_places_the_data_section_and_tensors) {
    size_t len;
    uint8_t *buf = make("good_alignment_64", &len);
    ZrGguf g;
    ZrError e;
    ZT_CHECK(buf && zr_gguf_parse(&g, buf, len, LABEL, &e) == 0);
    const ZrGgufTensor *a = zr_gguf_tensor(&g, "a"), *b = zr_gguf_tensor(&g, "b");
    bool ok = g.alignment == 64 && g.data_offset % 64 == 0 && a && b && a->offset == 0 && b->offset == 64 &&
              ((const float *)b->data)[0] == 1.0f && ((const float *)a->data)[1] == -1.0f;
    zr_gguf_close(&g);
    free(buf);
    ZT_CHECK(ok);
}

ZT_TEST(default_alignment_is_32_without_the_key) {
    size_t len;
    uint8_t *buf = make("good_base", &len);
    ZrGguf g;
    ZrError e;
    ZT_CHECK(buf && zr_gguf_parse(&g, buf, len, LABEL, &e) == 0);
    bool ok = g.alignment == 32 && g.data_offset % 32 == 0 && zr_gguf_find(&g, "general.alignment") == NULL;
    zr_gguf_close(&g);
    free(buf);
    ZT_CHECK(ok);
}

ZT_TEST(empty_file_has_no_keys_and_no_tensors) {
    size_t len;
    uint8_t *buf = make("good_empty", &len);
    ZrGguf g;
    ZrError e;
    ZT_CHECK(buf && len <= 32 && zr_gguf_parse(&g, buf, len, LABEL, &e) == 0);
    bool ok = g.n_kv == 0 && g.n_tensors == 0 && zr_gguf_find(&g, "x") == NULL && zr_gguf_tensor(&g, "x") == NULL;
    zr_gguf_close(&g);
    free(buf);
    ZT_CHECK(ok);
}

ZT_TEST(getters_name_the_key_and_the_expected_and_found_types) {
    size_t len;
    uint8_t *buf = make("good_every_type", &len);
    ZrGguf g;
    ZrError e;
    ZT_CHECK(buf && zr_gguf_parse(&g, buf, len, LABEL, &e) == 0);
    uint32_t u32 = 7;
    float f = 0;
    bool b;
    ZrStr s;
    const ZrGgufKv *kv;
    int r1 = zr_gguf_get_u32(&g, "t.missing", &u32, &e);
    bool m1 = strstr(e.msg, LABEL ": key 't.missing': expected it present, found it missing") != NULL;
    int r2 = zr_gguf_get_str(&g, "t.u32", &s, &e);
    bool m2 = strstr(e.msg, "key 't.u32': expected string, found uint32") != NULL;
    int r3 = zr_gguf_get_u32(&g, "t.u64", &u32, &e);
    bool m3 = strstr(e.msg, "found 18000000000000000000") != NULL;
    int r4 = zr_gguf_get_u32(&g, "t.i8", &u32, &e);
    bool m4 = strstr(e.msg, "found -100") != NULL;
    int r5 = zr_gguf_get_u32_opt(&g, "t.missing", &u32, &e);
    int r6 = zr_gguf_get_f32(&g, "t.str", &f, &e);
    bool m6 = strstr(e.msg, "expected float32, found string") != NULL;
    int r7 = zr_gguf_get_arr(&g, "t.arr_f32", ZR_GGUF_STRING, &kv, &e);
    bool m7 = strstr(e.msg, "expected array of string, found array of 3 float32") != NULL;
    int r8 = zr_gguf_get_bool(&g, "t.u16", &b, &e);
    bool m8 = strstr(e.msg, "expected bool (0 or 1), found 60000") != NULL;
    int r9 = zr_gguf_get_u32(&g, "t.bool", &u32, &e);
    int r10 = zr_gguf_get_str_opt(&g, "t.missing", &s, &e) | zr_gguf_get_f32_opt(&g, "t.missing", &f, &e) |
              zr_gguf_get_bool_opt(&g, "t.missing", &b, &e);
    int r11 = zr_gguf_get_u32(&g, "t.arr_f32", &u32, &e);
    bool m11 = strstr(e.msg, "found array of 3 float32") != NULL;
    zr_gguf_close(&g);
    free(buf);
    ZT_CHECK(r1 == ZR_E_FORMAT && m1);
    ZT_CHECK(r2 == ZR_E_FORMAT && m2);
    ZT_CHECK(r3 == ZR_E_FORMAT && m3);
    ZT_CHECK(r4 == ZR_E_FORMAT && m4);
    ZT_CHECK(r5 == 0 && u32 == 7);
    ZT_CHECK(r6 == ZR_E_FORMAT && m6);
    ZT_CHECK(r7 == ZR_E_FORMAT && m7);
    ZT_CHECK(r8 == ZR_E_FORMAT && m8);
    ZT_CHECK(r9 == ZR_E_FORMAT);
    ZT_CHECK(r10 == 0);
    ZT_CHECK(r11 == ZR_E_FORMAT && m11);
}

ZT_TEST(thousands_of_keys_and_tensors_are_all_found) {
    ZrGgufWriter w;
    zr_gguf_w_init(&w);
    char name[32];
    for (int i = 0; i < 3000; i++) {
        snprintf(name, sizeof name, "k.%d", i);
        zr_gguf_w_u32(&w, name, (uint32_t)i);
        snprintf(name, sizeof name, "t.%d", i);
        zr_gguf_w_tensor(&w, name, ZR_TYPE_F32, 1, (const int64_t[]){1 + i % 5}, NULL);
    }
    uint8_t *buf;
    size_t len;
    ZrError e;
    ZT_CHECK(zr_gguf_w_to_mem(&w, &buf, &len, &e) == 0);
    zr_gguf_w_free(&w);
    ZrGguf g;
    ZT_CHECKF(zr_gguf_parse(&g, buf, len, LABEL, &e) == 0, "%s", e.msg);
    int bad = 0;
    for (int i = 0; i < 3000; i++) {
        uint32_t v = 0;
        snprintf(name, sizeof name, "k.%d", i);
        bad += zr_gguf_get_u32(&g, name, &v, &e) != 0 || v != (uint32_t)i;
        snprintf(name, sizeof name, "t.%d", i);
        const ZrGgufTensor *t = zr_gguf_tensor(&g, name);
        bad += !t || t->ne[0] != 1 + i % 5 || t != &g.tensors[i];
    }
    zr_gguf_close(&g);
    free(buf);
    ZT_CHECK(bad == 0);
}

/* 240k keys whose FNV-1a hashes (the reader's old, unkeyed index) agree in their low 19 bits,
 * the slot bits of a 2^19-slot table: names a hostile file can choose for free. Each is
 * "k" + 7 digits + two bytes that steer the hash onto the target slot: in FNV-1a the low bits
 * of the state depend only on the low bits, so the two bytes are found by running the last two
 * steps backwards from the target. */
#define FLOOD_KEYS 240000
#define FLOOD_MASK ((1u << 19) - 1)
static uint8_t *make_flood(size_t *len) {
    const uint32_t prime = 0x1b3u & FLOOD_MASK, target = 12345; /* FNV prime 1099511628211 mod 2^19 */
    uint32_t inv = 1; /* prime^-1 mod 2^19 (Newton) */
    for (int i = 0; i < 5; i++) inv = inv * (2u - prime * inv) & FLOOD_MASK;
    /* need[s]: the bytes (b1 << 8 | b2) that take state s to the target, 0 if none */
    uint16_t *need = calloc(FLOOD_MASK + 1, sizeof *need);
    for (uint32_t b1 = 1; b1 < 256; b1++)
        for (uint32_t b2 = 1; b2 < 256; b2++) {
            uint32_t s = ((((target * inv) & FLOOD_MASK) ^ b2) * inv & FLOOD_MASK) ^ b1;
            need[s] = (uint16_t)(b1 << 8 | b2);
        }
    const size_t klen = 10, per = 8 + klen + 4 + 1;
    uint8_t *buf = malloc(24 + (size_t)FLOOD_KEYS * per), *p = buf;
    memcpy(p, "GGUF\3\0\0\0", 8);
    uint64_t n_tensors = 0, n_kv = FLOOD_KEYS, kl = klen;
    memcpy(p + 8, &n_tensors, 8);
    memcpy(p + 16, &n_kv, 8);
    p += 24;
    char name[16];
    for (uint32_t i = 0, made = 0; made < FLOOD_KEYS; i++) {
        snprintf(name, sizeof name, "k%07u", i);
        uint32_t h = (uint32_t)(1469598103934665603ull & FLOOD_MASK); /* the offset basis */
        for (int j = 0; j < 8; j++) h = (h ^ (uint8_t)name[j]) * prime & FLOOD_MASK;
        if (!need[h]) continue;
        name[8] = (char)(need[h] >> 8);
        name[9] = (char)(need[h] & 0xff);
        memcpy(p, &kl, 8);
        memcpy(p + 8, name, klen);
        memcpy(p + 8 + klen, "\0\0\0\0\1", 5); /* uint8 1 */
        p += per;
        made++;
    }
    free(need);
    *len = (size_t)(p - buf);
    return buf;
}

ZT_TEST(parse_time_is_linear_even_when_every_name_collides_under_an_unkeyed_hash) {
    size_t len;
    uint8_t *buf = make_flood(&len);
    struct timespec t0, t1;
    ZrGguf g;
    ZrError e;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = zr_gguf_parse(&g, buf, len, LABEL, &e);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    bool found = rc == 0 && zr_gguf_find(&g, "general.architecture") == NULL && g.n_kv == FLOOD_KEYS;
    if (!rc) zr_gguf_close(&g);
    free(buf);
    ZT_CHECKF(rc == 0, "%s", e.msg);
    ZT_CHECK(found);
    ZT_CHECKF(s < 1.0, "%d colliding keys (%zu bytes) parsed in %.2f s", FLOOD_KEYS, len, s);
}

static const char *write_tmp(const char *name, const void *buf, size_t len) {
    static char path[4200];
    snprintf(path, sizeof path, "%s/%s", zt_tmpdir(), name);
    FILE *f = fopen(path, "wb");
    if (!f) return NULL;
    if (len) fwrite(buf, 1, len, f);
    fclose(f);
    return path;
}

ZT_TEST(open_maps_a_file_and_close_unmaps_it) {
    size_t len;
    uint8_t *buf = make("good_base", &len);
    ZT_CHECK(buf != NULL);
    const char *p = write_tmp("base.gguf", buf, len);
    free(buf);
    ZT_CHECK(p != NULL);
    ZrGguf g;
    ZrError e;
    ZT_CHECKF(zr_gguf_open(&g, p, &e) == 0, "%s", e.msg);
    const ZrGgufTensor *t = zr_gguf_tensor(&g, "token_embd.weight");
    bool ok = g.map != NULL && g.map_len == len && t && ((const float *)t->data)[1] == -1.0f && !strcmp(g.path, p);
    zr_gguf_close(&g);
    zr_gguf_close(&g); /* a closed ZrGguf may be closed again */
    ZT_CHECK(ok);
    ZT_CHECK(g.map == NULL && g.kv == NULL);
}

ZT_TEST(open_reports_missing_empty_and_non_regular_files) {
    ZrGguf g;
    ZrError e;
    char missing[4200];
    snprintf(missing, sizeof missing, "%s/does-not-exist.gguf", zt_tmpdir());
    int r1 = zr_gguf_open(&g, missing, &e);
    bool m1 = strstr(e.msg, "does-not-exist.gguf: cannot open: No such file") != NULL;
    const char *empty = write_tmp("empty.gguf", "", 0);
    int r2 = zr_gguf_open(&g, empty, &e);
    bool m2 = strstr(e.msg, "empty.gguf: header: magic") != NULL;
    int r3 = zr_gguf_open(&g, zt_tmpdir(), &e);
    bool m3 = strstr(e.msg, "expected a regular file") != NULL;
    ZT_CHECK(r1 == ZR_E_IO && m1);
    ZT_CHECK(r2 == ZR_E_FORMAT && m2);
    ZT_CHECK(r3 == ZR_E_IO && m3);
}

ZT_TEST(open_refuses_a_fifo_or_a_device_without_waiting_on_it) {
    char fifo[4200];
    snprintf(fifo, sizeof fifo, "%s/model.fifo", zt_tmpdir());
    unlink(fifo);
    ZT_CHECK(mkfifo(fifo, 0600) == 0);
    ZrGguf g;
    ZrError e;
    alarm(10); /* a blocking open() of a FIFO nobody writes would wait forever */
    int r1 = zr_gguf_open(&g, fifo, &e);
    alarm(0);
    bool m1 = strstr(e.msg, "model.fifo: expected a regular file (a GGUF model), found a FIFO (named pipe)") != NULL;
    unlink(fifo);
    int r2 = zr_gguf_open(&g, "/dev/zero", &e);
    bool m2 = strstr(e.msg, "/dev/zero: expected a regular file (a GGUF model), found a character device") != NULL;
    int r3 = zr_gguf_open(&g, zt_tmpdir(), &e);
    bool m3 = strstr(e.msg, "found a directory") != NULL;
    ZT_CHECKF(r1 == ZR_E_IO && m1, "%s", e.msg);
    ZT_CHECK(r2 == ZR_E_IO && m2);
    ZT_CHECK(r3 == ZR_E_IO && m3);
}

ZT_TEST(writer_copies_every_kv_of_a_parsed_file_byte_for_byte) {
    size_t len;
    uint8_t *buf = make("good_every_type", &len);
    ZrGguf g;
    ZrError e;
    ZT_CHECK(buf && zr_gguf_parse(&g, buf, len, LABEL, &e) == 0);
    ZrGgufWriter w;
    zr_gguf_w_init(&w);
    for (uint64_t i = 0; i < g.n_kv; i++) zr_gguf_w_copy_kv(&w, &g.kv[i]);
    uint64_t kv_end = g.n_tensors ? (uint64_t)((const uint8_t *)g.tensors[0].name.ptr - 8 - buf) : 0;
    bool same = w.n_kv == g.n_kv && 24 + w.meta_len == kv_end && memcmp(w.meta, buf + 24, w.meta_len) == 0;
    zr_gguf_w_free(&w);
    zr_gguf_close(&g);
    free(buf);
    ZT_CHECK(same);
}

ZT_TEST(writer_streaming_equals_writing_at_once) {
    static const float data[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    ZrGgufWriter w;
    zr_gguf_w_init(&w);
    zr_gguf_w_str(&w, "general.architecture", "llama");
    zr_gguf_w_tensor(&w, "a", ZR_TYPE_F32, 1, (const int64_t[]){3}, data);
    zr_gguf_w_tensor(&w, "b", ZR_TYPE_F32, 2, (const int64_t[]){4, 3}, data + 3);
    uint8_t *whole;
    size_t whole_len;
    ZrError e;
    ZT_CHECK(zr_gguf_w_to_mem(&w, &whole, &whole_len, &e) == 0);
    char *s = NULL;
    size_t s_len = 0;
    FILE *f = open_memstream(&s, &s_len);
    int rc = zr_gguf_w_write_meta(&w, f, &e) || fwrite(data, 4, 3, f) != 3 || zr_gguf_w_write_pad(&w, f, 12, &e) ||
             fwrite(data + 3, 4, 12, f) != 12 || zr_gguf_w_write_pad(&w, f, 48, &e);
    fclose(f);
    bool same = rc == 0 && s_len == whole_len && memcmp(s, whole, s_len) == 0 && whole_len == zr_gguf_w_file_size(&w);
    zr_gguf_w_free(&w);
    free(s);
    free(whole);
    ZT_CHECK(same);
}

int main(void) { return zt_run(); }

ZT_TEST(printable_reads_only_what_it_shows_of_a_string_of_any_length) {
    /* a length of 2^31 + 5 (a negative %.*s precision once cast to int) over a 12-byte buffer:
     * only the bytes shown may be read */
    static const char bytes[12] = "arch\x1b[2Jxyz";
    char out[12];
    ZT_CHECK(!strcmp(zr_str_printable((ZrStr){bytes, (1ull << 31) + 5}, out, sizeof out), "arch?[2J..."));
    ZT_CHECK(!strcmp(zr_str_printable((ZrStr){bytes, UINT64_MAX}, out, 8), "arch..."));
    ZT_CHECK(!strcmp(zr_str_printable((ZrStr){bytes, 4}, out, sizeof out), "arch"));
    ZT_CHECK(!strcmp(zr_str_printable((ZrStr){"a\0b", 3}, out, sizeof out), "a?b"));
    ZT_CHECK(!strcmp(zr_str_printable((ZrStr){bytes, 0}, out, sizeof out), ""));
    ZT_CHECK(!strcmp(zr_str_printable((ZrStr){bytes, 12}, out, 3), ""));
}
