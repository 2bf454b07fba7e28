// What the sampling chain's last kernels share (cu/sample.cu sample_pick_f32, cu/sample_full.cu
// sample_full_f32): the device copy of the sampler's state, its generator, and the end of a step
// (the record, the history, tok_pos), each as src/sampler.c does it.
#pragma once
#include "pick.cuh"

// The state bytes (src/sampler.c zr_sampler_get_state): rng[4] (u64), repeat_last_n, n_hist,
// hist_head (i32), hist[repeat_last_n] (i32).
struct ZrSampleState {
    unsigned long long rng[4];
    int repeat_last_n, n_hist, hist_head;
    int hist[1];
};

__device__ __forceinline__ unsigned long long sample_rotl(unsigned long long x, int k) {
    return (x << k) | (x >> (64 - k));
}

// xoshiro256** (src/sampler.c xoshiro_next).
__device__ __forceinline__ unsigned long long sample_xoshiro(unsigned long long s[4]) {
    const unsigned long long result = sample_rotl(s[1] * 5, 7) * 9;
    const unsigned long long t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = sample_rotl(s[3], 45);
    return result;
}

// Uniform in [0, 1) with 53 random bits (src/sampler.c rng_uniform).
__device__ __forceinline__ double sample_uniform(unsigned long long s[4]) {
    return (double)(sample_xoshiro(s) >> 11) * 0x1.0p-53;
}

// The step's end, by one thread, once the pick is known: the record's token, status, first
// non-finite id and generator; the generator kept in the state (rng: as the step left it); and
// on ZR_PICK_OK the token accepted into the history (zr_sampler_accept, from the repeat_last_n rn,
// next slot head and count n_hist the step read) and tok_pos advanced to the next step's inputs.
// The caller stamps t_end and publishes the record (zr_record_publish) after.
__device__ __forceinline__ void sample_step_end(ZrSampleState *st, ZrPickRecord *rec, int *tok_pos, int pos,
                                                int status, int token, int bad, const unsigned long long rng[4],
                                                int rn, int head, int n_hist) {
    rec->token = status == ZR_PICK_OK ? token : -1;
    rec->status = status;
    rec->nonfinite_at = bad;
    for (int i = 0; i < 4; i++) {
        st->rng[i] = rng[i];
        rec->rng[i] = rng[i];
    }
    if (status == ZR_PICK_OK) {
        if (rn > 0) {
            st->hist[head] = token;
            st->hist_head = (head + 1) % rn;
            if (n_hist < rn) st->n_hist = n_hist + 1;
        }
        tok_pos[0] = token;
        tok_pos[1] = pos + 1;
    }
}
