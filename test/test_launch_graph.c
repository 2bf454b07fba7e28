/* The decode-graph controller and builder on the driver double (no GPU): the same behaviours
 * as test/gpu/test_graph.c, plus what only the double can observe (node dependencies, calls). */
#include <stdint.h>
#include <string.h>

#include "test_launch_toy_fake.h"
#define CASES_STICKY_MUST_RECOVER
#include "test_launch_graph_cases.h"

static int case_open(Toy *t) {
    const ZrCuDriver *d = fake_driver(toy_fake_kernels, toy_fake_n_kernels, true);
    ZrError err = {0};
    int rc = toy_open(t, d, "fake image", 128, CASE_VOCAB, &err);
    if (rc) fprintf(stderr, "  toy_open: %s\n", err.msg);
    return rc;
}

ZT_TEST(graph_is_one_kernel_node_per_record_each_depending_on_the_previous) {
    Toy t;
    CASE_OPEN(&t);
    ZrError err = {0};
    int v = 3;
    float s = 2.0f;
    int n = CASE_VOCAB;
    zr_launcher_record_begin(&t.l);
    for (int i = 0; i < 10; i++) {
        ZT_CHECK(ZR_LAUNCH(&t.l, &t.scale, ZR_DIM3(i + 1, 1, 1), ZR_DIM1(64), 16, &err, &t.d_logits, &s, &n) == 0);
        s += 1;
    }
    zr_launcher_record_end(&t.l);
    (void)v;
    ZrGraph g;
    FakeState *st = fake_state();
    ZT_CHECK(zr_graph_build(t.drv, &t.l.rec, NULL, 0, &g, &err) == CUDA_SUCCESS);
    ZT_CHECK(st->graphs_created == 1 && st->nodes_added == 10 && st->n_nodes == 10 && g.n_nodes == 10);
    for (int i = 0; i < 10; i++) {
        const FakeNode *nd = &st->nodes[i];
        ZT_CHECK(nd->k == (const FakeKernel *)t.scale.fn);
        ZT_CHECKF(nd->n_deps == (i ? 1u : 0u) && nd->dep == i - 1, "node %d: %zu deps, dep %d", i, nd->n_deps, nd->dep);
        ZT_CHECK(nd->grid[0] == (unsigned)i + 1 && nd->block[0] == 64 && nd->shared == 16);
        float rs;
        memcpy(&rs, nd->params + 8, 4);
        ZT_CHECK(rs == 2.0f + (float)i); /* the node got the value at launch time */
    }
    ZT_CHECK(zr_graph_instantiate(t.drv, &g, NULL, 0, &err) == CUDA_SUCCESS && st->instantiated == 1);
    zr_graph_destroy(t.drv, &g);
    ZT_CHECK(st->exec_destroyed == 1 && st->graphs_destroyed == 1);
    toy_close(&t);
}

ZT_TEST(injected_build_failure_destroys_the_partial_graph) {
    Toy t;
    CASE_OPEN(&t);
    ZrError err = {0};
    float s = 1;
    int n = 4;
    zr_launcher_record_begin(&t.l);
    for (int i = 0; i < 6; i++) ZT_CHECK(ZR_LAUNCH(&t.l, &t.scale, ZR_DIM1(1), ZR_DIM1(1), 0, &err, &t.d_logits, &s, &n) == 0);
    zr_launcher_record_end(&t.l);
    ZrFault f;
    ZT_CHECK(zr_fault_parse("graph-build", &f, &err) == 0);
    ZrGraph g;
    ZT_CHECK(zr_graph_build(t.drv, &t.l.rec, &f, 0, &g, &err) == CUDA_ERROR_INVALID_VALUE);
    ZT_CHECKF(strstr(err.msg, "node 3 of 6") && strstr(err.msg, "ZRUN_FAULT=graph-build") &&
                  strstr(err.msg, "CUDA_ERROR_INVALID_VALUE"),
              "%s", err.msg);
    ZT_CHECK(fake_state()->graphs_destroyed == 1 && g.graph == NULL);
    ZT_CHECK(zr_graph_build(t.drv, &t.l.rec, &f, 0, &g, &err) == CUDA_SUCCESS); /* fires once */
    zr_graph_destroy(t.drv, &g);
    toy_close(&t);
}

ZT_TEST(graph_replays_with_cugraphlaunch_and_no_kernel_launches) {
    CaseRun g;
    ZrDecodeOptions og = {.graph = true, .verify = 0};
    CASE_RUN(&og, false, -1, &g);
    /* the double counts calls of the last run: 4 eager launches to record, then replays only */
    ZT_CHECK(fake_state()->launches == 4);
    ZT_CHECK(fake_state()->graph_launches == CASE_STEPS - 1);
    ZT_CHECK(fake_state()->instantiated == 1);
    free(g.logits);
}

