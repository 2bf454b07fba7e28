// Decode attention (M = 1) of one layer in one launch: rope of q and k, the KV-cache write of
// the current position, split-sequence attention (flash-decoding chunks) and the merge of the
// chunks. Replaces rope_kv_f32 + attn_part_f32 + attn_combine_f32 for the decode step (the
// prefill keeps those).
//
// attn_decode_f32: grid (n_kv, n_chunks), block ZR_AD_THREADS. Block (kvh, c) serves the
//   G = n_head/n_kv query heads of KV head kvh (GQA: each K/V row is read once per group, not
//   once per query head) over cache rows [c*chunk, min((c+1)*chunk, pos+1)); chunks past the
//   sequence exit at once. pos = pos[0] is read from device memory, so one recorded launch is
//   valid at every position.
//   - qkv [q_dim | kv_dim | kv_dim]: the decode row before rope (q_dim = n_head*head_dim,
//     kv_dim = n_kv*head_dim); read only. Each block rotates its G query heads itself
//     (rope.cuh, the arithmetic of rope_kv_f32, so the bits match).
//   - kc, vc [n_ctx][kv_dim]: the layer's caches. The block whose chunk holds pos (the last
//     live one) takes the new K (rotated in-block) and V rows from qkv rather than the cache,
//     and is the only block that writes cache row pos; the others read rows < pos only.
//   - part: partials of the live chunks when there are more than one: o [n_head][n_chunks]
//     [head_dim] (unnormalized), then (max, sum) [n_head][n_chunks][2].
//   - count [n_kv] i32: zero before the launch and after it. A block that wrote its partials
//     increments count[kvh] (after a __threadfence); the block that sees live-1 is the last of
//     its group: it resets the counter to 0 and merges the partials in chunk order, so the
//     result does not depend on which block finished last (replay equals eager bit for bit).
//   - out [n_head*head_dim]: the attention output.
//   Needs head_dim % 4 == 0, head_dim <= 128, G <= ZR_AD_MAX_G and the dynamic shared memory
//   of attn_decode_smem (src/cuda/forward.c), which is this file's carve-up below.
#include "common.cuh"
#include "rope.cuh"

#define ZR_AD_THREADS 128
#define ZR_AD_MAX_G 8
#define ZR_AD_UNROLL 8 // cache rows a thread loads before using any (per batch)
#define ZR_AD_PRE 4     // chunk partials the merge loads before using any

__device__ __forceinline__ float4 zr_ad_fma4(float w, float4 v, float4 a) {
    return make_float4(fmaf(w, v.x, a.x), fmaf(w, v.y, a.y), fmaf(w, v.z, a.z), fmaf(w, v.w, a.w));
}

