// Mixture-of-experts routing and mixing (issue 15), the CPU reference's zr_cpu_moe_route and
// weighted sum (src/cpu/moe.c: llama.cpp's build_moe_ffn with softmax gating, renormalized
// weights) on the device, so the decode step needs no host round trip.
#include "moe_topk.cuh"

// moe_route_f32: per row r (blockIdx.x) of logits [rows][n_expert]: zr_moe_topk into ids[r][k],
// weights[r][k]. One warp per row; n_expert <= 1024, k <= n_expert.
ZR_KERNEL void __launch_bounds__(32)
    moe_route_f32(const float *__restrict__ logits, int n_expert, int k, int *__restrict__ ids,
                  float *__restrict__ weights) {
    zr_grid_enter();
    const size_t r = blockIdx.x;
    zr_moe_topk(logits + r * n_expert, n_expert, k, ids + r * k, weights + r * k);
}
// moe_combine_f32: x[r][i] += sum over j < k (in order) of weights[r][j] * out[r][j][i], each
// product rounded before its add (ggml_mul, then ggml_add of the views). grid (ceil(n/256),
// rows), block 256; out [rows][k][n], x [rows][n].
ZR_KERNEL void __launch_bounds__(256)
    moe_combine_f32(const float *__restrict__ out, const float *__restrict__ weights, int k, float *x, int n) {
    zr_grid_enter();
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const size_t r = blockIdx.y;
    const float *o = out + r * k * (size_t)n, *w = weights + r * k;
    float acc = __fmul_rn(o[i], w[0]);
    for (int j = 1; j < k; j++) acc = __fadd_rn(acc, __fmul_rn(o[(size_t)j * n + i], w[j]));
    x[r * n + i] += acc;
}

// moe_gather_f32: out[i][0..n) = x[idx[i]][0..n) for i < rows (one expert's tokens, gathered for
// its GEMMs). grid (ceil(n/256), rows), block 256.
ZR_KERNEL void __launch_bounds__(256)
    moe_gather_f32(const float *__restrict__ x, const int *__restrict__ idx, float *__restrict__ out, int n) {
    zr_grid_enter();
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[(size_t)blockIdx.y * n + i] = x[(size_t)idx[blockIdx.y] * n + i];
}

// moe_scatter_f32: out[slot[i]][0..n) = src[i][0..n) for i < rows (an expert's outputs put back
// into their tokens' slots: slot = token * n_used + j; slot < 0: a padding row, not copied).
// grid (ceil(n/256), rows), block 256.
ZR_KERNEL void __launch_bounds__(256)
    moe_scatter_f32(const float *__restrict__ src, const int *__restrict__ slot, float *__restrict__ out, int n) {
    zr_grid_enter();
    const int i = blockIdx.x * blockDim.x + threadIdx.x, s = slot[blockIdx.y];
    if (i >= n || s < 0) return;
    out[(size_t)s * n + i] = src[(size_t)blockIdx.y * n + i];
}
