/* Command-line parsing for the run command (the option reader of opt.h into a settings
 * struct), and the checked number parsers every subcommand uses. Parsing only: nothing is
 * opened here. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "backend_open.h"
#include "opt.h"
#include "err.h"
#include "sampler.h"

#define ZR_MAX_REVERSE 8
#define ZR_MAX_NOTES 8

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
    ZrKvType kv_type;         /* -ctk/-ctv resolved (zr_kv_flags_type): ZR_KV_F16 unless f32 is given */
    int graph;                /* -1 = no flag (CUDA_GRAPH_ENABLE decides, in the command), 0 --no-graph, 1 --graph */
    int verify_graph;
    int graph_steps;          /* --graph-steps: decode steps a graph launch runs, 1..8; 0 = the backend's (4) */
    bool profile;
    bool log_launches;
    const char *graph_dot;
    bool quiet;
    const char *plan_cache;   /* --plan-cache FILE; NULL: the default (zr_backend_plan_cache) */
    bool no_plan_cache;       /* --no-plan-cache */
    bool ignore_eos;          /* --ignore-eos: end-of-generation tokens are never drawn */
    bool escape;              /* -e: \n, \t, \\, \xNN ... in the prompt and -r are processed */
    int color;                /* --color: 0 off (default), 1 on, -1 auto (a terminal, NO_COLOR unset) */
    bool verbose;             /* -v: the resolved settings on stderr before the run */
    const char *reverse[ZR_MAX_REVERSE]; /* -r TEXT: stop when the generated text ends with one */
    int n_reverse;
    char notes[ZR_MAX_NOTES][160]; /* llama.cpp options accepted that do not apply, one line each */
    int n_notes;
    bool help;                /* --help: print the usage and exit 0 */
    int resume_fd;            /* hidden --resume-fd N: go on with the run saved there (src/app/resume.h); -1 none */
    bool chat;                /* zrun chat, -cnv, -i, -sys: a conversation (cmd_chat.c); -p/-f: the first message */
    bool single_turn;         /* -st/--single-turn: the conversation ends after the first reply */
    const char *system_prompt;/* -sys/--system-prompt TEXT */
    const char *chat_template;/* --chat-template NAME|FILE (default: the model's) */
} ZrRunSettings;

#define ZR_RUN_DEFAULT_N_PREDICT 128

void zr_run_settings_defaults(ZrRunSettings *s);
/* Parses argv[1..argc) (argv[0] names the command). A bad option or value fails with
 * ZR_E_USAGE and a message naming the option, what was expected and what was found. */
int zr_cli_parse_run(ZrRunSettings *s, int argc, char **argv, ZrError *err);
/* zrun chat: the same options, s->chat set and no prompt required. */
int zr_cli_parse_chat(ZrRunSettings *s, int argc, char **argv, ZrError *err);

/* Checked conversions of an option's argument: the whole string must be a decimal number in
 * [lo, hi] ("0x10", " 5", "1e", "inf", "nan" are refused; floats: digits, one point, an
 * exponent). opt names the option in the message. */
int zr_cli_int(const char *opt, const char *arg, long lo, long hi, int *out, ZrError *err);
int zr_cli_float(const char *opt, const char *arg, double lo, double hi, float *out, ZrError *err);
/* A float strictly above lo (the repetition penalty: > 0). */
int zr_cli_float_above(const char *opt, const char *arg, double lo, float *out, ZrError *err);
int zr_cli_u64(const char *opt, const char *arg, uint64_t *out, ZrError *err);

/* llama.cpp options zrun accepts without a use for them, shared by run and bench (their ids go
 * into a command's option table, opt.h); zr_cli_compat_note says why each does not apply, and
 * zr_cli_note_compat writes "zrun: note: -ngl 99 ignored: ..." into the next of notes. */
enum {
    ZR_COMPAT_NGL = 1000, /* -ngl N: layers on the GPU */
    ZR_COMPAT_FA,         /* -fa: flash attention */
    ZR_COMPAT_BATCH,      /* -b N */
    ZR_COMPAT_UBATCH,     /* -ub N */
    ZR_COMPAT_MMAP,       /* -mmp 0|1, --mmap, --no-mmap */
};
const char *zr_cli_compat_note(int id);
void zr_cli_note_compat(char (*notes)[160], int *n_notes, int max, const char *label, const char *value, int id);

/* Processes the escapes llama.cpp's -e knows (\n \r \t \' \" \\ \xNN) in place; an unknown or
 * incomplete one stays as written. Returns the new length. */
size_t zr_cli_unescape(char *s, size_t len);
