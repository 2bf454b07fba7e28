// Pieces of the decode attention shared by its CUDA-core kernels (attention_decode.cu: the float4
// arithmetic) and its tensor-core kernels (attention_decode_mma.cu: that, a block's output or
// partial from its warps' sums, and the merge of the blocks' partials by a head's last block).
#pragma once
#include "common.cuh"

__device__ __forceinline__ float4 zr_ad_fma4(float w, float4 v, float4 a) {
    return make_float4(fmaf(w, v.x, a.x), fmaf(w, v.y, a.y), fmaf(w, v.z, a.z), fmaf(w, v.w, a.w));
}

__device__ __forceinline__ float4 zr_ad_scale4(float w, float4 a) { return make_float4(w * a.x, w * a.y, w * a.z, w * a.w); }

// Float4 tt of query head ht (the block's head g) from the block's NW warps: wm, wl [NW][ng] (a
// warp's max and sum of the weights; max -INFINITY: the warp had no row), wo [NW][ng][nslot]
// float4s (unnormalized P.V), merged in warp order; the block's output when it is the only one
// with rows (blocks == 1), else its partial in slot y of n_split (po, pml as zr_ad_merge reads).
template <int NW>
__device__ __forceinline__ void zr_ad_block_put(const float *wm, const float *wl, const float4 *wo, int ng, int nslot, int g,
                                                int tt, int ht, int y, int n_split, int blocks, int hd, float *po,
                                                float *pml, float *out) {
    float M = -INFINITY, Lc = 0.f;
    float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int w = 0; w < NW; w++) M = fmaxf(M, wm[w * ng + g]);
    // A warp without rows (max -INFINITY) weighs expf(-INFINITY) = 0 and its sums are zeros, which
    // leave Lc and o as they are, so no warp is skipped: without a branch the NW weights and loads
    // go out together, not one warp's after another's (Mx: finite, should every warp lack rows)
    const float Mx = M == -INFINITY ? 0.f : M;
#pragma unroll
    for (int w = 0; w < NW; w++) {
        const float e = expf(wm[w * ng + g] - Mx);
        Lc = fmaf(e, wl[w * ng + g], Lc);
        o = zr_ad_fma4(e, wo[(w * ng + g) * nslot + tt], o);
    }
    if (blocks == 1) { // the only block with rows: no partials, no merge
        const float inv = 1.0f / Lc;
        *(float4 *)(out + (size_t)ht * hd + 4 * tt) = zr_ad_scale4(inv, o);
    } else {
        *(float4 *)(po + ((size_t)ht * n_split + y) * hd + 4 * tt) = o;
        if (tt == 0) {
            float *pm = pml + ((size_t)ht * n_split + y) * 2;
            pm[0] = M;
            pm[1] = Lc;
        }
    }
}

// Float4 tt of query head ht's output: the `blocks` partials of its n_split slots (po [n_head]
// [n_split][hd] unnormalized, pml [n_head][n_split] (max, sum)) merged in block order, the
// arithmetic of attn_combine_f32; the first PRE partials' values load with the maxima.
template <int PRE>
__device__ __forceinline__ void zr_ad_merge(const float *po, const float *pml, int ht, int tt, int n_split, int blocks,
                                            int hd, float *out) {
    const float4 zero4 = make_float4(0.f, 0.f, 0.f, 0.f);
    const int hd4 = hd >> 2;
    const float *hm = pml + (size_t)ht * n_split * 2;
    const float4 *ho = (const float4 *)(po + (size_t)ht * n_split * hd) + tt;
    float4 opre[PRE];
    float mpre[PRE], lpre[PRE];
#pragma unroll
    for (int k = 0; k < PRE; k++) {
        const bool in = k < blocks;
        opre[k] = in ? __ldcg(ho + (size_t)k * hd4) : zero4;
        mpre[k] = in ? __ldcg(hm + 2 * k) : -INFINITY;
        lpre[k] = in ? __ldcg(hm + 2 * k + 1) : 0.f;
    }
    float M = -INFINITY;
#pragma unroll
    for (int k = 0; k < PRE; k++)
        if (k < blocks) M = fmaxf(M, mpre[k]);
    for (int k = PRE; k < blocks; k++) M = fmaxf(M, __ldcg(hm + 2 * k));
    float Ls = 0.f;
    float4 o = zero4;
#pragma unroll
    for (int k = 0; k < PRE; k++)
        if (k < blocks) {
            const float w = expf(mpre[k] - M);
            Ls = fmaf(w, lpre[k], Ls);
            o = zr_ad_fma4(w, opre[k], o);
        }
    for (int k = PRE; k < blocks; k++) {
        const float w = expf(__ldcg(hm + 2 * k) - M);
        Ls = fmaf(w, __ldcg(hm + 2 * k + 1), Ls);
        o = zr_ad_fma4(w, __ldcg(ho + (size_t)k * hd4), o);
    }
    *(float4 *)(out + (size_t)ht * hd + 4 * tt) = zr_ad_scale4(1.0f / Ls, o);
}
