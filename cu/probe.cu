// read_bw_probe: streams a buffer and folds it into one word per block so the loads cannot
// be elided; zrun bench times it to measure the device's read bandwidth.
#include "common.cuh"

ZR_KERNEL void read_bw_probe(const uint4 *__restrict__ src, uint64_t n_vec, uint32_t *__restrict__ sink) {
    zr_grid_enter();
    uint32_t acc = 0;
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n_vec;
         i += (uint64_t)gridDim.x * blockDim.x) {
        uint4 v = src[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9e3779b9u) sink[blockIdx.x] = acc;  // practically never: keeps the loads live
}
