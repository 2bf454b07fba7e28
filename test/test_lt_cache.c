/* The cuBLASLt plan cache's file (src/cuda/lt_cache.h), on the CPU: what is written reads back
 * the same; a file cut short, with a byte flipped anywhere, of another key (library, driver,
 * GPU, compute capability, SM count), of an absurd entry count, empty, or that is a directory
 * or a FIFO, is refused with a message and never blocks; writing makes the missing directories
 * and replaces a bad file whole. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cuda/lt_cache.h"
#include "zt.h"

static ZrLtCacheKey key(void) {
    ZrLtCacheKey k = {.lt_version = 130000, .cuda_driver = 13000, .cc_major = 9, .cc_minor = 0, .sm_count = 132};
    snprintf(k.gpu, sizeof k.gpu, "NVIDIA H100 80GB HBM3");
    return k;
}

/* n distinct entries: shape words and algorithm words from i. */
static ZrLtCacheEntry *entries(int n) {
    ZrLtCacheEntry *e = calloc((size_t)n ? (size_t)n : 1, sizeof *e);
    for (int i = 0; i < n; i++) {
        for (int w = 0; w < ZR_LT_CACHE_SHAPE_WORDS; w++) e[i].shape[w] = (int64_t)(i * 31 + w) - 7;
        for (int w = 0; w < ZR_LT_CACHE_ALGO_WORDS; w++) e[i].algo[w] = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1) + (uint64_t)w;
    }
    return e;
}

/* A file's bytes to damage: n entries (entries(n)) formatted with key k = key(). */
typedef struct Formatted {
    ZrLtCacheKey k;
    ZrLtCacheEntry *e;
    void *buf;
    size_t len;
} Formatted;

static bool formatted(Formatted *f, int n) {
    *f = (Formatted){.k = key(), .e = entries(n)};
    ZrError err = {0};
    if (!zr_lt_cache_format(&f->k, f->e, n, &f->buf, &f->len, &err)) return true;
    fprintf(stderr, "  zr_lt_cache_format: %s\n", err.msg);
    return false;
}

static void formatted_free(Formatted *f) {
    free(f->buf);
    free(f->e);
}

static char *path_in_tmp(const char *name) {
    static char p[8][4200];
    static int k;
    char *s = p[k++ % 8];
    snprintf(s, sizeof p[0], "%s/%s", zt_tmpdir(), name);
    return s;
}

ZT_TEST(a_written_cache_reads_back_the_same_entries) {
    ZrLtCacheEntry *e = entries(25);
    const ZrLtCacheKey k = key();
    ZrError err = {0};
    const char *path = path_in_tmp("roundtrip.bin");
    ZT_CHECKF(!zr_lt_cache_write(path, &k, e, 25, &err), "%s", err.msg);
    ZrLtCache c;
    ZT_CHECKF(!zr_lt_cache_read(path, &k, &c, &err), "%s", err.msg);
    ZT_CHECK(c.n == 25);
    for (int i = 0; i < 25; i++) {
        const ZrLtCacheEntry *f = zr_lt_cache_find(&c, e[i].shape);
        ZT_CHECKF(f && !memcmp(f, &e[i], sizeof *f), "entry %d", i);
    }
    int64_t other[ZR_LT_CACHE_SHAPE_WORDS] = {1, 2, 3};
    ZT_CHECK(!zr_lt_cache_find(&c, other));
    zr_lt_cache_free(&c);
    free(e);
}

ZT_TEST(a_cache_of_no_entries_is_a_valid_file) {
    const ZrLtCacheKey k = key();
    ZrError err = {0};
    void *buf;
    size_t len;
    ZT_CHECK(!zr_lt_cache_format(&k, NULL, 0, &buf, &len, &err));
    ZrLtCache c;
    ZT_CHECKF(!zr_lt_cache_parse(buf, len, &k, &c, &err), "%s", err.msg);
    ZT_CHECK(c.n == 0 && !zr_lt_cache_find(&c, (int64_t[ZR_LT_CACHE_SHAPE_WORDS]){0}));
    free(buf);
}

ZT_TEST(every_cut_of_the_file_is_refused) {
    Formatted f;
    ZT_CHECK(formatted(&f, 3));
    ZrError err = {0};
    for (size_t cut = 0; cut < f.len; cut++) {
        ZrLtCache c = {0};
        ZT_CHECKF(zr_lt_cache_parse(f.buf, cut, &f.k, &c, &err) == ZR_E_FORMAT, "%zu of %zu bytes taken", cut, f.len);
        ZT_CHECK(c.n == 0 && c.e == NULL);
    }
    formatted_free(&f);
}

