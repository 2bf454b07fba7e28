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
#include "sampler.h"

typedef struct ZrBackendStats {
    uint64_t kernels_per_token;    /* CUDA: launches in one decode step */
    double graph_build_ms;         /* record + build + instantiate */
    double host_us_per_token;      /* host time to issue one decode step */
    uint64_t host_steps;           /* decode_run steps picked on the host from logits copied back */
    /* CUDA: the GPU's idle time between two queued decode steps, from the device's own clock
     * (%globaltimer: the step's first kernel starts, the previous step's tail ends), over the
     * pairs of the free-running loop so far; gap_samples 0: none measured */
    double gap_us_min, gap_us_median, gap_us_mean;
    uint64_t gap_samples;
    int graph_steps_per_launch;    /* CUDA: decode steps one graph launch ran (several in the free-running
                                    * loop: cuda_backend.c ZR_GRAPH_STEPS); 0: no replay yet */
    bool graph_active;             /* decode steps currently replay a graph */
    int graph_rebuilds;            /* CUDA: times the decode graph was recorded again (a pointer moved, the
                                    * attention changed kernels at a position: cuda/attn.h) */
    bool pdl;                      /* decode uses programmatic dependent launch (graph edges or eager launches) */
    /* CUDA: cuBLASLt's GEMM plans so far (the start-up's warm-up and the prefills'): made, asking
     * the heuristic, taken from the plan cache (ZrBackendOptions.plan_cache) */
    int gemm_plans, gemm_heuristics, gemm_plans_cached;
} ZrBackendStats;

/* A run of decode steps (ZrBackend.decode_run): each step feeds one token and picks the next
 * with the caller's sampling, then hands it over; the caller decides after each whether another
 * step follows. It is the run's decode loop (src/app/run.c) and the bench's (src/app/bench.c).
 *
 * Exactness: the tokens handed over are those a loop of forward + zr_sampler_sample on the host
 * would pick (the padding ids [n_cand, n_vocab) and the banned ids masked with -inf first): the
 * host sampler is the reference, and the backend keeps it in the state of the tokens handed over
 * (each one accepted before on_token sees it; the generator as the pick left it), whether it
 * picked on the host or on a device. A step computed past the one whose token on_token refused
 * is never shown: the cache then holds exactly the tokens fed through that step. */
typedef struct ZrDecodeLoop {
    /* in */
    const ZrSamplerParams *sp; /* the sampling (zr_sampler_is_greedy: the argmax) */
    ZrSampler *host;           /* the caller's sampler, created with *sp, in the state after the
                                * tokens so far (prompt and picks accepted): kept in sync */
    int n_cand;                /* ids [0, n_cand) may be picked (1..n_vocab); past it: padding rows */
    const int32_t *ban;        /* [n_ban] ids never picked (--ignore-eos: the end-of-generation ids) */
    int n_ban;
    int32_t token;             /* the first step's token, fed at pos */
    int pos;                   /* == the tokens in the cache */
    int max_steps;             /* >= 1; steps at most (on_token still decides after each) */
    /* Called after each step with the token it picked (already accepted by *host); returns
     * true for another step (which feeds this token), false to stop here. */
    bool (*on_token)(void *ctx, int32_t token);
    void *ctx;
    float *logits;             /* [n_vocab] or NULL: the last step's logits, on return */
    bool host_pick;            /* pick on the host from logits copied back every step (bench
                                * --argmax host); else the backend's own way */
    /* out */
    int steps;                 /* steps done: tokens fed (pos + steps are in the cache) and handed over */
    uint64_t host_steps;       /* of them, picked on the host from logits copied back */
} ZrDecodeLoop;

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
    /* Decode steps until loop->on_token says stop or max_steps are done (ZrDecodeLoop). A logit
     * that is NaN or +-inf among the candidates fails the call as forward does; loop->steps then
     * counts the steps before it. Any backend may point it at zr_decode_run_host. */
    int (*decode_run)(ZrBackend *be, ZrDecodeLoop *loop, ZrError *err);
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

/* The CUDA driver and the device's context, opened on a thread of their own (the slowest part of
 * a start-up, about 0.2 s, and it needs no model): a command starts it before it parses the model
 * and hands it to zr_cuda_backend_create through ZrBackendOptions.cuda_early. */
typedef struct ZrCudaEarly ZrCudaEarly;
/* NULL when no thread can be started (the backend then opens them itself). */
ZrCudaEarly *zr_cuda_early_start(void);
/* Joins and closes one that no backend took over; NULL is fine. */
void zr_cuda_early_drop(ZrCudaEarly *e);

