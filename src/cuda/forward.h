/* The GPU forward pass: weights uploaded once (cuda/upload.c), the KV cache and every workspace
 * allocated once before the first token (cuda/buffers.c), a decode step that is nothing but
 * launches through the launcher (so the graph controller can record and replay it), and a
 * prefill through cuBLASLt GEMMs. The kernels are cuda/kreg.h's, launched through the typed
 * wrappers of cuda/klaunch.h; the matrix-vector shapes are cuda/mv_shape.c's and the attention
 * kernels cuda/attn.c's choice.
 *
 * Precision: the decode step computes in F32 throughout (F32 activations, F32 accumulation in
 * every matrix-vector kernel, F32 KV cache), as the CPU reference does. The prefill (M > 1)
 * multiplies F16 operands (activations rounded to F16, quantized weights dequantized to F16)
 * with F32 accumulation, except F32 weights, which stay F32 end to end. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "cuda/cublaslt.h"
#include "cuda/klaunch.h"
#include "cuda/kreg.h"
#include "cuda/launch.h"
#include "cuda/module.h"
#include "cuda/mv_shape.h"
#include "cuda/tail.h"
#include "cuda/weights.h"
#include "model.h"
#include "quant.h"

#define ZR_CUF_UBATCH 512   /* prefill tokens per pass (activation buffers hold this many rows) */
#define ZR_CUF_LOGIT_ROWS 64 /* logit rows computed per output GEMM when all rows are asked for */

typedef struct ZrCuLayer {
    CUdeviceptr attn_norm, ffn_norm; /* f32 [n_embd] */
    ZrCuWeight qkv[3];               /* runs of one type stacked: [n_embd, q_dim + 2 kv_dim], or wq|wk and wv, .. */
    int n_qkv, qkv_off[3];           /* matrices, and where each one's output starts in a qkv row */
    CUdeviceptr bias;                /* facts.qkv_bias: f32 [q_dim + 2 kv_dim] (bq | bk | bv); else 0 */
    CUdeviceptr q_norm, k_norm;      /* facts.qk_norm: f32 [head_dim]; else 0 */
    CUdeviceptr rope_freq;           /* f64 [rope_dim/2]: angle per position of each pair (shared by
                                      * consecutive layers of one rope base and scale) */
    ZrCuWeight wo;                   /* [q_dim, n_embd] */
    ZrCuWeight gu[2];                /* fused: gu[0] = [n_embd, 2 n_ff] (gate | up); else gate, up */
    int n_gu, gu_off[2];
    ZrCuWeight down;                 /* [n_ff, n_embd] */
    CUdeviceptr post_attn_norm, post_ffn_norm; /* facts.post_attn_norm / post_ffn_norm: f32 [n_embd]; else 0 */
} ZrCuLayer;

/* Told the bytes of weights on the device so far and the total, after each matrix upload (the
 * app draws its load line from it: ZrBackendOptions.progress). */
struct ZrCuForward;
typedef struct ZrCuProgress {
    void (*fn)(void *ctx, uint64_t done, uint64_t total);
    void *ctx;
    /* Told once, when the activation buffers and workspaces exist and before the weights go up
     * (the prefill's warm-up runs its GEMMs on them meanwhile: cuda/warm.h), and with f NULL
     * before a failed zr_cuf_init frees them (returning when nothing uses them); NULL = nobody. */
    void (*buffers)(void *buffers_ctx, const struct ZrCuForward *f);
    void *buffers_ctx;
    /* The kernels' module may load on another thread while the buffers and the staging chunks
     * are set up and the first chunks go up: `module` waits until it is loaded (the upload's
     * repacks need it; f->k may still be being looked up: zr_cuf_init launches no other kernel,
     * and its caller waits for f->k after it), `module_loaded` asks without waiting; NULL = it is. */
    int (*module)(void *kernels_ctx, ZrError *err);
    bool (*module_loaded)(void *kernels_ctx);
    void *kernels_ctx;
    /* the upload's host chunks, made before the context (NULL: the upload pins its own) */
    const struct ZrStageHost *staging;
} ZrCuProgress;

