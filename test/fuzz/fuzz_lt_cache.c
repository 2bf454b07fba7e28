/* libFuzzer target for the cuBLASLt plan cache's parser (src/cuda/lt_cache.h). The input is
 * parsed as a file for a fixed key; then, since a mutation almost never keeps the checksum (or
 * the key) right, again with its checksum made right and the key it names taken as this GPU's,
 * so that the entry count and the entries behind them are reached. What it accepts must hold
 * together: every entry is found by its shape, and the file made from them parses back to them. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/lt_cache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The key at bytes 16.. of a file (its layout: lt_cache.h), little-endian. */
static ZrLtCacheKey key_of(const uint8_t *p) {
    ZrLtCacheKey k;
    memset(&k, 0, sizeof k);
    for (int i = 0; i < 8; i++) k.lt_version |= (uint64_t)p[16 + i] << (8 * i);
    int32_t *f[4] = {&k.cuda_driver, &k.cc_major, &k.cc_minor, &k.sm_count};
    for (int j = 0; j < 4; j++) {
        uint32_t v = 0;
        for (int i = 0; i < 4; i++) v |= (uint32_t)p[24 + 4 * j + i] << (8 * i);
        *f[j] = (int32_t)v;
    }
    memcpy(k.gpu, p + 40, sizeof k.gpu - 1); /* bytes after a NUL in the file make another key */
    return k;
}

static void check(const ZrLtCache *c, const ZrLtCacheKey *k) {
    for (int i = 0; i < c->n; i++)
        if (zr_lt_cache_find(c, c->e[i].shape) != &c->e[i]) abort();
    void *buf;
    size_t len;
    ZrError err;
    if (zr_lt_cache_format(k, c->e, c->n, &buf, &len, &err)) abort();
    ZrLtCache again;
    if (zr_lt_cache_parse(buf, len, k, &again, &err) || again.n != c->n ||
        (c->n && memcmp(again.e, c->e, sizeof *c->e * (size_t)c->n)))
        abort();
    zr_lt_cache_free(&again);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ZrLtCacheKey key = {.lt_version = 130000, .cuda_driver = 13000, .cc_major = 9, .sm_count = 132};
    memcpy(key.gpu, "NVIDIA H100 80GB HBM3", 22);
    ZrLtCache c;
    ZrError err;
    if (!zr_lt_cache_parse(data, size, &key, &c, &err)) check(&c, &key);
    zr_lt_cache_free(&c);
    if (size < 8 + 8 + 24 + ZR_LT_CACHE_GPU_BYTES) return 0;
    /* the same bytes with a right checksum, for the key they name */
    uint8_t *p = malloc(size);
    if (!p) return 0;
    memcpy(p, data, size);
    const uint64_t sum = zr_lt_cache_checksum(p, size);
    for (int i = 0; i < 8; i++) p[size - 8 + i] = (uint8_t)(sum >> (8 * i));
    const ZrLtCacheKey own = key_of(p);
    if (!zr_lt_cache_parse(p, size, &own, &c, &err)) check(&c, &own);
    zr_lt_cache_free(&c);
    free(p);
    return 0;
}
