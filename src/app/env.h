/* The environment, read once at zrun's edge (main) and handed to the commands as values: no
 * other file calls getenv, and the library below the commands never sees the environment. */
#pragma once
#include <stdbool.h>

typedef struct ZrEnv {
    bool graph;        /* CUDA_GRAPH_ENABLE=1: graph decode when no --graph/--no-graph flag says */
    const char *fault; /* ZRUN_FAULT, the test hook (src/cuda/fault.h, src/app/fault_lost.h); NULL = unset */
    bool no_color;     /* NO_COLOR set (no-color.org): --color auto stays plain */
    bool stdout_tty;   /* standard output is a terminal (--color auto) */
    bool stdin_tty;    /* standard input is a terminal: the chat edits lines with libedit */
    bool stderr_tty;   /* standard error is a terminal: the load progress line is drawn there */
    double t_start_ms; /* the process's start: zr_clock_ms() at the top of main */
    const char *xdg_cache_home; /* XDG_CACHE_HOME (the plan cache's default place); NULL = unset or empty */
    const char *home;           /* HOME; NULL = unset or empty */
} ZrEnv;

void zr_env_read(ZrEnv *out);
