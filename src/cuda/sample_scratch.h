/* The sampling chain's working memory on the device (ZrSampleDev.scratch), in plain C that
 * cu/sample.cu includes too: the host sizes and zeroes it (src/cuda/sample.c), the kernels
 * use it, and the pick leaves the counters back at zero (the count's bins, the gathered set's
 * size), so nothing is reset between two steps by the host.
 *
 * The chain, four kernels (two at temperature 0):
 *   sample_prep_f32    every id: the penalized, banned, NaN-as--inf logit into work[n_vocab]
 *                      (the logits themselves are never written: the host may need them), and
 *                      per block the largest of them (argmax key) and the first non-finite raw
 *                      logit (count, gather and pick reduce the blocks' partials themselves);
 *   sample_count_f32   every id: the sizes of nested candidate sets {l >= max - off(j)} and of
 *                      the min-p set {l >= floor}, and for top-p without top-k (the only mode
 *                      that reads a total over the vocabulary) zr_tree_sum of zr_exp(l - max)
 *                      and the sets' masses (integers: exact in any order), per block into
 *                      global bins and block sums;
 *   sample_gather_f32  every block picks from the bins the smallest set that holds the result
 *                      exactly (or ZR_PICK_HOST), the same in each, then gathers its ids of that
 *                      set into cand[], their logits into cand_l[]; of a top-k set too large to
 *                      sort (set_refine) it counts the ids by sub-level instead (sub_count)
 *                      and offers its own k best (union_id);
 *   sample_pick_f32    one block: narrows a crowded top-k set first (sample_refine: the
 *                      sub-level where the k-th lies from sub_count, the set from the blocks'
 *                      offers; where that is not enough, more rounds of sub-levels and a
 *                      gather over the vocabulary by this block),
 *                      sorts the set by the total order (a rank sort up to
 *                      ZR_SAMPLE_RANK_MAX candidates, else bitonic), top-k, top-p, min-p,
 *                      temperature, the draw, as src/sampler.c, then the record, the history and
 *                      tok_pos.
 * Each step leaves %globaltimer stamps of its stages in t_stage[ZR_SAMPLE_T_*] (the chain's
 * timing table in test/gpu/test_sample.c reads them). */
#pragma once
#include <stdint.h>

#define ZR_SAMPLE_CAP 4096          /* candidates the pick sorts: a set larger than this is ZR_PICK_HOST */
#define ZR_SAMPLE_MAX_BLOCKS 1024   /* grid of the prep and count kernels at most */
#define ZR_SAMPLE_PREP_THREADS 256
#define ZR_SAMPLE_PREP_IDS 2048     /* ids per prep block (8 per thread): 128256 ids fill 63 multiprocessors */
#define ZR_SAMPLE_COUNT_THREADS 256 /* 8 ids per thread, then one thread per chunk sums it */
#define ZR_SAMPLE_COUNT_CHUNKS 64   /* chunks of ZR_SUM_CHUNK ids per count block: a power of two (a subtree) */
#define ZR_SAMPLE_COUNT_IDS (ZR_SAMPLE_COUNT_CHUNKS * 32)
#define ZR_SAMPLE_GATHER_IDS 2048   /* ids per gather block */
#define ZR_SAMPLE_PICK_THREADS 1024
#define ZR_SAMPLE_RANK_MAX 256      /* sets up to this size are rank-sorted (4+ threads a candidate) */
/* the largest vocabulary the chain takes: every kernel covers it in one grid */
#define ZR_SAMPLE_MAX_VOCAB (ZR_SAMPLE_MAX_BLOCKS * ZR_SAMPLE_COUNT_IDS)
/* A crowded top-k set (the first level holding k ids holds more than ZR_SAMPLE_CAP: e.g. one
 * logit hundreds above the rest, the level steps there being coarse) is narrowed by the pick:
 * each round splits the range where the k-th id lies into ZR_SAMPLE_SUB sub-levels, at most
 * ZR_SAMPLE_ROUNDS rounds, then ZR_PICK_HOST (only ties wider than the buffer stay crowded). */
#define ZR_SAMPLE_SUB (2 * ZR_SAMPLE_PICK_THREADS)
#define ZR_SAMPLE_ROUNDS 4
/* the ids each gather block offers for a crowded set (its own k best by sub-level, a superset of
 * its share of the k best overall), all blocks together */
#define ZR_SAMPLE_UNION 16384
/* shared memory of sample_pick_f32: keys (u64), weights (f64) and logits (f32) of ZR_SAMPLE_CAP */
#define ZR_SAMPLE_PICK_SMEM (ZR_SAMPLE_CAP * (8 + 8 + 4))

