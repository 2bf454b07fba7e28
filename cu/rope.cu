// Rotary position embedding, in place, for M rows of `n_heads` heads of `head_dim` values
// (row i at x + i*row_stride; Q and K heads side by side in the QKV buffer are rotated in one
// launch). Row i is at position pos[0] + i, read from device memory so a recorded decode step
// stays valid for every token. Pairs (2j, 2j+1) for normal rope, (j, j + rope_dim/2) for NeoX;
// angle = p * freq[j], with freq[j] = freq_scale * base^(-2j/rope_dim) / freq_factors[j]
// computed once on the host in double (as the CPU reference does); values past rope_dim are
// left alone. grid (ceil(n_heads*rope_dim/2 / 128), M), block 128.
#include "common.cuh"

ZR_KERNEL void __launch_bounds__(128)
    rope_f32(float *x, int row_stride, int n_heads, int head_dim, int rope_dim, int neox,
             const double *__restrict__ freq, const int *__restrict__ pos) {
    const int half = rope_dim / 2;
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_heads * half) return;
    const int h = t / half, j = t % half;
    // reduce the angle in double first: float sin/cos of a large float angle would lose
    // ~angle * 6e-8 radians; after the reduction the error is float rounding alone
    const double angle = (double)(pos[0] + (int)blockIdx.y) * freq[j];
    const double two_pi = 6.283185307179586;
    const double red = angle - two_pi * rint(angle / two_pi);
    float s, c;
    sincosf((float)red, &s, &c);
    float *v = x + (size_t)blockIdx.y * row_stride + (size_t)h * head_dim;
    const int i0 = neox ? j : 2 * j, i1 = neox ? j + half : 2 * j + 1;
    const float a = v[i0], b = v[i1];
    v[i0] = a * c - b * s;
    v[i1] = a * s + b * c;
}
