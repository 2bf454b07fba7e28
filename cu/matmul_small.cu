// The prefill's product for a few rows (issue 19): Y[t][o] = sum_k W[o][k] X[t][k] (+ beta Y[t][o])
// for t < n <= ZR_MM_COLS, every weight byte read once for all n columns.
//
// Why: a prompt of a few tokens through dequantize-to-F16 + cuBLASLt moves ~3x the weights'
// bytes plus the GEMM (src/cuda/forward.c gemm()); here each lane loads an item of R rows
// once (the decode's T::load, cu/matvec.cuh) and applies it to the n staged columns, so the
// product reads the quantized weights once and each column's x from L2 once per block. Types
// with T::comp_n (ZrMvCompN: Q8_0, Q4_0/Q4_1/Q5_0/Q5_1, Q4_K, Q5_K, Q6_K) decode each word of
// the item once for all n columns (the kernel calls one copy of the loop per n = 1..8: the
// accumulators in registers, the loops over columns unrolled); the others call T::comp once per
// column (each re-decodes the item: n x the decode's arithmetic). Either way a column's
// arithmetic is the float product's, in its order: where the decode matvec runs that product too
// (F32, F16, BF16, Q3_K, Q6_K) each column equals it bit for bit (test_mm_small); the types whose
// decode runs on integer dot products (Q8_0, Q4_0/Q4_1/Q5_0/Q5_1, Q2_K, Q4_K, Q5_K: ZrMvQ8i,
// ZrMvQ4xi, ZrMvQ2Ki, ZrMvQ4Ki, ZrMvQ5Ki) are held to the CPU's bound instead.
//
// x for n columns of a long row does not fit shared memory (n_ff 14336 x 8 x 4 B = 458 KB), so
// it is staged in chunks of `chunk` values (a multiple of ZR_MM_UNIT, the host's pick): every
// item lies inside one chunk because 2048 is a multiple of 32 * EPI and of the 256-value
// super-block for every type, and zr_xpad is shift-invariant for chunk starts that are
// multiples of 32, so T::comp reads chunk c through xs - zr_xpad(c0) with the global item index.
// The next chunk's first item is requested before its staging, so that load overlaps it.
// q4_K and q5_K are staged in item order (ZrMvItemOrder, cu/matvec.cuh): each item's 32 values
// contiguous, so a warp's float4 reads of x hit distinct banks (the decode's order: 2 passes).
//
// Launch (src/cuda/mm_small.c): block 32*G*S threads = G row groups of R rows, each row split
// over S warps along the chunk's items (partials added in k order through shared memory:
// deterministic, no atomics); grid ceil(row groups / G); dynamic shared memory
// n * zr_xpad(chunk) floats. x [n][ldx] F32, y [n][ldy] F32; beta 0 never reads y.
#include "matvec.cuh"

#define ZR_MM_COLS 8     // columns at most (src/cuda/mm_small.h ZR_CUF_MM_COLS)
#define ZR_MM_UNIT 2048  // chunk granularity (src/cuda/mm_small.h ZR_CUF_MM_UNIT)
#define ZR_MM_MAX_WARPS 16
#define ZR_MM_STAGE 2  // float4s of x each thread loads per staging round

// Columns comp_n takes in one pass over an item. Above it the item is decoded twice, for columns
// 0..3 and then 4..N-1 (a PRMT or two per weight against N FFMAs): a pass keeps 2 x 4 x R partial
// sums live instead of 2 x N x R. Where that removed most of a spill at the 128-register cap
// (ptxas sm_90, one pass -> two: q6_K n 7/8 4/44 -> 0/8 B, q5_K n 7 4 -> 0, q4_1 n 7/8 16/24 -> 8/4);
// q4_K (n 8: 8 B either way), q4_0, q8_0, q5_0, q5_1 stay one pass (cu/PERF.md ttft6).
template <class T> struct ZrMmPass {
    static constexpr int cols = ZR_MM_COLS;
};
template <> struct ZrMmPass<ZrMvQ5K> {
    static constexpr int cols = 6;
};
template <> struct ZrMmPass<ZrMvQ6K> {
    static constexpr int cols = 6;
};
template <> struct ZrMmPass<ZrMvQ4x<ZR_T_Q4_1>> {
    static constexpr int cols = 6;
};

