/* GGUF v2/v3 reader: parse and validate a (ptr, len) buffer completely up front, so that
 * every accessor afterwards is bounds-safe by construction.
 *
 * The key/value section and the tensor table are each walked twice: the first walk validates
 * and proves the counts (so a hostile n_kv or n_tensors never drives an allocation), the second
 * fills the tables, which were allocated once for exactly that count. Each table shares its
 * allocation with an open-addressing hash index (duplicates are found there too), keyed per
 * file (hash.h) so that no choice of names makes the index quadratic. */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hash.h"
#include "quant.h"


#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "zrun reads little-endian GGUF files in place and needs a little-endian host"
#endif

/* Nested arrays deeper than this are refused (each level costs parser stack). */
#define GGUF_MAX_NEST 8
/* Table sizes are bounded so the hash index fits 32-bit slots. */
#define GGUF_MAX_ENTRIES (1u << 30)
/* Smallest encodings: a kv is key length (8) + key (>= 0) + type (4) + a 1-byte value; a
 * tensor info is name length (8) + n_dims (4) + one dimension (8) + type (4) + offset (8). */
#define GGUF_MIN_KV_BYTES 13u
#define GGUF_MIN_TENSOR_BYTES 32u

static const uint8_t k_scalar_size[ZR_GGUF_N_VALUE_TYPES] = {
    [ZR_GGUF_UINT8] = 1, [ZR_GGUF_INT8] = 1, [ZR_GGUF_UINT16] = 2, [ZR_GGUF_INT16] = 2,
    [ZR_GGUF_UINT32] = 4, [ZR_GGUF_INT32] = 4, [ZR_GGUF_FLOAT32] = 4, [ZR_GGUF_BOOL] = 1,
    [ZR_GGUF_UINT64] = 8, [ZR_GGUF_INT64] = 8, [ZR_GGUF_FLOAT64] = 8,
};

const char *zr_gguf_type_name(uint32_t t) {
    static const char *const names[ZR_GGUF_N_VALUE_TYPES] = {
        "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
        "bool", "string", "array", "uint64", "int64", "float64",
    };
    return t < ZR_GGUF_N_VALUE_TYPES ? names[t] : "unknown type";
}

bool zr_str_eq(ZrStr s, const char *cstr) {
    size_t n = strlen(cstr);
    return s.len == n && memcmp(s.ptr, cstr, n) == 0;
}

/* ---- reading primitives ---------------------------------------------------------------- */

typedef struct Rd {
    const uint8_t *b;
    uint64_t len, off;
    const char *label;
    ZrError *err;
    const char *ctx; /* what is being read, for messages: "kv #3 'general.name'" */
} Rd;

static uint64_t rd_left(const Rd *r) { return r->len - r->off; }

static int rd_trunc(Rd *r, const char *what, uint64_t need) {
    return zr_err(r->err, ZR_E_FORMAT,
                  "%s: %s: %s at byte %llu: expected %llu bytes, found %llu (file truncated)",
                  r->label, r->ctx, what, (unsigned long long)r->off, (unsigned long long)need,
                  (unsigned long long)rd_left(r));
}

static int rd_u32(Rd *r, const char *what, uint32_t *v) {
    if (rd_left(r) < 4) return rd_trunc(r, what, 4);
    memcpy(v, r->b + r->off, 4);
    r->off += 4;
    return 0;
}

static int rd_u64(Rd *r, const char *what, uint64_t *v) {
    if (rd_left(r) < 8) return rd_trunc(r, what, 8);
    memcpy(v, r->b + r->off, 8);
    r->off += 8;
    return 0;
}

/* A length-prefixed string: the length must fit in what is left of the buffer. idx names the
 * element of a string array (UINT64_MAX: not an element). Messages are formatted only on the
 * error path: a vocabulary holds hundreds of thousands of strings. */
static int rd_str_at(Rd *r, const char *what, uint64_t idx, ZrStr *s) {
    uint64_t at = r->off, n = 0;
    char wbuf[96];
    if (rd_left(r) < 8 || (memcpy(&n, r->b + r->off, 8), n > rd_left(r) - 8)) {
        if (idx == UINT64_MAX) snprintf(wbuf, sizeof wbuf, "%s", what);
        else snprintf(wbuf, sizeof wbuf, "%s %llu", what, (unsigned long long)idx);
        if (rd_left(r) < 8) {
            strncat(wbuf, " length", sizeof wbuf - strlen(wbuf) - 1);
            return rd_trunc(r, wbuf, 8);
        }
        return zr_err(r->err, ZR_E_FORMAT,
                      "%s: %s: %s at byte %llu: length %llu exceeds the %llu bytes left in the file",
                      r->label, r->ctx, wbuf, (unsigned long long)at, (unsigned long long)n,
                      (unsigned long long)(rd_left(r) - 8));
    }
    r->off += 8;
    s->ptr = (const char *)(r->b + r->off);
    s->len = n;
    r->off += n;
    return 0;
}

static int rd_str(Rd *r, const char *what, ZrStr *s) { return rd_str_at(r, what, UINT64_MAX, s); }

