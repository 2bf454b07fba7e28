/* The decode matrix-vector product y[n_out] = W x' (+ add) of every weight type: how x is read
 * (the mode), and the launch shape the forward pass picks per matrix (measured policy). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda/kreg.h"
#include "cuda/launch.h"
#include "cuda/weights.h"

/* How the matrix-vector product reads x (cu/matvec.cuh ZR_MV_*), plus GLU: W stacks [gate; up]
 * (n_out = 2 n_half rows) and y[i] = silu(gate_i . x') * (up_i . x'), i < n_half; GELU: the
 * gates of SWIGLU and GLU are GELU-tanh instead of SiLU (gemma's GeGLU). ADDNORM: x' =
 * RMSNorm(x + RMSNorm(r) * post_w) * norm_w (ZrMvPost; zr_cuf_matvec_post). */
enum { ZR_CUF_MV_PLAIN = 0, ZR_CUF_MV_RMSNORM = 1, ZR_CUF_MV_SWIGLU = 2, ZR_CUF_MV_ADDNORM = 3, ZR_CUF_MV_GLU = 4,
       ZR_CUF_MV_GELU = 8, ZR_CUF_MV_SSQ = 16 };
/* SSQ (| any mode; not with the tall kernel): the product also writes the sum of the squares of its results, one float per
 * block of its launch (zr_cuf_mv_grid of them), after them: y[n_res + b] (n_res = n_out, or
 * n_out/2 with GLU), so y needs room for them. ADDNORM's launch carries the count of those pieces
 * in the mode's bits from ZR_CUF_MV_NSS_SHIFT (cu/matvec.cuh ZR_MV_NSS_SHIFT): callers' modes
 * stay below it. */
#define ZR_CUF_MV_NSS_SHIFT 8

/* gemma's norm after a block, folded into the product that follows it (ADDNORM): the block's
 * output r [n_in] normed with post_w [n_in] and added to the residual x; x_out (0: not written)
 * receives that sum [n_in] and must not be x. r's sum of squares comes in n_ss pieces after it,
 * r[n_in .. n_in + n_ss): the SSQ pieces of the product that wrote r (or any split of the sum). */
typedef struct ZrMvPost {
    CUdeviceptr r, post_w, x_out;
    int n_ss;
} ZrMvPost;
/* The largest block of the flat expert and mix products (their kernels' register caps hold it); the
 * dense and matvec_id products' own is their kernel's (zr_cuf_kernel_max_threads). */
#define ZR_CUF_MV_MAX_THREADS 512

/* Dynamic shared memory a narrow product's block asks for to be alone on its multiprocessor
 * (ZrCuKernels.alone_smem, zr_cuf_mv_shape): over half of an H200's 228 KiB, and more than that
 * needs. H200 tg128, Llama-3.2-1B Q4_K_M: 1779 t/s without (session 39's call 6), 1836.4 with
 * half (114 KiB), 1863.3 with 120, 1848.4 with 160 (call 7; cu/PERF.md session 39): what the rest
 * of the multiprocessor then holds of the launches beside it decides, and 120 measured best. */
#define ZR_CUF_MV_ALONE_SMEM (120 * 1024)

/* The launch shape of a matrix-vector product: blocks of `groups` row groups (of the kernel's
 * rows per warp; any count where blocks is 0, a power of two where it is not), each row split
 * over `split` warps along its length (split-K, a power of two). blocks 0: a
 * block per tile of `groups` row groups (matvec_<type>); blocks > 0: at most that many blocks,
 * each taking every blocks-th tile with x staged once (matvec_<type>_tall; very tall matrices). */
typedef struct ZrMvShape {
    int groups, split, blocks;
    unsigned smem; /* dynamic shared memory the launch asks for at least (0: the product's own; zr_k_matvec) */
} ZrMvShape;

/* Rows of W each warp of the type's kernel computes (cu/matvec_*.cu). */
int zr_cuf_mv_rows_per_warp(uint32_t type);
/* The largest block kern launches: what the driver reported at load (a register cap over 64 holds
 * fewer than 1024 threads: the experts' Q5_0 and Q5_1 products), else 1024 (cu/matvec.cuh
 * ZR_MV_MAX_THREADS). */
int zr_cuf_kernel_max_threads(const ZrKernel *kern);
/* Blocks of `threads` threads of kern that one multiprocessor holds by its registers (64 K,
 * allocated a warp at a time in units of 256; 64 a thread where the driver reported none) and by
 * its 2048 threads; 0 past zr_cuf_kernel_max_threads. */
