/* zrun bench: llama-bench's tests on zrun's backends.
 *   zrun bench -m FILE [-m FILE2 ...] [-p 512] [-n 128] [-r 5] [--graph on|off|both]
 *              [-o md|json|csv|jsonl] [--device auto|cpu|cuda] [-t N] [--warmup N] ...
 *
 * pp<P>: one forward of P tokens (BOS, then fixed pseudo-random ids) on an empty cache; the
 *        logits of the last position come back to the host. Prefill never replays the graph,
 *        so with --graph both it runs once, in the eager pass.
 * tg<N>: BOS alone (untimed: the one-token prompt, and the first token sampled from its logits),
 *        then N timed decode steps through the backend's decode loop (ZrBackend.decode_run: the
 *        loop `zrun -m` runs), each ending with the pick of the next token with --sampling's
 *        settings: greedy (the default), default (zrun's default chain) or the run's sampling
 *        flags ("--top-k 0 --top-p 0.95"), seed 0 unless --seed is among them. The backend picks
 *        its own way (the GPU: on the device where it can; then only the logits of the final
 *        step come back, for the hash); with --argmax host every step's logits come back and
 *        the host samples them. Every repetition starts from a fresh sampler, so the same
 *        tokens are decoded each time and the hash is stable.
 * -d D (llama-bench's --n-depth): each test runs after a context of D tokens (BOS, then the
 *        same pseudo-random ids), prefilled untimed on the emptied cache before every
 *        repetition: pp<P> @ d<D> prefills P more tokens at positions D.., tg<N> @ d<D> picks the
 *        first token from the context's last logits and decodes N steps at positions D.. (the
 *        attention then reads D cached positions a step; GB/s and % BW count the weights only).
 * -ctk/-ctv T (llama-bench's): the KV cache's type, f16 (the default, as llama-bench's) or f32, for
 *        every test; every record names it (type_k, type_v), the md table only when not f16.
 * Each test runs --warmup untimed repetitions, then -r timed ones, each on an empty cache;
 * t/s is the median over the timed ones, ± their sample standard deviation. The logits hash
 * (FNV-1a 64 of the final logits' bytes) lets runs, modes and machines be compared.
 * Start-up, per backend opened (each row of it): load ms, the model file to a ready backend
 * (parse, bind, open: on the GPU the upload and the prefill warm-up), and TTFT ms, then the first
 * prompt of ZR_BENCH_TTFT_TOKENS ids to its first token (prefill, logits back, greedy pick).
 *
 * The backend is opened as run and eval open it (src/app/backend_open.h: --device, the CPU
 * fallback rule, the default context); every model then runs on the backend the first one got.
 * On that first backend the device's read bandwidth is measured (ZrBackend.read_bandwidth: on
 * the GPU cu/probe.cu's read_bw_probe over >= 1 GiB; for the CPU backend, which has no probe of
 * its own, a threaded read loop over host memory here), so tg rows give GB/s (bytes read per
 * token from the model x t/s) and the share of that bandwidth. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "backend_open.h"
#include "bench.h"
#include "cli.h"
#include "cmd.h"
#include "model.h"
#include "opt.h"
#include "quant.h"
#include "sampler.h"
#include "zr_clock.h"

#define BENCH_MAX_MODELS 64
#define BENCH_MAX_TESTS 16
#define BENCH_MAX_MODES 2
#define BENCH_MAX_NOTES 8
#define GIB ((size_t)1 << 30)

typedef enum GraphSel { GRAPH_OFF, GRAPH_ON, GRAPH_BOTH } GraphSel;

typedef struct BenchArgs {
    const char *models[BENCH_MAX_MODELS]; /* -m, in order */
    int n_models;
    int pp[BENCH_MAX_TESTS], n_pp;        /* -p list; 0 entries are skipped */
    int tg[BENCH_MAX_TESTS], n_tg;        /* -n list */
    int depth[BENCH_MAX_TESTS], n_depth;  /* -d list: context tokens before each test */
    int reps, warmup;
    GraphSel graph;
    ZrBenchFormat format;
    ZrDevice device;
    int n_threads;                        /* 0: all cores */
    int n_ctx;                            /* 0: what the tests need */
    ZrKvType kv_type;                     /* -ctk/-ctv resolved (default f16) */
    int bw_mib;                           /* probe buffer, MiB; 0 = no probe */
    int bw_reps;                          /* 0: 10 on the GPU, 5 on the CPU */
    bool host_argmax;                     /* --argmax host: logits back to the host every decode step */
    ZrSamplerParams sp;                   /* --sampling; repeat_last_n < 0: the context */
    const char *sampling;                 /* its name for the report: greedy, default or the flags */
    bool profile, progress, quiet, help;
    const char *fault;                    /* ZRUN_FAULT's graph fault (the test hook), for every backend */
    const char *plan_cache;               /* resolved: --plan-cache, --no-plan-cache (NULL) or the default */
    char plan_cache_buf[4096];            /* the default's path */
    char notes[BENCH_MAX_NOTES][160];     /* llama-bench options accepted that do not apply */
    int n_notes;
} BenchArgs;

