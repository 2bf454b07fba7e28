/* Non-finite logits on the GPU stop zrun naming the position, on every path the logits take:
 * copied to the host (sampled decode, prefill, eval: checked there), or picked on the device
 * (greedy decode, eager and graph replay, and bench: cu/argmax.cu reports the first NaN or inf
 * id). The CPU side of the same checks: test/test_nonfinite.c. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_env.h"
#include "zt.h"
#include "zt_patch.h"
#include "zt_proc.h"

static bool stops_naming_the_position(const char *const *args, const char *want_pos) {
    ZtProc p = zt_proc_zrun(NULL, args, NULL);
    bool ok = p.status == 1 && strstr(p.err, "the forward pass at position ") && strstr(p.err, "gave a non-finite logit (") &&
              (!want_pos || strstr(p.err, want_pos));
    if (!ok) fprintf(stderr, "  exit %d\n  stderr: %s\n  stdout: %.200s\n", p.status, p.err, p.out);
    zt_proc_free(&p);
    return ok;
}

static const char *inf_norm(void) { return zt_stories_patched("inf-norm", "output_norm.weight", 0, INFINITY); }
/* greedy from BOS feeds 403 407 261 378: 378's embedding row first reaches position 4 */
static const char *inf_embd_378(void) { return zt_stories_patched("inf-embd-378", "token_embd.weight", 378 * 64 + 5, INFINITY); }

ZT_TEST(sampled_decode_and_prefill_logits_are_checked_on_the_host) {
    const char *m = inf_norm();
    if (!m) return;
    const char *a[] = {"-m", m, "-p", "Once upon a time", "--device", "cuda", "--seed", "1", NULL};
    ZT_CHECK(stops_naming_the_position(a, NULL));
    const char *b[] = {"-m", m, "-p", "", "--device", "cuda", "--seed", "1", NULL}; /* one token: the decode step's path */
    ZT_CHECK(stops_naming_the_position(b, "position 0 "));
}

ZT_TEST(the_device_greedy_pick_reports_a_non_finite_logit_eager_and_in_the_graph) {
    const char *m = inf_embd_378();
    if (!m) return;
    const char *eager[] = {"-m", m, "-p", "", "--temp", "0", "-n", "16", "--device", "cuda", "--no-graph", NULL};
    ZT_CHECK(stops_naming_the_position(eager, "position 4 "));
    const char *graph[] = {"-m", m, "-p", "", "--temp", "0", "-n", "16", "--device", "cuda", "--graph", NULL};
    ZT_CHECK(stops_naming_the_position(graph, "position 4 "));
}

ZT_TEST(eval_and_bench_stop_on_the_gpu_too) {
    const char *m = inf_norm();
    if (!m) return;
    char ids[4200], out[4200];
    snprintf(ids, sizeof ids, "%s/nonfinite.tokens", zt_tmpdir());
    snprintf(out, sizeof out, "%s/nonfinite.f32", zt_tmpdir());
    FILE *f = fopen(ids, "w");
    ZT_CHECK(f != NULL);
    fputs("1 403 407 9\n", f);
    fclose(f);
    const char *e[] = {"eval", "-m", m, "--tokens", ids, "--logits", out, "--device", "cuda", NULL};
    ZT_CHECK(stops_naming_the_position(e, "position 0 "));
    const char *pp[] = {"bench", "-m", m, "-p", "8", "-n", "0", "-r", "1", "--device", "cuda", NULL};
    ZT_CHECK(stops_naming_the_position(pp, NULL));
    const char *tg[] = {"bench", "-m", m, "-p", "0", "-n", "4", "-r", "1", "--device", "cuda", "--graph", "both", NULL};
    ZT_CHECK(stops_naming_the_position(tg, NULL));
}

int main(void) { return gpu_main(); }