/* The nested candidate sets {l >= max - off(j)}: off(j) = j / ZR_SAMPLE_FINE_PER for j below
 * ZR_SAMPLE_FINE (every eighth of a logit down to 64 below the maximum: any top-k or top-p cut of
 * a real row of logits falls in a set no wider than an eighth), then the coarse offsets of
 * ZR_SAMPLE_TAIL_OFFSETS, the last of them +inf (every finite logit). */
#define ZR_SAMPLE_FINE 512
#define ZR_SAMPLE_FINE_PER 8.0f
#define ZR_SAMPLE_TAIL_OFFSETS {96.0f, 128.0f, 256.0f, 1024.0f, 1e4f, 1e5f, 1e6f, 1e8f, 1e12f, 1e20f, 1e30f, 1.0f / 0.0f}
#define ZR_SAMPLE_TAIL 12
#define ZR_SAMPLE_LEVELS (ZR_SAMPLE_FINE + ZR_SAMPLE_TAIL)
#define ZR_SAMPLE_BINS (ZR_SAMPLE_LEVELS + 1) /* the levels, then the min-p set */

/* The chain's mode, from the parameters (src/cuda/sample.c). */
enum {
    ZR_SAMPLE_GREEDY = 0, /* temperature 0: the penalized argmax */
    ZR_SAMPLE_TOP_K = 1,  /* 0 < top_k < n_vocab (then top-p over the k, min-p) */
    ZR_SAMPLE_TOP_P = 2,  /* no top-k, top_p < 1 */
    ZR_SAMPLE_ALL = 3,    /* no top-k, no top-p: every logit >= the min-p floor, in id order */
};

/* The stages' stamps (%globaltimer ns): a kernel's begin is stamped by its block 0 after the
 * wait for the kernel before it, an end by the block that finishes the kernel's work. */
enum {
    ZR_SAMPLE_T_PREP,        /* sample_prep_f32 begins */
    ZR_SAMPLE_T_PREP_END,    /* its last block has the maximum */
    ZR_SAMPLE_T_COUNT,       /* sample_count_f32 begins */
    ZR_SAMPLE_T_COUNT_END,   /* its last block has chosen the set */
    ZR_SAMPLE_T_GATHER,      /* sample_gather_f32 begins */
    ZR_SAMPLE_T_PICK,        /* sample_pick_f32 begins */
    ZR_SAMPLE_T_PICK_SORTED, /* the set is sorted */
    ZR_SAMPLE_T_PICK_CUT,    /* top-p and min-p have cut it */
    ZR_SAMPLE_T_PICK_END,    /* the draw, the record, the history and tok_pos are written */
    ZR_SAMPLE_T_COUNT_ALL
};

typedef struct ZrSampleScratch {
    uint64_t t_stage[ZR_SAMPLE_T_COUNT_ALL]; /* the last step's stamps (stages a step skips keep older ones) */
    /* sample_prep_f32 */
    /* per block (the later kernels reduce them): the argmax of its ids of work[] as an order key
     * (cu/pick.cuh), and its first id < n_cand whose logit is NaN or +-inf (INT32_MAX: none) */
    uint64_t prep_key[ZR_SAMPLE_MAX_BLOCKS];
    int32_t prep_bad[ZR_SAMPLE_MAX_BLOCKS];
    /* sample_count_f32 */
    double block_sum[ZR_SAMPLE_MAX_BLOCKS];
    uint64_t bin_mass[ZR_SAMPLE_BINS];    /* zr_exp(l - max) in units of 2^-32, truncated: a lower bound (top-p only) */
    uint32_t bin_count[ZR_SAMPLE_BINS];   /* a level's bin holds the ids of that level not in the one before */
    /* sample_gather_f32 (its block 0; n_set and cand by every block; n_set reset by sample_pick_f32) */
    double total;                         /* zr_tree_sum of zr_exp(work[i] - max) over every id (top-p only) */
    int32_t set_host;                     /* 1: no set fits, the step is ZR_PICK_HOST */
    int32_t set_cut;                      /* 1: the set is the whole min-p set (top-p needs no wider one) */
    int32_t set_refine;                   /* 1: top-k's set is too large: the pick narrows it (n_set unused) */
    float set_thr;                        /* the set: work[i] >= set_thr and > -inf */
    float set_hi;                         /* set_refine: fewer than k ids are >= set_hi (the level before) */
    uint32_t n_set;
    uint32_t sub_count[ZR_SAMPLE_SUB];    /* set_refine: the ids >= set_thr by sub-level (the pick zeroes it) */
    uint32_t n_union;                     /* set_refine: ids offered (past ZR_SAMPLE_UNION: some were not kept) */
    int32_t union_id[ZR_SAMPLE_UNION];
    float union_l[ZR_SAMPLE_UNION];       /* work[union_id[i]] */
    int32_t cand[ZR_SAMPLE_CAP];
    float cand_l[ZR_SAMPLE_CAP];          /* work[cand[i]] */
} ZrSampleScratch;
