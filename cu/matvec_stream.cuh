// The streaming decode matrix-vector product (sm_90): y = W x' (+ add), the same product, modes
// and device weight layout as zr_matvec (cu/matvec.cuh), but the weights reach the threads
// through shared memory instead of registers.
//
// Why: zr_matvec is latency-bound. Each lane keeps its next item in registers, so the bytes in
// flight per SM are capped by registers (cu/PERF.md run 3: 16-32 KiB at 64 registers and 32
// warps/SM, where ~40 KiB are needed at 3 TB/s). Here one thread of the block issues bulk copies
// (cp.async.bulk, the copy engine) of whole stages of weights into shared memory, completing on
// an mbarrier per stage, `stages` deep (48-100 KiB in flight per block), while every thread
// computes from the stage that has arrived; registers hold only accumulators. The first stages
// are requested before zr_grid_enter() (weights only), so with programmatic dependent launch
// they are in flight while the previous kernel finishes, and the x staging overlaps them too.
//
// Work: the rows form tiles of RB rows (GLU: RB/2 gate rows and the matching RB/2 up rows);
// block b takes tiles b, b + gridDim.x, ... (the host sizes the grid to the blocks that fit at
// once, so the pipeline runs on across tiles). A stage is KC elements of each of the tile's RB
// rows: RB row pieces of the main stream plus, for Q8_0/Q4_0, RB pieces of the side stream
// (scales), RB (+ RB) bulk copies. Thread t computes item t % CI (CI = KC / EPI items per row
// piece) of RT rows of the stage (the tile's rows t / CI + SLOTS*j), reading the x values of the
// item once for all RT rows; at the end of a tile the partial sums of a row are added warp by
// warp in a fixed order (deterministic). Arithmetic per item is the register kernel's
// (T::comp), so both kernels compute the same dot products.
//
// Needs (the host checks, zr_cuf_mvs_fits): n_in % 256 == 0 (every bulk copy then starts at a
// 16-byte-aligned address and moves a multiple of 16 bytes), main/side 16-byte aligned, GLU:
// n_out even. Dynamic shared memory: stages * stage bytes (RB * (main + side bytes of KC
// elements)) + the padded x, zr_mv_smem_bytes(n_in). blockDim.x = ZR_MS_THREADS.
#pragma once
#include "matvec.cuh"

#define ZR_MS_THREADS 256
#define ZR_MS_MAX_STAGES 8

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define ZR_MS_HAVE_BULK 1
#else
#define ZR_MS_HAVE_BULK 0
#endif

__device__ __forceinline__ uint32_t zr_smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

#if ZR_MS_HAVE_BULK
__device__ __forceinline__ void zr_mbar_init(uint64_t *bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(zr_smem_addr(bar)), "r"(count) : "memory");
}

// makes the initialized barriers visible to the copy engine (async proxy)
__device__ __forceinline__ void zr_mbar_fence_init(void) {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// this thread's arrival, announcing `bytes` of copies that complete on the barrier
__device__ __forceinline__ void zr_mbar_expect(uint64_t *bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(zr_smem_addr(bar)), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void zr_mbar_wait(uint64_t *bar, uint32_t parity) {
    uint32_t done;
    do {
        asm volatile(
            "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
            : "=r"(done)
            : "r"(zr_smem_addr(bar)), "r"(parity)
            : "memory");
    } while (!done);
}

// bytes (a multiple of 16) from global src to shared dst (both 16-byte aligned)
__device__ __forceinline__ void zr_bulk_load(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     zr_smem_addr(dst)),
                 "l"(src), "r"(bytes), "r"(zr_smem_addr(bar))
                 : "memory");
}
#endif

// Per type: main-stream bytes of 2 elements (MB2), side-stream bytes of 32 elements (SB32),
// and the register kernel's item (T::F) read from a stage in shared memory: c-th 16-byte item
// of a row piece m, its scales in the row's side piece s.
template <int TYPE>
struct ZrMsType;

template <>
struct ZrMsType<ZR_T_F16> {
    using T = ZrMvF16;
    static constexpr int MB2 = 4, SB32 = 0;
    __device__ static void get(const uint8_t *m, const uint8_t *, int c, T::F &f) { f.w = ((const uint4 *)m)[c]; }
};

