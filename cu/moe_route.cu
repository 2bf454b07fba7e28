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

// moe_group_i32: the prefill's slots grouped by expert for moe_mm (cu/moe_mm.cu), on the device so
// the prefill needs no host round trip. ids [nk]: slot s (token s / k, its choice s % k) chose
// expert ids[s] < n_expert. Writes idx[row] = the token and slot[row] = s of a compact layout,
// expert e's rows right after expert e - 1's (within an expert in any order: moe_mm's value of
// a row does not depend on where it sits in its tile), and tiles [tiles_max][4] = (e, first row,
// rows <= bn, 0) for every bn rows of each expert, in expert order, then (-1, 0, 0, 0) up to
// tiles_max (moe_mm's blocks of those exit). One block of 1024 threads; n_expert <= 1024;
// tiles_max >= nk / bn + n_expert (the host's bound).
ZR_KERNEL void __launch_bounds__(1024)
    moe_group_i32(const int *__restrict__ ids, int nk, int k, int n_expert, int bn, int *__restrict__ idx,
                  int *__restrict__ slot, int4 *__restrict__ tiles, int tiles_max) {
    zr_grid_enter();
    __shared__ int cnt[1024], next[1024], n_tiles;
    const int tid = threadIdx.x;
    for (int e = tid; e < n_expert; e += 1024) cnt[e] = 0;
    __syncthreads();
    for (int s = tid; s < nk; s += 1024) atomicAdd(&cnt[ids[s]], 1);
    __syncthreads();
    if (tid == 0) { // a few hundred experts and tiles: one thread, in order
        int row = 0, t = 0;
        for (int e = 0; e < n_expert; e++) {
            next[e] = row;
            for (int i = 0; i < cnt[e]; i += bn) tiles[t++] = make_int4(e, row + i, min(bn, cnt[e] - i), 0);
            row += cnt[e];
        }
        n_tiles = t;
    }
    __syncthreads();
    for (int t = n_tiles + tid; t < tiles_max; t += 1024) tiles[t] = make_int4(-1, 0, 0, 0);
    for (int s = tid; s < nk; s += 1024) {
        const int at = atomicAdd(&next[ids[s]], 1);
        idx[at] = s / k;
        slot[at] = s;
    }
}