const char *zr_str_printable(ZrStr s, char *out, size_t cap) {
    size_t n = 0;
    if (cap < 4) {
        if (cap) out[0] = 0;
        return out;
    }
    for (uint64_t i = 0; i < s.len && n + 4 < cap; i++) {
        unsigned char c = (unsigned char)s.ptr[i];
        out[n++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    if (s.len > cap - 4) { memcpy(out + n, "...", 3); n += 3; }
    out[n] = 0;
    return out;
}

static const char *printable(ZrStr s, char *out, size_t cap) { return zr_str_printable(s, out, cap); }

/* ---- metadata values ------------------------------------------------------------------- */

static int check_value_type(Rd *r, uint32_t t, const char *what, uint64_t at) {
    if (t < ZR_GGUF_N_VALUE_TYPES) return 0;
    return zr_err(r->err, ZR_E_FORMAT, "%s: %s: %s at byte %llu: expected a value type 0..%d, found %u",
                  r->label, r->ctx, what, (unsigned long long)at, ZR_GGUF_N_VALUE_TYPES - 1, t);
}

static int walk_value(Rd *r, uint32_t t, int depth);

/* The elements of an array of n values of type et, starting at r->off. */
static int walk_elems(Rd *r, uint32_t et, uint64_t n, int depth) {
    uint64_t at = r->off;
    if (et == ZR_GGUF_STRING || et == ZR_GGUF_ARRAY) {
        uint64_t min = et == ZR_GGUF_STRING ? 8 : 12;
        if (n > rd_left(r) / min)
            return zr_err(r->err, ZR_E_FORMAT,
                          "%s: %s: array at byte %llu: %llu %s elements need at least %llu bytes each, "
                          "found %llu bytes left in the file",
                          r->label, r->ctx, (unsigned long long)at, (unsigned long long)n,
                          zr_gguf_type_name(et), (unsigned long long)min, (unsigned long long)rd_left(r));
        if (et == ZR_GGUF_ARRAY && depth >= GGUF_MAX_NEST)
            return zr_err(r->err, ZR_E_FORMAT, "%s: %s: array at byte %llu: expected nesting depth <= %d, found deeper",
                          r->label, r->ctx, (unsigned long long)at, GGUF_MAX_NEST);
        for (uint64_t i = 0; i < n; i++) {
            if (et == ZR_GGUF_STRING) {
                ZrStr s;
                if (rd_str_at(r, "string element", i, &s)) return 1;
            } else if (walk_value(r, ZR_GGUF_ARRAY, depth + 1)) {
                return 1;
            }
        }
        return 0;
    }
    uint64_t size = k_scalar_size[et];
    /* n * size must fit in the buffer (and so in size_t): compare by division */
    if (n > rd_left(r) / size) {
        char need[48];
        if (n > UINT64_MAX / size) snprintf(need, sizeof need, "more than 2^64");
        else snprintf(need, sizeof need, "%llu", (unsigned long long)(n * size));
        return zr_err(r->err, ZR_E_FORMAT,
                      "%s: %s: array at byte %llu: %llu %s elements need %s bytes, found %llu bytes left in the file",
                      r->label, r->ctx, (unsigned long long)at, (unsigned long long)n, zr_gguf_type_name(et), need,
                      (unsigned long long)rd_left(r));
    }
    r->off += n * size;
    return 0;
}

static int walk_value(Rd *r, uint32_t t, int depth) {
    if (t == ZR_GGUF_STRING) {
        ZrStr s;
        return rd_str(r, "string value", &s);
    }
    if (t == ZR_GGUF_ARRAY) {
        uint32_t et = 0;
        uint64_t n = 0, at = r->off;
        if (rd_u32(r, "array element type", &et)) return 1;
        if (check_value_type(r, et, "array element type", at)) return 1;
        if (rd_u64(r, "array length", &n)) return 1;
        return walk_elems(r, et, n, depth);
    }
    if (rd_left(r) < k_scalar_size[t]) return rd_trunc(r, zr_gguf_type_name(t), k_scalar_size[t]);
    r->off += k_scalar_size[t];
    return 0;
}

/* One key/value pair at r->off into *kv. */
static int parse_kv(Rd *r, uint64_t i, ZrGgufKv *kv) {
    char ctx[160], name[96];
    uint64_t at = r->off;
    snprintf(ctx, sizeof ctx, "kv #%llu", (unsigned long long)i);
    r->ctx = ctx;
    if (rd_str(r, "key", &kv->key)) return 1;
    snprintf(ctx, sizeof ctx, "kv #%llu '%s' (at byte %llu)", (unsigned long long)i,
             printable(kv->key, name, sizeof name), (unsigned long long)at);
    uint64_t tat = r->off;
    if (rd_u32(r, "value type", &kv->type)) return 1;
    if (check_value_type(r, kv->type, "value type", tat)) return 1;
    kv->elem_type = 0;
    kv->n = 1;
    if (kv->type == ZR_GGUF_ARRAY) {
        uint64_t eat = r->off;
        if (rd_u32(r, "array element type", &kv->elem_type)) return 1;
        if (check_value_type(r, kv->elem_type, "array element type", eat)) return 1;
        if (rd_u64(r, "array length", &kv->n)) return 1;
        kv->value = r->b + r->off;
        if (walk_elems(r, kv->elem_type, kv->n, 1)) return 1;
        kv->value_bytes = (uint64_t)(r->b + r->off - kv->value);
    } else if (kv->type == ZR_GGUF_STRING) {
        ZrStr s;
        if (rd_str(r, "string value", &s)) return 1;
        kv->value = (const uint8_t *)s.ptr;
        kv->value_bytes = s.len;
    } else {
        kv->value = r->b + r->off;
        if (walk_value(r, kv->type, 0)) return 1;
        kv->value_bytes = k_scalar_size[kv->type];
    }
    return 0;
}

/* ---- hash index ------------------------------------------------------------------------ */

/* Slots for n entries: a power of two at least 2n (so probes stay short), at least 2. */
static uint64_t hash_cap(uint64_t n) {
    uint64_t c = 2;
    while (c < 2 * n) c <<= 1;
    return c;
}

/* Inserts entry idx (name s) into slots[0..mask]; returns the index of an entry with the
 * same name already there, or -1. Slots hold index + 1; 0 is empty. */
static int64_t hash_insert(const ZrHashKey *key, uint32_t *slots, uint64_t mask, ZrStr s, uint32_t idx, const ZrStr *(*name_of)(const void *, uint32_t), const void *tab) {
    for (uint64_t h = zr_hash_bytes(key, s.ptr, (size_t)s.len) & mask;; h = (h + 1) & mask) {
        if (!slots[h]) { slots[h] = idx + 1; return -1; }
        const ZrStr *o = name_of(tab, slots[h] - 1);
        if (o->len == s.len && memcmp(o->ptr, s.ptr, s.len) == 0) return slots[h] - 1;
    }
}

static int64_t hash_find(const ZrHashKey *hkey, const uint32_t *slots, uint64_t mask, const char *key, const ZrStr *(*name_of)(const void *, uint32_t), const void *tab) {
    if (!slots) return -1;
    size_t n = strlen(key);
    for (uint64_t h = zr_hash_bytes(hkey, key, n) & mask;; h = (h + 1) & mask) {
        if (!slots[h]) return -1;
        const ZrStr *o = name_of(tab, slots[h] - 1);
        if (o->len == n && memcmp(o->ptr, key, n) == 0) return slots[h] - 1;
    }
}

static const ZrStr *kv_name(const void *tab, uint32_t i) { return &((const ZrGgufKv *)tab)[i].key; }
static const ZrStr *tensor_name(const void *tab, uint32_t i) { return &((const ZrGgufTensor *)tab)[i].name; }

/* ---- tensor infos ---------------------------------------------------------------------- */

static int parse_tensor(Rd *r, uint64_t i, uint64_t alignment, ZrGgufTensor *t) {
    char ctx[200], name[96];
    uint64_t at = r->off;
    snprintf(ctx, sizeof ctx, "tensor #%llu", (unsigned long long)i);
    r->ctx = ctx;
    if (rd_str(r, "name", &t->name)) return 1;
    snprintf(ctx, sizeof ctx, "tensor #%llu '%s' (info at byte %llu)", (unsigned long long)i,
             printable(t->name, name, sizeof name), (unsigned long long)at);
    if (rd_u32(r, "n_dims", &t->n_dims)) return 1;
    if (t->n_dims < 1 || t->n_dims > ZR_GGUF_MAX_DIMS)
        return zr_err(r->err, ZR_E_FORMAT, "%s: %s: n_dims: expected 1..%d, found %u", r->label, ctx,
                      ZR_GGUF_MAX_DIMS, t->n_dims);
    int64_t nel = 1;
    for (uint32_t d = 0; d < ZR_GGUF_MAX_DIMS; d++) {
        uint64_t v = 1;
        char what[32];
        snprintf(what, sizeof what, "ne[%u]", d);
        if (d < t->n_dims && rd_u64(r, what, &v)) return 1;
        if (v == 0 || v > (uint64_t)INT64_MAX)
            return zr_err(r->err, ZR_E_FORMAT, "%s: %s: ne[%u]: expected 1..2^63-1, found %llu", r->label, ctx,
                          d, (unsigned long long)v);
        t->ne[d] = (int64_t)v;
        if (__builtin_mul_overflow(nel, t->ne[d], &nel))
            return zr_err(r->err, ZR_E_FORMAT,
                          "%s: %s: element count ne[0]*..*ne[%u] overflows int64 (ne[%u] = %llu)", r->label, ctx,
                          d, d, (unsigned long long)v);
    }
    uint64_t tat = r->off;
    if (rd_u32(r, "type", &t->type)) return 1;
    const ZrTypeInfo *ti = zr_type_info(t->type);
    if (!ti)
        return zr_err(r->err, ZR_E_FORMAT, "%s: %s: type at byte %llu: expected a known ggml type id, found %u",
                      r->label, ctx, (unsigned long long)tat, t->type);
    if (t->ne[0] % ti->block != 0)
        return zr_err(r->err, ZR_E_FORMAT,
                      "%s: %s: row length ne[0] = %lld: expected a multiple of %s's block size %u",
                      r->label, ctx, (long long)t->ne[0], ti->name, ti->block);
    uint64_t nb = (uint64_t)(t->ne[0] / ti->block);
    if (__builtin_mul_overflow(nb, (uint64_t)ti->bytes, &nb) ||
        __builtin_mul_overflow(nb, (uint64_t)(nel / t->ne[0]), &nb))
        return zr_err(r->err, ZR_E_FORMAT, "%s: %s: byte size of %lld %s elements overflows 64 bits", r->label,
                      ctx, (long long)nel, ti->name);
    t->nbytes = nb;
    uint64_t oat = r->off;
    if (rd_u64(r, "data offset", &t->offset)) return 1;
    if (t->offset % alignment != 0)
        return zr_err(r->err, ZR_E_FORMAT,
                      "%s: %s: data offset at byte %llu: expected a multiple of the alignment %llu, found %llu",
                      r->label, ctx, (unsigned long long)oat, (unsigned long long)alignment,
                      (unsigned long long)t->offset);
    t->data = NULL;
    return 0;
}

typedef struct Span {
    uint64_t off, end;
    uint32_t idx;
} Span;

static int span_cmp(const void *a, const void *b) {
    const Span *x = a, *y = b;
    if (x->off != y->off) return x->off < y->off ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* ---- the file -------------------------------------------------------------------------- */

static void gguf_free_tables(ZrGguf *g) {
    free(g->kv);
    free(g->tensors);
    g->kv = NULL;
    g->tensors = NULL;
    g->kv_hash = g->tensor_hash = NULL;
}

/* general.alignment, read from the validated kv table (any unsigned integer type). */
static int read_alignment(ZrGguf *g, ZrError *err) {
    g->alignment = ZR_GGUF_DEFAULT_ALIGNMENT;
    const ZrGgufKv *kv = zr_gguf_find(g, "general.alignment");
    if (!kv) return 0;
    uint64_t a = 0;
    switch (kv->type) {
    case ZR_GGUF_UINT8: a = kv->value[0]; break;
    case ZR_GGUF_UINT16: { uint16_t v; memcpy(&v, kv->value, 2); a = v; break; }
    case ZR_GGUF_UINT32: { uint32_t v; memcpy(&v, kv->value, 4); a = v; break; }
    case ZR_GGUF_UINT64: memcpy(&a, kv->value, 8); break;
    default:
        return zr_err(err, ZR_E_FORMAT, "%s: key 'general.alignment': expected uint32, found %s", g->path,
                      zr_gguf_type_name(kv->type));
    }
    if (a == 0 || (a & (a - 1)) != 0 || a > (1u << 30))
        return zr_err(err, ZR_E_FORMAT,
                      "%s: key 'general.alignment': expected a power of two (1..2^30), found %llu", g->path,
                      (unsigned long long)a);
    g->alignment = a;
    return 0;
}

int zr_gguf_parse(ZrGguf *g, const void *buf, size_t len, const char *label, ZrError *err) {
    memset(g, 0, sizeof *g);
    g->path = label ? label : "<buffer>";
    g->base = buf;
    g->len = len;
    zr_hash_key_random(&g->hash_key);
    Rd r = {.b = buf, .len = len, .label = g->path, .err = err, .ctx = "header"};

    if (len < 4 || memcmp(buf, "GGUF", 4) != 0) {
        char found[8] = "";
        const uint8_t *b = buf;
        for (size_t i = 0; i < 4 && i < len; i++) found[i] = (b[i] >= 0x20 && b[i] < 0x7f) ? (char)b[i] : '?';
        if (len < 4) return zr_err(err, ZR_E_FORMAT, "%s: header: magic: expected \"GGUF\", found %zu bytes of file (truncated)", g->path, len);
        return zr_err(err, ZR_E_FORMAT, "%s: header: magic: expected \"GGUF\", found \"%s\" (not a GGUF file)", g->path, found);
    }
    r.off = 4;
    if (rd_u32(&r, "version", &g->version)) return 1;
    if (g->version != 2 && g->version != 3) {
        if (g->version == 1)
            return zr_err(err, ZR_E_UNSUPPORTED,
                          "%s: header: version: expected 2 or 3, found 1 (GGUF v1 is obsolete: convert the model again)",
                          g->path);
        uint32_t sw = __builtin_bswap32(g->version);
        return zr_err(err, ZR_E_UNSUPPORTED, "%s: header: version: expected 2 or 3, found %u%s", g->path,
                      g->version, (sw == 2 || sw == 3) ? " (a big-endian file)" : "");
    }
    if (rd_u64(&r, "n_tensors", &g->n_tensors)) return 1;
    if (rd_u64(&r, "n_kv", &g->n_kv)) return 1;
    if (g->n_kv > rd_left(&r) / GGUF_MIN_KV_BYTES || g->n_kv > GGUF_MAX_ENTRIES)
        return zr_err(err, ZR_E_FORMAT,
                      "%s: header: n_kv: %llu key/value pairs need at least %u bytes each, found %llu bytes left in the file",
                      g->path, (unsigned long long)g->n_kv, GGUF_MIN_KV_BYTES, (unsigned long long)rd_left(&r));
    if (g->n_tensors > GGUF_MAX_ENTRIES)
        return zr_err(err, ZR_E_FORMAT, "%s: header: n_tensors: expected at most %u, found %llu", g->path,
                      GGUF_MAX_ENTRIES, (unsigned long long)g->n_tensors);

    /* key/value pairs: walk to validate, then allocate and fill */
    uint64_t kv_start = r.off;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        ZrGgufKv tmp;
        if (parse_kv(&r, i, &tmp)) return 1;
    }
    uint64_t kcap = hash_cap(g->n_kv);
    /* (the products fit: n <= 2^30; on a 32-bit size_t they may not, hence the check) */
    uint64_t kbytes = g->n_kv * sizeof(ZrGgufKv) + kcap * sizeof(uint32_t);
    void *kmem = kbytes <= SIZE_MAX ? calloc(1, (size_t)kbytes) : NULL;
    if (!kmem) return zr_err(err, ZR_E_NOMEM, "%s: no memory for %llu keys", g->path, (unsigned long long)g->n_kv);
    g->kv = kmem;
    g->kv_hash = (uint32_t *)(g->kv + g->n_kv);
    g->kv_hash_mask = kcap - 1;
    r.off = kv_start;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        parse_kv(&r, i, &g->kv[i]); /* cannot fail: the first walk validated it */
        int64_t dup = hash_insert(&g->hash_key, g->kv_hash, g->kv_hash_mask, g->kv[i].key, (uint32_t)i, kv_name, g->kv);
        if (dup >= 0) {
            char name[96];
            zr_err(err, ZR_E_FORMAT, "%s: kv #%llu: key '%s': expected unique keys, found it again (first as kv #%lld)",
                   g->path, (unsigned long long)i, printable(g->kv[i].key, name, sizeof name), (long long)dup);
            gguf_free_tables(g);
            return 1;
        }
    }
    if (read_alignment(g, err)) { gguf_free_tables(g); return 1; }

    /* tensor infos: same two walks */
    if (g->n_tensors > rd_left(&r) / GGUF_MIN_TENSOR_BYTES) {
        zr_err(err, ZR_E_FORMAT,
               "%s: header: n_tensors: %llu tensor infos need at least %u bytes each, found %llu bytes left after the metadata",
               g->path, (unsigned long long)g->n_tensors, GGUF_MIN_TENSOR_BYTES, (unsigned long long)rd_left(&r));
        gguf_free_tables(g);
        return 1;
    }
    uint64_t ti_start = r.off;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        ZrGgufTensor tmp;
        if (parse_tensor(&r, i, g->alignment, &tmp)) { gguf_free_tables(g); return 1; }
    }
    /* the data section starts at the next multiple of the alignment */
    uint64_t data = r.off + (g->alignment - r.off % g->alignment) % g->alignment;
    if (data > len) {
        if (g->n_tensors > 0) {
            r.ctx = "data section";
            rd_trunc(&r, "padding before the tensor data", data - r.off);
            gguf_free_tables(g);
            return 1;
        }
        data = len; /* no tensors: the padding may be left out */
    }
    g->data_offset = data;

    uint64_t tcap = hash_cap(g->n_tensors);
    uint64_t tbytes = g->n_tensors * (sizeof(ZrGgufTensor) + sizeof(Span)) + tcap * sizeof(uint32_t);
    void *tmem = tbytes <= SIZE_MAX ? calloc(1, (size_t)tbytes) : NULL;
    if (!tmem) {
        zr_err(err, ZR_E_NOMEM, "%s: no memory for %llu tensors", g->path, (unsigned long long)g->n_tensors);
        gguf_free_tables(g);
        return 1;
    }
    g->tensors = tmem;
    Span *spans = (Span *)(g->tensors + g->n_tensors);
    g->tensor_hash = (uint32_t *)(spans + g->n_tensors);
    g->tensor_hash_mask = tcap - 1;
    r.off = ti_start;
    uint64_t room = len - data;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        ZrGgufTensor *t = &g->tensors[i];
        char name[96];
        parse_tensor(&r, i, g->alignment, t);
        printable(t->name, name, sizeof name);
        int64_t dup = hash_insert(&g->hash_key, g->tensor_hash, g->tensor_hash_mask, t->name, (uint32_t)i, tensor_name, g->tensors);
        if (dup >= 0) {
            zr_err(err, ZR_E_FORMAT, "%s: tensor #%llu '%s': expected unique tensor names, found it again (first as tensor #%lld)",
                   g->path, (unsigned long long)i, name, (long long)dup);
            gguf_free_tables(g);
            return 1;
        }
        if (t->offset > room || t->nbytes > room - t->offset) {
            zr_err(err, ZR_E_FORMAT,
                   "%s: tensor '%s': data [%llu, +%llu) relative to the data section at byte %llu: "
                   "expected it inside the file (%llu bytes), found it ends past it (file truncated?)",
                   g->path, name, (unsigned long long)t->offset, (unsigned long long)t->nbytes,
                   (unsigned long long)data, (unsigned long long)len);
            gguf_free_tables(g);
            return 1;
        }
        t->data = g->base + data + t->offset;
        spans[i] = (Span){t->offset, t->offset + t->nbytes, (uint32_t)i};
    }
    qsort(spans, g->n_tensors, sizeof *spans, span_cmp);
    for (uint64_t i = 1; i < g->n_tensors; i++) {
        if (spans[i].off < spans[i - 1].end) {
            char a[96], b[96];
            zr_err(err, ZR_E_FORMAT,
                   "%s: tensor '%s': data [%llu, %llu): expected no overlap, found it overlaps tensor '%s' [%llu, %llu)",
                   g->path, printable(g->tensors[spans[i].idx].name, a, sizeof a), (unsigned long long)spans[i].off,
                   (unsigned long long)spans[i].end, printable(g->tensors[spans[i - 1].idx].name, b, sizeof b),
                   (unsigned long long)spans[i - 1].off, (unsigned long long)spans[i - 1].end);
            gguf_free_tables(g);
            return 1;
        }
    }
    return 0;
}

