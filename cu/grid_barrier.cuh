// A barrier over every block of a launch, for persistent kernels whose grid is at most the
// blocks that can be resident at once (the host proves it with the occupancy API before it
// launches one: src/cuda/moe.c). Used by cu/moe_ffn.cu between the phases of a MoE layer.
//
// bar[0] counts the blocks arrived at the current barrier, bar[1] is the generation: the barriers
// passed so far, monotone (it wraps; only equality is tested). The last block to arrive sets the
// count back to 0 and then releases the next generation, so the count is 0 between barriers and
// between launches: a graph replays the kernel without a reset (both words 0 at allocation).
// Memory order: the block's writes happen before its arrival (bar.sync, then a fence and the
// acq_rel add by thread 0); a waiting block reads the generation with acquire semantics, so
// everything written before any block's arrival is visible to the whole block after the
// barrier -- to loads that go through L2 (ld.global.cg, or plain loads): the non-coherent path
// (__ldg, ld.global.nc) is for data that no block of the launch writes.
// A block spins with __nanosleep; after ~2^25 polls (tens of seconds: a grid that is not
// resident, which the host rules out) it traps instead of hanging the GPU.
#pragma once
#include "common.cuh"

__device__ __forceinline__ unsigned zr_ld_acquire_u32(const unsigned *p) {
    unsigned v;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
#else
    v = *(const volatile unsigned *)p;
    __threadfence();
#endif
    return v;
}

__device__ __forceinline__ unsigned zr_ld_relaxed_u32(const unsigned *p) {
    unsigned v;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
#else
    v = *(const volatile unsigned *)p;
#endif
    return v;
}

__device__ __forceinline__ void zr_grid_barrier(unsigned *bar) {
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned *count = bar, *gen = bar + 1;
        const unsigned g = zr_ld_relaxed_u32(gen); // read before arriving: the barrier's own generation
        __threadfence();
        unsigned old;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
        asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(count) : "memory");
#else
        old = atomicAdd(count, 1u);
#endif
        if (old + 1 == gridDim.x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
            asm volatile("st.relaxed.gpu.global.u32 [%0], 0;" ::"l"(count) : "memory");
            asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(gen), "r"(g + 1u) : "memory");
#else
            *(volatile unsigned *)count = 0u;
            __threadfence();
            *(volatile unsigned *)gen = g + 1u;
#endif
        } else {
            unsigned ns = 8, polls = 0;
            while (zr_ld_acquire_u32(gen) == g) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
                __nanosleep(ns);
#endif
                if (ns < 128) ns *= 2;
                if (++polls == (1u << 25)) __trap();
            }
        }
    }
    __syncthreads();
}