static const char k_bench_usage[] =
    "usage: zrun bench -m FILE [-m FILE ...] [-p 512] [-n 128] [-r 5] [--graph on|off|both]\n"
    "                  [-o md|json|csv|jsonl] [--device auto|cpu|cuda] [-t N] [--warmup N] [-ctk/-ctv f16|f32]\n"
    "                  (see zrun --help)\n";

static int usage_error(ZrError *err, const char *fmt, const char *arg) {
    char msg[512];
    snprintf(msg, sizeof msg, fmt, arg);
    return zr_err(err, ZR_E_USAGE, "%s", msg);
}

/* "512" or "128,512": each in [0, 1<<20]. */
static int parse_list(const char *opt, const char *arg, int *out, int *n, ZrError *err) {
    *n = 0;
    const char *p = arg;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[32];
        if (len == 0 || len >= sizeof item || *n == BENCH_MAX_TESTS)
            return zr_err(err, ZR_E_USAGE, "%s: expected a token count or a comma-separated list of at most %d, found '%s'",
                          opt, BENCH_MAX_TESTS, arg);
        memcpy(item, p, len);
        item[len] = 0;
        if (zr_cli_int(opt, item, 0, 1 << 20, &out[*n], err)) return err->code;
        (*n)++;
        if (!comma) return ZR_OK;
        p = comma + 1;
    }
}

