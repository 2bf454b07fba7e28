// Decode attention (M = 1) of one layer in one launch: rope of q and k, the KV-cache write of
// the current position, split-sequence attention (flash-decoding chunks) and the merge of the
// chunks. Replaces rope_kv_f32 + attn_part_f32 + attn_combine_f32 for the decode step (the
// prefill keeps those).
//
// attn_decode_f32: grid (n_head, n_chunks), block ZR_AD_THREADS (16 warps). Block (h, c) serves
//   query head h over cache rows [c*chunk, min((c+1)*chunk, pos+1)); chunks past the sequence
//   exit at once. At short contexts the work is a few dependent round trips, not bandwidth, so
//   the grid has a block per query head (not per KV head: the K/V rows of a group are read
//   G times, from L2) and a block's rows are spread over all its warps: at tg128's positions
//   every lane loads its K and V rows (at most ZR_AD_UNROLL each) in one batch before the wait,
//   and a chunk of 128 rows needs no merge at all. pos = pos[0] is read from device memory, so
//   one recorded launch is valid at every position.
//   - qkv [q_dim | kv_dim | kv_dim]: the decode row before rope (q_dim = n_head*head_dim,
//     kv_dim = n_kv*head_dim); read only. Each block rotates its query head itself (rope.cuh,
//     the arithmetic of rope_kv_f32, so the bits match).
//   - kc, vc [n_ctx][kv_dim]: the layer's caches. The blocks whose chunk holds pos (the last
//     live one) rotate the new K row themselves and take it and the V row from qkv rather than
//     the cache; of those, the block of the group's first query head (h % G == 0) is the only
//     one that writes cache row pos. Every block reads rows < pos only.
//   - part: partials of the live chunks when there are more than one: o [n_head][n_chunks]
//     [head_dim] (unnormalized), then (max, sum) [n_head][n_chunks][2].
//   - count [n_head] i32: zero before the launch and after it. A block that wrote its partials
//     increments count[h] (after a __threadfence); the block that sees live-1 is the last of
//     its head: it resets the counter to 0 and merges the partials in chunk order, so the
//     result does not depend on which block finished last (replay equals eager bit for bit).
//   - out [n_head*head_dim]: the attention output.
//   Within a block: a K/V row is read by L lanes (16 bytes each, L the power of two >= hd/4), so
//   a warp covers 32/L rows at a time; each warp keeps an online softmax (max, sum, P.V) of its
//   rows, and the warps are merged in warp order through shared memory (one barrier).
//   Needs head_dim % 4 == 0 and head_dim <= 128 (3 * head_dim <= ZR_AD_THREADS for the rope).
#include "common.cuh"
#include "rope.cuh"

#define ZR_AD_THREADS 512
#define ZR_AD_WARPS (ZR_AD_THREADS / 32)
#define ZR_AD_MAX_HD 128
#define ZR_AD_UNROLL 8 // cache rows a lane loads before using any (per batch)
#define ZR_AD_PRE 4    // chunk partials the merge loads before using any

__device__ __forceinline__ float4 zr_ad_fma4(float w, float4 v, float4 a) {
    return make_float4(fmaf(w, v.x, a.x), fmaf(w, v.y, a.y), fmaf(w, v.z, a.z), fmaf(w, v.w, a.w));
}

__device__ __forceinline__ float4 zr_ad_scale4(float w, float4 a) { return make_float4(w * a.x, w * a.y, w * a.z, w * a.w); }

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

// Row pos (the chunk's last row n - 1 in the blocks that hold it) from shared memory.
__device__ __forceinline__ void zr_ad_patch(float4 (&r)[ZR_AD_UNROLL], const float4 *row, int p0, int step, int last_row,
                                            bool ok) {
#pragma unroll
    for (int u = 0; u < ZR_AD_UNROLL; u++)
        if (ok && p0 + u * step == last_row) r[u] = *row;
}

