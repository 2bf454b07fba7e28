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
    return b >= 0 ? b : b ^ 0x7fffffff;
}

int zr_bench_argmax(const float *v, int n) {
    if (n < 1) return 0;
    int32_t m = order_key(v[0]);
    for (int i = 1; i < n; i++) {
        const int32_t k = order_key(v[i]);
        m = k > m ? k : m;
    }
    for (int i = 0; i < n; i++)
        if (order_key(v[i]) == m) return i;
    return 0;
}