static int parse_args(int argc, char **argv, const ZrEnv *env, BenchArgs *a, ZrError *err) {
    enum { O_MODEL = 1, O_PP, O_TG, O_DEPTH, O_REPS, O_OUTPUT, O_THREADS, O_CTX, O_GRAPH, O_DEVICE, O_WARMUP, O_BW_MIB,
           O_BW_REPS, O_PROFILE, O_PROGRESS, O_QUIET, O_ARGMAX, O_SAMPLING, O_VERBOSE, O_HELP, O_PLAN_CACHE,
           O_NO_PLAN_CACHE, O_CTK, O_CTV };
    /* llama-bench's spellings; its -ngl, -fa, -mmp, -b, -ub take a value (or a list) */
    static const ZrOpt opts[] = {
        {O_MODEL, "-m|--model", ZR_OPT_VALUE, NULL},
        {O_PP, "-p|--n-prompt", ZR_OPT_VALUE, NULL},
        {O_TG, "-n|--n-gen", ZR_OPT_VALUE, NULL},
        {O_DEPTH, "-d|--n-depth", ZR_OPT_VALUE, NULL},
        {O_REPS, "-r|--repetitions", ZR_OPT_VALUE, NULL},
        {O_OUTPUT, "-o|--output", ZR_OPT_VALUE, NULL},
        {O_THREADS, "-t|--threads", ZR_OPT_VALUE, NULL},
        {O_CTX, "-c|--ctx-size", ZR_OPT_VALUE, NULL},
        {O_CTK, "-ctk|--cache-type-k", ZR_OPT_VALUE, NULL},
        {O_CTV, "-ctv|--cache-type-v", ZR_OPT_VALUE, NULL},
        {O_GRAPH, "--graph", ZR_OPT_VALUE, NULL},
        {O_DEVICE, "--device", ZR_OPT_VALUE, NULL},
        {O_WARMUP, "--warmup", ZR_OPT_VALUE, NULL},
        {O_BW_MIB, "--bw-mib", ZR_OPT_VALUE, NULL},
        {O_BW_REPS, "--bw-reps", ZR_OPT_VALUE, NULL},
        {O_PROFILE, "--profile", ZR_OPT_FLAG, NULL},
        {O_PROGRESS, "--progress", ZR_OPT_FLAG, NULL},
        {O_QUIET, "--quiet", ZR_OPT_FLAG, NULL},
        {O_PLAN_CACHE, "--plan-cache", ZR_OPT_VALUE, NULL},
        {O_NO_PLAN_CACHE, "--no-plan-cache", ZR_OPT_FLAG, NULL},
        {O_ARGMAX, "--argmax", ZR_OPT_VALUE, NULL},
        {O_SAMPLING, "--sampling", ZR_OPT_VALUE, NULL},
        {O_VERBOSE, "-v|--verbose", ZR_OPT_FLAG, NULL},
        {O_HELP, "-h|--help", ZR_OPT_FLAG, NULL},
        {ZR_COMPAT_NGL, "-ngl|--n-gpu-layers|--gpu-layers", ZR_OPT_VALUE, NULL},
        {ZR_COMPAT_FA, "-fa|--flash-attn", ZR_OPT_VALUE, NULL},
        {ZR_COMPAT_MMAP, "-mmp|--mmap", ZR_OPT_VALUE, NULL},
        {ZR_COMPAT_BATCH, "-b|--batch-size", ZR_OPT_VALUE, NULL},
        {ZR_COMPAT_UBATCH, "-ub|--ubatch-size", ZR_OPT_VALUE, NULL},
        {0, NULL, 0, NULL},
    };
    *a = (BenchArgs){.pp = {512}, .n_pp = 1, .tg = {128}, .n_tg = 1, .depth = {0}, .n_depth = 1, .reps = 5, .warmup = 1,
                     .graph = env->graph ? GRAPH_ON : GRAPH_OFF, .format = ZR_BENCH_MD, .fault = env->fault,
                     .device = ZR_DEVICE_AUTO, .bw_mib = 1024, .sampling = "greedy"};
    a->sp = zr_sampler_defaults();
    a->sp.temp = 0.0f;
    const char *plan_cache = NULL;
    bool no_plan_cache = false;
    ZrKvFlags kv = {0};
    ZrOptReader rd;
    zr_opt_init(&rd, argc, argv);
    for (;;) {
        const char *v;
        int id = zr_opt_next(&rd, opts, &v, err);
        if (id == ZR_OPT_END) break;
        if (id == ZR_OPT_ERROR) return ZR_E_USAGE;
        if (id == ZR_OPT_ARG) return usage_error(err, "unexpected argument '%s'", v);
        const char *name = zr_opt_label(&rd);
        switch (id) {
        case O_MODEL:
            if (a->n_models == BENCH_MAX_MODELS) return usage_error(err, "-m: at most %s models", "64");
            a->models[a->n_models++] = v;
            break;
        case O_PP:
            if (parse_list(name, v, a->pp, &a->n_pp, err)) return ZR_E_USAGE;
            break;
        case O_TG:
            if (parse_list(name, v, a->tg, &a->n_tg, err)) return ZR_E_USAGE;
            break;
        case O_DEPTH:
            a->n_depth = 0; /* the list replaces the default 0 */
            if (parse_list(name, v, a->depth, &a->n_depth, err)) return ZR_E_USAGE;
            break;
        case O_REPS:
            if (zr_cli_int(name, v, 1, 100000, &a->reps, err)) return ZR_E_USAGE;
            break;
        case O_OUTPUT: {
            int f = zr_bench_format_parse(v);
            if (f < 0) return zr_err(err, ZR_E_USAGE, "%s: expected md, json, csv or jsonl, found '%s'", name, v);
            a->format = (ZrBenchFormat)f;
            break;
        }
        case O_THREADS:
            if (zr_cli_int(name, v, 0, 4096, &a->n_threads, err)) return ZR_E_USAGE;
            break;
        case O_CTX:
            if (zr_cli_int(name, v, 0, 1 << 24, &a->n_ctx, err)) return ZR_E_USAGE;
            break;
        case O_GRAPH:
            if (!strcmp(v, "on")) a->graph = GRAPH_ON;
            else if (!strcmp(v, "off")) a->graph = GRAPH_OFF;
            else if (!strcmp(v, "both")) a->graph = GRAPH_BOTH;
            else return usage_error(err, "--graph: expected on, off or both, found '%s'", v);
            break;
        case O_DEVICE:
            if (zr_device_parse(name, v, &a->device, err)) return ZR_E_USAGE;
            break;
        case O_CTK:
        case O_CTV:
            if (zr_kv_flag(&kv, id == O_CTV, name, v, err)) return ZR_E_USAGE;
            break;
        case O_ARGMAX:
            if (!strcmp(v, "device")) a->host_argmax = false;
            else if (!strcmp(v, "host")) a->host_argmax = true;
            else return usage_error(err, "--argmax: expected device or host, found '%s'", v);
            break;
        case O_SAMPLING:
            if (zr_bench_sampling_parse(v, &a->sp, err)) return ZR_E_USAGE;
            a->sampling = v;
            break;
        case O_WARMUP:
            if (zr_cli_int(name, v, 0, 100000, &a->warmup, err)) return ZR_E_USAGE;
            break;
        case O_BW_MIB:
            if (zr_cli_int(name, v, 0, 1 << 20, &a->bw_mib, err)) return ZR_E_USAGE;
            break;
        case O_BW_REPS:
            if (zr_cli_int(name, v, 1, 100000, &a->bw_reps, err)) return ZR_E_USAGE;
            break;
        case O_PROFILE: a->profile = true; break;
        case O_PROGRESS: a->progress = true; break;
        case O_QUIET: a->quiet = true; break;
        case O_PLAN_CACHE:
            if (!*v) return usage_error(err, "%s: expected a file name, found ''", name);
            plan_cache = v, no_plan_cache = false; /* the last of the two wins */
            break;
        case O_NO_PLAN_CACHE: no_plan_cache = true, plan_cache = NULL; break;
        case O_VERBOSE: a->progress = true; break; /* llama-bench -v: what happens, as it happens */
        case O_HELP: a->help = true; return ZR_OK;
        default: zr_cli_note_compat(a->notes, &a->n_notes, BENCH_MAX_NOTES, name, v, id); break;
        }
    }
    if (zr_kv_flags_type(&kv, &a->kv_type, err)) return ZR_E_USAGE;
    if (!a->n_models) return usage_error(err, "%s", "no model: -m FILE is required");
    a->plan_cache = zr_backend_plan_cache(plan_cache, no_plan_cache, env->xdg_cache_home, env->home, a->plan_cache_buf,
                                          sizeof a->plan_cache_buf);
    bool any = false;
    for (int i = 0; i < a->n_pp; i++) any |= a->pp[i] > 0;
    for (int i = 0; i < a->n_tg; i++) any |= a->tg[i] > 0;
    if (!any) return usage_error(err, "%s", "-p and -n are all 0: no test to run (give a prompt or a generation length)");
    return ZR_OK;
}

