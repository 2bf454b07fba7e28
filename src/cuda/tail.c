#include "cuda/tail.h"

bool zr_cuda_tails_linked(void) {
    return zr_pick_greedy_launch && zr_sample_launch && zr_sample_dev_init && zr_sample_dev_free &&
           zr_sample_dev_set_state && zr_sample_dev_get_state;
}
