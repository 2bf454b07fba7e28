/* Option parsing for `zrun -m FILE -p PROMPT ...` through the one option reader (opt.h), with
 * llama.cpp's spellings. Every value is checked here (the whole argument must be a decimal
 * number, inside its range), so the run command only ever sees valid settings; a bad one is a
 * usage error naming the option, the expected range and what was given. */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
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
    s->kv_type = ZR_KV_F16;
    s->graph = -1;
    s->verify_graph = 1;
    s->resume_fd = -1;
}

/* "-12", "7": an optional sign and decimal digits, nothing else. */
static bool plain_int(const char *s) {
    if (*s == '-' || *s == '+') s++;
    if (!isdigit((unsigned char)*s)) return false;
    while (isdigit((unsigned char)*s)) s++;
    return *s == 0;
}

/* "0.5", "-1", ".5", "1e-3": sign, digits with at most one point, an optional exponent. strtod
 * alone would also take hex ("0x10" = 16), "inf", "nan" and leading spaces. */
static bool plain_float(const char *s) {
    if (*s == '-' || *s == '+') s++;
    int digits = 0;
    while (isdigit((unsigned char)*s)) s++, digits++;
    if (*s == '.') {
        s++;
        while (isdigit((unsigned char)*s)) s++, digits++;
    }
    if (!digits) return false;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '-' || *s == '+') s++;
        if (!isdigit((unsigned char)*s)) return false;
        while (isdigit((unsigned char)*s)) s++;
    }
    return *s == 0;
}

int zr_cli_int(const char *opt, const char *arg, long lo, long hi, int *out, ZrError *err) {
    char *end;
    errno = 0;
    long v = plain_int(arg) ? strtol(arg, &end, 10) : 0;
    if (!plain_int(arg) || errno == ERANGE || v < lo || v > hi || v < INT_MIN || v > INT_MAX) {
        if (hi == INT_MAX)
            return zr_err(err, ZR_E_USAGE, "%s: expected an integer >= %ld, found '%s'", opt, lo, arg);
        return zr_err(err, ZR_E_USAGE, "%s: expected an integer in %ld..%ld, found '%s'", opt, lo, hi, arg);
    }
    *out = (int)v;
    return 0;
}

int zr_cli_float(const char *opt, const char *arg, double lo, double hi, float *out, ZrError *err) {
    errno = 0;
    double v = plain_float(arg) ? strtod(arg, NULL) : NAN;
    if (!plain_float(arg) || errno == ERANGE || !isfinite(v) || v < lo || v > hi) {
        if (hi >= 1e30 && lo <= -1e30)
            return zr_err(err, ZR_E_USAGE, "%s: expected a number, found '%s'", opt, arg);
        if (hi >= 1e30)
            return zr_err(err, ZR_E_USAGE, "%s: expected a number >= %g, found '%s'", opt, lo, arg);
        return zr_err(err, ZR_E_USAGE, "%s: expected a number in %g..%g, found '%s'", opt, lo, hi, arg);
    }
    *out = (float)v;
    return 0;
}

int zr_cli_float_above(const char *opt, const char *arg, double lo, float *out, ZrError *err) {
    errno = 0;
    double v = plain_float(arg) ? strtod(arg, NULL) : NAN;
    if (!plain_float(arg) || errno == ERANGE || !isfinite(v) || !(v > lo) || v > 1e30)
        return zr_err(err, ZR_E_USAGE, "%s: expected a number > %g, found '%s'", opt, lo, arg);
    *out = (float)v;
    return 0;
}

int zr_cli_u64(const char *opt, const char *arg, uint64_t *out, ZrError *err) {
    char *end;
    errno = 0;
    unsigned long long v = isdigit((unsigned char)arg[0]) ? strtoull(arg, &end, 10) : 0;
    if (!isdigit((unsigned char)arg[0]) || *end || errno == ERANGE)
        return zr_err(err, ZR_E_USAGE, "%s: expected an integer in 0..18446744073709551615, found '%s'", opt, arg);
    *out = (uint64_t)v;
    return 0;
}