// f as it is (zero is 0), but not provably so, and after `after` (the first pass's last sum): the
// second pass decodes the item again, after the first, instead of ptxas keeping the first pass's
// decoded weights live for it (an empty asm does not stop that: 64-292 B spilled). One LOP3 a word.
template <class F> __device__ __forceinline__ F zr_mm_opaque(const F &f, uint32_t zero, float after) {
    static_assert(sizeof(F) % 4 == 0, "an item is whole words");
    uint32_t u[sizeof(F) / 4];
    memcpy(u, &f, sizeof(F));
    const uint32_t z = zero & __float_as_uint(after);
#pragma unroll
    for (int i = 0; i < (int)(sizeof(F) / 4); i++) u[i] ^= z;
    F g;
    memcpy(&g, u, sizeof(F));
    return g;
}

// N: columns the accumulators hold (n <= N; with T::comp_n exactly N, the caller passes the
// constant). red_part: [ZR_MM_MAX_WARPS][ZR_MM_COLS * R] shared floats, the kernel's (one array
// for every N's copy). Not inlined: ptxas then allocates each N's copy on its own (inlined into
// one kernel, q4_k spilled 160 B; apart, 0-24 B per N: cu/PERF.md); one call per thread.
template <class T, int R, int N>
__device__ __noinline__ void zr_mm_small(const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws,
                                         const float *__restrict__ x, int ldx, float *y, int ldy, float beta,
                                         int n_in, int n_out, int n, int split, int chunk,
                                         float (*red_part)[ZR_MM_COLS * R]) {
    static_assert(ZR_MM_UNIT % (32 * T::EPI) == 0 && ZR_MM_UNIT % 256 == 0, "a chunk holds whole items");
    static_assert(N <= ZR_MM_COLS && ZR_MM_COLS * R <= 32, "a lane per column and row after the warp sums");
    extern __shared__ float4 zr_mm_smem[];
    float *xs = (float *)zr_mm_smem;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nthr = blockDim.x;
    const int S = split, G = (nthr >> 5) / S;
    const int g = warp / S, ks = warp - g * S;
    const int row0 = (blockIdx.x * G + g) * R;
    const bool live = row0 < n_out;
    const int xst = zr_xpad(chunk);  // floats per staged column
    const int step = 32 * S;
    const bool vec = (n_in & 3) == 0 && (ldx & 3) == 0;
    const uint32_t zero = (uint32_t)chunk >> 31;  // 0, which the compiler cannot know (zr_mm_opaque)
    // float4s of x each thread stages per round (each round waits on L2 once): with comp_n up to
    // 4 (a 2048-value chunk of n columns at 8 warps: ceil(n / 2) rounds, was n), else ZR_MM_STAGE.
    // N (2 rounds at every n) spilled more at n 8 (q4_K/q5_K 12 B against 8)
    constexpr int SG = ZrMvCompN<T>::value && N > ZR_MM_STAGE ? (N < 4 ? N : 4) : ZR_MM_STAGE;
    typename T::Row rw[R];
#pragma unroll
    for (int r = 0; r < R; r++) rw[r] = T::row(w, ws, n_in, n_out, min(row0 + r, n_out - 1));
    typename T::F buf[2][R];
    float acc[N][R];
#pragma unroll
    for (int t = 0; t < N; t++)
#pragma unroll
        for (int r = 0; r < R; r++) acc[t][r] = 0.f;

    for (int c0 = 0; c0 < n_in; c0 += chunk) {
        const int clen = min(chunk, n_in - c0);
        const int ib = c0 / T::EPI, ie = (c0 + clen) / T::EPI;  // the chunk's whole items
        const int it0 = ib + ks * 32 + lane;
        if (live && it0 < ie) {
#pragma unroll
            for (int r = 0; r < R; r++) T::load(rw[r], it0, buf[0][r]);
        }
        if (c0 == 0) zr_grid_enter_after_loads(w);  // x and y belong to earlier kernels
        __syncthreads();  // every warp is done with the previous chunk
        if (vec) {
            // float4 i of the chunk's columns; the loop bound is the same for the whole warp, so
            // the shuffles of the 16-value sums (ZrMvXsum types: K-quant chunks are 256-multiples,
            // so 4 adjacent lanes hold one 16) run with every lane
            // (every load of a round is issued before any is used: a few L2 round trips per chunk)
            const int c4 = clen >> 2, tot = n * c4;
            for (int b = 0; b < tot; b += SG * nthr) {
                float4 v[SG];
#pragma unroll
                for (int u = 0; u < SG; u++) {
                    const int i = b + u * nthr + tid, t = i / c4, k = i - t * c4;
                    const int src = ZrMvItemOrder<T>::value ? zr_mm_item_order4(k) : k;
                    v[u] = i < tot ? __ldg((const float4 *)(x + (size_t)t * ldx + c0) + src) : make_float4(0.f, 0.f, 0.f, 0.f);
                }
#pragma unroll
                for (int u = 0; u < SG; u++) {
                    const int i = b + u * nthr + tid, t = i / c4, k = i - t * c4;
                    if (i < tot) *(float4 *)(xs + t * xst + zr_xpad(4 * k)) = v[u];
                    if (ZrMvXsum<T>::value) {
                        float s = (v[u].x + v[u].y) + (v[u].z + v[u].w);
                        s += __shfl_xor_sync(0xffffffffu, s, 1);
                        s += __shfl_xor_sync(0xffffffffu, s, 2);
                        if (i < tot && (k & 3) == 0) xs[t * xst + 36 * (k >> 3) + 32 + ((k >> 2) & 1)] = s;
                    }
                }
            }
        } else {
            for (int i = tid; i < n * clen; i += nthr) {
                const int t = i / clen, k = i - t * clen;
                const int src = ZrMvItemOrder<T>::value ? 4 * zr_mm_item_order4(k >> 2) + (k & 3) : k;
                xs[t * xst + zr_xpad(k)] = x[(size_t)t * ldx + c0 + src];
            }
        }
        __syncthreads();
        if (live) {
            // two buffers unrolled so their indices are compile-time constants (registers)
            for (int j = it0; j < ie; j += 2 * step) {
#pragma unroll
                for (int q = 0; q < 2; q++) {
                    const int itq = j + q * step;
                    if (itq < ie) {
                        const int itn = itq + step;
                        if (itn < ie) {
#pragma unroll
                            for (int r = 0; r < R; r++) T::load(rw[r], itn, buf[q ^ 1][r]);
                        }
                        if constexpr (ZrMvCompN<T>::value && N > ZrMmPass<T>::cols) {
                            T::template comp_n<R, N, 0, 4>(buf[q], itq, xs - zr_xpad(c0), xst, acc);
                            typename T::F f2[R];
#pragma unroll
                            for (int r = 0; r < R; r++) f2[r] = zr_mm_opaque(buf[q][r], zero, acc[3][r]);
                            T::template comp_n<R, N, 4, N>(f2, itq, xs - zr_xpad(c0), xst, acc);
                        } else if constexpr (ZrMvCompN<T>::value) {
                            T::template comp_n<R, N>(buf[q], itq, xs - zr_xpad(c0), xst, acc);
                        } else {
#pragma unroll
                            for (int t = 0; t < N; t++)
                                if (t < n) T::template comp<R>(buf[q], itq, xs + t * xst - zr_xpad(c0), acc[t]);
                        }
                    }
                }
            }
            if constexpr (T::EPI <= 8) {  // float types: the row's values after its last whole item
                const int e = ie * T::EPI + lane;
                if (ks == 0 && e < c0 + clen) {
#pragma unroll
                    for (int r = 0; r < R; r++) {
                        const float wv = T::elem(rw[r], e);
#pragma unroll
                        for (int t = 0; t < N; t++)
                            if (t < n) acc[t][r] = fmaf(wv, xs[t * xst + zr_xpad(e - c0)], acc[t][r]);
                    }
                }
            }
        }
    }
    float out = 0.f;  // lane t*R + r: column t of row r, this warp's items
#pragma unroll
    for (int t = 0; t < N; t++) {
#pragma unroll
        for (int r = 0; r < R; r++) {
            if (t < n) {
                const float v = zr_warp_sum(acc[t][r]);
                if (lane == t * R + r) out = v;
            }
        }
    }
    if (S > 1) {
        if (lane < ZR_MM_COLS * R) red_part[warp][lane] = out;
        __syncthreads();
        if (ks != 0 || lane >= ZR_MM_COLS * R) return;
        float s = 0.f;
        for (int k = 0; k < S; k++) s += red_part[warp + k][lane];
        out = s;
    }
    const int t = lane / R, r = lane - t * R;
    if (live && lane < n * R && row0 + r < n_out) {
        float *yp = y + (size_t)t * ldy + row0 + r;
        *yp = beta != 0.f ? fmaf(beta, *yp, out) : out;
    }
}

