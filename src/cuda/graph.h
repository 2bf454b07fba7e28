/* The decode graph (DESIGN.md "The decode graph"): built from the launcher's records with
 * cuGraphCreate + one cuGraphAddKernelNode per record (the previous node its dependency) +
 * cuGraphInstantiateWithFlags, replayed with cuGraphLaunch. Stream capture is never used.
 *
 * Programmatic dependent launch (PDL): on compute capability >= 9.0, with a driver that has
 * cuGraphAddDependencies_v2, consecutive kernel nodes are joined by PROGRAMMATIC edges instead
 * of plain ones, so a kernel is launched (and runs its prologue, e.g. a matvec's first weight
 * loads) while the one before it drains; every kernel waits in griddepcontrol.wait
 * (cu/common.cuh zr_grid_wait) before it touches what earlier kernels write, so results are
 * unchanged bit for bit. It is the default wherever it is supported; ZrDecodeOptions.no_pdl
 * (tests comparing both kinds of edge) keeps plain edges. When the programmatic graph cannot be
 * built or instantiated, the same graph is built with plain edges (one line on the log) before
 * eager is considered.
 *
 * The controller (ZrDecodeGraph) wraps the backend's eager decode step and decides, per token:
 *   step 0         write token/pos, run the step eagerly with recording on, then build and
 *                  instantiate the graph (record + build + instantiate = graph build time);
 *   later steps    write token/pos into their device buffers (async, same stream), cuGraphLaunch;
 *   checked steps  the first `verify` replays also run the step eagerly at the same position
 *                  (rewriting the same KV entries, so it is idempotent) and compare the logits
 *                  bit for bit, and the eager pass's launches with the recorded ones; with a
 *                  tail on the device (ZrDecodeIO.adv, ring) the state it advances is copied
 *                  aside before the replay and back before the eager run (so it advances once),
 *                  and the two records (token, status, generator) are compared too;
 *   queued steps   once steady (zr_graph_decode_steady), a loop may queue replays back to back
 *                  without the controller's copies and syncs (zr_graph_decode_issue); the same
 *                  faults fire and a failed launch falls back the same way;
 *   several steps  when the step has a tail (io->ring), a second graph holds the recorded launches
 *                  opt.multi_steps times in one chain (zr_graph_build_steps): one launch runs that
 *                  many steps, each step's first kernel waiting for the tail before it (the same
 *                  programmatic edges as inside a step), so the GPU pays a graph launch's own gap
 *                  once for them and a kernel-to-kernel gap between them
 *                  (zr_graph_decode_issue_n); the checked replays stay one step each;
 *   fallback       eager for the rest of the run, with ONE line on the log naming the cause and
 *                  the CUDA error: any graph API error, a replay mismatch, or profiling on;
 *   poisoned       a sticky error (700, 719, 999, ...) or 901 on the graph path: the graph is
 *                  dropped, the backend's recover hook recreates the context, re-uploads the
 *                  weights and re-prefills positions [0, pos); the step is re-run eagerly and the
 *                  run goes on eagerly. The caller's token history is untouched: no token lost
 *                  or repeated. Where the driver keeps the error for the whole process (580),
 *                  the step fails with ZR_E_CONTEXT_LOST and the caller goes on in a new process
 *                  (src/resume.h).
 *   rebuild        the graph bakes in every pointer of the recorded launches. The backend
 *                  bumps io->epoch whenever any of them may move (buffers reallocated, module
 *                  reloaded, context recreated); the controller then drops the graph and
 *                  records + builds it again on the next step (stats.rebuilds). Position and
 *                  sequence length live in device memory, so nothing else invalidates it.
 *
 * Contract for the eager step (the kernels side): all of its work is zr_launch calls on
 * io->launcher (no syncs, allocations, host copies or cuBLASLt), it reads the token and the
 * position from io->d_token / io->d_pos, writes io->d_logits, launches the same kernels with
 * the same parameters and configuration at every position (grids sized for n_ctx, not pos), and
 * is deterministic (no float atomics), so replay == eager bit for bit. Put the position right
 * after the token (d_pos == d_token + 4) and both are written with one copy.
 *
 * Wiring, in the backend (cuda_backend.c):
 *     ZrDecodeIO io = {&cuda, &launcher, f->d_tok, f->d_pos, f->logits, n_vocab, 1};
 *     ZrDecodeHooks hooks = {backend, decode_step_launches, recreate_and_reprefill};
 *     ZrDecodeOptions o = {.graph = opt->graph, .verify = opt->verify_graph, .profile = ..., ...};
 *     zr_fault_parse(opt->fault, &o.fault, err);
 *     zr_graph_decode_init(&g, &io, &hooks, &o, err);
 *     ... forward(n == 1): zr_graph_decode_step(&g, token, pos, logits, err);
 *     ... stats: zr_graph_decode_stats(&g, &st);  destroy: zr_graph_decode_free(&g). */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cuda/driver.h"