int zr_cuf_kernel_blocks_per_sm(const ZrKernel *kern, int threads);
/* The tensor-core product of Q6_K's tall matrices (cu/matvec_mma.cu, blocks of
 * ZR_CUF_MV_MMA_THREADS): dynamic shared memory for rows of n_in values (x' staged as the others
 * stage it, then its f16 halves), and whether it takes W in this mode with this shape (Q6_K, the
 * tall shape, rows whose items leave more than an eighth of the float product's lane-steps idle,
 * x' as is, normed or ADDNORM, no GLU, no SSQ, the staging within what the GPU allows):
 * zr_cuf_matvec and zr_cuf_matvec_post launch it there. */
#define ZR_CUF_MV_MMA_THREADS 512
size_t zr_cuf_mv_mma_smem(int n_in);
bool zr_cuf_mv_mma_takes(const ZrCuKernels *k, const ZrCuWeight *w, int mode, ZrMvShape shape);
/* The gate|up product of Q4_K whose warps take flat runs of (result, item) pairs
 * (cu/matvec_glu_flat.cu, blocks of ZR_CUF_MV_FLAT_THREADS, one wave): whether it takes W in this
 * mode with this shape (the tall shape, GLU, x' normed or ADDNORM or as is, rows of 32 items or
 * more that leave the tall product's lanes idle, a warp's run spanning at most
 * ZR_CUF_MV_FLAT_KMAX results): zr_cuf_matvec and zr_cuf_matvec_post launch it there. */
#define ZR_CUF_MV_FLAT_THREADS 512
#define ZR_CUF_MV_FLAT_KMAX 4
bool zr_cuf_mv_flat_takes(const ZrCuKernels *k, const ZrCuWeight *w, int mode, ZrMvShape shape);
/* The flat gate|up kernel for an input mode: matvec_glu_flat_an_q4_k for ZR_CUF_MV_ADDNORM, else
 * matvec_glu_flat_q4_k (cu/kernels.def) */
const ZrKernel *zr_cuf_mv_flat_kernel(const ZrCuKernels *k, int mode);
/* The gate|up product of Q4_K, Q8_0, Q4_0, Q4_1, Q5_K or Q2_K whose blocks take whole rounds of a
 * result a warp and cut the rest into steps (cu/matvec_glu_bal.cu, blocks of ZR_CUF_MV_BAL_THREADS,
 * one wave): whether it takes W in this mode with this shape (the tall shape, GLU, x' normed or
 * ADDNORM or as is, rows of 32 items or more, where its slowest warp takes fewer steps than the
 * tall product's): zr_cuf_matvec and zr_cuf_matvec_post launch it there (after the flat product).
 * THREADS and CHUNKS (a block's remainder chunks at most) are the kernel's ZR_MVB_THREADS and
 * ZR_MVB_CHUNKS. */
#define ZR_CUF_MV_BAL_THREADS 512
#define ZR_CUF_MV_BAL_CHUNKS 512
bool zr_cuf_mv_bal_takes(const ZrCuKernels *k, const ZrCuWeight *w, int mode, ZrMvShape shape);
/* The balanced gate|up kernel of a type for an input mode (NULL: none; cu/kernels.def's
 * mv_glu_bal_<type> lines, and mv_glu_bal_an_<type> for ZR_CUF_MV_ADDNORM) */
const ZrKernel *zr_cuf_mv_bal_kernel(const ZrCuKernels *k, uint32_t type, int mode);
/* The tall product kernel of a type for an input mode (NULL: none): the one built for RMSNORM
 * alone where the type has it (cu/kernels.def mvt_rn; for the types of ZR_KTYPES_TALL_RN_GLU, in
 * gate|up products alone), else the one of every mode (mvt) */
const ZrKernel *zr_cuf_mv_tall_kernel(const ZrCuKernels *k, uint32_t type, int mode);
/* Dynamic shared memory of a product over rows of n_in values (x staged with padding, or as
 * integer planes: the larger of the two). */
size_t zr_cuf_mv_smem(int n_in);
/* The shape the forward pass uses for W in this mode on this device. */
ZrMvShape zr_cuf_mv_shape(const ZrCuKernels *k, const ZrCuWeight *w, int mode);
/* The same without the split of short rows (2-4 KiB a warp) for types other than Q8_0, whose
 * split stays on blocks of 4 row groups (256 threads, as the unsplit parts'): a mix launch's parts
 * take it where their own shapes differ in block size or would take the launch past one wave. */
ZrMvShape zr_cuf_mv_shape_general(const ZrCuKernels *k, const ZrCuWeight *w, int mode);
/* The shape of one expert's matrix (cu/moe_matvec.cu): zr_cuf_mv_shape's, but short rows split
 * only from 2 KiB a warp's half (every type), on blocks of 4 row groups (qwen3-30b-a3b's gate|up
 * split from 1 KiB lost 16%: cu/PERF.md, session 18), and never the tall kernel's (the expert
 * kernels have none; the flat gate|up sizes its grid by zr_cuf_mv_flat_blocks). */
