// rope_scale_f32: the rope attention factor (rope.scaling.attn_factor: phi3's LongRoPE) where it
// cannot be folded into the scores' scale because only part of each head rotates (Phi-4-mini):
// after rope_kv_f32, the rotated values (the first rope_dim of each head) of Q (in place, rows
// of qkv) and of the K rows that kernel wrote to the cache (row pos[0] + i) are multiplied by
// factor, as ggml multiplies cos and sin by it (the CPU reference scales after rotating too).
// grid (ceil((n_head + n_kv) * rope_dim / 128), M), block 128.
#include "common.cuh"

ZR_KERNEL void __launch_bounds__(128)
    rope_scale_f32(float *qkv, int row_stride, int n_head, int n_kv, int head_dim, int rope_dim, float factor,
                   const int *__restrict__ pos, float *kc) {
    zr_grid_enter();
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (n_head + n_kv) * rope_dim) return;
    const int h = t / rope_dim, d = t % rope_dim;
    if (h < n_head)
        qkv[(size_t)blockIdx.y * row_stride + (size_t)h * head_dim + d] *= factor;
    else
        kc[(size_t)(pos[0] + (int)blockIdx.y) * n_kv * head_dim + (size_t)(h - n_head) * head_dim + d] *= factor;
}
