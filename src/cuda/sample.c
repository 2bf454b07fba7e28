/* The sampling chain's host side (src/cuda/sample.h): the device state and scratch, and the
 * launches of cu/sample.cu, shaped by n_vocab alone so they are the same at every position. */
#include "cuda/sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/sample_full.h"
#include "cuda/sample_scratch.h"

/* The scratch: ZrSampleScratch, then work (f32 [n_vocab]: the logits the chain samples from),
 * then the banned ids (i32 [n_ban]). */
static size_t work_offset(void) { return (sizeof(ZrSampleScratch) + 255) / 256 * 256; }
static size_t ban_offset(int n_vocab) { return work_offset() + ((size_t)n_vocab * sizeof(float) + 255) / 256 * 256; }
/* then, in the mode without top-k and top-p, the draw's scratch (cuda/sample_full.h) */
static size_t full_offset(int n_vocab, int n_ban) {
    return ban_offset(n_vocab) + ((size_t)(n_ban > 0 ? n_ban : 1) * sizeof(int32_t) + 255) / 256 * 256;
}

static int blocks(int n, int per_block) { return (n + per_block - 1) / per_block; }

/* The chain's mode for p over n_vocab ids, as src/sampler.c branches. */
static int sample_mode(const ZrSamplerParams *p, int n_vocab) {
    if (p->temp <= 0.0f) return ZR_SAMPLE_GREEDY;
    if (p->top_k > 0 && p->top_k < n_vocab) return ZR_SAMPLE_TOP_K;
    if (p->top_p < 1.0f) return ZR_SAMPLE_TOP_P;
    return ZR_SAMPLE_ALL;
}

/* A GPU that cannot give the pick its shared memory still runs everything else: the chain is
 * refused there by zr_sample_dev_init. */
static bool smem_fits(const ZrCuda *c) { return c->props.max_smem_optin >= ZR_SAMPLE_PICK_SMEM + 2048; }

int zr_sample_kernels_smem(const ZrCuda *c, const ZrCuKernels *k, ZrError *err) {
    if (!smem_fits(c)) return ZR_OK;
    return zr_cuda_kernel_set_smem(c, &k->sample_pick, ZR_SAMPLE_PICK_SMEM, err);
}

int zr_sample_dev_init(ZrCuda *cuda, const ZrSamplerParams *p, int n_vocab, const int32_t *ban, int n_ban,
                       ZrSampleDev *s, ZrError *err) {
    memset(s, 0, sizeof *s);
    if (n_vocab < 1 || n_vocab > ZR_SAMPLE_MAX_VOCAB)
        return zr_err(err, ZR_E_UNSUPPORTED, "device sampling: a vocabulary of %d: expected 1..%d", n_vocab,
                      ZR_SAMPLE_MAX_VOCAB);
    if (!smem_fits(cuda))
        return zr_err(err, ZR_E_UNSUPPORTED, "device sampling: needs %d bytes of shared memory a block; %s allows %d",
                      ZR_SAMPLE_PICK_SMEM + 2048, cuda->props.name, cuda->props.max_smem_optin);
    if (n_ban < 0 || (n_ban > 0 && !ban))
        return zr_err(err, ZR_E_INTERNAL, "device sampling: %d banned ids without a list", n_ban);
    ZrSampler *h = zr_sampler_create(p, n_vocab, err); /* the parameters' checks, and the fresh state */
    if (!h) return err->code;
    s->p = *p;
    s->n_vocab = n_vocab;
    s->n_ban = n_ban;
    s->state_bytes = zr_sampler_state_size(h);
    s->scratch_bytes = ban_offset(n_vocab) + (size_t)(n_ban > 0 ? n_ban : 1) * sizeof(int32_t);
    if (zr_sample_full_mode(p, n_vocab)) s->scratch_bytes = full_offset(n_vocab, n_ban) + zr_sample_full_bytes(n_vocab);
    void *state = malloc(s->state_bytes);
    s->ban = malloc((size_t)(n_ban > 0 ? n_ban : 1) * sizeof *s->ban);
    int rc = ZR_OK;
    if (!state || !s->ban) {
        rc = zr_err(err, ZR_E_NOMEM, "device sampling: out of memory");
        goto done;
    }
    zr_sampler_get_state(h, state);
    if (n_ban > 0) memcpy(s->ban, ban, (size_t)n_ban * sizeof *s->ban);
    if ((rc = zr_cuda_alloc(cuda, &s->state, s->state_bytes, "sampler state", err)) ||
        (rc = zr_cuda_alloc(cuda, &s->scratch, s->scratch_bytes, "sampler scratch", err)) ||
        (rc = zr_cuda_memset8(cuda, s->scratch, 0, s->scratch_bytes, err)) ||
        (rc = zr_cuda_h2d(cuda, s->state, state, s->state_bytes, err)))
        goto done;
    if (n_ban > 0 && (rc = zr_cuda_h2d(cuda, s->scratch + ban_offset(n_vocab), ban, (size_t)n_ban * sizeof *ban, err)))
        goto done;
done:
    free(state);
    zr_sampler_free(h);
    if (rc) zr_sample_dev_free(cuda, s);
    return rc;
}