int zr_gguf_open(ZrGguf *g, const char *path, ZrError *err) {
    memset(g, 0, sizeof *g);
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer; the type is
     * checked on the open descriptor, so nothing can be swapped in between */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return zr_err(err, ZR_E_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return zr_err(err, ZR_E_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        const char *found = S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO (named pipe)"
                          : S_ISCHR(st.st_mode) ? "a character device" : S_ISBLK(st.st_mode) ? "a block device"
                          : S_ISSOCK(st.st_mode) ? "a socket" : "not a regular file";
        return zr_err(err, ZR_E_IO, "%s: expected a regular file (a GGUF model), found %s", path, found);
    }
    void *map = NULL;
    size_t len = (size_t)st.st_size;
    if (len > 0) {
        map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            return zr_err(err, ZR_E_IO, "%s: cannot mmap %zu bytes: %s", path, len, strerror(e));
        }
    }
    close(fd);
    int rc = zr_gguf_parse(g, map ? map : "", len, path, err);
    if (rc) {
        if (map) munmap(map, len);
        memset(g, 0, sizeof *g);
        return rc;
    }
    g->map = map;
    g->map_len = len;
    return 0;
}

void zr_gguf_close(ZrGguf *g) {
    if (!g) return;
    gguf_free_tables(g);
    if (g->map) munmap(g->map, g->map_len);
    memset(g, 0, sizeof *g);
}

