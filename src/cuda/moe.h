/* The mixture-of-experts FFN on the GPU (issue 15). Per MoE layer the router, the experts' gate
 * and up (stacked per expert: its gate rows, then its up rows, so one GLU launch computes
 * silu(gate) * up of every chosen expert) and down on the device; a decode step's FFN is three
 * launches that read the chosen experts from device memory (router matvec with the FFN norm
 * fused; matvec_id GLU whose blocks route for themselves and write ids and weights, as one grid of
 * at most a wave over every slot's tiles where the slots' results are contiguous (matvec_id_flat,
 * cu/moe_matvec.cu); the down
 * mixed into the residual: matvec_id_mix, a warp per output row over every slot, where the slots'
 * activations fit one block's shared memory (cu/moe_matvec_mix.cu), else matvec_id whose last
 * block per row group mixes the slots, cu/moe_matvec.cu): the
 * same launches every token, so the recorded graph serves every token and nothing goes to the
 * host. (Five before: moe_route_f32 and moe_combine_f32 launched apart; moe_route_f32 still
 * routes apart for more than 32 chosen experts, and for the prefill.)
 *
 * The prefill groups a chunk's tokens by expert: the router for every row (an F32 GEMM for an
 * F32 router), moe_route_f32 over the rows, the ids to the host once per layer and chunk, then
 * runs of consecutive experts (as many as p_wq holds the F16 copies of, and whose slots padded
 * to the run's largest count fit the slot buffers): per run the rows gathered and converted to
 * F16, its experts dequantized in one launch, gate|up as one strided-batched cuBLASLt GEMM over
 * the run's experts (each expert's rows padded to the same count: cuBLASLt has no grouped GEMM,
 * and the padding costs tensor-core time, not weight reads), SwiGLU, down the same way, and the
 * outputs scattered to their slots; then the slots mixed as in the decode. A 512-token chunk of
 * a 128-expert, top-8 model is ~4 runs, ~9 launches each (before: 8 launches per chosen
 * expert, ~1000 a layer, and 2 GEMMs of ~32 tokens per expert, each using a few SMs).
 * Where every expert matrix of the layer has the grouped product (zr_cuf_moe_grouped;
 * cu/moe_mm.cu: any type but F32, rows of a multiple of 64 values) neither the runs, their F16
 * copies and GEMMs nor the host round trip are used: after the routing moe_group_i32 sorts the
 * slots by expert into one compact layout cut into tiles of 64 rows of one expert, then gate|up
 * (or gate, up) is one launch over every expert and tile reading the quantized weights and the
 * rows of the normed input by index, SwiGLU, down one launch writing straight into the slots, and
 * the mix: 9 launches a layer (with the norm, convert, router and route), no synchronization, no
 * F16 copy of a weight in global memory. */
#pragma once
#include "cuda/forward.h"

typedef struct ZrCuMoeLayer {
    int n_expert, n_used, n_ff; /* 0 experts: a dense layer */
    ZrCuWeight router;          /* [n_embd, n_expert] */
    ZrCuWeight gu;              /* [n_embd, n_expert * 2 n_ff]: expert e's rows [2 e n_ff, 2 (e + 1) n_ff) = its gate, its up;
                                 * when gate and up differ in type (a mixed quantization) gu is the gate experts
                                 * [n_embd, n_expert * n_ff] and up the up experts, each launched on its own */
    ZrCuWeight up;              /* .main == 0 unless split */
    ZrCuWeight down;            /* [n_ff, n_expert * n_embd] */
} ZrCuMoeLayer;