ZT_TEST(a_flipped_bit_anywhere_is_refused) {
    Formatted f;
    ZT_CHECK(formatted(&f, 3));
    ZrError err = {0};
    uint8_t *b = f.buf;
    for (size_t i = 0; i < f.len; i++)
        for (int bit = 0; bit < 8; bit += 3) {
            b[i] ^= (uint8_t)(1u << bit);
            ZrLtCache c = {0};
            const int rc = zr_lt_cache_parse(f.buf, f.len, &f.k, &c, &err);
            b[i] ^= (uint8_t)(1u << bit);
            ZT_CHECKF(rc == ZR_E_FORMAT && c.n == 0, "byte %zu bit %d: rc %d", i, bit, rc);
        }
    formatted_free(&f);
}

ZT_TEST(a_cache_of_another_library_driver_or_gpu_is_refused_by_name) {
    Formatted f;
    ZT_CHECK(formatted(&f, 2));
    ZrError err = {0};
    ZrLtCacheKey other[6];
    for (int i = 0; i < 6; i++) other[i] = f.k;
    other[0].lt_version = 120900;
    other[1].cuda_driver = 12080;
    other[2].cc_major = 10;
    other[3].cc_minor = 3;
    other[4].sm_count = 114;
    snprintf(other[5].gpu, sizeof other[5].gpu, "NVIDIA H200");
    for (int i = 0; i < 6; i++) {
        ZrLtCache c = {0};
        ZT_CHECKF(zr_lt_cache_parse(f.buf, f.len, &other[i], &c, &err) == ZR_E_UNSUPPORTED && c.n == 0, "key change %d", i);
        ZT_CHECKF(strstr(err.msg, "made for NVIDIA H100 80GB HBM3"), "%s", err.msg);
    }
    formatted_free(&f);
}

/* The header's count says more entries than the file holds or the format allows. */
ZT_TEST(an_absurd_entry_count_is_refused) {
    Formatted f;
    ZT_CHECK(formatted(&f, 1));
    ZrError err = {0};
    static const uint32_t counts[] = {0, 2, ZR_LT_CACHE_MAX + 1, 0x7fffffffu, 0xffffffffu};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        uint8_t *b = f.buf;
        for (int j = 0; j < 4; j++) b[12 + j] = (uint8_t)(counts[i] >> (8 * j));
        ZrLtCache c = {0};
        ZT_CHECKF(zr_lt_cache_parse(f.buf, f.len, &f.k, &c, &err) == ZR_E_FORMAT && c.n == 0, "count %u", counts[i]);
    }
    ZrLtCacheEntry *many = entries(ZR_LT_CACHE_MAX + 1);
    void *big;
    size_t big_len;
    ZT_CHECK(zr_lt_cache_format(&f.k, many, ZR_LT_CACHE_MAX + 1, &big, &big_len, &err) != ZR_OK);
    free(many);
    formatted_free(&f);
}

ZT_TEST(a_repeated_shape_is_refused) {
    ZrLtCacheEntry *e = entries(3);
    e[2] = e[0];
    e[2].algo[0] ^= 1;
    const ZrLtCacheKey k = key();
    ZrError err = {0};
    void *buf;
    size_t len;
    ZT_CHECK(!zr_lt_cache_format(&k, e, 3, &buf, &len, &err));
    ZrLtCache c = {0};
    ZT_CHECK(zr_lt_cache_parse(buf, len, &k, &c, &err) == ZR_E_FORMAT && c.n == 0);
    free(buf);
    free(e);
}

ZT_TEST(an_empty_missing_or_foreign_file_is_refused) {
    const ZrLtCacheKey k = key();
    ZrError err = {0};
    ZrLtCache c = {0};
    const char *empty = path_in_tmp("empty.bin");
    FILE *f = fopen(empty, "wb");
    ZT_CHECK(f);
    fclose(f);
    ZT_CHECK(zr_lt_cache_read(empty, &k, &c, &err) == ZR_E_FORMAT && c.n == 0);
    ZT_CHECK(zr_lt_cache_read(path_in_tmp("missing.bin"), &k, &c, &err) == ZR_E_IO && c.n == 0);
    ZT_CHECKF(strstr(err.msg, "none yet"), "%s", err.msg);
    const char *text = path_in_tmp("text.bin");
    f = fopen(text, "wb");
    ZT_CHECK(f);
    for (int i = 0; i < 100; i++) fputs("not a plan cache at all\n", f);
    fclose(f);
    ZT_CHECK(zr_lt_cache_read(text, &k, &c, &err) == ZR_E_FORMAT && c.n == 0);
    ZT_CHECKF(strstr(err.msg, "magic") || strstr(err.msg, "bytes"), "%s", err.msg);
}