typedef struct ZrCuForward {
    const ZrModel *m;
    ZrCuda *cuda;
    ZrLauncher *launcher;
    ZrCublasLt *lt;
    ZrCuKernels *k;
    int n_ctx;
    int n_embd, q_dim, kv_dim, qkv_dim, n_ff, n_vocab, head_dim;
    /* weights */
    ZrCuWeight tok_embd, output;    /* [n_embd, n_vocab]; output == tok_embd when tied */
    CUdeviceptr output_norm;        /* f32 [n_embd] */
    ZrCuLayer *layers;              /* [n_layer] */
    size_t weight_bytes;
    ZrCuProgress progress;          /* fn NULL: no reports */
    uint64_t progress_total;        /* bytes the upload will place (zr_cuf_plan's weights), for progress */
    double upload_s;                /* the weights' upload, file to device (cuda/upload.c) */
    double upload_setup_s;          /* of it: the copy streams, page-locked and staging chunks, threads */
    uint64_t upload_bytes;          /* bytes it copied (the file's, before the repack) */
    double upload_h2d_gbps;         /* the machine's page-locked host-to-device rate, measured at upload */
    int upload_threads;             /* host threads that gathered the chunks */
    int upload_waiting;             /* most device chunks whose rows waited for the kernels' module at once */
    bool upload_prepared;           /* the host chunks were made before the context (ZrCuProgress.staging) */
    double upload_gather_ms;        /* of upload_s: the host threads gathering chunks */
    double upload_wait_ms;          /* of upload_s: waiting for a chunk's copy or repack to end */
    double alloc_ms;                /* in cuMemAlloc (zr_cuf_dalloc) so far */
    CUdeviceptr arena;              /* during the upload: the weights' one allocation (zr_cuf_dalloc takes from it) */
    size_t arena_size, arena_used;
    /* state */
    CUdeviceptr kc, vc;             /* [n_layer][n_ctx][kv_dim], f16 (kv16) or f32 */
    bool kv16;                      /* the KV cache holds halves (ZR_KV_F16): the kernels' _h twins */
    CUdeviceptr d_tok;              /* i32 [1]: the decode step's token */
    CUdeviceptr d_pos;              /* i32 [1]: position of the first row; == d_tok + 4 (one copy writes both) */
    CUdeviceptr d_ptok;             /* i32 [ZR_CUF_UBATCH]: a prefill's token ids */
    /* activations, [rows][width] row-major f32 unless said */
    CUdeviceptr x;                  /* [UB][n_embd] residual stream */
    CUdeviceptr xn;                 /* [UB][n_embd] normed block input */
    CUdeviceptr qkv;                /* [UB][qkv_dim] q | k | v */
    CUdeviceptr att;                /* [UB][q_dim] attention output */
    CUdeviceptr gu;                 /* [UB][2 n_ff] gate | up */
    CUdeviceptr ff;                 /* [UB][n_ff] swiglu output */
    CUdeviceptr logits;             /* [LOGIT_ROWS][n_vocab] */
    CUdeviceptr d_pick;             /* ZR_PICK_BYTES: the greedy pick of the decode step (i32 token, i32 first NaN id) */
    int pick_n;                     /* > 0: the decode step ends with the greedy pick over logits [0, pick_n) */
    ZrTail tail;                    /* else ZR_TAIL_GREEDY / SAMPLE: it ends with that tail (cuda/sample.h) */
    ZrPickIO tail_io;               /* the tail's buffers (logits, tok/pos, ring), set by the backend */
    const ZrSampleDev *tail_sample; /* ZR_TAIL_SAMPLE: the chain's parameters, state and scratch */
    CUdeviceptr part_d, part_p;     /* attention partials, decode / prefill */
    int chunk_d, n_chunks_d, chunk_p, n_chunks_p;
    int chunk_f, n_chunks_f;        /* the fused decode attention's chunks (>= chunk_d; set once at init) */
    CUdeviceptr attn_count;         /* i32 [n_head]: the fused decode attention's chunk counters (0 between launches) */
    bool attn_fused;                /* decode attention in one kernel per layer (attn_decode_f32), where it fits */
    bool attn_grouped;              /* ... in blocks of query-head groups (cuda/attn.h zr_cuf_attn_group_at) */
    int attn_group_rows;            /* ... from this position, in layers whose window reaches it */
    CUdeviceptr xh;                 /* f16 [UB][max width] GEMM activation operand */
    CUdeviceptr wbuf;               /* f16 [wbuf_elems] dequantized weight rows for one GEMM */
    size_t wbuf_elems;
    CUdeviceptr lt_ws;              /* cuBLASLt workspace of ZR_CUF_LT_WS_BYTES (cuda/buffers.h) */
    struct ZrCuMoe *moe;            /* the routed FFN's weights and workspaces (cuda/moe.h); NULL on a dense model */
    CUdeviceptr *allocs;            /* everything above, for freeing (cuda/upload.h zr_cuf_dalloc) */
    int n_allocs, cap_allocs;
} ZrCuForward;

/* Bytes of one cached K or V value: a half (kv16) or a float */
static inline size_t zr_cuf_kv_value_bytes(bool kv16) { return kv16 ? 2 : sizeof(float); }

/* Uploads the weights and allocates the KV cache for n_ctx (of halves with kv16, else floats)
 * and every workspace. Checks first
 * that it all fits: out of memory says how much was needed and how much was free. */
int zr_cuf_init(ZrCuForward *f, const ZrModel *m, ZrCuda *cuda, ZrLauncher *l, ZrCublasLt *lt, ZrCuKernels *k,
                int n_ctx, bool kv16, const ZrCuProgress *progress, ZrError *err);
void zr_cuf_free(ZrCuForward *f);
/* After the context was reset (its memory is gone with it): forgets the device pointers
 * without freeing them. */
void zr_cuf_forget(ZrCuForward *f);

/* One decode step: token f->d_tok[0] at position f->d_pos[0] -> f->logits[0][n_vocab], and
 * with a tail the pick on the device (f->tail: a record into the ring, tok/pos advanced), or
 * with pick_n > 0 the greedy pick over logits [0, pick_n) -> f->d_pick. Launches only (no copies, syncs or allocations); the same launches at every position. */
int zr_cuf_decode_step(ZrCuForward *f, ZrError *err);

/* Prefill n tokens (n <= ZR_CUF_UBATCH) at positions pos.. (cuBLASLt; eager). Writes the
 * logits of every row (all_logits) or of the last row into the host buffer `logits` when it
 * is not NULL. Synchronizes before returning. */
int zr_cuf_prefill(ZrCuForward *f, const int32_t *tokens, int n, int pos, float *logits, bool all_logits,
                   ZrError *err);

/* Bytes the weights, KV cache and workspaces will take on the device for this model and n_ctx
 * (what zr_cuf_init allocates). */
void zr_cuf_plan(const ZrModel *m, int n_ctx, bool kv16, size_t *weights, size_t *kv, size_t *work);
