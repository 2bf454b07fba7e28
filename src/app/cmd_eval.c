/* zrun eval: teacher-forced logits of a token sequence, for comparing implementations.
 *   zrun eval -m FILE --tokens IDS_FILE --logits OUT.f32 [--device auto|cpu|cuda] [-t N] [-c N] [-ctk/-ctv f16|f32]
 * Every position's logits (n_tokens x n_vocab, little-endian float32, row-major) go to OUT. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "backend_open.h"
#include "cmd.h"
#include "cli.h"
#include "model.h"
#include "opt.h"
#include "zr_clock.h"

/* Logits held in memory at once; longer sequences are fed in several forwards. */
#define EVAL_MAX_LOGITS ((int64_t)64 << 20)

typedef struct EvalArgs {
    const char *model, *tokens, *logits;
    const char *plan_cache; /* --plan-cache FILE; NULL: the default */
    bool no_plan_cache;     /* --no-plan-cache */
    ZrDevice device;
    ZrKvType kv_type; /* -ctk/-ctv resolved (default f16) */
    int n_threads, n_ctx;
} EvalArgs;

static const char k_eval_usage[] =
    "usage: zrun eval -m FILE --tokens IDS_FILE --logits OUT.f32|- [--device auto|cpu|cuda] [-t N] [-c N]\n"
    "                 [-ctk f16|f32] [-ctv f16|f32]\n";

static int usage_error(const char *msg) {
    fprintf(stderr, "zrun eval: %s\n%s", msg, k_eval_usage);
    return 2;
}

/* 0, -1 for --help, or 2 after the message. */
static int parse_args(int argc, char **argv, EvalArgs *a) {
    enum { O_MODEL = 1, O_TOKENS, O_LOGITS, O_DEVICE, O_THREADS, O_CTX, O_HELP, O_PLAN_CACHE, O_NO_PLAN_CACHE, O_CTK, O_CTV };
    static const ZrOpt opts[] = {
        {O_MODEL, "-m|--model", ZR_OPT_VALUE, NULL},     {O_TOKENS, "--tokens", ZR_OPT_VALUE, NULL},
        {O_LOGITS, "--logits", ZR_OPT_VALUE, NULL},      {O_DEVICE, "--device", ZR_OPT_VALUE, NULL},
        {O_THREADS, "-t|--threads", ZR_OPT_VALUE, NULL}, {O_CTX, "-c|--ctx-size", ZR_OPT_VALUE, NULL},
        {O_HELP, "-h|--help", ZR_OPT_FLAG, NULL},        {O_PLAN_CACHE, "--plan-cache", ZR_OPT_VALUE, NULL},
        {O_NO_PLAN_CACHE, "--no-plan-cache", ZR_OPT_FLAG, NULL}, {O_CTK, "-ctk|--cache-type-k", ZR_OPT_VALUE, NULL},
        {O_CTV, "-ctv|--cache-type-v", ZR_OPT_VALUE, NULL},      {0, NULL, 0, NULL},
    };
    *a = (EvalArgs){.device = ZR_DEVICE_AUTO};
    ZrOptReader rd;
    zr_opt_init(&rd, argc, argv);
    ZrError e = {0};
    ZrKvFlags kv = {0};
    for (;;) {
        const char *v;
        int id = zr_opt_next(&rd, opts, &v, &e), rc = 0;
        if (id == ZR_OPT_END) break;
        if (id == ZR_OPT_ERROR) return usage_error(e.msg);
        if (id == ZR_OPT_ARG) {
            zr_err(&e, ZR_E_USAGE, "unexpected argument '%s'", v);
            return usage_error(e.msg);
        }
        const char *name = zr_opt_label(&rd);
        switch (id) {
        case O_MODEL: a->model = v; break;
        case O_TOKENS: a->tokens = v; break;
        case O_LOGITS: a->logits = v; break;
        case O_DEVICE: rc = zr_device_parse(name, v, &a->device, &e); break;
        case O_THREADS: rc = zr_cli_int(name, v, 0, 4096, &a->n_threads, &e); break;
        case O_CTX: rc = zr_cli_int(name, v, 1, INT32_MAX, &a->n_ctx, &e); break;
        case O_HELP: return -1;
        case O_PLAN_CACHE:
            if (!*v) rc = zr_err(&e, ZR_E_USAGE, "%s: expected a file name, found ''", name);
            a->plan_cache = v, a->no_plan_cache = false; /* the last of the two wins */
            break;
        case O_NO_PLAN_CACHE: a->no_plan_cache = true, a->plan_cache = NULL; break;
        case O_CTK:
        case O_CTV: rc = zr_kv_flag(&kv, id == O_CTV, name, v, &e); break;
        }
        if (rc) return usage_error(e.msg);
    }
    if (zr_kv_flags_type(&kv, &a->kv_type, &e)) return usage_error(e.msg);
    if (!a->model) return usage_error("-m FILE is required");
    if (!a->tokens) return usage_error("--tokens IDS_FILE is required");
    if (!a->logits) return usage_error("--logits OUT.f32 is required (- for standard output)");
    return 0;
}

