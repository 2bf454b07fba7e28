// What the decode step's tails share (cu/argmax.cu, cu/sample.cu): the order key of a logit and
// the record they write (src/cuda/pick_record.h).
#pragma once
#include "../src/cuda/pick_record.h"

// A candidate as a 64-bit key: order-preserving float bits above the complemented id, so "larger
// key" is "larger logit, then lower id" (src/sampler.c's total order). NaN is -inf; -0 and +0 tie.
__device__ __forceinline__ unsigned long long argmax_key(float v, int i) {
    unsigned int b = __float_as_uint(v);
    if ((b & 0x7fffffffu) > 0x7f800000u) b = 0xff800000u; // NaN -> -inf
    if ((b << 1) == 0) b = 0;                             // -0 -> +0: they tie
    b = (b & 0x80000000u) ? ~b : (b | 0x80000000u);       // larger float, larger key
    return ((unsigned long long)b << 32) | (unsigned int)~(unsigned int)i;
}

// The largest key and the smallest id m of a warp's lanes, in every lane (a butterfly).
__device__ __forceinline__ void zr_warp_key_bad(unsigned long long &k, int &m) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const unsigned long long ko = __shfl_xor_sync(0xffffffffu, k, o);
        const int mo = __shfl_xor_sync(0xffffffffu, m, o);
        k = ko > k ? ko : k;
        m = mo < m ? mo : m;
    }
}

// The key's id.
__device__ __forceinline__ int argmax_key_id(unsigned long long k) { return (int)~(unsigned int)(k & 0xffffffffu); }

// The key's logit: the float it was made of, but -0 comes back +0 (they tie) and NaN -inf. Where
// the logit only meets subtraction from or comparison with other values (the sampling chain's
// maximum: l - max, max + log(min_p), max - offset), -0 and +0 give the same bits.
__device__ __forceinline__ float argmax_key_value(unsigned long long k) {
    const unsigned int h = (unsigned int)(k >> 32);
    return __uint_as_float((h & 0x80000000u) ? (h & 0x7fffffffu) : ~h);
}

// The record's pos, written last, after every other field is visible to the host (a ring in
// mapped pinned memory): a host that sees pos == the step's position reads a whole record.
__device__ __forceinline__ void zr_record_publish(ZrPickRecord *r, int pos) {
    __threadfence_system();
    *(volatile int *)&r->pos = pos;
}

// Nanoseconds of the device's global timer (the record's timestamps).
__device__ __forceinline__ unsigned long long zr_globaltimer(void) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
