/* The working memory of the draw over the whole vocabulary (cu/sample_full.cu, src/cuda/sample_full.h),
 * in plain C that the kernel includes too. It lies in ZrSampleDev.scratch after the chain's own
 * (src/cuda/sample.c), zeroed once; the kernel leaves its counter back at zero.
 *
 * One kernel, sample_full_f32, after sample_prep_f32 (which leaves work[] and the argmax):
 * every block takes ZR_SAMPLE_FULL_IDS ids = 64 chunks of ZR_SUM_CHUNK, a subtree of zr_tree_sum's
 * tree (src/zr_exp.h zr_tree_levels): it writes its chunk sums (level 0), its subtree's root
 * (level 6, or the tree's top for a single block) and its candidates' count and first id; the
 * last block to finish adds the levels above the blocks, then descends the tree (one thread),
 * rebuilding the chosen block's levels from its chunk sums, walks the leaf chunk and writes the
 * record, the history and tok_pos as sample_pick_f32. */
#pragma once
#include <stdint.h>

#include "sample_scratch.h" /* ZR_SAMPLE_MAX_BLOCKS */

#define ZR_SAMPLE_FULL_THREADS 256
#define ZR_SAMPLE_FULL_CHUNKS 64 /* chunks per block: a power of two (a subtree), 6 levels above them */
#define ZR_SAMPLE_FULL_LEVELS 6
#define ZR_SAMPLE_FULL_IDS (ZR_SAMPLE_FULL_CHUNKS * 32)

typedef struct ZrSampleFullScratch {
    uint32_t done;                           /* blocks finished (the last one resets it) */
    int32_t block_count[ZR_SAMPLE_MAX_BLOCKS]; /* candidates of each block */
    int32_t block_first[ZR_SAMPLE_MAX_BLOCKS]; /* the lowest candidate id of each block, or INT32_MAX */
    /* then, at ZR_SAMPLE_FULL_NODES_AT: chunk sums double [ceil(n_vocab / 32)], block sums
     * double [ceil(n_vocab / ZR_SAMPLE_FULL_IDS)] */
} ZrSampleFullScratch;

#define ZR_SAMPLE_FULL_NODES_AT ((sizeof(ZrSampleFullScratch) + 255) / 256 * 256)
