/* Programmatic dependent launch in the decode graph, on the driver double: every behaviour of
 * test_launch_graph_cases.h again with a device of compute capability 9.0 and a driver that has
 * cuGraphAddDependencies_v2 (so the graph has programmatic edges), plus when the edges are
 * programmatic and when plain, and the plain-edge rebuild when programmatic ones fail. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test_launch_toy_fake.h"
#define CASES_STICKY_MUST_RECOVER
#include "test_launch_graph_cases.h"

/* The device and driver the next case_open gives (reset to Hopper + entry point by each test
 * that changes it). */
typedef struct FakeDevice {
    int cc_major, cc_minor;
    bool add_dependencies;
    CUresult add_deps_result, instantiate_programmatic_result, instantiate_result;
} FakeDevice;
static FakeDevice next_device = {9, 0, true, CUDA_SUCCESS, CUDA_SUCCESS, CUDA_SUCCESS};
static const FakeDevice hopper = {9, 0, true, CUDA_SUCCESS, CUDA_SUCCESS, CUDA_SUCCESS};

static int case_open(Toy *t) {
    const ZrCuDriver *d = fake_driver(toy_fake_kernels, toy_fake_n_kernels, true);
    fake_set_pdl(next_device.cc_major, next_device.cc_minor, next_device.add_dependencies, true);
    FakeState *st = fake_state();
    st->add_deps_result = next_device.add_deps_result;
    st->instantiate_programmatic_result = next_device.instantiate_programmatic_result;
    st->instantiate_result = next_device.instantiate_result;
    ZrError err = {0};
    int rc = toy_open(t, d, "fake image", 128, CASE_VOCAB, &err);
    if (rc) fprintf(stderr, "  toy_open: %s\n", err.msg);
    return rc;
}

/* The graph the double holds: the toy's 4 kernels in launch order, node i depending on node
 * i-1 through an edge of the given kind. */
static void check_chain(bool programmatic) {
    static const char *const order[] = {"zr_selftest_embed", "zr_selftest_attend", "zr_selftest_scale",
                                        "zr_selftest_scale"};
    const FakeState *st = fake_state();
    ZT_CHECK(st->n_nodes == 4);
    for (int i = 0; i < st->n_nodes && i < 4; i++) {
        const FakeNode *nd = &st->nodes[i];
        ZT_CHECKF(!strcmp(nd->k->name, order[i]), "node %d is %s", i, nd->k->name);
        ZT_CHECKF(nd->n_deps == (i ? 1u : 0u) && nd->dep == i - 1, "node %d: %zu deps, dep %d", i, nd->n_deps, nd->dep);
        if (!i) continue;
        const unsigned char port = programmatic ? CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC : 0;
        const unsigned char type = programmatic ? CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC : 0;
        ZT_CHECKF(nd->edge.from_port == port && nd->edge.type == type && nd->edge.to_port == 0,
                  "node %d: edge port %d type %d", i, nd->edge.from_port, nd->edge.type);
    }
}

/* A graph run on `dev` against an eager run: same logits, edges of the expected kind, the
 * graph replayed (not eager), and the log lines counted. */
static void check_edges(FakeDevice dev, const ZrDecodeOptions *o0, bool programmatic, int pdl_off_lines) {
    next_device = dev;
    CaseRun eager, g;
    ZrDecodeOptions oe = {0}, og = *o0;
    og.graph = true;
    og.verify = 1;
    CASE_RUN(&oe, false, -1, &eager);
    CASE_RUN(&og, false, -1, &g);
    next_device = hopper;
    ZT_CHECK(same_logits(&eager, &g));
    ZT_CHECKF(g.stats.graph_active && g.stats.graph_steps == CASE_STEPS - 1, "%s", g.log);
    ZT_CHECKF(g.stats.pdl == programmatic, "pdl %d", g.stats.pdl);
    ZT_CHECK(fake_state()->graph_launches == CASE_STEPS - 1);
    check_chain(programmatic);
    ZT_CHECKF(count_lines(g.log, "zrun: programmatic dependent launch off, the decode graph has plain edges: ") ==
                  pdl_off_lines,
              "log: %s", g.log);
    ZT_CHECKF(count_lines(g.log, "decode graph off") == 0, "log: %s", g.log);
    free(eager.logits);
    free(g.logits);
}

ZT_TEST(edges_are_programmatic_on_cc_9_0_with_the_entry_point) {
    ZrDecodeOptions o = {0};
    check_edges(hopper, &o, true, 0);
    ZT_CHECK(fake_state()->add_deps_calls == 1); /* all edges in one call */
}

ZT_TEST(edges_are_plain_without_cuGraphAddDependencies) {
    FakeDevice d = hopper;
    d.add_dependencies = false;
    ZrDecodeOptions o = {0};
    check_edges(d, &o, false, 0);
}