static int default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}

/* The device the first backend opened is on, and its read bandwidth: the backend's own probe,
 * or for a backend without one (the CPU) a read loop over host memory. */
static int setup_device(const BenchArgs *a, ZrBackend *be, ZrBenchDevice *dev, ZrError *err) {
    memset(dev, 0, sizeof *dev);
    snprintf(dev->backend, sizeof dev->backend, "%s", be->name);
    const size_t bytes = (size_t)a->bw_mib << 20;
    if (be->read_bandwidth) {
        ZrBandwidth bw;
        int rc = be->read_bandwidth(be, bytes, a->bw_reps ? a->bw_reps : 10, &bw, err);
        if (rc) return rc;
        snprintf(dev->name, sizeof dev->name, "%s", bw.device);
        snprintf(dev->driver, sizeof dev->driver, "%s", bw.driver);
        dev->cuda_version = bw.cuda_version;
        dev->read_gbps = bw.gbps;
        dev->peak_gbps = bw.peak_gbps;
        snprintf(dev->read_how, sizeof dev->read_how, "%s", bytes ? bw.how : "--bw-mib 0");
        return ZR_OK;
    }
    zr_bench_cpu_name(dev->name, sizeof dev->name);
    dev->n_threads = a->n_threads ? a->n_threads : default_threads();
    if (!bytes) {
        snprintf(dev->read_how, sizeof dev->read_how, "--bw-mib 0");
        return ZR_OK;
    }
    const int reps = a->bw_reps ? a->bw_reps : 5;
    ZrError perr = {0};
    if (zr_bench_cpu_bwprobe(bytes, dev->n_threads, reps, &dev->read_gbps, &perr)) {
        snprintf(dev->read_how, sizeof dev->read_how, "%.140s", perr.msg);
        return ZR_OK;
    }
    snprintf(dev->read_how, sizeof dev->read_how, "read loop over %.2f GiB in %d threads, median of %d",
             (double)bytes / GIB, dev->n_threads, reps);
    return ZR_OK;
}

/* The report's head, once the device is known (at the first backend opened). */
typedef struct BenchDev {
    ZrBenchDevice dev;
    bool known;
} BenchDev;

