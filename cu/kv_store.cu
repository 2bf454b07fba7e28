// KV-cache write: copies M rows of K and V (kv_dim floats each, row i at k + i*src_stride) into
// one layer's caches [n_ctx, kv_dim] at rows pos[0] + i (position read from device memory).
// grid (ceil(kv_dim / 256), M), block 256.
#include "common.cuh"

ZR_KERNEL void __launch_bounds__(256)
    kv_store_f32(const float *__restrict__ k, const float *__restrict__ v, int src_stride, float *__restrict__ kc,
                 float *__restrict__ vc, int kv_dim, const int *__restrict__ pos) {
    const int d = blockIdx.x * blockDim.x + threadIdx.x;
    if (d >= kv_dim) return;
    const size_t dst = (size_t)(pos[0] + (int)blockIdx.y) * kv_dim + d;
    const size_t src = (size_t)blockIdx.y * src_stride + d;
    kc[dst] = k[src];
    vc[dst] = v[src];
}
