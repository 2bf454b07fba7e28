/* Command-line parsing for the run command (getopt_long into a settings struct), and the
 * checked number parsers every subcommand can use. Parsing only: nothing is opened here. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "backend_open.h"
#include "err.h"
#include "sampler.h"

typedef struct ZrRunSettings {
    const char *model;        /* -m */
    const char *prompt;       /* -p TEXT; "-" = standard input; NULL when -f is used */
    const char *prompt_file;  /* -f FILE */
    int n_predict;            /* -n: tokens to generate; -1 = until end of generation or context */
    int n_ctx;                /* -c: 0 = zr_backend_default_ctx (the model's, at most 4096) */
    int n_threads;            /* -t: 0 = all cores */
    ZrSamplerParams sampler;  /* sampler.repeat_last_n is only valid when repeat_last_n >= 0 */
    int repeat_last_n;        /* -1 = the whole context */
    bool seed_given;          /* else the seed comes from the clock */
    bool special;             /* --special: parse special-token text in the prompt */
    bool no_display_prompt;   /* --no-display-prompt: do not echo the prompt to stdout */
    ZrDevice device;          /* --device: the fallback rule is zr_backend_open's */
    int graph;                /* -1 = no flag (CUDA_GRAPH_ENABLE decides, in the command), 0 --no-graph, 1 --graph */
    int verify_graph;
    bool profile;
    bool log_launches;
    const char *graph_dot;
    bool quiet;
    bool help;                /* --help: print the usage and exit 0 */
    int resume_fd;            /* hidden --resume-fd N: go on with the run saved there (src/app/resume.h); -1 none */
} ZrRunSettings;

#define ZR_RUN_DEFAULT_N_PREDICT 128

void zr_run_settings_defaults(ZrRunSettings *s);
/* Parses argv[1..argc) (argv[0] names the command). A bad option or value fails with
 * ZR_E_USAGE and a message naming the option, what was expected and what was found. */
int zr_cli_parse_run(ZrRunSettings *s, int argc, char **argv, ZrError *err);

/* Checked conversions of an option's argument: the whole string must be a number in
 * [lo, hi] (floats: finite too). opt names the option in the message. */
int zr_cli_int(const char *opt, const char *arg, long lo, long hi, int *out, ZrError *err);
int zr_cli_float(const char *opt, const char *arg, double lo, double hi, float *out, ZrError *err);
int zr_cli_u64(const char *opt, const char *arg, uint64_t *out, ZrError *err);