static int device_known(const BenchArgs *a, ZrBackend *be, BenchDev *d, ZrBenchOut *out, ZrError *err) {
    if (d->known) return ZR_OK;
    if (setup_device(a, be, &d->dev, err)) return err->code;
    d->known = true;
    if (!a->quiet && a->format != ZR_BENCH_MD) {
        char line[768];
        zr_bench_device_line(&d->dev, line, sizeof line);
        fprintf(stderr, "zrun bench: %s\n", line);
    }
    zr_bench_out_begin(out, &d->dev);
    return ZR_OK;
}

/* "llama 8B Q4_0": architecture, parameters, the file type (else the type of most bytes). */
static void model_type(const ZrModel *m, char *out, size_t len, uint64_t *total_bytes) {
    const ZrGguf *g = &m->gguf;
    uint64_t by_type[ZR_TYPE_COUNT] = {0}, total = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        total += g->tensors[i].nbytes;
        if (g->tensors[i].type < ZR_TYPE_COUNT) by_type[g->tensors[i].type] += g->tensors[i].nbytes;
    }
    *total_bytes = total;
    const char *tname = NULL;
    uint32_t ft;
    ZrError e;
    if (zr_gguf_find(g, "general.file_type") && !zr_gguf_get_u32(g, "general.file_type", &ft, &e)) tname = zr_file_type_name(ft);
    if (!tname) {
        uint32_t best = 0;
        for (uint32_t t = 1; t < ZR_TYPE_COUNT; t++)
            if (by_type[t] > by_type[best]) best = t;
        tname = zr_type_name(best);
    }
    char tup[32];
    snprintf(tup, sizeof tup, "%s", tname);
    for (char *c = tup; *c; c++) *c = (char)toupper((unsigned char)*c);
    const double p = (double)m->n_params;
    char size[32];
    if (p >= 1e9) snprintf(size, sizeof size, p >= 1e10 ? "%.0fB" : "%.1fB", p / 1e9);
    else if (p >= 1e6) snprintf(size, sizeof size, "%.0fM", p / 1e6);
    else snprintf(size, sizeof size, "%.0fK", p / 1e3);
    char *dot0 = strstr(size, ".0B"); /* "8.0B" -> "8B" */
    if (dot0) memmove(dot0, dot0 + 2, strlen(dot0 + 2) + 1);
    snprintf(out, len, "%s %s %s", m->hp.arch_name, size, tup);
}

typedef struct TestCtx {
    const BenchArgs *a;
    const ZrBenchDevice *dev;
    ZrBenchOut *out;
    const ZrModel *m;
    ZrBackend *be;
    float *logits;     /* [n_vocab] */
    int32_t *prompt;   /* [max depth + max pp]: BOS, then fixed pseudo-random ids */
    int depth;         /* the test's context (-d) */
    double *samples;   /* [reps] */
    ZrSamplerParams sp;/* --sampling with repeat_last_n resolved */
    uint64_t host_steps; /* of the last tg repetition */
    ZrBenchRow row;    /* the model's fields filled in */
    bool noted_cache;  /* the note on % BW above 100 was printed */
} TestCtx;

static bool keep_going(void *ctx, int32_t token) {
    (void)ctx;
    (void)token;
    return true;
}

/* One repetition; *secs of the timed part. */
static int run_once(TestCtx *t, bool pp, int n, double *secs, ZrError *err) {
    ZrBackend *be = t->be;
    const int n_vocab = t->m->hp.n_vocab;
    const int d = t->depth;
    /* what is in the cache before the timed part (untimed): the -d context, and for a tg test at
     * least BOS (prompt[0]), whose last logits pick the first token */
    const int ctx = pp || d > 0 ? d : 1;
    be->truncate(be, 0);
    int rc = ctx > 0 ? be->forward(be, t->prompt, ctx, 0, t->logits, false, err) : ZR_OK;
    if (rc) return d > 0 ? zr_err_wrap(err, "the context of %d tokens", d) : rc;
    if (pp) {
        const double t0 = (zr_clock_ms() / 1e3);
        rc = be->forward(be, t->prompt + d, n, d, t->logits, false, err);
        *secs = (zr_clock_ms() / 1e3) - t0;
        return rc;
    }
    /* a fresh sampler that has seen that prompt */
    ZrSampler *smp = zr_sampler_create(&t->sp, n_vocab, err);
    if (!smp) return err->code;
    for (int i = 0; i < ctx; i++) zr_sampler_accept(smp, t->prompt[i]);
    ZrDecodeLoop L = {.sp = &t->sp, .host = smp, .n_cand = n_vocab, .pos = ctx, .max_steps = n,
                      .on_token = keep_going, .logits = t->logits, .host_pick = t->a->host_argmax};
    L.token = zr_decode_pick_host(&L, t->logits, n_vocab);
    const double t0 = (zr_clock_ms() / 1e3);
    rc = be->decode_run(be, &L, err);
    *secs = (zr_clock_ms() / 1e3) - t0;
    t->host_steps = L.host_steps;
    zr_sampler_free(smp);
    return rc;
}

