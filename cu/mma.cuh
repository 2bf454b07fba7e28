// Tensor-core pieces shared by the kernels that use mma.sync (attention_prefill.cu, moe_mm.cu,
// matvec_mma.cu): F16 operands from shared memory through ldmatrix, F32 accumulation, and the
// asynchronous global -> shared copies that feed them. Needs sm_80+.
#pragma once
#include <cuda_fp16.h>
#include <stdint.h>

// 16 bytes global -> shared by cp.async (L2 only): n (0..16) bytes read, the rest zero-filled (n 0:
// src unread)
__device__ __forceinline__ void zr_cp16(void *dst, const void *src, int n) {
    const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(n) : "memory");
}
// the same, all 16 bytes or (!valid) none
template <class E> __device__ __forceinline__ void zr_cp16_if(E *dst, const E *src, bool valid) {
    const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void zr_cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// waits until at most N of this thread's committed groups are in flight
template <int N> __device__ __forceinline__ void zr_cp_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

// Two floats as one F16 pair: .x (the low 16 bits) = lo.
__device__ __forceinline__ uint32_t zr_mma_pack(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *(const uint32_t *)&h;
}

// d[0..3] += A (16x16, row) * B (16x8, col): F16 operands, F32 accumulation.
__device__ __forceinline__ void zr_mma_16816(float *d, const uint32_t *a, uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four 8x8 F16 matrices from shared memory: lane l gives the address of row l % 8 of matrix l / 8.
__device__ __forceinline__ void zr_ldmatrix_x4(uint32_t *r, const __half *p) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

// The same, transposed: register j gets, in lane (g = lane/4, c = lane%4), elements (row 2c,
// col g) and (row 2c+1, col g) of matrix j: the B fragment of a [k][n] row-major tile.
__device__ __forceinline__ void zr_ldmatrix_x4_t(uint32_t *r, const __half *p) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
