/* The CPU backend's operations, one function each, F32 in and out. They are the reference the
 * GPU kernels are compared with, so they favour the plain formula (with llama.cpp's choices
 * where they change the numbers) over speed. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

/* sum_i a[i] * b[i] */
float zr_cpu_dot(const float *a, const float *b, int64_t n);
/* y[n] = x[n] / sqrt(mean(x^2) + eps) * w[n]; y may equal x. */
void zr_cpu_rmsnorm(float *y, const float *x, const float *w, int n, float eps);
/* Rotates the first rope_dim values of each of n_heads vectors of head_dim values (v is
 * [n_heads][head_dim]) for position pos: pair i turns by pos * freq_scale * theta^(-2i/rope_dim)
 * / freq_factors[i] (freq_factors NULL = 1). NeoX pairs are (i, i + rope_dim/2), otherwise
 * adjacent (2i, 2i+1). */
void zr_cpu_rope(float *v, int n_heads, int head_dim, int rope_dim, int pos, float theta, float freq_scale,
                 const float *freq_factors, bool neox);
/* x[n] = softmax(x * scale), in place. */
void zr_cpu_softmax(float *x, int n, float scale);
/* h[n] = silu(gate[n]) * up[n]; h may equal gate. */
void zr_cpu_swiglu(float *h, const float *gate, const float *up, int64_t n);
/* x[n] *= scale */
void zr_cpu_scale(float *x, float scale, int64_t n);
/* x[n] = cap * tanh(x / cap): logit soft-capping, as llama.cpp computes it (x * (1/cap), tanh,
 * * cap, each rounded to F32). */
void zr_cpu_softcap(float *x, float cap, int64_t n);
/* y[n] += x[n] */
void zr_cpu_add(float *y, const float *x, int64_t n);
