// The KV cache's element type (ZrKvType, src/backend.h): the attention kernels are templates on
// KV = float (ZR_KV_F32) or __half (ZR_KV_F16, llama.cpp's default cache). A value is rounded to
// the nearest half once, when it is stored; every read converts back exactly, so a kernel that
// reads a row sees float(half(x)) whichever kernel wrote it, and the row of the current position
// a decode block takes from shared memory is rounded the same way (put's __float2half_rn) before
// it is used. With KV = float every helper is the identity: the F32 kernels keep their bits.
#pragma once
#include "common.cuh"

template <typename KV> struct ZrKv;

template <> struct ZrKv<float> {
    typedef float4 Raw4;            // four cached values as loaded (16 bytes)
    static constexpr bool HALF = false;
    __device__ static __forceinline__ Raw4 load4(const float *p) { return *(const float4 *)p; }
    __device__ static __forceinline__ float4 wide(Raw4 r) { return r; }
    __device__ static __forceinline__ Raw4 zero4() { return make_float4(0.f, 0.f, 0.f, 0.f); }
    __device__ static __forceinline__ float get(const float *p) { return *p; }
    __device__ static __forceinline__ void put(float *p, float v) { *p = v; }
};

template <> struct ZrKv<__half> {
    typedef uint2 Raw4;             // four halves as loaded (8 bytes)
    static constexpr bool HALF = true;
    __device__ static __forceinline__ Raw4 load4(const __half *p) { return *(const uint2 *)p; }
    __device__ static __forceinline__ float4 wide(Raw4 r) {
        const float2 a = __half22float2(*(const __half2 *)&r.x), b = __half22float2(*(const __half2 *)&r.y);
        return make_float4(a.x, a.y, b.x, b.y);
    }
    __device__ static __forceinline__ Raw4 zero4() { return make_uint2(0u, 0u); }
    __device__ static __forceinline__ float get(const __half *p) { return __half2float(*p); }
    __device__ static __forceinline__ void put(__half *p, float v) { *p = __float2half_rn(v); }
};
