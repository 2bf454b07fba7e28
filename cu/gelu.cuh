// GELU in its tanh form (gemma's gelu_pytorch_tanh): 0.5 a (1 + tanh(sqrt(2/pi) a (1 + 0.044715
// a^2))), written once for the GeGLU kernels (geglu.cu) and the matrix-vector products that
// gate with it (matvec.cuh, ZR_MV_GELU).
#pragma once

__device__ __forceinline__ float zr_gelu_tanh(float a) {
    return 0.5f * a * (1.0f + tanhf(0.79788456080286535587989211986876f * a * (1.0f + 0.044715f * a * a)));
}
