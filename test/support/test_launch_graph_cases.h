/* Decode-graph behaviours, shared by the CPU test (driver double) and the GPU test (real
 * kernels): the includer defines `static int case_open(Toy *t)` returning 0, or 77 to skip. */
#pragma once
#include <stdlib.h>
#include <string.h>

#include "test_launch_toy.h"
#include "zt.h"

#define CASE_STEPS 64
#define CASE_VOCAB 200

static int case_open(Toy *t);

#define CASE_OPEN(t)                                      \
    do {                                                  \
        int rc_ = case_open(t);                           \
        if (rc_ == 77) {                                  \
            zt_skip("no GPU or no kernels built in");     \
            return;                                       \
        }                                                 \
        ZT_CHECK(rc_ == 0);                               \
    } while (0)

typedef struct CaseRun {
    float *logits; /* [CASE_STEPS][CASE_VOCAB] */
    ZrDecodeStats stats;
    char log[8192];
    int rc;
    ZrError err;
    int recover_calls;
    bool pdl_supported; /* zr_graph_pdl_supported on the toy's device */
} CaseRun;

/* Programmatic edges are expected in a graph run wherever they are supported (there is no
 * switch; the cases here never set ZrDecodeOptions.no_pdl). */
static inline bool case_pdl_expected(const CaseRun *r) { return r->pdl_supported; }

/* Opens a toy, runs it with the options (log captured), closes it. */
static void case_run(const ZrDecodeOptions *o0, bool pos_by_value, int move_at, CaseRun *out, int *skip) {
    memset(out, 0, sizeof *out);
    *skip = 0;
    Toy t;
    int rc = case_open(&t);
    if (rc) {
        *skip = rc == 77;
        out->rc = rc;
        return;
    }
    t.pos_by_value = pos_by_value;
    out->logits = calloc((size_t)CASE_STEPS * CASE_VOCAB, sizeof(float));
    char path[4200];
    static int n_logs;
    snprintf(path, sizeof path, "%s/graph-log-%d.txt", zt_tmpdir(), n_logs++);
    FILE *log = fopen(path, "w+");
    ZrDecodeOptions o = *o0;
    o.log = log;
    out->rc = toy_run(&t, &o, CASE_STEPS, out->logits, move_at, &out->stats, &out->err);
    out->recover_calls = t.recover_calls;
    out->pdl_supported = zr_graph_pdl_supported(&t.cuda);
    fflush(log);
    rewind(log);
    size_t n = fread(out->log, 1, sizeof out->log - 1, log);
    out->log[n] = 0;
    fclose(log);
    toy_close(&t);
}

static bool same_logits(const CaseRun *a, const CaseRun *b) {
    return memcmp(a->logits, b->logits, (size_t)CASE_STEPS * CASE_VOCAB * sizeof(float)) == 0;
}

static int count_lines(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++) n++;
    return n;
}

#define CASE_RUN(o, pbv, move_at, out)                       \
    do {                                                     \
        int skip_;                                           \
        case_run((o), (pbv), (move_at), (out), &skip_);      \
        if (skip_) {                                         \
            zt_skip("no GPU or no kernels built in");        \
            return;                                          \
        }                                                    \
        ZT_CHECKF((out)->rc == 0, "%s", (out)->err.msg);     \
    } while (0)

/* CASES_ONLY_STICKY: only the sticky case (on a GPU it may poison the whole process);
 * CASES_NO_STICKY: everything else; CASES_STICKY_MUST_RECOVER: recovery must succeed. */
#ifndef CASES_ONLY_STICKY
ZT_TEST(graph_replay_equals_eager_bit_for_bit_over_64_tokens) {
    CaseRun eager, graph;
    ZrDecodeOptions oe = {0}, og = {.graph = true, .verify = 1};
    CASE_RUN(&oe, false, -1, &eager);
    CASE_RUN(&og, false, -1, &graph);
    ZT_CHECK(same_logits(&eager, &graph));
    ZT_CHECK(graph.stats.builds == 1 && graph.stats.rebuilds == 0);
    ZT_CHECK(graph.stats.graph_steps == CASE_STEPS - 1);
    ZT_CHECK(graph.stats.checked_steps == 1);
    ZT_CHECK(graph.stats.kernels_per_token == 4 && eager.stats.kernels_per_token == 4);
    ZT_CHECK(graph.stats.graph_active && !eager.stats.graph_active);
    ZT_CHECKF(graph.stats.pdl == case_pdl_expected(&graph) && !eager.stats.pdl, "pdl %d, expected %d",
              graph.stats.pdl, case_pdl_expected(&graph));
    ZT_CHECK(graph.stats.graph_build_ms > 0);
    ZT_CHECK(graph.stats.graph_host_us > 0 && eager.stats.eager_host_us > 0);
    ZT_CHECKF(graph.log[0] == 0 && eager.log[0] == 0, "unexpected log: %s%s", graph.log, eager.log);
    fprintf(stderr, "  kernels/token %llu, %s edges, graph build %.3f ms (record %.3f, build %.3f, instantiate %.3f), host us/token eager %.2f graph %.2f\n",
            (unsigned long long)graph.stats.kernels_per_token, graph.stats.pdl ? "programmatic" : "plain",
            graph.stats.graph_build_ms, graph.stats.record_ms,
            graph.stats.build_ms, graph.stats.instantiate_ms, eager.stats.eager_host_us, graph.stats.graph_host_us);
    free(eager.logits);
    free(graph.logits);
}