const ZrGgufKv *zr_gguf_find(const ZrGguf *g, const char *key) {
    int64_t i = hash_find(&g->hash_key, g->kv_hash, g->kv_hash_mask, key, kv_name, g->kv);
    return i < 0 ? NULL : &g->kv[i];
}

const ZrGgufTensor *zr_gguf_tensor(const ZrGguf *g, const char *name) {
    int64_t i = hash_find(&g->hash_key, g->tensor_hash, g->tensor_hash_mask, name, tensor_name, g->tensors);
    return i < 0 ? NULL : &g->tensors[i];
}

/* ---- typed access ---------------------------------------------------------------------- */

/* Integer value of a scalar at p of type t into *u (unsigned) or *s (signed); false for a
 * non-integer type. */
static bool int_value(uint32_t t, const uint8_t *p, bool *neg, uint64_t *mag) {
    int64_t s = 0;
    uint64_t u = 0;
    bool is_signed = false;
    switch (t) {
    case ZR_GGUF_UINT8: case ZR_GGUF_BOOL: u = p[0]; break;
    case ZR_GGUF_INT8: { int8_t v; memcpy(&v, p, 1); s = v; is_signed = true; break; }
    case ZR_GGUF_UINT16: { uint16_t v; memcpy(&v, p, 2); u = v; break; }
    case ZR_GGUF_INT16: { int16_t v; memcpy(&v, p, 2); s = v; is_signed = true; break; }
    case ZR_GGUF_UINT32: { uint32_t v; memcpy(&v, p, 4); u = v; break; }
    case ZR_GGUF_INT32: { int32_t v; memcpy(&v, p, 4); s = v; is_signed = true; break; }
    case ZR_GGUF_UINT64: memcpy(&u, p, 8); break;
    case ZR_GGUF_INT64: memcpy(&s, p, 8); is_signed = true; break;
    default: return false;
    }
    if (is_signed) {
        *neg = s < 0;
        *mag = s < 0 ? (uint64_t)0 - (uint64_t)s : (uint64_t)s;
    } else {
        *neg = false;
        *mag = u;
    }
    return true;
}

