/* The one command-line reader of every subcommand, with llama.cpp's spellings.
 *
 * An argument is first matched whole against the option names: long ones ("--temp",
 * "--temp=0.5") and llama.cpp's single-dash long ones ("-ngl", "-cnv", "-fa", "-mmp", "-ub",
 * "-sys"). Only a single-dash argument that names no option is read as bundled one-letter
 * options, getopt style: "-n64" is "-n 64", "-qv" would be "-q -v". So "-ngl 99" is never read
 * as "-n gl". An option that takes a value takes the next argument whatever it looks like
 * ("-p -", "-n -1"); "--" ends the options.
 *
 * The reader knows nothing of what the options mean: each command keeps its table and its
 * switch over the ids (cli.c for run, bench.c, cmd_eval.c, cmd_tokenize.c, cmd_info.c). */
#pragma once
#include <stdbool.h>

#include "err.h"

typedef enum ZrOptKind {
    ZR_OPT_FLAG,  /* no value */
    ZR_OPT_VALUE, /* a value: the next argument, the rest of a bundle, or after '=' */
    ZR_OPT_MAYBE, /* an optional value: the next argument when it is one of `choices` */
} ZrOptKind;

typedef struct ZrOpt {
    int id;              /* > 0, the command's own */
    const char *names;   /* "-n|--n-predict|--predict": every spelling; messages name the first
                          * single-dash one and the first double-dash one ("-n/--n-predict") */
    ZrOptKind kind;
    const char *choices; /* ZR_OPT_MAYBE: "on|off|auto|0|1" */
} ZrOpt;

/* zr_opt_next's answers besides an option's id. */
enum { ZR_OPT_END = 0, ZR_OPT_ARG = -1, ZR_OPT_ERROR = -2 };

typedef struct ZrOptReader {
    int argc;
    char **argv;
    int i;              /* the next argument */
    const char *bundle; /* the rest of a bundle ("-qv": "v"), or NULL */
    bool only_args;     /* after "--" */
    char label[80];     /* the last option, for messages */
} ZrOptReader;

/* Reads argv[1..argc) (argv[0] names the command). */
void zr_opt_init(ZrOptReader *r, int argc, char **argv);
/* The next option's id (its value, or NULL, in *value), ZR_OPT_ARG for an argument that is not
 * an option (in *value), ZR_OPT_END, or ZR_OPT_ERROR with err set (ZR_E_USAGE: an unknown
 * option, a value missing or given to a flag). */
int zr_opt_next(ZrOptReader *r, const ZrOpt *opts, const char **value, ZrError *err);
/* The last option as messages name it: "-n/--n-predict", "--temp", "-ngl/--n-gpu-layers". */
const char *zr_opt_label(const ZrOptReader *r);
