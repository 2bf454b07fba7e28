#include "cuda/lt_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hash.h"

static const char MAGIC[8] = {'Z', 'R', 'L', 'T', 'P', 'L', 'N', '\n'};
#define KEY_BYTES (8 + 4 * 4 + ZR_LT_CACHE_GPU_BYTES)
#define HEAD_BYTES (8 + 4 + 4 + KEY_BYTES)
#define ENTRY_BYTES (8 * (ZR_LT_CACHE_SHAPE_WORDS + ZR_LT_CACHE_ALGO_WORDS))
#define SUM_BYTES 8
#define MAX_FILE_BYTES (HEAD_BYTES + (size_t)ZR_LT_CACHE_MAX * ENTRY_BYTES + SUM_BYTES)

/* The checksum's key: fixed, the file is ours (a checksum against damage, not an adversary) */
static const ZrHashKey SUM_KEY = {0x7a72756e2d6c7470ull, 0x6c616e2d63616368ull};

static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t get64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}
static uint32_t get32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static int cmp_entry(const void *a, const void *b) {
    return memcmp(((const ZrLtCacheEntry *)a)->shape, ((const ZrLtCacheEntry *)b)->shape,
                  sizeof ((const ZrLtCacheEntry *)a)->shape);
}

uint64_t zr_lt_cache_checksum(const void *buf, size_t len) {
    return len < SUM_BYTES ? 0 : zr_hash_bytes(&SUM_KEY, buf, len - SUM_BYTES);
}

/* The key's bytes as the file holds them (the name NUL-padded, cut at the field's last byte). */
static void key_bytes(const ZrLtCacheKey *k, uint8_t *p) {
    put64(p, k->lt_version);
    put32(p + 8, (uint32_t)k->cuda_driver);
    put32(p + 12, (uint32_t)k->cc_major);
    put32(p + 16, (uint32_t)k->cc_minor);
    put32(p + 20, (uint32_t)k->sm_count);
    memset(p + 24, 0, ZR_LT_CACHE_GPU_BYTES);
    memcpy(p + 24, k->gpu, strnlen(k->gpu, ZR_LT_CACHE_GPU_BYTES - 1));
}

int zr_lt_cache_parse(const void *buf, size_t len, const ZrLtCacheKey *key, ZrLtCache *out, ZrError *err) {
    const uint8_t *p = buf;
    out->e = NULL;
    out->n = 0;
    if (len < HEAD_BYTES + SUM_BYTES)
        return zr_err(err, ZR_E_FORMAT, "plan cache: %zu bytes, shorter than its header (%d bytes and a checksum)", len,
                      HEAD_BYTES);
    if (memcmp(p, MAGIC, sizeof MAGIC)) return zr_err(err, ZR_E_FORMAT, "plan cache: not a zrun plan cache (magic)");
    const uint32_t format = get32(p + 8), n = get32(p + 12);
    if (format != ZR_LT_CACHE_FORMAT)
        return zr_err(err, ZR_E_FORMAT, "plan cache: format %u, expected %d", format, ZR_LT_CACHE_FORMAT);
    if (n > ZR_LT_CACHE_MAX)
        return zr_err(err, ZR_E_FORMAT, "plan cache: %u entries, at most %d expected", n, ZR_LT_CACHE_MAX);
    const size_t want = HEAD_BYTES + (size_t)n * ENTRY_BYTES + SUM_BYTES;
    if (len != want)
        return zr_err(err, ZR_E_FORMAT, "plan cache: %zu bytes, expected %zu for its %u entries", len, want, n);
    if (get64(p + len - SUM_BYTES) != zr_lt_cache_checksum(p, len))
        return zr_err(err, ZR_E_FORMAT, "plan cache: checksum mismatch (a damaged file)");
    uint8_t kb[KEY_BYTES];
    key_bytes(key, kb);
    const uint8_t *fk = p + 16;
    if (memcmp(fk, kb, KEY_BYTES)) {
        char gpu[ZR_LT_CACHE_GPU_BYTES];
        memcpy(gpu, fk + 24, sizeof gpu);
        gpu[sizeof gpu - 1] = 0;
        return zr_err(err, ZR_E_UNSUPPORTED,
                      "plan cache: made for %s (CC %d.%d, %d SMs), cuBLASLt %llu, CUDA driver %d; this is %s (CC %d.%d, "
                      "%d SMs), cuBLASLt %llu, CUDA driver %d",
                      gpu, (int32_t)get32(fk + 12), (int32_t)get32(fk + 16), (int32_t)get32(fk + 20),
                      (unsigned long long)get64(fk), (int32_t)get32(fk + 8), key->gpu, key->cc_major, key->cc_minor,
                      key->sm_count, (unsigned long long)key->lt_version, key->cuda_driver);
    }
    if (n == 0) return ZR_OK;
    ZrLtCacheEntry *e = malloc(sizeof *e * n);
    if (!e) return zr_err(err, ZR_E_NOMEM, "plan cache: out of host memory for %u entries", n);
    const uint8_t *q = p + HEAD_BYTES;
    for (uint32_t i = 0; i < n; i++) {
        for (int w = 0; w < ZR_LT_CACHE_SHAPE_WORDS; w++, q += 8) e[i].shape[w] = (int64_t)get64(q);
        for (int w = 0; w < ZR_LT_CACHE_ALGO_WORDS; w++, q += 8) e[i].algo[w] = get64(q);
    }
    qsort(e, n, sizeof *e, cmp_entry);
    for (uint32_t i = 1; i < n; i++)
        if (!cmp_entry(&e[i - 1], &e[i])) {
            free(e);
            return zr_err(err, ZR_E_FORMAT, "plan cache: a shape is listed twice");
        }
    out->e = e;
    out->n = (int)n;
    return ZR_OK;
}

