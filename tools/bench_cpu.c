/* zrun-bench-cpu: CPU backend speed on one model (not a test).
 *   zrun-bench-cpu -m FILE [-t THREADS] [-p PROMPT_TOKENS] [-n DECODE_TOKENS] [-r REPEATS]
 * Prefills p tokens in one forward, then decodes n tokens greedily one step at a time, and
 * prints prefill and decode tokens/s, ms/token, the weight bytes read per second, and a hash of
 * the last logits (equal hashes = equal numbers across thread counts and runs). The best of r
 * repeats is reported. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int argmax(const float *v, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return b;
}

static uint64_t fnv1a(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

int main(int argc, char **argv) {
    const char *path = NULL;
    int n_threads = 0, n_prompt = 16, n_decode = 32, repeats = 3;
    int ch;
    while ((ch = getopt(argc, argv, "m:t:p:n:r:")) != -1) {
        switch (ch) {
        case 'm': path = optarg; break;
        case 't': n_threads = atoi(optarg); break;
        case 'p': n_prompt = atoi(optarg); break;
        case 'n': n_decode = atoi(optarg); break;
        case 'r': repeats = atoi(optarg); break;
        default: goto usage;
        }
    }
    if (!path || n_prompt < 1 || n_decode < 1 || repeats < 1 || n_threads < 0) goto usage;

    ZrModel m;
    ZrError err;
    double t0 = now_s();
    if (zr_model_load(&m, path, &err)) {
        fprintf(stderr, "zrun-bench-cpu: %s\n", err.msg);
        return 1;
    }
    double load_s = now_s() - t0;
    ZrBackendOptions o = {.n_ctx = n_prompt + n_decode, .n_threads = n_threads};
    ZrBackend *be = zr_cpu_backend_create(&m, &o, &err);
    if (!be) {
        fprintf(stderr, "zrun-bench-cpu: %s\n", err.msg);
        zr_model_free(&m);
        return 1;
    }
    const int V = m.hp.n_vocab;
    float *logits = malloc(sizeof(float) * V);
    int32_t *prompt = malloc(sizeof(int32_t) * n_prompt);
    for (int i = 0; i < n_prompt; i++) prompt[i] = (int32_t)((i * 7919 + 1) % V);
    double best_prefill = 1e30, best_decode = 1e30;
    for (int r = 0; r < repeats; r++) {
        be->truncate(be, 0);
        double a = now_s();
        if (be->forward(be, prompt, n_prompt, 0, logits, false, &err)) goto fail;
        double b = now_s();
        for (int i = 0; i < n_decode; i++) {
            int32_t tok = argmax(logits, V);
            if (be->forward(be, &tok, 1, n_prompt + i, logits, false, &err)) goto fail;
        }
        double c = now_s();
        if (b - a < best_prefill) best_prefill = b - a;
        if (c - b < best_decode) best_decode = c - b;
    }
    const double dec_tps = n_decode / best_decode;
    printf("model %s: %.1fM params, %.1f MB read per token, load %.1f ms\n", path, m.n_params / 1e6, m.bytes_per_token / 1e6, load_s * 1e3);
    char threads[16];
    if (n_threads)
        snprintf(threads, sizeof threads, "%d", n_threads);
    else
        snprintf(threads, sizeof threads, "all");
    printf("cpu, %s threads: prefill %d tokens %.1f tok/s | decode %d tokens %.2f tok/s, %.2f ms/token, %.2f GB/s | logits hash %016llx\n",
           threads, n_prompt, n_prompt / best_prefill, n_decode, dec_tps, 1e3 / dec_tps,
           dec_tps * m.bytes_per_token / 1e9, (unsigned long long)fnv1a(logits, sizeof(float) * V));
    be->destroy(be);
    zr_model_free(&m);
    free(logits);
    free(prompt);
    return 0;
fail:
    fprintf(stderr, "zrun-bench-cpu: %s\n", err.msg);
    return 1;
usage:
    fprintf(stderr, "usage: zrun-bench-cpu -m FILE [-t THREADS] [-p PROMPT_TOKENS] [-n DECODE_TOKENS] [-r REPEATS]\n");
    return 2;
}