/* A file larger than a full cache is refused by its size, unread. */
ZT_TEST(a_file_larger_than_a_full_cache_is_refused_unread) {
    const ZrLtCacheKey k = key();
    ZrError err = {0};
    ZrLtCache c = {0};
    const char *big = path_in_tmp("big.bin");
    const int fd = open(big, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    ZT_CHECK(fd >= 0);
    ZT_CHECK(ftruncate(fd, (off_t)1 << 40) == 0); /* a sparse terabyte */
    close(fd);
    ZT_CHECK(zr_lt_cache_read(big, &k, &c, &err) == ZR_E_FORMAT && c.n == 0);
    unlink(big);
}

ZT_TEST(a_directory_or_fifo_given_as_the_cache_is_refused_without_blocking) {
    const ZrLtCacheKey k = key();
    ZrError err = {0};
    ZrLtCache c = {0};
    const char *dir = path_in_tmp("a_dir.bin");
    ZT_CHECK(mkdir(dir, 0700) == 0 || errno == EEXIST);
    ZT_CHECK(zr_lt_cache_read(dir, &k, &c, &err) != ZR_OK && c.n == 0);
    ZT_CHECKF(strstr(err.msg, "not a regular file"), "%s", err.msg);
    ZrLtCacheEntry *e = entries(1);
    ZT_CHECK(zr_lt_cache_write(dir, &k, e, 1, &err) == ZR_E_IO); /* a directory is not replaced */
    const char *fifo = path_in_tmp("a_fifo.bin");
    unlink(fifo);
    ZT_CHECK(mkfifo(fifo, 0600) == 0);
    ZT_CHECK(zr_lt_cache_read(fifo, &k, &c, &err) != ZR_OK && c.n == 0); /* no writer: must not wait for one */
    ZT_CHECKF(strstr(err.msg, "not a regular file"), "%s", err.msg);
    unlink(fifo);
    free(e);
}

ZT_TEST(writing_makes_the_missing_directories_and_replaces_a_damaged_file) {
    const ZrLtCacheKey k = key();
    ZrError err = {0};
    char path[4300];
    snprintf(path, sizeof path, "%s/deep/er/zrun/cublaslt-plans.bin", zt_tmpdir());
    ZrLtCacheEntry *e = entries(4);
    ZT_CHECKF(!zr_lt_cache_write(path, &k, e, 4, &err), "%s", err.msg);
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/deep/er/zrun", zt_tmpdir());
    struct stat sb;
    ZT_CHECK(stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode) && (sb.st_mode & 0777) == 0700);
    /* damaged: refused, then written over whole */
    FILE *f = fopen(path, "r+b");
    ZT_CHECK(f);
    fseek(f, 100, SEEK_SET);
    fputc('#', f);
    fclose(f);
    ZrLtCache c = {0};
    ZT_CHECK(zr_lt_cache_read(path, &k, &c, &err) == ZR_E_FORMAT);
    ZT_CHECKF(!zr_lt_cache_write(path, &k, e, 2, &err), "%s", err.msg);
    ZT_CHECKF(!zr_lt_cache_read(path, &k, &c, &err) && c.n == 2, "%s", err.msg);
    zr_lt_cache_free(&c);
    free(e);
}

ZT_TEST(a_merge_keeps_the_new_algorithm_of_a_shape_and_the_old_of_others_up_to_the_cap) {
    ZrLtCacheEntry *e = entries(6);
    const ZrLtCacheKey k = key();
    ZrError err = {0};
    void *buf;
    size_t len;
    ZT_CHECK(!zr_lt_cache_format(&k, e, 4, &buf, &len, &err)); /* old: 0..3 */
    ZrLtCache old;
    ZT_CHECK(!zr_lt_cache_parse(buf, len, &k, &old, &err));
    ZrLtCacheEntry fresh[3] = {e[1], e[4], e[5]};
    fresh[0].algo[3] = 42; /* shape 1's algorithm changed (the old one failed its check) */
    ZrLtCache m;
    ZT_CHECK(!zr_lt_cache_merge(&old, fresh, 3, &m, &err));
    ZT_CHECK(m.n == 6);
    ZT_CHECK(zr_lt_cache_find(&m, e[1].shape)->algo[3] == 42);
    for (int i = 0; i < 6; i++)
        if (i != 1) ZT_CHECK(!memcmp(zr_lt_cache_find(&m, e[i].shape), &e[i], sizeof e[i]));
    zr_lt_cache_free(&m);
    /* at the cap, the fresh entries stay and old ones make way */
    ZrLtCacheEntry *many = entries(ZR_LT_CACHE_MAX + 10);
    ZrLtCache full = {many + 10, ZR_LT_CACHE_MAX};
    ZT_CHECK(!zr_lt_cache_merge(&full, many, 10, &m, &err));
    ZT_CHECK(m.n == ZR_LT_CACHE_MAX);
    for (int i = 0; i < 10; i++) ZT_CHECK(zr_lt_cache_find(&m, many[i].shape));
    zr_lt_cache_free(&m);
    free(many);
    zr_lt_cache_free(&old);
    free(buf);
    free(e);
}

int main(void) { return zt_run(); }