// A batch of cache rows p0 + u*step (u < ZR_AD_UNROLL): 16 bytes each at `rows` + p*stride;
// zero where p >= n_cached (rows past the chunk, and row pos, which comes from shared memory)
// or when the lane has no values (!ok).
__device__ __forceinline__ void zr_ad_rows(float4 (&r)[ZR_AD_UNROLL], const float *rows, int stride, int p0, int step,
                                           int n_cached, bool ok) {
#pragma unroll
    for (int u = 0; u < ZR_AD_UNROLL; u++) {
        const int p = p0 + u * step;
        r[u] = ok && p < n_cached ? *(const float4 *)(rows + (size_t)p * stride) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
}

// Row pos (the chunk's last row n - 1 in the block that holds it) from shared memory.
__device__ __forceinline__ void zr_ad_patch(float4 (&r)[ZR_AD_UNROLL], const float4 *row, int p0, int step, int last_row,
                                            bool ok) {
#pragma unroll
    for (int u = 0; u < ZR_AD_UNROLL; u++)
        if (ok && p0 + u * step == last_row) r[u] = *row;
}

// (128, 1): 135 registers and no spills (the row batches stay in registers); capped at 128 it spilled
ZR_KERNEL void __launch_bounds__(ZR_AD_THREADS, 1)
    attn_decode_f32(const float *__restrict__ qkv, float *__restrict__ kc, float *__restrict__ vc,
                    float *__restrict__ part, int *__restrict__ count, float *__restrict__ out,
                    const double *__restrict__ freq, const int *__restrict__ pos_p, int n_head, int n_kv,
                    int head_dim, int rope_dim, int neox, int chunk, int n_chunks, float scale) {
    // Before zr_grid_wait(): only the position (written by host copies before the step) and
    // cache rows < pos, which earlier decode steps or the prefill wrote. Under programmatic
    // dependent launch the kernel this one may overlap is the one just before it (the QKV
    // projection or the q/k norm), which writes neither, and every kernel before that one has
    // completed (each waits before it releases the next).
    const int kvh = blockIdx.x, c = blockIdx.y, t = threadIdx.x;
    const int pos = pos_p[0], seq = pos + 1, start = c * chunk;
    if (start >= seq) return;
    const int n = min(chunk, seq - start), live = (seq + chunk - 1) / chunk;
    const bool cur = c == live - 1; // holds row pos, as its last row n - 1
    const int n_cached = cur ? n - 1 : n, cur_row = cur ? n - 1 : -1;
    const int G = n_head / n_kv, hd = head_dim, hd4 = hd >> 2, half = rope_dim >> 1;
    const int kv_dim = n_kv * hd, q_dim = n_head * hd;
    // a K/V row is read by L lanes (16 bytes each, L a power of two >= hd/4), NG rows at a time
    int L = 1;
    while (L < hd4) L <<= 1;
    const int NG = ZR_AD_THREADS / L, grp = t / L, sub = t % L;
    const bool ok = sub < hd4;

    extern __shared__ float4 zr_ad_smem[];
    float *qs = (float *)zr_ad_smem; // [G][hd] rotated q * scale
    float *kn = qs + G * hd;         // [hd] rotated k of row pos (the chunk holding it)
    float *vn = kn + hd;             // [hd] v of row pos
    float *red = vn + hd;            // [NG][G][hd] P.V sums of the row groups
    float *sc = red + NG * G * hd;   // [G][chunk] scores, then softmax weights
    float *ml = sc + G * chunk;      // [G][2] max, sum of the weights
    __shared__ int last;

    // the first batch of K and V rows goes out before the wait and the rope, to overlap their
    // latency with the previous kernel's tail and the rope
    const size_t base = (size_t)start * kv_dim + (size_t)kvh * hd + 4 * sub; // row `start`, this lane's values
    float4 kr[ZR_AD_UNROLL], vr[ZR_AD_UNROLL];
    zr_ad_rows(kr, kc + base, kv_dim, grp, NG, n_cached, ok);
    zr_ad_rows(vr, vc + base, kv_dim, grp, NG, n_cached, ok);
    zr_grid_enter();

    // rope of the G query heads, and of the current K row in the block that holds it: value i
    // of those vectors by thread i % ZR_AD_THREADS (head_dim <= ZR_AD_THREADS), so a thread has
    // at most ZR_AD_MAX_G + 1 of them and loads them all before using any
    const int n_vals = (G + (cur ? 1 : 0)) * hd;
#pragma unroll
    for (int r = 0; r <= ZR_AD_MAX_G; r++) {
        const int i = t + r * ZR_AD_THREADS;
        if (i < n_vals) {
            const int v = i / hd, d = i % hd;
            const float *src = v < G ? qkv + (size_t)(kvh * G + v) * hd : qkv + q_dim + (size_t)kvh * hd;
            float val = src[d];
            if (d < rope_dim) {
                const int j = neox ? (d < half ? d : d - half) : d >> 1;
                const int i0 = neox ? j : 2 * j, i1 = neox ? j + half : 2 * j + 1;
                const float a = src[i0], b = src[i1];
                float co, si;
                zr_rope_cos_sin(pos, freq[j], &co, &si);
                val = d == i0 ? zr_rope_first(a, b, co, si) : zr_rope_second(a, b, co, si);
            }
            if (v < G) {
                qs[v * hd + d] = val * scale;
            } else { // exactly one block per KV head writes cache row pos
                kn[d] = val;
                kc[(size_t)pos * kv_dim + (size_t)kvh * hd + d] = val;
            }
        }
    }
    if (cur && t < hd) {
        const float val = qkv[q_dim + kv_dim + (size_t)kvh * hd + t];
        vn[t] = val;
        vc[(size_t)pos * kv_dim + (size_t)kvh * hd + t] = val;
    }
    __syncthreads();

    // scores: row p by row group p % NG; the loop bounds are the same for every thread (the
    // shuffles need whole warps), rows past n are zeros and store nothing
    const float4 *qs4 = (const float4 *)qs, *kn4 = (const float4 *)kn + sub, *vn4 = (const float4 *)vn + sub;
    const float4 zero4 = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int p0 = 0; p0 < n; p0 += ZR_AD_UNROLL * NG) {
        if (p0 > 0) zr_ad_rows(kr, kc + base, kv_dim, p0 + grp, NG, n_cached, ok);
        zr_ad_patch(kr, kn4, p0 + grp, NG, cur_row, ok);
#pragma unroll
        for (int g = 0; g < ZR_AD_MAX_G; g++) {
            if (g >= G) break;
            const float4 q4 = ok ? qs4[g * hd4 + sub] : zero4;
#pragma unroll
            for (int u = 0; u < ZR_AD_UNROLL; u++) {
                float s = fmaf(q4.x, kr[u].x, fmaf(q4.y, kr[u].y, fmaf(q4.z, kr[u].z, q4.w * kr[u].w)));
#pragma unroll
                for (int o = 16; o > 0; o >>= 1)
                    if (o < L) s += __shfl_xor_sync(0xffffffffu, s, o);
                const int p = p0 + u * NG + grp;
                if (sub == 0 && p < n) sc[g * chunk + p] = s;
            }
        }
    }
    __syncthreads();

    // softmax of each head's scores, a warp per head
    const int warp = t >> 5, lane = t & 31;
    for (int g = warp; g < G; g += ZR_AD_THREADS / 32) {
        float *s = sc + g * chunk;
        float mx = -INFINITY;
        for (int p = lane; p < n; p += 32) mx = fmaxf(mx, s[p]);
        mx = zr_warp_max(mx);
        float l = 0.f;
        for (int p = lane; p < n; p += 32) {
            const float e = expf(s[p] - mx);
            s[p] = e;
            l += e;
        }
        l = zr_warp_sum(l);
        if (lane == 0) {
            ml[2 * g] = mx;
            ml[2 * g + 1] = l;
        }
    }
    __syncthreads();

    // P.V: thread (grp, sub) sums rows grp, grp + NG, ... of its 4 values for every head
    float4 acc[ZR_AD_MAX_G];
#pragma unroll
    for (int g = 0; g < ZR_AD_MAX_G; g++) acc[g] = zero4;
    if (ok) {
        for (int p0 = grp; p0 < n; p0 += ZR_AD_UNROLL * NG) {
            if (p0 > grp) zr_ad_rows(vr, vc + base, kv_dim, p0, NG, n_cached, true);
            zr_ad_patch(vr, vn4, p0, NG, cur_row, true);
#pragma unroll
            for (int g = 0; g < ZR_AD_MAX_G; g++) {
                if (g >= G) break;
#pragma unroll
                for (int u = 0; u < ZR_AD_UNROLL; u++) {
                    const int p = p0 + u * NG;
                    if (p < n) acc[g] = zr_ad_fma4(sc[g * chunk + p], vr[u], acc[g]);
                }
            }
        }
#pragma unroll
        for (int g = 0; g < ZR_AD_MAX_G; g++)
            if (g < G) ((float4 *)red)[(grp * G + g) * hd4 + sub] = acc[g];
    }
    __syncthreads();

    // this chunk's (unnormalized) output: the row groups added in a fixed order
    float *po = part, *pml = part + (size_t)n_head * n_chunks * hd;
    for (int i = t; i < G * hd4; i += ZR_AD_THREADS) {
        const int g = i / hd4, d4 = i % hd4, h = kvh * G + g;
        float4 o = zero4;
        for (int k = 0; k < NG; k++) {
            const float4 r = ((const float4 *)red)[(k * G + g) * hd4 + d4];
            o.x += r.x, o.y += r.y, o.z += r.z, o.w += r.w;
        }
        if (live == 1) { // the only chunk: no partials, no merge
            const float inv = 1.0f / ml[2 * g + 1];
            *(float4 *)(out + (size_t)h * hd + 4 * d4) = make_float4(o.x * inv, o.y * inv, o.z * inv, o.w * inv);
        } else {
            *(float4 *)(po + ((size_t)h * n_chunks + c) * hd + 4 * d4) = o;
        }
    }
    if (live == 1) return;
    if (t < G) {
        float *m = pml + ((size_t)(kvh * G + t) * n_chunks + c) * 2;
        m[0] = ml[2 * t];
        m[1] = ml[2 * t + 1];
    }
    __threadfence(); // the partials are visible device-wide before the count says so
    __syncthreads();
    if (t == 0) last = atomicAdd(&count[kvh], 1) == live - 1;
    __syncthreads();
    if (!last) return;
    __threadfence(); // every other block's partials are visible to this one
    if (t == 0) count[kvh] = 0; // no other block of this launch touches it again

    // merge the live chunks in chunk order (the same arithmetic as attn_combine_f32); the
    // first ZR_AD_PRE chunks' values load together with the maxima (at tg128's positions that
    // is every chunk: one round trip)
    for (int i = t; i < G * hd4; i += ZR_AD_THREADS) {
        const int g = i / hd4, d4 = i % hd4, h = kvh * G + g;
        const float *hm = pml + (size_t)h * n_chunks * 2;
        const float4 *ho = (const float4 *)(po + (size_t)h * n_chunks * hd) + d4;
        float4 opre[ZR_AD_PRE];
        float mpre[ZR_AD_PRE], lpre[ZR_AD_PRE];
#pragma unroll
        for (int k = 0; k < ZR_AD_PRE; k++) {
            const bool in = k < live;
            opre[k] = in ? __ldcg(ho + (size_t)k * hd4) : zero4;
            mpre[k] = in ? __ldcg(hm + 2 * k) : -INFINITY;
            lpre[k] = in ? __ldcg(hm + 2 * k + 1) : 0.f;
        }
        float M = -INFINITY;
#pragma unroll
        for (int k = 0; k < ZR_AD_PRE; k++)
            if (k < live) M = fmaxf(M, mpre[k]);
        for (int k = ZR_AD_PRE; k < live; k++) M = fmaxf(M, __ldcg(hm + 2 * k));
        float Ls = 0.f;
        float4 o = zero4;
#pragma unroll
        for (int k = 0; k < ZR_AD_PRE; k++)
            if (k < live) {
                const float w = expf(mpre[k] - M);
                Ls = fmaf(w, lpre[k], Ls);
                o = zr_ad_fma4(w, opre[k], o);
            }
        for (int k = ZR_AD_PRE; k < live; k++) {
            const float w = expf(__ldcg(hm + 2 * k) - M);
            Ls = fmaf(w, __ldcg(hm + 2 * k + 1), Ls);
            o = zr_ad_fma4(w, __ldcg(ho + (size_t)k * hd4), o);
        }
        const float inv = 1.0f / Ls;
        *(float4 *)(out + (size_t)h * hd + 4 * d4) = make_float4(o.x * inv, o.y * inv, o.z * inv, o.w * inv);
    }
}
