// A norm after a block (gemma's post-attention / post-FFN norm, issue 14) and the residual add:
// y[i] += x[i] / sqrt(mean(x[i]^2) + eps) * w for rows of n values (x and y rows contiguous,
// x != y). grid (1, M), block 256.
#include "common.cuh"

ZR_KERNEL void __launch_bounds__(256)
    rmsnorm_add_f32(const float *__restrict__ x, const float *__restrict__ w, float *__restrict__ y, int n, float eps) {
    zr_grid_enter();
    __shared__ float red[32];
    const float *xp = x + (size_t)blockIdx.y * n;
    float *yp = y + (size_t)blockIdx.y * n;
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
    for (int i = threadIdx.x; i < n; i += blockDim.x) yp[i] += xp[i] * scale * w[i];
}
