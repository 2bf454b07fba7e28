#include "cuda/fault.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    ZrFaultKind kind;
    const char *name;
    int default_step;
} k_faults[] = {
    {ZR_FAULT_GRAPH_BUILD, "graph-build", 0},
    {ZR_FAULT_GRAPH_INSTANTIATE, "graph-instantiate", 0},
    {ZR_FAULT_GRAPH_LAUNCH, "graph-launch", 1},
    {ZR_FAULT_GRAPH_901, "graph-901", 1},
    {ZR_FAULT_REPLAY_MISMATCH, "replay-mismatch", 1},
    {ZR_FAULT_STICKY, "sticky", 1},
};

const char *zr_fault_name(ZrFaultKind kind) {
    for (size_t i = 0; i < sizeof k_faults / sizeof k_faults[0]; i++)
        if (k_faults[i].kind == kind) return k_faults[i].name;
    return "none";
}

int zr_fault_parse(const char *spec, ZrFault *out, ZrError *err) {
    memset(out, 0, sizeof *out);
    if (!spec || !*spec) return ZR_OK;
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    /* not a graph fault: src/app/fault_lost.c injects it, in front of any backend */
    if (len == strlen(ZR_FAULT_CONTEXT_LOST_NAME) && !strncmp(spec, ZR_FAULT_CONTEXT_LOST_NAME, len)) return ZR_OK;
    for (size_t i = 0; i < sizeof k_faults / sizeof k_faults[0]; i++) {
        if (strlen(k_faults[i].name) != len || strncmp(spec, k_faults[i].name, len)) continue;
        out->kind = k_faults[i].kind;
        out->step = k_faults[i].default_step;
        if (colon) {
            char *end = NULL;
            errno = 0;
            long v = strtol(colon + 1, &end, 10);
            if (!colon[1] || *end || errno || v < 0 || v > 1000000000L) {
                memset(out, 0, sizeof *out);
                return zr_err(err, ZR_E_USAGE, "ZRUN_FAULT=%s: TOKEN must be a decode step number >= 0, found \"%s\"",
                              spec, colon + 1);
            }
            out->step = (int)v;
        }
        return ZR_OK;
    }
    return zr_err(err, ZR_E_USAGE,
                  "ZRUN_FAULT=%s: expected graph-build, graph-instantiate, graph-launch, graph-901, "
                  "replay-mismatch or sticky, optionally followed by :TOKEN (or context-lost:TOKEN[,TOKEN])",
                  spec);
}

bool zr_fault_fires(ZrFault *f, ZrFaultKind kind, int step) {
    if (!f || f->fired || f->kind != kind || step < f->step) return false;
    f->fired = true;
    return true;
}
