// The experts' down product fused with their mix (issue 15): the decode's
//   mix_x[r] += sum over slots j < n_used (in order) of weights[j] * (W_ids[j] x_j)[r]
// in one launch that writes no per-slot output and keeps no counts.
//
// Why it is shaped like this: matvec_id's down launch (cu/moe_matvec.cu) gives each (row group,
// slot) pair a warp. On Qwen3-30B-A3B's down (2048 rows of 768 values, 8 slots) that is 8192
// warps of one 16-byte item a lane (24 of 32 lanes busy), ~2 waves of 256-thread blocks at 32
// warps an SM, each block waiting on the ids, then on one DRAM round trip, then on a fence and
// an atomic count so that the last slot's block mixes. Here a warp owns one output row for
// every slot: right after the ids it requests the row of each chosen expert (P items a lane in
// flight, every slot's at once when a row is at most 32 items), so the launch is 2048 warps in
// one wave, and the warp adds the slots' results into mix_x itself, in slot order with each
// product rounded before its add: moe_combine_f32's arithmetic.
//
// x: the slots' inputs, contiguous [n_used][n_in] with n_in % 32 == 0 (slot j's staged copy then
// starts on a pad boundary, xs + 36 j n_in / 32, so cu/matvec.cuh's item offsets and staged sums
// hold within it), staged once for all slots: zr_cuf_mv_smem(n_used n_in) bytes of dynamic shared
// memory. Block 32 G threads: warp g of block b computes row b G + g (n_rows rows of one expert);
// n_used <= 32; an id outside 0..n_total/n_rows-1 is clamped (as matvec_id's). A row's value
// per slot is matvec_id's arithmetic for a row (split 1: lane l adds its items l, l + 32, ... in
// order, then one warp sum), but for Q4_K: matvec_id's runs on integer dot products (ZrMvQ4Ki),
// this one on ZrMvQ4K's floats (equal within the CPU's bound, not bit for bit).
#include "matvec.cuh"

template <class T, int P>
__device__ __forceinline__ void zr_matvec_id_mix(const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws,
                                                 const float *x, int n_in, int n_rows, const int *ids, int n_used,
                                                 int n_total, const float *weights, float *mix_x) {
    static_assert(P >= 2, "at least one load in flight while one is computed");
    extern __shared__ float4 zr_mv_smem[];
    __shared__ int row0[32];  // each slot's first row in the stacked matrix
    __shared__ float wt[32];  // each slot's weight
    float *xs = (float *)zr_mv_smem;
    const int tid = threadIdx.x, lane = tid & 31, nthr = blockDim.x;
    const int row = blockIdx.x * (nthr >> 5) + (tid >> 5);
    const bool live = row < n_rows;
    zr_grid_enter(); // the ids, the weights and x come from the kernels before
    if (tid < n_used) {
        const int n_expert = n_total / n_rows;
        int e = ids[tid];
        e = e < 0 ? 0 : e >= n_expert ? n_expert - 1 : e;
        row0[tid] = e * n_rows;
        wt[tid] = weights[tid];
    }
    __syncthreads();
    const int items = n_in / T::EPI, steps = (items + 31) / 32;
    const int total = n_used * steps; // (slot, step) pairs, slot by slot
    // pair f's item of this warp's row in its slot's expert, into b (nothing past the row)
    auto load = [&](int f, typename T::F (&b)[1]) {
        const int s = f / steps, it = lane + 32 * (f - s * steps);
        if (it < items) T::load(T::row(w, ws, n_in, n_total, row0[s] + row), it, b[0]);
    };
    typename T::F buf[P][1];
    // the first P-1 pairs requested before x is staged, so the two latencies overlap
#pragma unroll
    for (int q = 0; q < P - 1; q++)
        if (live && q < total) load(q, buf[q]);
    zr_mv_stage_x<ZrMvXsum<T>::value>(x, nullptr, xs, n_used * n_in, ZR_MV_PLAIN, tid, nthr);
    __syncthreads();
    if (!live) return;
    float mix = 0.f;
    if (steps == 1) {
        // rows of at most 32 items (Qwen3's down: 24): pair f is slot f. A group of P slots is
        // computed, then its P warp sums run at once (independent shuffle chains, where one after
        // the other they were ~8 x 5 dependent shuffles at the end of every warp), then mixed in
        // slot order: the same operations on the same values as the loop below
        for (int s0 = 0; s0 < n_used; s0 += P) {
            float a[P][1];
#pragma unroll
            for (int q = 0; q < P; q++) {
                a[q][0] = 0.f;
                const int s = s0 + q;
                if (s < n_used) {
                    if (s + P - 1 < n_used) load(s + P - 1, buf[(q + P - 1) % P]);
                    if (lane < items) T::template comp<1>(buf[q], lane, xs + (size_t)s * (n_in >> 5) * 36, a[q]);
                }
            }
#pragma unroll
            for (int q = 0; q < P; q++) a[q][0] = zr_warp_sum(a[q][0]);
#pragma unroll
            for (int q = 0; q < P; q++) {
                const int s = s0 + q;
                if (s < n_used) {
                    const float p = __fmul_rn(a[q][0], wt[s]);
                    mix = s == 0 ? p : __fadd_rn(mix, p);
                }
            }
        }
        if (lane == 0) mix_x[row] += mix;
        return;
    }
    float acc[1] = {0.f};
    // unrolled by P so every buffer index is a compile-time constant (cu/matvec.cuh's pipeline)
    for (int f0 = 0; f0 < total; f0 += P) {
#pragma unroll
        for (int q = 0; q < P; q++) {
            const int f = f0 + q;
            if (f < total) {
                if (f + P - 1 < total) load(f + P - 1, buf[(q + P - 1) % P]);
                const int s = f / steps, step = f - s * steps, it = lane + 32 * step;
                if (it < items) T::template comp<1>(buf[q], it, xs + (size_t)s * (n_in >> 5) * 36, acc);
                if (step == steps - 1) { // the slot's row is complete: into the mix, in slot order
                    const float p = __fmul_rn(zr_warp_sum(acc[0]), wt[s]);
                    mix = s == 0 ? p : __fadd_rn(mix, p);
                    acc[0] = 0.f;
                }
            }
        }
    }
    if (lane == 0) mix_x[row] += mix;
}

