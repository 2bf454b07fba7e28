// RMSNorm: y = x / sqrt(mean(x^2) + eps) * w, over pieces of n values.
// grid (pieces per row, rows); piece p of row i starts at x + i*x_stride + p*n (same for y).
// The model norm is grid (1, M); Qwen3's per-head q/k norm is grid (n_heads, M) with n =
// head_dim. y may equal x (in place). Block: 256 threads.
#include "common.cuh"

ZR_KERNEL void __launch_bounds__(256)
    rmsnorm_f32(const float *x, int x_stride, const float *__restrict__ w, float *y, int y_stride, int n, float eps) {
    zr_grid_enter();
    __shared__ float red[32];
    const float *xp = x + (size_t)blockIdx.y * x_stride + (size_t)blockIdx.x * n;
    float *yp = y + (size_t)blockIdx.y * y_stride + (size_t)blockIdx.x * n;
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
    for (int i = threadIdx.x; i < n; i += blockDim.x) yp[i] = xp[i] * scale * w[i];
}
