#include "zt_decode.h"

#include <stdlib.h>
#include <string.h>

void zt_samplings(ZtSampling out[ZT_N_SAMPLINGS], uint64_t seed) {
    const ZrSamplerParams def = zr_sampler_defaults();
    for (int i = 0; i < ZT_N_SAMPLINGS; i++) out[i].sp = def;
    out[0].name = "greedy";
    out[0].sp.temp = 0.0f;
    out[1].name = "default";
    out[2].name = "top-k";
    out[2].sp.top_k = 5;
    out[2].sp.top_p = 1.0f;
    out[2].sp.min_p = 0.0f;
    out[3].name = "top-p";
    out[3].sp.top_k = 0;
    out[3].sp.top_p = 0.9f;
    out[3].sp.min_p = 0.0f;
    out[4].name = "penalties";
    out[4].sp.repeat_penalty = 1.3f;
    out[4].sp.presence_penalty = 0.4f;
    out[4].sp.frequency_penalty = 0.2f;
    out[4].sp.repeat_last_n = 32;
    for (int i = 0; i < ZT_N_SAMPLINGS; i++) out[i].sp.seed = seed;
}

typedef struct Collect {
    ZtDecoded *out;
    int cap;        /* tokens wanted */
    int stop_after; /* the loop's token to refuse (1-based), or 0 */
    int seen;       /* tokens the loop handed over */
} Collect;

static bool collect(void *ctx, int32_t token) {
    Collect *c = ctx;
    c->out->tokens[c->out->n_tokens++] = token;
    c->seen++;
    return c->out->n_tokens < c->cap && c->seen != c->stop_after;
}

int zt_decode(ZrBackend *be, int n_vocab, const ZtDecode *d, ZtDecoded *out, ZrError *err) {
    memset(out, 0, sizeof *out);
    ZrSampler *smp = zr_sampler_create(d->sp, n_vocab, err);
    float *logits = malloc(sizeof(float) * (size_t)n_vocab);
    out->tokens = malloc(sizeof(int32_t) * (size_t)(d->n > 0 ? d->n : 1));
    int rc;
    if (!smp) rc = (int)err->code;
    else if (!logits || !out->tokens) rc = zr_err(err, ZR_E_NOMEM, "zt_decode: out of memory");
    else rc = be->forward(be, d->prompt, d->n_prompt, 0, logits, false, err);
    if (rc) goto done;
    for (int i = 0; i < d->n_prompt; i++) zr_sampler_accept(smp, d->prompt[i]);
    ZrDecodeLoop L = {.sp = d->sp, .host = smp, .n_cand = d->n_cand, .ban = d->ban, .n_ban = d->n_ban,
                      .pos = d->n_prompt};
    out->tokens[out->n_tokens++] = zr_decode_pick_host(&L, logits, n_vocab);
    Collect c = {out, d->n, d->stop_after, 0};
    if (d->n > 1 && !d->reference) {
        L.token = out->tokens[0];
        L.max_steps = d->n - 1;
        L.on_token = collect;
        L.ctx = &c;
        rc = be->decode_run(be, &L, err);
        out->steps = L.steps;
        out->host_steps = L.host_steps;
    }
    for (bool go = d->n > 1; d->reference && go;) {
        int32_t tok = out->tokens[out->n_tokens - 1];
        if ((rc = be->forward(be, &tok, 1, d->n_prompt + out->steps, logits, false, err))) break;
        out->steps++;
        go = collect(&c, zr_decode_pick_host(&L, logits, n_vocab));
    }
    if (!rc) {
        out->state_len = zr_sampler_state_size(smp);
        if (!(out->state = malloc(out->state_len))) rc = zr_err(err, ZR_E_NOMEM, "zt_decode: out of memory");
        else zr_sampler_get_state(smp, out->state);
    }
done:
    zr_sampler_free(smp);
    free(logits);
    return rc;
}

void zt_decoded_free(ZtDecoded *o) {
    free(o->tokens);
    free(o->state);
    memset(o, 0, sizeof *o);
}

static bool take_one(void *ctx, int32_t token) {
    *(int32_t *)ctx = token;
    return false;
}

int zt_greedy_step(ZrBackend *be, int n_vocab, int32_t token, int pos, int n_cand, float *logits, int32_t *next,
                   ZrError *err) {
    ZrSamplerParams sp = zr_sampler_defaults();
    sp.temp = 0.0f;
    ZrSampler *smp = zr_sampler_create(&sp, n_vocab, err);
    if (!smp) return err->code;
    ZrDecodeLoop L = {.sp = &sp, .host = smp, .n_cand = n_cand, .token = token, .pos = pos, .max_steps = 1,
                      .on_token = take_one, .ctx = next, .logits = logits};
    int rc = be->decode_run(be, &L, err);
    zr_sampler_free(smp);
    return rc;
}

bool zt_collect_into(void *ctx, int32_t token) {
    int32_t **at = ctx;
    *(*at)++ = token;
    return true;
}
