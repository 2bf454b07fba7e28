/* GGUF writer: the kv section is built as file bytes in a growable buffer; tensor infos are
 * kept as a table and serialized when writing. */
#include "gguf_write.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"

static bool grow(void **p, uint64_t *cap, uint64_t need, size_t elem, bool *oom) {
    if (*oom) return false;
    if (need <= *cap) return true;
    uint64_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) { *oom = true; return false; }
    *p = q;
    *cap = c;
    return true;
}

void zr_gguf_w_init(ZrGgufWriter *w) {
    memset(w, 0, sizeof *w);
    memcpy(w->magic, "GGUF", 4);
    w->version = 3;
    w->n_kv_override = -1;
    w->n_tensors_override = -1;
    w->alignment = ZR_GGUF_DEFAULT_ALIGNMENT;
}

void zr_gguf_w_free(ZrGgufWriter *w) {
    free(w->meta);
    free(w->tensors);
    free(w->names);
    memset(w, 0, sizeof *w);
}

void zr_gguf_w_raw_bytes(ZrGgufWriter *w, const void *p, uint64_t n) {
    if (!grow((void **)&w->meta, &w->meta_cap, w->meta_len + n, 1, &w->oom)) return;
    if (n) memcpy(w->meta + w->meta_len, p, n);
    w->meta_len += n;
}

void zr_gguf_w_raw_u32(ZrGgufWriter *w, uint32_t v) { zr_gguf_w_raw_bytes(w, &v, 4); }
void zr_gguf_w_raw_u64(ZrGgufWriter *w, uint64_t v) { zr_gguf_w_raw_bytes(w, &v, 8); }

static void raw_strn(ZrGgufWriter *w, const char *s, uint64_t n) {
    zr_gguf_w_raw_u64(w, n);
    zr_gguf_w_raw_bytes(w, s, n);
}

void zr_gguf_w_raw_str(ZrGgufWriter *w, const char *s) { raw_strn(w, s, strlen(s)); }

void zr_gguf_w_key(ZrGgufWriter *w, const char *key, uint32_t type) {
    zr_gguf_w_raw_str(w, key);
    zr_gguf_w_raw_u32(w, type);
    w->n_kv++;
}

void zr_gguf_w_raw_arr_head(ZrGgufWriter *w, uint32_t elem_type, uint64_t n) {
    zr_gguf_w_raw_u32(w, elem_type);
    zr_gguf_w_raw_u64(w, n);
}

static void scalar(ZrGgufWriter *w, const char *key, uint32_t type, const void *v, uint64_t size) {
    zr_gguf_w_key(w, key, type);
    zr_gguf_w_raw_bytes(w, v, size);
}

void zr_gguf_w_u8(ZrGgufWriter *w, const char *key, uint8_t v) { scalar(w, key, ZR_GGUF_UINT8, &v, 1); }
void zr_gguf_w_i8(ZrGgufWriter *w, const char *key, int8_t v) { scalar(w, key, ZR_GGUF_INT8, &v, 1); }
void zr_gguf_w_u16(ZrGgufWriter *w, const char *key, uint16_t v) { scalar(w, key, ZR_GGUF_UINT16, &v, 2); }
void zr_gguf_w_i16(ZrGgufWriter *w, const char *key, int16_t v) { scalar(w, key, ZR_GGUF_INT16, &v, 2); }
void zr_gguf_w_u32(ZrGgufWriter *w, const char *key, uint32_t v) { scalar(w, key, ZR_GGUF_UINT32, &v, 4); }
void zr_gguf_w_i32(ZrGgufWriter *w, const char *key, int32_t v) { scalar(w, key, ZR_GGUF_INT32, &v, 4); }
void zr_gguf_w_f32(ZrGgufWriter *w, const char *key, float v) { scalar(w, key, ZR_GGUF_FLOAT32, &v, 4); }
void zr_gguf_w_u64(ZrGgufWriter *w, const char *key, uint64_t v) { scalar(w, key, ZR_GGUF_UINT64, &v, 8); }
void zr_gguf_w_i64(ZrGgufWriter *w, const char *key, int64_t v) { scalar(w, key, ZR_GGUF_INT64, &v, 8); }
void zr_gguf_w_f64(ZrGgufWriter *w, const char *key, double v) { scalar(w, key, ZR_GGUF_FLOAT64, &v, 8); }

void zr_gguf_w_bool(ZrGgufWriter *w, const char *key, bool v) {
    uint8_t b = v ? 1 : 0;
    scalar(w, key, ZR_GGUF_BOOL, &b, 1);
}

void zr_gguf_w_str(ZrGgufWriter *w, const char *key, const char *v) {
    zr_gguf_w_key(w, key, ZR_GGUF_STRING);
    zr_gguf_w_raw_str(w, v);
}

