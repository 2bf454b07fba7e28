#include "cuda/buffers.h"

#include <stddef.h>

#include "cuda/attn.h"
#include "cuda/pick.h"
#include "cuda/upload.h"

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }
static size_t smax(size_t a, size_t b) { return a > b ? a : b; }

size_t zr_cuf_wbuf_elems(const ZrModel *m) {
    const ZrHparams *hp = &m->hp;
    const size_t n_embd = (size_t)hp->n_embd, q_dim = (size_t)hp->n_head * hp->head_dim;
    const size_t qkv_dim = q_dim + 2 * (size_t)hp->n_head_kv * hp->head_dim;
    size_t e = smax(smax(n_embd * qkv_dim, n_embd * 2 * (size_t)hp->n_ff), n_embd * q_dim);
    return smax(e, (size_t)16 << 20);
}

int zr_cuf_buffers(const ZrModel *m, int n_ctx, bool kv16, ZrCuBuffer out[ZR_CUF_MAX_BUFFERS]) {
    const ZrHparams *hp = &m->hp;
    const size_t UB = ZR_CUF_UBATCH, fl = sizeof(float), ctx = (size_t)n_ctx, kve = zr_cuf_kv_value_bytes(kv16);
    const size_t n_embd = hp->n_embd, n_ff = hp->n_ff, n_head = hp->n_head, head_dim = hp->head_dim;
    const size_t q_dim = n_head * head_dim, kv_dim = (size_t)hp->n_head_kv * head_dim, qkv_dim = q_dim + 2 * kv_dim;
    const size_t wmax = smax(smax(n_embd, q_dim), n_ff);
    int cd, nd, cp, np;
    zr_cuf_attn_chunks(n_ctx, &cd, &nd, &cp, &np);
#define B(fld, b, w, k) {(w), offsetof(ZrCuForward, fld), (b), (k)}
    const ZrCuBuffer t[] = {
        B(kc, (size_t)hp->n_layer * ctx * kv_dim * kve, "the K cache", true), /* [n_layer][n_ctx][kv_dim] */
        B(vc, (size_t)hp->n_layer * ctx * kv_dim * kve, "the V cache", true),
        /* token and position of the decode step, then (at 256) the prefill's token ids */
        B(d_tok, 256 + UB * sizeof(int32_t), "token ids and position", false),
        B(x, UB * n_embd * fl, "activations", false),
        B(xn, UB * n_embd * fl, "activations", false),
        B(qkv, UB * qkv_dim * fl, "activations", false),
        B(att, UB * q_dim * fl, "activations", false),
        B(gu, UB * 2 * n_ff * fl, "activations", false),
        B(ff, UB * n_ff * fl, "activations", false),
        B(logits, (size_t)ZR_CUF_LOGIT_ROWS * hp->n_vocab * fl, "logits", false),
        B(d_pick, ZR_PICK_BYTES, "the greedy pick", false),
        B(part_d, n_head * (size_t)nd * (head_dim + 2) * fl, "attention partials", false),
        B(part_p, UB * n_head * (size_t)np * (head_dim + 2) * fl, "attention partials", false),
        B(attn_count, n_head * sizeof(int32_t), "attention counters", false),
        B(xh, UB * wmax * 2, "f16 activations", false),
        B(wbuf, zr_cuf_wbuf_elems(m) * 2, "f16 weight buffer", false),
        B(lt_ws, ZR_CUF_LT_WS_BYTES, "cuBLASLt workspace", false),
    };
#undef B
    const int n = (int)(sizeof t / sizeof t[0]);
    _Static_assert(sizeof t / sizeof t[0] <= ZR_CUF_MAX_BUFFERS, "ZR_CUF_MAX_BUFFERS is too small");
    for (int i = 0; i < n; i++) out[i] = t[i];
    return n;
}

int zr_cuf_buffers_alloc(ZrCuForward *f, ZrError *err) {
    ZrCuBuffer t[ZR_CUF_MAX_BUFFERS];
    const int n = zr_cuf_buffers(f->m, f->n_ctx, f->kv16, t);
    f->wbuf_elems = zr_cuf_wbuf_elems(f->m);
    for (int i = 0; i < n; i++) {
        int rc = zr_cuf_dalloc(f, (CUdeviceptr *)((char *)f + t[i].field), t[i].bytes, t[i].what, err);
        if (rc) return rc;
    }
    return ZR_OK;
}

void zr_cuf_plan(const ZrModel *m, int n_ctx, bool kv16, size_t *weights, size_t *kv, size_t *work) {
    ZrCuBuffer t[ZR_CUF_MAX_BUFFERS];
    const int n = zr_cuf_buffers(m, n_ctx, kv16, t);
    *weights = zr_cuf_upload_bytes(m);
    *kv = *work = 0;
    for (int i = 0; i < n; i++) *(t[i].kv ? kv : work) += align256(t[i].bytes);
}
