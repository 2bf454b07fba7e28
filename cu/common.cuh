// Shared device helpers for zrun kernels. Kernels are `extern "C" __global__` so the host
// finds them by their plain names in the embedded module.
#pragma once
#include <stdint.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#include "timeline.cuh"

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
#ifdef ZR_TIMELINE
    const bool stamp = zr_tl_first();
    const uint64_t t0 = stamp ? zr_tl_now() : 0;
    asm volatile("griddepcontrol.wait;" ::: "memory");
    if (stamp) zr_tl_stamp(t0, zr_tl_now());
#else
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
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

// zr_grid_enter() after a prologue of weight loads that must stay in flight during the wait.
// ptxas schedules griddepcontrol.wait freely within its basic block, and once the L2 prefetch
// code was deleted it hoisted the wait above such loads in the F32/F16/BF16/Q4_0/Q4_1 matvecs
// (SASS: ACQBULK first, the LDGs after it), so the loads waited for the previous kernel
// instead of overlapping its tail (H100 1B Q4_0 tg128 graph 1821 -> 1639 t/s). An instruction
// with a side effect between the two pins the order: one L2 prefetch of `p` (an address the
// kernel reads anyway) by the block's first thread. Every thread prefetching one line made a
// hot spot (1818 -> 1396 t/s), one lane per warp too (1409); one thread per block costs
// nothing measurable (1849 vs 1824; cu/PERF.md, 2026-11-25). tools/check_grid_wait.sh checks
// the order in the built SASS.
__device__ __forceinline__ void zr_grid_enter_after_loads(const void *p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (threadIdx.x == 0) asm volatile("prefetch.global.L2 [%0];" ::"l"(__cvta_generic_to_global(p)));
#endif
    zr_grid_enter();
}

// log2 of a power of two, at compile time
__host__ __device__ constexpr int zr_log2(int v) { return v > 1 ? 1 + zr_log2(v >> 1) : 0; }

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
