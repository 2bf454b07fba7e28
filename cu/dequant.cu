// Dequantize rows [row0, row0 + n_rows) of W[n_in, n_out] into an F16 matrix (row r - row0 at
// out + (r - row0)*n_in) for the prefill GEMM (cuBLASLt on F16 operands, F32 accumulation).
// Each thread writes 8 consecutive values (one 16-byte store when n_in is a multiple of 8).
// grid ceil(n_rows*ceil(n_in/8) / 256), block 256.
#include "kernels.cuh"
#include "quant.cuh"

template <int TYPE>
__device__ __forceinline__ void zr_dequant_f16(const uint8_t *__restrict__ w, const uint8_t *__restrict__ ws,
                                               __half *__restrict__ out, int n_in, int n_out, int row0, int n_rows) {
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

ZR_DEQUANT(dequant_f32_f16, ZR_T_F32)
ZR_DEQUANT(dequant_bf16_f16, ZR_T_BF16)
ZR_DEQUANT(dequant_q8_0_f16, ZR_T_Q8_0)
ZR_DEQUANT(dequant_q4_0_f16, ZR_T_Q4_0)
ZR_DEQUANT(dequant_q4_1_f16, ZR_T_Q4_1)
ZR_DEQUANT(dequant_q5_0_f16, ZR_T_Q5_0)
ZR_DEQUANT(dequant_q5_1_f16, ZR_T_Q5_1)
ZR_DEQUANT(dequant_q2_k_f16, ZR_T_Q2_K)
ZR_DEQUANT(dequant_q3_k_f16, ZR_T_Q3_K)
ZR_DEQUANT(dequant_q4_k_f16, ZR_T_Q4_K)
ZR_DEQUANT(dequant_q5_k_f16, ZR_T_Q5_K)
ZR_DEQUANT(dequant_q6_k_f16, ZR_T_Q6_K)
