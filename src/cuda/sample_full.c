/* The draw over the whole vocabulary, host side (src/cuda/sample_full.h): its scratch's size
 * and its one launch. */
#include "cuda/sample_full.h"

#include <math.h>

#include "cuda/sample_full_scratch.h"
#include "zr_exp.h"

bool zr_sample_full_mode(const ZrSamplerParams *p, int n_vocab) {
    return p->temp > 0.0f && !(p->top_k > 0 && p->top_k < n_vocab) && !(p->top_p < 1.0f);
}

size_t zr_sample_full_bytes(int n_vocab) {
    const size_t chunks = ((size_t)n_vocab + ZR_SUM_CHUNK - 1) / ZR_SUM_CHUNK,
                 blocks = ((size_t)n_vocab + ZR_SAMPLE_FULL_IDS - 1) / ZR_SAMPLE_FULL_IDS;
    return ZR_SAMPLE_FULL_NODES_AT + (chunks + blocks) * sizeof(double);
}

int zr_sample_full_launch(ZrLauncher *l, const ZrCuKernels *k, const ZrSampleDev *s, const ZrPickIO *io,
                          CUdeviceptr work, CUdeviceptr scratch, CUdeviceptr full, ZrError *err) {
    int n = s->n_vocab, n_slots = io->n_slots;
    const unsigned grid = (unsigned)((n + ZR_SAMPLE_FULL_IDS - 1) / ZR_SAMPLE_FULL_IDS);
    if (n < 1 || grid > ZR_SAMPLE_MAX_BLOCKS || n_slots < 1 || !zr_sample_full_mode(&s->p, n))
        return zr_err(err, ZR_E_INTERNAL,
                      "device sampling over every id: a vocabulary of %d, %d ring slots, top-k %d, top-p %g, "
                      "temperature %g",
                      n, n_slots, s->p.top_k, (double)s->p.top_p, (double)s->p.temp);
    float lmp = s->p.min_p > 0.0f ? logf(s->p.min_p) : -INFINITY, temp = s->p.temp;
    CUdeviceptr state = s->state, tok_pos = io->tok_pos, ring = io->ring;
    return ZR_LAUNCH(l, &k->sample_full, ZR_DIM1(grid), ZR_DIM1(ZR_SAMPLE_FULL_THREADS), 0, err, &work, &state,
                     &scratch, &full, &tok_pos, &ring, &n_slots, &n, &lmp, &temp);
}
