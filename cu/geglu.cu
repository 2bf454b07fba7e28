// GeGLU (gemma's FFN, issue 14): out[i][j] = gelu(gate[i][j]) * up[i][j] with GELU's tanh form
// 0.5 a (1 + tanh(sqrt(2/pi) a (1 + 0.044715 a^2))), the gate and up halves side by side in one
// row of gu (gate at gu + i*stride, up at gate + n_ff); out row i at out + i*n_ff.
// geglu_f32_f16 writes the F16 operand of the down GEMM (the same F32 arithmetic, then rounded).
// grid (ceil(n_ff/256), M), block 256.
#include "common.cuh"
#include "gelu.cuh"

ZR_KERNEL void __launch_bounds__(256)
    geglu_f32(const float *__restrict__ gu, int stride, float *__restrict__ out, int n_ff) {
    zr_grid_enter();
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n_ff) return;
    const float *g = gu + (size_t)blockIdx.y * stride;
    out[(size_t)blockIdx.y * n_ff + j] = zr_gelu_tanh(g[j]) * g[n_ff + j];
}

ZR_KERNEL void __launch_bounds__(256)
    geglu_f32_f16(const float *__restrict__ gu, int stride, __half *__restrict__ y, int n_ff) {
    zr_grid_enter();
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n_ff) return;
    const float *g = gu + (size_t)blockIdx.y * stride;
    y[(size_t)blockIdx.y * n_ff + j] = __float2half_rn(zr_gelu_tanh(g[j]) * g[n_ff + j]);
}