ZT_TEST(sticky_error_without_a_recover_hook_is_returned) {
    Toy t;
    CASE_OPEN(&t);
    ZrDecodeGraph g;
    ZrDecodeOptions o = {.graph = true, .verify = 1};
    ZrError err = {0};
    ZT_CHECK(zr_fault_parse("sticky:2", &o.fault, &err) == 0);
    char path[4200];
    snprintf(path, sizeof path, "%s/norecover.txt", zt_tmpdir());
    o.log = fopen(path, "w");
    ZrDecodeHooks h = {0};
    ZT_CHECK(zr_graph_decode_init(&g, &t.io, &h, &o, &err) == ZR_E_INTERNAL); /* needs an eager step */
    fclose(o.log);
    toy_close(&t);
}

ZT_TEST(sticky_error_that_survives_the_context_reset_ends_the_run_clearly) {
    Toy t;
    CASE_OPEN(&t);
    fake_state()->poison_is_process_wide = true; /* what driver 580 does */
    ZrDecodeOptions o = {.graph = true, .verify = 1};
    ZrError err = {0};
    ZT_CHECK(zr_fault_parse("sticky:3", &o.fault, &err) == 0);
    char path[4200];
    snprintf(path, sizeof path, "%s/process-poisoned.txt", zt_tmpdir());
    o.log = fopen(path, "w");
    float *logits = calloc(10 * CASE_VOCAB, sizeof(float));
    ZrDecodeStats st;
    int rc = toy_run(&t, &o, 10, logits, -1, &st, &err);
    fclose(o.log);
    free(logits);
    ZT_CHECK(rc == ZR_E_CONTEXT_LOST && err.code == ZR_E_CONTEXT_LOST); /* a new process can go on */
    ZT_CHECKF(!strncmp(err.msg, "the CUDA context was lost (CUDA_ERROR_LAUNCH_FAILED): ", 54), "%s", err.msg);
    ZT_CHECKF(strstr(err.msg, "keeps CUDA_ERROR_LAUNCH_FAILED for the whole process") &&
                  strstr(err.msg, "only a new process can use the GPU again"),
              "%s", err.msg);
    ZT_CHECK(st.recoveries == 1 && st.context_lost);
    ZT_CHECK(t.n_hist == 3); /* steps 0..2 were delivered, step 3 was not */
    toy_close(&t);
}

ZT_TEST(fault_spec_parsing) {
    ZrFault f;
    ZrError err = {0};
    ZT_CHECK(zr_fault_parse(NULL, &f, &err) == 0 && f.kind == ZR_FAULT_NONE);
    ZT_CHECK(zr_fault_parse("", &f, &err) == 0 && f.kind == ZR_FAULT_NONE);
    ZT_CHECK(zr_fault_parse("graph-build", &f, &err) == 0 && f.kind == ZR_FAULT_GRAPH_BUILD && f.step == 0);
    ZT_CHECK(zr_fault_parse("graph-instantiate", &f, &err) == 0 && f.kind == ZR_FAULT_GRAPH_INSTANTIATE);
    ZT_CHECK(zr_fault_parse("graph-launch", &f, &err) == 0 && f.kind == ZR_FAULT_GRAPH_LAUNCH && f.step == 1);
    ZT_CHECK(zr_fault_parse("graph-901:12", &f, &err) == 0 && f.kind == ZR_FAULT_GRAPH_901 && f.step == 12);
    ZT_CHECK(zr_fault_parse("replay-mismatch", &f, &err) == 0 && f.kind == ZR_FAULT_REPLAY_MISMATCH);
    ZT_CHECK(zr_fault_parse("sticky:0", &f, &err) == 0 && f.kind == ZR_FAULT_STICKY && f.step == 0);
    ZT_CHECK(zr_fault_parse("sticky", &f, &err) == 0 && f.step == 1);
    ZT_CHECK(zr_fault_parse("sticky:", &f, &err) == ZR_E_USAGE);
    ZT_CHECK(zr_fault_parse("sticky:-1", &f, &err) == ZR_E_USAGE);
    ZT_CHECK(zr_fault_parse("sticky:3x", &f, &err) == ZR_E_USAGE && f.kind == ZR_FAULT_NONE);
    ZT_CHECK(zr_fault_parse("graph", &f, &err) == ZR_E_USAGE);
    ZT_CHECK(zr_fault_parse("graph-buildx", &f, &err) == ZR_E_USAGE);
    ZT_CHECKF(strstr(err.msg, "graph-build, graph-instantiate, graph-launch, graph-901"), "%s", err.msg);
}

ZT_TEST(fault_fires_once_from_its_step) {
    ZrFault f;
    ZrError err = {0};
    ZT_CHECK(zr_fault_parse("graph-launch:3", &f, &err) == 0);
    ZT_CHECK(!zr_fault_fires(&f, ZR_FAULT_GRAPH_LAUNCH, 2));
    ZT_CHECK(!zr_fault_fires(&f, ZR_FAULT_STICKY, 3));
    ZT_CHECK(zr_fault_fires(&f, ZR_FAULT_GRAPH_LAUNCH, 4));
    ZT_CHECK(!zr_fault_fires(&f, ZR_FAULT_GRAPH_LAUNCH, 5));
    ZT_CHECK(!zr_fault_fires(NULL, ZR_FAULT_GRAPH_LAUNCH, 5));
}

int main(void) { return zt_run(); }