ZT_TEST(edges_are_plain_below_cc_9_0) {
    FakeDevice d = hopper;
    d.cc_major = 8;
    d.cc_minor = 9;
    ZrDecodeOptions o = {0};
    check_edges(d, &o, false, 0);
    ZT_CHECK(fake_state()->add_deps_calls == 0);
}

ZT_TEST(edges_are_plain_with_the_no_pdl_option) {
    ZrDecodeOptions o = {.no_pdl = true};
    check_edges(hopper, &o, false, 0);
    ZT_CHECK(fake_state()->add_deps_calls == 0);
    o.no_pdl = false; /* and programmatic again without it, on the same device */
    check_edges(hopper, &o, true, 0);
    ZT_CHECK(fake_state()->add_deps_calls == 1);
}

ZT_TEST(the_environment_does_not_turn_programmatic_edges_off) {
    /* the library reads no environment: the old switch's name changes nothing */
    ZT_CHECK(setenv("ZRUN_PDL", "0", 1) == 0);
    ZrDecodeOptions o = {0};
    check_edges(hopper, &o, true, 0);
    ZT_CHECK(unsetenv("ZRUN_PDL") == 0);
}

ZT_TEST(failing_programmatic_edges_rebuild_the_graph_with_plain_edges_not_eager) {
    FakeDevice d = hopper;
    d.add_deps_result = CUDA_ERROR_NOT_SUPPORTED;
    ZrDecodeOptions o = {0};
    check_edges(d, &o, false, 1);
    ZT_CHECK(fake_state()->graphs_created == 2 && fake_state()->instantiated == 1);
}

ZT_TEST(failing_programmatic_instantiate_rebuilds_the_graph_with_plain_edges_not_eager) {
    FakeDevice d = hopper;
    d.instantiate_programmatic_result = CUDA_ERROR_INVALID_VALUE;
    ZrDecodeOptions o = {0};
    check_edges(d, &o, false, 1);
    ZT_CHECK(fake_state()->graphs_created == 2 && fake_state()->instantiated == 1);
}

ZT_TEST(the_plain_edge_rebuild_failing_too_falls_back_to_eager) {
    next_device = hopper;
    next_device.add_deps_result = CUDA_ERROR_NOT_SUPPORTED;
    next_device.instantiate_result = CUDA_ERROR_OUT_OF_MEMORY;
    CaseRun eager, g;
    ZrDecodeOptions oe = {0}, og = {.graph = true, .verify = 1};
    CASE_RUN(&oe, false, -1, &eager);
    CASE_RUN(&og, false, -1, &g);
    next_device = hopper;
    ZT_CHECK(same_logits(&eager, &g));
    ZT_CHECK(!g.stats.graph_active && !g.stats.pdl && g.stats.graph_steps == 0);
    ZT_CHECKF(count_lines(g.log, "zrun: programmatic dependent launch off") == 1 &&
                  strstr(g.log, "CUDA_ERROR_NOT_SUPPORTED"),
              "%s", g.log);
    ZT_CHECKF(count_lines(g.log, "zrun: decode graph off, decoding eagerly from here: ") == 1 &&
                  strstr(g.log, "CUDA_ERROR_OUT_OF_MEMORY"),
              "%s", g.log);
    free(eager.logits);
    free(g.logits);
}

ZT_TEST(builder_adds_the_nodes_then_every_edge_as_programmatic) {
    Toy t;
    CASE_OPEN(&t);
    ZrError err = {0};
    float s = 2.0f;
    int n = 8;
    zr_launcher_record_begin(&t.l);
    for (int i = 0; i < 10; i++)
        ZT_CHECK(ZR_LAUNCH(&t.l, &t.scale, ZR_DIM1(i + 1), ZR_DIM1(32), 0, &err, &t.d_logits, &s, &n) == 0);
    zr_launcher_record_end(&t.l);
    ZT_CHECK(zr_graph_pdl_supported(&t.cuda));
    ZrGraph g;
    ZT_CHECK(zr_graph_build_pdl(t.drv, &t.l.rec, true, NULL, 0, &g, &err) == CUDA_SUCCESS);
    const FakeState *st = fake_state();
    ZT_CHECK(g.programmatic && g.n_nodes == 10 && st->n_nodes == 10 && st->add_deps_calls == 1);
    for (int i = 0; i < 10; i++) {
        const FakeNode *nd = &st->nodes[i];
        ZT_CHECK(nd->grid[0] == (unsigned)i + 1);
        ZT_CHECKF(nd->n_deps == (i ? 1u : 0u) && nd->dep == i - 1, "node %d: dep %d", i, nd->dep);
        ZT_CHECK(!i || (nd->edge.from_port == CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC &&
                        nd->edge.type == CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC));
    }
    zr_graph_destroy(t.drv, &g);
    /* the plain builder on the same device: dependencies given with each node, no edge calls */
    ZT_CHECK(zr_graph_build(t.drv, &t.l.rec, NULL, 0, &g, &err) == CUDA_SUCCESS);
    ZT_CHECK(!g.programmatic && st->add_deps_calls == 1 && st->nodes[9].dep == 8 && st->nodes[9].edge.type == 0);
    zr_graph_destroy(t.drv, &g);
    toy_close(&t);
}