static double num_value(uint32_t t, const uint8_t *p) {
    bool neg;
    uint64_t mag;
    if (t == ZR_GGUF_FLOAT32) { float f; memcpy(&f, p, 4); return f; }
    if (t == ZR_GGUF_FLOAT64) { double d; memcpy(&d, p, 8); return d; }
    if (int_value(t, p, &neg, &mag)) return neg ? -(double)mag : (double)mag;
    return 0.0;
}

static const ZrGgufKv *need(const ZrGguf *g, const char *key, bool opt, int *rc, ZrError *err) {
    const ZrGgufKv *kv = zr_gguf_find(g, key);
    *rc = 0;
    if (!kv && !opt) *rc = zr_err(err, ZR_E_FORMAT, "%s: key '%s': expected it present, found it missing", g->path, key);
    return kv;
}

static int wrong_type(const ZrGguf *g, const char *key, const char *expected, const ZrGgufKv *kv, ZrError *err) {
    if (kv->type == ZR_GGUF_ARRAY)
        return zr_err(err, ZR_E_FORMAT, "%s: key '%s': expected %s, found array of %llu %s", g->path, key, expected,
                      (unsigned long long)kv->n, zr_gguf_type_name(kv->elem_type));
    return zr_err(err, ZR_E_FORMAT, "%s: key '%s': expected %s, found %s", g->path, key, expected,
                  zr_gguf_type_name(kv->type));
}

