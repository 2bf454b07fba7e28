/* The decode step's tail on the device: the greedy pick (cu/argmax.cu) or the whole sampling
 * chain (cu/sample.cu), both ending the same way, so the host never needs the logits:
 *   - one ZrPickRecord per step into slot (pos % n_slots) of a ring the host reads (device
 *     memory, or mapped pinned host memory so no copy is queued between two steps);
 *   - when a token was picked (status ZR_PICK_OK), the step's inputs advanced in place:
 *     tok_pos[0] = token, tok_pos[1] = pos + 1, so the next replay of the graph decodes it
 *     without the host writing anything (a free-running loop queues replays back to back).
 *     Any other status leaves tok_pos as it was: a replay queued after it recomputes the same
 *     step at the same position (KV writes are idempotent) and reports the same status, until
 *     the host takes over.
 *
 * The sampling chain picks exactly the token zr_sampler_sample (src/sampler.c) picks for the
 * same logits and the same state (penalty history, generator): same candidates, same order of
 * float operations, same xoshiro stream. Its state lives on the device in the byte layout of
 * zr_sampler_get_state, so the host can move it either way (set_state/get_state) and snapshot
 * it with one device-to-device copy (state, state_bytes).
 *
 * Every launch goes through the launcher, so the tail is recorded into the decode graph like any
 * other kernel; the launches are the same at every position (grids sized by n_vocab, not pos).
 *
 * Limits of the chain (cu/sample.cu, src/cuda/sample_scratch.h): it sorts at most 4096
 * candidates, taken from the first of nested sets {logit >= max - d} (d every eighth of a logit
 * down to 64, then coarse steps) that holds the CPU's result. Where top-k's set is larger (the
 * k-th logit far below the first, where the steps are coarse: a synthesized tied model's input
 * token stands hundreds above the rest) the pick narrows it by sub-levels of that step, up to
 * four rounds. A step whose set is still larger is ZR_PICK_HOST, never a different token: top-k
 * where more than 4096 ids tie around the k-th logit (a flat row), and top-p whose prefix needs
 * more than 4096 ids. With no top-k and no top-p (--top-k 0 --top-p 1) the draw needs no
 * sort: it descends the fixed sum tree over every id (cuda/sample_full.h, src/sampler.c
 * draw_all), exact at any vocabulary. Vocabularies up to 2M ids. */
#pragma once
#include <stdint.h>

#include "cuda/kreg.h"
#include "cuda/launch.h"
#include "cuda/module.h"
#include "cuda/pick_record.h"
#include "sampler.h"

/* Where the tail reads and writes. */
typedef struct ZrPickIO {
    CUdeviceptr logits;  /* f32 [n_vocab], not modified */
    int n_cand;          /* ids [0, n_cand) are candidates; [n_cand, n_vocab) are padding rows (never picked) */
    CUdeviceptr tok_pos; /* i32 token, i32 pos: the step's inputs (advanced on ZR_PICK_OK) */
    CUdeviceptr ring;    /* ZrPickRecord [n_slots] */
    int n_slots;         /* >= 1 */
} ZrPickIO;

/* The greedy tail: zr_sampler_argmax over [0, n_cand) (NaN as -inf), nonfinite_at as today.
 * scratch: ZR_PICK_BYTES (cuda/pick.h), zeroed once when allocated. */
int zr_pick_greedy_launch(ZrLauncher *l, const ZrCuKernels *k, const ZrPickIO *io, CUdeviceptr scratch,
                          ZrError *err);

/* The sampling chain's device side: parameters (baked into the launches), state and scratch. */
typedef struct ZrSampleDev {
    ZrSamplerParams p;
    int n_vocab;
    int32_t *ban;            /* host copy of ids never picked (--ignore-eos: the end-of-generation ids) */
    int n_ban;
    CUdeviceptr state;       /* zr_sampler_get_state's bytes */
    size_t state_bytes;      /* == zr_sampler_state_size for p */
    CUdeviceptr scratch;     /* the chain's working memory (candidates, partial sums, ...) */
    size_t scratch_bytes;
    uint64_t host_steps;     /* steps that ended ZR_PICK_HOST (the caller counts them here) */
} ZrSampleDev;

/* Allocates state and scratch for a vocabulary of n_vocab and uploads the state of a fresh
 * zr_sampler_create(p) (seeded generator, empty history) and the banned ids. */
int zr_sample_dev_init(ZrCuda *cuda, const ZrSamplerParams *p, int n_vocab, const int32_t *ban, int n_ban,
                       ZrSampleDev *s, ZrError *err);
void zr_sample_dev_free(ZrCuda *cuda, ZrSampleDev *s);
/* The state as zr_sampler_get_state/zr_sampler_set_state read and write it (same checks). */
int zr_sample_dev_set_state(ZrCuda *cuda, ZrSampleDev *s, const void *buf, size_t len, ZrError *err);
int zr_sample_dev_get_state(ZrCuda *cuda, const ZrSampleDev *s, void *buf, size_t len, ZrError *err);
/* The chain over io->logits: penalties over the device history, top-k, top-p, min-p,
 * temperature, draw; writes the record; on ZR_PICK_OK accepts the token into the device
 * history (as zr_sampler_accept) and advances tok_pos. Temperature 0 with penalties is the
 * argmax of the penalized logits (as the CPU). */
int zr_sample_launch(ZrLauncher *l, const ZrCuKernels *k, const ZrSampleDev *s, const ZrPickIO *io, ZrError *err);
/* Lets sample_pick_f32 use the dynamic shared memory it needs (zr_cuf_kernels_load calls it; on a
 * GPU that allows less it does nothing, and zr_sample_dev_init refuses with ZR_E_UNSUPPORTED). */
int zr_sample_kernels_smem(const ZrCuda *c, const ZrCuKernels *k, ZrError *err);
