// F32 -> F16 for the prefill GEMM operand: M rows of n values, row i from x + i*x_stride to
// y + i*y_stride. grid (ceil(n/256), M), block 256.
#include "common.cuh"

ZR_KERNEL void __launch_bounds__(256)
    convert_f32_f16(const float *__restrict__ x, int x_stride, __half *__restrict__ y, int y_stride, int n) {
    zr_grid_enter();
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j < n) y[(size_t)blockIdx.y * y_stride + j] = __float2half_rn(x[(size_t)blockIdx.y * x_stride + j]);
}
