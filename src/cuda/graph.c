#include "cuda/graph.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/graph_dot.h"
#include "zr_clock.h"

/* ---- the graph ---- */

bool zr_graph_pdl_supported(const ZrCuda *c) {
    return c->props.cc_major >= 9 && c->drv->cuGraphAddDependencies != NULL;
}

static void build_failed(const ZrCuDriver *d, ZrGraph *g, CUgraphNode *nodes) {
    d->cuGraphDestroy(g->graph);
    free(nodes);
    memset(g, 0, sizeof *g);
}

CUresult zr_graph_build(const ZrCuDriver *d, const ZrRecording *rec, ZrFault *fault, int step, ZrGraph *g,
                        ZrError *err) {
    return zr_graph_build_pdl(d, rec, false, fault, step, g, err);
}

CUresult zr_graph_build_pdl(const ZrCuDriver *d, const ZrRecording *rec, bool programmatic, ZrFault *fault,
                            int step, ZrGraph *g, ZrError *err) {
    return zr_graph_build_steps(d, rec, 1, programmatic, fault, step, g, err);
}

CUresult zr_graph_build_steps(const ZrCuDriver *d, const ZrRecording *rec, int steps, bool programmatic,
                              ZrFault *fault, int step, ZrGraph *g, ZrError *err) {
    memset(g, 0, sizeof *g);
    if (steps < 1) {
        zr_err(err, ZR_E_INTERNAL, "graph build: %d steps asked for (at least 1)", steps);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (rec->n == 0) {
        zr_err(err, ZR_E_INTERNAL, "graph build: the recording pass launched no kernels");
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (programmatic && !d->cuGraphAddDependencies) {
        zr_err(err, ZR_E_INTERNAL, "graph build: programmatic edges need cuGraphAddDependencies (driver >= 12.3)");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    const size_t n = rec->n * (size_t)steps; /* node i is record i % rec->n of step i / rec->n */
    /* [n] the nodes in launch order (programmatic: joined once all are added) */
    CUgraphNode *nodes = programmatic ? calloc(n, sizeof *nodes) : NULL;
    if (programmatic && !nodes) {
        zr_err(err, ZR_E_NOMEM, "graph build: no memory for %zu node handles", n);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult r = d->cuGraphCreate(&g->graph, 0);
    if (r != CUDA_SUCCESS) {
        free(nodes);
        memset(g, 0, sizeof *g);
        zr_driver_err(d, err, r, "cuGraphCreate");
        return r;
    }
    size_t fail_at = zr_fault_fires(fault, ZR_FAULT_GRAPH_BUILD, step) ? n / 2 : (size_t)-1;
    CUgraphNode prev = NULL;
    for (size_t i = 0; i < n; i++) {
        const size_t ri = i % rec->n;
        const ZrLaunchRecord *x = &rec->recs[ri];
        void *params[ZR_KERNEL_MAX_PARAMS];
        /* the driver copies the values when the node is added */
        for (int j = 0; j < x->kernel->n_params; j++) params[j] = (void *)zr_recording_param(rec, ri, j);
        CUDA_KERNEL_NODE_PARAMS p = {
            .func = x->fn,
            .gridDimX = x->grid.x, .gridDimY = x->grid.y, .gridDimZ = x->grid.z,
            .blockDimX = x->block.x, .blockDimY = x->block.y, .blockDimZ = x->block.z,
            .sharedMemBytes = x->shared_bytes,
            .kernelParams = params,
        };
        CUgraphNode node = NULL;
        const bool dep = prev && !programmatic;
        r = i == fail_at ? CUDA_ERROR_INVALID_VALUE
                         : d->cuGraphAddKernelNode(&node, g->graph, dep ? &prev : NULL, dep ? 1 : 0, &p);
        if (r != CUDA_SUCCESS) {
            zr_driver_err(d, err, r, "cuGraphAddKernelNode (node %zu of %zu, %s%s)", i, n, x->kernel->name,
                          i == fail_at ? "; injected by ZRUN_FAULT=graph-build" : "");
            build_failed(d, g, nodes);
            return r;
        }
        if (x->cluster > 1) { /* recorded by a launcher that had the entry point (zr_launcher_set_clusters) */
            const CUlaunchAttributeValue v = {.clusterDim = {x->cluster, 1, 1}};
            r = d->cuGraphKernelNodeSetAttribute
                    ? d->cuGraphKernelNodeSetAttribute(node, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, &v)
                    : CUDA_ERROR_NOT_SUPPORTED;
            if (r != CUDA_SUCCESS) {
                zr_driver_err(d, err, r, "cuGraphKernelNodeSetAttribute (node %zu of %zu, %s: clusters of %u)", i, n,
                              x->kernel->name, x->cluster);
                build_failed(d, g, nodes);
                return r;
            }
        }
        if (nodes) nodes[i] = node;
        prev = node;
    }
    if (programmatic && n > 1) {
        /* edge i: node i -> node i+1; nodes[0..n-1) and nodes[1..n) are the from / to arrays
         * (between two steps too: the next step's first kernel waits for the tail before it
         * reads the token and position the tail wrote) */
        size_t n_edges = n - 1;
        CUgraphEdgeData *edges = calloc(n_edges, sizeof *edges);
        if (!edges) {
            build_failed(d, g, nodes);
            zr_err(err, ZR_E_NOMEM, "graph build: no memory for %zu edges", n_edges);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        for (size_t i = 0; i < n_edges; i++) {
            edges[i].from_port = CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC;
            edges[i].type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
        }
        r = d->cuGraphAddDependencies(g->graph, nodes, nodes + 1, edges, n_edges);
        free(edges);
        if (r != CUDA_SUCCESS) {
            zr_driver_err(d, err, r, "cuGraphAddDependencies (%zu programmatic edges)", n_edges);
            build_failed(d, g, nodes);
            return r;
        }
    }
    free(nodes);
    g->n_nodes = n;
    g->steps = steps;
    g->programmatic = programmatic;
    return CUDA_SUCCESS;
}

CUresult zr_graph_instantiate(const ZrCuDriver *d, ZrGraph *g, ZrFault *fault, int step, ZrError *err) {
    bool inject = zr_fault_fires(fault, ZR_FAULT_GRAPH_INSTANTIATE, step);
    CUresult r = inject ? CUDA_ERROR_INVALID_VALUE : d->cuGraphInstantiateWithFlags(&g->exec, g->graph, 0);
    if (r != CUDA_SUCCESS) {
        g->exec = NULL;
        zr_driver_err(d, err, r, "cuGraphInstantiateWithFlags (%zu nodes%s%s)", g->n_nodes,
                      g->programmatic ? ", programmatic edges" : "",
                      inject ? "; injected by ZRUN_FAULT=graph-instantiate" : "");
    }
    return r;
}

CUresult zr_graph_launch(const ZrCuDriver *d, const ZrGraph *g, CUstream s, ZrError *err) {
    CUresult r = d->cuGraphLaunch(g->exec, s);
    if (r != CUDA_SUCCESS) zr_driver_err(d, err, r, "cuGraphLaunch (%zu nodes)", g->n_nodes);
    return r;
}

CUresult zr_graph_dot(const ZrCuDriver *d, const ZrGraph *g, const char *path, ZrError *err) {
    CUresult r = d->cuGraphDebugDotPrint(g->graph, path, CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE);
    if (r != CUDA_SUCCESS) zr_driver_err(d, err, r, "cuGraphDebugDotPrint(%s)", path);
    else if (g->programmatic && zr_graph_dot_dash_edges(path, err)) r = CUDA_ERROR_INVALID_VALUE;
    return r;
}

void zr_graph_destroy(const ZrCuDriver *d, ZrGraph *g) {
    if (g->exec) d->cuGraphExecDestroy(g->exec);
    if (g->graph) d->cuGraphDestroy(g->graph);
    memset(g, 0, sizeof *g);
}

/* ---- the controller ---- */

static FILE *logf_(const ZrDecodeGraph *g) { return g->opt.log ? g->opt.log : stderr; }

static void drop_graphs(ZrDecodeGraph *g) {
    zr_graph_destroy(g->io->cuda->drv, &g->graph);
    zr_graph_destroy(g->io->cuda->drv, &g->multi);
}

/* Eager for the rest of the run, with one line naming the cause. */
static void fallback(ZrDecodeGraph *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fallback(ZrDecodeGraph *g, const char *fmt, ...) {
    drop_graphs(g);
    g->mode = ZR_DECODE_EAGER;
    if (g->stats.fallback[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->stats.fallback, sizeof g->stats.fallback, fmt, ap);
    va_end(ap);
    fprintf(logf_(g), "zrun: decode graph off, decoding eagerly from here: %s\n", g->stats.fallback);
    fflush(logf_(g));
}

int zr_graph_decode_init(ZrDecodeGraph *g, ZrDecodeIO *io, const ZrDecodeHooks *hooks, const ZrDecodeOptions *o,
                         ZrError *err) {
    memset(g, 0, sizeof *g);
    if (!hooks->eager_step) return zr_err(err, ZR_E_INTERNAL, "decode graph: no eager step hook");
    g->io = io;
    g->hooks = *hooks;
    g->opt = *o;
    if (g->opt.max_recoveries <= 0) g->opt.max_recoveries = 2;
    if (g->opt.verify < 0) g->opt.verify = 0;
    g->mode = ZR_DECODE_EAGER;
    g->pdl_off = o->no_pdl;
    /* the token/position staging now, not on the first step: cuMemHostAlloc took ~1.5 ms of the
     * first one-token prompt (H100, test_startup); write_inputs allocates it again after a
     * recovery, and steps go without it (pageable copies) if it cannot be had */
    if (io->cuda && io->cuda->drv) {
        ZrError ignored;
        void *p = NULL;
        if (zr_cuda_host_alloc(io->cuda, &p, 4 * sizeof(int32_t), "token/position staging", &ignored) == ZR_OK)
            g->staging = p;
    }
    if (o->graph) {
        if (o->profile)
            fallback(g, "--profile times every kernel launch, which needs eager decode");
        else
            g->mode = ZR_DECODE_RECORD;
    }
    return ZR_OK;
}

void zr_graph_decode_free(ZrDecodeGraph *g) {
    if (g->io && g->io->cuda && g->io->cuda->drv) {
        drop_graphs(g);
        zr_cuda_host_free(g->io->cuda, g->staging);
    }
    zr_recording_free(&g->rec);
    free(g->replay_logits);
    memset(g, 0, sizeof *g);
}

void zr_graph_decode_stats(const ZrDecodeGraph *g, ZrDecodeStats *out) {
    *out = g->stats;
    out->eager_host_us = g->eager_timed ? g->eager_us_sum / (double)g->eager_timed : 0;
    out->graph_host_us = g->graph_timed ? g->graph_us_sum / (double)g->graph_timed : 0;
    out->graph_active = g->mode != ZR_DECODE_EAGER;
    out->pdl = out->graph_active && g->stats.pdl;
}

/* Token id and position into their device buffers, on the stream, before the step. */
static int write_inputs(ZrDecodeGraph *g, int32_t token, int pos, ZrError *err) {
    const ZrDecodeIO *io = g->io;
    /* Pinned staging makes the copy a plain DMA (no driver-side staging of pageable memory).
     * It is safe to overwrite each step: every step ends with a stream sync. */
    if (!g->staging) {
        ZrError ignored;
        void *p = NULL;
        if (zr_cuda_host_alloc(io->cuda, &p, 4 * sizeof(int32_t), "token/position staging", &ignored) == ZR_OK)
            g->staging = p;
    }
    int32_t stack_v[2], *v = g->staging ? g->staging : stack_v;
    v[0] = token;
    v[1] = (int32_t)pos;
    if (io->d_pos == io->d_token + sizeof(int32_t)) return zr_cuda_h2d(io->cuda, io->d_token, v, 2 * sizeof *v, err);
    int rc = zr_cuda_h2d(io->cuda, io->d_token, &v[0], sizeof v[0], err);
    return rc ? rc : zr_cuda_h2d(io->cuda, io->d_pos, &v[1], sizeof v[1], err);
}

static bool poisons(CUresult r) { return r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED || zr_driver_error_is_sticky(r); }

/* Builds and instantiates from g->rec with programmatic or plain edges. */
static CUresult build_once(ZrDecodeGraph *g, int step, bool programmatic, ZrError *err) {
    const ZrCuDriver *d = g->io->cuda->drv;
    double t0 = (zr_clock_ms() * 1e3);
    CUresult r = zr_graph_build_pdl(d, &g->rec, programmatic, &g->opt.fault, step, &g->graph, err);
    if (r != CUDA_SUCCESS) return r;
    double t1 = (zr_clock_ms() * 1e3);
    r = zr_graph_instantiate(d, &g->graph, &g->opt.fault, step, err);
    if (r != CUDA_SUCCESS) {
        zr_graph_destroy(d, &g->graph);
        return r;
    }
    double t2 = (zr_clock_ms() * 1e3);
    g->stats.build_ms = (t1 - t0) / 1e3;
    g->stats.instantiate_ms = (t2 - t1) / 1e3;
    return CUDA_SUCCESS;
}

/* Builds and instantiates from g->rec; on success the next steps replay. Programmatic edges
 * where supported; when they fail (not an injected fault, not a poisoned context), once more
 * with plain edges, and plain for the rest of the run. */
static CUresult build(ZrDecodeGraph *g, int step, ZrError *err) {
    const ZrCuDriver *d = g->io->cuda->drv;
    bool pdl = !g->pdl_off && zr_graph_pdl_supported(g->io->cuda);
    const bool fired = g->opt.fault.fired;
    CUresult r = build_once(g, step, pdl, err);
    if (r != CUDA_SUCCESS && pdl && !poisons(r) && g->opt.fault.fired == fired) {
        g->pdl_off = true;
        fprintf(logf_(g), "zrun: programmatic dependent launch off, the decode graph has plain edges: %s\n", err->msg);
        fflush(logf_(g));
        pdl = false;
        r = build_once(g, step, false, err);
    }
    if (r != CUDA_SUCCESS) return r;
    g->stats.multi_steps = 0;
    const double t_multi = (zr_clock_ms() * 1e3);
    if (g->io->ring && g->opt.multi_steps > 1) {
        /* the same launches repeated: no fault of ZRUN_FAULT is injected here (the one-step
         * graph's build took it); a failure leaves one step per launch */
        ZrError e2 = {0};
        CUresult rm = zr_graph_build_steps(d, &g->rec, g->opt.multi_steps, pdl, NULL, step, &g->multi, &e2);
        if (rm == CUDA_SUCCESS && (rm = zr_graph_instantiate(d, &g->multi, NULL, step, &e2)) != CUDA_SUCCESS)
            zr_graph_destroy(d, &g->multi);
        if (rm != CUDA_SUCCESS && poisons(rm)) {
            zr_graph_destroy(d, &g->graph);
            *err = e2;
            return rm;
        }
        if (rm != CUDA_SUCCESS) {
            fprintf(logf_(g), "zrun: decode graph: one step per launch, no graph of %d steps: %s\n", g->opt.multi_steps,
                    e2.msg);
            fflush(logf_(g));
        } else {
            g->stats.multi_steps = g->opt.multi_steps;
        }
    }
    /* the multi-step graph's build and instantiation are part of the cost too */
    g->stats.graph_build_ms =
        g->stats.record_ms + g->stats.build_ms + g->stats.instantiate_ms + ((zr_clock_ms() * 1e3) - t_multi) / 1e3;
    g->stats.builds++;
    g->stats.pdl = pdl;
    if (g->opt.dot_path) {
        ZrError e2 = {0};
        if (zr_graph_dot(d, &g->graph, g->opt.dot_path, &e2) != CUDA_SUCCESS)
            fprintf(logf_(g), "zrun: --graph-dot: %s\n", e2.msg);
    }
    g->built_epoch = g->io->epoch;
    g->checks_left = g->opt.verify;
    g->mode = ZR_DECODE_GRAPH;
    return CUDA_SUCCESS;
}

/* The tail's state into the snapshot (before a checked replay), or back (before its eager re-run). */
static int snapshot(ZrDecodeGraph *g, bool restore, ZrError *err) {
    const ZrDecodeIO *io = g->io;
    size_t off = 0;
    for (int i = 0; i < io->n_adv; i++) {
        const CUdeviceptr a = io->adv[i], b = io->d_snap + off;
        int rc = zr_cuda_d2d(io->cuda, restore ? a : b, restore ? b : a, io->adv_bytes[i], err);
        if (rc) return rc;
        off += io->adv_bytes[i];
    }
    return ZR_OK;
}

/* The record slot the step at pos writes. */
static CUdeviceptr record_at(const ZrDecodeIO *io, int pos) {
    return io->ring + (CUdeviceptr)((size_t)(pos % io->n_slots) * io->slot_bytes);
}

/* A checked replay: the graph's logits are in d_logits. Runs the step eagerly at the same
 * position (it rewrites the same KV entries) and compares logits bit for bit and the launches
 * with the recorded ones. A difference means fallback; the eager results stand either way. */
static int check_replay(ZrDecodeGraph *g, int step, int pos, float *logits, CUresult *bad, ZrError *err) {
    ZrDecodeIO *io = g->io;
    ZrLauncher *l = io->launcher;
    int n = io->n_vocab;
    if (g->replay_cap < 2 * n) {
        float *p = realloc(g->replay_logits, (size_t)2 * n * sizeof *p);
        if (!p) return zr_err(err, ZR_E_NOMEM, "decode graph: no memory for %d logits", 2 * n);
        g->replay_logits = p;
        g->replay_cap = 2 * n;
    }
    if (!logits) logits = g->replay_logits + n; /* the caller asked for the pick alone */
    /* the records of replay and eager, compared up to record_cmp (<= 64 bytes) */
    uint8_t rec_replay[64] = {0}, rec_eager[64] = {0};
    const size_t rec_n = io->ring && io->record_cmp <= sizeof rec_replay ? io->record_cmp : 0;
    int rc = zr_cuda_d2h(io->cuda, g->replay_logits, io->d_logits, (size_t)n * sizeof(float), err);
    if (!rc && rec_n && !io->ring_host) rc = zr_cuda_d2h(io->cuda, rec_replay, record_at(io, pos), rec_n, err);
    if (!rc) rc = snapshot(g, true, err); /* the eager re-run starts where the replay started */
    if (rc) return rc;
    CUresult r = zr_cuda_sync_result(io->cuda);
    if (r != CUDA_SUCCESS) {
        if (poisons(r)) *bad = r;
        return zr_driver_err(io->cuda->drv, err, r, "decode graph: replay of step %d", step);
    }
    if (rec_n && io->ring_host) memcpy(rec_replay, (const void *)(uintptr_t)record_at(io, pos), rec_n);
    if (zr_fault_fires(&g->opt.fault, ZR_FAULT_REPLAY_MISMATCH, step)) {
        uint32_t w;
        memcpy(&w, &g->replay_logits[n / 2], sizeof w);
        w ^= 1u;
        memcpy(&g->replay_logits[n / 2], &w, sizeof w);
    }
    zr_launcher_record_begin(l);
    rc = g->hooks.eager_step(g->hooks.ctx, err);
    zr_launcher_record_end(l);
    if (!rc) rc = zr_cuda_d2h(io->cuda, logits, io->d_logits, (size_t)n * sizeof(float), err);
    if (!rc && rec_n && !io->ring_host) rc = zr_cuda_d2h(io->cuda, rec_eager, record_at(io, pos), rec_n, err);
    if (!rc && (r = zr_cuda_sync_result(io->cuda)) != CUDA_SUCCESS) {
        if (poisons(r)) *bad = r;
        rc = zr_driver_err(io->cuda->drv, err, r, "decode graph: eager check of step %d", step);
    }
    if (!rc && rec_n && io->ring_host) memcpy(rec_eager, (const void *)(uintptr_t)record_at(io, pos), rec_n);
    if (rc) {
        zr_recording_clear(&l->rec);
        return rc;
    }
    g->stats.checked_steps++;
    char why[400];
    if (zr_recording_compare(&g->rec, &l->rec, why, sizeof why)) {
        fallback(g, "the decode step at position %d launched differently than when it was recorded: %s", pos, why);
    } else {
        int diff = 0, first = -1;
        for (int i = 0; i < n; i++)
            if (memcmp(&g->replay_logits[i], &logits[i], sizeof(float))) {
                if (first < 0) first = i;
                diff++;
            }
        if (!diff && memcmp(rec_replay, rec_eager, rec_n)) {
            int32_t a[2], b[2]; /* token, status */
            memcpy(a, rec_replay, sizeof a);
            memcpy(b, rec_eager, sizeof b);
            fallback(g, "replay mismatch at decode step %d (position %d): the tail's record (token %d, status %d) "
                        "differs from eager's (token %d, status %d)",
                     step, pos, a[0], a[1], b[0], b[1]);
        }
        if (diff)
            fallback(g,
                     "replay mismatch at decode step %d (position %d): %d of %d logits differ from eager, first at "
                     "%d (graph %.9g, eager %.9g)%s",
                     step, pos, diff, n, first, (double)g->replay_logits[first], (double)logits[first],
                     g->opt.fault.kind == ZR_FAULT_REPLAY_MISMATCH ? "; injected by ZRUN_FAULT=replay-mismatch" : "");
    }
    zr_recording_clear(&l->rec);
    return ZR_OK;
}

static int trap(ZrDecodeGraph *g, ZrError *err) {
    ZrDecodeIO *io = g->io;
    if (!g->have_trap) {
        int rc = zr_cuda_kernel(io->cuda, "zr_fault_trap", NULL, 0, &g->trap, err);
        if (rc) return zr_err_wrap(err, "ZRUN_FAULT=sticky");
        g->have_trap = true;
    }
    return zr_launch(io->launcher, &g->trap, ZR_DIM1(1), ZR_DIM1(1), 0, NULL, 0, err);
}

/* Issues one step in the current mode and reads the logits back. *bad is set when the
 * context is (or must be treated as) poisoned. */
static int issue(ZrDecodeGraph *g, int32_t token, int pos, int step, float *logits, int32_t *pick, CUresult *bad,
                 ZrError *err) {
    ZrDecodeIO *io = g->io;
    ZrLauncher *l = io->launcher;
    const ZrCuDriver *d = io->cuda->drv;
    *bad = CUDA_SUCCESS;
    if (g->mode == ZR_DECODE_GRAPH && io->epoch != g->built_epoch) {
        /* something the graph points at moved: record and build again */
        drop_graphs(g);
        g->mode = ZR_DECODE_RECORD;
        g->stats.rebuilds++;
    }
    double t0 = (zr_clock_ms() * 1e3);
    int rc = write_inputs(g, token, pos, err);
    if (rc) return rc;
    bool run_eager = false, timed_eager = g->mode == ZR_DECODE_EAGER;
    if (g->mode == ZR_DECODE_RECORD) {
        zr_launcher_record_begin(l);
        rc = g->hooks.eager_step(g->hooks.ctx, err);
        zr_launcher_record_end(l);
        double t1 = (zr_clock_ms() * 1e3);
        if (rc) {
            zr_recording_clear(&l->rec);
            return rc;
        }
        g->stats.record_ms = (t1 - t0) / 1e3;
        g->stats.kernels_per_token = l->rec.n;
        g->stats.eager_steps++;
        zr_recording_move(&g->rec, &l->rec);
        if (g->opt.log_launches && !g->logged) {
            fprintf(logf_(g), "zrun: recorded decode step (position %d): %zu launches\n", pos, g->rec.n);
            zr_recording_print(&g->rec, logf_(g));
            g->logged = true;
        }
        ZrError e2 = {0};
        CUresult r = build(g, step, &e2);
        if (r != CUDA_SUCCESS) {
            if (poisons(r)) {
                *bad = r;
                *err = e2;
                return e2.code;
            }
            fallback(g, "%s", e2.msg);
        }
    } else if (g->mode == ZR_DECODE_GRAPH) {
        ZrError e2 = {0};
        CUresult r = CUDA_SUCCESS;
        const char *injected = NULL;
        if (zr_fault_fires(&g->opt.fault, ZR_FAULT_GRAPH_LAUNCH, step)) {
            r = CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
            injected = "graph-launch";
        } else if (zr_fault_fires(&g->opt.fault, ZR_FAULT_GRAPH_901, step)) {
            r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
            injected = "graph-901";
        }
        if (g->checks_left > 0 && (rc = snapshot(g, false, err))) return rc;
        if (injected)
            zr_driver_err(d, &e2, r, "cuGraphLaunch (%zu nodes; injected by ZRUN_FAULT=%s)", g->graph.n_nodes, injected);
        else
            r = zr_graph_launch(d, &g->graph, l->stream, &e2);
        double t1 = (zr_clock_ms() * 1e3);
        if (r != CUDA_SUCCESS) {
            if (poisons(r)) {
                *bad = r;
                *err = e2;
                return e2.code;
            }
            fallback(g, "%s", e2.msg);
            run_eager = true; /* the inputs are already in place */
        } else {
            g->stats.graph_steps++;
            if (g->checks_left > 0) {
                g->checks_left--;
                if ((rc = check_replay(g, step, pos, logits, bad, err))) return rc;
            } else {
                g->graph_us_sum += t1 - t0;
                g->graph_timed++;
            }
        }
    } else {
        run_eager = true;
    }
    if (run_eager) {
        uint64_t before = l->n_launches;
        bool log_now = g->opt.log_launches && !g->logged; /* eager runs show their launches too */
        if (log_now) zr_launcher_record_begin(l);
        rc = g->hooks.eager_step(g->hooks.ctx, err);
        double t1 = (zr_clock_ms() * 1e3);
        if (log_now) {
            zr_launcher_record_end(l);
            if (!rc) {
                fprintf(logf_(g), "zrun: recorded decode step (position %d): %zu launches\n", pos, l->rec.n);
                zr_recording_print(&l->rec, logf_(g));
                g->logged = true;
            }
            zr_recording_clear(&l->rec);
            timed_eager = false; /* recording costs host time */
        }
        if (rc) return rc;
        if (timed_eager) { /* token write + launches, as for a replay */
            g->eager_us_sum += t1 - t0;
            g->eager_timed++;
        }
        g->stats.eager_steps++;
        g->stats.kernels_per_token = l->n_launches - before;
    }
    if (zr_fault_fires(&g->opt.fault, ZR_FAULT_STICKY, step) && (rc = trap(g, err))) return rc;
    if (logits && (rc = zr_cuda_d2h(io->cuda, logits, io->d_logits, (size_t)io->n_vocab * sizeof(float), err)))
        return rc;
    int32_t *pick_in = pick && g->staging ? g->staging + 2 : pick; /* pinned: a plain DMA */
    if (pick && (rc = zr_cuda_d2h(io->cuda, pick_in, io->d_pick, 2 * sizeof(int32_t), err))) return rc;
    CUresult r = zr_cuda_sync_result(io->cuda);
    if (r != CUDA_SUCCESS) {
        if (poisons(r)) *bad = r;
        return zr_driver_err(d, err, r, "decode step %d (position %d)", step, pos);
    }
    if (pick_in != pick) memcpy(pick, pick_in, 2 * sizeof(int32_t));
    if (l->profile && (rc = zr_profile_collect(l->profile, err))) return rc;
    return ZR_OK;
}

int zr_graph_decode_step(ZrDecodeGraph *g, int32_t token, int pos, float *logits, ZrError *err) {
    return zr_graph_decode_step_out(g, token, pos, logits, NULL, err);
}

/* The recovery of a poisoned context, once the step's error is in err (cause) and bad. */
static int recover_now(ZrDecodeGraph *g, CUresult bad, int n_past, ZrError *err) {
    const ZrCuDriver *d = g->io->cuda->drv;
    if (!g->hooks.recover || g->stats.recoveries >= (uint64_t)g->opt.max_recoveries) {
        g->stats.context_lost = true;
        zr_err_wrap(err, "the CUDA context was lost (%s): it %s", zr_driver_error_name(d, bad),
                    g->hooks.recover ? "was already recreated" : "cannot be recreated");
        err->code = ZR_E_CONTEXT_LOST;
        return ZR_E_CONTEXT_LOST;
    }
    char cause[sizeof err->msg];
    snprintf(cause, sizeof cause, "%s", err->msg);
    if (g->stats.fallback[0])
        fprintf(logf_(g), "zrun: %s; recreating the CUDA context, re-uploading the weights, re-prefilling %d tokens\n",
                cause, n_past);
    else
        fallback(g, "%s; recreating the CUDA context, re-uploading the weights, re-prefilling %d tokens", cause, n_past);
    drop_graphs(g);
    g->mode = ZR_DECODE_EAGER;
    g->have_trap = false;
    g->staging = NULL; /* it belonged to the old context */
    zr_recording_clear(&g->io->launcher->rec);
    g->io->launcher->recording = false;
    g->stats.recoveries++;
    if (g->hooks.recover(g->hooks.ctx, n_past, err)) {
        /* whatever stopped the recovery, this process has no usable context: a new one can
         * go on (cmd_run continues the run in a new process) */
        g->stats.context_lost = true;
        zr_err_wrap(err, "the CUDA context was lost (%s): recovering from %s", zr_driver_error_name(d, bad), cause);
        err->code = ZR_E_CONTEXT_LOST;
        return ZR_E_CONTEXT_LOST;
    }
    return ZR_OK;
}

int zr_graph_decode_recover(ZrDecodeGraph *g, CUresult bad, int n_past, ZrError *err) {
    return recover_now(g, bad, n_past, err);
}

int zr_graph_decode_step_out(ZrDecodeGraph *g, int32_t token, int pos, float *logits, int32_t *pick, ZrError *err) {
    int step = g->step;
    CUresult bad = CUDA_SUCCESS;
    int rc = issue(g, token, pos, step, logits, pick, &bad, err);
    if (rc && bad == CUDA_SUCCESS) {
        /* an error that did not come with a result: is the context still usable? */
        CUresult r = zr_cuda_sync_result(g->io->cuda);
        if (!zr_driver_error_is_sticky(r)) return rc;
        bad = r;
    }
    while (bad != CUDA_SUCCESS) {
        if ((rc = recover_now(g, bad, pos, err))) return rc;
        rc = issue(g, token, pos, step, logits, pick, &bad, err);
        if (rc && bad == CUDA_SUCCESS) return rc;
    }
    g->step++;
    return ZR_OK;
}

bool zr_graph_decode_steady(const ZrDecodeGraph *g) {
    if (g->opt.profile || (g->opt.log_launches && !g->logged)) return false;
    if (g->mode == ZR_DECODE_EAGER) return true;
    return g->mode == ZR_DECODE_GRAPH && g->checks_left == 0 && g->io->epoch == g->built_epoch;
}

int zr_graph_decode_batch(const ZrDecodeGraph *g) {
    return zr_graph_decode_steady(g) && g->mode == ZR_DECODE_GRAPH && g->multi.exec ? g->multi.steps : 1;
}

int zr_graph_decode_issue(ZrDecodeGraph *g, CUresult *bad, ZrError *err) { return zr_graph_decode_issue_n(g, 1, bad, err); }

int zr_graph_decode_issue_n(ZrDecodeGraph *g, int n, CUresult *bad, ZrError *err) {
    ZrDecodeIO *io = g->io;
    ZrLauncher *l = io->launcher;
    const ZrCuDriver *d = io->cuda->drv;
    const int step = g->step, last = step + n - 1; /* a fault due at any of the n steps fires */
    *bad = CUDA_SUCCESS;
    if (!zr_graph_decode_steady(g))
        return zr_err(err, ZR_E_INTERNAL, "decode graph: step %d queued while the controller is not steady", step);
    if (n != 1 && n != zr_graph_decode_batch(g))
        return zr_err(err, ZR_E_INTERNAL, "decode graph: %d steps queued in one launch (1 or %d expected)", n,
                      zr_graph_decode_batch(g));
    const double t0 = (zr_clock_ms() * 1e3);
    bool eager = g->mode == ZR_DECODE_EAGER;
    if (!eager) {
        const ZrGraph *graph = n > 1 ? &g->multi : &g->graph;
        ZrError e2 = {0};
        CUresult r = CUDA_SUCCESS;
        const char *injected = NULL;
        if (zr_fault_fires(&g->opt.fault, ZR_FAULT_GRAPH_LAUNCH, last)) {
            r = CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
            injected = "graph-launch";
        } else if (zr_fault_fires(&g->opt.fault, ZR_FAULT_GRAPH_901, last)) {
            r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
            injected = "graph-901";
        }
        if (injected)
            zr_driver_err(d, &e2, r, "cuGraphLaunch (%zu nodes; injected by ZRUN_FAULT=%s)", graph->n_nodes, injected);
        else
            r = zr_graph_launch(d, graph, l->stream, &e2);
        if (r != CUDA_SUCCESS) {
            if (poisons(r)) {
                *bad = r;
                *err = e2;
                return e2.code;
            }
            fallback(g, "%s", e2.msg);
            eager = true;
        } else {
            g->graph_us_sum += (zr_clock_ms() * 1e3) - t0; /* per step: one launch issues n */
            g->graph_timed += (uint64_t)n;
            g->stats.graph_steps += (uint64_t)n;
            if (n > 1) g->stats.multi_launches++;
        }
    }
    if (eager) {
        for (int i = 0; i < n; i++) {
            const uint64_t before = l->n_launches;
            const double t1 = (zr_clock_ms() * 1e3);
            int rc = g->hooks.eager_step(g->hooks.ctx, err);
            if (rc) {
                CUresult r = zr_cuda_sync_result(io->cuda);
                if (zr_driver_error_is_sticky(r)) *bad = r;
                return rc;
            }
            g->eager_us_sum += (zr_clock_ms() * 1e3) - t1;
            g->eager_timed++;
            g->stats.eager_steps++;
            g->stats.kernels_per_token = l->n_launches - before;
        }
    }
    if (zr_fault_fires(&g->opt.fault, ZR_FAULT_STICKY, last)) {
        int rc = trap(g, err);
        if (rc) return rc;
    }
    g->step += n;
    return ZR_OK;
}
