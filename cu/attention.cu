// Attention over the KV cache, split over the sequence (flash-decoding style), for decode
// (M = 1) and causal prefill (M > 1) alike. Query row i (of M) is at position p = pos[0] + i and
// attends to cache rows max(0, p + 1 - window) .. p (window 0: all; gemma's sliding-window
// layers otherwise, llama.cpp's standard window); the position is read from device memory, so
// the same launch is valid for every decode step. With softcap > 0 each score s (q.k times
// scale) becomes tanh(s / softcap) * softcap before the softmax (gemma2; llama.cpp: scale by
// 1/cap, tanh, scale by cap). The cache keeps every position (masking, not a ring).
//
// attn_part_f32: grid (n_head, n_chunks, M), block 128, dynamic shared (head_dim + chunk +
//   128) floats. Block (h, c, i) handles the rows the query sees of [c*chunk, (c+1)*chunk) for
//   query head h (KV head h / (n_head/n_kv), GQA) and writes its partial (o[head_dim]
//   unnormalized, max m, sum l) to part[((i*n_head + h)*n_chunks + c) * (head_dim + 2)]. Chunks
//   past the sequence exit at once; a chunk wholly before the window writes an empty partial
//   (o = 0, max -inf, sum 0) that the merge weighs 0.
// attn_combine_f32: grid (n_head, M), block 128: merges the live chunks into
//   out[i*out_stride + h*head_dim + d].
// Caches: [n_ctx, n_kv*head_dim] per layer, F32 (attn_part_f32) or F16 (attn_part_f32_kvh;
// cu/kv.cuh). q row i at q + i*q_stride, head h at +h*head_dim.
#include "common.cuh"
#include "kv.cuh"

__device__ __forceinline__ float zr_block_reduce(float v, float *red, bool is_max) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = is_max ? zr_warp_max(v) : zr_warp_sum(v);
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float r = red[0];
    for (int k = 1; k < nw; k++) r = is_max ? fmaxf(r, red[k]) : r + red[k];
    return r;
}

template <typename KV>
__device__ __forceinline__ void attn_part(const float *__restrict__ q, int q_stride, const KV *__restrict__ kc,
                                          const KV *__restrict__ vc, float *__restrict__ part,
                                          const int *__restrict__ pos, int n_head, int n_kv, int head_dim, int chunk,
                                          int n_chunks, float scale, int window, float softcap) {
    typedef ZrKv<KV> C;
    zr_grid_enter();
    extern __shared__ float4 zr_attn_smem[];
    float *qs = (float *)zr_attn_smem; // [head_dim]
    float *sc = qs + head_dim;         // [chunk]
    float *red = sc + chunk;           // [128]
    const int h = blockIdx.x, c = blockIdx.y, i = blockIdx.z, t = threadIdx.x;
    const int seq = pos[0] + i + 1;
    const int start = c * chunk;
    if (start >= seq) return;
    const int first = window > 0 && seq > window ? seq - window : 0;
    const int lo = max(start, first), end = min(start + chunk, seq), n = end - lo;
    float *out = part + ((size_t)(i * n_head + h) * n_chunks + c) * (head_dim + 2);
    if (n <= 0) {
        for (int d = t; d < head_dim; d += blockDim.x) out[d] = 0.f;
        if (t == 0) {
            out[head_dim] = -INFINITY;
            out[head_dim + 1] = 0.f;
        }
        return;
    }
    const int kvh = h / (n_head / n_kv), kv_dim = n_kv * head_dim;
    const float *qp = q + (size_t)i * q_stride + (size_t)h * head_dim;
    for (int d = t; d < head_dim; d += blockDim.x) qs[d] = qp[d] * scale;
    __syncthreads();

    const float inv_cap = softcap > 0.f ? 1.0f / softcap : 0.f;
    float mx = -INFINITY;
    for (int p = t; p < n; p += blockDim.x) {
        const KV *kp = kc + (size_t)(lo + p) * kv_dim + (size_t)kvh * head_dim;
        float s = 0.f;
        if ((head_dim & 3) == 0) {
            for (int d = 0; d < head_dim; d += 4) {
                const float4 kv = C::wide(C::load4(kp + d));
                s = fmaf(qs[d], kv.x, s); s = fmaf(qs[d + 1], kv.y, s);
                s = fmaf(qs[d + 2], kv.z, s); s = fmaf(qs[d + 3], kv.w, s);
            }
        } else {
            for (int d = 0; d < head_dim; d++) s = fmaf(qs[d], C::get(kp + d), s);
        }
        sc[p] = s;
        mx = fmaxf(mx, s);
    }
    // each thread caps its own scores after the dot products (capping inside that loop made
    // ptxas spill); tanh is increasing, so the capped max is the max of the capped scores
    if (softcap > 0.f) {
        for (int p = t; p < n; p += blockDim.x) sc[p] = tanhf(sc[p] * inv_cap) * softcap;
        if (mx > -INFINITY) mx = tanhf(mx * inv_cap) * softcap;
    }
    mx = zr_block_reduce(mx, red, true);
    float l = 0.f;
    for (int p = t; p < n; p += blockDim.x) {
        const float e = expf(sc[p] - mx);
        sc[p] = e;
        l += e;
    }
    l = zr_block_reduce(l, red, false);  // its barriers also publish sc[]

    const KV *vbase = vc + (size_t)lo * kv_dim + (size_t)kvh * head_dim;
    if (head_dim <= (int)blockDim.x) {
        const int G = blockDim.x / head_dim, d = t % head_dim, g = t / head_dim;
        float acc = 0.f;
        if (g < G)
            for (int p = g; p < n; p += G) acc = fmaf(sc[p], C::get(vbase + (size_t)p * kv_dim + d), acc);
        __syncthreads();
        red[t] = acc;
        __syncthreads();
        if (t < head_dim) {
            float o = 0.f;
            for (int k = 0; k < G; k++) o += red[k * head_dim + t];
            out[t] = o;
        }
    } else {
        for (int d = t; d < head_dim; d += blockDim.x) {
            float acc = 0.f;
            for (int p = 0; p < n; p++) acc = fmaf(sc[p], C::get(vbase + (size_t)p * kv_dim + d), acc);
            out[d] = acc;
        }
    }
    if (t == 0) {
        out[head_dim] = mx;
        out[head_dim + 1] = l;
    }
}

