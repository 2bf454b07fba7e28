/* The forward pass's weights on the device: each matrix repacked into the kernels' layout
 * (cuda/weights.h) and uploaded once, runs of matrices of one type stacked into one (one launch
 * per run), the norms and biases as F32 vectors, the rope frequencies as F64. */
#pragma once
#include "cuda/forward.h"

/* Device memory for the forward pass, remembered in f->allocs for zr_cuf_free. */
int zr_cuf_dalloc(ZrCuForward *f, CUdeviceptr *out, size_t bytes, const char *what, ZrError *err);
/* Uploads every weight of f->m (f->layers allocated here); adds the matrices' bytes to
 * f->weight_bytes. */
int zr_cuf_upload(ZrCuForward *f, ZrError *err);
/* Bytes zr_cuf_upload will allocate for the model (with allocation rounding). */
size_t zr_cuf_upload_bytes(const ZrModel *m);