template <>
struct ZrMsType<ZR_T_Q8_0> {
    using T = ZrMvQ8_0;
    static constexpr int MB2 = 2, SB32 = 2;
    __device__ static void get(const uint8_t *m, const uint8_t *s, int c, T::F &f) {
        f.q = ((const uint4 *)m)[c];
        f.d = __half2float(((const __half *)s)[c >> 1]);
    }
};

template <>
struct ZrMsType<ZR_T_Q4_0> {
    using T = ZrMvQ4x<ZR_T_Q4_0>;
    static constexpr int MB2 = 1, SB32 = 2;
    __device__ static void get(const uint8_t *m, const uint8_t *s, int c, T::F &f) {
        f.q = ((const uint4 *)m)[c];
        f.d = __half2float(((const __half *)s)[c]);
        f.m = 0.f;
        f.qh = 0;
    }
};

template <int TYPE, int RB, int KC>
__device__ __forceinline__ void zr_matvec_stream(const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws,
                                                 const float *__restrict__ x, float *y, const float *add,
                                                 const float *__restrict__ norm_w, float eps, int n_in, int n_out,
                                                 int mode, int stages) {
#if ZR_MS_HAVE_BULK
    using Ty = ZrMsType<TYPE>;
    using T = typename Ty::T;
    constexpr int NT = ZR_MS_THREADS, EPI = T::EPI, CI = KC / EPI, SLOTS = NT / CI, RT = RB / SLOTS, H = RB / 2;
    constexpr int MBK = KC / 2 * Ty::MB2, SBK = KC / 32 * Ty::SB32, STAGE = RB * (MBK + SBK);
    static_assert(KC % 256 == 0 && CI >= 32 && NT % CI == 0 && RB % SLOTS == 0 && RB % 2 == 0, "stage geometry");
    extern __shared__ float4 zr_ms_smem[];
    __shared__ uint64_t bar[ZR_MS_MAX_STAGES];     // stage i's copies have landed
    __shared__ float red_ss[NT / 32];               // per-warp sums of squares (RMSNorm)
    __shared__ float red[2][NT / 32][RT];           // per-warp row sums of a tile (two tiles alternate)
    uint8_t *wbuf = (uint8_t *)zr_ms_smem;           // [stages][RB main pieces | RB side pieces]
    float *xs = (float *)(wbuf + (size_t)stages * STAGE);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int in_mode = mode & ZR_MV_IN;
    const bool glu = (mode & ZR_MV_GLU) != 0;
    const int n_res = glu ? n_out / 2 : n_out, per_tile = glu ? H : RB;
    const int n_tiles = (n_res + per_tile - 1) / per_tile, nk = (n_in + KC - 1) / KC;
    const int my_tiles = (int)blockIdx.x < n_tiles ? (n_tiles - 1 - (int)blockIdx.x) / (int)gridDim.x + 1 : 0;
    const int total = my_tiles * nk;  // stages this block streams
    const size_t mrow = (size_t)n_in / 2 * Ty::MB2, srow = (size_t)n_in / 32 * Ty::SB32;
    // requests stage s (tile s / nk of this block, piece s % nk of its rows) into buffer s % stages
    auto issue = [&](int s) {
        const int b = s % stages, tile = (int)blockIdx.x + (s / nk) * (int)gridDim.x, k0 = (s % nk) * KC;
        const int kc = min(KC, n_in - k0);
        const uint32_t mb = (uint32_t)(kc / 2 * Ty::MB2), sb = (uint32_t)(kc / 32 * Ty::SB32);
        uint8_t *dst = wbuf + (size_t)b * STAGE;
        zr_mbar_expect(&bar[b], RB * (mb + sb));
#pragma unroll 1
        for (int j = 0; j < RB; j++) {
            // rows past the end repeat the last one (their results are not written)
            const int row = glu ? min(tile * H + j % H, n_res - 1) + (j < H ? 0 : n_res) : min(tile * RB + j, n_out - 1);
            zr_bulk_load(dst + j * MBK, w + row * mrow + (size_t)k0 / 2 * Ty::MB2, mb, &bar[b]);
            if (Ty::SB32) zr_bulk_load(dst + RB * MBK + j * SBK, ws + row * srow + k0 / 32 * Ty::SB32, sb, &bar[b]);
        }
    };
    if (tid == 0) {
        for (int i = 0; i < stages; i++) zr_mbar_init(&bar[i], 1);
        zr_mbar_fence_init();
        for (int s = 0; s < stages && s < total; s++) issue(s);
    }
    // everything above reads weights only; activations, add and y belong to earlier kernels
    zr_grid_enter();
    float ss = zr_mv_stage_x(x, norm_w, xs, n_in, in_mode, tid, NT);
    if (in_mode == ZR_MV_RMSNORM) {
        ss = zr_warp_sum(ss);
        if (lane == 0) red_ss[warp] = ss;
    }
    __syncthreads();  // x staged, barriers initialized
    float inv = 1.f;
    if (in_mode == ZR_MV_RMSNORM) {
        float tot = 0.f;
        for (int k = 0; k < NT / 32; k++) tot += red_ss[k];
        inv = 1.0f / sqrtf(tot / (float)n_in + eps);
    }
    const int c = tid % CI, slot = tid / CI;
    float acc[RT];
#pragma unroll
    for (int j = 0; j < RT; j++) acc[j] = 0.f;
    for (int s = 0; s < total; s++) {
        const int b = s % stages, k = s % nk, k0 = k * KC;
        zr_mbar_wait(&bar[b], (uint32_t)(s / stages) & 1);
        if (c < min(KC, n_in - k0) / EPI) {
            const uint8_t *st = wbuf + (size_t)b * STAGE;
            typename T::F f[RT];
#pragma unroll
            for (int j = 0; j < RT; j++) {
                const int r = slot + j * SLOTS;
                Ty::get(st + r * MBK, st + RB * MBK + r * SBK, c, f[j]);
            }
            T::template comp<RT>(f, k0 / EPI + c, xs, acc);
        }
        const bool last = k == nk - 1;
        const int tp = (s / nk) & 1;
        if (last) {
#pragma unroll
            for (int j = 0; j < RT; j++) {
                const float v = zr_warp_sum(acc[j]);
                if (lane == 0) red[tp][warp][j] = v;
                acc[j] = 0.f;
            }
        }
        __syncthreads();  // buffer b is free again; a finished tile's sums are in red[tp]
        if (tid == 0 && s + stages < total) issue(s + stages);
        if (last && tid < per_tile) {
            const int tile = (int)blockIdx.x + (s / nk) * (int)gridDim.x;
            // tile row r: slot r % SLOTS, accumulator r / SLOTS, in the CI/32 warps of its slot
            auto row_sum = [&](int r) {
                const int w0 = (r % SLOTS) * (CI / 32);
                float t = 0.f;
#pragma unroll
                for (int q = 0; q < CI / 32; q++) t += red[tp][w0 + q][r / SLOTS];
                return t * inv;
            };
            const int res = tile * per_tile + tid;
            if (res < n_res) {
                const float v = row_sum(tid);
                if (glu) y[res] = zr_silu(v) * row_sum(tid + H);
                else y[res] = v + (add ? add[res] : 0.f);
            }
        }
    }
#else
    // sm_80/86/89 have no bulk copy engine: the host never launches these kernels there
    (void)w; (void)ws; (void)x; (void)y; (void)add; (void)norm_w; (void)eps; (void)n_in; (void)n_out; (void)mode;
    (void)stages;
    zr_grid_enter();
    __trap();
#endif
}

#define ZR_MATVEC_STREAM(NAME, TYPE, RB, KC)                                                                \
    ZR_KERNEL void __launch_bounds__(ZR_MS_THREADS, 2)                                                      \
        NAME(const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws, const float *__restrict__ x,      \
             float *y, const float *add, const float *__restrict__ norm_w, float eps, int n_in, int n_out,      \
             int mode, int stages) {                                                                         \
        zr_matvec_stream<TYPE, RB, KC>(w, ws, x, y, add, norm_w, eps, n_in, n_out, mode, stages);             \
    }