#include "cuda/fault.h"
#include "cuda/launch.h"
#include "cuda/module.h"

/* ---- the graph itself ---- */
typedef struct ZrGraph {
    CUgraph graph;
    CUgraphExec exec;
    size_t n_nodes;
    int steps;         /* decode steps one launch runs (the recording repeated) */
    bool programmatic; /* consecutive nodes are joined by programmatic edges (PDL) */
} ZrGraph;

/* cuGraphCreate + one kernel node per record, each depending on the previous one. Returns the
 * CUresult (CUDA_SUCCESS or the failing call's) and sets err; on failure *g is empty. `fault`
 * may be NULL; graph-build fails the middle node. */
CUresult zr_graph_build(const ZrCuDriver *d, const ZrRecording *rec, ZrFault *fault, int step, ZrGraph *g,
                        ZrError *err);
/* The same with programmatic = true: the nodes are added without dependencies, then node i-1 ->
 * node i is added for every i as a programmatic edge (one cuGraphAddDependencies_v2 call).
 * Needs zr_graph_pdl_supported; programmatic = false is zr_graph_build. */
CUresult zr_graph_build_pdl(const ZrCuDriver *d, const ZrRecording *rec, bool programmatic, ZrFault *fault,
                            int step, ZrGraph *g, ZrError *err);
/* The recording repeated `steps` times in one graph (node i is record i % n), every node
 * depending on the one before it (programmatic edges when asked for, between the steps too): one
 * launch runs `steps` decode steps, for a step whose tail advances its own inputs on the device.
 * steps 1 is zr_graph_build_pdl. */
CUresult zr_graph_build_steps(const ZrCuDriver *d, const ZrRecording *rec, int steps, bool programmatic,
                              ZrFault *fault, int step, ZrGraph *g, ZrError *err);
/* Programmatic edges are possible: compute capability >= 9.0 and cuGraphAddDependencies_v2. */
bool zr_graph_pdl_supported(const ZrCuda *c);
CUresult zr_graph_instantiate(const ZrCuDriver *d, ZrGraph *g, ZrFault *fault, int step, ZrError *err);
CUresult zr_graph_launch(const ZrCuDriver *d, const ZrGraph *g, CUstream s, ZrError *err);
/* cuGraphDebugDotPrint (verbose) of the built graph; with programmatic edges, every edge
 * statement of the file gets style="dashed" (they are all programmatic: zr_graph_dot_dash_edges). */
CUresult zr_graph_dot(const ZrCuDriver *d, const ZrGraph *g, const char *path, ZrError *err);
void zr_graph_destroy(const ZrCuDriver *d, ZrGraph *g);

