/* Fault injection for the decode-graph paths: a documented test hook,
 *     ZRUN_FAULT=graph-build|graph-instantiate|graph-launch|graph-901|replay-mismatch|sticky[:TOKEN]
 * parsed once into the backend's state (never a global) and queried by the graph path. TOKEN is
 * the decode step (0 = the first decode token, the recording pass); the fault fires once, at
 * the first opportunity at or after that step:
 *   graph-build        cuGraphAddKernelNode of the middle node fails (CUDA_ERROR_INVALID_VALUE)
 *   graph-instantiate  cuGraphInstantiateWithFlags fails (CUDA_ERROR_INVALID_VALUE)
 *   graph-launch       cuGraphLaunch fails (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES); default step 1
 *   graph-901          cuGraphLaunch fails with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED; default 1
 *   replay-mismatch    one bit of a checked replay's logits is flipped; at the first checked
 *                      replay at or after TOKEN (default 1), never if none is checked
 *   sticky             a kernel that traps is launched after the step: a real sticky error
 *                      (CUDA_ERROR_LAUNCH_FAILED) that poisons the context; default 1
 * ZRUN_FAULT=context-lost:... is accepted here as no graph fault: it is injected in front of any
 * backend (src/app/fault_lost.h). */
#pragma once
#include <stdbool.h>

#include "err.h"

typedef enum ZrFaultKind {
    ZR_FAULT_NONE = 0,
    ZR_FAULT_GRAPH_BUILD,
    ZR_FAULT_GRAPH_INSTANTIATE,
    ZR_FAULT_GRAPH_LAUNCH,
    ZR_FAULT_GRAPH_901,
    ZR_FAULT_REPLAY_MISMATCH,
    ZR_FAULT_STICKY,
} ZrFaultKind;

typedef struct ZrFault {
    ZrFaultKind kind;
    int step;   /* decode step from which it may fire */
    bool fired; /* it fires once */
} ZrFault;

#define ZR_FAULT_CONTEXT_LOST_NAME "context-lost"

/* NULL or "" (or context-lost) gives ZR_FAULT_NONE. Anything else unknown is ZR_E_USAGE naming the accepted values. */
int zr_fault_parse(const char *spec, ZrFault *out, ZrError *err);
/* True (once) when the fault is `kind` and `step` has reached its step; marks it fired. */
bool zr_fault_fires(ZrFault *f, ZrFaultKind kind, int step);
const char *zr_fault_name(ZrFaultKind kind);
