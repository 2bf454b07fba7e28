// Rotary position embedding arithmetic shared by rope_kv_f32 (rope.cu) and the fused decode
// attention (attention_decode.cu), so both rotate a value to the same bits: every operation is
// spelled out (fma / __fmul_rn), leaving the compiler nothing to contract differently.
#pragma once

// cos and sin of the angle p * freq. The angle is reduced in double first (in units of pi, to
// [-1, 1]): float sin/cos of a large float angle would lose ~angle * 6e-8 radians; after the
// reduction the error is float rounding alone. sincospif has no slow path for large arguments
// (sincosf's needs local memory), so the kernels that inline this stay small.
__device__ __forceinline__ void zr_rope_cos_sin(int p, double freq, float *c, float *s) {
    const double x = __dmul_rn(__dmul_rn((double)p, freq), 0.318309886183790671537767526745); // angle / pi
    const double xr = fma(-2.0, rint(__dmul_rn(0.5, x)), x);
    sincospif((float)xr, s, c);
}

// The rope's pairs over the first rope_dim = 2 half values of a head: neox (gpt-neox style) pairs
// value j with j + half, otherwise (llama style) 2 j with 2 j + 1. Pair j's angle is p * freq[j].
// zr_rope_pair_of: the pair of value d < rope_dim; zr_rope_pair_values: pair j's two values.
__device__ __forceinline__ int zr_rope_pair_of(int d, int half, int neox) { return neox ? (d < half ? d : d - half) : d >> 1; }
__device__ __forceinline__ void zr_rope_pair_values(int j, int half, int neox, int *i0, int *i1) {
    *i0 = neox ? j : 2 * j;
    *i1 = neox ? j + half : 2 * j + 1;
}

// The pair (a, b) turned by the angle of (c, s): (a c - b s, a s + b c).
__device__ __forceinline__ float zr_rope_first(float a, float b, float c, float s) { return fmaf(a, c, -__fmul_rn(b, s)); }
__device__ __forceinline__ float zr_rope_second(float a, float b, float c, float s) { return fmaf(a, s, __fmul_rn(b, c)); }
