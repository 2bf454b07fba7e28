/* The kernel registry: the kernels of cu/ by name, with the parameter sizes of cu/kernels.def
 * (the table the kernels themselves are checked against at build time, so host and device
 * cannot disagree on a launch's parameter bytes). The forward pass's kernels are looked up once
 * into ZrCuKernels; others by name (zr_kreg_load). */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "cuda/module.h"
#include "quant.h"

/* The grouped expert product's block (cu/moe_mm.cu): weight rows a block, and its dynamic shared
 * memory for tiles of bn tokens: two buffers of 128 weight rows and bn token rows, 72 halves each. */
#define ZR_CUF_MOE_MM_ROWS 128
#define ZR_CUF_MOE_MM_SMEM(bn) ((2 * ZR_CUF_MOE_MM_ROWS + 2 * (bn)) * 72 * 2)

/* The mixed-type products of cu/kernels.def (ZR_KMIX lines), in its order: ZR_KMIX_q4_k_q6_k, ... */
enum {
#define ZR_KMIX(a, b, params) ZR_KMIX_##a##_##b,
#include "cu/kernels.def"
    ZR_KMIX_COUNT
};

/* attn_prefill_f16_d256's dynamic shared memory: K and V tiles of 32 keys and Q's 64 rows, rows
 * of 264 halves (cu/attention_prefill.cu checks the figure) */
#define ZR_K_ATTN_PREFILL_D256_SMEM 67584
/* attn_decode_mma_d<D>_kvh's dynamic shared memory: 4 warps' rings of 4 slots of 16 K and 16 V
 * rows of D + 8 halves (cu/attention_decode_mma.cu checks the figure) */
#define ZR_K_ATTN_DECODE_MMA_SMEM(D) (4 * 4 * 2 * 16 * ((D) + 8) * 2)

/* Every kernel of the forward pass, one field per line of cu/kernels.def: a ZR_KFIXED kernel is
 * a ZrKernel, a ZR_KFAMILY is a ZrKernel per weight type (indexed by ZrType) with has_<field>
 * saying which types have one. */
typedef struct ZrCuKernels {
#define ZR_KFAMILY(field, prefix, suffix, types, params) \
    ZrKernel field[ZR_TYPE_COUNT];                        \
    bool has_##field[ZR_TYPE_COUNT];
#define ZR_KFIXED(field, name, params) ZrKernel field;
#include "cu/kernels.def"
    int sm_count; /* the device's multiprocessors (matrix-vector grid shapes) */
    size_t mm_smem; /* dynamic shared memory the small prefill products may take (cuda/mm_small.h) */
    size_t flat_smem; /* dynamic shared memory the flat gate|up product may take (cu/matvec_glu_flat.cu) */
    size_t bal_smem;  /* ... and the balanced gate|up products (cu/matvec_glu_bal.cu) */
    size_t alone_smem; /* dynamic shared memory that holds a block of the plain products alone on its
                        * multiprocessor (ZR_CUF_MV_ALONE_SMEM; 0 where that is not over half of it or
                        * past the opt-in): zr_cuf_mv_shape's narrow products (ZrMvShape.smem) */
    size_t mma_smem; /* dynamic shared memory the tensor-core Q6_K product may take (cu/matvec_mma.cu) */
    bool has_attn_prefill_d256; /* the GPU allows its ZR_K_ATTN_PREFILL_D256_SMEM bytes (both caches' kernels) */
    bool has_attn_decode_mma;   /* ... and the tensor-core decode attention's ZR_K_ATTN_DECODE_MMA_SMEM(128) */
    ZrKernel mv_mix[ZR_KMIX_COUNT]; /* ZR_KMIX lines: matvec_mix_<a>_<b> */
    bool has_mv_mix[ZR_KMIX_COUNT]; /* loaded (tests clear it to force one launch per type) */
} ZrCuKernels;

/* Looks up every kernel of ZrCuKernels (and raises the matrix-vector kernels' shared memory
 * limit to what rows of max_n_in values need). */
int zr_cuf_kernels_load(const ZrCuda *c, ZrCuKernels *k, int max_n_in, ZrError *err);

/* Looks up the kernel `name` (any line of cu/kernels.def, a family's by its full name) with its
 * parameter sizes; ZR_E_INTERNAL when cu/kernels.def does not list it. */
int zr_kreg_load(const ZrCuda *c, const char *name, ZrKernel *out, ZrError *err);
