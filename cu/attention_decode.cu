// Decode attention (M = 1) of one layer in one launch: the q/k head norms (qwen3, gemma3), rope
// of q and k, the KV-cache write of the current position, split-sequence attention (flash-
// decoding chunks) over the whole cache or a sliding window of it (gemma2/gemma3's local
// layers), optionally with soft-capped scores (gemma2), and the merge of the chunks. Replaces
// rmsnorm_f32 (q/k norms) + rope_kv_f32 + attn_part_f32 + attn_combine_f32 for the decode step
// (the prefill keeps those).
//
// attn_decode_f32 (head_dim <= 128) / attn_decode_f32_d256 (head_dim <= 256, gemma's heads):
//   grid (n_head, n_split), block ZR_AD_THREADS (16 warps). Block (h, y) serves query head h and
//   the chunks c = c0 + y, c0 + y + n_split, ... that hold rows, in that order, each over cache
//   rows [max(c*chunk, first), min((c+1)*chunk, pos+1)), where first = pos+1-window for a window
//   (0 otherwise; c0 = first / chunk, the chunk of the first row): the query sees the last
//   `window` positions, llama.cpp's standard sliding window, and a local layer's blocks read
//   only its window however long the context. A block without a chunk exits at once. One
//   online softmax runs over all of a block's chunks, so a long context costs more rows a
//   block, not more blocks: the grid, sized by the host to one wave (src/cuda/attn.c), does not
//   grow with the context (a block per chunk of 256 rows took 186 us a layer at 16384 cached
//   positions of Llama-3-8B, 0.73 TB/s: 2080 blocks, one resident an SM, each paying its rope,
//   partials and merge; cu/PERF.md session 21).
//   At short contexts the work is a few dependent round trips, not bandwidth, so the grid has a
//   block per query head (not per KV head: the K/V rows of a group are read G times, from L2)
//   and a block's rows are spread over all its warps: at tg128's positions every lane loads its
//   K and V rows (at most ZR_AD_UNROLL / V each) in one batch before the wait, and a chunk of
//   128 rows needs no merge at all. pos = pos[0] is read from device memory, so one recorded
//   launch is valid at every position.
// attn_decode_f32_g2 / _g4: grid (n_head / QG, n_split), block (b, y) serving the group of QG = 2
//   or 4 query heads bQG .. bQG + QG - 1 of one KV head: each K/V row a lane loads serves QG dot
//   products and P.V sums, so a row crosses L2 once a group, not once a head. Past a long context
//   the single-head blocks are bound by L2 and by the rows an SM has in flight; at short ones the
//   groups' fewer blocks take their rows in more round trips, so the host switches kernels by
//   position (src/cuda/attn.c; cu/PERF.md session 22).
//   - qkv [q_dim | kv_dim | kv_dim]: the decode row before the head norms and rope (q_dim =
//     n_head*head_dim, kv_dim = n_kv*head_dim); read only. Each block normalizes (q_norm, k_norm
//     [head_dim], 0: none; eps) and rotates its query head itself (rope.cuh, the arithmetic of
//     rope_kv_f32, so without norms the bits match).
//   - kc, vc [n_ctx][kv_dim]: the layer's caches. The blocks one of whose chunks holds pos (the
//     last live one) normalize and rotate the new K row themselves and take it and the V row from
//     qkv rather than the cache; of those, the block of the group's first query head
//     (h % G == 0) is the only one that writes cache row pos. Every block reads rows < pos only.
//   - part: partials of the blocks when more than one holds rows: o [n_head][n_split]
//     [head_dim] (unnormalized), then (max, sum) [n_head][n_split][2].
//   - count [n_head] i32: zero before the launch and after it. A block that wrote its partials
//     increments count[h] (count[b] for groups; after a __threadfence); the block that sees
//     blocks-1 is the last of its head: it resets the counter to 0 and merges the partials (of
//     each of its heads) in block order, so the result does not depend on which block finished
//     last (replay equals eager bit for bit).
//   - out [n_head*head_dim]: the attention output.
//   - scale: the scores' scale (folded into q); softcap > 0: each score s becomes
//     tanh(s / softcap) * softcap before the softmax (llama.cpp: scale, then cap).
//   Within a block: a K/V row is read by L lanes (4 values each, V times: L the power of two >=
//   hd/(4V), at most 32; the F16 groups below: 8 halves, L >= hd/(8V)), so a warp covers 32/L
//   rows at a time; each warp keeps an online
//   softmax (max, sum, P.V) of its rows, and the warps are merged in warp order through shared
//   memory (one barrier). Needs head_dim % 4 == 0 and head_dim <= 128 V.
// Every kernel has an F16-cache twin named with _kvh (cu/kv.cuh): a lane keeps the halves it loads
// in the row batch and widens them where they are used; the current row (written to the cache
// rounded) is taken from shared memory rounded too. The single-head twins load 4 halves (8 bytes)
// where they loaded 4 floats; the grouped ones 8 halves (16 bytes) a lane, so a row takes half
// the lanes (one shuffle level less for each of the QG dots, the part of a lane's work that bound
// them; head_dim % 8 == 0; cu/PERF.md session 23).
#include "attn_decode.cuh"
#include "common.cuh"
#include "kv.cuh"
#include "rope.cuh"

