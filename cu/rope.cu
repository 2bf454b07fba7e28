// Rotary position embedding, in place, for M rows of `n_heads` heads of `head_dim` values
// (row i at x + i*row_stride; Q and K heads side by side in the QKV buffer are rotated in one
// launch). Row i is at position pos[0] + i, read from device memory so a recorded decode step
// stays valid for every token. Pairs (2j, 2j+1) for normal rope, (j, j + rope_dim/2) for NeoX;
// angle = p * base^(-2j/rope_dim) / freq_factors[j] (factors optional, Llama 3.1); values past
// rope_dim are left alone. grid (ceil(n_heads*rope_dim/2 / 128), M), block 128.
#include "common.cuh"

ZR_KERNEL void __launch_bounds__(128)
    rope_f32(float *x, int row_stride, int n_heads, int head_dim, int rope_dim, int neox, float log2_base,
             const float *__restrict__ freq_factors, const int *__restrict__ pos) {
    const int half = rope_dim / 2;
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_heads * half) return;
    const int h = t / half, j = t % half;
    const float p = (float)(pos[0] + (int)blockIdx.y);
    float freq = exp2f(-(float)(2 * j) / (float)rope_dim * log2_base);
    if (freq_factors) freq /= freq_factors[j];
    float s, c;
    sincosf(p * freq, &s, &c);
    float *v = x + (size_t)blockIdx.y * row_stride + (size_t)h * head_dim;
    const int i0 = neox ? j : 2 * j, i1 = neox ? j + half : 2 * j + 1;
    const float a = v[i0], b = v[i1];
    v[i0] = a * c - b * s;
    v[i1] = a * s + b * c;
}