// The kernel's body for n columns: with T::comp_n one copy per n (the accumulators and the
// decoded words in registers, the loops over columns unrolled), else one for n <= ZR_MM_COLS.
template <class T, int R>
__device__ __forceinline__ void zr_mm_small_n(const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws,
                                              const float *__restrict__ x, int ldx, float *y, int ldy, float beta,
                                              int n_in, int n_out, int n, int split, int chunk) {
    __shared__ float red_part[ZR_MM_MAX_WARPS][ZR_MM_COLS * R];
    if constexpr (ZrMvCompN<T>::value) {
#define ZR_MM_N(N) \
    case N: zr_mm_small<T, R, N>(w, ws, x, ldx, y, ldy, beta, n_in, n_out, N, split, chunk, red_part); break
        switch (n) {
            ZR_MM_N(1); ZR_MM_N(2); ZR_MM_N(3); ZR_MM_N(4); ZR_MM_N(5); ZR_MM_N(6); ZR_MM_N(7); ZR_MM_N(8);
        default: break;  // the host never launches more than ZR_MM_COLS columns
        }
#undef ZR_MM_N
    } else {
        zr_mm_small<T, R, ZR_MM_COLS>(w, ws, x, ldx, y, ldy, beta, n_in, n_out, n, split, chunk, red_part);
    }
}
static_assert(ZR_MM_COLS == 8, "zr_mm_small_n has a case per column count");

