/* A tiny test harness: one behaviour per test function, named after it.
 *   ZT_TEST(parses_v3_header) { ZT_CHECK(x == 1); }
 *   int main(void) { return zt_run(); }       -- runs every registered test
 * Exit status: 0 all passed, 1 a failure, 77 skipped (zt_skip). */
#pragma once
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*zt_fn)(void);
struct zt_entry { const char *name; zt_fn fn; };
extern struct zt_entry zt_tests[];
extern int zt_ntests;
extern int zt_failed_flag;

#define ZT_MAX 512
#define ZT_TEST(name)                                                              \
    static void zt_##name(void);                                                   \
    __attribute__((constructor)) static void zt_reg_##name(void) {                 \
        if (zt_ntests < ZT_MAX) zt_tests[zt_ntests++] = (struct zt_entry){#name, zt_##name}; \
    }                                                                              \
    static void zt_##name(void)

#define ZT_CHECK(cond)                                                             \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(stderr, "  %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            zt_failed_flag = 1;                                                    \
            return;                                                                \
        }                                                                          \
    } while (0)

#define ZT_CHECKF(cond, ...)                                                       \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(stderr, "  %s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                          \
            fputc('\n', stderr);                                                   \
            zt_failed_flag = 1;                                                    \
            return;                                                                \
        }                                                                          \
    } while (0)

#define ZT_NEAR(a, b, tol) ZT_CHECKF(fabs((double)(a) - (double)(b)) <= (tol), "%.9g vs %.9g (tol %g)", (double)(a), (double)(b), (double)(tol))

/* The models, fixtures and goldens of ../shared (ZR_SHARED, which meson test sets, names
 * another place). zt_shared_model: the path of rel there, or NULL after marking the test
 * skipped with a message that names the missing file (the caller returns):
 *     const char *m = zt_shared_model("models/stories260K.gguf");
 *     if (!m) return;
 * zt_shared: the same lookup without the skip, for a file a test can do without. */
const char *zt_shared_model(const char *rel);
const char *zt_shared(const char *rel);
/* Marks the current test skipped (the caller then returns). The program exits 77 only
 * when every test skipped. */
void zt_skip(const char *why);
int zt_run(void);
/* Runs nothing: reports every registered test skipped, with why, and returns 77. For a program
 * whose tests all need something absent here (gpu_main). */
int zt_skip_all(const char *why);
/* Reads a whole file (malloc'ed); NULL if missing. */
void *zt_read_file(const char *path, size_t *len);
/* A scratch directory for this test program (under the build dir). */
const char *zt_tmpdir(void);
