#include "cuda/pick.h"

#include "cuda/sample.h"

/* 8 values per thread (two 16-byte loads): 128256 logits take 63 blocks, 262144 take 128, one
 * wave either way, each multiprocessor reading 8 KiB (16 a thread took 32 blocks, so 32
 * multiprocessors each read 16 KiB while 100 idled) */
static unsigned pick_blocks(int n) {
    const int per_block = ZR_PICK_THREADS * 8;
    int blocks = (n + per_block - 1) / per_block;
    return (unsigned)(blocks > ZR_PICK_MAX_BLOCKS ? ZR_PICK_MAX_BLOCKS : blocks);
}

int zr_pick_launch(ZrLauncher *l, const ZrKernel *k, CUdeviceptr logits, int n, CUdeviceptr pick, ZrError *err) {
    if (n < 1) return zr_err(err, ZR_E_INTERNAL, "greedy pick: over %d logits (at least 1 expected)", n);
    return ZR_LAUNCH(l, k, ZR_DIM1(pick_blocks(n)), ZR_DIM1(ZR_PICK_THREADS), 0, err, &logits, &n, &pick);
}

int zr_pick_greedy_launch(ZrLauncher *l, const ZrCuKernels *k, const ZrPickIO *io, CUdeviceptr scratch, ZrError *err) {
    int n = io->n_cand, n_slots = io->n_slots;
    if (n < 1 || n_slots < 1)
        return zr_err(err, ZR_E_INTERNAL, "greedy tail: over %d logits into %d ring slots (at least 1 each expected)", n,
                      n_slots);
    CUdeviceptr logits = io->logits, tok_pos = io->tok_pos, ring = io->ring;
    return ZR_LAUNCH(l, &k->argmax_pick, ZR_DIM1(pick_blocks(n)), ZR_DIM1(ZR_PICK_THREADS), 0, err, &logits, &n, &scratch,
                     &tok_pos, &ring, &n_slots);
}
