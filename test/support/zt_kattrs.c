#include "zt_kattrs.h"

#include <string.h>

#include "quant.h"

/* a kernel of `regs` registers a thread: the largest block the register file holds (warps of 256-register units), at most 1024 */
static void set(ZrKernel *kern, int regs) {
    const int warp_regs = (regs * 32 + 255) / 256 * 256, threads = 65536 / warp_regs * 32;
    kern->regs = regs;
    kern->max_threads = threads < 1024 ? threads : 1024;
}

void zt_kernel_attrs(ZrCuKernels *k) {
    for (uint32_t t = 0; t < ZR_TYPE_COUNT; t++) {
        const bool q5_0 = t == ZR_TYPE_Q5_0, q5_1 = t == ZR_TYPE_Q5_1;
        /* the dense products at their cap of 64 (cu/matvec_q_legacy.cu: Q5_0 and Q5_1 too since session 29) */
        set(&k->mv[t], 64);
        set(&k->mvt[t], 64);
        set(&k->mvt_rn[t], 64);
        /* the experts' (cu/moe_matvec.cu; on the integer planes since session 30, ptxas sm_90) */
        set(&k->mv_id[t], q5_0 ? 78 : q5_1 ? 101 : 64);
        /* the flat kernels whose TALL loop spilled at 64 run at 72, Q3_K at 80 (cu/moe_matvec.cu FLAT_NREG) */
        const bool r72 = t == ZR_TYPE_Q4_0 || t == ZR_TYPE_Q4_1 || t == ZR_TYPE_Q2_K || t == ZR_TYPE_Q4_K ||
                         t == ZR_TYPE_Q5_K || t == ZR_TYPE_Q6_K;
        set(&k->mv_idflat[t], q5_0 || t == ZR_TYPE_Q3_K ? 80 : q5_1 ? 117 : r72 ? 72 : 64);
    }
}

ZrCuKernels zt_kernels(int sm_count) {
    ZrCuKernels k;
    memset(&k, 0, sizeof k);
    k.sm_count = sm_count;
    for (uint32_t t = 0; t < ZR_TYPE_COUNT; t++) {
        k.has_mvt[t] = k.has_mv[t] = zr_type_kernel_suffix(t) != NULL;
        k.has_mvt_rn[t] = k.has_mv[t] && ZR_KTYPES_TALL_RN(t);
    }
    zt_kernel_attrs(&k);
    return k;
}
