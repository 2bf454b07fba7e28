#include "env.h"

#include <stdlib.h>
#include <string.h>

void zr_env_read(ZrEnv *out) {
    const char *graph = getenv("CUDA_GRAPH_ENABLE");
    const char *fault = getenv("ZRUN_FAULT");
    out->graph = graph && !strcmp(graph, "1"); /* the documented value: anything else leaves it off */
    out->fault = fault && *fault ? fault : NULL;
}