const char *zr_cli_compat_note(int id) {
    switch (id) {
    case ZR_COMPAT_NGL: return "zrun runs every layer on the one device it picks (--device auto|cpu|cuda)";
    case ZR_COMPAT_FA: return "zrun's attention kernels are its own (tiled on the GPU); there is no switch";
    case ZR_COMPAT_BATCH:
    case ZR_COMPAT_UBATCH: return "zrun sizes the prefill batches itself (the whole prompt in one forward call)";
    case ZR_COMPAT_MMAP: return "zrun always maps the model file";
    default: return "not used by zrun";
    }
}

void zr_cli_note_compat(char (*notes)[160], int *n_notes, int max, const char *label, const char *value, int id) {
    if (*n_notes >= max) return;
    snprintf(notes[(*n_notes)++], 160, "%s%s%s ignored: %s", label, value ? " " : "", value ? value : "",
             zr_cli_compat_note(id));
}

size_t zr_cli_unescape(char *s, size_t len) {
    size_t w = 0;
    for (size_t r = 0; r < len; r++) {
        char c = s[r];
        if (c != '\\' || r + 1 >= len) {
            s[w++] = c;
            continue;
        }
        char e = s[r + 1];
        const char *map = strchr("nrt'\"\\", e);
        if (map && e) {
            s[w++] = e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : e;
            r++;
        } else if (e == 'x' && r + 3 < len && isxdigit((unsigned char)s[r + 2]) && isxdigit((unsigned char)s[r + 3])) {
            char hex[3] = {s[r + 2], s[r + 3], 0};
            s[w++] = (char)strtol(hex, NULL, 16);
            r += 3;
        } else {
            s[w++] = c; /* unknown: kept as written */
        }
    }
    if (w < len) s[w] = 0;
    return w;
}

enum {
    OPT_MODEL = 1,
    OPT_PROMPT,
    OPT_FILE,
    OPT_N_PREDICT,
    OPT_CTX,
    OPT_THREADS,
    OPT_TEMP,
    OPT_TOP_K,
    OPT_TOP_P,
    OPT_MIN_P,
    OPT_REPEAT_PENALTY,
    OPT_REPEAT_LAST_N,
    OPT_PRESENCE_PENALTY,
    OPT_FREQUENCY_PENALTY,
    OPT_SEED,
    OPT_IGNORE_EOS,
    OPT_ESCAPE,
    OPT_NO_ESCAPE,
    OPT_REVERSE,
    OPT_COLOR,
    OPT_VERBOSE,
    OPT_SPECIAL,
    OPT_DEVICE,
    OPT_GRAPH,
    OPT_NO_GRAPH,
    OPT_VERIFY_GRAPH,
    OPT_PROFILE,
    OPT_LOG_LAUNCHES,
    OPT_GRAPH_DOT,
    OPT_GRAPH_STEPS,
    OPT_QUIET,
    OPT_NO_DISPLAY_PROMPT,
    OPT_HELP,
    OPT_RESUME_FD,
    OPT_CONVERSATION,
    OPT_SYSTEM_PROMPT,
    OPT_NO_CONVERSATION,
    OPT_SINGLE_TURN,
    OPT_CHAT_TEMPLATE,
    OPT_PLAN_CACHE,
    OPT_NO_PLAN_CACHE,
    OPT_CACHE_TYPE_K,
    OPT_CACHE_TYPE_V,
};

