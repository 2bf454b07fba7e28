#include "zt_synth.h"

#include <stdio.h>
#include <stdlib.h>

#include "zt.h"
#include "zt_proc.h"

int zt_synth(const char *file, const char *args, int threads, char *path, size_t cap) {
    const char *exe = getenv("ZRUN_SYNTH");
    if (!exe) {
        fprintf(stderr, "  ZRUN_SYNTH is not set (run through meson test)\n");
        return -1;
    }
    snprintf(path, cap, "%s/%s", zt_tmpdir(), file);
    char t[24] = "";
    if (threads > 0) snprintf(t, sizeof t, "-t %d ", threads);
    char cmd[16384];
    int n = snprintf(cmd, sizeof cmd, "'%s' -q %s-o '%s' %s", exe, t, path, args);
    if (n < 0 || (size_t)n >= sizeof cmd) {
        fprintf(stderr, "  zrun-synth's command line does not fit %zu bytes\n", sizeof cmd);
        return -1;
    }
    ZtProc p = zt_proc_sh(cmd, NULL);
    if (p.status != 0 && p.err) fputs(p.err, stderr);
    const int status = p.status;
    zt_proc_free(&p);
    return status;
}

bool zt_cpu_model_load(ZtCpuModel *l, const char *path, int n_ctx) {
    ZrError err;
    if (zr_model_load(&l->m, path, &err)) {
        fprintf(stderr, "  %s\n", err.msg);
        return false;
    }
    ZrBackendOptions o = {.n_ctx = n_ctx, .n_threads = 2};
    l->be = zr_cpu_backend_create(&l->m, &o, &err);
    if (!l->be) {
        fprintf(stderr, "  %s\n", err.msg);
        zr_model_free(&l->m);
        return false;
    }
    return true;
}

void zt_cpu_model_free(ZtCpuModel *l) {
    l->be->destroy(l->be);
    zr_model_free(&l->m);
}

float *zt_cpu_logits(const ZrModel *m, const int32_t *tokens, int n, int n_ctx) {
    ZrError err = {0};
    ZrBackendOptions o = {.n_ctx = n_ctx, .n_threads = 4};
    ZrBackend *be = zr_cpu_backend_create(m, &o, &err);
    if (!be) {
        fprintf(stderr, "  cpu backend: %s\n", err.msg);
        return NULL;
    }
    float *lg = malloc(sizeof(float) * (size_t)n * m->hp.n_vocab);
    if (!lg || be->forward(be, tokens, n, 0, lg, true, &err)) {
        fprintf(stderr, "  cpu forward: %s\n", lg ? err.msg : "out of memory");
        free(lg);
        lg = NULL;
    }
    be->destroy(be);
    return lg;
}