static uint64_t scalar_size(uint32_t t) {
    switch (t) {
    case ZR_GGUF_UINT8: case ZR_GGUF_INT8: case ZR_GGUF_BOOL: return 1;
    case ZR_GGUF_UINT16: case ZR_GGUF_INT16: return 2;
    case ZR_GGUF_UINT32: case ZR_GGUF_INT32: case ZR_GGUF_FLOAT32: return 4;
    case ZR_GGUF_UINT64: case ZR_GGUF_INT64: case ZR_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

void zr_gguf_w_arr(ZrGgufWriter *w, const char *key, uint32_t elem_type, uint64_t n, const void *elems) {
    zr_gguf_w_key(w, key, ZR_GGUF_ARRAY);
    zr_gguf_w_raw_arr_head(w, elem_type, n);
    zr_gguf_w_raw_bytes(w, elems, n * scalar_size(elem_type));
}

void zr_gguf_w_arr_str(ZrGgufWriter *w, const char *key, uint64_t n, const char *const *strs) {
    zr_gguf_w_key(w, key, ZR_GGUF_ARRAY);
    zr_gguf_w_raw_arr_head(w, ZR_GGUF_STRING, n);
    for (uint64_t i = 0; i < n; i++) zr_gguf_w_raw_str(w, strs[i]);
}

void zr_gguf_w_arr_zrstr(ZrGgufWriter *w, const char *key, uint64_t n, const ZrStr *strs) {
    zr_gguf_w_key(w, key, ZR_GGUF_ARRAY);
    zr_gguf_w_raw_arr_head(w, ZR_GGUF_STRING, n);
    for (uint64_t i = 0; i < n; i++) raw_strn(w, strs[i].ptr, strs[i].len);
}

void zr_gguf_w_copy_kv(ZrGgufWriter *w, const ZrGgufKv *kv) {
    raw_strn(w, kv->key.ptr, kv->key.len);
    zr_gguf_w_raw_u32(w, kv->type);
    w->n_kv++;
    if (kv->type == ZR_GGUF_STRING) {
        raw_strn(w, (const char *)kv->value, kv->value_bytes);
        return;
    }
    if (kv->type == ZR_GGUF_ARRAY) zr_gguf_w_raw_arr_head(w, kv->elem_type, kv->n);
    zr_gguf_w_raw_bytes(w, kv->value, kv->value_bytes);
}

void zr_gguf_w_alignment(ZrGgufWriter *w, uint32_t alignment) {
    w->alignment = alignment ? alignment : 1;
    zr_gguf_w_u32(w, "general.alignment", alignment);
}

static uint64_t align_up(uint64_t x, uint64_t a) { return a ? x + (a - x % a) % a : x; }

uint64_t zr_gguf_w_tensor_raw(ZrGgufWriter *w, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
                              uint64_t offset, uint64_t nbytes) {
    uint64_t i = w->n_tensors, nl = strlen(name);
    if (!grow((void **)&w->tensors, &w->tensors_cap, i + 1, sizeof *w->tensors, &w->oom)) return i;
    if (!grow((void **)&w->names, &w->names_cap, w->names_len + nl, 1, &w->oom)) return i;
    ZrGgufWTensor *t = &w->tensors[i];
    memset(t, 0, sizeof *t);
    memcpy(w->names + w->names_len, name, nl);
    t->name_off = w->names_len;
    t->name_len = nl;
    w->names_len += nl;
    t->n_dims = n_dims;
    for (uint32_t d = 0; d < ZR_GGUF_MAX_DIMS; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    t->type = type;
    t->offset = offset;
    t->nbytes = nbytes;
    uint64_t end = align_up(offset + nbytes, w->alignment);
    if (end > w->data_size) w->data_size = end;
    w->n_tensors++;
    return i;
}

uint64_t zr_gguf_w_tensor(ZrGgufWriter *w, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
                          const void *data) {
    uint64_t rows = 1;
    for (uint32_t d = 1; d < n_dims && d < ZR_GGUF_MAX_DIMS; d++) rows *= (uint64_t)ne[d];
    uint64_t nbytes = (uint64_t)zr_row_bytes(type, ne[0]) * rows;
    uint64_t i = zr_gguf_w_tensor_raw(w, name, type, n_dims, ne, w->data_size, nbytes);
    if (i < w->n_tensors) w->tensors[i].data = data;
    return i;
}

uint64_t zr_gguf_w_header_size(const ZrGgufWriter *w) {
    (void)w;
    return 24;
}

uint64_t zr_gguf_w_infos_offset(const ZrGgufWriter *w) { return zr_gguf_w_header_size(w) + w->meta_len; }

static uint64_t info_size(const ZrGgufWTensor *t) {
    uint32_t nd = t->n_dims < ZR_GGUF_MAX_DIMS ? t->n_dims : ZR_GGUF_MAX_DIMS;
    return 8 + t->name_len + 4 + 8ull * nd + 4 + 8;
}

uint64_t zr_gguf_w_info_offset(const ZrGgufWriter *w, uint64_t i) {
    uint64_t off = zr_gguf_w_infos_offset(w);
    for (uint64_t j = 0; j < i && j < w->n_tensors; j++) off += info_size(&w->tensors[j]);
    return off;
}

uint64_t zr_gguf_w_data_offset(const ZrGgufWriter *w) {
    return align_up(zr_gguf_w_info_offset(w, w->n_tensors), w->alignment);
}

uint64_t zr_gguf_w_file_size(const ZrGgufWriter *w) { return zr_gguf_w_data_offset(w) + w->data_size; }

static int put(FILE *f, const void *p, uint64_t n, ZrError *err) {
    if (n && fwrite(p, 1, n, f) != n) return zr_err(err, ZR_E_IO, "gguf writer: write failed: %s", strerror(errno));
    return 0;
}

static int zeros(FILE *f, uint64_t n, ZrError *err) {
    static const uint8_t z[4096];
    while (n) {
        uint64_t k = n < sizeof z ? n : sizeof z;
        if (put(f, z, k, err)) return 1;
        n -= k;
    }
    return 0;
}

int zr_gguf_w_write_meta(const ZrGgufWriter *w, FILE *f, ZrError *err) {
    if (w->oom) return zr_err(err, ZR_E_NOMEM, "gguf writer: out of memory while building the file");
    uint64_t nt = w->n_tensors_override >= 0 ? (uint64_t)w->n_tensors_override : w->n_tensors;
    uint64_t nkv = w->n_kv_override >= 0 ? (uint64_t)w->n_kv_override : w->n_kv;
    if (put(f, w->magic, 4, err) || put(f, &w->version, 4, err) || put(f, &nt, 8, err) || put(f, &nkv, 8, err) ||
        put(f, w->meta, w->meta_len, err))
        return 1;
    for (uint64_t i = 0; i < w->n_tensors; i++) {
        const ZrGgufWTensor *t = &w->tensors[i];
        uint32_t nd = t->n_dims < ZR_GGUF_MAX_DIMS ? t->n_dims : ZR_GGUF_MAX_DIMS;
        if (put(f, &t->name_len, 8, err) || put(f, w->names + t->name_off, t->name_len, err) ||
            put(f, &t->n_dims, 4, err) || put(f, t->ne, 8ull * nd, err) || put(f, &t->type, 4, err) ||
            put(f, &t->offset, 8, err))
            return 1;
    }
    uint64_t end = zr_gguf_w_info_offset(w, w->n_tensors);
    return zeros(f, zr_gguf_w_data_offset(w) - end, err);
}

int zr_gguf_w_write_pad(const ZrGgufWriter *w, FILE *f, uint64_t nbytes, ZrError *err) {
    return zeros(f, align_up(nbytes, w->alignment) - nbytes, err);
}

int zr_gguf_w_write(const ZrGgufWriter *w, FILE *f, ZrError *err) {
    if (zr_gguf_w_write_meta(w, f, err)) return 1;
    /* in index order while the offsets ascend without overlap (the usual layout) */
    uint64_t pos = 0;
    bool sequential = true;
    for (uint64_t i = 0; i < w->n_tensors && sequential; i++)
        if (w->tensors[i].offset < pos) sequential = false;
        else pos = w->tensors[i].offset + w->tensors[i].nbytes;
    if (sequential) {
        pos = 0;
        for (uint64_t i = 0; i < w->n_tensors; i++) {
            const ZrGgufWTensor *t = &w->tensors[i];
            if (zeros(f, t->offset - pos, err)) return 1;
            if (t->data ? put(f, t->data, t->nbytes, err) : zeros(f, t->nbytes, err)) return 1;
            pos = t->offset + t->nbytes;
        }
        return zeros(f, w->data_size - pos, err);
    }
    /* hand-built layouts (overlaps, any order): assemble the data section in memory */
    uint8_t *d = calloc(1, w->data_size ? w->data_size : 1);
    if (!d) return zr_err(err, ZR_E_NOMEM, "gguf writer: no memory for %llu bytes of data", (unsigned long long)w->data_size);
    for (uint64_t i = 0; i < w->n_tensors; i++)
        if (w->tensors[i].data) memcpy(d + w->tensors[i].offset, w->tensors[i].data, w->tensors[i].nbytes);
    int rc = put(f, d, w->data_size, err);
    free(d);
    return rc;
}

int zr_gguf_w_to_mem(const ZrGgufWriter *w, uint8_t **buf, size_t *len, ZrError *err) {
    char *p = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&p, &n);
    if (!f) return zr_err(err, ZR_E_NOMEM, "gguf writer: open_memstream: %s", strerror(errno));
    int rc = zr_gguf_w_write(w, f, err);
    if (fclose(f) != 0 && !rc) rc = zr_err(err, ZR_E_NOMEM, "gguf writer: closing the memory stream failed");
    if (rc) {
        free(p);
        return rc;
    }
    *buf = (uint8_t *)p;
    *len = n;
    return 0;
}