/* An integer in [lo_neg ? -lo : 0, hi]. */
static int get_int(const ZrGguf *g, const char *key, bool opt, uint64_t hi, uint64_t lo_mag, bool *neg, uint64_t *mag,
                   bool *found, const char *expected, ZrError *err) {
    int rc;
    const ZrGgufKv *kv = need(g, key, opt, &rc, err);
    *found = kv != NULL;
    if (!kv) return rc;
    if (kv->type == ZR_GGUF_BOOL || !int_value(kv->type, kv->value, neg, mag)) return wrong_type(g, key, expected, kv, err);
    if ((*neg && *mag > lo_mag) || (!*neg && *mag > hi))
        return zr_err(err, ZR_E_FORMAT, "%s: key '%s': expected %s, found %s%llu", g->path, key, expected,
                      *neg ? "-" : "", (unsigned long long)*mag);
    return 0;
}

static int get_u32(const ZrGguf *g, const char *key, uint32_t *out, bool opt, ZrError *err) {
    bool neg = false, found = false;
    uint64_t mag = 0;
    int rc = get_int(g, key, opt, UINT32_MAX, 0, &neg, &mag, &found, "an integer in 0..2^32-1", err);
    if (!rc && found) *out = (uint32_t)mag;
    return rc;
}

int zr_gguf_get_u32(const ZrGguf *g, const char *key, uint32_t *out, ZrError *err) { return get_u32(g, key, out, false, err); }
int zr_gguf_get_u32_opt(const ZrGguf *g, const char *key, uint32_t *out, ZrError *err) { return get_u32(g, key, out, true, err); }

