#include "logits_check.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Every logit of every token passes through here: a branch-free scan over the bits (exponent
 * all ones: NaN or inf) that vectorizes, then the index only when one is found. */
int64_t zr_logits_first_nonfinite(const float *v, int64_t n) {
    const int64_t block = 1024;
    for (int64_t b = 0; b < n; b += block) {
        const int64_t e = n - b < block ? n : b + block;
        uint32_t any = 0; /* compare-and-or: SSE2 vectorizes it (an unsigned max would not) */
        for (int64_t i = b; i < e; i++) {
            uint32_t u;
            memcpy(&u, v + i, sizeof u);
            any |= (uint32_t)((u & 0x7f800000u) == 0x7f800000u);
        }
        if (!any) continue;
        for (int64_t i = b; i < e; i++) {
            uint32_t u;
            memcpy(&u, v + i, sizeof u);
            if ((u & 0x7f800000u) == 0x7f800000u) return i;
        }
    }
    return -1;
}

int zr_logits_nonfinite_error(const char *model, int pos, int64_t id, const float *value, ZrError *err) {
    char what[32];
    if (value) snprintf(what, sizeof what, "%g", (double)*value);
    else snprintf(what, sizeof what, "NaN or inf");
    return zr_err(err, ZR_E_FORMAT,
                  "%s: the forward pass at position %d gave a non-finite logit (%s at token id %" PRId64
                  "): expected finite weights (the model holds NaN or inf values, or its activations overflow)",
                  model, pos, what, id);
}

int zr_logits_check(const char *model, const float *rows, int n_rows, int64_t n_vocab, int pos0, ZrError *err) {
    for (int r = 0; r < n_rows; r++) {
        const float *row = rows + (int64_t)r * n_vocab;
        int64_t id = zr_logits_first_nonfinite(row, n_vocab);
        if (id >= 0) return zr_logits_nonfinite_error(model, pos0 + r, id, row + id, err);
    }
    return ZR_OK;
}
