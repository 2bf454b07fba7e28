/* The weight-type table (src/zr_types.def) agrees with itself, with ggml's block sizes and with
 * what the host and the kernels derive from it: a new line that breaks a rule fails here, not on
 * a GPU. */
#include <ctype.h>
#include <stdint.h>

#include "cuda/weights.h"
#include "quant.h"
#include "zt.h"

/* The lines of the table in file order, read the way every includer reads them. */
typedef struct Row {
    uint32_t id, enum_value, block, bytes, item, main, side;
    const char *name, *kernel;
    bool compute;
} Row;

static const Row rows[] = {
#define ZR_TYPE(id, E, name, block, bytes, kernel, item, main, side) \
    {id, ZR_TYPE_##E, block, bytes, item, main, side, name, #kernel, true},
#define ZR_TYPE_SIZE(id, E, name, block, bytes) {id, ZR_TYPE_##E, block, bytes, 0, 0, 0, name, NULL, false},
#include "zr_types.def"
};
#define N_ROWS (sizeof rows / sizeof rows[0])

static const struct {
    uint32_t id, type;
    const char *name;
} ftypes[] = {
#define ZR_FTYPE(id, E, type) {id, ZR_TYPE_##type, #E},
#include "zr_types.def"
};
#define N_FTYPES (sizeof ftypes / sizeof ftypes[0])

/* ggml-common.h's static_asserts on the block structs of the computed types (QK_K = 256,
 * K_SCALE_SIZE = 12, ggml_half = 2 bytes). */
static uint32_t ggml_block_bytes(uint32_t id) {
    const uint32_t h = 2, qk = 256, ks = 12;
    switch (id) {
    case ZR_TYPE_F32: return 4;
    case ZR_TYPE_F16: case ZR_TYPE_BF16: return 2;
    case ZR_TYPE_Q4_0: return h + 32 / 2;
    case ZR_TYPE_Q4_1: return 2 * h + 32 / 2;
    case ZR_TYPE_Q5_0: return h + 4 + 32 / 2;
    case ZR_TYPE_Q5_1: return 2 * h + 4 + 32 / 2;
    case ZR_TYPE_Q8_0: return h + 32;
    case ZR_TYPE_Q2_K: return 2 * h + qk / 16 + qk / 4;
    case ZR_TYPE_Q3_K: return h + qk / 4 + qk / 8 + 12;
    case ZR_TYPE_Q4_K: return 2 * h + ks + qk / 2;
    case ZR_TYPE_Q5_K: return 2 * h + ks + qk / 2 + qk / 8;
    case ZR_TYPE_Q6_K: return h + qk / 16 + 3 * qk / 4;
    default: return 0;
    }
}

ZT_TEST(type_lines_are_in_id_order_and_ids_are_unique) {
    for (size_t i = 1; i < N_ROWS; i++) ZT_CHECKF(rows[i - 1].id < rows[i].id, "line %zu: id %u after %u", i, rows[i].id, rows[i - 1].id);
}

ZT_TEST(enum_values_are_the_ids_and_count_bounds_them) {
    for (size_t i = 0; i < N_ROWS; i++) ZT_CHECKF(rows[i].enum_value == rows[i].id, "%s", rows[i].name);
    ZT_CHECK((uint32_t)ZR_TYPE_COUNT == rows[N_ROWS - 1].id + 1);
}

ZT_TEST(type_info_is_the_table_line) {
    for (size_t i = 0; i < N_ROWS; i++) {
        const Row *r = &rows[i];
        const ZrTypeInfo *t = zr_type_info(r->id);
        ZT_CHECKF(t && !strcmp(t->name, r->name) && t->block == r->block && t->bytes == r->bytes &&
                      t->compute == r->compute && t->item == r->item && t->main == r->main && t->side == r->side,
                  "%s", r->name);
        ZT_CHECKF(r->kernel ? t->kernel && !strcmp(t->kernel, r->kernel) : !t->kernel, "%s", r->name);
    }
}

ZT_TEST(names_are_unique) {
    for (size_t i = 0; i < N_ROWS; i++)
        for (size_t j = i + 1; j < N_ROWS; j++) {
            ZT_CHECKF(strcasecmp(rows[i].name, rows[j].name) != 0, "%s", rows[i].name);
            if (rows[i].kernel && rows[j].kernel) ZT_CHECKF(strcmp(rows[i].kernel, rows[j].kernel) != 0, "%s", rows[i].kernel);
        }
}

ZT_TEST(computed_block_bytes_are_ggml_block_struct_sizes) {
    for (size_t i = 0; i < N_ROWS; i++)
        if (rows[i].compute) ZT_CHECKF(rows[i].bytes == ggml_block_bytes(rows[i].id), "%s: %u", rows[i].name, rows[i].bytes);
}

ZT_TEST(block_sizes_are_ggml_ones) {
    for (size_t i = 0; i < N_ROWS; i++)
        ZT_CHECKF(rows[i].block == 1 || rows[i].block == 32 || rows[i].block == 256, "%s: %u", rows[i].name, rows[i].block);
}

ZT_TEST(every_computed_type_has_its_kernel_suffix_the_lower_case_name) {
    for (size_t i = 0; i < N_ROWS; i++) {
        const Row *r = &rows[i];
        ZT_CHECKF(r->compute == (zr_type_kernel_suffix(r->id) != NULL), "%s", r->name);
        ZT_CHECKF(zr_cuw_supported(r->id) == r->compute, "%s", r->name);
        if (!r->kernel) continue;
        char lower[16];
        size_t n = 0;
        for (; r->name[n] && n + 1 < sizeof lower; n++) lower[n] = (char)tolower((unsigned char)r->name[n]);
        lower[n] = 0;
        ZT_CHECKF(!strcmp(r->kernel, lower), "%s: %s", r->name, r->kernel);
    }
}

ZT_TEST(matvec_items_split_blocks_into_16_byte_loads) {
    for (size_t i = 0; i < N_ROWS; i++) {
        const Row *r = &rows[i];
        if (!r->compute) {
            ZT_CHECKF(!r->item && !r->main && !r->side, "%s", r->name);
            continue;
        }
        ZT_CHECKF(r->item >= 4 && (r->item & (r->item - 1)) == 0, "%s: %u", r->name, r->item);
        if (r->block == 1) ZT_CHECKF(r->item * r->bytes == 16, "%s: %u", r->name, r->item); /* one 16-byte load */
        else ZT_CHECKF(r->block % r->item == 0, "%s: %u", r->name, r->item);                /* items never straddle blocks */
    }
}

ZT_TEST(repacked_streams_hold_the_whole_block_in_16_byte_rows) {
    for (size_t i = 0; i < N_ROWS; i++) {
        const Row *r = &rows[i];
        if (!r->compute) continue;
        /* cu/quant.cuh's zr_main_row_bytes pads only 1-element blocks: the others must be whole
         * 16-byte pieces for the host's padded rows to be the kernels' plain products */
        if (r->block == 1) ZT_CHECKF(r->main == r->bytes && r->side == 0, "%s", r->name);
        else ZT_CHECKF(r->main % 16 == 0, "%s: main %u", r->name, r->main);
        ZT_CHECKF(r->main + r->side >= r->bytes && r->side < r->bytes, "%s: %u + %u for %u", r->name, r->main, r->side, r->bytes);
        const int64_t n = 3 * r->block;
        ZT_CHECKF(zr_cuw_main_row_bytes(r->id, n) % 16 == 0, "%s", r->name);
        ZT_CHECKF(zr_cuw_side_bytes(r->id, n, 5) == (size_t)r->side * 15, "%s", r->name);
    }
}

ZT_TEST(file_types_are_unique_and_name_computed_types) {
    for (size_t i = 0; i < N_FTYPES; i++) {
        ZT_CHECKF(zr_type_info(ftypes[i].type) && zr_type_info(ftypes[i].type)->compute, "%s", ftypes[i].name);
        const char *fn = zr_file_type_name(ftypes[i].id);
        ZT_CHECKF(fn && !strcmp(fn, ftypes[i].name), "%u", ftypes[i].id);
        for (size_t j = i + 1; j < N_FTYPES; j++) ZT_CHECKF(ftypes[i].id != ftypes[j].id, "%s %s", ftypes[i].name, ftypes[j].name);
    }
    ZT_CHECK(zr_file_type_name(4) == NULL && zr_file_type_name(UINT32_MAX) == NULL);
}

ZT_TEST(every_computed_type_has_a_plain_file_type_named_after_it) {
    for (size_t i = 0; i < N_ROWS; i++) {
        const Row *r = &rows[i];
        const uint32_t ft = zr_file_type_of(r->id);
        if (!r->compute) {
            ZT_CHECKF(ft == UINT32_MAX, "%s", r->name);
            continue;
        }
        const char *fn = zr_file_type_name(ft);
        ZT_CHECKF(fn != NULL, "%s", r->name);
        if (!fn) continue;
        for (size_t k = 0; r->name[k]; k++) ZT_CHECKF(toupper((unsigned char)r->name[k]) == fn[k], "%s: %s", r->name, fn);
    }
    ZT_CHECK(zr_file_type_of(ZR_TYPE_Q4_K) == ZR_FTYPE_Q4_K_S && ZR_FTYPE_Q4_K_M == 15);
}

int main(void) { return zt_run(); }