/* A graph of 3 steps: the recorded launches 3 times in order (node i is record i % 4, with its
 * configuration), one chain of edges through all of them, programmatic between the steps too,
 * or plain; 0 steps is refused. */
ZT_TEST(a_graph_of_several_steps_repeats_the_recording_in_one_chain) {
    Toy t;
    CASE_OPEN(&t);
    ZrError err = {0};
    float s = 2.0f;
    int n = 8;
    zr_launcher_record_begin(&t.l);
    for (int i = 0; i < 4; i++)
        ZT_CHECK(ZR_LAUNCH(&t.l, &t.scale, ZR_DIM1(i + 1), ZR_DIM1(32), 0, &err, &t.d_logits, &s, &n) == 0);
    zr_launcher_record_end(&t.l);
    for (int programmatic = 1; programmatic >= 0; programmatic--) {
        ZrGraph g;
        ZT_CHECK(zr_graph_build_steps(t.drv, &t.l.rec, 3, programmatic, NULL, 0, &g, &err) == CUDA_SUCCESS);
        const FakeState *st = fake_state();
        ZT_CHECKF(g.n_nodes == 12 && g.steps == 3 && st->n_nodes == 12 && g.programmatic == programmatic,
                  "%zu nodes, %d steps, %d in the double", g.n_nodes, g.steps, st->n_nodes);
        for (int i = 0; i < 12 && i < st->n_nodes; i++) {
            const FakeNode *nd = &st->nodes[i];
            ZT_CHECKF(nd->grid[0] == (unsigned)(i % 4) + 1, "node %d: grid %u", i, nd->grid[0]);
            ZT_CHECKF(nd->n_deps == (i ? 1u : 0u) && nd->dep == i - 1, "node %d: dep %d", i, nd->dep);
            const unsigned char port = programmatic ? CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC : 0;
            ZT_CHECKF(!i || nd->edge.from_port == port, "node %d: port %d", i, nd->edge.from_port);
        }
        zr_graph_destroy(t.drv, &g);
    }
    ZrGraph g;
    ZT_CHECK(zr_graph_build_steps(t.drv, &t.l.rec, 0, true, NULL, 0, &g, &err) != CUDA_SUCCESS);
    ZT_CHECK(strstr(err.msg, "0 steps") != NULL && g.graph == NULL);
    toy_close(&t);
}

ZT_TEST(failed_programmatic_edges_destroy_the_partial_graph_and_name_the_call) {
    next_device = hopper;
    next_device.add_deps_result = CUDA_ERROR_INVALID_VALUE;
    Toy t;
    CASE_OPEN(&t);
    next_device = hopper;
    ZrError err = {0};
    float s = 1;
    int n = 4;
    zr_launcher_record_begin(&t.l);
    for (int i = 0; i < 3; i++) ZT_CHECK(ZR_LAUNCH(&t.l, &t.scale, ZR_DIM1(1), ZR_DIM1(1), 0, &err, &t.d_logits, &s, &n) == 0);
    zr_launcher_record_end(&t.l);
    ZrGraph g;
    ZT_CHECK(zr_graph_build_pdl(t.drv, &t.l.rec, true, NULL, 0, &g, &err) == CUDA_ERROR_INVALID_VALUE);
    ZT_CHECKF(strstr(err.msg, "cuGraphAddDependencies (2 programmatic edges)"), "%s", err.msg);
    ZT_CHECK(fake_state()->graphs_destroyed == 1 && g.graph == NULL && !g.programmatic);
    toy_close(&t);
}

ZT_TEST(programmatic_build_without_the_entry_point_is_refused) {
    next_device = hopper;
    next_device.add_dependencies = false;
    Toy t;
    CASE_OPEN(&t);
    next_device = hopper;
    ZrError err = {0};
    float s = 1;
    int n = 4;
    zr_launcher_record_begin(&t.l);
    ZT_CHECK(ZR_LAUNCH(&t.l, &t.scale, ZR_DIM1(1), ZR_DIM1(1), 0, &err, &t.d_logits, &s, &n) == 0);
    zr_launcher_record_end(&t.l);
    ZT_CHECK(!zr_graph_pdl_supported(&t.cuda));
    ZrGraph g;
    ZT_CHECK(zr_graph_build_pdl(t.drv, &t.l.rec, true, NULL, 0, &g, &err) == CUDA_ERROR_NOT_SUPPORTED);
    ZT_CHECK(fake_state()->graphs_created == 0);
    toy_close(&t);
}

int main(void) { return zt_run(); }