// R = 2 rows per warp as the decode's kernels (the traits' registers per item are sized for it)
#define ZR_MM_SMALL(NAME, TRAITS)                                                                               \
    ZR_KERNEL void __launch_bounds__(32 * ZR_MM_MAX_WARPS)                                                      \
        NAME(const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws, const float *__restrict__ x, int ldx, \
             float *y, int ldy, float beta, int n_in, int n_out, int n, int split, int chunk) {                  \
        zr_mm_small_n<TRAITS, 2>(w, ws, x, ldx, y, ldy, beta, n_in, n_out, n, split, chunk);                    \
    }                                                                                                           \
    ZR_KCHECK_FAMILY(mm, NAME);

ZR_MM_SMALL(matmul_small_f32, ZrMvF32)
ZR_MM_SMALL(matmul_small_f16, ZrMvF16)
ZR_MM_SMALL(matmul_small_bf16, ZrMvBF16)
ZR_MM_SMALL(matmul_small_q8_0, ZrMvQ8_0)
ZR_MM_SMALL(matmul_small_q4_0, ZrMvQ4x<ZR_T_Q4_0>)
ZR_MM_SMALL(matmul_small_q4_1, ZrMvQ4x<ZR_T_Q4_1>)
ZR_MM_SMALL(matmul_small_q5_0, ZrMvQ4x<ZR_T_Q5_0>)
ZR_MM_SMALL(matmul_small_q5_1, ZrMvQ4x<ZR_T_Q5_1>)
ZR_MM_SMALL(matmul_small_q2_k, ZrMvQ23K<ZR_T_Q2_K>)
ZR_MM_SMALL(matmul_small_q3_k, ZrMvQ23K<ZR_T_Q3_K>)
ZR_MM_SMALL(matmul_small_q4_k, ZrMvQ4K)
ZR_MM_SMALL(matmul_small_q5_k, ZrMvQ5K)
ZR_MM_SMALL(matmul_small_q6_k, ZrMvQ6K)
