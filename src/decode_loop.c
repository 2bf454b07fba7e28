/* The reference decode loop (backend.h zr_decode_run_host): forward one token, mask the padding
 * and banned ids, zr_sampler_sample, accept, hand over. Every backend's decode_run must hand over
 * exactly the tokens this loop does. */
#include <math.h>
#include <stdlib.h>

#include "backend.h"

/* The caller's rules on a loop, checked once (the same for every backend). */
static int check_loop(const ZrBackend *be, int n_vocab, const ZrDecodeLoop *L, ZrError *err) {
    if (!L->sp || !L->host || !L->on_token)
        return zr_err(err, ZR_E_INTERNAL, "%s decode run: sampling, sampler and on_token are required", be->name);
    if (L->n_cand < 1 || L->n_cand > n_vocab)
        return zr_err(err, ZR_E_INTERNAL, "%s decode run: a pick among %d ids (1..%d expected)", be->name, L->n_cand,
                      n_vocab);
    if (L->max_steps < 1)
        return zr_err(err, ZR_E_INTERNAL, "%s decode run: %d steps asked for (at least 1 expected)", be->name,
                      L->max_steps);
    for (int i = 0; i < L->n_ban; i++)
        if (L->ban[i] < 0 || L->ban[i] >= n_vocab)
            return zr_err(err, ZR_E_INTERNAL, "%s decode run: banned id %d outside the vocabulary 0..%d", be->name,
                          L->ban[i], n_vocab - 1);
    return ZR_OK;
}

/* The host's pick from a step's logits[n_vocab] (modified: masked, then the sampler's work). */
int32_t zr_decode_pick_host(const ZrDecodeLoop *L, float *logits, int n_vocab) {
    for (int i = L->n_cand; i < n_vocab; i++) logits[i] = -INFINITY;
    /* --ignore-eos: as llama.cpp, a logit bias of -inf on every end-of-generation token */
    for (int i = 0; i < L->n_ban; i++) logits[L->ban[i]] = -INFINITY;
    int32_t id = zr_sampler_sample(L->host, logits);
    zr_sampler_accept(L->host, id);
    return id;
}

int zr_decode_run_check(const ZrBackend *be, int n_vocab, const ZrDecodeLoop *L, ZrError *err) {
    return check_loop(be, n_vocab, L, err);
}

int zr_decode_run_host(ZrBackend *be, int n_vocab, ZrDecodeLoop *L, ZrError *err) {
    L->steps = 0;
    int rc = check_loop(be, n_vocab, L, err);
    if (rc) return rc;
    float *scratch = malloc((size_t)n_vocab * sizeof *scratch); /* [n_vocab] what the sampler works on */
    float *out = L->logits ? L->logits : malloc((size_t)n_vocab * sizeof *out);
    if (!scratch || !out) {
        free(scratch);
        if (out != L->logits) free(out);
        return zr_err(err, ZR_E_NOMEM, "%s decode run: out of memory for %d logits", be->name, n_vocab);
    }
    int32_t tok = L->token;
    for (;;) {
        if ((rc = be->forward(be, &tok, 1, L->pos + L->steps, out, false, err))) break;
        for (int i = 0; i < n_vocab; i++) scratch[i] = out[i];
        tok = zr_decode_pick_host(L, scratch, n_vocab);
        L->steps++;
        L->host_steps++;
        if (!L->on_token(L->ctx, tok) || L->steps >= L->max_steps) break;
    }
    free(scratch);
    if (out != L->logits) free(out);
    return rc;
}
