/* ZRUN_FAULT=sticky on a real GPU: the trap kernel poisons the context for real. In its own
 * program because on some drivers (580.159.04) the error stays for the whole process. */
#define CASES_ONLY_STICKY
#include "test_launch_graph_cases.h"

static int case_open(Toy *t) {
    const ZrCuDriver *d = NULL;
    ZrError err = {0};
    int rc = zr_driver_open(&d, &err);
    if (rc == ZR_E_NODEV || !zr_cuda_have_kernels()) return 77;
    if (rc) {
        fprintf(stderr, "  %s\n", err.msg);
        return rc;
    }
    rc = toy_open(t, d, zr_cuda_kernels_image(), 4096, CASE_VOCAB, &err);
    if (rc) fprintf(stderr, "  toy_open: %s\n", err.msg);
    return rc;
}

int main(void) { return zt_run(); }