static const ZrOpt run_options[] = {
    {OPT_MODEL, "-m|--model", ZR_OPT_VALUE, NULL},
    {OPT_PROMPT, "-p|--prompt", ZR_OPT_VALUE, NULL},
    {OPT_FILE, "-f|--file", ZR_OPT_VALUE, NULL},
    {OPT_N_PREDICT, "-n|--n-predict|--predict", ZR_OPT_VALUE, NULL},
    {OPT_CTX, "-c|--ctx-size", ZR_OPT_VALUE, NULL},
    {OPT_THREADS, "-t|--threads", ZR_OPT_VALUE, NULL},
    {OPT_TEMP, "--temp", ZR_OPT_VALUE, NULL},
    {OPT_TOP_K, "--top-k", ZR_OPT_VALUE, NULL},
    {OPT_TOP_P, "--top-p", ZR_OPT_VALUE, NULL},
    {OPT_MIN_P, "--min-p", ZR_OPT_VALUE, NULL},
    {OPT_REPEAT_PENALTY, "--repeat-penalty", ZR_OPT_VALUE, NULL},
    {OPT_REPEAT_LAST_N, "--repeat-last-n", ZR_OPT_VALUE, NULL},
    {OPT_PRESENCE_PENALTY, "--presence-penalty", ZR_OPT_VALUE, NULL},
    {OPT_FREQUENCY_PENALTY, "--frequency-penalty", ZR_OPT_VALUE, NULL},
    {OPT_SEED, "-s|--seed", ZR_OPT_VALUE, NULL},
    {OPT_IGNORE_EOS, "--ignore-eos", ZR_OPT_FLAG, NULL},
    {OPT_ESCAPE, "-e|--escape", ZR_OPT_FLAG, NULL},
    {OPT_NO_ESCAPE, "--no-escape", ZR_OPT_FLAG, NULL},
    {OPT_REVERSE, "-r|--reverse-prompt", ZR_OPT_VALUE, NULL},
    {OPT_COLOR, "-co|--color", ZR_OPT_MAYBE, "on|off|auto"},
    {OPT_VERBOSE, "-v|--verbose|--log-verbose", ZR_OPT_FLAG, NULL},
    {OPT_SPECIAL, "--special", ZR_OPT_FLAG, NULL},
    {OPT_DEVICE, "--device", ZR_OPT_VALUE, NULL},
    {OPT_CACHE_TYPE_K, "-ctk|--cache-type-k", ZR_OPT_VALUE, NULL},
    {OPT_CACHE_TYPE_V, "-ctv|--cache-type-v", ZR_OPT_VALUE, NULL},
    {OPT_GRAPH, "--graph", ZR_OPT_FLAG, NULL},
    {OPT_NO_GRAPH, "--no-graph", ZR_OPT_FLAG, NULL},
    {OPT_VERIFY_GRAPH, "--verify-graph", ZR_OPT_VALUE, NULL},
    {OPT_PROFILE, "--profile", ZR_OPT_FLAG, NULL},
    {OPT_LOG_LAUNCHES, "--log-launches", ZR_OPT_FLAG, NULL},
    {OPT_GRAPH_DOT, "--graph-dot", ZR_OPT_VALUE, NULL},
    {OPT_GRAPH_STEPS, "--graph-steps", ZR_OPT_VALUE, NULL},
    {OPT_QUIET, "--quiet", ZR_OPT_FLAG, NULL},
    {OPT_PLAN_CACHE, "--plan-cache", ZR_OPT_VALUE, NULL},
    {OPT_NO_PLAN_CACHE, "--no-plan-cache", ZR_OPT_FLAG, NULL},
    {OPT_NO_DISPLAY_PROMPT, "--no-display-prompt", ZR_OPT_FLAG, NULL},
    {OPT_HELP, "-h|--help", ZR_OPT_FLAG, NULL},
    /* llama.cpp's, accepted with a note (zr_cli_compat_note) */
    {ZR_COMPAT_NGL, "-ngl|--gpu-layers|--n-gpu-layers", ZR_OPT_VALUE, NULL},
    {ZR_COMPAT_FA, "-fa|--flash-attn", ZR_OPT_MAYBE, "on|off|auto|0|1"},
    {ZR_COMPAT_BATCH, "-b|--batch-size", ZR_OPT_VALUE, NULL},
    {ZR_COMPAT_UBATCH, "-ub|--ubatch-size", ZR_OPT_VALUE, NULL},
    {ZR_COMPAT_MMAP, "-mmp|--mmap|--no-mmap", ZR_OPT_MAYBE, "0|1"},
    /* llama.cpp's conversation mode: zrun chat (cmd_chat.c) */
    {OPT_CONVERSATION, "-cnv|--conversation|-i|--interactive|-if|--interactive-first", ZR_OPT_FLAG, NULL},
    {OPT_SINGLE_TURN, "-st|--single-turn", ZR_OPT_FLAG, NULL},
    {OPT_CHAT_TEMPLATE, "--chat-template", ZR_OPT_VALUE, NULL},
    {OPT_SYSTEM_PROMPT, "-sys|--system-prompt", ZR_OPT_VALUE, NULL},
    {OPT_NO_CONVERSATION, "-no-cnv|--no-conversation", ZR_OPT_FLAG, NULL},
    /* hidden: zrun passes it to itself to go on in a new process (src/app/resume.h) */
    {OPT_RESUME_FD, "--resume-fd", ZR_OPT_VALUE, NULL},
    {0, NULL, 0, NULL},
};

