/* Option parsing for `zrun -m FILE -p PROMPT ...` with getopt_long. Every value is checked
 * here (the whole argument must be a number, inside its range), so the run command only ever
 * sees valid settings; a bad one is a usage error naming the option, the expected range and
 * what was given. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void zr_run_settings_defaults(ZrRunSettings *s) {
    memset(s, 0, sizeof *s);
    s->n_predict = ZR_RUN_DEFAULT_N_PREDICT;
    s->sampler = zr_sampler_defaults();
    s->repeat_last_n = s->sampler.repeat_last_n;
    s->device = ZR_DEVICE_AUTO;
    s->graph = -1;
    s->verify_graph = 1;
    s->resume_fd = -1;
}

int zr_cli_int(const char *opt, const char *arg, long lo, long hi, int *out, ZrError *err) {
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (end == arg || *end || errno == ERANGE || v < lo || v > hi || v < INT_MIN || v > INT_MAX) {
        if (hi == INT_MAX)
            return zr_err(err, ZR_E_USAGE, "%s: expected an integer >= %ld, found '%s'", opt, lo, arg);
        return zr_err(err, ZR_E_USAGE, "%s: expected an integer in %ld..%ld, found '%s'", opt, lo, hi, arg);
    }
    *out = (int)v;
    return 0;
}

int zr_cli_float(const char *opt, const char *arg, double lo, double hi, float *out, ZrError *err) {
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (end == arg || *end || errno == ERANGE || !isfinite(v) || v < lo || v > hi) {
        if (hi >= 1e30)
            return zr_err(err, ZR_E_USAGE, "%s: expected a number >= %g, found '%s'", opt, lo, arg);
        return zr_err(err, ZR_E_USAGE, "%s: expected a number in %g..%g, found '%s'", opt, lo, hi, arg);
    }
    *out = (float)v;
    return 0;
}

int zr_cli_u64(const char *opt, const char *arg, uint64_t *out, ZrError *err) {
    char *end;
    errno = 0;
    const char *p = arg;
    while (*p == ' ' || *p == '\t') p++;
    unsigned long long v = strtoull(p, &end, 10);
    if (*p == '-' || *p == '+' || end == p || *end || errno == ERANGE)
        return zr_err(err, ZR_E_USAGE, "%s: expected an integer in 0..18446744073709551615, found '%s'", opt, arg);
    *out = (uint64_t)v;
    return 0;
}

enum {
    OPT_TEMP = 256,
    OPT_TOP_K,
    OPT_TOP_P,
    OPT_MIN_P,
    OPT_REPEAT_PENALTY,
    OPT_REPEAT_LAST_N,
    OPT_SEED,
    OPT_SPECIAL,
    OPT_DEVICE,
    OPT_GRAPH,
    OPT_NO_GRAPH,
    OPT_VERIFY_GRAPH,
    OPT_PROFILE,
    OPT_LOG_LAUNCHES,
    OPT_GRAPH_DOT,
    OPT_QUIET,
    OPT_NO_DISPLAY_PROMPT,
    OPT_RESUME_FD,
};

static const struct option run_options[] = {
    {"model", required_argument, NULL, 'm'},
    {"prompt", required_argument, NULL, 'p'},
    {"file", required_argument, NULL, 'f'},
    {"n-predict", required_argument, NULL, 'n'},
    {"ctx-size", required_argument, NULL, 'c'},
    {"threads", required_argument, NULL, 't'},
    {"temp", required_argument, NULL, OPT_TEMP},
    {"top-k", required_argument, NULL, OPT_TOP_K},
    {"top-p", required_argument, NULL, OPT_TOP_P},
    {"min-p", required_argument, NULL, OPT_MIN_P},
    {"repeat-penalty", required_argument, NULL, OPT_REPEAT_PENALTY},
    {"repeat-last-n", required_argument, NULL, OPT_REPEAT_LAST_N},
    {"seed", required_argument, NULL, OPT_SEED},
    {"special", no_argument, NULL, OPT_SPECIAL},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"graph", no_argument, NULL, OPT_GRAPH},
    {"no-graph", no_argument, NULL, OPT_NO_GRAPH},
    {"verify-graph", required_argument, NULL, OPT_VERIFY_GRAPH},
    {"profile", no_argument, NULL, OPT_PROFILE},
    {"log-launches", no_argument, NULL, OPT_LOG_LAUNCHES},
    {"graph-dot", required_argument, NULL, OPT_GRAPH_DOT},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"no-display-prompt", no_argument, NULL, OPT_NO_DISPLAY_PROMPT},
    {"help", no_argument, NULL, 'h'},
    /* hidden: zrun passes it to itself to go on in a new process (src/app/resume.h) */
    {"resume-fd", required_argument, NULL, OPT_RESUME_FD},
    {NULL, 0, NULL, 0},
};

/* The option as the user wrote it, for messages. */
static const char *opt_label(int c, int long_index, char *buf, size_t cap) {
    if (long_index >= 0) {
        snprintf(buf, cap, "--%s", run_options[long_index].name);
        return buf;
    }
    for (const struct option *o = run_options; o->name; o++)
        if (o->val == c) {
            snprintf(buf, cap, "-%c/--%s", c, o->name);
            return buf;
        }
    snprintf(buf, cap, "-%c", c);
    return buf;
}