void zr_sample_dev_free(ZrCuda *cuda, ZrSampleDev *s) {
    if (s->state) zr_cuda_free(cuda, s->state);
    if (s->scratch) zr_cuda_free(cuda, s->scratch);
    free(s->ban);
    memset(s, 0, sizeof *s);
}

int zr_sample_dev_set_state(ZrCuda *cuda, ZrSampleDev *s, const void *buf, size_t len, ZrError *err) {
    /* the host sampler's checks, on a sampler of the same parameters */
    ZrSampler *h = zr_sampler_create(&s->p, s->n_vocab, err);
    if (!h) return err->code;
    int rc = zr_sampler_set_state(h, buf, len, err);
    zr_sampler_free(h);
    if (rc) return rc;
    return zr_cuda_h2d(cuda, s->state, buf, len, err);
}

int zr_sample_dev_get_state(ZrCuda *cuda, const ZrSampleDev *s, void *buf, size_t len, ZrError *err) {
    if (len != s->state_bytes)
        return zr_err(err, ZR_E_INTERNAL, "device sampler state: expected %zu bytes, found %zu", s->state_bytes, len);
    return zr_cuda_d2h(cuda, buf, s->state, len, err);
}

int zr_sample_launch(ZrLauncher *l, const ZrCuKernels *k, const ZrSampleDev *s, const ZrPickIO *io, ZrError *err) {
    int n = s->n_vocab, n_cand = io->n_cand, n_slots = io->n_slots, n_ban = s->n_ban;
    if (n_cand < 1 || n_cand > n || n_slots < 1)
        return zr_err(err, ZR_E_INTERNAL, "device sampling: %d candidates of %d ids, %d ring slots", n_cand, n, n_slots);
    const ZrSamplerParams *p = &s->p;
    int mode = sample_mode(p, n), top_k = p->top_k;
    int pen = p->repeat_last_n > 0 &&
              (p->repeat_penalty != 1.0f || p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f);
    float r = p->repeat_penalty, fp = p->frequency_penalty, pp = p->presence_penalty, top_p = p->top_p, temp = p->temp;
    float lmp = p->min_p > 0.0f ? logf(p->min_p) : -INFINITY; /* src/sampler.c's floor: max + logf(min_p) */
    CUdeviceptr logits = io->logits, state = s->state, sc = s->scratch, work = s->scratch + work_offset(),
                ban = s->scratch + ban_offset(n), tok_pos = io->tok_pos, ring = io->ring;
    int rc;
    if ((rc = ZR_LAUNCH(l, &k->sample_prep, ZR_DIM1((unsigned)blocks(n, ZR_SAMPLE_PREP_IDS)),
                        ZR_DIM1(ZR_SAMPLE_PREP_THREADS), 0, err, &logits, &work, &state, &sc, &ban, &n_ban, &n,
                        &n_cand, &pen, &r, &fp, &pp)))
        return rc;
    if (mode == ZR_SAMPLE_ALL) /* every id a candidate: the tree's draw (cuda/sample_full.h) */
        return zr_sample_full_launch(l, k, s, io, work, sc, s->scratch + full_offset(n, n_ban), err);
    if (mode != ZR_SAMPLE_GREEDY) {
        if ((rc = ZR_LAUNCH(l, &k->sample_count, ZR_DIM1((unsigned)blocks(n, ZR_SAMPLE_COUNT_IDS)),
                            ZR_DIM1(ZR_SAMPLE_COUNT_THREADS), 0, err, &work, &sc, &n, &mode, &top_k, &top_p, &lmp)))
            return rc;
        if ((rc = ZR_LAUNCH(l, &k->sample_gather, ZR_DIM1((unsigned)blocks(n, ZR_SAMPLE_GATHER_IDS)),
                            ZR_DIM1(ZR_SAMPLE_COUNT_THREADS), 0, err, &work, &sc, &n, &mode, &top_k, &top_p, &lmp)))
            return rc;
    }
    return ZR_LAUNCH(l, &k->sample_pick, ZR_DIM1(1), ZR_DIM1(ZR_SAMPLE_PICK_THREADS), ZR_SAMPLE_PICK_SMEM, err, &work,
                     &state, &sc, &tok_pos, &ring, &n_slots, &n, &mode, &top_k, &top_p, &lmp, &temp);
}