/* ZrBackendOptions.first_rows besides a prompt's rows (1..) */
#define ZR_FIRST_ROWS_ALL 0
#define ZR_FIRST_ROWS_LATER (-1)

/* The KV cache's element type (-ctk/-ctv). F32 keeps the attention's inputs as computed; F16, the
 * commands' default as llama.cpp's, halves the cache's memory and the bytes a decode step's
 * attention reads: each K and V value is rounded to the nearest half when it is stored (the CPU
 * reference rounds the same values the same way), and every read sees the rounded value, the
 * current position's included. The zero value is F32, so an options struct left zero is exact. */
typedef enum ZrKvType { ZR_KV_F32 = 0, ZR_KV_F16 = 1 } ZrKvType;

typedef struct ZrBackendOptions {
    int n_ctx;            /* KV cache positions; the commands always give it (zr_backend_default_ctx) */
    ZrKvType kv_type;     /* the K and V caches' element type (the commands: -ctk/-ctv, default F16) */
    int n_threads;        /* CPU; 0 = all cores */
    bool graph;           /* CUDA: decode through the recorded graph (the command resolved
                           * --graph/--no-graph/CUDA_GRAPH_ENABLE); false = eager */
    int verify_graph;     /* CUDA: tokens whose replay is checked against eager (default 1) */
    int graph_steps;      /* CUDA: decode steps one graph launch runs in the free-running loop, 1..8;
                           * 0 = the backend's choice (tests compare the counts) */
    int attn_group_pos;   /* CUDA, tests: the decode position from which the attention serves groups of
                           * query heads a block (cuda/attn.h); 0 = the backend's */
    bool profile;         /* CUDA: per-kernel timing (forces eager) */
    bool log_launches;    /* CUDA: print the recorded launches */
    const char *graph_dot;/* CUDA: write the built graph here */
    const char *timeline; /* CUDA, kernels built with meson -Dtimeline=true: at the end, write each block's
                           * stamps (its grid wait, its exit, the products' phases) here as CSV
                           * (cuda/timeline.h; zrun-cuda-timing -T); other kernels: refused at create */
    const char *fault;    /* CUDA, tests only: a graph fault to inject (src/cuda/fault.h; the
                           * value of ZRUN_FAULT, which zrun reads at its edge); NULL = none */
    bool quiet;
    const char *plan_cache; /* CUDA: the cuBLASLt plan cache file (cuda/lt_cache.h): read at load so
                           * that no GEMM shape it holds asks cuBLASLt's heuristic, written when one did;
                           * NULL = none (the commands' default: $XDG_CACHE_HOME/zrun/cublaslt-plans.bin) */
    bool all_logits;      /* CUDA: forward() will be asked for every row's logits (zrun eval): the
                           * start-up warms the output's GEMMs too (cuda/warm.h); others' first such
                           * call plans them then */
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
    /* CUDA: the driver and context opened since zr_cuda_early_start, or NULL (opened at create).
     * zr_cuda_backend_create takes it over, whether it succeeds or not (the CPU backend drops it);
     * its failure (no driver, no device) is the backend's. */
    ZrCudaEarly *cuda_early;
    /* CUDA: the rows of the first prompt the command will give (it knows them before the load:
     * zrun -p), so the load waits only for the cuBLASLt set-up that prompt takes and the rest goes
     * on beside it (cuda/warm.h); ZR_FIRST_ROWS_ALL (0): wait for all of it (bench, eval, tests);
     * ZR_FIRST_ROWS_LATER: no prompt yet (the chat), so none. */
    int first_rows;
} ZrBackendOptions;

/* decode_run as forward + zr_sampler_sample on the host (the reference loop; the CPU backend's,
 * and any backend's with loop->host_pick): n_vocab the model's output rows. */
int zr_decode_run_host(ZrBackend *be, int n_vocab, ZrDecodeLoop *loop, ZrError *err);
/* Its pieces, for a backend's own loop: the rules on a loop (ZR_E_INTERNAL naming the field), and
 * the host's pick of one step from its logits[n_vocab] (masked and sampled in place, accepted). */
int zr_decode_run_check(const ZrBackend *be, int n_vocab, const ZrDecodeLoop *loop, ZrError *err);
int32_t zr_decode_pick_host(const ZrDecodeLoop *loop, float *logits, int n_vocab);

ZrBackend *zr_cpu_backend_create(const ZrModel *m, const ZrBackendOptions *o, ZrError *err);
/* Fails with ZR_E_NODEV when no GPU is usable (no libcuda, no device, no kernels built in). */
ZrBackend *zr_cuda_backend_create(const ZrModel *m, const ZrBackendOptions *o, ZrError *err);
