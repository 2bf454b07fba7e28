/* A driver double for CPU tests: a ZrCuDriver whose entry points run on the host.
 * "Device memory" is host memory (CUdeviceptr = the host address), copies are memcpy, a
 * CUfunction is a FakeKernel whose `run` gets the kernelParams array, a graph node keeps a
 * copy of its parameter bytes (as the driver does) and cuGraphLaunch runs the nodes in order.
 * A kernel named zr_fault_trap poisons the "context": every sync returns
 * CUDA_ERROR_LAUNCH_FAILED until cuDevicePrimaryCtxReset. Every call is counted and any of them can be told to fail with a given CUresult. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "cuda/driver.h"
#include "cuda/module.h"

typedef struct FakeKernel {
    const char *name;
    int n_params;
    size_t sizes[8];
    void (*run)(void **params);
} FakeKernel;

typedef struct FakeNode {
    const FakeKernel *k;
    unsigned grid[3], block[3], shared;
    unsigned char params[256]; /* copied at cuGraphAddKernelNode, like the driver */
    size_t n_deps;
    int dep; /* index of the single dependency, -1 for none */
    CUgraphEdgeData edge; /* of that dependency (all zero: a plain edge) */
    unsigned cluster[3];  /* cuGraphKernelNodeSetAttribute's CLUSTER_DIMENSION (zeros: none set) */
} FakeNode;

typedef struct FakeState {
    const FakeKernel *kernels; /* the "module" */
    int n_kernels;
    bool param_info;           /* provide cuFuncGetParamInfo */
    /* counters */
    int launches, graphs_created, graphs_destroyed, nodes_added, instantiated, exec_destroyed, graph_launches,
        dot_prints, syncs, h2d, d2h, allocs, frees, resets, add_deps_calls;
    FakeNode nodes[1024];
    int n_nodes;
    /* failure injection: the Nth call (1-based; 0 = never) returns the given result */
    int fail_launch_at; CUresult launch_result;
    int fail_add_node_at; CUresult add_node_result;
    CUresult instantiate_result, graph_launch_result, sync_result, alloc_result;
    CUresult add_deps_result;              /* every cuGraphAddDependencies returns it */
    CUresult instantiate_programmatic_result; /* instantiating a graph with a programmatic edge */
    int cc_major, cc_minor;                /* compute capability reported (0: 1.1) */
    int launches_ex;                       /* of `launches`, those through cuLaunchKernelEx */
    CUlaunchConfig last_ex;                /* the last cuLaunchKernelEx's configuration ... */
    CUlaunchAttribute last_ex_attr;        /* ... and its one attribute (else id -1) */
    CUlaunchAttribute last_ex_attrs[4];    /* ... all of them (last_ex.numAttrs, up to 4) */
    size_t mem_free; /* reported by cuMemGetInfo */
    bool poison_is_process_wide; /* like driver 580: a reset does not clear the trap's error */
} FakeState;

/* Resets the state and returns the driver table (both are process-wide in the test). */
const ZrCuDriver *fake_driver(const FakeKernel *kernels, int n_kernels, bool param_info);
FakeState *fake_state(void);
/* The device is compute capability major.minor, and the table has cuGraphAddDependencies and
 * cuLaunchKernelEx or not (fake_driver gives 1.1 and neither). Call before zr_cuda_open (it
 * reads the properties). */
void fake_set_pdl(int cc_major, int cc_minor, bool add_dependencies, bool launch_ex);
/* The table has cuGraphKernelNodeSetAttribute or not (fake_driver: not). */
void fake_set_node_attributes(bool on);
/* Opens the double with the one kernel fk (param_info off), its context and module, and looks
 * the kernel up into *kern with its parameters' sizes from a cu/kernels.def string (P: 8 bytes,
 * I and F: 4); 0, or nonzero with err set. */
int fake_open_kernel(const FakeKernel *fk, const char *params, ZrCuda *cuda, ZrKernel *kern, ZrError *err);
/* The CUfunction for a fake kernel (what cuModuleGetFunction returns). */
CUfunction fake_fn(const FakeKernel *k);
