// Gemma 2's final soft-cap (issue 14), in place over n values (the embedding scale is in the
// lookup: cu/embed.cu):
// softcap_f32: x = tanh(x / cap) * cap (gemma2's final logit soft-cap, as the CPU reference and
//   llama.cpp: scale by 1/cap, tanh, scale by cap). grid ceil(n/256), block 256.
#include "common.cuh"

ZR_KERNEL void __launch_bounds__(256) softcap_f32(float *x, float cap, int n) {
    zr_grid_enter();
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = tanhf(x[i] * (1.0f / cap)) * cap;
}
