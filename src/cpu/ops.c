#include "ops.h"

#include <math.h>

/* The dot product is the inner loop of every matrix product: built for AVX2 and for the
 * baseline on x86-64 gcc, picked at load time. Without fp-contract both clones round the same
 * way (multiply, then add, lane by lane), so the results do not depend on the machine. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define ZR_CPU_HOT __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define ZR_CPU_HOT
#endif

ZR_CPU_HOT float zr_cpu_dot(const float *a, const float *b, int64_t n) {
    /* eight independent sums: the compiler vectorizes this, and rounding error grows with
     * n/8 rather than n */
    float acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += a[i + j] * b[i + j];
    float tail = 0.0f;
    for (; i < n; i++) tail += a[i] * b[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

void zr_cpu_rmsnorm(float *y, const float *x, const float *w, int n, float eps) {
    double sum = 0.0; /* llama.cpp sums the squares in double too */
    for (int i = 0; i < n; i++) sum += (double)x[i] * x[i];
    float scale = 1.0f / sqrtf((float)(sum / n) + eps);
    for (int i = 0; i < n; i++) y[i] = x[i] * scale * w[i];
}

void zr_cpu_rope(float *v, int n_heads, int head_dim, int rope_dim, int pos, float theta, float freq_scale,
                 const float *freq_factors, bool neox) {
    const int half = rope_dim / 2;
    for (int i = 0; i < half; i++) {
        double freq = pow((double)theta, -2.0 * i / rope_dim);
        double angle = (double)pos * freq_scale * freq;
        if (freq_factors) angle /= freq_factors[i];
        const float c = (float)cos(angle), s = (float)sin(angle);
        const int i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
        for (int h = 0; h < n_heads; h++) {
            float *x = v + (int64_t)h * head_dim;
            const float a = x[i0], b = x[i1];
            x[i0] = a * c - b * s;
            x[i1] = a * s + b * c;
        }
    }
}

void zr_cpu_softmax(float *x, int n, float scale) {
    float max = -INFINITY;
    for (int i = 0; i < n; i++) {
        x[i] *= scale;
        if (x[i] > max) max = x[i];
    }
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int i = 0; i < n; i++) x[i] *= inv;
}

void zr_cpu_swiglu(float *h, const float *gate, const float *up, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float g = gate[i];
        h[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

void zr_cpu_add(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

void zr_cpu_scale(float *x, float scale, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] *= scale;
}

void zr_cpu_softcap(float *x, float cap, int64_t n) {
    const float inv = 1.0f / cap;
    for (int64_t i = 0; i < n; i++) x[i] = tanhf(x[i] * inv) * cap;
}
