// Test-only kernels for the decode-graph tests (test/gpu/test_graph.c): a toy decode step with
// a KV cache written at the position read from device memory. Tiny; embedded with the rest.
#include "common.cuh"

// io = int32 {token, pos}; kv f32 [n_ctx]: kv[pos] = f(token)
ZR_KERNEL void zr_selftest_embed(float *kv, const int32_t *io) {
    zr_grid_enter();
    if (blockIdx.x == 0 && threadIdx.x == 0) kv[io[1]] = (float)((io[0] * 31) % 97) * 0.01f + 0.5f;
}

__device__ __forceinline__ void zr_selftest_attend_at(float *logits, const float *kv, int pos, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0.0f;
    for (int j = 0; j <= pos; j++) acc += kv[j] * (float)(((i + 1) * (j + 3)) % 17);
    logits[i] = acc;
}

// logits f32 [n]: logits[i] = sum_{j<=pos} kv[j] * w(i, j), pos from device memory
ZR_KERNEL void zr_selftest_attend(float *logits, const float *kv, const int32_t *io, int n) {
    zr_grid_enter();
    zr_selftest_attend_at(logits, kv, io[1], n);
}

// the same with the position passed by value: a graph would replay a stale position
ZR_KERNEL void zr_selftest_attend_pv(float *logits, const float *kv, int pos, int n) {
    zr_grid_enter();
    zr_selftest_attend_at(logits, kv, pos, n);
}

// x f32 [n] *= s
ZR_KERNEL void zr_selftest_scale(float *x, float s, int n) {
    zr_grid_enter();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= s;
}

// One link of the programmatic-dependent-launch chain (test/gpu/test_graph_pdl.c), exact in
// uint32 arithmetic: y[i] = x[(i + stride) % n] * 3 + i + k (mod 2^32), 0 <= stride < n. Each thread reads an
// element another block of the previous link wrote, so a link that ran ahead of its
// predecessor's writes would read stale values.
__device__ __forceinline__ void zr_selftest_link_body(uint32_t *y, const uint32_t *x, int n, int stride, uint32_t k) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        int j = i + stride;
        if (j >= n) j -= n;
        y[i] = x[j] * 3u + (uint32_t)i + k;
    }
}

// x u32 [n] -> y u32 [n]
ZR_KERNEL void zr_selftest_link(uint32_t *y, const uint32_t *x, int n, int stride, uint32_t k) {
    zr_grid_enter();
    zr_selftest_link_body(y, x, n, stride, k);
}

// The same WITHOUT zr_grid_wait (only the release): the test's negative control, never used by
// zrun. Under programmatic edges it may read x before the previous link has written it; the
// test reports whether it did (the race a missing wait causes).
ZR_KERNEL void zr_selftest_link_nowait(uint32_t *y, const uint32_t *x, int n, int stride, uint32_t k) {
    zr_grid_release();
    zr_selftest_link_body(y, x, n, stride, k);
}
