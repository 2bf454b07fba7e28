#include "zt_synth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

const int32_t zt_oracle_tokens[ZT_ORACLE_N_TOK] = {2,   71,  294, 436, 413, 394, 35,  133, 63,  256,
                                                   392, 233, 244, 336, 197, 406, 110, 51,  252, 17,
                                                   460, 430, 202, 224, 314, 393, 395, 45,  88,  301,
                                                   19,  477, 150, 222, 9,   380, 265, 128, 499, 64};
const int zt_oracle_rows[ZT_ORACLE_N_ROWS] = {0, 5, 15, 16, 17, 24, 31, 32, 39};

bool zt_oracle_compare(const char *dir, const char *name, const char *args, ZtLogitsDiff *d) {
    enum { V = ZT_ORACLE_VOCAB, N = ZT_ORACLE_N_TOK, R = ZT_ORACLE_N_ROWS };
    const char *src = getenv("ZR_SRC");
    char ref_path[4096], p[4096];
    snprintf(ref_path, sizeof ref_path, "%s/test/data/%s/%s.f32", src ? src : ".", dir, name);
    size_t n_ref = 0;
    float *ref = zt_read_f32(ref_path, &n_ref);
    if (!ref || n_ref != (size_t)R * V) {
        fprintf(stderr, "  %s: %s unreadable or not %d rows\n", name, ref_path, R);
        free(ref);
        return false;
    }
    ZtCpuModel l;
    if (zt_synth("oracle.gguf", args, 2, p, sizeof p) != 0 || !zt_cpu_model_load(&l, p, ZT_ORACLE_CTX)) {
        free(ref);
        return false;
    }
    static float all[N * V], rows[R * V];
    ZrError err;
    const bool ok = l.be->forward(l.be, zt_oracle_tokens, N, 0, all, true, &err) == 0;
    if (ok) {
        for (int r = 0; r < R; r++) memcpy(rows + r * V, all + zt_oracle_rows[r] * V, sizeof(float) * V);
        *d = zt_compare_logits(rows, ref, R, V);
        fprintf(stderr, "  %-18s max|diff|/std %.2e (max|diff| %.2e), argmax %d/%d\n", name, d->worst_rel, d->worst_abs,
                d->argmax_equal, R);
    } else {
        fprintf(stderr, "  %s: %s\n", name, err.msg);
    }
    zt_cpu_model_free(&l);
    free(ref);
    return ok;
}
