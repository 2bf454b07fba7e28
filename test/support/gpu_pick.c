#include "gpu_pick.h"

ZtPick zt_pick_open(GpuEnv *g, int n_vocab, int n_cand, int n_slots) {
    ZtPick p = {.logits = gpu_alloc(g, sizeof(float) * (size_t)n_vocab),
                .tok_pos = gpu_alloc(g, 2 * sizeof(int32_t)),
                .ring = gpu_alloc(g, sizeof(ZrPickRecord) * (size_t)n_slots)};
    p.io = (ZrPickIO){.logits = p.logits, .n_cand = n_cand, .tok_pos = p.tok_pos, .ring = p.ring, .n_slots = n_slots};
    return p;
}

void zt_pick_close(GpuEnv *g, ZtPick *p) {
    gpu_free(g, p->logits);
    gpu_free(g, p->tok_pos);
    gpu_free(g, p->ring);
    *p = (ZtPick){0};
}

void zt_pick_read(GpuEnv *g, const ZtPick *p, int32_t pos, ZrPickRecord *rec, int32_t tok_pos[2]) {
    gpu_download(g, rec, p->ring + sizeof *rec * (size_t)(pos % p->io.n_slots), sizeof *rec);
    gpu_download(g, tok_pos, p->tok_pos, 2 * sizeof(int32_t));
}
