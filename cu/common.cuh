// Shared device helpers for zrun kernels. Kernels are `extern "C" __global__` so the host
// finds them by their plain names in the embedded module.
#pragma once
#include <stdint.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define ZR_KERNEL extern "C" __global__

// Programmatic dependent launch (sm_90+): the decode graph may start a kernel before the one
// before it has finished (src/cuda/graph.c, programmatic edges). Every kernel therefore calls
// zr_grid_wait() before it touches memory an earlier kernel writes or reads (activations,
// KV cache, positions, outputs); only reads of constant data (weights) may come before it.
// zr_grid_wait() returns once the previous kernel has completed and its writes are visible; it
// is a no-op when the kernel was launched normally or on an older GPU. zr_grid_release() lets
// the next kernel be scheduled (its blocks then wait in their own zr_grid_wait()); calling it
// right after the wait keeps at most one kernel waiting behind a running one.
__device__ __forceinline__ void zr_grid_wait(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void zr_grid_release(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Both, in that order: the first statement of a kernel that reads nothing before the wait.
__device__ __forceinline__ void zr_grid_enter(void) {
    zr_grid_wait();
    zr_grid_release();
}

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