/* The first prompt on a backend just opened: ZR_BENCH_TTFT_TOKENS ids (BOS first) to its first
 * token (the greedy pick over the last position's logits) -> *ms; the cache is emptied after. */
static int first_token(TestCtx *t, double *ms, ZrError *err) {
    ZrBackend *be = t->be;
    const int n = ZR_BENCH_TTFT_TOKENS < be->n_ctx ? ZR_BENCH_TTFT_TOKENS : be->n_ctx;
    const double t0 = (zr_clock_ms() / 1e3);
    int rc = be->forward(be, t->prompt, n, 0, t->logits, false, err);
    if (!rc) (void)zr_bench_argmax(t->logits, t->m->hp.n_vocab);
    *ms = ((zr_clock_ms() / 1e3) - t0) * 1e3;
    be->truncate(be, 0);
    return rc ? zr_err_wrap(err, "the first prompt (%d tokens)", n) : ZR_OK;
}

static int run_test(TestCtx *t, bool pp, int n, const char *mode, bool graph_asked, ZrError *err) {
    const BenchArgs *a = t->a;
    ZrBenchRow *r = &t->row;
    const size_t logit_bytes = sizeof(float) * (size_t)t->m->hp.n_vocab;
    uint64_t first = 0;
    bool stable = true;
    for (int i = -a->warmup; i < a->reps; i++) {
        double secs = 0;
        int rc = run_once(t, pp, n, &secs, err);
        if (rc) return zr_err_wrap(err, "%s %s%d @ d%d", mode, pp ? "pp" : "tg", n, t->depth);
        if (i < 0) continue;
        t->samples[i] = secs > 0 ? n / secs : 0.0;
        const uint64_t h = zr_bench_fnv1a64(t->logits, logit_bytes);
        if (i == 0) first = h;
        else if (h != first) stable = false;
        r->logits_hash = h;
    }
    ZrBackendStats st = {0};
    if (t->be->stats) t->be->stats(t->be, &st);
    if (t->depth > 0) snprintf(r->test, sizeof r->test, "%s%d @ d%d", pp ? "pp" : "tg", n, t->depth);
    else snprintf(r->test, sizeof r->test, "%s%d", pp ? "pp" : "tg", n);
    r->n_depth = t->depth;
    r->mode = graph_asked && !pp && !st.graph_active ? "graph-fallback" : pp ? "eager" : mode;
    r->n_prompt = pp ? n : 0;
    r->n_gen = pp ? 0 : n;
    r->n_ctx = t->be->n_ctx;
    r->reps = a->reps;
    r->warmup = a->warmup;
    r->samples_ts = t->samples;
    r->ts = zr_bench_stats(t->samples, a->reps);
    r->hash_stable = stable;
    r->gbps = pp ? -1.0 : (double)r->bytes_per_token * r->ts.median / 1e9;
    r->bw_pct = !pp && t->dev->read_gbps > 0 ? 100.0 * r->gbps / t->dev->read_gbps : -1.0;
    /* On the CPU a small model's weights stay in the caches between steps, which read faster
     * than the memory the probe streams: a share above 100 % would measure the cache, not the
     * model against the memory, so it is left out ('-') with a note. */
    if (r->bw_pct > 100.0 && strcmp(t->be->name, "cuda")) {
        if (!a->quiet && !t->noted_cache)
            fprintf(stderr,
                    "zrun bench: note: %% BW left out for %s %s: %.1f GB/s is more than the %.1f GB/s the memory probe "
                    "measured, because the %.2f MiB read per token stay in the CPU caches\n",
                    r->model_type, r->test, r->gbps, t->dev->read_gbps, (double)r->bytes_per_token / (1 << 20));
        t->noted_cache = true;
        r->bw_pct = -1.0;
    }
    r->kernels_per_token = pp ? 0 : st.kernels_per_token;
    r->host_us_per_token = pp ? 0 : st.host_us_per_token;
    r->sampling = pp ? "-" : a->sampling;
    r->host_steps = pp ? 0 : t->host_steps;
    r->gap_us_min = !pp && st.gap_samples ? st.gap_us_min : -1.0;
    r->gap_us_median = !pp && st.gap_samples ? st.gap_us_median : -1.0;
    r->graph_build_ms = pp ? 0 : st.graph_build_ms;
    r->pdl = !pp && st.pdl;
    if (graph_asked && !pp && !st.graph_active && !a->quiet)
        fprintf(stderr, "zrun bench: %s: graph mode asked for, but the decode steps ran eagerly (see the backend's note)\n",
                r->model_type);
    zr_bench_out_row(t->out, t->dev, r);
    if (a->progress)
        fprintf(stderr, "zrun bench: %s %s %s: %.2f ± %.2f t/s\n", r->model_type, r->mode, r->test, r->ts.median,
                r->ts.sd);
    return ZR_OK;
}