#define ZR_AD_THREADS 512
#define ZR_AD_WARPS (ZR_AD_THREADS / 32)
#define ZR_AD_UNROLL 8 // 16-byte cache loads a lane issues before using any (per batch)
#define ZR_AD_PRE 4    // chunk partials the merge loads before using any

__device__ __forceinline__ float zr_ad_dot4(float4 q, float4 k) {
    return fmaf(q.x, k.x, fmaf(q.y, k.y, fmaf(q.z, k.z, q.w * k.w)));
}

// A lane's slot of a cache row: W groups of 4 values (W float4s once widened), as loaded: 4
// values (16 bytes of floats, 8 of halves), or with W = 2 8 halves (16 bytes).
template <typename KV, int W> struct ZrAdSlot {
    typedef typename ZrKv<KV>::Raw4 T;
    __device__ static __forceinline__ T load(const KV *p) { return ZrKv<KV>::load4(p); }
    __device__ static __forceinline__ float4 get(T r, int) { return ZrKv<KV>::wide(r); }
    __device__ static __forceinline__ T zero() { return ZrKv<KV>::zero4(); }
};
template <> struct ZrAdSlot<__half, 2> {
    typedef uint4 T;
    __device__ static __forceinline__ T load(const __half *p) { return *(const uint4 *)p; }
    __device__ static __forceinline__ float4 get(T r, int w) {
        return ZrKv<__half>::wide(w ? make_uint2(r.z, r.w) : make_uint2(r.x, r.y));
    }
    __device__ static __forceinline__ T zero() { return make_uint4(0u, 0u, 0u, 0u); }
};

// A batch of cache rows p0 + u*step (u < U): V slots each (slot sub + j*L of the row: values
// 4W(sub + j*L) ..) at `rows` + p*stride; zero where p >= n_cached (rows past the chunk, and row
// pos, which comes from shared memory) or past the head (n_slots slots a row).
template <int U, int V, int W, typename KV>
__device__ __forceinline__ void zr_ad_rows(typename ZrAdSlot<KV, W>::T (&r)[U][V], const KV *rows, int stride, int p0,
                                           int step, int n_cached, int sub, int L, int n_slots) {
#pragma unroll
    for (int u = 0; u < U; u++) {
        const int p = p0 + u * step;
#pragma unroll
        for (int j = 0; j < V; j++) {
            const int i = sub + j * L;
            r[u][j] = i < n_slots && p < n_cached ? ZrAdSlot<KV, W>::load(rows + (size_t)p * stride + 4 * W * i)
                                                  : ZrAdSlot<KV, W>::zero();
        }
    }
}

// Row pos (the chunk's last row n - 1 in the blocks that hold it) from shared memory, in slots
// as zr_ad_rows loads them.
template <int U, int V, typename R>
__device__ __forceinline__ void zr_ad_patch(R (&r)[U][V], const R *row, int p0, int step, int last_row, int sub, int L,
                                            int n_slots) {
#pragma unroll
    for (int u = 0; u < U; u++)
        if (p0 + u * step == last_row) {
#pragma unroll
            for (int j = 0; j < V; j++)
                if (sub + j * L < n_slots) r[u][j] = row[sub + j * L];
        }
}

// Value d of the pair-rotated row x (rope over its first rope_dim values; the rest as they
// are), the angle's (c, s) computed before (zr_rope_cos_sin of d's pair).
__device__ __forceinline__ float zr_ad_rope_cs(const float *x, int d, int rope_dim, int neox, float c, float s) {
    if (d >= rope_dim) return x[d];
    const int half = rope_dim >> 1;
    int i0, i1;
    zr_rope_pair_values(zr_rope_pair_of(d, half, neox), half, neox, &i0, &i1);
    return d == i0 ? zr_rope_first(x[i0], x[i1], c, s) : zr_rope_second(x[i0], x[i1], c, s);
}