/* Whitespace-separated decimal ids; *ids is malloc'ed. A word is read whole (a long one is
 * refused, not split in two) and a NUL byte is not whitespace. */
static int read_tokens(const char *path, int32_t **ids, int *n, ZrError *err) {
    FILE *f = fopen(path, "r");
    if (!f) return zr_err(err, ZR_E_IO, "%s: cannot open: %s", path, strerror(errno));
    int cap = 256, count = 0;
    int32_t *v = malloc(sizeof *v * cap);
    char word[32];
    int rc = v ? 0 : zr_err(err, ZR_E_NOMEM, "%s: out of memory", path);
    for (int c = getc(f); !rc && c != EOF;) {
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') {
            c = getc(f);
            continue;
        }
        size_t len = 0;
        bool nul = false;
        /* at most a word's worth is read: an endless word (/dev/zero) ends as one too long */
        for (; c != EOF && !(c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') && len < sizeof word;
             c = getc(f)) {
            if (len < sizeof word - 1) word[len] = c ? (char)c : '?';
            len++;
            nul |= c == 0;
        }
        word[len < sizeof word - 1 ? len : sizeof word - 1] = 0;
        char *end;
        errno = 0;
        long id = strtol(word, &end, 10);
        if (nul || len >= sizeof word - 1 || errno || *end || id < 0 || id > INT32_MAX) {
            rc = zr_err(err, ZR_E_FORMAT, "%s: token %d: expected a non-negative decimal id, found '%s'%s", path, count + 1, word,
                        nul ? " (with a NUL byte)" : len >= sizeof word - 1 ? "... (too long)" : "");
            break;
        }
        if (count == cap) {
            int32_t *nv = cap <= (1 << 29) ? realloc(v, sizeof *v * (size_t)(cap *= 2)) : NULL;
            if (!nv) {
                rc = zr_err(err, ZR_E_NOMEM, "%s: out of memory for %d token ids", path, count + 1);
                break;
            }
            v = nv;
        }
        v[count++] = (int32_t)id;
    }
    if (!rc && ferror(f)) rc = zr_err(err, ZR_E_IO, "%s: read error", path);
    fclose(f);
    if (!rc && count == 0) rc = zr_err(err, ZR_E_FORMAT, "%s: no token ids", path);
    if (rc) {
        free(v);
        return rc;
    }
    *ids = v;
    *n = count;
    return 0;
}

static bool write_f32le(FILE *f, const float *v, size_t n) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        u = __builtin_bswap32(u);
        if (fwrite(&u, 4, 1, f) != 1) return false;
    }
    return true;
#else
    return fwrite(v, sizeof(float), n, f) == n;
#endif
}