// P: loads a lane keeps in flight (8: Qwen3-30B-A3B's 8 slots of one item each, all at once);
// the register cap leaves 16 warps an SM (2 blocks of 256 threads), the launch's one wave.
#define ZR_MATVEC_ID_MIX(NAME, TRAITS, P, NREG)                                                                   \
    ZR_KERNEL void __maxnreg__(NREG)                                                                             \
        NAME(const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws, const float *x, int n_in, int n_rows, \
             const int *ids, int n_used, int n_total, const float *weights, float *mix_x) {                      \
        zr_matvec_id_mix<TRAITS, P>(w, ws, x, n_in, n_rows, ids, n_used, n_total, weights, mix_x);              \
    }                                                                                                            \
    ZR_KCHECK_FAMILY(mv_idmix, NAME);

ZR_MATVEC_ID_MIX(matvec_id_mix_f32, ZrMvF32, 8, 128)
ZR_MATVEC_ID_MIX(matvec_id_mix_f16, ZrMvF16, 8, 128)
ZR_MATVEC_ID_MIX(matvec_id_mix_bf16, ZrMvBF16, 8, 128)
ZR_MATVEC_ID_MIX(matvec_id_mix_q8_0, ZrMvQ8_0, 8, 128)
ZR_MATVEC_ID_MIX(matvec_id_mix_q4_0, ZrMvQ4x<ZR_T_Q4_0>, 8, 128)
ZR_MATVEC_ID_MIX(matvec_id_mix_q4_1, ZrMvQ4x<ZR_T_Q4_1>, 8, 128)
ZR_MATVEC_ID_MIX(matvec_id_mix_q5_0, ZrMvQ4x<ZR_T_Q5_0>, 8, 128)
ZR_MATVEC_ID_MIX(matvec_id_mix_q5_1, ZrMvQ4x<ZR_T_Q5_1>, 8, 128)
ZR_MATVEC_ID_MIX(matvec_id_mix_q2_k, ZrMvQ23K<ZR_T_Q2_K>, 8, 128)
ZR_MATVEC_ID_MIX(matvec_id_mix_q3_k, ZrMvQ23K<ZR_T_Q3_K>, 8, 128)
ZR_MATVEC_ID_MIX(matvec_id_mix_q4_k, ZrMvQ4K, 8, 128)
ZR_MATVEC_ID_MIX(matvec_id_mix_q5_k, ZrMvQ5K, 8, 128)
ZR_MATVEC_ID_MIX(matvec_id_mix_q6_k, ZrMvQ6K, 8, 128)