// (512, 1): at most 128 registers; the two row batches (64) stay in registers
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
    const int h = blockIdx.x, c = blockIdx.y, t = threadIdx.x;
    const int pos = pos_p[0], seq = pos + 1, start = c * chunk;
    if (start >= seq) return;
    const int n = min(chunk, seq - start), live = (seq + chunk - 1) / chunk;
    const bool cur = c == live - 1; // holds row pos, as its last row n - 1
    const int n_cached = cur ? n - 1 : n, cur_row = cur ? n - 1 : -1;
    const int G = n_head / n_kv, kvh = h / G, hd = head_dim, hd4 = hd >> 2, half = rope_dim >> 1;
    const int kv_dim = n_kv * hd, q_dim = n_head * hd;
    int L = 1;
    while (L < hd4) L <<= 1;
    const int NG = ZR_AD_THREADS / L, grp = t / L, sub = t % L; // NG row groups of L lanes
    const bool ok = sub < hd4;
    const int warp = t >> 5, lane = t & 31, wg0 = warp * (32 / L); // the warp's first row group

    __shared__ float4 qs4[ZR_AD_MAX_HD / 4];                // rotated q * scale
    __shared__ float4 kn4[ZR_AD_MAX_HD / 4];                // rotated k of row pos (the chunk holding it)
    __shared__ float4 vn4[ZR_AD_MAX_HD / 4];                // v of row pos
    __shared__ float4 wo4[ZR_AD_WARPS][ZR_AD_MAX_HD / 4];   // per warp: P.V (unnormalized)
    __shared__ float wm[ZR_AD_WARPS], wl[ZR_AD_WARPS];      // per warp: max, sum of the weights
    __shared__ int last;
    float *qs = (float *)qs4, *kn = (float *)kn4, *vn = (float *)vn4;

    // the first batch of K and V rows goes out before the wait and the rope, to overlap their
    // latency with the previous kernel's tail and the rope
    const size_t base = (size_t)start * kv_dim + (size_t)kvh * hd + 4 * sub; // row `start`, this lane's values
    float4 kr[ZR_AD_UNROLL], vr[ZR_AD_UNROLL];
    zr_ad_rows(kr, kc + base, kv_dim, grp, NG, n_cached, ok);
    zr_ad_rows(vr, vc + base, kv_dim, grp, NG, n_cached, ok);
    zr_grid_enter();

    // value d of q (threads 0..hd-1), of the current K row (hd..2hd-1) and of the current V row
    // (2hd..3hd-1, the blocks that hold pos): one value per thread, all loads at once
    {
        const int v = t / hd, d = t - v * hd;
        if (v == 0 || (cur && v < 3)) {
            const float *src = v == 0 ? qkv + (size_t)h * hd : qkv + q_dim + (size_t)(v - 1) * kv_dim + (size_t)kvh * hd;
            float val = src[d];
            if (v < 2 && d < rope_dim) {
                const int j = neox ? (d < half ? d : d - half) : d >> 1;
                const int i0 = neox ? j : 2 * j, i1 = neox ? j + half : 2 * j + 1;
                const float a = src[i0], b = src[i1];
                float co, si;
                zr_rope_cos_sin(pos, freq[j], &co, &si);
                val = d == i0 ? zr_rope_first(a, b, co, si) : zr_rope_second(a, b, co, si);
            }
            const bool writer = h % G == 0; // exactly one block per KV head writes cache row pos
            if (v == 0) {
                qs[d] = val * scale;
            } else if (v == 1) {
                kn[d] = val;
                if (writer) kc[(size_t)pos * kv_dim + (size_t)kvh * hd + d] = val;
            } else {
                vn[d] = val;
                if (writer) vc[(size_t)pos * kv_dim + (size_t)kvh * hd + d] = val;
            }
        }
    }
    __syncthreads();

    // each lane: online softmax over rows grp, grp + NG, ... of the chunk; m is the warp's
    // running max (the same in every lane), l and acc the lane's row group's sums. The loop
    // bounds are the same for every thread (the shuffles need whole warps).
    const float4 zero4 = make_float4(0.f, 0.f, 0.f, 0.f);
    const float4 q4 = ok ? qs4[sub] : zero4;
    float m = -INFINITY, l = 0.f;
    float4 acc = zero4;
    for (int p0 = 0; p0 < n; p0 += ZR_AD_UNROLL * NG) {
        if (p0 > 0) {
            zr_ad_rows(kr, kc + base, kv_dim, p0 + grp, NG, n_cached, ok);
            zr_ad_rows(vr, vc + base, kv_dim, p0 + grp, NG, n_cached, ok);
        }
        zr_ad_patch(kr, kn4 + sub, p0 + grp, NG, cur_row, ok);
        zr_ad_patch(vr, vn4 + sub, p0 + grp, NG, cur_row, ok);
        // rows u of this batch exist for the warp while p0 + u*NG + its first row group < n
        // (warp-uniform: the shuffles of rows no lane of the warp has are skipped)
        float s[ZR_AD_UNROLL];
        float bm = -INFINITY;
#pragma unroll
        for (int u = 0; u < ZR_AD_UNROLL; u++) {
            s[u] = -INFINITY;
            if (p0 + u * NG + wg0 < n) {
                float d = fmaf(q4.x, kr[u].x, fmaf(q4.y, kr[u].y, fmaf(q4.z, kr[u].z, q4.w * kr[u].w)));
#pragma unroll
                for (int o = 16; o > 0; o >>= 1)
                    if (o < L) d += __shfl_xor_sync(0xffffffffu, d, o);
                if (p0 + u * NG + grp < n) s[u] = d;
            }
            bm = fmaxf(bm, s[u]);
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            if (o >= L) bm = fmaxf(bm, __shfl_xor_sync(0xffffffffu, bm, o));
        const float mn = fmaxf(m, bm);
        if (mn == -INFINITY) continue; // no row of this warp yet (warp-uniform)
        const float corr = expf(m - mn);
        l *= corr;
        acc = zr_ad_scale4(corr, acc);
#pragma unroll
        for (int u = 0; u < ZR_AD_UNROLL; u++)
            if (p0 + u * NG + wg0 < n) {
                const float w = expf(s[u] - mn);
                l += w;
                acc = zr_ad_fma4(w, vr[u], acc);
            }
        m = mn;
    }
    // the warp's row groups added (every lane then holds the warp's sums)
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        if (o >= L) {
            l += __shfl_xor_sync(0xffffffffu, l, o);
            acc.x += __shfl_xor_sync(0xffffffffu, acc.x, o);
            acc.y += __shfl_xor_sync(0xffffffffu, acc.y, o);
            acc.z += __shfl_xor_sync(0xffffffffu, acc.z, o);
            acc.w += __shfl_xor_sync(0xffffffffu, acc.w, o);
        }
    if (lane < L && ok) wo4[warp][sub] = acc;
    if (lane == 0) {
        wm[warp] = m;
        wl[warp] = l;
    }
    __syncthreads();

    // this chunk's (unnormalized) output: the warps merged in warp order by threads 0..hd4-1
    float *po = part, *pml = part + (size_t)n_head * n_chunks * hd;
    float M = -INFINITY, Lc = 0.f;
    float4 o = zero4;
    if (t < hd4) {
#pragma unroll
        for (int w = 0; w < ZR_AD_WARPS; w++) M = fmaxf(M, wm[w]);
#pragma unroll
        for (int w = 0; w < ZR_AD_WARPS; w++) {
            if (wm[w] == -INFINITY) continue; // a warp without rows
            const float e = expf(wm[w] - M);
            Lc = fmaf(e, wl[w], Lc);
            o = zr_ad_fma4(e, wo4[w][t], o);
        }
        if (live == 1) { // the only chunk: no partials, no merge
            const float inv = 1.0f / Lc;
            *(float4 *)(out + (size_t)h * hd + 4 * t) = zr_ad_scale4(inv, o);
        } else {
            *(float4 *)(po + ((size_t)h * n_chunks + c) * hd + 4 * t) = o;
            if (t == 0) {
                float *pm = pml + ((size_t)h * n_chunks + c) * 2;
                pm[0] = M;
                pm[1] = Lc;
            }
        }
    }
    if (live == 1) return;
    if (t < hd4) __threadfence(); // the partials are visible device-wide before the count says so
    __syncthreads();
    if (t == 0) last = atomicAdd(&count[h], 1) == live - 1;
    __syncthreads();
    if (!last || t >= hd4) return;
    __threadfence(); // every other block's partials are visible to this one
    if (t == 0) count[h] = 0; // no other block of this launch touches it again

    // merge the live chunks in chunk order (the same arithmetic as attn_combine_f32); the
    // first ZR_AD_PRE chunks' values load together with the maxima
    const float *hm = pml + (size_t)h * n_chunks * 2;
    const float4 *ho = (const float4 *)(po + (size_t)h * n_chunks * hd) + t;
    float4 opre[ZR_AD_PRE];
    float mpre[ZR_AD_PRE], lpre[ZR_AD_PRE];
#pragma unroll
    for (int k = 0; k < ZR_AD_PRE; k++) {
        const bool in = k < live;
        opre[k] = in ? __ldcg(ho + (size_t)k * hd4) : zero4;
        mpre[k] = in ? __ldcg(hm + 2 * k) : -INFINITY;
        lpre[k] = in ? __ldcg(hm + 2 * k + 1) : 0.f;
    }
    M = -INFINITY;
#pragma unroll
    for (int k = 0; k < ZR_AD_PRE; k++)
        if (k < live) M = fmaxf(M, mpre[k]);
    for (int k = ZR_AD_PRE; k < live; k++) M = fmaxf(M, __ldcg(hm + 2 * k));
    float Ls = 0.f;
    o = zero4;
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
    *(float4 *)(out + (size_t)h * hd + 4 * t) = zr_ad_scale4(1.0f / Ls, o);
}
