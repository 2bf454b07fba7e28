/* The mixture-of-experts FFN on the GPU (issue 15). Per MoE layer the router, the experts' gate
 * and up (stacked per expert: its gate rows, then its up rows, so one GLU launch computes
 * silu(gate) * up of every chosen expert) and down on the device; a decode step's FFN is five
 * launches that read the chosen experts from device memory (router matvec with the FFN norm
 * fused, moe_route_f32 writing ids and weights, matvec_id GLU, matvec_id down, moe_combine_f32
 * into the residual): the same launches every token, so the recorded graph serves every token
 * and nothing goes to the host. The prefill runs the same kernels row by row (F32, exactly the
 * decode's arithmetic). */
#pragma once
#include "cuda/forward.h"

typedef struct ZrCuMoeLayer {
    int n_expert, n_used, n_ff; /* 0 experts: a dense layer */
    ZrCuWeight router;          /* [n_embd, n_expert] */
    ZrCuWeight gu;              /* [n_embd, n_expert * 2 n_ff]: expert e's rows [2 e n_ff, 2 (e + 1) n_ff) = its gate, its up */
    ZrCuWeight down;            /* [n_ff, n_expert * n_embd] */
} ZrCuMoeLayer;

typedef struct ZrCuMoe {
    int ff_stride;              /* floats between two experts' rows of ff (n_ff rounded up to 4: 16-byte aligned rows) */
    CUdeviceptr logits;         /* f32 [max n_expert] the router's output for one row */
    CUdeviceptr ids;            /* i32 [max n_used] the chosen experts, largest weight first */
    CUdeviceptr weights;        /* f32 [max n_used] their renormalized weights */
    CUdeviceptr ff;             /* f32 [max n_used][ff_stride] silu(gate) * up of each chosen expert */
    CUdeviceptr out;            /* f32 [max n_used][n_embd] each chosen expert's output */
    ZrCuMoeLayer layers[];      /* [n_layer] */
} ZrCuMoe;

/* Uploads layer il's router and experts (f->moe allocated at the first call); refuses gate and up
 * experts of different types by name. */
int zr_cuf_moe_upload_layer(ZrCuForward *f, int il, ZrError *err);
/* The bytes zr_cuf_moe_upload_layer will allocate for layer L (0 for a dense layer). */
size_t zr_cuf_moe_layer_bytes(const ZrModel *m, const ZrLayer *L);
/* The workspaces of the MoE FFN (none when the model has no experts). */
int zr_cuf_moe_buffers(ZrCuForward *f, ZrError *err);
/* x[n_embd] += the MoE FFN of layer il on RMSNorm(x) * norm_w: launches only (the decode step's,
 * and the prefill's per row). */
int zr_cuf_moe_ffn(ZrCuForward *f, int il, CUdeviceptr x, CUdeviceptr norm_w, ZrError *err);
