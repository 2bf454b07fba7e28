/* The compute backends behind one interface: the CPU reference (the oracle and the no-GPU
 * path) and CUDA. A backend owns its KV cache for n_ctx positions and the token history it has
 * been fed (so the CUDA backend can rebuild its state after a poisoned context).
 *
 * A backend is configured only by ZrBackendOptions: it never reads the environment. The
 * commands (src/app) resolve flags and variables into the options, and choose the backend
 * (src/app/backend_open.h: the device choice, the CPU fallback, the default context). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "model.h"

typedef struct ZrBackendStats {
    uint64_t kernels_per_token;    /* CUDA: launches in one decode step */
    double graph_build_ms;         /* record + build + instantiate */
    double host_us_per_token;      /* host time to issue one decode step */
    bool graph_active;             /* decode steps currently replay a graph */
    bool pdl;                      /* decode uses programmatic dependent launch (graph edges or eager launches) */
} ZrBackendStats;

/* A greedy pick (ZrBackend.decode_greedy). */
typedef struct ZrGreedy {
    int32_t token;        /* the first id of the largest logit, NaN counting as -inf (zr_sampler_argmax) */
    int32_t nonfinite_at; /* the first id whose logit is NaN or +-inf, or -1 (decode_greedy then fails) */
} ZrGreedy;

/* A device's measured read bandwidth (ZrBackend.read_bandwidth), and what the device is. */
typedef struct ZrBandwidth {
    char device[256];  /* "NVIDIA H100 80GB HBM3" */
    char driver[64];   /* the kernel driver's version, "580.159.04" */
    int cuda_version;  /* the driver's CUDA version, 13000 = 13.0 */
    double gbps;       /* read bandwidth, 1e9 B/s; 0 when bytes was 0 (only named) */
    double peak_gbps;  /* nominal, from the memory clock and bus width; 0 = unknown */
    char how[160];     /* how gbps was measured, for a report's header line */
} ZrBandwidth;

typedef struct ZrBackend ZrBackend;
struct ZrBackend {
    const char *name; /* "cpu" or "cuda" */
    int n_ctx;
    /* Feeds tokens[0..n) at positions pos..pos+n-1 (pos must equal the number of tokens fed so
     * far), extending the KV cache. Writes logits: n x n_vocab when all_logits, else only the
     * last position's n_vocab. n == 1 is a decode step; n > 1 a prefill. A logit written that
     * is NaN or +-inf fails the call with ZR_E_FORMAT naming its position (logits_check.h). */
    int (*forward)(ZrBackend *be, const int32_t *tokens, int n, int pos, float *logits,
                   bool all_logits, ZrError *err);
    /* A decode step (token at pos, as forward with n == 1) followed by the greedy pick over the
     * logits of ids [0, n_cand) (1 <= n_cand <= n_vocab; the ids past it are padding rows):
     * zr_sampler_sample at temperature 0 without a penalty. CUDA picks on the device, so the
     * logits stay there: logits (n_vocab) gets them only when not NULL. A candidate logit that
     * is NaN or +-inf fails the call as forward does (out->nonfinite_at says which). A backend
     * may leave this NULL (then forward + zr_sampler_argmax does the same). */
    int (*decode_greedy)(ZrBackend *be, int32_t token, int pos, int n_cand, float *logits, ZrGreedy *out,
                         ZrError *err);
    /* Forget positions >= pos (pos 0 = empty cache). */
    void (*truncate)(ZrBackend *be, int pos);
    void (*stats)(const ZrBackend *be, ZrBackendStats *out);
    /* Measures the read bandwidth of the memory the weights live in, over a buffer of bytes
     * (>= 1 MiB, or 0: only name the device), median of reps >= 1 timed passes; allocates and
     * frees the buffer around it. NULL when the backend has no probe of its own (the CPU: its
     * weights are in host memory, which the caller can measure itself). */
    int (*read_bandwidth)(ZrBackend *be, size_t bytes, int reps, ZrBandwidth *out, ZrError *err);
    void (*destroy)(ZrBackend *be);
};

typedef struct ZrBackendOptions {
    int n_ctx;            /* KV cache positions; the commands always give it (zr_backend_default_ctx) */
    int n_threads;        /* CPU; 0 = all cores */
    bool graph;           /* CUDA: decode through the recorded graph (the command resolved
                           * --graph/--no-graph/CUDA_GRAPH_ENABLE); false = eager */
    int verify_graph;     /* CUDA: tokens whose replay is checked against eager (default 1) */
    bool profile;         /* CUDA: per-kernel timing (forces eager) */
    bool log_launches;    /* CUDA: print the recorded launches */
    const char *graph_dot;/* CUDA: write the built graph here */
    const char *fault;    /* CUDA, tests only: a graph fault to inject (src/cuda/fault.h; the
                           * value of ZRUN_FAULT, which zrun reads at its edge); NULL = none */
    bool quiet;
    /* Called now and then while the backend loads or uploads the weights, with the bytes done so
     * far and the total (done == total once, at the end); NULL = nobody listens. The commands
     * draw a progress line from it (src/app/progress.h). The CPU backend reads the weights where
     * the file is mapped, so it has nothing to report. */
    void (*progress)(void *ctx, uint64_t done, uint64_t total);
    void *progress_ctx;
    /* Polled between the layers and chunks of a forward call: when it returns true the call
     * stops with ZR_E_INTERRUPTED (Ctrl-C during a long prefill); the tokens of the chunks
     * finished before stay in the cache. NULL = never stops. */
    bool (*stop)(void *ctx);
    void *stop_ctx;
} ZrBackendOptions;

ZrBackend *zr_cpu_backend_create(const ZrModel *m, const ZrBackendOptions *o, ZrError *err);
/* Fails with ZR_E_NODEV when no GPU is usable (no libcuda, no device, no kernels built in). */
ZrBackend *zr_cuda_backend_create(const ZrModel *m, const ZrBackendOptions *o, ZrError *err);