static int color_parse(const char *name, const char *v, int *out, ZrError *err) {
    if (!v || !strcmp(v, "on")) *out = 1;
    else if (!strcmp(v, "off")) *out = 0;
    else if (!strcmp(v, "auto")) *out = -1;
    else return zr_err(err, ZR_E_USAGE, "%s: expected on, off or auto, found '%s'", name, v);
    return 0;
}

static int parse(ZrRunSettings *s, int argc, char **argv, bool chat, ZrError *err) {
    zr_run_settings_defaults(s);
    s->chat = chat;
    ZrOptReader rd;
    zr_opt_init(&rd, argc, argv);
    ZrKvFlags kv = {0};
    int rc = 0;
    for (;;) {
        const char *v;
        int id = zr_opt_next(&rd, run_options, &v, err);
        if (id == ZR_OPT_END) break;
        if (id == ZR_OPT_ERROR) return ZR_E_USAGE;
        if (id == ZR_OPT_ARG)
            return zr_err(err, ZR_E_USAGE, "unexpected argument '%s' (a prompt goes after -p)", v);
        const char *name = zr_opt_label(&rd);
        switch (id) {
        case OPT_MODEL: s->model = v; break;
        case OPT_PROMPT: s->prompt = v; break;
        case OPT_FILE: s->prompt_file = v; break;
        case OPT_N_PREDICT: rc = zr_cli_int(name, v, -1, INT_MAX, &s->n_predict, err); break;
        case OPT_CTX: rc = zr_cli_int(name, v, 0, INT_MAX, &s->n_ctx, err); break;
        case OPT_THREADS: rc = zr_cli_int(name, v, 0, 4096, &s->n_threads, err); break;
        case OPT_TEMP: rc = zr_cli_float(name, v, 0.0, 1e30, &s->sampler.temp, err); break;
        case OPT_TOP_K: rc = zr_cli_int(name, v, 0, INT_MAX, &s->sampler.top_k, err); break;
        case OPT_TOP_P: rc = zr_cli_float(name, v, 0.0, 1.0, &s->sampler.top_p, err); break;
        case OPT_MIN_P: rc = zr_cli_float(name, v, 0.0, 1.0, &s->sampler.min_p, err); break;
        case OPT_REPEAT_PENALTY: rc = zr_cli_float_above(name, v, 0.0, &s->sampler.repeat_penalty, err); break;
        case OPT_REPEAT_LAST_N: rc = zr_cli_int(name, v, -1, INT_MAX, &s->repeat_last_n, err); break;
        case OPT_PRESENCE_PENALTY: rc = zr_cli_float(name, v, -1e30, 1e30, &s->sampler.presence_penalty, err); break;
        case OPT_FREQUENCY_PENALTY: rc = zr_cli_float(name, v, -1e30, 1e30, &s->sampler.frequency_penalty, err); break;
        case OPT_SEED:
            /* -1 asks for a clock seed, as in llama.cpp */
            if (!strcmp(v, "-1")) {
                s->seed_given = false;
            } else {
                rc = zr_cli_u64(name, v, &s->sampler.seed, err);
                s->seed_given = rc == 0;
            }
            break;
        case OPT_IGNORE_EOS: s->ignore_eos = true; break;
        case OPT_ESCAPE: s->escape = true; break;
        case OPT_NO_ESCAPE: s->escape = false; break;
        case OPT_REVERSE:
            if (s->n_reverse == ZR_MAX_REVERSE)
                return zr_err(err, ZR_E_USAGE, "%s: at most %d reverse prompts", name, ZR_MAX_REVERSE);
            if (!*v) return zr_err(err, ZR_E_USAGE, "%s: expected a text, found ''", name);
            s->reverse[s->n_reverse++] = v;
            break;
        case OPT_COLOR: rc = color_parse(name, v, &s->color, err); break;
        case OPT_VERBOSE: s->verbose = true; break;
        case OPT_SPECIAL: s->special = true; break;
        case OPT_DEVICE: rc = zr_device_parse(name, v, &s->device, err); break;
        case OPT_CACHE_TYPE_K:
        case OPT_CACHE_TYPE_V: rc = zr_kv_flag(&kv, id == OPT_CACHE_TYPE_V, name, v, err); break;
        case OPT_GRAPH: s->graph = 1; break;
        case OPT_NO_GRAPH: s->graph = 0; break;
        case OPT_VERIFY_GRAPH: rc = zr_cli_int(name, v, 0, INT_MAX, &s->verify_graph, err); break;
        case OPT_PROFILE: s->profile = true; break;
        case OPT_LOG_LAUNCHES: s->log_launches = true; break;
        case OPT_GRAPH_DOT: s->graph_dot = v; break;
        case OPT_GRAPH_STEPS: rc = zr_cli_int(name, v, 0, 8, &s->graph_steps, err); break;
        case OPT_QUIET: s->quiet = true; break;
        case OPT_PLAN_CACHE:
            if (!*v) return zr_err(err, ZR_E_USAGE, "%s: expected a file name, found ''", name);
            s->plan_cache = v, s->no_plan_cache = false; /* the last of the two wins */
            break;
        case OPT_NO_PLAN_CACHE: s->no_plan_cache = true, s->plan_cache = NULL; break;
        case OPT_NO_DISPLAY_PROMPT: s->no_display_prompt = true; break;
        case OPT_HELP: s->help = true; break;
        case OPT_RESUME_FD: rc = zr_cli_int(name, v, 0, INT_MAX, &s->resume_fd, err); break;
        case ZR_COMPAT_NGL:
        case ZR_COMPAT_BATCH:
        case ZR_COMPAT_UBATCH:
            /* the value is still checked: a typo is a usage error, as in llama.cpp */
            {
                int ignored;
                rc = zr_cli_int(name, v, id == ZR_COMPAT_NGL ? -1 : 1, INT_MAX, &ignored, err);
            }
            if (!rc) zr_cli_note_compat(s->notes, &s->n_notes, ZR_MAX_NOTES, name, v, id);
            break;
        case ZR_COMPAT_FA:
        case ZR_COMPAT_MMAP: zr_cli_note_compat(s->notes, &s->n_notes, ZR_MAX_NOTES, name, v, id); break;
        case OPT_CONVERSATION: s->chat = true; break;
        case OPT_SINGLE_TURN: s->chat = s->single_turn = true; break;
        case OPT_SYSTEM_PROMPT: s->chat = true, s->system_prompt = v; break;
        case OPT_CHAT_TEMPLATE: s->chat_template = v; break;
        case OPT_NO_CONVERSATION: break; /* what zrun does without -cnv anyway */
        }
        if (rc) return rc;
    }
    if (s->help) return 0;
    if ((rc = zr_kv_flags_type(&kv, &s->kv_type, err))) return rc;
    if (!s->model) return zr_err(err, ZR_E_USAGE, "no model: give -m FILE (a GGUF file)");
    if (s->prompt && s->prompt_file)
        return zr_err(err, ZR_E_USAGE, "-p and -f both give the prompt: use one of them");
    if (s->chat && s->prompt && !strcmp(s->prompt, "-"))
        return zr_err(err, ZR_E_USAGE, "-p -: in a conversation standard input holds the user's lines; give the first message as -p TEXT or -f FILE");
    if (!s->prompt && !s->prompt_file && !s->chat)
        return zr_err(err, ZR_E_USAGE, "no prompt: give -p PROMPT, -p - (standard input) or -f FILE (-p \"\" starts from BOS alone)");
    return 0;
}

int zr_cli_parse_run(ZrRunSettings *s, int argc, char **argv, ZrError *err) { return parse(s, argc, argv, false, err); }

int zr_cli_parse_chat(ZrRunSettings *s, int argc, char **argv, ZrError *err) { return parse(s, argc, argv, true, err); }
