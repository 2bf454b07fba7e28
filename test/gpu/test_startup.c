/* Start-up (issue 19) on a real GPU: the first prompt pays no first-use costs (the backend warms
 * the prefill path at load: cuBLASLt's heuristic and kernels, the GEMM plans; cuda/warm.h), so a
 * first 5-token prefill on a fresh backend costs about what the second one does. This program
 * is the first cuBLASLt user of its process, so a cold-start tax the warm-up misses shows here. */
#include <stdlib.h>
#include <time.h>

#include "backend.h"
#include "gpu_env.h"
#include "model.h"
#include "zt.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

ZT_TEST(the_first_prompt_costs_what_the_second_does) {
    if (!gpu_env()) return;
    const char *path = zt_shared_model("fixtures/llama3-Q4_K_M.gguf");
    if (!path) return;
    ZrModel m;
    ZrError err = {0};
    ZT_CHECKF(!zr_model_load(&m, path, &err), "%s", err.msg);
    ZrBackendOptions o = {.n_ctx = 64, .verify_graph = 1, .quiet = true};
    const double t0 = now_ms();
    ZrBackend *be = zr_cuda_backend_create(&m, &o, &err);
    const double t_open = now_ms() - t0;
    ZT_CHECKF(be, "%s", err.msg);
    float *logits = malloc(sizeof(float) * (size_t)m.hp.n_vocab);
    ZT_CHECK(logits);
    const int32_t ids[5] = {1, 2, 3, 4, 5};
    double t[3];
    for (int i = 0; i < 3; i++) {
        be->truncate(be, 0);
        const double a = now_ms();
        ZT_CHECKF(!be->forward(be, ids, 5, 0, logits, false, &err), "%s", err.msg);
        t[i] = now_ms() - a;
    }
    const bool ok = t[0] <= 2.0 * (t[1] < t[2] ? t[1] : t[2]) + 1.0;
    printf("%s backend open %.1f ms; 5-token prefills: first %.2f ms, then %.2f, %.2f ms\n", ok ? "PASS" : "FAIL", t_open,
           t[0], t[1], t[2]);
    ZT_CHECKF(ok, "the first prefill took %.2f ms, the next ones %.2f and %.2f", t[0], t[1], t[2]);
    be->destroy(be);
    free(logits);
    zr_model_free(&m);
}

int main(void) { return gpu_main(); }
