// The prefill's elementwise kernels that feed a GEMM, writing its F16 operand directly: the
// same F32 arithmetic as rmsnorm_f32 / swiglu_f32 followed by convert_f32_f16 (so the same
// bits), without the F32 round trip through memory and the extra launch.
//
// rmsnorm_f32_f16: y[i][j] = half(x[i][j] / sqrt(mean(x[i]^2) + eps) * w[j]), n values per row,
//   row i from x + i*x_stride to y + i*y_stride. grid (1, M), block 256.
// swiglu_f32_f16: y[i][j] = half(silu(gate[i][j]) * up[i][j]), gate at gu + i*stride, up at
//   gate + n_ff; y row i at y + i*n_ff. grid (ceil(n_ff/256), M), block 256.
#include "common.cuh"

ZR_KERNEL void __launch_bounds__(256)
    rmsnorm_f32_f16(const float *__restrict__ x, int x_stride, const float *__restrict__ w, __half *__restrict__ y,
                    int y_stride, int n, float eps) {
    zr_grid_enter();
    __shared__ float red[32];
    const float *xp = x + (size_t)blockIdx.y * x_stride;
    __half *yp = y + (size_t)blockIdx.y * y_stride;
    float ss = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) ss = fmaf(xp[i], xp[i], ss);
    ss = zr_warp_sum(ss);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    if (lane == 0) red[warp] = ss;
    __syncthreads();
    if (warp == 0) {
        float v = lane < nw ? red[lane] : 0.f;
        v = zr_warp_sum(v);
        if (lane == 0) red[0] = v;
    }
    __syncthreads();
    const float scale = 1.0f / sqrtf(red[0] / (float)n + eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x) yp[i] = __float2half_rn(xp[i] * scale * w[i]);
}

ZR_KERNEL void __launch_bounds__(256)
    swiglu_f32_f16(const float *__restrict__ gu, int stride, __half *__restrict__ y, int n_ff) {
    zr_grid_enter();
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n_ff) return;
    const float *g = gu + (size_t)blockIdx.y * stride;
    const float a = g[j];
    y[(size_t)blockIdx.y * n_ff + j] = __float2half_rn(a / (1.0f + expf(-a)) * g[n_ff + j]);
}
