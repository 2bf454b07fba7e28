/* zrun-cuda-timing: a first speed measurement of the CUDA backend (not a test, not `zrun
 * bench`): prefill tokens/s and decode tokens/s, eager and through the decode graph, on one
 * model. Each figure is the median of R repetitions after a warm-up; decode starts from an
 * empty context, one token at a time with its logits copied back (as `zrun` decodes).
 * With -P, a third pass decodes 32 tokens eagerly with --profile's per-kernel timing and prints
 * the table (kernels by total time), after a table of two prefills of p tokens (zrun's kernels
 * only: the second prefill's wall time minus half the table's sum is the cuBLASLt GEMMs plus
 * gaps). -g: the graph pass only (skips the eager one and its model upload). -T FILE (kernels
 * built with meson -Dtimeline=true): the graph pass writes the grid-wait stamps of its last
 * decode steps to FILE (src/cuda/timeline.h), for tools/timeline.py. -k f16|f32: the KV cache's
 * type (default f16, zrun's). -s greedy|default: the decode passes run the backend's decode loop
 * (ZrBackend.decode_run, as zrun and zrun bench decode) with that sampling, so each step ends with
 * the device's greedy tail or sampling chain (and the timeline shows it), from the prefill's last
 * logits; without -s each step is a forward with its logits copied back.
 *     zrun-cuda-timing -m MODEL [-p 512] [-n 128] [-r 3] [-P] [-g] [-T FILE] [-k f16|f32] [-s greedy|default] */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "model.h"
#include "sampler.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static bool keep_going(void *ctx, int32_t token) {
    (void)ctx;
    (void)token;
    return true;
}

/* n decode steps from pos: with loop, through the backend's decode loop with sampling sp (as zrun
 * bench's decode tests), the first step's token picked on the host from logits (the last position's
 * before pos); else forwards of tok[i % n_tok] with their logits copied back */
static int decode(ZrBackend *be, bool loop, const ZrSamplerParams *sp, int n_vocab, const int32_t *tok, int n_tok,
                  int pos, int n, float *logits, ZrError *err) {
    if (!loop) {
        int rc = 0;
        for (int i = 0; !rc && i < n; i++) rc = be->forward(be, &tok[i % n_tok], 1, pos + i, logits, false, err);
        return rc;
    }
    ZrSampler *smp = zr_sampler_create(sp, n_vocab, err);
    if (!smp) return err->code;
    for (int i = 0; i < pos; i++) zr_sampler_accept(smp, tok[i % n_tok]);
    ZrDecodeLoop L = {.sp = sp, .host = smp, .n_cand = n_vocab, .pos = pos, .max_steps = n, .on_token = keep_going};
    L.token = zr_decode_pick_host(&L, logits, n_vocab);
    const int rc = be->decode_run(be, &L, err);
    zr_sampler_free(smp);
    return rc;
}

