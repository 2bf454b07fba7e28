// Mixture-of-experts routing and mixing (issue 15), the CPU reference's zr_cpu_moe_route and
// weighted sum (src/cpu/moe.c: llama.cpp's build_moe_ffn with softmax gating, renormalized
// weights) on the device, so the decode step needs no host round trip.
#include "common.cuh"

#define ZR_MOE_MAX_EXPERTS 1024 // src/model.c MAX_EXPERTS

// moe_route_f32: per row r (blockIdx.x) of logits [rows][n_expert]: p = softmax(logits), the k
// largest p (equal ones: the lower id first) into ids[r][k] (largest first), their p divided by
// max(their sum, 2^-14) into weights[r][k]. One warp per row; n_expert <= 1024, k <= n_expert.
ZR_KERNEL void __launch_bounds__(32)
    moe_route_f32(const float *__restrict__ logits, int n_expert, int k, int *__restrict__ ids,
                  float *__restrict__ weights) {
    __shared__ unsigned char taken[ZR_MOE_MAX_EXPERTS];
    __shared__ float chosen[ZR_MOE_MAX_EXPERTS];
    zr_grid_enter();
    const int lane = threadIdx.x;
    const float *l = logits + (size_t)blockIdx.x * n_expert;
    float m = -INFINITY;
    for (int e = lane; e < n_expert; e += 32) {
        m = fmaxf(m, l[e]);
        taken[e] = 0;
    }
    m = zr_warp_max(m);
    float s = 0.f;
    for (int e = lane; e < n_expert; e += 32) s += expf(l[e] - m);
    const float inv = 1.0f / zr_warp_sum(s);
    __syncwarp();
    for (int j = 0; j < k; j++) {
        float best = -1.f;
        int be = n_expert;
        for (int e = lane; e < n_expert; e += 32) {
            const float p = expf(l[e] - m) * inv;
            if (!taken[e] && (p > best || (p == best && e < be))) best = p, be = e;
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float ob = __shfl_xor_sync(0xffffffffu, best, o);
            const int oe = __shfl_xor_sync(0xffffffffu, be, o);
            if (ob > best || (ob == best && oe < be)) best = ob, be = oe;
        }
        if (be >= n_expert) be = 0; // NaN logits choose nothing: expert 0, never past the table (the logits check reports them)
        if (lane == 0) {
            taken[be] = 1;
            chosen[j] = best;
            ids[(size_t)blockIdx.x * k + j] = be;
        }
        __syncwarp();
    }
    if (lane == 0) {
        float sum = 0.f; // in order, as ggml_sum_rows and the reference
        for (int j = 0; j < k; j++) sum += chosen[j];
        sum = fmaxf(sum, 6.103515625e-5f);
        for (int j = 0; j < k; j++) weights[(size_t)blockIdx.x * k + j] = chosen[j] / sum;
    }
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
// into their tokens' slots: slot = token * n_used + j). grid (ceil(n/256), rows), block 256.
ZR_KERNEL void __launch_bounds__(256)
    moe_scatter_f32(const float *__restrict__ src, const int *__restrict__ slot, float *__restrict__ out, int n) {
    zr_grid_enter();
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[(size_t)slot[blockIdx.y] * n + i] = src[(size_t)blockIdx.y * n + i];
}