/* ---- the decode-graph controller ---- */
typedef struct ZrDecodeIO {
    ZrCuda *cuda;          /* context, stream, module (the sticky fault's kernel is looked up there) */
    ZrLauncher *launcher;  /* the eager step launches through it; its stream is cuda->stream */
    CUdeviceptr d_token;   /* int32 [1]: the step's input token */
    CUdeviceptr d_pos;     /* int32 [1]: its position */
    CUdeviceptr d_logits;  /* f32 [n_vocab]: the step's output */
    CUdeviceptr d_pick;    /* i32 [2]: the step's greedy pick (token, first NaN id), when it makes one */
    int n_vocab;
    uint64_t epoch;        /* bumped by the backend when anything the launches point at may move */
    /* The step's tail on the device (cuda/sample.h), when it has one: it advances state in place
     * (tok/pos, the sampler's state) and writes a record into a ring slot. A checked replay
     * copies adv[] into d_snap before the replay and back before the eager re-run, so the state
     * advances once; and compares the replay's record with the eager one (record_cmp bytes,
     * the timestamps after them left out). n_adv 0 / ring 0: nothing of the kind. */
    CUdeviceptr adv[2];    /* device state the tail advances */
    size_t adv_bytes[2];
    int n_adv;
    CUdeviceptr d_snap;    /* >= the sum of adv_bytes */
    CUdeviceptr ring;      /* record slots [n_slots] of slot_bytes; the step at pos writes slot pos % n_slots */
    int n_slots;
    size_t slot_bytes, record_cmp;
    bool ring_host;        /* the ring is mapped pinned host memory (same address on both sides): read with memcpy after a sync */
} ZrDecodeIO;

typedef struct ZrDecodeHooks {
    void *ctx;
    /* One decode step's launches through io->launcher (see the contract above). */
    int (*eager_step)(void *ctx, ZrError *err);
    /* The context is poisoned: recreate it (zr_cuda_reset), re-upload the weights, reallocate
     * the buffers, re-prefill positions [0, n_past) from the backend's token history, update
     * *io (new pointers, new launcher stream, epoch bumped). NULL: poisoning is fatal. */
    int (*recover)(void *ctx, int n_past, ZrError *err);
} ZrDecodeHooks;

typedef struct ZrDecodeOptions {
    bool graph;           /* decode through the graph (else eager, silently) */
    int verify;           /* replayed steps checked against eager (DESIGN: at least the first) */
    bool profile;         /* per-kernel timing: forces eager (one line says so when graph was asked) */
    bool log_launches;    /* print the launches of the recording pass (of the first step when eager) */
    const char *dot_path; /* write the built graph here (cuGraphDebugDotPrint) */
    ZrFault fault;        /* parsed ZRUN_FAULT (zr_fault_parse) */
    FILE *log;            /* fallback line, launch log; NULL = stderr */
    int max_recoveries;   /* context recreations allowed per run; 0 = default (2) */
    bool no_pdl;          /* plain edges only (tests); else programmatic wherever supported */
    int multi_steps;      /* >= 2: a second graph, the recorded step repeated this many times, is
                           * built beside the one-step graph when the step has a tail (io->ring), for
                           * zr_graph_decode_issue_n; 0 or 1: none */
} ZrDecodeOptions;

typedef enum ZrDecodeMode { ZR_DECODE_EAGER, ZR_DECODE_RECORD, ZR_DECODE_GRAPH } ZrDecodeMode;

typedef struct ZrDecodeStats {
    uint64_t kernels_per_token;  /* launches in one decode step (from the recording, or counted) */
    double record_ms, build_ms, instantiate_ms;
    double graph_build_ms;       /* record + build + instantiate (of the last build, the multi-step graph included) */
    double eager_host_us;        /* mean host time to issue one eager step (token write + launches) */
    double graph_host_us;        /* mean host time to issue one replay (token write + cuGraphLaunch) */
    uint64_t eager_steps, graph_steps, checked_steps, builds, rebuilds, recoveries;
    bool graph_active;           /* the next step replays (or records) a graph */
    bool pdl;                    /* the graph replayed has programmatic edges (PDL) */
    int multi_steps;             /* steps of the multi-step graph built last (0: none) */
    uint64_t multi_launches;     /* launches of it (each ran multi_steps steps) */
    bool context_lost;           /* a poisoned context could not be recreated: decoding cannot go on */
    char fallback[512];          /* why the graph was given up; "" when it was not */
} ZrDecodeStats;