static int bench_model(const BenchArgs *a, BenchDev *d, ZrBenchOut *out, const char *path, ZrError *err) {
    ZrModel m;
    const double t_file = (zr_clock_ms() / 1e3); /* load time: the file to a ready backend */
    /* every model on the backend the first one got */
    const ZrDevice device = !d->known ? a->device : !strcmp(d->dev.backend, "cuda") ? ZR_DEVICE_CUDA : ZR_DEVICE_CPU;
    /* the GPU's driver and context open on a thread while the model is read (the first open takes them) */
    ZrCudaEarly *early = device != ZR_DEVICE_CPU ? zr_cuda_early_start() : NULL;
    int rc = zr_model_load(&m, path, err);
    if (rc) {
        zr_cuda_early_drop(early);
        if (!strstr(err->msg, path)) zr_err_wrap(err, "%s", path);
        return rc;
    }
    const double model_s = (zr_clock_ms() / 1e3) - t_file;
    TestCtx t = {.a = a, .dev = &d->dev, .out = out, .m = &m};
    ZrBenchRow *r = &t.row;
    r->model_path = path;
    model_type(&m, r->model_type, sizeof r->model_type, &r->model_bytes);
    r->n_params = m.n_params;
    r->bytes_per_token = m.bytes_per_token;
    r->type_k = r->type_v = zr_kv_type_name(a->kv_type);

    const int n_vocab = m.hp.n_vocab;
    int max_pp = 0, max_tg = 0, max_d = 0;
    for (int i = 0; i < a->n_pp; i++) max_pp = a->pp[i] > max_pp ? a->pp[i] : max_pp;
    for (int i = 0; i < a->n_tg; i++) max_tg = a->tg[i] > max_tg ? a->tg[i] : max_tg;
    for (int i = 0; i < a->n_depth; i++) max_d = a->depth[i] > max_d ? a->depth[i] : max_d;
    /* the longest test after the deepest context (tg: BOS or the context, then its steps) */
    const int need = max_d + (max_pp > max_tg + 1 ? max_pp : max_tg + 1);
    const int n_ctx = a->n_ctx ? a->n_ctx : zr_backend_default_ctx(&m, need);
    if (a->n_ctx && need > a->n_ctx) {
        rc = zr_err(err, ZR_E_USAGE, "%s: the tests need a context of %d tokens (-d %d, then -p %d / -n %d); -c gives %d",
                    path, need, max_d, max_pp, max_tg, a->n_ctx);
        goto done;
    }
    uint32_t bos = 0;
    ZrError e2;
    if (zr_gguf_find(&m.gguf, "tokenizer.ggml.bos_token_id") &&
        zr_gguf_get_u32(&m.gguf, "tokenizer.ggml.bos_token_id", &bos, &e2))
        bos = 0;
    t.sp = a->sp;
    if (t.sp.repeat_last_n < 0) t.sp.repeat_last_n = n_ctx;
    t.logits = malloc(sizeof(float) * (size_t)n_vocab);
    const int n_ids = max_d + (max_pp > ZR_BENCH_TTFT_TOKENS ? max_pp : ZR_BENCH_TTFT_TOKENS);
    t.prompt = malloc(sizeof(int32_t) * (size_t)n_ids);
    t.samples = calloc((size_t)a->reps, sizeof(double));
    if (!t.logits || !t.prompt || !t.samples) {
        rc = zr_err(err, ZR_E_NOMEM, "out of memory");
        goto done;
    }
    uint64_t x = 0x2545f4914f6cdd1dull; /* xorshift64: the same prompt on every run */
    t.prompt[0] = bos < (uint32_t)n_vocab ? (int32_t)bos : 0;
    for (int i = 1; i < n_ids; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        t.prompt[i] = (int32_t)(x % (uint64_t)n_vocab);
    }

    /* graph or not, in order: --graph off: eager; on: graph; both: eager, then graph. The CPU
     * backend has no graph mode: eager only, once. */
    bool modes[BENCH_MAX_MODES];
    int n_modes = 0;
    if (a->graph != GRAPH_ON) modes[n_modes++] = false;
    if (a->graph != GRAPH_OFF) modes[n_modes++] = true;
    for (int mi = 0; mi < n_modes && !rc; mi++) {
        ZrBackendOptions o = {.n_ctx = n_ctx, .kv_type = a->kv_type, .n_threads = a->n_threads, .graph = modes[mi],
                              .verify_graph = 1, .profile = a->profile, .fault = a->fault, .quiet = a->quiet,
                              .plan_cache = a->plan_cache, .cuda_early = early};
        early = NULL; /* the backend's now */
        const double t_open = (zr_clock_ms() / 1e3);
        t.be = zr_backend_open(device, &m, &o, a->quiet ? NULL : "zrun bench", err);
        const double open_s = (zr_clock_ms() / 1e3) - t_open;
        if (!t.be || device_known(a, t.be, d, out, err) || first_token(&t, &r->ttft_ms, err)) {
            rc = err->code ? err->code : ZR_E_INTERNAL;
            zr_err_wrap(err, "%s", path);
            if (t.be) t.be->destroy(t.be);
            t.be = NULL;
            break;
        }
        r->load_ms = (model_s + open_s) * 1e3;
        if (strcmp(t.be->name, "cuda") && a->graph != GRAPH_OFF) {
            if (!a->quiet) fprintf(stderr, "zrun bench: the CPU backend has no graph mode; running eager\n");
            modes[mi] = false;
            n_modes = mi + 1;
        }
        const bool graph = modes[mi];
        const char *mode = graph ? "graph" : "eager";
        for (int di = 0; di < a->n_depth && !rc; di++) {
            t.depth = a->depth[di];
            if (mi == 0)
                for (int i = 0; i < a->n_pp && !rc; i++)
                    if (a->pp[i] > 0) rc = run_test(&t, true, a->pp[i], mode, graph, err);
            for (int i = 0; i < a->n_tg && !rc; i++)
                if (a->tg[i] > 0) rc = run_test(&t, false, a->tg[i], mode, graph, err);
        }
        if (rc) zr_err_wrap(err, "%s", path);
        t.be->destroy(t.be);
        t.be = NULL;
    }
done:
    zr_cuda_early_drop(early);
    free(t.logits);
    free(t.prompt);
    free(t.samples);
    zr_model_free(&m);
    return rc;
}

