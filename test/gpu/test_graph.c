/* The decode graph on a real GPU: the toy decode step of test_launch_toy.c with the kernels of
 * cu/graph_selftest.cu and cu/fault_trap.cu. Replay == eager bit for bit over 64 tokens, every
 * fault path but sticky (test_graph_sticky.c: it may poison the process), rebuild on moved buffers.
 * Exits 77 without a GPU or without kernels built in. */
#define CASES_NO_STICKY
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

ZT_TEST(device_line) {
    Toy t;
    CASE_OPEN(&t);
    char line[512];
    zr_cuda_describe(&t.cuda, line, sizeof line);
    fprintf(stderr, "  device: %s\n", line);
    ZT_CHECK(t.cuda.props.sm_count > 0 && t.cuda.props.total_mem > 0);
    toy_close(&t);
}

int main(void) { return gpu_main(); }
