/* Models zrun-synth writes for a test (the tool's path in ZRUN_SYNTH, which meson test sets), and
 * what the architecture tests do with them on the CPU reference: load with a backend, or the
 * logits of every position of a prompt. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "model.h"
#include "zt_fixtures.h"

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

/* The prompt of the llama.cpp goldens under test/data/oracle_* (tools/oracle_goldens.sh's TOKENS
 * and ROWS: keep in step): ZT_ORACLE_N_TOK tokens of a ZT_ORACLE_VOCAB-token vocabulary in a
 * context of ZT_ORACLE_CTX, and the rows whose logits the goldens keep (before, at and past a
 * synthesized window of 16). */
#define ZT_ORACLE_N_TOK 40
#define ZT_ORACLE_N_ROWS 9
#define ZT_ORACLE_VOCAB 512
#define ZT_ORACLE_CTX 512
extern const int32_t zt_oracle_tokens[ZT_ORACLE_N_TOK];
extern const int zt_oracle_rows[ZT_ORACLE_N_ROWS];

/* One golden: the model zrun-synth writes with args, its CPU logits over the prompt, the kept rows
 * against ZR_SRC/test/data/DIR/NAME.f32 into *d (one line on stderr: name, max|diff|/std,
 * argmax). false (said on stderr) when the golden, the model or the forward pass fails. */
bool zt_oracle_compare(const char *dir, const char *name, const char *args, ZtLogitsDiff *d);
