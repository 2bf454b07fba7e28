// SwiGLU: out[i][j] = silu(gate[i][j]) * up[i][j] for M rows of n_ff, where the gate and up
// halves sit side by side in one row of gu (gate at gu + i*stride, up at gate + n_ff).
// out row i at out + i*n_ff. grid (ceil(n_ff/256), M), block 256.
#include "common.cuh"

ZR_KERNEL void __launch_bounds__(256)
    swiglu_f32(const float *__restrict__ gu, int stride, float *__restrict__ out, int n_ff) {
    zr_grid_enter();
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n_ff) return;
    const float *g = gu + (size_t)blockIdx.y * stride;
    const float a = g[j];
    out[(size_t)blockIdx.y * n_ff + j] = a / (1.0f + expf(-a)) * g[n_ff + j];
}