typedef struct ZrDecodeGraph {
    ZrDecodeIO *io;
    ZrDecodeHooks hooks;
    ZrDecodeOptions opt;
    ZrDecodeMode mode;
    ZrGraph graph;
    ZrGraph multi;         /* the recorded step repeated opt.multi_steps times (no exec: none) */
    ZrRecording rec;       /* the recording the graph was built from */
    uint64_t built_epoch;
    int checks_left;
    int32_t *staging;      /* pinned host [4]: token, position, then the pick read back (NULL: none pinned) */
    float *replay_logits;  /* host [2 n_vocab]: a checked replay's logits, the eager ones when the caller has none */
    int replay_cap;
    ZrKernel trap;         /* zr_fault_trap, for the sticky fault */
    bool have_trap;
    int step;              /* decode steps done */
    bool logged;           /* --log-launches printed its one recording */
    bool pdl_off;          /* plain edges for the rest of the run: asked for, or a programmatic build failed */
    double eager_us_sum, graph_us_sum;
    uint64_t eager_timed, graph_timed;
    ZrDecodeStats stats;
} ZrDecodeGraph;

int zr_graph_decode_init(ZrDecodeGraph *g, ZrDecodeIO *io, const ZrDecodeHooks *hooks, const ZrDecodeOptions *o,
                         ZrError *err);
/* One decode step of `token` at `pos`; copies the step's logits into logits[n_vocab] (host).
 * Falls back / recovers as described above; returns an error only when decoding cannot go on:
 * ZR_E_CONTEXT_LOST ("the CUDA context was lost (CUDA_ERROR_...): ...") when the context is
 * poisoned and could not be recreated in this process (only a new process can go on). */
int zr_graph_decode_step(ZrDecodeGraph *g, int32_t token, int pos, float *logits, ZrError *err);
/* The same step, copying back only what is asked for: logits[n_vocab] when logits is not NULL,
 * io->d_pick's two values into pick[2] when pick is not NULL (the greedy pick: 8 bytes instead
 * of the logits). A checked replay still compares the logits, in buffers of its own. */
int zr_graph_decode_step_out(ZrDecodeGraph *g, int32_t token, int pos, float *logits, int32_t *pick, ZrError *err);
/* For a loop that queues steps without waiting (the backend's free-running decode): whether the
 * next step needs nothing of the controller but launches (eager for good, or a built graph whose
 * checks are done, with nothing moved since): then zr_graph_decode_issue may run it. */
bool zr_graph_decode_steady(const ZrDecodeGraph *g);
/* Queues one step (a replay, or the eager launches) reading the token and position already in
 * the device buffers, with no copy and no sync; the faults of ZRUN_FAULT fire as in a step. A
 * graph launch that fails falls back to eager (one line) and the step runs eagerly. Returns an
 * error only when the step could not be queued; *bad is then set when the context is (or must
 * be treated as) poisoned: zr_graph_decode_recover. */
int zr_graph_decode_issue(ZrDecodeGraph *g, CUresult *bad, ZrError *err);
/* The steps one zr_graph_decode_issue_n may queue now: the multi-step graph's when it is built
 * and the controller steady, else 1. */
int zr_graph_decode_batch(const ZrDecodeGraph *g);
/* zr_graph_decode_issue for n consecutive steps: n 1, or zr_graph_decode_batch's n (one launch
 * of the multi-step graph; each step's tail advances the inputs of the next on the device). The
 * faults due at any of the n steps fire; a failed launch falls back and the n steps run eagerly. */
int zr_graph_decode_issue_n(ZrDecodeGraph *g, int n, CUresult *bad, ZrError *err);
/* The context is poisoned (bad): drops the graph, recreates the context through the recover hook
 * with positions [0, n_past) re-prefilled, and goes on eagerly; the cause is err's message.
 * ZR_E_CONTEXT_LOST when that is impossible, as for a step. */
int zr_graph_decode_recover(ZrDecodeGraph *g, CUresult bad, int n_past, ZrError *err);
void zr_graph_decode_stats(const ZrDecodeGraph *g, ZrDecodeStats *out);
void zr_graph_decode_free(ZrDecodeGraph *g);
