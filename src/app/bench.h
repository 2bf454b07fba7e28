/* zrun bench: the pieces behind the command (bench.c): statistics and the logits hash
 * (bench_stats.c), the device line and the CPU's read bandwidth (bench_sys.c), and the report
 * in its four formats (bench_report.c). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "err.h"
#include "sampler.h"

/* ---- statistics (bench_stats.c) ---- */
typedef struct ZrBenchStats {
    double median, sd, mean, min, max; /* sd: sample standard deviation (n - 1); 0 for one sample */
} ZrBenchStats;
ZrBenchStats zr_bench_stats(const double *v, int n);
/* FNV-1a, 64 bit, of n bytes: the hash printed for a test's final logits, so runs compare. */
uint64_t zr_bench_fnv1a64(const void *p, size_t n);
/* Index of the largest value; the lowest index on a tie. */
int zr_bench_argmax(const float *v, int n);

/* ---- the sampling of the tg tests (bench_sampling.c) ---- */
/* zrun bench --sampling: "greedy" (temperature 0), "default" (zr_sampler_defaults) or the run's
 * sampling flags in one argument ("--top-k 0 --top-p 0.95": --temp, --top-k, --top-p, --min-p,
 * --repeat-penalty, --repeat-last-n, --presence-penalty, --frequency-penalty, -s/--seed), each
 * checked as `zrun -m` checks it, over zrun's defaults; seed 0 unless given. *sp gets them
 * (repeat_last_n -1: the whole context). ZR_E_USAGE names the flag and what was found. */
int zr_bench_sampling_parse(const char *arg, ZrSamplerParams *sp, ZrError *err);

/* ---- the machine (bench_sys.c) ---- */
typedef struct ZrBenchDevice {
    char backend[8];       /* "cuda" or "cpu" */
    char name[256];        /* GPU name, or the CPU's model name */
    char driver[64];       /* GPU: the kernel driver's version ("580.159.04"); CPU: "" */
    int cuda_version;      /* GPU: the driver's CUDA version (13000); CPU: 0 */
    int n_threads;         /* CPU: worker threads; GPU: 0 */
    double read_gbps;      /* measured read bandwidth, 1e9 B/s; 0 = not measured */
    double peak_gbps;      /* GPU: from the memory clock and bus width; 0 = unknown */
    char read_how[160];    /* how read_gbps was measured, for the header line */
} ZrBenchDevice;

/* "model name" of /proc/cpuinfo (else the machine name from uname). */
void zr_bench_cpu_name(char *out, size_t len);
/* CPU read bandwidth: n_threads threads each sum their share of a buffer of `bytes` (64-bit
 * loads, several accumulators), timed together; median over reps after one warm-up pass.
 * ZR_E_NOMEM when the buffer cannot be had. */
int zr_bench_cpu_bwprobe(size_t bytes, int n_threads, int reps, double *gbps, ZrError *err);

/* ---- the report (bench_report.c) ---- */
typedef enum ZrBenchFormat { ZR_BENCH_MD, ZR_BENCH_JSON, ZR_BENCH_CSV, ZR_BENCH_JSONL } ZrBenchFormat;

#define ZR_BENCH_TTFT_TOKENS 5 /* the first prompt's length: "Once upon a time" with BOS in llama 3 */

typedef struct ZrBenchRow {
    const char *model_path;
    char model_type[96];        /* "llama 8B Q4_0" */
    uint64_t model_bytes;       /* all tensor bytes */
    uint64_t n_params;
    uint64_t bytes_per_token;   /* weight bytes read per decoded token */
    const char *mode;           /* "eager", "graph", or "graph-fallback" (asked for, not kept) */
    char test[32];              /* "pp512" or "tg128", "tg128 @ d4096" after a context (-d) */
    const char *sampling;       /* tg: "greedy", "default" or the sampling flags given (--sampling); pp: "-" */
    int n_prompt, n_gen;        /* pp: n_prompt > 0, n_gen 0; tg: n_prompt 0 (BOS only), n_gen > 0 */
    int n_depth;                /* context tokens in the cache before the test (-d; 0: none) */
    int n_ctx, reps, warmup;
    const char *type_k, *type_v; /* the KV cache: "f16" or "f32" (-ctk/-ctv; zrun keeps them equal) */
    double load_ms;             /* the file to a ready backend (model load + backend open, the upload), ms */
    double ttft_ms;             /* then the first prompt (ZR_BENCH_TTFT_TOKENS ids, BOS first) to its first token, ms */
    const double *samples_ts;   /* [reps] tokens/s of each timed repetition */
    ZrBenchStats ts;            /* over samples_ts */
    double gbps;                /* tg: bytes_per_token x median t/s / 1e9; < 0 = not applicable */
    double bw_pct;              /* gbps / device read_gbps x 100; < 0 = not applicable */
    uint64_t kernels_per_token; /* 0 = not reported by the backend */
    double host_us_per_token;   /* <= 0 = not reported */
    uint64_t host_steps;        /* tg: decode steps of the last repetition sampled on the host from logits copied back */
    double gap_us_min, gap_us_median; /* tg, CUDA: the GPU's idle time between two decode steps (ZrBackendStats); < 0 = not measured */
    double graph_build_ms;      /* <= 0 = no graph built */
    bool pdl;                   /* CUDA decode with programmatic dependent launch (sm_90+, no switch) */
    uint64_t logits_hash;       /* FNV-1a 64 of the final logits of the last repetition */
    bool hash_stable;           /* every repetition ended with the same logits */
} ZrBenchRow;

typedef struct ZrBenchOut {
    FILE *f;
    ZrBenchFormat format;
    bool md_kv_columns; /* md: type_k and type_v columns (as llama-bench, only when not its default f16;
                         * json, jsonl and csv always carry both fields) */
    int n_rows;
} ZrBenchOut;

/* "md", "json", "csv", "jsonl" -> format; -1 for anything else. */
int zr_bench_format_parse(const char *s);
/* md: the device line and the table head; json: "["; csv: the header row; jsonl: nothing. */
void zr_bench_out_begin(ZrBenchOut *o, const ZrBenchDevice *dev);
/* One result: a table row, an array element, a CSV line or a JSON line. */
void zr_bench_out_row(ZrBenchOut *o, const ZrBenchDevice *dev, const ZrBenchRow *r);
/* json: "]". Flushes. */
void zr_bench_out_end(ZrBenchOut *o);
/* The device line of the md header (also printed to stderr for the other formats). */
void zr_bench_device_line(const ZrBenchDevice *dev, char *out, size_t len);
