/* A block's stamps in the timeline build (meson -Dtimeline=true; cu/timeline.cuh writes them,
 * src/cuda/timeline.c reads them): plain C shared by the kernels and the host. */
#pragma once
#include <stdint.h>

/* The stamps live in a ring per multiprocessor: a block writes into its multiprocessor's ring,
 * so the atomic that finds its slot is shared only by the blocks of one multiprocessor. A ring
 * keeps its newest ZR_TL_PER_SM stamps (about a dozen decode steps of a 3B-class model). */
#define ZR_TL_SMS 256
#define ZR_TL_PER_SM 4096

typedef struct ZrTlRec {
    uint64_t grid;    /* %gridid: one launch (graph node replay) */
    uint64_t t_enter; /* %globaltimer (ns) when the block reached the grid wait */
    uint64_t t_wait;  /* ... and when the wait returned (the kernel before it complete) */
    uint64_t t_exit;  /* when its last warp left (the kernels with ZR_TL_EXIT: the products and the
                       * decode attention); 0 where not stamped */
    uint64_t t_mark[2]; /* the products' phases, by their first thread (ZR_TL_MARK): x staged, the
                         * first tile's items summed; 0 where not stamped */
    uint32_t block;   /* the block's linear index in its grid */
    uint32_t sm;      /* %smid */
} ZrTlRec;