// V float4s per lane: 1 for heads of up to 128 values, 2 up to 256 (the row batch halves so the
// batch's registers stay the same). QG query heads of one KV head a block (1, 2 or 4): each row
// a lane loads serves QG dot products and P.V sums, so a group's rows cross L2 once, not QG
// times; the row batch halves for QG > 1 (the QG queries' and sums' registers).
template <int V, int QG, typename KV>
__device__ __forceinline__ void zr_attn_decode(const float *__restrict__ qkv, KV *__restrict__ kc,
                                               KV *__restrict__ vc, float *__restrict__ part,
                                               int *__restrict__ count, float *__restrict__ out,
                                               const double *__restrict__ freq, const int *__restrict__ pos_p,
                                               const float *__restrict__ q_norm, const float *__restrict__ k_norm,
                                               int n_head, int n_kv, int head_dim, int rope_dim, int neox, int chunk,
                                               int n_split, float scale, float eps, int window, float softcap) {
    typedef ZrKv<KV> C;
    // an F16 cache's groups take slots of 8 halves a lane (W = 2: half the lanes a row, one
    // shuffle level less for each dot); everything else slots of 4 values
    constexpr int W = C::HALF && QG > 1 ? 2 : 1;
    typedef ZrAdSlot<KV, W> S;
    typedef typename S::T R;
    // (the F16 groups of 4 with W = 2 spill 24 bytes at U = 4; U = 3 spilled nothing and measured
    // slower: H200 8B after 16384 positions 305.4 against 292.8 t/s; cu/PERF.md session 23)
    constexpr int U = ZR_AD_UNROLL / V / (QG > 1 ? 2 : 1), MAX4 = 32 * V;
    // Before zr_grid_wait(): only the position (written by host copies before the step) and
    // cache rows < pos, which earlier decode steps or the prefill wrote. Under programmatic
    // dependent launch the kernel this one may overlap is the one just before it (the QKV
    // projection), which writes neither, and every kernel before that one has completed (each
    // waits before it releases the next).
    const int bx = blockIdx.x, y = blockIdx.y, t = threadIdx.x, h = bx * QG; // query heads h .. h + QG - 1
    // first, beside the position's load: what this thread's value of q (t < hd) or of the new K
    // row (hd <= t < 2 hd) needs that no kernel writes and that does not depend on the position,
    // its pair's frequency and norm weights (the first pass below takes value t of q|k|v, so
    // these are its q and k values at any head_dim <= 256). Requested after the position (and
    // its branch below) they were a second L2 round trip before the wait; issued with it, H200
    // tg128 +0.2 to +0.45% on Gemma-3-4B/12B and Llama-3.2-3B/3-8B (cu/PERF.md, session 38).
    const int tv = t / head_dim, td = t - tv * head_dim;
    const bool rot = tv < 2 && td < rope_dim;
    int ti0 = td, ti1 = td;
    double tf = 0.0;
    float tc = 1.f, ts = 0.f, tw0 = 0.f, tw1 = 0.f;
    if (rot) {
        const int half = rope_dim >> 1, j = zr_rope_pair_of(td, half, neox);
        zr_rope_pair_values(j, half, neox, &ti0, &ti1);
        tf = freq[j];
    }
    const float *tw = tv == 0 ? q_norm : tv == 1 ? k_norm : nullptr;
    if (tw) {
        tw0 = tw[ti0];
        tw1 = tw[ti1];
    }
    const int pos = pos_p[0], seq = pos + 1;
    const int first = window > 0 && seq > window ? seq - window : 0; // the first row the query sees
    const int c0 = first / chunk;                                     // the first live chunk
    const int live = (seq + chunk - 1) / chunk, n_live = live - c0;   // chunks c0 .. live - 1
    if (y >= n_live) return;
    const int blocks = min(n_split, n_live);  // the blocks that hold rows
    const int n_mine = (n_live - y + n_split - 1) / n_split; // this block's chunks
    const bool cur = (live - 1 - c0) % n_split == y;          // one of them holds row pos
    // the block's first chunk: its rows [lo, lo + n), n_cached of them in the cache (the last row
    // of the chunk that holds pos comes from shared memory: cur_row); the row loop below moves c,
    // n, n_cached, cur_row and base (row lo's offset) on to each next chunk
    int c = c0 + y, lo = max(c * chunk, first), n = min(c * chunk + chunk, seq) - lo;
    int n_cached = c == live - 1 ? n - 1 : n, cur_row = c == live - 1 ? n - 1 : -1;
    const int G = n_head / n_kv, kvh = h / G, hd = head_dim, hd4 = hd >> 2;
    const int kv_dim = n_kv * hd, q_dim = n_head * hd;
    const bool writer = h % G == 0; // exactly one block per KV head writes cache row pos
    const int n_slots = hd4 / W; // (W = 2: head_dim % 8 == 0, the host's rule)
    int L = 1;
    while (L * V < n_slots) L <<= 1;
    const int NG = ZR_AD_THREADS / L, grp = t / L, sub = t % L; // NG row groups of L lanes
    const int warp = t >> 5, lane = t & 31;

    __shared__ float4 qs4[QG][MAX4];              // rotated q * scale, per query head
    __shared__ float4 kn4[MAX4];                  // rotated k of row pos (the chunk holding it)
    __shared__ float4 vn4[MAX4];                  // v of row pos
    __shared__ float4 wo4[ZR_AD_WARPS][QG][MAX4]; // per warp and head: P.V (unnormalized)
    __shared__ float wm[ZR_AD_WARPS][QG], wl[ZR_AD_WARPS][QG]; // per warp and head: max, sum of the weights
    __shared__ float rinv[QG + 1];                             // 1/rms of the q heads and of k's row
    __shared__ int last;
    // an F16 cache: rows pos of K and V as the cache holds them (halves), for the row batches
    __shared__ __align__(16) __half knh[C::HALF ? 4 * MAX4 : 1], vnh[C::HALF ? 4 * MAX4 : 1];
    float *qs = (float *)qs4, *kn = (float *)kn4, *vn = (float *)vn4;
    const R *kpatch = C::HALF ? (const R *)knh : (const R *)kn4, *vpatch = C::HALF ? (const R *)vnh : (const R *)vn4;
    const size_t row_pos = (size_t)pos * kv_dim + (size_t)kvh * hd; // cache row pos of this KV head
    // value d of rows pos: k (kv 0) or v (1) into shared memory, rounded as cached, and into the
    // cache by the writer block
    auto keep = [&](int kv, int d, float val) {
        (kv ? vn : kn)[d] = val;
        if constexpr (C::HALF) (kv ? vnh : knh)[d] = __float2half_rn(val);
        if (writer) C::put((kv ? vc : kc) + row_pos + d, val);
    };

    // the first batch of K and V rows goes out before the wait and the rope, to overlap their
    // latency with the previous kernel's tail and the rope
    size_t base = (size_t)lo * kv_dim + (size_t)kvh * hd; // row `lo` of this KV head
    R kr[U][V], vr[U][V];
    zr_ad_rows<U, V, W, KV>(kr, kc + base, kv_dim, grp, NG, n_cached, sub, L, n_slots);
    zr_ad_rows<U, V, W, KV>(vr, vc + base, kv_dim, grp, NG, n_cached, sub, L, n_slots);
    // also before the wait: the pair's angle at pos
    if (rot) zr_rope_cos_sin(pos, tf, &tc, &ts);
    zr_grid_enter();

    const float *qsrc = qkv + (size_t)h * hd, *ksrc = qkv + q_dim + (size_t)kvh * hd, *vsrc = ksrc + kv_dim;
    if constexpr (QG == 1) {
        if (!q_norm && !k_norm) {
            // value d of q (i < hd), of the current K row (hd..2hd-1) and of the current V row
            // (2hd..3hd-1, the blocks that hold pos): all loads at once, rotated from qkv
            for (int i = t; i < 3 * hd; i += ZR_AD_THREADS) {
                const int v = i / hd, d = i - v * hd;
                // (i == t for q and k: 2 hd <= ZR_AD_THREADS)
                if (v == 0) {
                    qs[d] = zr_ad_rope_cs(qsrc, d, rope_dim, neox, tc, ts) * scale;
                } else if (cur && v == 1) {
                    keep(0, d, zr_ad_rope_cs(ksrc, d, rope_dim, neox, tc, ts));
                } else if (cur) {
                    keep(1, d, vsrc[d]);
                }
            }
        } else if ((hd & 31) == 0) {
            // the head norms (rmsnorm_f32's x * (1/rms) * w), then rope of the normed values, straight
            // from qkv: the warps of q's value threads (t < hd) and of k's (hd <= t < 2 hd, the blocks
            // that hold pos) each add their vector's squares in one warp's order (every warp gets the
            // bits one warp got: the 1/rms of the shared-memory path below), then rotate their values
            // from the raw pair; no barrier before the one after these paths. Value t of the V row
            // (t < hd: q's threads) is requested first, beside the head's loads: loaded after the
            // norm it was a second round trip in the block that holds pos
            const float vt = cur && t < hd ? vsrc[t] : 0.f;
            if (tv < 2 && (tv == 0 || cur)) {
                const float *x = tv == 0 ? qsrc : ksrc;
                float val;
                if (tw) {
                    float xv[4 * V]; // the whole head, hd / 32 <= 4 V values a lane, loaded together
#pragma unroll
                    for (int j = 0; j < 4 * V; j++) xv[j] = lane + 32 * j < hd ? x[lane + 32 * j] : 0.f;
                    const float a0 = x[ti0], b0 = x[ti1];
                    float ss = 0.f;
#pragma unroll
                    for (int j = 0; j < 4 * V; j++)
                        if (lane + 32 * j < hd) ss = fmaf(xv[j], xv[j], ss);
                    ss = zr_warp_sum(ss);
                    const float r = 1.0f / sqrtf(ss / (float)hd + eps);
                    if (rot) {
                        const float a = a0 * r * tw0, b = b0 * r * tw1;
                        val = td == ti0 ? zr_rope_first(a, b, tc, ts) : zr_rope_second(a, b, tc, ts);
                    } else {
                        val = a0 * r * tw0; // ti0 == ti1 == td
                    }
                } else {
                    val = zr_ad_rope_cs(x, td, rope_dim, neox, tc, ts);
                }
                if (tv == 0) {
                    qs[td] = val * scale;
                } else {
                    keep(0, td, val);
                }
            }
            if (cur && t < hd) keep(1, t, vt); // the V row (hd <= ZR_AD_THREADS: one value a thread)
        } else {
            // (heads that are no multiple of 32: a warp spans both vectors) the head norms first,
            // then rope of the normed values: raw q and k into shared memory, their sums of squares
            // (warps 0 and 1), the normed and rotated values (one per thread: 2 hd <= ZR_AD_THREADS)
            for (int i = t; i < 3 * hd; i += ZR_AD_THREADS) {
                const int v = i / hd, d = i - v * hd;
                if (v == 0) {
                    qs[d] = qsrc[d];
                } else if (cur && v == 1) {
                    kn[d] = ksrc[d];
                } else if (cur) {
                    keep(1, d, vsrc[d]);
                }
            }
            __syncthreads();
            if (warp < 2) {
                const float *x = warp == 0 ? qs : kn;
                const bool on = warp == 0 ? q_norm != nullptr : k_norm != nullptr && cur;
                float ss = 0.f;
                if (on)
                    for (int d = lane; d < hd; d += 32) ss = fmaf(x[d], x[d], ss);
                ss = zr_warp_sum(ss);
                if (lane == 0) rinv[warp] = on ? 1.0f / sqrtf(ss / (float)hd + eps) : 1.0f;
            }
            __syncthreads();
            const int v = t / hd, d = t - v * hd;
            float val = 0.f;
            if (v == 0 || (cur && v == 1)) {
                float *x = v == 0 ? qs : kn;
                if (tw) { // every thread of the row reads the normed pair, so normalize on the fly
                    const float r = rinv[v];
                    if (rot) {
                        const float a = x[ti0] * r * tw0, b = x[ti1] * r * tw1;
                        val = d == ti0 ? zr_rope_first(a, b, tc, ts) : zr_rope_second(a, b, tc, ts);
                    } else {
                        val = x[d] * r * tw0; // ti0 == d
                    }
                } else {
                    val = zr_ad_rope_cs(x, d, rope_dim, neox, tc, ts);
                }
            }
            __syncthreads(); // every read of the raw values is done
            if (v == 0) {
                qs[d] = val * scale;
            } else if (cur && v == 1) {
                keep(0, d, val);
            }
        }
    } else {
        // QG query heads: raw q of the heads, the new K row and the V row into shared memory
        // (the V row written to the cache here), the heads' sums of squares (warp v takes vector v
        // in the order of the single-head paths: the same 1/rms bits), then every q and k value
        // normed and rotated into registers, and back after a barrier
        for (int i = t; i < (QG + 2) * hd; i += ZR_AD_THREADS) {
            const int v = i / hd, d = i - v * hd;
            if (v < QG) {
                qs[v * 4 * MAX4 + d] = qsrc[v * hd + d]; // the group's heads are adjacent in qkv
            } else if (cur && v == QG) {
                kn[d] = ksrc[d];
            } else if (cur && v == QG + 1) {
                keep(1, d, vsrc[d]);
            }
        }
        __syncthreads();
        if (warp <= QG) {
            const float *x = warp < QG ? qs + warp * 4 * MAX4 : kn;
            const bool on = warp < QG ? q_norm != nullptr : k_norm != nullptr && cur;
            float ss = 0.f;
            if (on)
                for (int d = lane; d < hd; d += 32) ss = fmaf(x[d], x[d], ss);
            ss = zr_warp_sum(ss);
            if (lane == 0) rinv[warp] = on ? 1.0f / sqrtf(ss / (float)hd + eps) : 1.0f;
        }
        __syncthreads();
        constexpr int R = ((QG + 1) * 128 * V + ZR_AD_THREADS - 1) / ZR_AD_THREADS; // values a thread
        float val[R];
#pragma unroll
        for (int r = 0; r < R; r++) {
            const int i = t + r * ZR_AD_THREADS, v = i / hd, d = i - v * hd;
            val[r] = 0.f;
            if (v < QG || (cur && v == QG)) {
                const float *x = v < QG ? qs + v * 4 * MAX4 : kn;
                const float *w = v < QG ? q_norm : k_norm;
                const float rr = rinv[v];
                if (d < rope_dim) {
                    const int half = rope_dim >> 1, j = zr_rope_pair_of(d, half, neox);
                    int i0, i1;
                    zr_rope_pair_values(j, half, neox, &i0, &i1);
                    float c, sn;
                    zr_rope_cos_sin(pos, freq[j], &c, &sn);
                    const float a = w ? x[i0] * rr * w[i0] : x[i0], b = w ? x[i1] * rr * w[i1] : x[i1];
                    val[r] = d == i0 ? zr_rope_first(a, b, c, sn) : zr_rope_second(a, b, c, sn);
                } else {
                    val[r] = w ? x[d] * rr * w[d] : x[d];
                }
            }
        }
        __syncthreads(); // every read of the raw values is done
#pragma unroll
        for (int r = 0; r < R; r++) {
            const int i = t + r * ZR_AD_THREADS, v = i / hd, d = i - v * hd;
            if (v < QG) {
                qs[v * 4 * MAX4 + d] = val[r] * scale;
                if (d < 4 * MAX4 - hd) qs[v * 4 * MAX4 + hd + d] = 0.f; // the lanes past the head multiply zeros
            } else if (cur && v == QG) {
                keep(0, d, val[r]);
            }
        }
    }
    __syncthreads();
    ZR_TL_MARK(0); // q (and rows pos of K and V) ready

    // each lane: an online softmax per query head over rows grp, grp + NG, ... of the chunk; m is
    // the warp's running max (the same in every lane), l and acc the lane's row group's sums. The
    // loop bounds are the same for every thread (the shuffles need whole warps).
    const float4 zero4 = make_float4(0.f, 0.f, 0.f, 0.f);
    static_assert(QG > 1 || W == 1, "a single head's q registers hold slots of one float4");
    float4 q4[V], acc[QG][V][W]; // q of a single head in registers (groups read theirs from shared memory)
    float m[QG], l[QG];
#pragma unroll
    for (int g = 0; g < QG; g++) {
#pragma unroll
        for (int j = 0; j < V; j++) {
            if (QG == 1) q4[j] = sub + j * L < hd4 ? qs4[0][sub + j * L] : zero4;
#pragma unroll
            for (int w = 0; w < W; w++) acc[g][j][w] = zero4;
        }
        m[g] = -INFINITY;
        l[g] = 0.f;
    }
    const float inv_cap = softcap > 0.f ? 1.0f / softcap : 0.f;
    // the block's row batches, one after another: rows p0 .. p0 + U NG - 1 of its chunk k (the
    // first batch was requested before the wait). Each iteration finds the next batch before it
    // uses the current one and requests it after: one flat loop, where a loop over chunks around a
    // loop over batches made ptxas spill more in the F16 groups of 4 (32 bytes, not 24) and give
    // the F16 single head 96 registers, not 90: H200 tg128 after 16384 positions 8B 305.6 -> 312.6,
    // Qwen3-30B-A3B 269.8 -> 278.8 t/s, after 1024-2048 +0.6%, Gemma-3-4B's heads of 256 after
    // 16384 -1%; the same bits (cu/PERF.md session 24)
    for (int k = 0, p0 = 0;;) {
        // the next batch: the chunk's next rows, else the block's next chunk (past the window's
        // first row: only a block's first chunk starts before it)
        int k1 = k, p1 = p0 + U * NG, c1 = c, n1 = n, nc1 = n_cached, cr1 = cur_row;
        size_t base1 = base;
        if (p1 >= n) {
            k1 = k + 1;
            p1 = 0;
            c1 = c + n_split;
            const int lo1 = c1 * chunk;
            n1 = min(lo1 + chunk, seq) - lo1;
            nc1 = c1 == live - 1 ? n1 - 1 : n1;
            cr1 = c1 == live - 1 ? n1 - 1 : -1;
            base1 = (size_t)lo1 * kv_dim + (size_t)kvh * hd;
        }
        const bool more = k1 < n_mine;
        zr_ad_patch<U, V>(kr, kpatch, p0 + grp, NG, cur_row, sub, L, n_slots);
        zr_ad_patch<U, V>(vr, vpatch, p0 + grp, NG, cur_row, sub, L, n_slots);
        // the U rows' dots of the batch (per head), then their sums over the row's lanes level
        // by level, all together (QG U independent shuffles a level, not chains of 5 one after
        // another; rows past the chunk were loaded as zeros and are masked after), each row's
        // arithmetic as it was alone
        float s[QG][U];
#pragma unroll
        for (int g = 0; g < QG; g++)
#pragma unroll
            for (int u = 0; u < U; u++) {
                s[g][u] = zr_ad_dot4(QG == 1 ? q4[0] : qs4[g][sub * W], S::get(kr[u][0], 0));
#pragma unroll
                for (int w = 1; w < W; w++) s[g][u] += zr_ad_dot4(qs4[g][sub * W + w], S::get(kr[u][0], w));
#pragma unroll
                for (int j = 1; j < V; j++)
#pragma unroll
                    for (int w = 0; w < W; w++)
                        s[g][u] += zr_ad_dot4(QG == 1 ? q4[j] : qs4[g][(sub + j * L) * W + w], S::get(kr[u][j], w));
            }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            if (o < L) {
#pragma unroll
                for (int g = 0; g < QG; g++)
#pragma unroll
                    for (int u = 0; u < U; u++) s[g][u] += __shfl_xor_sync(0xffffffffu, s[g][u], o);
            }
#pragma unroll
        for (int g = 0; g < QG; g++) {
            float bm = -INFINITY;
#pragma unroll
            for (int u = 0; u < U; u++) {
                if (softcap > 0.f) s[g][u] = tanhf(s[g][u] * inv_cap) * softcap;
                if (!(p0 + u * NG + grp < n)) s[g][u] = -INFINITY;
                bm = fmaxf(bm, s[g][u]);
            }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
                if (o >= L) bm = fmaxf(bm, __shfl_xor_sync(0xffffffffu, bm, o));
            const float mn = fmaxf(m[g], bm);
            if (mn == -INFINITY) continue; // no row of this warp yet (warp-uniform)
            const float corr = expf(m[g] - mn);
            l[g] *= corr;
#pragma unroll
            for (int j = 0; j < V; j++)
#pragma unroll
                for (int w = 0; w < W; w++) acc[g][j][w] = zr_ad_scale4(corr, acc[g][j][w]);
            // (no branch on the rows past the chunk: their weight expf(-INFINITY) is 0 and their
            // values zeros, which leave l and acc as they are)
#pragma unroll
            for (int u = 0; u < U; u++) {
                const float w = expf(s[g][u] - mn);
                l[g] += w;
#pragma unroll
                for (int j = 0; j < V; j++)
#pragma unroll
                    for (int x = 0; x < W; x++) acc[g][j][x] = zr_ad_fma4(w, S::get(vr[u][j], x), acc[g][j][x]);
            }
            m[g] = mn;
        }
        if (!more) break;
        k = k1, p0 = p1, c = c1, n = n1, n_cached = nc1, cur_row = cr1, base = base1;
        zr_ad_rows<U, V, W, KV>(kr, kc + base, kv_dim, p0 + grp, NG, n_cached, sub, L, n_slots);
        zr_ad_rows<U, V, W, KV>(vr, vc + base, kv_dim, p0 + grp, NG, n_cached, sub, L, n_slots);
    }
    // the warp's row groups added (every lane then holds the warp's sums)
#pragma unroll
    for (int g = 0; g < QG; g++) {
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            if (o >= L) {
                l[g] += __shfl_xor_sync(0xffffffffu, l[g], o);
#pragma unroll
                for (int j = 0; j < V; j++)
#pragma unroll
                    for (int w = 0; w < W; w++) {
                        acc[g][j][w].x += __shfl_xor_sync(0xffffffffu, acc[g][j][w].x, o);
                        acc[g][j][w].y += __shfl_xor_sync(0xffffffffu, acc[g][j][w].y, o);
                        acc[g][j][w].z += __shfl_xor_sync(0xffffffffu, acc[g][j][w].z, o);
                        acc[g][j][w].w += __shfl_xor_sync(0xffffffffu, acc[g][j][w].w, o);
                    }
            }
        if (lane < L) {
#pragma unroll
            for (int j = 0; j < V; j++)
                if (sub + j * L < n_slots)
#pragma unroll
                    for (int w = 0; w < W; w++) wo4[warp][g][(sub + j * L) * W + w] = acc[g][j][w];
        }
        if (lane == 0) {
            wm[warp][g] = m[g];
            wl[warp][g] = l[g];
        }
    }
    __syncthreads();
    ZR_TL_MARK(1); // the warps' sums in shared memory

    // this block's (unnormalized) outputs: the warps merged in warp order, value tt of head h + g
    // by thread t = g hd4 + tt
    const int tg = QG == 1 ? (t < hd4 ? 0 : 1) : t / hd4, tt = t - tg * hd4, ht = h + tg;
    float *po = part, *pml = part + (size_t)n_head * n_split * hd;
    if (tg < QG)
        zr_ad_block_put<ZR_AD_WARPS>(&wm[0][0], &wl[0][0], &wo4[0][0][0], QG, MAX4, tg, tt, ht, y, n_split, blocks, hd, po,
                                     pml, out);
    if (blocks == 1) return;
    if (tg < QG) __threadfence(); // the partials are visible device-wide before the count says so
    __syncthreads();
    if (t == 0) last = atomicAdd(&count[bx], 1) == blocks - 1;
    __syncthreads();
    if (!last || tg >= QG) return;
    __threadfence(); // every other block's partials are visible to this one
    if (t == 0) count[bx] = 0; // no other block of this launch touches it again

    // merge the blocks' partials in block order (the same arithmetic as attn_combine_f32)
    zr_ad_merge<ZR_AD_PRE>(po, pml, ht, tt, n_split, blocks, hd, out);
}

