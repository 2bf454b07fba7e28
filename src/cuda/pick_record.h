/* The decode step tail's record (src/cuda/sample.h), in a header of plain C that the kernels
 * (cu/argmax.cu, cu/sample.cu) include too, so host and device read one layout. */
#pragma once
#include <stdint.h>

enum {
    ZR_PICK_OK = 0,        /* token picked, tok_pos advanced */
    ZR_PICK_HOST = 1,      /* the device could not finish exactly (e.g. a top-p set past its candidate
                            * buffer): the host samples this step from the logits (counted, reported) */
    ZR_PICK_NONFINITE = 2, /* a candidate logit is NaN or +-inf (nonfinite_at): the call fails */
};

/* One step's result, 64 bytes, written by the tail's last kernel. */
typedef struct ZrPickRecord {
    int32_t token;        /* the pick; -1 unless status == ZR_PICK_OK */
    int32_t status;       /* ZR_PICK_* */
    int32_t nonfinite_at; /* the first id in [0, n_cand) whose logit is NaN or +-inf, or -1 */
    int32_t pos;          /* the step's position (tok_pos[1] as the step read it): the host checks it;
                           * written last, after a system-wide fence, so a host polling a mapped ring
                           * for it reads a complete record */
    uint64_t rng[4];      /* the generator after the draw (greedy: untouched, zeros) */
    uint64_t t_begin;     /* %globaltimer when the step began (written by the step's first kernel, or 0) */
    uint64_t t_end;       /* %globaltimer when the tail finished */
} ZrPickRecord;
#ifdef __cplusplus
static_assert(sizeof(ZrPickRecord) == 64, "ZrPickRecord: 64 bytes");
#else
_Static_assert(sizeof(ZrPickRecord) == 64, "ZrPickRecord: 64 bytes");
#endif
