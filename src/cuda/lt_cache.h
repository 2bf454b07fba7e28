/* cuBLASLt's plans on disk (issue 19): a second zrun on the same GPU takes the algorithms the
 * first one's heuristic chose instead of asking it again. This file is the format and its
 * reading and writing only, with no cuBLASLt call (test/test_lt_cache.c runs it on the CPU);
 * cuda/cublaslt.c decides what an entry is worth: a loaded algorithm still passes
 * cublasLtMatmulAlgoCheck before a plan takes it, else the heuristic runs for that shape.
 *
 * cublasLtMatmulAlgo_t is plain data (uint64_t data[8]) that NVIDIA documents as reusable with
 * the same cuBLASLt, so the file's key holds what could make an algorithm invalid or no longer
 * the best: the library's version, the driver's CUDA version, the GPU's name, compute capability
 * and multiprocessors. A file of another key, or one that is cut short, damaged, of an unknown
 * format or of an absurd size, is refused (and replaced at the next save), never trusted.
 *
 * The file, every integer little-endian:
 *   magic "ZRLTPLN\n" (8 bytes), u32 format (ZR_LT_CACHE_FORMAT), u32 entries n (<= ZR_LT_CACHE_MAX)
 *   key: u64 lt_version, i32 cuda_driver, i32 cc_major, i32 cc_minor, i32 sm_count,
 *        gpu[ZR_LT_CACHE_GPU_BYTES] (the name, NUL-padded)
 *   n entries: i64 shape[ZR_LT_CACHE_SHAPE_WORDS] (cuda/cublaslt.h ZrLtShape's fields in order),
 *              u64 algo[ZR_LT_CACHE_ALGO_WORDS] (cublasLtMatmulAlgo_t.data)
 *   u64 checksum: SipHash-1-3 (hash.h) under a fixed key of every byte before it */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define ZR_LT_CACHE_FORMAT 1
#define ZR_LT_CACHE_SHAPE_WORDS 16
#define ZR_LT_CACHE_ALGO_WORDS 8
#define ZR_LT_CACHE_GPU_BYTES 256
/* Entries a file holds at most: a model's prefill has 20-60 (shape, bucket) pairs, so this is
 * dozens of models' worth; 4096 x 192 bytes = 768 KiB */
#define ZR_LT_CACHE_MAX 4096

typedef struct ZrLtCacheKey {
    uint64_t lt_version;   /* cublasLtGetVersion(), e.g. 130000 */
    int32_t cuda_driver;   /* cuDriverGetVersion(), e.g. 13000 */
    int32_t cc_major, cc_minor, sm_count;
    char gpu[ZR_LT_CACHE_GPU_BYTES]; /* cuDeviceGetName(), "NVIDIA H100 80GB HBM3" */
} ZrLtCacheKey;

typedef struct ZrLtCacheEntry {
    int64_t shape[ZR_LT_CACHE_SHAPE_WORDS];
    uint64_t algo[ZR_LT_CACHE_ALGO_WORDS];
} ZrLtCacheEntry;

/* Entries sorted by shape, each shape once. */
typedef struct ZrLtCache {
    ZrLtCacheEntry *e; /* [n] */
    int n;
} ZrLtCache;

/* buf[len] -> *out (sorted; a repeated shape keeps its first entry). ZR_E_FORMAT naming the field
 * for a file that is not one (magic, format, size, entry count, checksum); ZR_E_UNSUPPORTED for a
 * sound file made for another key (saying which part differs); ZR_E_NOMEM. *out is empty on error. */
int zr_lt_cache_parse(const void *buf, size_t len, const ZrLtCacheKey *key, ZrLtCache *out, ZrError *err);
/* The file of key and e[n] (n <= ZR_LT_CACHE_MAX) -> *buf (malloc'ed, the caller frees), *len. */
int zr_lt_cache_format(const ZrLtCacheKey *key, const ZrLtCacheEntry *e, int n, void **buf, size_t *len, ZrError *err);

/* The file at path, parsed for key. Only a regular file is read (opened non-blocking, then
 * fstat: a directory, FIFO or device is refused without blocking); one larger than a full file
 * can be is refused unread. ZR_E_IO when it cannot be opened or read (errno's text), else as
 * zr_lt_cache_parse. */
int zr_lt_cache_read(const char *path, const ZrLtCacheKey *key, ZrLtCache *out, ZrError *err);
/* Writes the file at path: the missing directories made first (mode 0700), the bytes into a new
 * file beside it, then renamed over path, so a reader sees the old file or the new, whole.
 * ZR_E_IO naming the step that failed. */
int zr_lt_cache_write(const char *path, const ZrLtCacheKey *key, const ZrLtCacheEntry *e, int n, ZrError *err);

/* The checksum a file of len bytes ends with: of its first len - 8 bytes (the fuzz target forges
 * sound files with it to reach the entries). */
uint64_t zr_lt_cache_checksum(const void *buf, size_t len);
/* The entry of shape, or NULL. */
const ZrLtCacheEntry *zr_lt_cache_find(const ZrLtCache *c, const int64_t shape[ZR_LT_CACHE_SHAPE_WORDS]);
/* fresh[n_fresh] first, then old's entries of other shapes, at most ZR_LT_CACHE_MAX in all
 * (an old entry of fresh's shape is one the check refused: replaced) -> *out (sorted). */
int zr_lt_cache_merge(const ZrLtCache *old, const ZrLtCacheEntry *fresh, int n_fresh, ZrLtCache *out, ZrError *err);
void zr_lt_cache_free(ZrLtCache *c);
