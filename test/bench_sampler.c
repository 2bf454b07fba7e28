/* Benchmark, not a test (`meson test -C build --benchmark sampler_128k`): milliseconds per token
 * of the sampling chain on a 128k vocabulary (llama 3), with the defaults (top-k 40) and with
 * top-p alone. Exits 1 above generous bounds (a loaded 2-core machine): 2 ms a token with the
 * defaults, 20 ms with top-p alone; 77 where timings mean nothing (sanitizers, no optimization). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sampler.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ms per token of `reps` draws from `logits` (a copy each: the chain sorts in place) */
static double time_sampling(const ZrSamplerParams *p, const float *logits, float *buf, int n_vocab, int reps) {
    ZrError err;
    ZrSampler *s = zr_sampler_create(p, n_vocab, &err);
    if (!s) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    for (int i = 0; i < 64; i++) zr_sampler_accept(s, i * 97);
    double t0 = now_ms();
    for (int r = 0; r < reps; r++) {
        memcpy(buf, logits, (size_t)n_vocab * sizeof *buf);
        zr_sampler_sample(s, buf);
    }
    double ms = (now_ms() - t0) / reps;
    zr_sampler_free(s);
    return ms;
}

int main(void) {
#if defined(__SANITIZE_ADDRESS__) || !defined(__OPTIMIZE__)
    fprintf(stderr, "skip: timings need an optimized build without sanitizers\n");
    return 77;
#endif
    enum { NV = 128256, REPS = 50 };
    float *l = malloc(NV * sizeof *l), *buf = malloc(NV * sizeof *buf);
    if (!l || !buf) return 1;
    uint32_t x = 1;
    for (int i = 0; i < NV; i++) {
        x = x * 1664525u + 1013904223u;
        l[i] = (float)((x >> 8) & 0xffff) / 2048.0f - 16.0f;
    }
    ZrSamplerParams defaults = zr_sampler_defaults(), top_p = zr_sampler_defaults();
    defaults.repeat_penalty = top_p.repeat_penalty = 1.1f;
    top_p.top_k = 0;
    top_p.min_p = 0.0f;
    const double ms_defaults = time_sampling(&defaults, l, buf, NV, REPS);
    const double ms_top_p = time_sampling(&top_p, l, buf, NV, REPS);
    free(l);
    free(buf);
    printf("sampling, 128k vocabulary: %.3f ms/token with the defaults (top-k 40), %.3f ms/token with top-p only\n",
           ms_defaults, ms_top_p);
    if (ms_defaults < 2.0 && ms_top_p < 20.0) return 0;
    fprintf(stderr, "slower than the bounds: 2 ms/token with the defaults, 20 ms/token with top-p only\n");
    return 1;
}