/* Every injected fault: the same logits as pure eager, one fallback line naming the CUDA error. */
static void check_fault(const char *spec, const char *cuda_name, bool recreates) {
    CaseRun eager, f;
    ZrDecodeOptions oe = {0}, of = {.graph = true, .verify = 1};
    ZrError err = {0};
    ZT_CHECK(zr_fault_parse(spec, &of.fault, &err) == 0);
    CASE_RUN(&oe, false, -1, &eager);
    CASE_RUN(&of, false, -1, &f);
    ZT_CHECKF(same_logits(&eager, &f), "%s: logits differ from eager", spec);
    ZT_CHECKF(count_lines(f.log, "zrun: decode graph off, decoding eagerly from here: ") == 1, "%s: log: %s", spec,
              f.log);
    ZT_CHECKF(strstr(f.log, cuda_name), "%s: log does not name %s: %s", spec, cuda_name, f.log);
    ZT_CHECKF(!f.stats.graph_active && f.stats.fallback[0], "%s", spec);
    ZT_CHECKF(f.recover_calls == (recreates ? 1 : 0), "%s: %d recoveries", spec, f.recover_calls);
    ZT_CHECK(f.stats.recoveries == (uint64_t)f.recover_calls);
    free(eager.logits);
    free(f.logits);
}