int zr_gguf_get_u64(const ZrGguf *g, const char *key, uint64_t *out, ZrError *err) {
    bool neg = false, found = false;
    uint64_t mag = 0;
    int rc = get_int(g, key, false, UINT64_MAX, 0, &neg, &mag, &found, "a non-negative integer", err);
    if (!rc) *out = mag;
    return rc;
}

int zr_gguf_get_i64(const ZrGguf *g, const char *key, int64_t *out, ZrError *err) {
    bool neg = false, found = false;
    uint64_t mag = 0;
    int rc = get_int(g, key, false, (uint64_t)INT64_MAX, (uint64_t)INT64_MAX + 1, &neg, &mag, &found,
                     "an integer in -2^63..2^63-1", err);
    if (!rc) *out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    return rc;
}

static int get_f32(const ZrGguf *g, const char *key, float *out, bool opt, ZrError *err) {
    int rc;
    const ZrGgufKv *kv = need(g, key, opt, &rc, err);
    if (!kv) return rc;
    if (kv->type != ZR_GGUF_FLOAT32 && kv->type != ZR_GGUF_FLOAT64) return wrong_type(g, key, "float32", kv, err);
    *out = (float)num_value(kv->type, kv->value);
    return 0;
}

int zr_gguf_get_f32(const ZrGguf *g, const char *key, float *out, ZrError *err) { return get_f32(g, key, out, false, err); }
int zr_gguf_get_f32_opt(const ZrGguf *g, const char *key, float *out, ZrError *err) { return get_f32(g, key, out, true, err); }

static int get_bool(const ZrGguf *g, const char *key, bool *out, bool opt, ZrError *err) {
    int rc;
    const ZrGgufKv *kv = need(g, key, opt, &rc, err);
    if (!kv) return rc;
    bool neg = false;
    uint64_t mag = 0;
    if (!int_value(kv->type, kv->value, &neg, &mag)) return wrong_type(g, key, "bool", kv, err);
    if (neg || mag > 1)
        return zr_err(err, ZR_E_FORMAT, "%s: key '%s': expected bool (0 or 1), found %s%llu", g->path, key,
                      neg ? "-" : "", (unsigned long long)mag);
    *out = mag == 1;
    return 0;
}

int zr_gguf_get_bool(const ZrGguf *g, const char *key, bool *out, ZrError *err) { return get_bool(g, key, out, false, err); }
int zr_gguf_get_bool_opt(const ZrGguf *g, const char *key, bool *out, ZrError *err) { return get_bool(g, key, out, true, err); }

static int get_str(const ZrGguf *g, const char *key, ZrStr *out, bool opt, ZrError *err) {
    int rc;
    const ZrGgufKv *kv = need(g, key, opt, &rc, err);
    if (!kv) return rc;
    if (kv->type != ZR_GGUF_STRING) return wrong_type(g, key, "string", kv, err);
    out->ptr = (const char *)kv->value;
    out->len = kv->value_bytes;
    return 0;
}

