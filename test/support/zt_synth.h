/* Models zrun-synth writes for a test (the tool's path in ZRUN_SYNTH, which meson test sets), and
 * what the architecture tests do with them on the CPU reference: load with a backend, or the
 * logits of every position of a prompt. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "model.h"

/* Writes zt_tmpdir()/file with `zrun-synth -q [-t threads] -o PATH args` (threads 0: the tool's
 * default) and puts its path in path[cap]. Returns the tool's exit status: 0 when written, -1
 * when ZRUN_SYNTH is not set or the command does not fit (both said on stderr). */
int zt_synth(const char *file, const char *args, int threads, char *path, size_t cap);

/* Skips the test when zrun-synth or the source tree is not known (run outside meson test). */
#define ZT_NEED_SYNTH()                                                      \
    do {                                                                     \
        if (!getenv("ZRUN_SYNTH") || !getenv("ZR_SRC")) {                    \
            zt_skip("ZRUN_SYNTH / ZR_SRC not set (run through meson test)"); \
            return;                                                          \
        }                                                                    \
    } while (0)

/* A model loaded with a CPU backend of n_ctx positions and 2 threads. */
typedef struct ZtCpuModel {
    ZrModel m;
    ZrBackend *be;
} ZtCpuModel;

/* false (the error said on stderr, nothing left to free) when the file or the backend fails */
bool zt_cpu_model_load(ZtCpuModel *l, const char *path, int n_ctx);
void zt_cpu_model_free(ZtCpuModel *l);

/* The CPU reference's logits of every position of tokens[0..n) (n x n_vocab, malloc'ed) with a
 * backend of n_ctx positions and 4 threads, or NULL (said on stderr). */
float *zt_cpu_logits(const ZrModel *m, const int32_t *tokens, int n, int n_ctx);
