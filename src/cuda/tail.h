/* The decode step's tail (cuda/sample.h) as the backend wires it: which tail ends the step, and
 * whether this build has the tails at all.
 *
 * The tails (zr_pick_greedy_launch, the sampling chain) are the other half of issue 12 (branch
 * samp). Until that half is merged, this file refers to them weakly, so a build without them
 * links and its backend runs the decode loop one step at a time (greedy picks through the old
 * argmax pick, any other sampling on the host); zr_cuda_tails_linked says which. Once merged,
 * the weak declarations go (a weak reference does not pull the object out of the static
 * library, so they must not outlive the merge: test/gpu/test_decode_run.c fails while they do). */
#pragma once
#include <stdbool.h>

#include "cuda/sample.h"

typedef enum ZrTail {
    ZR_TAIL_NONE = 0, /* logits only (forward), or the old argmax pick (ZrCuForward.pick_n) */
    ZR_TAIL_GREEDY,   /* zr_pick_greedy_launch */
    ZR_TAIL_SAMPLE,   /* zr_sample_launch */
} ZrTail;

/* in every file that calls them (see above) */
#pragma weak zr_pick_greedy_launch
#pragma weak zr_sample_launch
#pragma weak zr_sample_dev_init
#pragma weak zr_sample_dev_free
#pragma weak zr_sample_dev_set_state
#pragma weak zr_sample_dev_get_state

/* Both tails and the device sampler's functions are in this build. */
bool zr_cuda_tails_linked(void);