ZrMvShape zr_cuf_mv_shape_expert(const ZrCuKernels *k, const ZrCuWeight *w, int mode);
/* The shape of an expert's down launched over its n_used slots (zr_k_matvec_id, the mix fused):
 * zr_cuf_mv_shape_expert's, but unsplit on blocks of 32 row groups (1024 threads) where that
 * launch of every slot is one block a multiprocessor or fewer and the expert's own shape split. */
ZrMvShape zr_cuf_mv_shape_expert_slots(const ZrCuKernels *k, const ZrCuWeight *w, int mode, int n_used);
/* The grid of a flat expert launch of kern (cu/moe_matvec.cu matvec_id_<type>_flat) of `tiles` tiles
 * in blocks of this shape: at most the blocks the multiprocessors hold at once (kern's registers, at
 * most 1024 threads an SM), the tiles spread evenly over them. */
unsigned zr_cuf_mv_flat_blocks(const ZrCuKernels *k, const ZrKernel *kern, unsigned tiles, ZrMvShape shape);
/* The blocks of the launch of W in this mode with this shape (what an SSQ product writes). */
unsigned zr_cuf_mv_grid(const ZrCuWeight *w, int mode, ZrMvShape shape);

/* y[n_out] = W x' (+ add[n_out]; add may equal y): the decode matrix-vector launch for any type,
 * where x' = x (PLAIN), RMSNorm(x) * norm_w with eps (RMSNORM), or silu(x[0..n_in)) *
 * x[n_in..2 n_in) (SWIGLU); with GLU (| any of those) y gets n_out/2 gated values and add must
 * be 0. x must be 16-byte aligned. The shape is zr_cuf_mv_shape's. */
int zr_cuf_matvec(ZrLauncher *l, const ZrCuKernels *k, const ZrCuWeight *w, CUdeviceptr x, CUdeviceptr y,
                  CUdeviceptr add, CUdeviceptr norm_w, float eps, int mode, ZrError *err);
/* y[n_out] = W RMSNorm(x') * norm_w with x' = x + RMSNorm(p->r) * p->post_w written to
 * p->x_out: the ADDNORM product (| GLU / GELU as above), eps for both norms. */
int zr_cuf_matvec_post(ZrLauncher *l, const ZrCuKernels *k, const ZrCuWeight *w, CUdeviceptr x, const ZrMvPost *p,
                       CUdeviceptr y, CUdeviceptr norm_w, float eps, int mode, ZrError *err);
/* The same product with a given shape (tests cover every shape; tools/mv_bench.c times them). */
int zr_cuf_matvec_shaped(ZrLauncher *l, const ZrCuKernels *k, const ZrCuWeight *w, CUdeviceptr x, CUdeviceptr y,
                         CUdeviceptr add, CUdeviceptr norm_w, float eps, int mode, ZrMvShape shape, ZrError *err);

/* One launch for the products of n matrices of two weight types sharing x (a layer's Q/K/V in a
 * llama-quantize mix: Q4_K_M's Q4_K q|k and Q6_K v), cu/matvec_mix.cu: part p (matrix p) runs
 * zr_cuf_mv_shape's shape of its own matrix, so its outputs equal its own launch's bit for bit;
 * where those shapes would take the launch past one wave, every part runs
 * zr_cuf_mv_shape_general's (its outputs then equal a launch of its own with that shape). That
 * needs the same block size for every part (the RMSNorm's sum of squares is added per thread,
 * then per warp: another block size adds it in another order) and no tall part. */
#define ZR_CUF_MV_MIX_PARTS 3
typedef struct ZrMvMix {
    int kernel;                          /* ZrCuKernels.mv_mix index (ZR_KMIX_<a>_<b>) */
    int n_parts;
    int threads;                         /* the block: 32 groups x split of every part's shape */
    int split[ZR_CUF_MV_MIX_PARTS];      /* each part's split-K */
    int tiles[ZR_CUF_MV_MIX_PARTS];      /* each part's blocks (its own launch's grid); the grid: their sum */
    unsigned b_mask;                     /* bit p: part p is of the kernel's second type */
    bool general;                        /* the parts take zr_cuf_mv_shape_general's shapes */
} ZrMvMix;
/* The ZR_KMIX line of cu/kernels.def for types a and b in either order (-1: none); *swapped:
 * b is the line's first type. */
int zr_cuf_mv_mix_kernel(uint32_t a, uint32_t b, bool *swapped);
/* Whether the products of ws[0..n) (2..3 matrices, one row length, two types with a loaded
 * ZR_KMIX kernel) in this mode run as one launch, and how (*out). */
bool zr_cuf_mv_mix_plan(const ZrCuKernels *k, const ZrCuWeight *ws, int n, int mode, ZrMvMix *out);
