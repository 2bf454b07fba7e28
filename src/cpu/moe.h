/* Mixture-of-experts FFN of the CPU reference (issue 15): the routing of one token, and the
 * whole block over a batch with the tokens grouped by expert, so a prefill reads each chosen
 * expert's weights once per chunk. The numbers are llama.cpp's build_moe_ffn as llama (Mixtral)
 * and qwen3moe call it (softmax gating, norm_w = true, no weight scale); see ZrLayerFacts. */
#pragma once
#include <stdint.h>

#include "backend.h"
#include "cpu/matmul.h"
#include "cpu/pool.h"
#include "model.h"

/* The smallest sum of the chosen weights divided by (llama.cpp clamps it to the smallest normal
 * F16 before the division, so a sum of zero gives no NaN). */
#define ZR_MOE_MIN_WEIGHT_SUM 6.103515625e-5f

/* One token's routing: probs[n_expert] = softmax(logits) (probs is scratch, may equal logits);
 * ids[n_used] = the experts of the n_used largest probabilities, largest first (equal ones: the
 * lower id first); weights[n_used] = their probabilities / max(their sum, ZR_MOE_MIN_WEIGHT_SUM). */
void zr_cpu_moe_route(const float *logits, float *probs, int n_expert, int n_used, int32_t *ids, float *weights);

/* Buffers of the block for up to cap tokens (of the largest MoE layer of the model). */
typedef struct ZrCpuMoe {
    int cap;
    float *logits;   /* [cap][n_expert] router output, softmaxed in place */
    int32_t *ids;    /* [cap][n_used] chosen experts, largest weight first */
    float *weights;  /* [cap][n_used] */
    int32_t *slot;   /* [cap * n_used] (token * n_used + j) of the expert's tokens, grouped by expert */
    float *xg;       /* [cap][n_embd] the normed inputs of one expert's tokens */
    float *gate;     /* [cap][n_ff_expert] */
    float *up;       /* [cap][n_ff_expert] */
    float *down;     /* [cap][n_embd] one expert's outputs */
    float *out;      /* [cap][n_used][n_embd] each token's experts' outputs, in the order chosen */
    int max_used;    /* the largest n_expert_used of the model's layers */
    int32_t *last;   /* [n_layer][max_used] the experts the last token of the last batch chose per layer */
} ZrCpuMoe;

int zr_cpu_moe_init(ZrCpuMoe *moe, const ZrModel *m, int cap, ZrError *err);
void zr_cpu_moe_free(ZrCpuMoe *moe);
/* The FFN of MoE layer L over n tokens: y[n][n_embd] = sum over each token's chosen experts e (in
 * the order chosen) of weight_e * down_e(silu(gate_e x) * up_e x), x = xn[n][n_embd] (normed). */
void zr_cpu_moe_ffn(ZrCpuMoe *moe, ZrCpuPool *pool, const ZrCpuScratch *tiles, const ZrLayer *L, int il, int n_embd,
                    const float *xn, int n, float *y);

/* The experts the last token the CPU backend be computed chose in layer il (its n_expert_used of
 * them, largest weight first), NULL for a dense layer or before any token: what the tests show
 * of the routing (e.g. that the chosen experts change from token to token). */
const int32_t *zr_cpu_backend_moe_last(const ZrBackend *be, int il);
