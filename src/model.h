/* A model: hyper-parameters read from GGUF keys per architecture, and every weight bound by
 * name with its type and shape checked (expected vs found named in the error). Weights point
 * into the mmap of the file; nothing is copied. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "gguf.h"

typedef enum ZrArch { ZR_ARCH_LLAMA, ZR_ARCH_QWEN2, ZR_ARCH_QWEN3, ZR_ARCH_GEMMA2, ZR_ARCH_GEMMA3, ZR_ARCH_PHI3, ZR_ARCH_QWEN3MOE } ZrArch;

/* The architecture as data: what a backend does differs between architectures only through the
 * facts below (per model in ZrHparams, per layer in ZrLayerFacts), filled in one place per
 * architecture (model.c's arch table). Backends read facts, never ZrArch or tensor presence. */

/* Which values RoPE pairs (llama.cpp's LLAMA_ROPE_TYPE_*). */
typedef enum ZrRopeKind {
    ZR_ROPE_NONE, /* no rotation anywhere */
    ZR_ROPE_NORM, /* adjacent pairs (2i, 2i+1): llama */
    ZR_ROPE_NEOX, /* pairs (i, i + rope_dim/2): qwen2, qwen3, gemma, phi3 */
} ZrRopeKind;

/* The block norms: RMSNorm (x / sqrt(mean(x^2) + eps) * w) today; LayerNorm would go here. */
typedef enum ZrNormKind { ZR_NORM_RMS } ZrNormKind;

/* Activation of the gated FFN: h = act(gate) * up. */
typedef enum ZrAct {
    ZR_ACT_SILU,      /* x * sigmoid(x): llama, qwen, phi3 */
    ZR_ACT_GELU_TANH, /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): gemma (issue 14) */
} ZrAct;

typedef struct ZrHparams {
    ZrArch arch;
    char arch_name[32];  /* general.architecture */
    int n_embd;          /* model width */
    int n_layer;
    int n_head;          /* query heads */
    int n_head_kv;       /* key/value heads (GQA when < n_head) */
    int head_dim;        /* key/value length per head (attention.key_length, else n_embd/n_head) */
    int n_ff;            /* feed-forward hidden width */
    int n_vocab;
    int n_ctx_train;     /* context_length */
    int n_ctx_orig;      /* rope.scaling.original_context_length, else n_ctx_train: a context longer than
                          * this takes phi3's long rope factors (llama.cpp's n_ctx_orig_yarn) */
    /* -- per-model facts -- */
    ZrNormKind norm;     /* every norm of the model */
    float rms_eps;       /* attention.layer_norm_rms_epsilon: the eps of every norm */
    ZrRopeKind rope;     /* the architecture's pairing; a layer may still skip rope (ZrLayerFacts.rope) */
    int rope_dim;        /* rope.dimension_count (<= head_dim): values rotated per head */
    float rope_theta;    /* rope.freq_base, default 10000: the base of layers that do not say otherwise */
    float rope_freq_scale; /* 1 / rope.scaling.factor for linear scaling; 1 when none (default of the layers too) */
    float rope_attn_factor; /* rope.scaling.attn_factor, default 1: cos and sin are multiplied by it (llama.cpp's
                          * yarn_attn_factor without yarn: phi3's LongRoPE writes sqrt(1 + ln(s) / ln(n_ctx_orig))) */
    float embd_scale;    /* the embedding row is multiplied by this: 1, sqrt(n_embd) for gemma */
    float attn_scale;    /* attention scores are q.k * attn_scale: 1/sqrt(head_dim) unless the architecture says
                          * (gemma's query_pre_attn_scalar: llama.cpp scales Q by it before q.k; mind the rounding) */
    float attn_softcap;  /* scores = c * tanh(scores / c) before the softmax; 0 = none (gemma2) */
    float final_softcap; /* logits = c * tanh(logits / c); 0 = none (gemma2) */
} ZrHparams;

