/* libFuzzer target for model binding: a GGUF file becomes a model (every architecture zrun
 * knows: hyper-parameters, per-layer facts, tensors bound by name with dtype and shape
 * checked), and a model small enough is run on the CPU backend for two tokens, so that every
 * value binding accepts (a norm epsilon, a rope base, a window, an odd alignment) meets the
 * arithmetic that uses it under ASan and UBSan. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "gguf.h"
#include "model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile float sink;

/* Bounds on what is run, not on what is bound: a fuzzer's execution must stay short. */
#define RUN_MAX_BYTES (1u << 20)
#define RUN_MAX_WIDTH 4096

static void run_two_tokens(const ZrModel *m) {
    const ZrHparams *hp = &m->hp;
    if (m->bytes_per_token > RUN_MAX_BYTES || hp->n_embd > RUN_MAX_WIDTH || hp->n_ff > RUN_MAX_WIDTH ||
        hp->n_vocab > RUN_MAX_WIDTH || (int64_t)hp->n_head * hp->head_dim > RUN_MAX_WIDTH)
        return;
    ZrBackendOptions o = {.n_ctx = 4, .n_threads = 1, .quiet = true};
    ZrError err;
    ZrBackend *be = zr_cpu_backend_create(m, &o, &err);
    if (!be) return;
    float *logits = malloc((size_t)hp->n_vocab * 2 * sizeof *logits);
    const int32_t tokens[2] = {0, hp->n_vocab - 1};
    if (logits && be->forward(be, tokens, 2, 0, logits, true, &err) == 0) {
        sink += logits[0] + logits[2 * (size_t)hp->n_vocab - 1];
        /* then one decode step on top of the prefill */
        if (be->forward(be, tokens + 1, 1, 2, logits, false, &err) == 0) sink += logits[0];
    }
    free(logits);
    be->destroy(be);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ZrGguf g;
    ZrError err;
    if (zr_gguf_parse(&g, data, size, "fuzz", &err)) return 0;
    ZrModel m;
    if (zr_model_from_gguf(&m, &g, &err)) {
        if (!memchr(err.msg, 0, sizeof err.msg)) abort();
        zr_gguf_close(&g);
        return 0;
    }
    run_two_tokens(&m);
    zr_model_free(&m);
    return 0;
}