static double median(double *v, int n) {
    qsort(v, n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv) {
    const char *path = NULL, *timeline = NULL;
    int p = 512, n = 128, reps = 3, opt, profile = 0, graph_only = 0, bad = 0;
    ZrKvType kv = ZR_KV_F16;
    ZrSamplerParams sp = zr_sampler_defaults();
    bool loop = false; /* -s: decode through decode_run with sp */
    while ((opt = getopt(argc, argv, "m:p:n:r:PgT:k:s:")) != -1) {
        if (opt == 'P' || opt == 'g') {
            if (opt == 'P') profile = 1;
            else graph_only = 1;
            continue;
        }
        if (opt == 'm') path = optarg;
        else if (opt == 'T') timeline = optarg;
        else if (opt == 'p') p = atoi(optarg);
        else if (opt == 'n') n = atoi(optarg);
        else if (opt == 'r') reps = atoi(optarg);
        else if (opt == 'k' && (!strcmp(optarg, "f16") || !strcmp(optarg, "f32"))) kv = optarg[1] == '1' ? ZR_KV_F16 : ZR_KV_F32;
        else if (opt == 's' && (!strcmp(optarg, "greedy") || !strcmp(optarg, "default"))) {
            loop = true;
            if (optarg[0] == 'g') sp.temp = 0.0f; /* zrun bench --sampling greedy */
        } else bad = 1;
    }
    if (bad || !path || p < 2 || n < 1 || reps < 1 || reps > 64) {
        fprintf(stderr, "usage: zrun-cuda-timing -m MODEL [-p 512] [-n 128] [-r 3] [-P] [-g] [-T FILE] [-k f16|f32] "
                        "[-s greedy|default]\n");
        return 2;
    }
    ZrModel m;
    ZrError err = {0};
    if (zr_model_load(&m, path, &err)) {
        fprintf(stderr, "zrun-cuda-timing: %s\n", err.msg);
        return 1;
    }
    const int V = m.hp.n_vocab;
    int32_t *tok = malloc(sizeof(int32_t) * p);
    float *logits = malloc(sizeof(float) * V);
    for (int i = 0; i < p; i++) tok[i] = (int32_t)((1 + 7919 * (int64_t)i) % V);
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    for (int graph = graph_only; graph <= 1; graph++) {
        ZrBackendOptions o = {.n_ctx = p + n + 16, .kv_type = kv, .graph = graph, .verify_graph = 1, .quiet = graph,
                              .timeline = graph ? timeline : NULL};
        ZrBackend *be = zr_cuda_backend_create(&m, &o, &err);
        if (!be) {
            fprintf(stderr, "zrun-cuda-timing: %s\n", err.msg);
            return 1;
        }
        double pp[64], tg[64];
        int rc = 0;
        /* warm-up: one prefill, a few decode steps (the graph is recorded and checked here) */
        rc = be->forward(be, tok, p, 0, logits, false, &err);
        if (!rc) rc = decode(be, loop, &sp, V, tok, p, p, 4, logits, &err);
        be->truncate(be, 0);
        for (int r = 0; !rc && r < reps; r++) {
            double t0 = now_s();
            rc = be->forward(be, tok, p, 0, logits, false, &err);
            pp[r] = p / (now_s() - t0);
            be->truncate(be, 0);
            if (loop && !rc) rc = be->forward(be, tok, 1, 0, logits, false, &err); /* the first pick's logits */
            t0 = now_s();
            if (!rc) rc = decode(be, loop, &sp, V, tok, p, loop ? 1 : 0, n, logits, &err);
            tg[r] = n / (now_s() - t0);
            be->truncate(be, 0);
        }
        if (rc) {
            fprintf(stderr, "zrun-cuda-timing: %s\n", err.msg);
            return 1;
        }
        ZrBackendStats st;
        be->stats(be, &st);
        const double tgm = median(tg, reps), ppm = median(pp, reps);
        printf("%-28s %-5s pp%d %9.1f t/s   tg%d %8.1f t/s  %7.1f GB/s  kernels/token %llu  host %.1f us/token%s\n",
               name, graph ? "graph" : "eager", p, ppm, n, tgm, tgm * (double)m.bytes_per_token / 1e9,
               (unsigned long long)st.kernels_per_token, st.host_us_per_token,
               graph && !st.graph_active ? "  (graph fell back to eager)" : "");
        fflush(stdout);
        be->destroy(be);
    }
    if (profile) {
        ZrBackendOptions o = {.n_ctx = p + n + 16, .kv_type = kv, .graph = 0, .profile = true, .quiet = true};
        /* the prefill first, on its own backend so its table holds prefill launches only */
        ZrBackend *be = zr_cuda_backend_create(&m, &o, &err);
        int rc = be ? 0 : 1;
        if (!rc) rc = be->forward(be, tok, p, 0, logits, false, &err); /* warm-up (cuBLASLt loads lazily) */
        if (!rc) {
            be->truncate(be, 0);
            const double t0 = now_s();
            rc = be->forward(be, tok, p, 0, logits, false, &err);
            printf("profile of 2 prefills of %d tokens (%s; the table sums both): the second took %.3f ms wall\n", p,
                   name, (now_s() - t0) * 1e3);
            fflush(stdout);
        }
        if (be) be->destroy(be); /* prints the table on stderr */
        be = rc ? NULL : zr_cuda_backend_create(&m, &o, &err);
        if (!rc && !be) rc = 1;
        for (int i = 0; !rc && i < 32; i++) rc = be->forward(be, &tok[i % p], 1, i, logits, false, &err);
        if (rc) fprintf(stderr, "zrun-cuda-timing: %s\n", err.msg);
        printf("profile of 32 eager decode steps (%s):\n", name);
        fflush(stdout);
        if (be) be->destroy(be); /* prints the table on stderr */
    }
    free(tok);
    free(logits);
    zr_model_free(&m);
    return 0;
}
