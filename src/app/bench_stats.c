/* zrun bench: median and spread of the repetitions, the logits hash, argmax. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

ZrBenchStats zr_bench_stats(const double *v, int n) {
    ZrBenchStats s = {0};
    if (n < 1) return s;
    double *sorted = malloc(sizeof *sorted * (size_t)n); /* [n] */
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += v[i];
    s.mean = sum / n;
    double q = 0.0;
    for (int i = 0; i < n; i++) q += (v[i] - s.mean) * (v[i] - s.mean);
    s.sd = n > 1 ? sqrt(q / (n - 1)) : 0.0;
    if (!sorted) { /* median of a handful of doubles without memory: the mean stands in */
        s.median = s.min = s.max = s.mean;
        return s;
    }
    memcpy(sorted, v, sizeof *sorted * (size_t)n);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
    s.min = sorted[0];
    s.max = sorted[n - 1];
    s.median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    free(sorted);
    return s;
}

uint64_t zr_bench_fnv1a64(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* A float's bits as an int32 that orders like the float (negative values' magnitude bits
 * flipped), so the maximum is an integer max the compiler vectorizes. */
static inline int32_t order_key(float f) {
    int32_t b;
    memcpy(&b, &f, sizeof b);
    return b ^ ((b >> 31) & 0x7fffffff);
}

/* The argmax is inside every timed decode step, so it is vectorized: the maximum key of each
 * block of ARGMAX_BLOCK values, then a scalar search only inside the first block that holds it;
 * built for AVX2 too on x86-64 (integer work: both clones give the same answer). 128256 logits
 * took ~8 us instead of ~45 us (two scalar passes) on a 2-core EPYC VM. */
/* clang 14 leaves a target_clones function that another file calls undefined at link time
 * (undefined reference to zr_bench_argmax): multiversioning needs clang 15 or later. */
#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__) && (!defined(__clang__) || __clang_major__ >= 15)
#define ZR_BENCH_HOT __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define ZR_BENCH_HOT
#endif
#define ARGMAX_BLOCK 256
ZR_BENCH_HOT int zr_bench_argmax(const float *v, int n) {
    int32_t m = INT32_MIN;
    int first = 0; /* start of the first block holding m */
    for (int b = 0; b < n; b += ARGMAX_BLOCK) {
        const int e = n - b < ARGMAX_BLOCK ? n : b + ARGMAX_BLOCK;
        int32_t bm = INT32_MIN;
        for (int i = b; i < e; i++) {
            const int32_t k = order_key(v[i]);
            bm = k > bm ? k : bm;
        }
        if (bm > m) {
            m = bm;
            first = b;
        }
    }
    for (int i = first; i < n; i++)
        if (order_key(v[i]) == m) return i;
    return 0;
}