int zr_cmd_bench(int argc, char **argv, const ZrEnv *env) {
    BenchArgs a;
    ZrError err = {0};
    if (parse_args(argc, argv, env, &a, &err)) {
        fprintf(stderr, "zrun bench: %s\n%s", err.msg, k_bench_usage);
        return 2;
    }
    if (a.help)
        return zr_print_help("usage: zrun bench -m FILE [-m FILE ...] [options]", "bench options (zrun bench):");
    if (!a.quiet)
        for (int i = 0; i < a.n_notes; i++) fprintf(stderr, "zrun bench: note: %s\n", a.notes[i]);
    BenchDev d = {0};
    ZrBenchOut out = {.f = stdout, .format = a.format, .md_kv_columns = a.kv_type != ZR_KV_F16};
    int status = 0;
    for (int i = 0; i < a.n_models; i++) {
        if (bench_model(&a, &d, &out, a.models[i], &err)) {
            fprintf(stderr, "zrun bench: %s\n", err.msg);
            status = 1;
            if (err.code == ZR_E_NODEV) break; /* --device cuda without a GPU: every model would say so */
        }
    }
    if (!d.known) return 1; /* no backend opened: no report, only the errors */
    zr_bench_out_end(&out);
    if (ferror(stdout)) {
        fprintf(stderr, "zrun bench: write error on standard output: %s\n", strerror(errno));
        status = 1;
    }
    return status;
}