int zr_gguf_get_str(const ZrGguf *g, const char *key, ZrStr *out, ZrError *err) { return get_str(g, key, out, false, err); }
int zr_gguf_get_str_opt(const ZrGguf *g, const char *key, ZrStr *out, ZrError *err) { return get_str(g, key, out, true, err); }

static int get_name(const ZrGguf *g, const char *key, ZrStr *out, bool opt, ZrError *err) {
    ZrStr s = {NULL, 0};
    int rc = get_str(g, key, &s, opt, err);
    if (rc || !s.ptr) return rc;
    const char *nul = memchr(s.ptr, 0, (size_t)s.len);
    if (nul) {
        char shown[96];
        return zr_err(err, ZR_E_FORMAT, "%s: key '%s': expected a name without NUL bytes, found a NUL at byte %lld of '%s'",
                      g->path, key, (long long)(nul - s.ptr), printable(s, shown, sizeof shown));
    }
    *out = s;
    return 0;
}

int zr_gguf_get_name(const ZrGguf *g, const char *key, ZrStr *out, ZrError *err) { return get_name(g, key, out, false, err); }
int zr_gguf_get_name_opt(const ZrGguf *g, const char *key, ZrStr *out, ZrError *err) { return get_name(g, key, out, true, err); }

int zr_gguf_get_arr(const ZrGguf *g, const char *key, uint32_t elem_type, const ZrGgufKv **out, ZrError *err) {
    int rc;
    const ZrGgufKv *kv = need(g, key, false, &rc, err);
    if (!kv) return rc;
    if (kv->type != ZR_GGUF_ARRAY || (elem_type < ZR_GGUF_N_VALUE_TYPES && kv->elem_type != elem_type)) {
        char exp[48];
        snprintf(exp, sizeof exp, "array of %s", elem_type < ZR_GGUF_N_VALUE_TYPES ? zr_gguf_type_name(elem_type) : "any type");
        return wrong_type(g, key, exp, kv, err);
    }
    *out = kv;
    return 0;
}

void zr_gguf_arr_strings(const ZrGgufKv *kv, ZrStr *out) {
    const uint8_t *p = kv->value;
    for (uint64_t i = 0; i < kv->n; i++) {
        uint64_t n;
        memcpy(&n, p, 8);
        out[i].ptr = (const char *)p + 8;
        out[i].len = n;
        p += 8 + n;
    }
}

/* Bytes of one already-validated value of type t at p (for walking string/nested arrays). */
static uint64_t value_span(uint32_t t, const uint8_t *p) {
    if (t == ZR_GGUF_STRING) {
        uint64_t n;
        memcpy(&n, p, 8);
        return 8 + n;
    }
    if (t == ZR_GGUF_ARRAY) {
        uint32_t et;
        uint64_t n, off = 12;
        memcpy(&et, p, 4);
        memcpy(&n, p + 4, 8);
        if (et != ZR_GGUF_STRING && et != ZR_GGUF_ARRAY) return off + n * k_scalar_size[et];
        for (uint64_t i = 0; i < n; i++) off += value_span(et, p + off);
        return off;
    }
    return k_scalar_size[t];
}

int zr_gguf_arr_elem(const ZrGgufKv *kv, uint64_t i, ZrGgufKv *out) {
    if (kv->type != ZR_GGUF_ARRAY || i >= kv->n) return 1;
    const uint8_t *p = kv->value;
    uint32_t et = kv->elem_type;
    if (et == ZR_GGUF_STRING || et == ZR_GGUF_ARRAY) {
        for (uint64_t j = 0; j < i; j++) p += value_span(et, p);
    } else {
        p += i * k_scalar_size[et];
    }
    memset(out, 0, sizeof *out);
    out->key = kv->key;
    out->type = et;
    out->n = 1;
    if (et == ZR_GGUF_STRING) {
        memcpy(&out->value_bytes, p, 8);
        out->value = p + 8;
    } else if (et == ZR_GGUF_ARRAY) {
        memcpy(&out->elem_type, p, 4);
        memcpy(&out->n, p + 4, 8);
        out->value = p + 12;
        out->value_bytes = value_span(ZR_GGUF_ARRAY, p) - 12;
    } else {
        out->value = p;
        out->value_bytes = k_scalar_size[et];
    }
    return 0;
}

double zr_gguf_arr_num(const ZrGgufKv *kv, uint64_t i) {
    if (kv->type != ZR_GGUF_ARRAY || i >= kv->n || kv->elem_type >= ZR_GGUF_N_VALUE_TYPES) return 0.0;
    uint32_t et = kv->elem_type;
    if (et == ZR_GGUF_STRING || et == ZR_GGUF_ARRAY) return 0.0;
    return num_value(et, kv->value + i * k_scalar_size[et]);
}

double zr_gguf_kv_num(const ZrGgufKv *kv) {
    if (kv->type == ZR_GGUF_STRING || kv->type == ZR_GGUF_ARRAY) return 0.0;
    return num_value(kv->type, kv->value);
}