typedef struct ZrCuMoe {
    int ff_stride;              /* floats between two experts' rows of ff (n_ff rounded up to 4: 16-byte aligned rows) */
    CUdeviceptr logits;         /* f32 [max n_expert] the router's output for one row */
    CUdeviceptr ids;            /* i32 [max n_used] the chosen experts, largest weight first */
    CUdeviceptr weights;        /* f32 [max n_used] their renormalized weights */
    CUdeviceptr ff;             /* f32 [max n_used][ff_stride] silu(gate) * up of each chosen expert */
    CUdeviceptr gate_up;        /* f32 [max n_used][2 n_ff]: gate | up of each chosen expert, for split gate and up */
    CUdeviceptr out;            /* f32 [max n_used][n_embd] each chosen expert's output */
    CUdeviceptr done;           /* u32 [n_embd] the down launch's per-block counts of its mix (cu/moe_matvec.cu), 0 between launches */
    /* the prefill's, for ZR_CUF_UBATCH rows (UB) */
    CUdeviceptr p_logits;       /* f32 [UB][max n_expert] */
    CUdeviceptr p_ids;          /* i32 [UB][max n_used] */
    CUdeviceptr p_weights;      /* f32 [UB][max n_used] */
    CUdeviceptr p_idx, p_slot;  /* i32 [max n_expert UB]: the padded layout's rows of xn and their slots (row n_used + j; -1: padding);
                                 * the grouped product's compact layout in the first n n_used */
    /* one run of experts at a time, in the padded layout (at most UB max n_used rows) */
    CUdeviceptr p_x;            /* f32 [UB max n_used][n_embd] the run's rows of the normed input */
    CUdeviceptr p_xh;           /* f16 [UB max n_used][max(n_embd, n_ff)] their F16 copy, then their SwiGLU for down */
    CUdeviceptr p_gu;           /* f32 [UB max n_used][2 n_ff] gate | up */
    CUdeviceptr p_ff;           /* f32 [UB max n_used][n_ff] SwiGLU (F32 down experts) */
    CUdeviceptr p_y;            /* f32 [UB max n_used][n_embd] the experts' outputs */
    CUdeviceptr p_out;          /* f32 [UB][max n_used][n_embd] every row's experts' outputs, in the order chosen */
    int32_t *h_ids;             /* host [UB max n_used] */
    int32_t *h_idx, *h_slot;    /* host [max n_expert UB] */
    int32_t *h_start;           /* host [max n_expert + 1]: each expert's count of slots, then its next padded row */
    CUdeviceptr p_tiles;        /* i32 [tiles_max][4] the grouped product's tiles (expert, first row, rows, 0; -1: none) */
    int tiles_max;              /* UB max n_used / 32 + max n_expert: the most tiles of 32 or more rows of one expert */
    CUdeviceptr p_wq;           /* f16 [wq_elems] a run of experts' F16 copies (prefill) */
    size_t wq_elems;
    bool no_batch;              /* a batched GEMM failed once: one GEMM per expert from then on */
    ZrCuMoeLayer layers[];      /* [n_layer] */
} ZrCuMoe;

/* Uploads layer il's router and experts (f->moe allocated at the first call); refuses gate and up
 * experts of different types by name. */
typedef struct ZrCuUpload ZrCuUpload; /* cuda/upload.h */
int zr_cuf_moe_upload_layer(ZrCuForward *f, ZrCuUpload *u, int il, ZrError *err);
/* The bytes zr_cuf_moe_upload_layer will allocate for layer L (0 for a dense layer). */
size_t zr_cuf_moe_layer_bytes(const ZrModel *m, const ZrLayer *L);
/* The most experts one batched GEMM of the prefill takes on layer L of m (a power of two; 0 for a
 * dense layer, and for one whose experts take the grouped product: no expert GEMM at all):
 * zr_cuf_moe_prefill's GEMMs take 1, 2, 4 .. that many (cuda/warm.c lists them). */
int zr_cuf_moe_batch_max(const ZrModel *m, const ZrLayer *L);
/* Whether the prefill of layer L of m takes the grouped product (moe.h above; the kernels'
 * presence aside): its experts are not F32, their rows are of a multiple of 64 values, and a
 * chunk's slots fit one launch of the per-row kernels. Its experts then need no GEMM. */
bool zr_cuf_moe_grouped(const ZrModel *m, const ZrLayer *L);
/* The workspaces of the MoE FFN (none when the model has no experts). */
int zr_cuf_moe_buffers(ZrCuForward *f, ZrError *err);
/* x[n_embd] += the MoE FFN of layer il on RMSNorm(x) * norm_w: launches only (the decode step's,
 * and the prefill's per row). */
int zr_cuf_moe_ffn(ZrCuForward *f, int il, CUdeviceptr x, CUdeviceptr norm_w, ZrError *err);
/* f->x[n][n_embd] += the MoE FFN of layer il on each row's RMSNorm(x) * norm_w (n <= ZR_CUF_UBATCH),
 * the rows grouped by expert: on the device where zr_cuf_moe_grouped, else through one copy of the
 * chosen ids to the host (it synchronizes). */
int zr_cuf_moe_prefill(ZrCuForward *f, int il, int n, CUdeviceptr norm_w, ZrError *err);
