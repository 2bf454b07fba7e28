// Shared device helpers for zrun kernels. Kernels are `extern "C" __global__` so the host
// finds them by their plain names in the embedded module.
#pragma once
#include <stdint.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define ZR_KERNEL extern "C" __global__

__device__ __forceinline__ float zr_warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float zr_warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
