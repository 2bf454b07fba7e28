/* libFuzzer target for the GGUF reader: parse the input, then touch everything the accessors
 * can reach (every key by name, every typed getter, every array element, nested arrays, every
 * tensor by name and the first and last byte of its data), so a parse that accepts a file the
 * accessors cannot walk safely shows up under ASan. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile double sink;

/* Walks an array value, recursing into nested arrays (the parser bounds the depth). */
static void touch_array(const ZrGgufKv *kv, int depth) {
    if (kv->elem_type == ZR_GGUF_STRING) {
        ZrStr *s = malloc((kv->n ? kv->n : 1) * sizeof *s);
        if (!s) return;
        zr_gguf_arr_strings(kv, s);
        for (uint64_t i = 0; i < kv->n; i++)
            if (s[i].len) sink += (unsigned char)s[i].ptr[0] + (unsigned char)s[i].ptr[s[i].len - 1];
        free(s);
    }
    uint64_t n = kv->n < 64 ? kv->n : 64;
    for (uint64_t i = 0; i < n; i++) {
        ZrGgufKv e;
        if (zr_gguf_arr_elem(kv, i, &e)) abort(); /* i < n must always work */
        sink += zr_gguf_arr_num(kv, i);
        if (e.type == ZR_GGUF_ARRAY) touch_array(&e, depth + 1);
        else if (e.type == ZR_GGUF_STRING && e.value_bytes) sink += e.value[e.value_bytes - 1];
        else if (e.type != ZR_GGUF_STRING) sink += zr_gguf_kv_num(&e);
    }
    if (kv->n) {
        ZrGgufKv last;
        if (zr_gguf_arr_elem(kv, kv->n - 1, &last)) abort();
        if (last.value_bytes) sink += last.value[last.value_bytes - 1];
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ZrGguf g;
    ZrError err;
    if (zr_gguf_parse(&g, data, size, "fuzz", &err)) {
        if (!memchr(err.msg, 0, sizeof err.msg)) abort();
        return 0;
    }
    char name[256];
    for (uint64_t i = 0; i < g.n_kv; i++) {
        const ZrGgufKv *kv = &g.kv[i];
        if (kv->key.len < sizeof name && !memchr(kv->key.ptr, 0, kv->key.len)) {
            memcpy(name, kv->key.ptr, kv->key.len);
            name[kv->key.len] = 0;
            const ZrGgufKv *found = zr_gguf_find(&g, name);
            if (found != kv) abort(); /* keys are unique, so lookup finds this one */
            uint32_t u32;
            uint64_t u64;
            int64_t i64;
            float f;
            bool b;
            ZrStr s;
            const ZrGgufKv *arr;
            if (!zr_gguf_get_u32(&g, name, &u32, &err)) sink += u32;
            if (!zr_gguf_get_u64(&g, name, &u64, &err)) sink += (double)u64;
            if (!zr_gguf_get_i64(&g, name, &i64, &err)) sink += (double)i64;
            if (!zr_gguf_get_f32(&g, name, &f, &err)) sink += f;
            if (!zr_gguf_get_bool(&g, name, &b, &err)) sink += b;
            if (!zr_gguf_get_str(&g, name, &s, &err) && s.len) sink += (unsigned char)s.ptr[s.len - 1];
            if (!zr_gguf_get_arr(&g, name, ZR_GGUF_N_VALUE_TYPES, &arr, &err)) sink += (double)arr->n;
        }
        if (kv->type == ZR_GGUF_ARRAY) touch_array(kv, 1);
        else if (kv->value_bytes) sink += kv->value[kv->value_bytes - 1] + zr_gguf_kv_num(kv);
    }
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        const ZrGgufTensor *t = &g.tensors[i];
        if (t->name.len < sizeof name && !memchr(t->name.ptr, 0, t->name.len)) {
            memcpy(name, t->name.ptr, t->name.len);
            name[t->name.len] = 0;
            if (zr_gguf_tensor(&g, name) != t) abort();
        }
        const uint8_t *d = t->data;
        if (t->nbytes) sink += d[0] + d[t->nbytes - 1];
        if (t->n_dims < 1 || t->n_dims > ZR_GGUF_MAX_DIMS || t->offset % g.alignment) abort();
    }
    zr_gguf_close(&g);
    return 0;
}
