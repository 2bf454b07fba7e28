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
/* Uploads n matrices, each run of one type and row length stacked into one device matrix
 * (out[0..*n_out), run i's outputs from row off[i]); progress reported per run. */
int zr_cuf_upload_group(ZrCuForward *f, const ZrWeight *const *ws, int n, ZrCuWeight *out, int *n_out, int *off,
                        ZrError *err);
