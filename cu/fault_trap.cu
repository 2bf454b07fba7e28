// ZRUN_FAULT=sticky: a kernel that traps, giving a real sticky error (CUDA_ERROR_LAUNCH_FAILED)
// that poisons the context, so the recovery path is tested against the driver, not a fake.
#include "common.cuh"

ZR_KERNEL void zr_fault_trap(void) {
    zr_grid_enter();
    __trap();
}
