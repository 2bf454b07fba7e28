#include "gpu_env.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zt.h"

static const ZrCuDriver *drv;
static bool probed;
static char why[1100]; /* empty: a GPU is usable */
static GpuEnv env;
static bool env_open;

const char *gpu_absent(void) {
    if (!probed) {
        probed = true;
        ZrError err = {0};
        int rc = zr_driver_open(&drv, &err);
        if (rc == ZR_E_NODEV) {
            snprintf(why, sizeof why, "no GPU: %s", err.msg);
        } else if (!zr_cuda_have_kernels()) {
            snprintf(why, sizeof why, "no CUDA kernels built in (a -Dcuda=disabled build)");
        } else if (rc) {
            fprintf(stderr, "GPU driver failed: %s\n", err.msg);
            exit(1);
        }
    }
    return why[0] ? why : NULL;
}

const ZrCuDriver *gpu_driver(void) { return gpu_absent() ? NULL : drv; }

int gpu_main(void) {
    const char *w = gpu_absent();
    return w ? zt_skip_all(w) : zt_run();
}

GpuEnv *gpu_env(void) {
    if (gpu_absent()) {
        zt_skip(gpu_absent());
        return NULL;
    }
    if (!env_open) {
        ZrError err = {0};
        env.drv = drv;
        if (zr_cuda_open(env.drv, 0, &env.cuda, &err) || zr_cuda_load_kernels(&env.cuda, &err) ||
            zr_cuf_kernels_load(&env.cuda, &env.k, 16384, &err)) {
            fprintf(stderr, "GPU setup failed: %s\n", err.msg);
            exit(1); /* a GPU that is present but unusable is a failure, not a skip */
        }
        zr_launcher_init(&env.l, env.drv, env.cuda.stream);
        env.l.sync_each = true; /* a failing kernel names itself */
        env_open = true;
    }
    return &env;
}

static void die(const ZrError *e) {
    fprintf(stderr, "GPU call failed: %s\n", e->msg);
    exit(1);
}

CUdeviceptr gpu_alloc(GpuEnv *g, size_t bytes) {
    ZrError e = {0};
    CUdeviceptr p = 0;
    if (zr_cuda_alloc(&g->cuda, &p, bytes ? bytes : 16, "test buffer", &e)) die(&e);
    /* poison: a kernel that leaves an output unwritten shows NaN */
    if (zr_cuda_memset8(&g->cuda, p, 0xff, bytes ? bytes : 16, &e)) die(&e);
    return p;
}

CUdeviceptr gpu_upload(GpuEnv *g, const void *src, size_t bytes) {
    ZrError e = {0};
    CUdeviceptr p = gpu_alloc(g, bytes);
    if (bytes && zr_cuda_h2d(&g->cuda, p, src, bytes, &e)) die(&e);
    if (zr_cuda_sync(&g->cuda, &e)) die(&e);
    return p;
}

CUdeviceptr gpu_upload_post_r(GpuEnv *g, const float *r, int n, int *n_ss) {
    const int pieces = (n + 63) / 64;
    float *v = malloc(sizeof(float) * ((size_t)n + pieces));
    if (!v) {
        fprintf(stderr, "gpu_upload_post_r: out of memory\n");
        exit(1);
    }
    memcpy(v, r, sizeof(float) * n);
    for (int k = 0; k < pieces; k++) {
        double s = 0;
        for (int i = 64 * k; i < n && i < 64 * (k + 1); i++) s += (double)r[i] * r[i];
        v[n + k] = (float)s;
    }
    const CUdeviceptr d = gpu_upload(g, v, sizeof(float) * ((size_t)n + pieces));
    free(v);
    *n_ss = pieces;
    return d;
}

void gpu_download(GpuEnv *g, void *dst, CUdeviceptr src, size_t bytes) {
    ZrError e = {0};
    if (zr_cuda_d2h(&g->cuda, dst, src, bytes, &e) || zr_cuda_sync(&g->cuda, &e)) die(&e);
}

void gpu_free(GpuEnv *g, CUdeviceptr p) { zr_cuda_free(&g->cuda, p); }

float gpu_rand(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}
