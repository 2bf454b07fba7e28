#include "gpu_weights.h"

#include <stdlib.h>

#include "quant.h"

uint8_t *gpu_random_matrix(uint32_t type, int n_in, int n_out, uint64_t *s) {
    const size_t rb = zr_row_bytes(type, n_in);
    uint8_t *w = malloc(rb * n_out);
    float *row = malloc(sizeof(float) * n_in);
    for (int r = 0; r < n_out; r++) {
        const float scale = 0.02f + 0.2f * (gpu_rand(s) + 1.0f), off = 0.3f * scale * gpu_rand(s);
        for (int i = 0; i < n_in; i++) row[i] = off + scale * gpu_rand(s);
        if (!zr_quantize_row(type, row, w + rb * r, n_in)) {
            free(row);
            free(w);
            return NULL;
        }
    }
    free(row);
    return w;
}

ZrCuWeight gpu_upload_weight(GpuEnv *g, uint32_t type, const uint8_t *w, int n_in, int n_out) {
    const size_t rb = zr_row_bytes(type, n_in), mb = zr_cuw_main_row_bytes(type, n_in) * n_out,
                 sb = zr_cuw_side_bytes(type, n_in, n_out);
    uint8_t *hm = calloc(1, mb), *hs = calloc(1, sb ? sb : 1);
    for (int r = 0; r < n_out; r++) zr_cuw_repack_row(type, w + rb * r, n_in, r, n_out, hm, hs);
    ZrCuWeight dw = {.type = type, .n_in = n_in, .n_out = n_out, .main = gpu_upload(g, hm, mb),
                     .side = sb ? gpu_upload(g, hs, sb) : 0};
    free(hm);
    free(hs);
    return dw;
}
