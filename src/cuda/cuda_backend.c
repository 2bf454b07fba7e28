/* Interim (added by the cpu engineer so that `zrun eval --device` links): reports that no GPU
 * path is usable until the kernels engineer's backend replaces this file. */
#include "backend.h"

ZrBackend *zr_cuda_backend_create(const ZrModel *m, const ZrBackendOptions *o, ZrError *err) {
    (void)m;
    (void)o;
    zr_err(err, ZR_E_NODEV, "no usable GPU: this build has no CUDA backend");
    return NULL;
}
