#include "cuda/pick.h"

int zr_pick_launch(ZrLauncher *l, const ZrKernel *k, CUdeviceptr logits, int n, CUdeviceptr pick, ZrError *err) {
    if (n < 1) return zr_err(err, ZR_E_INTERNAL, "greedy pick: over %d logits (at least 1 expected)", n);
    /* 16 values per thread: 128256 logits take 32 blocks, enough to read them from L2 at speed */
    const int per_block = ZR_PICK_THREADS * 16;
    int blocks = (n + per_block - 1) / per_block;
    if (blocks > ZR_PICK_MAX_BLOCKS) blocks = ZR_PICK_MAX_BLOCKS;
    return ZR_LAUNCH(l, k, ZR_DIM1((unsigned)blocks), ZR_DIM1(ZR_PICK_THREADS), 0, err, &logits, &n, &pick);
}