/* Per-layer facts: what a layer computes beyond llama's block (defaults: llama's). */
typedef struct ZrLayerFacts {
    ZrAct act;             /* of the gated FFN */
    bool qkv_bias;         /* attn_{q,k,v}.bias added to the projections (qwen2; llama when the file has them; an absent one adds 0) */
    bool qk_norm;          /* RMSNorm over each head of Q and of K before rope (qwen3, gemma3) */
    bool post_attn_norm;   /* RMSNorm of the attention output before the residual add (gemma2/3) */
    bool post_ffn_norm;    /* RMSNorm of the FFN output before the residual add (gemma2/3) */
    bool rope;             /* the layer rotates Q and K (false: a NoPE layer) */
    float rope_theta;      /* this layer's rope base (gemma3's local layers have their own) */
    float rope_freq_scale; /* this layer's linear frequency scale */
    int window;            /* sliding window: a token attends to the last `window` positions; 0 = all (global) */
    int n_expert;          /* experts of the FFN; 0 = dense (issue 15) */
    int n_expert_used;     /* experts chosen per token; 0 when dense */
    int n_ff_expert;       /* hidden width of each expert's FFN; 0 when dense (qwen3moe: expert_feed_forward_length, else
                            * n_ff / n_expert_used; llama: n_ff). The routing (llama.cpp's build_moe_ffn as llama and
                            * qwen3moe call it): p = softmax(router logits), the n_expert_used largest p chosen, their p
                            * divided by their sum (clamped to >= 2^-14), the experts' SwiGLU outputs times those
                            * weights summed in the order chosen (largest p first) */
} ZrLayerFacts;

/* One weight: a 2-D view [ne0 = input dim (row length), ne1 = output dim (rows)];
 * 1-D tensors (norms, biases) have ne1 = 1. data == NULL means absent (optional tensors). */
typedef struct ZrWeight {
    const void *data;
    uint32_t type;       /* ZrType */
    int64_t ne0, ne1;
    uint64_t nbytes;
    const char *name;    /* NUL-terminated tensor name, e.g. "blk.3.attn_q.weight" (owned by the model) */
} ZrWeight;

typedef struct ZrLayer {
    ZrLayerFacts facts;          /* first: the weights follow, and only weights */
    ZrWeight attn_norm;          /* [n_embd] f32 */
    /* wq, wk, wv may be row views of one fused attn_qkv.weight, w_gate and w_up of phi3's
     * [n_embd, 2 n_ff] ffn_up.weight (gate rows first): each is a matrix of its own all the same */
    ZrWeight wq;                 /* [n_embd, n_head*head_dim] */
    ZrWeight wk;                 /* [n_embd, n_head_kv*head_dim] */
    ZrWeight wv;                 /* [n_embd, n_head_kv*head_dim] */
    ZrWeight bq, bk, bv;         /* [n_head*head_dim], [n_head_kv*head_dim] x2, f32, when facts.qkv_bias (llama: each one optional); else absent */
    ZrWeight q_norm, k_norm;     /* [head_dim] f32 when facts.qk_norm; else absent */
    ZrWeight wo;                 /* [n_head*head_dim, n_embd] */
    ZrWeight attn_post_norm;     /* [n_embd] f32 when facts.post_attn_norm; else absent */
    ZrWeight ffn_norm;           /* [n_embd] f32 */
    ZrWeight w_gate;             /* [n_embd, n_ff] */
    ZrWeight w_up;               /* [n_embd, n_ff] */
    ZrWeight w_down;             /* [n_ff, n_embd] */
    /* when facts.n_expert (w_gate, w_up, w_down absent): the router and the experts' matrices, each
     * expert tensor a GGUF [ne0, n_ff_expert or n_embd, n_expert] seen as one matrix of n_expert
     * blocks of rows (zr_weight_expert gives expert e's) */
    ZrWeight ffn_gate_inp;       /* [n_embd, n_expert] router */
    ZrWeight gate_exps;          /* [n_embd, n_ff_expert * n_expert] */
    ZrWeight up_exps;            /* [n_embd, n_ff_expert * n_expert] */
    ZrWeight down_exps;          /* [n_ff_expert, n_embd * n_expert] */
    ZrWeight ffn_post_norm;      /* [n_embd] f32 when facts.post_ffn_norm; else absent */
} ZrLayer;

