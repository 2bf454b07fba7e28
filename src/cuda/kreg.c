#include "cuda/kreg.h"

#include <stdio.h>
#include <string.h>

#include "cuda/mm_small.h"
#include "cuda/mv_shape.h"
#include "cuda/sample.h"
#include "quant.h"

/* The byte sizes of a cu/kernels.def parameter string ("PIF": pointer, int, float); -1 when it
 * has a letter the table does not define or too many parameters. */
static int param_sizes(const char *params, size_t *sizes) {
    int n = 0;
    for (const char *p = params; *p; p++, n++) {
        if (n == ZR_KERNEL_MAX_PARAMS) return -1;
        sizes[n] = *p == 'P' || *p == 'L' ? 8 : *p == 'I' || *p == 'F' ? 4 : 0;
        if (!sizes[n]) return -1;
    }
    return n;
}

static int load(const ZrCuda *c, const char *name, const char *params, ZrKernel *out, ZrError *err) {
    size_t sizes[ZR_KERNEL_MAX_PARAMS];
    const int n = param_sizes(params, sizes);
    if (n < 0) return zr_err(err, ZR_E_INTERNAL, "cu/kernels.def: %s: bad parameters \"%s\"", name, params);
    return zr_cuda_kernel(c, name, sizes, n, out, err);
}

/* A kernel that stages `need` bytes of dynamic shared memory beside its static shared memory: *got
 * = what it may take (need, or what the GPU's opt-in limit leaves beside the static part), and the
 * kernel's limit raised to it where that passes the default 48 KiB */
static int opt_in_beside(const ZrCuda *c, const ZrKernel *kern, size_t need, int optin, size_t *got, ZrError *err) {
    const size_t st = (size_t)kern->static_smem, lim = optin > 0 ? (size_t)optin : 0;
    *got = need + st <= lim ? need : lim > st ? lim - st : 0;
    return *got + st > 48 * 1024 ? zr_cuda_kernel_set_smem(c, kern, (int)*got, err) : ZR_OK;
}

