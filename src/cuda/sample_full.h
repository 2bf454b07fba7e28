/* The sampling chain's draw over the whole vocabulary (cu/sample_full.cu): with neither top-k
 * (0, or >= n_vocab) nor top-p (1), every id above the min-p floor is a candidate, too many for
 * the pick's sort (src/cuda/sample_scratch.h ZR_SAMPLE_CAP); src/sampler.c draw_all defines
 * that draw as a descent of zr_tree_sum's tree, which this kernel does with the same
 * operations, so it picks the CPU's token at any vocabulary (no ZR_PICK_HOST). */
#pragma once
#include <stddef.h>

#include "cuda/sample.h"

/* Whether p over n_vocab ids takes this draw (src/sampler.c's last branch: temperature > 0,
 * no top-k, no top-p). */
bool zr_sample_full_mode(const ZrSamplerParams *p, int n_vocab);
/* Bytes of its scratch (src/cuda/sample_full_scratch.h) for a vocabulary of n_vocab. */
size_t zr_sample_full_bytes(int n_vocab);
/* After sample_prep_f32 (work: its logits, f32 [n_vocab]; scratch: the chain's ZrSampleScratch),
 * one launch: the draw, the record, the history and tok_pos, as sample_pick_f32 ends.
 * full: zr_sample_full_bytes(s->n_vocab) of device memory zeroed once. */
int zr_sample_full_launch(ZrLauncher *l, const ZrCuKernels *k, const ZrSampleDev *s, const ZrPickIO *io,
                          CUdeviceptr work, CUdeviceptr scratch, CUdeviceptr full, ZrError *err);