int zr_cli_parse_run(ZrRunSettings *s, int argc, char **argv, ZrError *err) {
    zr_run_settings_defaults(s);
    /* getopt keeps its position in libc's optind: 0 restarts it (GNU), so parsing twice in one
     * process (the tests) works; opterr = 0 because the messages are ours. */
    optind = 0;
    opterr = 0;
    int rc = 0;
    for (;;) {
        int long_index = -1;
        int c = getopt_long(argc, argv, ":m:p:f:n:c:t:h", run_options, &long_index);
        if (c == -1) break;
        char lbl[64];
        const char *name = opt_label(c, long_index, lbl, sizeof lbl);
        switch (c) {
        case 'm': s->model = optarg; break;
        case 'p': s->prompt = optarg; break;
        case 'f': s->prompt_file = optarg; break;
        case 'n': rc = zr_cli_int(name, optarg, -1, INT_MAX, &s->n_predict, err); break;
        case 'c': rc = zr_cli_int(name, optarg, 0, INT_MAX, &s->n_ctx, err); break;
        case 't': rc = zr_cli_int(name, optarg, 0, 4096, &s->n_threads, err); break;
        case OPT_TEMP: rc = zr_cli_float(name, optarg, 0.0, 1e30, &s->sampler.temp, err); break;
        case OPT_TOP_K: rc = zr_cli_int(name, optarg, 0, INT_MAX, &s->sampler.top_k, err); break;
        case OPT_TOP_P: rc = zr_cli_float(name, optarg, 0.0, 1.0, &s->sampler.top_p, err); break;
        case OPT_MIN_P: rc = zr_cli_float(name, optarg, 0.0, 1.0, &s->sampler.min_p, err); break;
        case OPT_REPEAT_PENALTY:
            rc = zr_cli_float(name, optarg, 0.0, 1e30, &s->sampler.repeat_penalty, err);
            if (!rc && s->sampler.repeat_penalty <= 0.0f)
                rc = zr_err(err, ZR_E_USAGE, "%s: expected a number > 0, found '%s'", name, optarg);
            break;
        case OPT_REPEAT_LAST_N: rc = zr_cli_int(name, optarg, -1, INT_MAX, &s->repeat_last_n, err); break;
        case OPT_SEED:
            /* -1 asks for a clock seed, as in llama.cpp */
            if (!strcmp(optarg, "-1")) {
                s->seed_given = false;
            } else {
                rc = zr_cli_u64(name, optarg, &s->sampler.seed, err);
                s->seed_given = rc == 0;
            }
            break;
        case OPT_SPECIAL: s->special = true; break;
        case OPT_DEVICE: rc = zr_device_parse(name, optarg, &s->device, err); break;
        case OPT_GRAPH: s->graph = 1; break;
        case OPT_NO_GRAPH: s->graph = 0; break;
        case OPT_VERIFY_GRAPH: rc = zr_cli_int(name, optarg, 0, INT_MAX, &s->verify_graph, err); break;
        case OPT_PROFILE: s->profile = true; break;
        case OPT_LOG_LAUNCHES: s->log_launches = true; break;
        case OPT_GRAPH_DOT: s->graph_dot = optarg; break;
        case OPT_QUIET: s->quiet = true; break;
        case OPT_NO_DISPLAY_PROMPT: s->no_display_prompt = true; break;
        case 'h': s->help = true; break;
        case OPT_RESUME_FD: rc = zr_cli_int(name, optarg, 0, INT_MAX, &s->resume_fd, err); break;
        case ':': {
            /* missing argument: optopt is the short option, or the long one's value */
            const char *o = argv[optind - 1];
            return zr_err(err, ZR_E_USAGE, "%s needs a value", o ? o : "option");
        }
        case '?':
        default: {
            const char *o = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
            /* optopt is set for a known option used wrongly: a value given to a flag */
            if (optopt && !strncmp(o, "--", 2))
                return zr_err(err, ZR_E_USAGE, "option '%s' takes no value", o);
            if (optopt) return zr_err(err, ZR_E_USAGE, "unknown option '-%c'", optopt);
            return zr_err(err, ZR_E_USAGE, "unknown option '%s'", o);
        }
        }
        if (rc) return rc;
    }
    if (s->help) return 0;
    if (optind < argc)
        return zr_err(err, ZR_E_USAGE, "unexpected argument '%s' (a prompt goes after -p)", argv[optind]);
    if (!s->model) return zr_err(err, ZR_E_USAGE, "no model: give -m FILE (a GGUF file)");
    if (s->prompt && s->prompt_file)
        return zr_err(err, ZR_E_USAGE, "-p and -f both give the prompt: use one of them");
    if (!s->prompt && !s->prompt_file)
        return zr_err(err, ZR_E_USAGE, "no prompt: give -p PROMPT, -p - (standard input) or -f FILE (-p \"\" starts from BOS alone)");
    return 0;
}