int zr_cuf_kernels_load(const ZrCuda *c, ZrCuKernels *k, int max_n_in, ZrError *err) {
    char name[64];
    int rc;
    memset(k, 0, sizeof *k);
    k->sm_count = c->props.sm_count > 0 ? c->props.sm_count : 1;
    for (uint32_t t = 0; t < ZR_TYPE_COUNT; t++) {
        const char *ts = zr_type_kernel_suffix(t);
        if (!ts) continue;
#define ZR_KFAMILY(field, prefix, suffix, types, params)                                     \
        if (ZR_KTYPES_##types(t)) {                                                          \
            snprintf(name, sizeof name, "%s%s%s", #prefix, ts, #suffix);                     \
            if ((rc = load(c, name, params, &k->field[t], err))) return rc;                  \
            k->has_##field[t] = true;                                                        \
        }
#include "cu/kernels.def"
    }
#define ZR_KFIXED(field, name, params) \
    if ((rc = load(c, #name, params, &k->field, err))) return rc;
#include "cu/kernels.def"
#define ZR_KMIX(a, b, params)                                                                       \
    if ((rc = load(c, "matvec_mix_" #a "_" #b, params, &k->mv_mix[ZR_KMIX_##a##_##b], err))) return rc; \
    k->has_mv_mix[ZR_KMIX_##a##_##b] = true;
#include "cu/kernels.def"
    /* a block of over half the multiprocessor's shared memory is alone on it: zr_cuf_mv_shape asks
     * for ZR_CUF_MV_ALONE_SMEM in the narrow products where that is over half and within the
     * opt-in (H100, H200, A100; not a GPU of 100 KiB a multiprocessor) */
    const size_t alone = ZR_CUF_MV_ALONE_SMEM;
    k->alone_smem = c->props.smem_per_sm > 0 && 2 * alone > (size_t)c->props.smem_per_sm &&
                            alone + 1024 <= (size_t)c->props.max_smem_optin
                        ? alone
                        : 0;
    /* the matrix-vector kernels stage x in dynamic shared memory: above the default 48 KiB
     * (with the kernel's static reduction arrays on top) they must opt in, to that request too */
    const size_t staging = zr_cuf_mv_smem(max_n_in), smem = staging > k->alone_smem ? staging : k->alone_smem;
    for (uint32_t t = 0; t < ZR_TYPE_COUNT && smem + 1024 > 48 * 1024; t++) {
        if (!k->has_mv[t]) continue;
        if ((int)smem > c->props.max_smem_optin)
            return zr_err(err, ZR_E_UNSUPPORTED, "rows of %d values need %zu bytes of shared memory in %s; this GPU allows %d",
                          max_n_in, smem, k->mv[t].name, c->props.max_smem_optin);
        if ((rc = zr_cuda_kernel_set_smem(c, &k->mv[t], (int)smem, err))) return rc;
        if (k->has_mvt[t] && (rc = zr_cuda_kernel_set_smem(c, &k->mvt[t], (int)smem, err))) return rc;
        if (k->has_mvt_rn[t] && (rc = zr_cuda_kernel_set_smem(c, &k->mvt_rn[t], (int)smem, err))) return rc;
        if (k->has_mv_id[t] && (rc = zr_cuda_kernel_set_smem(c, &k->mv_id[t], (int)smem, err))) return rc;
        if (k->has_mv_idflat[t] && (rc = zr_cuda_kernel_set_smem(c, &k->mv_idflat[t], (int)smem, err))) return rc;
    }
    /* the flat gate|up product stages x as the others beside its static 17 KiB of lane sums, the
     * balanced ones beside 4 KiB of remainder sums (read from the kernels): they take the rows whose
     * staging fits beside them (zr_cuf_mv_flat_takes, zr_cuf_mv_bal_takes) */
    const int optin = c->props.max_smem_optin;
    k->flat_smem = k->bal_smem = smem; /* the least any flat / balanced kernel may take */
    for (int an = 0; an < 2; an++) { /* the kernels for RMSNORM (any input), then for ADDNORM (the _an_ ones) */
        const int mode = an ? ZR_CUF_MV_ADDNORM : ZR_CUF_MV_RMSNORM;
        size_t got;
        if ((rc = opt_in_beside(c, zr_cuf_mv_flat_kernel(k, mode), smem, optin, &got, err))) return rc;
        if (got < k->flat_smem) k->flat_smem = got;
        for (uint32_t t = 0; t < ZR_TYPE_COUNT; t++) {
            const ZrKernel *bal = zr_cuf_mv_bal_kernel(k, t, mode);
            if (!bal) continue;
            if ((rc = opt_in_beside(c, bal, smem, optin, &got, err))) return rc;
            if (got < k->bal_smem) k->bal_smem = got;
        }
    }
    /* the tensor-core Q6_K product needs more: it takes the rows whose staging fits what the GPU
     * allows (the others keep the tall float product: zr_cuf_mv_mma_takes) */
    if ((rc = opt_in_beside(c, &k->mv_q6k_mma, zr_cuf_mv_mma_smem(max_n_in), optin, &k->mma_smem, err))) return rc;
    /* the small prefill product stages up to 8 rows of x (cuda/mm_small.h); a GPU that allows
     * less keeps the default 48 KiB (less its static 1 KiB), and the prefill takes the product
     * only for the rows that fit it */
    const size_t mm_smem = zr_cuf_mm_smem_max();
    k->mm_smem = zr_cuf_mm_smem_limit(c->props.max_smem_optin);
    for (uint32_t t = 0; t < ZR_TYPE_COUNT && k->mm_smem == mm_smem; t++)
        if (k->has_mm[t] && (rc = zr_cuda_kernel_set_smem(c, &k->mm[t], (int)mm_smem, err))) return rc;
    for (int i = 0; i < ZR_KMIX_COUNT && smem + 1024 > 48 * 1024; i++) /* within the limit: checked above */
        if ((rc = zr_cuda_kernel_set_smem(c, &k->mv_mix[i], (int)smem, err))) return rc;
    /* the grouped expert product's tiles of 64 tokens take more than 48 KiB (cu/moe_mm.cu); a GPU
     * that allows less has no such kernels (the prefill then takes tiles of 32) */
    for (uint32_t t = 0; t < ZR_TYPE_COUNT; t++) {
        if (!k->has_moe_mm64[t] || ZR_CUF_MOE_MM_SMEM(64) <= 48 * 1024) continue;
        if (ZR_CUF_MOE_MM_SMEM(64) > c->props.max_smem_optin) k->has_moe_mm64[t] = false;
        else if ((rc = zr_cuda_kernel_set_smem(c, &k->moe_mm64[t], ZR_CUF_MOE_MM_SMEM(64), err))) return rc;
    }
    /* the prefill attention of heads of 256 keeps Q and its K/V tiles in 66 KiB (cu/attention_prefill.cu);
     * a GPU that allows less has no such kernel (those layers take the split kernels) */
    k->has_attn_prefill_d256 = ZR_K_ATTN_PREFILL_D256_SMEM <= c->props.max_smem_optin;
    if (k->has_attn_prefill_d256 &&
        ((rc = zr_cuda_kernel_set_smem(c, &k->attn_prefill_d256, ZR_K_ATTN_PREFILL_D256_SMEM, err)) ||
         (rc = zr_cuda_kernel_set_smem(c, &k->attn_prefill_d256_h, ZR_K_ATTN_PREFILL_D256_SMEM, err))))
        return rc;
    /* the tensor-core decode attention's rings (cu/attention_decode_mma.cu): without them the
     * decode takes the CUDA-core kernels at every position */
    const size_t dm64 = ZR_K_ATTN_DECODE_MMA_SMEM(64), dm128 = ZR_K_ATTN_DECODE_MMA_SMEM(128);
    k->has_attn_decode_mma = dm128 + (size_t)k->attn_decode_mma128_h.static_smem <= (size_t)c->props.max_smem_optin;
    if (k->has_attn_decode_mma &&
        ((rc = zr_cuda_kernel_set_smem(c, &k->attn_decode_mma64_h, (int)dm64, err)) ||
         (rc = zr_cuda_kernel_set_smem(c, &k->attn_decode_mma128_h, (int)dm128, err))))
        return rc;
    if ((rc = zr_sample_kernels_smem(c, k, err))) return rc;
    return ZR_OK;
}

int zr_kreg_load(const ZrCuda *c, const char *name, ZrKernel *out, ZrError *err) {
    char full[64];
#define ZR_KFIXED(field, kname, params) \
    if (!strcmp(name, #kname)) return load(c, name, params, out, err);
#define ZR_KAUX(kname, params) \
    if (!strcmp(name, #kname)) return load(c, name, params, out, err);
#define ZR_KMIX(a, b, params) \
    if (!strcmp(name, "matvec_mix_" #a "_" #b)) return load(c, name, params, out, err);
#include "cu/kernels.def"
    for (uint32_t t = 0; t < ZR_TYPE_COUNT; t++) {
        const char *ts = zr_type_kernel_suffix(t);
        if (!ts) continue;
#define ZR_KFAMILY(field, prefix, suffix, types, params)                                       \
        snprintf(full, sizeof full, "%s%s%s", #prefix, ts, #suffix);                           \
        if (ZR_KTYPES_##types(t) && !strcmp(name, full)) return load(c, name, params, out, err);
#include "cu/kernels.def"
    }
    return zr_err(err, ZR_E_INTERNAL, "kernel %s: not listed in cu/kernels.def", name);
}