typedef struct ZrModel {
    ZrGguf gguf;                 /* owns the mmap */
    ZrHparams hp;
    ZrWeight tok_embd;           /* [n_embd, n_vocab] */
    ZrWeight output_norm;        /* [n_embd] f32 */
    ZrWeight output;             /* [n_embd, n_vocab]; == tok_embd when tied */
    bool tied_output;            /* no output.weight (optional for llama/qwen, absent for gemma) */
    ZrWeight rope_freqs;         /* [rope_dim/2] f32 frequency divisors of every rotating layer (Llama 3.1); absent if none */
    ZrWeight rope_long, rope_short; /* [rope_dim/2] f32 phi3's LongRoPE divisors (rope_factors_long/short.weight): one
                                  * or the other by the context length (zr_model_rope_factors); absent if none */
    ZrLayer *layers;             /* [n_layer] */
    uint64_t n_params;
    uint64_t n_params_active;    /* parameters a token uses: n_params less the experts it does not choose */
    uint64_t bytes_per_token;    /* weight bytes read per decoded token (all matrices once, one embedding row; of
                                  * expert tensors only the n_expert_used chosen experts' share) */
    char *names;                 /* storage of the weights' NUL-terminated names */
    float *aligned;              /* copies of the f32 vectors the file placed at addresses that are not a
                                  * multiple of 4 (general.alignment 1 or 2); NULL when there are none */
} ZrModel;

/* Opens path, reads hyper-parameters and binds every tensor. Matrices point into the map (their
 * rows are read bytewise, any alignment will do); an f32 vector (a norm, a bias, rope_freqs)
 * is read as floats in place, so one the file misaligns is bound to an aligned copy. An unsupported architecture is
 * refused with its name and the supported list. */
int zr_model_load(ZrModel *m, const char *path, ZrError *err);
/* Same from an already-parsed GGUF (takes ownership of g's map on success). */
int zr_model_from_gguf(ZrModel *m, ZrGguf *g, ZrError *err);
void zr_model_free(ZrModel *m);
const char *zr_arch_supported_list(void);
/* Refuses a fact value that zrun does not compute yet (e.g. a GELU FFN or a sliding window
 * before issue 14, experts before issue 15), naming the layer, the fact and its value.
 * zr_model_from_gguf calls it before binding tensors; a backend may rely on it. */
int zr_model_check_facts(const ZrModel *m, ZrError *err);
/* "silu", "gelu_tanh"; "none", "norm", "neox" (as llama.cpp names them) */
const char *zr_act_name(ZrAct a);
const char *zr_rope_kind_name(ZrRopeKind r);
/* The rope frequency divisors a backend with a context of n_ctx positions uses (as llama.cpp's
 * get_rope_factors): rope_freqs when the file has it, else phi3's long factors when n_ctx >
 * n_ctx_orig, else its short ones. Never NULL; ->data NULL = none. */
const ZrWeight *zr_model_rope_factors(const ZrModel *m, int n_ctx);
/* Expert e's matrix (e < n_expert) of a bound expert tensor of n_expert blocks of rows (gate_exps,
 * up_exps, down_exps), as a weight of its own with the tensor's name. */
ZrWeight zr_weight_expert(const ZrWeight *w, int n_expert, int e);
/* Row r of a [ne0, ne1] weight (r < ne1). */
const void *zr_weight_row(const ZrWeight *w, int64_t r);
