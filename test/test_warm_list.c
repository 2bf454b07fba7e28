/* The start-up's warm-up list (src/cuda/warm.c), made on the host without a GPU: every GEMM shape
 * of the prefill for every bucket of prompt rows, but not the buckets whose prompts all take the
 * small product (quantized and BF16 matrices, 2..8 rows: cuda/mm_small.h), and the output's
 * all-logits GEMMs only when the command asks for every row's logits (zrun eval). The GPU side
 * (no heuristic call after the warm-up, at any prompt length) is test/gpu/test_startup.c. */
#include <stdbool.h>
#include <stdio.h>

#include "cuda/warm.h"
#include "model.h"
#include "zt.h"
#include "zt_synth.h"

/* Dims whose GEMM shapes are all distinct (the tiny preset's Q|K|V and gate|up coincide), so
 * every shape counts its buckets: Q|K|V 512 x 256, gate|up 1024 x 256, wo 256 x 256, down
 * 256 x 512, output 1000 x 256. */
#define DIMS "--layers 2 --seed 3 --embd 256 --ff 512 --heads 4 --kv-heads 2 --vocab 1000 "

typedef struct Listed {
    ZrCuWarmStats plain, all;
} Listed;

/* An H100's multiprocessors and shared memory a block may opt in to. */
#define SMS 132
#define SMEM_OPTIN (227 * 1024)

static bool list(const char *name, const char *args, Listed *out) {
    char path[4200];
    ZrModel m;
    ZrError err = {0};
    if (zt_synth("warm_list.gguf", args, 0, path, sizeof path) != 0) return false;
    if (zr_model_load(&m, path, &err)) {
        fprintf(stderr, "  %s: %s\n", name, err.msg);
        return false;
    }
    const bool ok = !zr_cuf_warm_list(&m, 1024, SMS, SMEM_OPTIN, false, &out->plain, &err) &&
                    !zr_cuf_warm_list(&m, 1024, SMS, SMEM_OPTIN, true, &out->all, &err);
    if (!ok) fprintf(stderr, "  %s: %s\n", name, err.msg);
    fprintf(stderr, "  %-8s %d shape-buckets listed, %d left to the small product (with eval's logits: %d, %d)\n", name,
            out->plain.n_listed, out->plain.n_small, out->all.n_listed, out->all.n_small);
    zr_model_free(&m);
    return ok;
}

ZT_TEST(quantized_models_leave_the_small_products_buckets_out_and_float_ones_keep_them) {
    ZT_NEED_SYNTH();
    Listed q, b, h;
    ZT_CHECK(list("Q4_K", DIMS "--type q4_k", &q));
    ZT_CHECK(list("BF16", DIMS "--type bf16", &b));
    ZT_CHECK(list("F16", DIMS "--type f16", &h));
    ZT_CHECKF(q.plain.n_small > 0 && b.plain.n_small > 0, "quantized / BF16: %d / %d buckets left out", q.plain.n_small,
              b.plain.n_small);
    ZT_CHECKF(h.plain.n_small == 0 && h.all.n_small == 0, "F16 weights are cuBLASLt's at every length: %d left out",
              h.plain.n_small);
    /* the same shapes, one bucket fewer each where the small product takes it: 4 shapes, buckets
     * 8 .. 512 */
    ZT_CHECKF(h.plain.n_listed == 4 * 7 && q.plain.n_small == 4 && q.plain.n_listed == 4 * 6,
              "F16 %d listed; Q4_K %d listed, %d left out", h.plain.n_listed, q.plain.n_listed, q.plain.n_small);
    ZT_CHECK(q.plain.max_rows == 512);
}

ZT_TEST(the_outputs_all_logits_gemms_are_listed_only_for_eval) {
    ZT_NEED_SYNTH();
    Listed q, h;
    ZT_CHECK(list("Q4_K", DIMS "--type q4_k", &q));
    ZT_CHECK(list("F16", DIMS "--type f16", &h));
    /* the output's buckets of 8 .. 64 rows (ZR_CUF_LOGIT_ROWS at a time); the small product takes 8 for Q4_K */
    ZT_CHECKF(q.all.n_listed == q.plain.n_listed + 3 && q.all.n_small == q.plain.n_small + 1,
              "Q4_K: %d listed with eval's logits, %d without", q.all.n_listed, q.plain.n_listed);
    ZT_CHECKF(h.all.n_listed == h.plain.n_listed + 4, "F16: %d with eval's logits, %d without", h.all.n_listed,
              h.plain.n_listed);
}

int main(void) { return zt_run(); }