int zr_lt_cache_format(const ZrLtCacheKey *key, const ZrLtCacheEntry *e, int n, void **buf, size_t *len, ZrError *err) {
    *buf = NULL;
    *len = 0;
    if (n < 0 || n > ZR_LT_CACHE_MAX)
        return zr_err(err, ZR_E_INTERNAL, "plan cache: %d entries to write, at most %d", n, ZR_LT_CACHE_MAX);
    const size_t bytes = HEAD_BYTES + (size_t)n * ENTRY_BYTES + SUM_BYTES;
    uint8_t *p = malloc(bytes);
    if (!p) return zr_err(err, ZR_E_NOMEM, "plan cache: out of host memory for %zu bytes", bytes);
    memcpy(p, MAGIC, sizeof MAGIC);
    put32(p + 8, ZR_LT_CACHE_FORMAT);
    put32(p + 12, (uint32_t)n);
    key_bytes(key, p + 16);
    uint8_t *q = p + HEAD_BYTES;
    for (int i = 0; i < n; i++) {
        for (int w = 0; w < ZR_LT_CACHE_SHAPE_WORDS; w++, q += 8) put64(q, (uint64_t)e[i].shape[w]);
        for (int w = 0; w < ZR_LT_CACHE_ALGO_WORDS; w++, q += 8) put64(q, e[i].algo[w]);
    }
    put64(q, zr_lt_cache_checksum(p, bytes));
    *buf = p;
    *len = bytes;
    return ZR_OK;
}

