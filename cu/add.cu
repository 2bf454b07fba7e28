// Element-wise adds for the prefill path (decode fuses them into the matrix-vector epilogue):
// add_rows_f32: y[i][j] += b[j] (Qwen2 q/k/v bias; M rows of n at y + i*stride);
// add_f32: y[i] += a[i] (residual). grid (ceil(n/256), M), block 256.
#include "common.cuh"

ZR_KERNEL void __launch_bounds__(256) add_rows_f32(float *y, int stride, const float *__restrict__ b, int n) {
    zr_grid_enter();
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j < n) y[(size_t)blockIdx.y * stride + j] += b[j];
}

ZR_KERNEL void __launch_bounds__(256) add_f32(float *y, const float *__restrict__ a, int n) {
    zr_grid_enter();
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)n) y[i] += a[i];
}
