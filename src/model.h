/* A model: hyper-parameters read from GGUF keys per architecture, and every weight bound by
 * name with its type and shape checked (expected vs found named in the error). Weights point
 * into the mmap of the file; nothing is copied. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "gguf.h"

typedef enum ZrArch { ZR_ARCH_LLAMA, ZR_ARCH_QWEN2, ZR_ARCH_QWEN3 } ZrArch;

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
    int rope_dim;        /* rope.dimension_count (<= head_dim) */
    float rope_theta;    /* rope.freq_base, default 10000 */
    float rope_freq_scale; /* 1 / rope.scaling.factor for linear scaling; 1 when none */
    bool rope_neox;      /* NeoX pairs (i, i+rope_dim/2) vs adjacent pairs (2i, 2i+1) */
    float rms_eps;       /* attention.layer_norm_rms_epsilon */
} ZrHparams;

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
    ZrWeight attn_norm;          /* [n_embd] f32 */
    ZrWeight wq;                 /* [n_embd, n_head*head_dim] */
    ZrWeight wk;                 /* [n_embd, n_head_kv*head_dim] */
    ZrWeight wv;                 /* [n_embd, n_head_kv*head_dim] */
    ZrWeight bq, bk, bv;         /* [n_head*head_dim], [n_head_kv*head_dim] x2, f32: qwen2 always, llama when the file has them; else absent */
    ZrWeight q_norm, k_norm;     /* qwen3: [head_dim] f32; else absent */
    ZrWeight wo;                 /* [n_head*head_dim, n_embd] */
    ZrWeight ffn_norm;           /* [n_embd] f32 */
    ZrWeight w_gate;             /* [n_embd, n_ff] */
    ZrWeight w_up;               /* [n_embd, n_ff] */
    ZrWeight w_down;             /* [n_ff, n_embd] */
} ZrLayer;

typedef struct ZrModel {
    ZrGguf gguf;                 /* owns the mmap */
    ZrHparams hp;
    ZrWeight tok_embd;           /* [n_embd, n_vocab] */
    ZrWeight output_norm;        /* [n_embd] f32 */
    ZrWeight output;             /* [n_embd, n_vocab]; == tok_embd when tied */
    bool tied_output;
    ZrWeight rope_freqs;         /* [rope_dim/2] f32 frequency divisors (Llama 3.1); absent if none */
    ZrLayer *layers;             /* [n_layer] */
    uint64_t n_params;
    uint64_t bytes_per_token;    /* weight bytes read per decoded token (all matrices once, one embedding row) */
    char *names;                 /* storage of the weights' NUL-terminated names */
} ZrModel;

/* Opens path, reads hyper-parameters and binds every tensor. An unsupported architecture is
 * refused with its name and the supported list. */
int zr_model_load(ZrModel *m, const char *path, ZrError *err);
/* Same from an already-parsed GGUF (takes ownership of g's map on success). */
int zr_model_from_gguf(ZrModel *m, ZrGguf *g, ZrError *err);
void zr_model_free(ZrModel *m);
const char *zr_arch_supported_list(void);
/* Row r of a [ne0, ne1] weight (r < ne1). */
const void *zr_weight_row(const ZrWeight *w, int64_t r);