/* Teacher-forced: every token at its position, logits of all positions. */
static int eval_tokens(ZrBackend *be, const int32_t *ids, int n, int n_vocab, FILE *out, const char *out_path, ZrError *err) {
    int64_t per_call = EVAL_MAX_LOGITS / n_vocab;
    int chunk = per_call < 1 ? 1 : per_call < n ? (int)per_call : n;
    float *logits = malloc(sizeof(float) * (size_t)chunk * n_vocab);
    if (!logits) return zr_err(err, ZR_E_NOMEM, "out of memory for %d x %d logits", chunk, n_vocab);
    int rc = 0;
    for (int pos = 0; !rc && pos < n; pos += chunk) {
        int nc = n - pos < chunk ? n - pos : chunk;
        rc = be->forward(be, ids + pos, nc, pos, logits, true, err);
        if (!rc && !write_f32le(out, logits, (size_t)nc * n_vocab))
            rc = zr_err(err, ZR_E_IO, "%s: write failed: %s", out_path, strerror(errno));
    }
    free(logits);
    return rc;
}

int zr_cmd_eval(int argc, char **argv, const ZrEnv *env) {
    EvalArgs a;
    int rc = parse_args(argc, argv, &a);
    if (rc == -1) return zr_print_help(k_eval_usage, "eval options (zrun eval):");
    if (rc) return rc;

    ZrError err = {0};
    int32_t *ids = NULL;
    int n = 0;
    ZrModel m;
    ZrBackend *be = NULL;
    FILE *out = NULL;
    double t0 = zr_clock_ms();
    if (read_tokens(a.tokens, &ids, &n, &err)) goto fail_ids;
    if (zr_model_load(&m, a.model, &err)) goto fail_ids;
    for (int i = 0; i < n; i++)
        if (ids[i] >= m.hp.n_vocab) {
            zr_err(&err, ZR_E_RANGE, "%s: token %d: token id %d is outside the vocabulary of %s (0..%d)", a.tokens, i + 1, (int)ids[i], a.model,
                   m.hp.n_vocab - 1);
            goto fail_model;
        }
    char plan_cache[4096];
    const ZrBackendOptions o = {.n_ctx = a.n_ctx ? a.n_ctx : zr_backend_default_ctx(&m, n), .kv_type = a.kv_type,
                                .n_threads = a.n_threads,
                                .verify_graph = 1, .quiet = true, .all_logits = true,
                                .plan_cache = zr_backend_plan_cache(a.plan_cache, a.no_plan_cache, env->xdg_cache_home,
                                                                    env->home, plan_cache, sizeof plan_cache)};
    be = zr_backend_open(a.device, &m, &o, "zrun eval", &err);
    if (!be) goto fail_model;
    /* "-": standard output, as llama.cpp tools read "-"; the note below stays on stderr */
    const bool to_stdout = !strcmp(a.logits, "-");
    out = to_stdout ? stdout : fopen(a.logits, "wb");
    if (!out) {
        zr_err(&err, ZR_E_IO, "%s: cannot create: %s", a.logits, strerror(errno));
        goto fail_backend;
    }
    double t1 = zr_clock_ms();
    const char *out_name = to_stdout ? "standard output" : a.logits;
    rc = eval_tokens(be, ids, n, m.hp.n_vocab, out, out_name, &err);
    if ((to_stdout ? fflush(out) : fclose(out)) && !rc)
        rc = zr_err(&err, ZR_E_IO, "%s: write failed: %s", out_name, strerror(errno));
    if (rc) {
        if (!to_stdout) remove(a.logits); /* no partial logits file left behind */
        goto fail_backend;
    }
    fprintf(stderr, "zrun eval: %d tokens x %d logits -> %s (%s backend, load %.1f ms, forward %.1f ms)\n", n, m.hp.n_vocab,
            out_name, be->name, t1 - t0, zr_clock_ms() - t1);
    be->destroy(be);
    zr_model_free(&m);
    free(ids);
    return 0;

fail_backend:
    if (be) be->destroy(be);
fail_model:
    zr_model_free(&m);
fail_ids:
    free(ids);
    fprintf(stderr, "zrun eval: %s\n", err.msg);
    return 1;
}
