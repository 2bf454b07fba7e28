// Device timestamps of the decode chain, for the timeline of issue 16 (where a step's time goes
// between kernels, and how much the programmatic launches overlap). Only in the timeline build
// (meson -Dtimeline=true: nvcc -DZR_TIMELINE); otherwise the hooks are empty and every kernel is
// unchanged. There zr_grid_wait() (common.cuh), which every kernel calls before it reads what the
// kernel before it wrote, has the first thread of each block stamp %globaltimer before and after
// griddepcontrol.wait, with the launch's %gridid and its multiprocessor, into a ring per
// multiprocessor (src/cuda/timeline_rec.h). The host reads the rings (src/cuda/timeline.c,
// zrun-cuda-timing -T) and tools/timeline.py turns them into each kernel's share of a step.
// The kernels that matter most for the step (the products, the decode attention) also stamp when
// each block's last warp leaves: ZR_TL_EXIT, the first statement of the kernel, is an object whose
// destructor runs on every way out; zr_matvec stamps two phases of each block too (ZR_TL_MARK: x
// staged, the first tile's items summed), and the CUDA-core decode attention two of its own (q
// ready, the warps' sums in shared memory). The stamps cost each block a few atomics and a store:
// the timeline build is a diagnostic, its step 5-9% slower than the plain build's (cu/PERF.md).
#pragma once
#include <stdint.h>

#include "../src/cuda/timeline_rec.h"

#ifdef ZR_TIMELINE
// unmangled, for cuModuleGetGlobal (one definition: the kernels are one unity translation unit)
extern "C" {
__device__ ZrTlRec zr_tl_recs[ZR_TL_SMS * ZR_TL_PER_SM];
__device__ unsigned zr_tl_count[ZR_TL_SMS];
}

__device__ __forceinline__ bool zr_tl_first(void) { return threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0; }

__device__ __forceinline__ uint64_t zr_tl_now(void) {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// The block's record, for ZR_TL_EXIT and ZR_TL_MARK, written by the first thread with the stamp,
// and a tag of the launch and block beside it (0: no stamp), so the marks of that same thread
// find their record in shared memory and wait on no load.
__shared__ unsigned zr_tl_slot, zr_tl_tag;

__device__ __forceinline__ uint64_t zr_tl_grid(void) {
    uint64_t grid;
    asm volatile("mov.u64 %0, %%gridid;" : "=l"(grid));
    return grid;
}

// the block's linear index in its grid
__device__ __forceinline__ unsigned zr_tl_block(void) {
    return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
}

__device__ __forceinline__ unsigned zr_tl_tag_of(uint64_t grid) {
    return ((unsigned)grid ^ (unsigned)(grid >> 32) ^ (zr_tl_block() * 2654435761u)) | 1u;
}

__device__ __forceinline__ void zr_tl_stamp(uint64_t t_enter, uint64_t t_wait) {
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    const uint64_t grid = zr_tl_grid();
    if (sm >= ZR_TL_SMS) {
        zr_tl_tag = 0;
        return;
    }
    const unsigned i = atomicAdd(&zr_tl_count[sm], 1u) % ZR_TL_PER_SM;
    ZrTlRec r;
    r.grid = grid;
    r.t_enter = t_enter;
    r.t_wait = t_wait;
    r.t_exit = 0;
    r.t_mark[0] = r.t_mark[1] = 0;
    r.block = zr_tl_block();
    r.sm = sm;
    zr_tl_recs[sm * ZR_TL_PER_SM + i] = r;
    zr_tl_slot = sm * ZR_TL_PER_SM + i;
    *(volatile unsigned *)&zr_tl_tag = zr_tl_tag_of(grid);
}

// Each warp's first lane raises its block's t_exit as it leaves: a reduction on the record its
// first thread stamped, found in shared memory (no load, nothing waits). A warp that leaves before
// that stamp (a block past its part's tiles, or past the sequence, returns before the grid wait)
// may find this graph node's block's slot and tag of the step before there and raise that old
// record: tools/timeline.py takes no exit later than 400 µs after its wait (STALE_NS there: a
// block's own run is far shorter; a step of the models the timeline is for, far longer).
struct ZrTlExit {
    __device__ ~ZrTlExit() {
        if ((threadIdx.x & 31) != 0 || *(volatile unsigned *)&zr_tl_tag != zr_tl_tag_of(zr_tl_grid())) return;
        const unsigned i = *(volatile unsigned *)&zr_tl_slot;
        if (i < ZR_TL_SMS * ZR_TL_PER_SM)
            atomicMax((unsigned long long *)&zr_tl_recs[i].t_exit, (unsigned long long)zr_tl_now());
    }
};
#define ZR_TL_EXIT ZrTlExit zr_tl_exit_

// The first thread stamps phase k of its block; it stamped the grid wait before (the callers
// are after it), so its own slot is there.
__device__ __forceinline__ void zr_tl_mark(int k) {
    if (!zr_tl_first() || *(volatile unsigned *)&zr_tl_tag != zr_tl_tag_of(zr_tl_grid())) return;
    const unsigned i = *(volatile unsigned *)&zr_tl_slot;
    if (i < ZR_TL_SMS * ZR_TL_PER_SM) zr_tl_recs[i].t_mark[k] = zr_tl_now();
}
#define ZR_TL_MARK(k) zr_tl_mark(k)
#else
#define ZR_TL_EXIT (void)0
#define ZR_TL_MARK(k) (void)0
#endif