int zr_lt_cache_read(const char *path, const ZrLtCacheKey *key, ZrLtCache *out, ZrError *err) {
    out->e = NULL;
    out->n = 0;
    /* non-blocking: a FIFO opens at once (and is then refused) instead of waiting for a writer */
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return zr_err(err, ZR_E_IO, "plan cache %s: %s", path, errno == ENOENT ? "none yet" : strerror(errno));
    struct stat sb;
    int rc = ZR_OK;
    uint8_t *buf = NULL;
    if (fstat(fd, &sb)) {
        rc = zr_err(err, ZR_E_IO, "plan cache %s: fstat: %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(sb.st_mode)) {
        rc = zr_err(err, ZR_E_IO, "plan cache %s: not a regular file", path);
        goto done;
    }
    if (sb.st_size < 0 || (uint64_t)sb.st_size > MAX_FILE_BYTES) {
        rc = zr_err(err, ZR_E_FORMAT, "plan cache %s: %lld bytes, a full one has %zu", path, (long long)sb.st_size,
                    (size_t)MAX_FILE_BYTES);
        goto done;
    }
    const size_t len = (size_t)sb.st_size;
    if (!(buf = malloc(len ? len : 1))) {
        rc = zr_err(err, ZR_E_NOMEM, "plan cache %s: out of host memory for %zu bytes", path, len);
        goto done;
    }
    size_t got = 0;
    while (got < len) {
        const ssize_t r = read(fd, buf + got, len - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break; /* cut short while read: the size check below refuses it */
        got += (size_t)r;
    }
    rc = zr_lt_cache_parse(buf, got, key, out, err);
    if (rc) zr_err_wrap(err, "%s", path);
done:
    free(buf);
    close(fd);
    return rc;
}

/* mkdir -p of path's directory, each made 0700 (a cache of one user's). */
static int make_dirs(const char *path, ZrError *err) {
    char *d = strdup(path);
    if (!d) return zr_err(err, ZR_E_NOMEM, "plan cache: out of host memory");
    char *slash = strrchr(d, '/');
    int rc = ZR_OK;
    if (slash && slash != d) {
        *slash = 0;
        for (char *p = d + 1;; p++) {
            const bool end = *p == 0;
            if (*p == '/' || end) {
                *p = 0;
                if (mkdir(d, 0700) && errno != EEXIST) {
                    rc = zr_err(err, ZR_E_IO, "plan cache: mkdir %s: %s", d, strerror(errno));
                    break;
                }
                if (end) break;
                *p = '/';
            }
        }
    }
    free(d);
    return rc;
}

int zr_lt_cache_write(const char *path, const ZrLtCacheKey *key, const ZrLtCacheEntry *e, int n, ZrError *err) {
    void *buf = NULL;
    size_t len = 0;
    int rc = zr_lt_cache_format(key, e, n, &buf, &len, err);
    if (rc || (rc = make_dirs(path, err))) {
        free(buf);
        return rc;
    }
    const size_t tl = strlen(path) + 16;
    char *tmp = malloc(tl);
    if (!tmp) {
        free(buf);
        return zr_err(err, ZR_E_NOMEM, "plan cache: out of host memory");
    }
    snprintf(tmp, tl, "%s.XXXXXX", path); /* beside it: the rename stays in one file system */
    const int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        rc = zr_err(err, ZR_E_IO, "plan cache: creating %s: %s", tmp, strerror(errno));
        goto done;
    }
    size_t put = 0;
    while (put < len) {
        const ssize_t w = write(fd, (const uint8_t *)buf + put, len - put);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        put += (size_t)w;
    }
    if (put < len) rc = zr_err(err, ZR_E_IO, "plan cache: writing %s: %s", tmp, put ? "short write" : strerror(errno));
    if (close(fd) && !rc) rc = zr_err(err, ZR_E_IO, "plan cache: closing %s: %s", tmp, strerror(errno));
    if (!rc && rename(tmp, path)) rc = zr_err(err, ZR_E_IO, "plan cache: renaming %s to %s: %s", tmp, path, strerror(errno));
    if (rc) unlink(tmp);
done:
    free(tmp);
    free(buf);
    return rc;
}

const ZrLtCacheEntry *zr_lt_cache_find(const ZrLtCache *c, const int64_t shape[ZR_LT_CACHE_SHAPE_WORDS]) {
    if (!c->n) return NULL;
    ZrLtCacheEntry k;
    memcpy(k.shape, shape, sizeof k.shape);
    return bsearch(&k, c->e, (size_t)c->n, sizeof *c->e, cmp_entry);
}

int zr_lt_cache_merge(const ZrLtCache *old, const ZrLtCacheEntry *fresh, int n_fresh, ZrLtCache *out, ZrError *err) {
    out->e = NULL;
    out->n = 0;
    const size_t cap = (size_t)n_fresh + (size_t)old->n;
    ZrLtCacheEntry *e = malloc(sizeof *e * (cap ? cap : 1));
    if (!e) return zr_err(err, ZR_E_NOMEM, "plan cache: out of host memory for %zu entries", cap);
    int n = 0;
    for (int i = 0; i < n_fresh && n < ZR_LT_CACHE_MAX; i++) e[n++] = fresh[i];
    qsort(e, (size_t)n, sizeof *e, cmp_entry);
    int u = n > 0; /* fresh shapes once each */
    for (int i = 1; i < n; i++)
        if (cmp_entry(&e[u - 1], &e[i])) e[u++] = e[i];
    n = u;
    const ZrLtCache fr = {e, n};
    const int n_new = n;
    for (int i = 0; i < old->n && n < ZR_LT_CACHE_MAX; i++)
        if (!zr_lt_cache_find(&fr, old->e[i].shape)) e[n++] = old->e[i];
    if (n > n_new) qsort(e, (size_t)n, sizeof *e, cmp_entry);
    out->e = e;
    out->n = n;
    return ZR_OK;
}

void zr_lt_cache_free(ZrLtCache *c) {
    free(c->e);
    c->e = NULL;
    c->n = 0;
}
