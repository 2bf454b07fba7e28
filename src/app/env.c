#include "env.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void zr_env_read(ZrEnv *out) {
    const char *graph = getenv("CUDA_GRAPH_ENABLE");
    const char *fault = getenv("ZRUN_FAULT");
    out->graph = graph && !strcmp(graph, "1"); /* the documented value: anything else leaves it off */
    out->fault = fault && *fault ? fault : NULL;
    const char *nc = getenv("NO_COLOR");
    out->no_color = nc && *nc;
    out->stdout_tty = isatty(STDOUT_FILENO) == 1;
    out->stdin_tty = isatty(STDIN_FILENO) == 1;
    out->stderr_tty = isatty(STDERR_FILENO) == 1;
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    out->xdg_cache_home = xdg && *xdg ? xdg : NULL;
    out->home = home && *home ? home : NULL;
}
