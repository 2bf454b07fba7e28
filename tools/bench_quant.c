/* bench_quant: times a dim x dim matrix-vector product through zr_dot_row for each weight
 * type and prints GB/s of weight bytes read; then the same rows through zr_dequant_row alone
 * (into a small row buffer: what a dequantize-then-dot caller pays before its own dot).
 *   bench_quant [dim] [repeats] [type ...]      e.g. bench_quant 4096 20 q4_0 q8_0 f16 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "quant.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint32_t rng_next(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*s >> 33);
}

/* roughly N(0, 1): sum of four uniforms, centred and scaled */
static float rng_normal(uint64_t *s) {
    float u = 0;
    for (int i = 0; i < 4; i++) u += (float)rng_next(s) / 2147483648.0f;
    return (u - 2.0f) * 1.7320508f;
}

static int bench_type(uint32_t type, int64_t dim, int reps) {
    const ZrTypeInfo *t = zr_type_info(type);
    size_t rb = zr_row_bytes(type, dim);
    uint8_t *w = malloc(rb * (size_t)dim); /* (dim, dim) weights, rows of rb bytes */
    float *src = malloc(sizeof(float) * (size_t)dim);
    float *x = malloc(sizeof(float) * (size_t)dim); /* (dim) */
    float *y = malloc(sizeof(float) * (size_t)dim); /* (dim) */
    if (!w || !src || !x || !y) {
        fprintf(stderr, "bench_quant: out of memory\n");
        return 1;
    }
    uint64_t s = 1234;
    for (int64_t r = 0; r < dim; r++) {
        for (int64_t i = 0; i < dim; i++) src[i] = 0.05f * rng_normal(&s);
        zr_quantize_row(type, src, w + (size_t)r * rb, dim);
    }
    for (int64_t i = 0; i < dim; i++) x[i] = rng_normal(&s);
    double best = 1e30, check = 0;
    for (int k = 0; k < reps + 1; k++) {
        double t0 = now_s();
        for (int64_t r = 0; r < dim; r++) y[r] = zr_dot_row(type, w + (size_t)r * rb, x, dim);
        double dt = now_s() - t0;
        if (k > 0 && dt < best) best = dt; /* first pass warms caches and page tables */
        check = y[dim / 2];
    }
    double best_deq = 1e30;
    for (int k = 0; k < reps + 1; k++) {
        double t0 = now_s();
        for (int64_t r = 0; r < dim; r++) zr_dequant_row(type, w + (size_t)r * rb, src, dim);
        double dt = now_s() - t0;
        if (k > 0 && dt < best_deq) best_deq = dt;
    }
    double bytes = (double)rb * (double)dim;
    printf("%-6s %5lld x %-5lld %8.1f MB  dot %8.3f ms %6.2f GB/s %6.2f Gelem/s   dequant %6.2f GB/s %6.2f Gelem/s"
           "  (y[%lld] = %.4f)\n",
           t->name, (long long)dim, (long long)dim, bytes / 1e6, best * 1e3, bytes / best / 1e9,
           (double)dim * (double)dim / best / 1e9, bytes / best_deq / 1e9, (double)dim * (double)dim / best_deq / 1e9,
           (long long)(dim / 2), check);
    free(w);
    free(src);
    free(x);
    free(y);
    return 0;
}

int main(int argc, char **argv) {
    int64_t dim = argc > 1 ? atoll(argv[1]) : 4096;
    int reps = argc > 2 ? atoi(argv[2]) : 10;
    if (dim <= 0 || dim % 256 != 0 || reps <= 0) {
        fprintf(stderr, "usage: bench_quant [dim (multiple of 256)] [repeats] [type ...]\n");
        return 2;
    }
    const char *all[] = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1",
                         "q2_K", "q3_K", "q4_K", "q5_K", "q6_K"};
    int n = argc > 3 ? argc - 3 : (int)(sizeof all / sizeof all[0]);
    for (int i = 0; i < n; i++) {
        const char *name = argc > 3 ? argv[3 + i] : all[i];
        uint32_t type = ZR_TYPE_COUNT;
        for (uint32_t id = 0; id < ZR_TYPE_COUNT; id++)
            if (zr_type_info(id) && strcmp(zr_type_name(id), name) == 0) type = id;
        if (type == ZR_TYPE_COUNT || !zr_type_info(type)->compute) {
            fprintf(stderr, "bench_quant: unknown or non-compute type '%s'\n", name);
            return 2;
        }
        if (bench_type(type, dim, reps)) return 1;
    }
    return 0;
}
