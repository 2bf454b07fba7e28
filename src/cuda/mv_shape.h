/* The decode matrix-vector product y[n_out] = W x' (+ add) of every weight type: how x is read
 * (the mode), and the launch shape the forward pass picks per matrix (measured policy). */
#pragma once
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
       ZR_CUF_MV_GELU = 8 };

/* gemma's norm after a block, folded into the product that follows it (ADDNORM): the block's
 * output r [n_in] normed with post_w [n_in] and added to the residual x; x_out (0: not written)
 * receives that sum [n_in] and must not be x. */
typedef struct ZrMvPost {
    CUdeviceptr r, post_w, x_out;
} ZrMvPost;
#define ZR_CUF_MV_MAX_THREADS 512 /* cu/matvec.cuh ZR_MV_MAX_THREADS */

/* The launch shape of a matrix-vector product: blocks of `groups` row groups (of the kernel's
 * rows per warp), each row split over `split` warps along its length (split-K). blocks 0: a
 * block per tile of `groups` row groups (matvec_<type>); blocks > 0: at most that many blocks,
 * each taking every blocks-th tile with x staged once (matvec_<type>_tall; very tall matrices). */
typedef struct ZrMvShape {
    int groups, split, blocks;
} ZrMvShape;

/* Rows of W each warp of the type's kernel computes (cu/matvec_*.cu). */
int zr_cuf_mv_rows_per_warp(uint32_t type);
/* Dynamic shared memory of a product over rows of n_in values (x staged with padding). */
size_t zr_cuf_mv_smem(int n_in);
/* The shape the forward pass uses for W in this mode on this device. */
ZrMvShape zr_cuf_mv_shape(const ZrCuKernels *k, const ZrCuWeight *w, int mode);

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
