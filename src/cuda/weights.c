#include "cuda/weights.h"

#include <string.h>

#include "quant.h"

bool zr_cuw_supported(uint32_t type) {
    switch (type) {
    case ZR_TYPE_F32: case ZR_TYPE_F16: case ZR_TYPE_BF16: case ZR_TYPE_Q8_0: case ZR_TYPE_Q4_0:
    case ZR_TYPE_Q4_1: case ZR_TYPE_Q5_0: case ZR_TYPE_Q5_1: case ZR_TYPE_Q2_K: case ZR_TYPE_Q3_K:
    case ZR_TYPE_Q4_K: case ZR_TYPE_Q5_K: case ZR_TYPE_Q6_K:
        return true;
    default:
        return false;
    }
}

size_t zr_cuw_main_row_bytes(uint32_t type, int64_t n_in) {
    switch (type) {
    case ZR_TYPE_F32: return ((size_t)n_in * 4 + 15) & ~(size_t)15;
    case ZR_TYPE_F16:
    case ZR_TYPE_BF16: return ((size_t)n_in * 2 + 15) & ~(size_t)15;
    case ZR_TYPE_Q8_0: return (size_t)(n_in / 32) * 32;
    case ZR_TYPE_Q4_0:
    case ZR_TYPE_Q4_1:
    case ZR_TYPE_Q5_0:
    case ZR_TYPE_Q5_1: return (size_t)(n_in / 32) * 16;
    case ZR_TYPE_Q2_K: return (size_t)(n_in / 256) * 80;
    case ZR_TYPE_Q3_K: return (size_t)(n_in / 256) * 112;
    case ZR_TYPE_Q4_K: return (size_t)(n_in / 256) * 144;
    case ZR_TYPE_Q5_K: return (size_t)(n_in / 256) * 176;
    case ZR_TYPE_Q6_K: return (size_t)(n_in / 256) * 208;
    default: return 0;
    }
}

/* bytes per block in the side stream (the q5 types have two sub-streams: 4 + 2 or 4 + 4) */
static size_t side_per_block(uint32_t type) {
    switch (type) {
    case ZR_TYPE_Q8_0: case ZR_TYPE_Q4_0: case ZR_TYPE_Q6_K: return 2;
    case ZR_TYPE_Q4_1: case ZR_TYPE_Q2_K: return 4;
    case ZR_TYPE_Q5_0: return 6;
    case ZR_TYPE_Q5_1: return 8;
    default: return 0;
    }
}

size_t zr_cuw_side_bytes(uint32_t type, int64_t n_in, int64_t n_rows) {
    const ZrTypeInfo *ti = zr_type_info(type);
    if (!ti || !side_per_block(type)) return 0;
    return side_per_block(type) * (size_t)(n_in / ti->block) * (size_t)n_rows;
}

void zr_cuw_repack_row(uint32_t type, const void *src, int64_t n_in, int64_t r, int64_t N, uint8_t *main,
                       uint8_t *side) {
    const uint8_t *s = src;
    const size_t rb = zr_cuw_main_row_bytes(type, n_in);
    uint8_t *m = main + (size_t)r * rb;
    const ZrTypeInfo *ti = zr_type_info(type);
    const int64_t nb = n_in / ti->block;
    const size_t g0 = (size_t)r * nb, Nb = (size_t)N * nb; /* first block of the row, blocks in all */
    switch (type) {
    case ZR_TYPE_F32:
    case ZR_TYPE_F16:
    case ZR_TYPE_BF16: {
        const size_t n = zr_row_bytes(type, n_in);
        memcpy(m, s, n);
        memset(m + n, 0, rb - n);
        return;
    }
    default: break;
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = s + b * ti->bytes;
        const size_t g = g0 + b;
        switch (type) {
        case ZR_TYPE_Q8_0: memcpy(side + 2 * g, blk, 2); memcpy(m + 32 * b, blk + 2, 32); break;
        case ZR_TYPE_Q4_0: memcpy(side + 2 * g, blk, 2); memcpy(m + 16 * b, blk + 2, 16); break;
        case ZR_TYPE_Q4_1: memcpy(side + 4 * g, blk, 4); memcpy(m + 16 * b, blk + 4, 16); break;
        case ZR_TYPE_Q5_0:
            memcpy(side + 4 * g, blk + 2, 4);
            memcpy(side + 4 * Nb + 2 * g, blk, 2);
            memcpy(m + 16 * b, blk + 6, 16);
            break;
        case ZR_TYPE_Q5_1:
            memcpy(side + 4 * g, blk + 4, 4);
            memcpy(side + 4 * Nb + 4 * g, blk, 4);
            memcpy(m + 16 * b, blk + 8, 16);
            break;
        case ZR_TYPE_Q2_K: memcpy(m + 80 * b, blk, 80); memcpy(side + 4 * g, blk + 80, 4); break;
        case ZR_TYPE_Q3_K: memcpy(m + 112 * b, blk, 110); memset(m + 112 * b + 110, 0, 2); break;
        case ZR_TYPE_Q4_K: memcpy(m + 144 * b, blk, 144); break;
        case ZR_TYPE_Q5_K: memcpy(m + 176 * b, blk, 176); break;
        case ZR_TYPE_Q6_K: memcpy(m + 208 * b, blk, 208); memcpy(side + 2 * g, blk + 208, 2); break;
        default: break;
        }
    }
}
