/* The CPU reference's mixture-of-experts FFN: llama.cpp's build_moe_ffn (de3ff815,
 * src/llama-graph.cpp) for softmax gating with renormalized weights: logits = router x; probs =
 * softmax(logits); the top n_used by argsort (descending); weights = probs of those / their sum
 * (clamped); each chosen expert's SwiGLU FFN, its output times its weight (ggml_mul), the
 * weighted outputs added in the order chosen (ggml_add of views 0, 1, ...). */
#include "cpu/moe.h"

#include <stdlib.h>
#include <string.h>

#include "cpu/ops.h"

void zr_cpu_moe_route(const float *logits, float *probs, int n_expert, int n_used, int32_t *ids, float *weights) {
    if (probs != logits) memcpy(probs, logits, sizeof(float) * (size_t)n_expert);
    zr_cpu_softmax(probs, n_expert, 1.0f);
    /* selection by repeated maximum: n_used is small (2..8 of up to 128 experts) */
    for (int j = 0; j < n_used; j++) {
        int best = -1;
        for (int e = 0; e < n_expert; e++) {
            bool taken = false;
            for (int i = 0; i < j && !taken; i++) taken = ids[i] == e;
            if (!taken && (best < 0 || probs[e] > probs[best])) best = e;
        }
        ids[j] = best;
        weights[j] = probs[best];
    }
    float sum = 0.0f; /* ggml_sum_rows: in order, in F32 */
    for (int j = 0; j < n_used; j++) sum += weights[j];
    if (sum < ZR_MOE_MIN_WEIGHT_SUM) sum = ZR_MOE_MIN_WEIGHT_SUM;
    for (int j = 0; j < n_used; j++) weights[j] /= sum;
}

void zr_cpu_moe_free(ZrCpuMoe *moe) {
    free(moe->logits);
    free(moe->ids);
    free(moe->weights);
    free(moe->slot);
    free(moe->xg);
    free(moe->gate);
    free(moe->up);
    free(moe->down);
    free(moe->out);
    free(moe->last);
    memset(moe, 0, sizeof *moe);
}

int zr_cpu_moe_init(ZrCpuMoe *moe, const ZrModel *m, int cap, ZrError *err) {
    memset(moe, 0, sizeof *moe);
    int n_expert = 0, n_used = 0, n_ff = 0;
    for (int il = 0; il < m->hp.n_layer; il++) {
        const ZrLayerFacts *f = &m->layers[il].facts;
        if (f->n_expert > n_expert) n_expert = f->n_expert;
        if (f->n_expert_used > n_used) n_used = f->n_expert_used;
        if (f->n_ff_expert > n_ff) n_ff = f->n_ff_expert;
    }
    if (!n_expert) return 0;
    const size_t t = (size_t)cap, e = (size_t)m->hp.n_embd, f = sizeof(float);
    moe->logits = malloc(t * (size_t)n_expert * f);
    moe->ids = malloc(t * (size_t)n_used * sizeof(int32_t));
    moe->weights = malloc(t * (size_t)n_used * f);
    moe->slot = malloc(t * (size_t)n_used * sizeof(int32_t));
    moe->xg = malloc(t * e * f);
    moe->gate = malloc(t * (size_t)n_ff * f);
    moe->up = malloc(t * (size_t)n_ff * f);
    moe->down = malloc(t * e * f);
    moe->out = malloc(t * (size_t)n_used * e * f);
    moe->last = calloc((size_t)m->hp.n_layer * (size_t)n_used, sizeof(int32_t));
    moe->max_used = n_used;
    if (!moe->logits || !moe->ids || !moe->weights || !moe->slot || !moe->xg || !moe->gate || !moe->up || !moe->down || !moe->out ||
        !moe->last) {
        zr_cpu_moe_free(moe);
        return zr_err(err, ZR_E_NOMEM, "cpu backend: out of memory for the expert activations of %d tokens", cap);
    }
    moe->cap = cap;
    return 0;
}

void zr_cpu_moe_ffn(ZrCpuMoe *moe, ZrCpuPool *pool, const ZrCpuScratch *tiles, const ZrLayer *L, int il, int n_embd,
                    const float *xn, int n, float *y) {
    const ZrLayerFacts *f = &L->facts;
    const int n_expert = f->n_expert, k = f->n_expert_used, ff = f->n_ff_expert;
    const size_t row = (size_t)n_embd * sizeof(float);
    ZrCpuMatmul router = {&L->ffn_gate_inp, moe->logits};
    zr_cpu_matmul(pool, &router, 1, xn, n, tiles);
    for (int t = 0; t < n; t++)
        zr_cpu_moe_route(moe->logits + (int64_t)t * n_expert, moe->logits + (int64_t)t * n_expert, n_expert, k, moe->ids + (int64_t)t * k,
                         moe->weights + (int64_t)t * k);
    memcpy(moe->last + (int64_t)il * moe->max_used, moe->ids + (int64_t)(n - 1) * k, sizeof(int32_t) * (size_t)k);
    /* each expert once over the tokens that chose it (a row's dot product gives the same bits for
     * one token or many: matmul.h), its outputs put back in each token's slot of the order chosen */
    for (int e = 0; e < n_expert; e++) {
        int cnt = 0;
        for (int s = 0; s < n * k; s++)
            if (moe->ids[s] == e) {
                moe->slot[cnt] = s;
                memcpy(moe->xg + (int64_t)cnt * n_embd, xn + (int64_t)(s / k) * n_embd, row);
                cnt++;
            }
        if (!cnt) continue;
        const ZrWeight wg = zr_weight_expert(&L->gate_exps, n_expert, e), wu = zr_weight_expert(&L->up_exps, n_expert, e),
                       wd = zr_weight_expert(&L->down_exps, n_expert, e);
        ZrCpuMatmul gate_up[2] = {{&wg, moe->gate}, {&wu, moe->up}};
        zr_cpu_matmul(pool, gate_up, 2, moe->xg, cnt, tiles);
        zr_cpu_swiglu(moe->gate, moe->gate, moe->up, (int64_t)cnt * ff);
        ZrCpuMatmul down = {&wd, moe->down};
        zr_cpu_matmul(pool, &down, 1, moe->gate, cnt, tiles);
        for (int i = 0; i < cnt; i++) memcpy(moe->out + (int64_t)moe->slot[i] * n_embd, moe->down + (int64_t)i * n_embd, row);
    }
    /* ggml_mul by the weight, then ggml_add of the views in the order chosen */
    for (int t = 0; t < n; t++) {
        float *yt = y + (int64_t)t * n_embd;
        for (int j = 0; j < k; j++) {
            const float w = moe->weights[(int64_t)t * k + j];
            const float *o = moe->out + ((int64_t)t * k + j) * n_embd;
            if (j == 0)
                for (int d = 0; d < n_embd; d++) yt[d] = o[d] * w;
            else
                for (int d = 0; d < n_embd; d++) yt[d] += o[d] * w;
        }
    }
}
