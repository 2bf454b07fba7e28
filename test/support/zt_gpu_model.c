#include "zt_gpu_model.h"

#include <stdio.h>

#include "zt_fixtures.h"

bool zt_all_f32(const ZrModel *m) { return m->tok_embd.type == 0 && m->output.type == 0 && m->layers[0].wq.type == 0; }

int zt_gpu_decode_prefill(ZrBackend *be, const ZrModel *m, const char *name, const int32_t *tokens, int n, int split,
                          const float *ref, float *lg) {
    const int V = m->hp.n_vocab;
    ZrError err = {0};
    int failed = 0, rc = 0;
    for (int t = 0; t < n && !rc; t++) rc = be->forward(be, &tokens[t], 1, t, lg + (size_t)t * V, true, &err);
    ZtLogitsDiff d = zt_compare_logits(lg, ref, n, V);
    bool ok = !rc && d.worst_rel <= ZT_DECODE_TOL;
    fprintf(stderr, "  decode  %-20s max|diff|/std %.3g  argmax %d/%d%s%s\n", name, d.worst_rel, d.argmax_equal, n,
            ok ? "  PASS" : "  FAIL ", rc ? err.msg : "");
    failed += !ok;
    be->truncate(be, 0);
    rc = be->forward(be, tokens, split, 0, lg, true, &err);
    if (!rc) rc = be->forward(be, tokens + split, n - split, split, lg + (size_t)split * V, true, &err);
    d = zt_compare_logits(lg, ref, n, V);
    const double tol = zt_all_f32(m) ? ZT_DECODE_TOL : ZT_PREFILL_TOL;
    ok = !rc && d.worst_rel <= tol;
    fprintf(stderr, "  prefill %-20s max|diff|/std %.3g  argmax %d/%d (tol %g)%s%s\n", name, d.worst_rel, d.argmax_equal, n,
            tol, ok ? "  PASS" : "  FAIL ", rc ? err.msg : "");
    return failed + !ok;
}
