// rope_scale_f32: the rope attention factor (rope.scaling.attn_factor: phi3's LongRoPE) where it
// cannot be folded into the scores' scale because only part of each head rotates (Phi-4-mini):
// after rope_kv_f32, which rotated Q and K in place in qkv, the rotated values (the first
// rope_dim of each head) of Q (in place) and of K are multiplied by factor, as ggml multiplies
// cos and sin by it (the CPU reference scales after rotating too); K's go to the cache row
// pos[0] + i that rope_kv_f32 wrote, from qkv, so an F16 cache (rope_scale_f32_kvh, cu/kv.cuh)
// rounds the scaled value once. grid (ceil((n_head + n_kv) * rope_dim / 128), M), block 128.
#include "common.cuh"
#include "kv.cuh"

template <typename KV>
__device__ __forceinline__ void rope_scale(float *qkv, int row_stride, int n_head, int n_kv, int head_dim,
                                           int rope_dim, float factor, const int *__restrict__ pos, KV *kc) {
    zr_grid_enter();
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (n_head + n_kv) * rope_dim) return;
    const int h = t / rope_dim, d = t % rope_dim;
    float *x = qkv + (size_t)blockIdx.y * row_stride + (size_t)h * head_dim + d;
    if (h < n_head)
        *x *= factor;
    else
        ZrKv<KV>::put(kc + (size_t)(pos[0] + (int)blockIdx.y) * n_kv * head_dim + (size_t)(h - n_head) * head_dim + d,
                      *x * factor);
}

#define ZR_ROPE_SCALE_KERNEL(NAME, KV)                                                                                \
    ZR_KERNEL void __launch_bounds__(128) NAME(float *qkv, int row_stride, int n_head, int n_kv, int head_dim,       \
                                               int rope_dim, float factor, const int *__restrict__ pos, KV *kc) {     \
        rope_scale<KV>(qkv, row_stride, n_head, n_kv, head_dim, rope_dim, factor, pos, kc);                          \
    }

ZR_ROPE_SCALE_KERNEL(rope_scale_f32, float)
ZR_ROPE_SCALE_KERNEL(rope_scale_f32_kvh, __half)
