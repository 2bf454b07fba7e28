#include "gpu_steps.h"

#include <stdio.h>
#include <stdlib.h>

static int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

float zt_gpu_step_us(GpuEnv *g, ZtStepFn fn, void *ctx, CUdeviceptr busy, size_t busy_bytes, CUdeviceptr sink) {
    enum { N = 200 };
    const ZrCuDriver *d = g->drv;
    ZrError e = {0};
    CUevent ev[N + 1];
    for (int i = 0; i <= N; i++) d->cuEventCreate(&ev[i], CU_EVENT_DEFAULT);
    ZrKernel probe;
    const size_t sizes[3] = {8, 8, 8};
    if (zr_cuda_kernel(&g->cuda, "read_bw_probe", sizes, 3, &probe, &e)) {
        fprintf(stderr, "  %s\n", e.msg);
        for (int i = 0; i <= N; i++) d->cuEventDestroy(ev[i]);
        return -1.0f;
    }
    const bool sync_each = g->l.sync_each;
    g->l.sync_each = false;
    uint64_t n_vec = busy_bytes / 16;
    for (int i = 0; i < 3; i++) fn(g, ctx, &e); /* warm */
    for (int r = 0; r < 40; r++) /* ~15 ms of reads: the host queues every step meanwhile */
        ZR_LAUNCH(&g->l, &probe, ZR_DIM1((unsigned)(g->cuda.props.sm_count * 4)), ZR_DIM1(512), 0, &e, &busy, &n_vec, &sink);
    int rc = 0;
    for (int i = 0; i < N && !rc; i++) {
        d->cuEventRecord(ev[i], g->cuda.stream);
        rc = fn(g, ctx, &e);
    }
    d->cuEventRecord(ev[N], g->cuda.stream);
    d->cuEventSynchronize(ev[N]);
    g->l.sync_each = sync_each;
    float us[N];
    for (int i = 0; i < N && !rc; i++) {
        float ms = 0;
        d->cuEventElapsedTime(&ms, ev[i], ev[i + 1]);
        us[i] = 1000.0f * ms;
    }
    for (int i = 0; i <= N; i++) d->cuEventDestroy(ev[i]);
    if (rc) {
        fprintf(stderr, "  %s\n", e.msg);
        return -1.0f;
    }
    qsort(us, N, sizeof us[0], cmp_float);
    return us[N / 2];
}
