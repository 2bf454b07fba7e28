/* Weights on the GPU: the device layout of every weight type (the host half of cu/quant.cuh,
 * which documents it) and the repacking from ggml's block layout into it. The upload repacks on
 * the GPU (cu/repack.cu, cuda/stage.h); zr_cuw_repack_row is the reference it matches byte for
 * byte (test/gpu/test_repack.c) and what the kernel tests upload with.
 *
 * A matrix [n_in, n_out] (n_in = row length) becomes a "main" stream, rows of 16-byte multiples
 * so every lane loads 128 bits, and for some types a "side" stream of per-block scales. Several
 * matrices of one type and row length may be stacked into one (fused Q/K/V, gate/up): rows of
 * the first, then the second, ... and one matrix-vector launch computes them all. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda/cuda_abi.h"

/* True for the types the GPU path computes: those with kernels in the type table
 * (src/zr_types.def). */
bool zr_cuw_supported(uint32_t type);
/* Bytes of one row in the main stream (a multiple of 16). */
size_t zr_cuw_main_row_bytes(uint32_t type, int64_t n_in);
/* Bytes of the side stream for n_rows rows (0 for types without one). */
size_t zr_cuw_side_bytes(uint32_t type, int64_t n_in, int64_t n_rows);
/* Repacks one ggml row (src, zr_row_bytes(type, n_in) bytes) as row r of a matrix of N rows
 * whose main stream starts at main and side stream at side (host buffers of the sizes above).
 * The padding of a row is zeroed. */
void zr_cuw_repack_row(uint32_t type, const void *src, int64_t n_in, int64_t r, int64_t N, uint8_t *main,
                       uint8_t *side);

/* One matrix on the device. */
typedef struct ZrCuWeight {
    uint32_t type;
    int n_in, n_out;     /* [n_in, n_out]; n_out counts every stacked matrix */
    CUdeviceptr main;    /* n_out * zr_cuw_main_row_bytes */
    CUdeviceptr side;    /* zr_cuw_side_bytes, 0 when none */
} ZrCuWeight;
