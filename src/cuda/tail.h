/* Which tail ends the CUDA backend's decode step (cuda/sample.h: the greedy pick or the sampling
 * chain, both writing a record and advancing tok/pos on the device), as forward.c launches it
 * and cuda_backend.c chooses it. */
#pragma once

#include "cuda/sample.h"

typedef enum ZrTail {
    ZR_TAIL_NONE = 0, /* logits only (forward), or the old argmax pick (ZrCuForward.pick_n) */
    ZR_TAIL_GREEDY,   /* zr_pick_greedy_launch */
    ZR_TAIL_SAMPLE,   /* zr_sample_launch */
} ZrTail;
