/* The forward pass's weights on the device: each matrix uploaded once and repacked into the
 * kernels' layout (cuda/weights.h) on the GPU, runs of matrices of one type stacked into one (one launch
 * per run), the norms and biases as F32 vectors, the rope frequencies as F64. */
#pragma once
#include "cuda/forward.h"

/* Device memory for the forward pass, remembered in f->allocs for zr_cuf_free. */
int zr_cuf_dalloc(ZrCuForward *f, CUdeviceptr *out, size_t bytes, const char *what, ZrError *err);
/* Uploads every weight of f->m (f->layers allocated here); adds the matrices' bytes to
 * f->weight_bytes. The file's bytes go up as they are through page-locked chunks gathered by
 * several host threads (cuda/stage.h) while the file is read ahead (cuda/readahead.h), and the
 * quantized layouts are repacked on the GPU; sets f->upload_s / upload_bytes / upload_h2d_gbps. */
int zr_cuf_upload(ZrCuForward *f, ZrError *err);
/* Bytes zr_cuf_upload will allocate for the model (with allocation rounding). */
size_t zr_cuf_upload_bytes(const ZrModel *m);
/* Uploads n matrices, each run of one type and row length stacked into one device matrix
 * (out[0..*n_out), run i's outputs from row off[i]); progress reported per run. */
typedef struct ZrCuUpload ZrCuUpload; /* an upload under way (upload.c) */
int zr_cuf_upload_group(ZrCuUpload *u, const ZrWeight *const *ws, int n, ZrCuWeight *out, int *n_out, int *off,
                        ZrError *err);
