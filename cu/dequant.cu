// Dequantize rows [row0, row0 + n_rows) of W[n_in, n_out] into an F16 matrix (row r - row0 at
// out + (r - row0)*n_in) for the prefill GEMM (cuBLASLt on F16 operands, F32 accumulation).
// Each thread writes 8 consecutive values (one 16-byte store when n_in is a multiple of 8).
// grid ceil(n_rows*ceil(n_in/8) / 256), block 256.
#include "kernels.cuh"
#include "quant.cuh"

template <int TYPE>
__device__ __forceinline__ void zr_dequant_f16(const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws,
                                               __half *__restrict__ out, int n_in, int n_out, int row0, int n_rows) {
    zr_grid_enter();
    // n_rows * n_in / 8 < 2^32: the host slices matrices to the F16 buffer (at most 2^31 values)
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned per_row = (unsigned)(n_in + 7) / 8;
    if (t >= (unsigned)n_rows * per_row) return;
    const int rr = (int)(t / per_row), e0 = (int)(t % per_row) * 8;
    __half *o = out + (size_t)rr * n_in + e0;
    if ((n_in & 7) == 0) {
        uint32_t v[4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const __half2 h = __floats2half2_rn(zr_dq<TYPE>(w, ws, n_in, n_out, row0 + rr, e0 + 2 * k),
                                                zr_dq<TYPE>(w, ws, n_in, n_out, row0 + rr, e0 + 2 * k + 1));
            v[k] = *(const uint32_t *)&h;
        }
        *(uint4 *)o = make_uint4(v[0], v[1], v[2], v[3]);
    } else {
        for (int k = 0; k < 8 && e0 + k < n_in; k++) o[k] = __float2half_rn(zr_dq<TYPE>(w, ws, n_in, n_out, row0 + rr, e0 + k));
    }
}

#define ZR_DEQUANT(NAME, TYPE)                                                                           \
    ZR_KERNEL void __launch_bounds__(256) NAME(const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws,  \
                                               __half *__restrict__ out, int n_in, int n_out, int row0, int n_rows) { \
        zr_dequant_f16<TYPE>(w, ws, out, n_in, n_out, row0, n_rows);                                     \
    }                                                                                                    \
    ZR_KCHECK_FAMILY(dq, NAME);

// dequant_<kernel>_f16 for every type with kernels in the type table but F16, which the prefill
// GEMM reads as it is. The exception without a table column: ZR_DQ_SKIP_<E> is a comma for F16
// only, which moves the kernel out of ZR_DQ_THIRD's third argument (for the other types it is
// an unknown name, and the third argument is the kernel).
#define ZR_DQ_SKIP_F16 ,
#define ZR_DQ_THIRD(a, b, c, ...) c
#define ZR_DQ_UNLESS(skip, kernel) ZR_DQ_THIRD(skip, , kernel, ~)
#define ZR_TYPE(id, E, name, block, bytes, kernel, item, main, side) \
    ZR_DQ_UNLESS(ZR_DQ_SKIP_##E, ZR_DEQUANT(dequant_##kernel##_f16, ZR_T_##E))
#include "../src/zr_types.def"