#define ZR_AD_KERNEL(NAME, V, QG, KV)                                                                                \
    ZR_KERNEL void __launch_bounds__(ZR_AD_THREADS, 1)                                                               \
        NAME(const float *__restrict__ qkv, KV *__restrict__ kc, KV *__restrict__ vc, float *__restrict__ part,       \
             int *__restrict__ count, float *__restrict__ out, const double *__restrict__ freq,                       \
             const int *__restrict__ pos_p, const float *__restrict__ q_norm, const float *__restrict__ k_norm,      \
             int n_head, int n_kv, int head_dim, int rope_dim, int neox, int chunk, int n_split, float scale,        \
             float eps, int window, float softcap) {                                                                 \
        ZR_TL_EXIT;                                                                                                  \
        zr_attn_decode<V, QG, KV>(qkv, kc, vc, part, count, out, freq, pos_p, q_norm, k_norm, n_head, n_kv,          \
                                  head_dim, rope_dim, neox, chunk, n_split, scale, eps, window, softcap);            \
    }

// (512, 1): at most 128 registers; the two row batches (64) stay in registers
ZR_AD_KERNEL(attn_decode_f32, 1, 1, float)
ZR_AD_KERNEL(attn_decode_f32_g2, 1, 2, float)
ZR_AD_KERNEL(attn_decode_f32_g4, 1, 4, float)
ZR_AD_KERNEL(attn_decode_f32_d256, 2, 1, float)
ZR_AD_KERNEL(attn_decode_f32_kvh, 1, 1, __half)
ZR_AD_KERNEL(attn_decode_f32_g2_kvh, 1, 2, __half)
ZR_AD_KERNEL(attn_decode_f32_g4_kvh, 1, 4, __half)
ZR_AD_KERNEL(attn_decode_f32_d256_kvh, 2, 1, __half)