#define ZR_ATTN_PART_KERNEL(NAME, KV)                                                                                 \
    ZR_KERNEL void __launch_bounds__(128)                                                                             \
        NAME(const float *__restrict__ q, int q_stride, const KV *__restrict__ kc, const KV *__restrict__ vc,         \
             float *__restrict__ part, const int *__restrict__ pos, int n_head, int n_kv, int head_dim, int chunk,    \
             int n_chunks, float scale, int window, float softcap) {                                                 \
        attn_part<KV>(q, q_stride, kc, vc, part, pos, n_head, n_kv, head_dim, chunk, n_chunks, scale, window,        \
                      softcap);                                                                                      \
    }

ZR_ATTN_PART_KERNEL(attn_part_f32, float)
ZR_ATTN_PART_KERNEL(attn_part_f32_kvh, __half)

ZR_KERNEL void __launch_bounds__(128)
    attn_combine_f32(const float *__restrict__ part, float *__restrict__ out, int out_stride,
                     const int *__restrict__ pos, int n_head, int head_dim, int chunk, int n_chunks) {
    zr_grid_enter();
    const int h = blockIdx.x, i = blockIdx.y;
    const int seq = pos[0] + i + 1;
    const int live = min((seq + chunk - 1) / chunk, n_chunks);
    const float *pp = part + (size_t)(i * n_head + h) * n_chunks * (head_dim + 2);
    float M = -INFINITY;
    for (int c = 0; c < live; c++) M = fmaxf(M, pp[(size_t)c * (head_dim + 2) + head_dim]);
    float L = 0.f;
    for (int c = 0; c < live; c++) {
        const float *pc = pp + (size_t)c * (head_dim + 2);
        L += expf(pc[head_dim] - M) * pc[head_dim + 1];
    }
    const float inv = 1.0f / L;
    for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
        float o = 0.f;
        for (int c = 0; c < live; c++) {
            const float *pc = pp + (size_t)c * (head_dim + 2);
            o = fmaf(expf(pc[head_dim] - M), pc[d], o);
        }
        out[(size_t)i * out_stride + (size_t)h * head_dim + d] = o * inv;
    }
}
