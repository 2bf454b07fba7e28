/* The forward pass's device buffers besides the weights, in ONE table: each buffer's field of
 * ZrCuForward and its bytes from the model's dimensions and n_ctx. The memory plan
 * (zr_cuf_plan) and the allocation (zr_cuf_buffers_alloc) both walk it, so what is checked
 * against free memory is what gets allocated. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "cuda/forward.h"

typedef struct ZrCuBuffer {
    const char *what; /* names it in out-of-memory errors */
    size_t field;     /* offsetof(ZrCuForward, the CUdeviceptr it goes to) */
    size_t bytes;
    bool kv;          /* part of the KV cache (the plan reports it apart) */
} ZrCuBuffer;
#define ZR_CUF_MAX_BUFFERS 32
/* cuBLASLt's workspace (ZrCuForward.lt_ws): a constant, so the plans made before the buffers exist
 * (cuda/warm.h) are for the shapes the prefill runs (a plan's shape includes it) */
#define ZR_CUF_LT_WS_BYTES ((size_t)32 << 20)

/* The table for this model and context, in allocation order; returns the number of buffers. */
int zr_cuf_buffers(const ZrModel *m, int n_ctx, bool kv16, ZrCuBuffer out[ZR_CUF_MAX_BUFFERS]);
/* Allocates every buffer of the table into f (and sets f->wbuf_elems). */
int zr_cuf_buffers_alloc(ZrCuForward *f, ZrError *err);
/* F16 values of the prefill's dequantization buffer: the largest layer matrix (stacked), at
 * least 16 Mi values; larger matrices (the output) go through it in row slices. */
size_t zr_cuf_wbuf_elems(const ZrModel *m);
