// Rotary position embedding of Q and K with the KV-cache write fused in, for M rows of the QKV
// buffer (row i at qkv + i*row_stride: n_head query heads, n_kv key heads, n_kv value heads of
// head_dim values). Row i is at position pos[0] + i, read from device memory so a recorded
// decode step stays valid for every token. Pairs (2j, 2j+1) for normal rope, (j, j + rope_dim/2)
// for NeoX; angle = p * freq[j], freq[j] = freq_scale * base^(-2j/rope_dim) / freq_factors[j]
// computed once on the host in double (as the CPU reference does); values past rope_dim are
// not rotated. Q is rotated in place; K (rotated) and V go to the caches [n_ctx, n_kv*head_dim]
// at row pos[0] + i.
// Threads per row: (n_head + n_kv) * rope_dim/2 rotations, then n_kv*head_dim V copies, then
// n_kv*(head_dim - rope_dim) copies of K's unrotated tail. grid (ceil(total / 128), M), block 128.
// rope_kv_f32 writes an F32 cache, rope_kv_f32_kvh an F16 one (cu/kv.cuh; K rounded after its
// rotation, Q in qkv kept in F32).
#include "common.cuh"
#include "kv.cuh"
#include "rope.cuh"

template <typename KV>
__device__ __forceinline__ void rope_kv(float *qkv, int row_stride, int n_head, int n_kv, int head_dim, int rope_dim,
                                        int neox, const double *__restrict__ freq, const int *__restrict__ pos,
                                        KV *__restrict__ kc, KV *__restrict__ vc) {
    typedef ZrKv<KV> C;
    zr_grid_enter();
    const int half = rope_dim / 2, kv_dim = n_kv * head_dim, q_dim = n_head * head_dim;
    const int n_rot = (n_head + n_kv) * half, n_tail = n_kv * (head_dim - rope_dim);
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    const int p = pos[0] + (int)blockIdx.y;
    float *row = qkv + (size_t)blockIdx.y * row_stride;
    KV *kdst = kc + (size_t)p * kv_dim, *vdst = vc + (size_t)p * kv_dim;
    if (t < n_rot) {
        const int h = t / half, j = t % half;
        float s, c;
        zr_rope_cos_sin(p, freq[j], &c, &s);
        float *v = row + (size_t)h * head_dim;
        int i0, i1;
        zr_rope_pair_values(j, half, neox, &i0, &i1);
        const float a = v[i0], b = v[i1];
        const float ra = zr_rope_first(a, b, c, s), rb = zr_rope_second(a, b, c, s);
        v[i0] = ra;
        v[i1] = rb;
        if (h >= n_head) {
            const int kh = (h - n_head) * head_dim;
            C::put(kdst + kh + i0, ra);
            C::put(kdst + kh + i1, rb);
        }
        return;
    }
    t -= n_rot;
    if (t < kv_dim) {
        C::put(vdst + t, row[q_dim + kv_dim + t]);
        return;
    }
    t -= kv_dim;
    if (t < n_tail) {
        const int per = head_dim - rope_dim, kh = t / per, d = rope_dim + t % per;
        C::put(kdst + kh * head_dim + d, row[q_dim + kh * head_dim + d]);
    }
}

#define ZR_ROPE_KV_KERNEL(NAME, KV)                                                                                   \
    ZR_KERNEL void __launch_bounds__(128)                                                                             \
        NAME(float *qkv, int row_stride, int n_head, int n_kv, int head_dim, int rope_dim, int neox,                  \
             const double *__restrict__ freq, const int *__restrict__ pos, KV *__restrict__ kc, KV *__restrict__ vc) { \
        rope_kv<KV>(qkv, row_stride, n_head, n_kv, head_dim, rope_dim, neox, freq, pos, kc, vc);                      \
    }

ZR_ROPE_KV_KERNEL(rope_kv_f32, float)
ZR_ROPE_KV_KERNEL(rope_kv_f32_kvh, __half)
