/* ZRUN_FAULT=sticky on a real GPU: the trap kernel poisons the context for real. In its own
 * program because on some drivers (580.159.04) the error stays for the whole process. */
#define CASES_ONLY_STICKY
#include "gpu_env.h"
#include "test_launch_graph_cases.h"

static int case_open(Toy *t) {
    const ZrCuDriver *d = gpu_driver();
    if (!d) return 77;
    ZrError err = {0};
    int rc = toy_open(t, d, zr_cuda_kernels_image(), 4096, CASE_VOCAB, &err);
    if (rc) fprintf(stderr, "  toy_open: %s\n", err.msg);
    return rc;
}

int main(void) { return gpu_main(); }
