// The routing of one token's router logits (softmax, top k, renormalized weights) by one warp,
// shared by moe_route_f32 (cu/moe_route.cu) and the experts' gate|up matvec_id that routes for
// itself (cu/moe_matvec.cu).
//
// Why it is shaped like this: the routing sits between two weight-streaming kernels on the
// decode's critical path, so its latency is what counts. The logits are loaded once into
// registers (NPL per lane: expert lane + 32 i), every round of the top k is a local scan of
// those registers and one 5-step butterfly of (p, id), and nothing goes through shared memory
// or global loads inside the rounds (the first version re-read the logits from global memory
// and a shared "taken" table in each of the k rounds: 8.7 us per token and layer on an H100 for
// 128 experts, top 8).
//
// The arithmetic is the first version's, so results are the same bits: m = max, each lane's
// sum of expf(l - m) over its experts in ascending order then the warp's butterfly, p = expf(l -
// m) * (1 / sum); the k largest p (equal ones: the lower id first; NaN never chosen, and a round
// that finds nothing takes expert 0, never past the table) in rounds, the sum of the chosen p in
// round order, each weight p / max(sum, 2^-14). On sm_80+ a round's warp-wide pick is two redux
// instructions (the largest p's bits, then the lowest id holding them) instead of a butterfly of
// 5 x 2 shuffles: a p chosen is in [0, 1], where the order of the bits is the order of the floats.
#pragma once
#include "common.cuh"

#define ZR_MOE_MAX_EXPERTS 1024 // src/model.c MAX_EXPERTS

template <int NPL>
__device__ __forceinline__ void zr_moe_topk_n(const float *__restrict__ l, int n_expert, int k, int *ids, float *weights) {
    const int lane = threadIdx.x & 31;
    float p[NPL];
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < NPL; i++) {
        const int e = lane + 32 * i;
        p[i] = e < n_expert ? l[e] : -INFINITY;
        if (e < n_expert) m = fmaxf(m, p[i]);
    }
    m = zr_warp_max(m);
    // No branch around an expf (a lane's NPL of them would run one after another): past n_expert p
    // is -INFINITY, whose expf(p - m) adds 0 to s (m finite; with every logit -INFINITY or NaN the
    // experts within n_expert make s NaN either way), and its p below becomes 0 - 2 (NaN where s
    // is NaN, which no round chooses either)
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < NPL; i++) s += expf(p[i] - m);
    const float inv = 1.0f / zr_warp_sum(s);
#pragma unroll
    for (int i = 0; i < NPL; i++) p[i] = expf(p[i] - m) * inv - (lane + 32 * i < n_expert ? 0.f : 2.f); // -2: never chosen
    float sum = 0.f, mine = 0.f; // mine: lane j's chosen p (j < 32)
    for (int j = 0; j < k; j++) {
        float best = -1.f;
        int bi = NPL;
#pragma unroll
        for (int i = 0; i < NPL; i++)
            if (p[i] > best) best = p[i], bi = i; // ascending i: equal ones keep the lower id
        int be;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
        {   // the warp's (largest p, lowest id) by two warp reductions instead of a 5-step butterfly
            // of (p, id): a lane's p in [0, 1] as an ordered key (its bits + 1; none found: 0), the
            // largest key, then the lowest id among the lanes holding it; the same choice and best
            const unsigned key = bi < NPL ? __float_as_uint(best) + 1u : 0u;
            const unsigned kmax = __reduce_max_sync(0xffffffffu, key);
            const unsigned id = __reduce_min_sync(0xffffffffu, key == kmax && kmax ? (unsigned)(lane + 32 * bi) : 0xffffffffu);
            be = kmax ? (int)id : n_expert;
            best = kmax ? __uint_as_float(kmax - 1u) : -1.f;
        }
#else
        be = bi < NPL ? lane + 32 * bi : n_expert;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float ob = __shfl_xor_sync(0xffffffffu, best, o);
            const int oe = __shfl_xor_sync(0xffffffffu, be, o);
            if (ob > best || (ob == best && oe < be)) best = ob, be = oe;
        }
#endif
        if (be >= n_expert) be = 0; // NaN logits choose nothing: expert 0 (the logits check reports them)
#pragma unroll
        for (int i = 0; i < NPL; i++)
            if (be == lane + 32 * i) p[i] = -2.f; // taken (constant indices: p stays in registers)
        if (lane == 0) ids[j] = be;
        if (j == lane) mine = best;
        if (k > 32 && lane == 0) weights[j] = best; // more than 32 chosen: the p wait in the output
        sum += best; // in order, as ggml_sum_rows and the reference
    }
    __syncwarp(); // orders lane 0's writes before the other lanes' reads
    sum = fmaxf(sum, 6.103515625e-5f);
    for (int j = lane; j < k; j += 32) weights[j] = (k <= 32 ? mine : weights[j]) / sum;
}

// The routing of the n_expert logits at l into ids[k], weights[k], by the calling warp (all 32
// lanes); the register count per lane is picked from n_expert.
__device__ __forceinline__ void zr_moe_topk(const float *__restrict__ l, int n_expert, int k, int *ids, float *weights) {
    if (n_expert <= 32) zr_moe_topk_n<1>(l, n_expert, k, ids, weights);
    else if (n_expert <= 64) zr_moe_topk_n<2>(l, n_expert, k, ids, weights);
    else if (n_expert <= 128) zr_moe_topk_n<4>(l, n_expert, k, ids, weights);
    else if (n_expert <= 256) zr_moe_topk_n<8>(l, n_expert, k, ids, weights);
    else if (n_expert <= 512) zr_moe_topk_n<16>(l, n_expert, k, ids, weights);
    else zr_moe_topk_n<32>(l, n_expert, k, ids, weights);
}

// zr_moe_topk for at most 256 experts (8 registers per lane), for kernels whose register cap
// leaves no room for more (the experts' matvec_id that routes for itself).
__device__ __noinline__ void zr_moe_topk_256(const float *__restrict__ l, int n_expert, int k, int *ids, float *weights) {
    if (n_expert <= 32) zr_moe_topk_n<1>(l, n_expert, k, ids, weights);
    else if (n_expert <= 64) zr_moe_topk_n<2>(l, n_expert, k, ids, weights);
    else if (n_expert <= 128) zr_moe_topk_n<4>(l, n_expert, k, ids, weights);
    else zr_moe_topk_n<8>(l, n_expert, k, ids, weights);
}