ZT_TEST(fault_graph_build_falls_back_to_eager) { check_fault("graph-build", "CUDA_ERROR_INVALID_VALUE", false); }
ZT_TEST(fault_graph_instantiate_falls_back_to_eager) {
    check_fault("graph-instantiate", "CUDA_ERROR_INVALID_VALUE", false);
}
ZT_TEST(fault_graph_launch_falls_back_to_eager) {
    check_fault("graph-launch", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", false);
}
ZT_TEST(fault_graph_launch_late_falls_back_mid_run) {
    check_fault("graph-launch:40", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", false);
}
ZT_TEST(fault_graph_901_recreates_the_context_and_falls_back) {
    check_fault("graph-901:7", "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", true);
}
ZT_TEST(fault_replay_mismatch_falls_back_to_eager) { check_fault("replay-mismatch", "replay mismatch", false); }

ZT_TEST(profiling_forces_eager_with_one_line) {
    CaseRun eager, p;
    ZrDecodeOptions oe = {0}, op = {.graph = true, .verify = 1, .profile = true};
    CASE_RUN(&oe, false, -1, &eager);
    CASE_RUN(&op, false, -1, &p);
    ZT_CHECK(same_logits(&eager, &p));
    ZT_CHECK(p.stats.builds == 0 && p.stats.graph_steps == 0);
    ZT_CHECKF(count_lines(p.log, "--profile") == 1, "%s", p.log);
    free(eager.logits);
    free(p.logits);
}

ZT_TEST(moved_buffers_make_the_graph_rebuild) {
    CaseRun eager, g;
    ZrDecodeOptions oe = {0}, og = {.graph = true, .verify = 2};
    CASE_RUN(&oe, false, 30, &eager);
    CASE_RUN(&og, false, 30, &g);
    ZT_CHECK(same_logits(&eager, &g));
    ZT_CHECK(g.stats.builds == 2 && g.stats.rebuilds == 1);
    ZT_CHECK(g.stats.checked_steps == 4); /* the checks start again for the new graph */
    ZT_CHECK(g.stats.graph_active && g.log[0] == 0);
    free(eager.logits);
    free(g.logits);
}

ZT_TEST(position_passed_by_value_is_caught_by_the_replay_check) {
    CaseRun eager, g;
    ZrDecodeOptions oe = {0}, og = {.graph = true, .verify = 1};
    CASE_RUN(&oe, false, -1, &eager);
    CASE_RUN(&og, true, -1, &g);
    ZT_CHECK(same_logits(&eager, &g)); /* the eager re-run's results stand */
    ZT_CHECKF(strstr(g.log, "launched differently") && strstr(g.log, "zr_selftest_attend_pv"), "%s", g.log);
    ZT_CHECK(!g.stats.graph_active);
    free(eager.logits);
    free(g.logits);
}

ZT_TEST(verify_graph_checks_n_replays) {
    CaseRun g;
    ZrDecodeOptions og = {.graph = true, .verify = 5};
    CASE_RUN(&og, false, -1, &g);
    ZT_CHECK(g.stats.checked_steps == 5);
    ZrDecodeOptions o0 = {.graph = true, .verify = 0};
    CaseRun g0;
    CASE_RUN(&o0, false, -1, &g0);
    ZT_CHECK(g0.stats.checked_steps == 0);
    ZT_CHECK(same_logits(&g, &g0));
    free(g.logits);
    free(g0.logits);
}

ZT_TEST(log_launches_prints_the_recorded_step_and_dot_is_written) {
    CaseRun g;
    char dot[4200];
    snprintf(dot, sizeof dot, "%s/graph.dot", zt_tmpdir());
    remove(dot);
    ZrDecodeOptions og = {.graph = true, .verify = 1, .log_launches = true, .dot_path = dot};
    CASE_RUN(&og, false, -1, &g);
    ZT_CHECKF(strstr(g.log, "4 launches") && strstr(g.log, "launch    0 zr_selftest_embed") &&
                  strstr(g.log, "launch    3 zr_selftest_scale"),
              "%s", g.log);
    ZT_CHECK(count_lines(g.log, "\nlaunch ") == 4);
    char *text = zt_read_file(dot, NULL);
    ZT_CHECKF(text && strstr(text, "digraph"), "no dot file at %s", dot);
    /* edge statements ("a" -> "b" ...;) are dashed exactly when the edges are programmatic */
    int n_edges = 0, n_dashed = 0;
    for (char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        size_t n = strchr(line, '\n') ? (size_t)(strchr(line, '\n') - line) : strlen(line);
        char *arrow = strstr(line, "\" -> \"");
        if (line[0] != '"' || !arrow || arrow >= line + n) continue;
        n_edges++;
        char *dash = strstr(line, "style=\"dashed\"");
        n_dashed += dash && dash < line + n;
    }
    ZT_CHECKF(n_edges >= 3 && n_dashed == (g.stats.pdl ? n_edges : 0), "%d edges, %d dashed, pdl %d", n_edges,
              n_dashed, g.stats.pdl);
    free(text);
    free(g.logits);
    CaseRun e; /* eager decoding shows its first step's launches too, once */
    ZrDecodeOptions oe = {.log_launches = true};
    CASE_RUN(&oe, false, -1, &e);
    ZT_CHECKF(count_lines(e.log, "launches\n") == 1 && count_lines(e.log, "\nlaunch ") == 4, "%s", e.log);
    free(e.logits);
}
#endif /* CASES_ONLY_STICKY */

#ifndef CASES_NO_STICKY
/* A real sticky error (the trap kernel on a GPU). Where the driver lets a process create a new
 * context, the run recovers and equals eager; where it keeps the error for the whole process
 * (driver 580), the step fails with ZR_E_CONTEXT_LOST (zrun then goes on in a new process:
 * test/gpu/test_graph_models.c), after identical logits up to the fault. */
static void check_sticky(const char *spec, int fault_step) {
    CaseRun eager, f;
    ZrDecodeOptions oe = {0}, of = {.graph = true, .verify = 1};
    ZrError err = {0};
    ZT_CHECK(zr_fault_parse(spec, &of.fault, &err) == 0);
    CASE_RUN(&oe, false, -1, &eager);
    int skip;
    case_run(&of, false, -1, &f, &skip);
    ZT_CHECK(!skip);
    ZT_CHECK(memcmp(eager.logits, f.logits, (size_t)fault_step * CASE_VOCAB * sizeof(float)) == 0);
    ZT_CHECKF(count_lines(f.log, "zrun: decode graph off, decoding eagerly from here: ") == 1, "%s", f.log);
    ZT_CHECKF(strstr(f.log, "CUDA_ERROR_LAUNCH_FAILED"), "%s", f.log);
    ZT_CHECK(f.recover_calls == 1);
    if (f.rc == 0) {
        ZT_CHECK(same_logits(&eager, &f));
        fprintf(stderr, "  %s: the context was recreated and the run went on eagerly\n", spec);
    } else {
        ZT_CHECKF(f.err.code == ZR_E_CONTEXT_LOST && strstr(f.err.msg, "only a new process can use the GPU again"),
                  "%s", f.err.msg);
        fprintf(stderr, "  %s: %s\n", spec, f.err.msg);
    }
#ifdef CASES_STICKY_MUST_RECOVER
    ZT_CHECKF(f.rc == 0, "%s", f.err.msg);
#endif
    free(eager.logits);
    free(f.logits);
}

ZT_TEST(fault_sticky_recreates_the_context_and_reprefills) { check_sticky("sticky:20", 20); }
#ifdef CASES_STICKY_MUST_RECOVER
ZT_TEST(fault_sticky_at_the_recording_step_recovers_too) { check_sticky("sticky:0", 0); }
#endif
#endif /* CASES_NO_STICKY */
