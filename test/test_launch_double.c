#include "test_launch_double.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FakeState st;
static ZrCuDriver drv;
static int graph_token, exec_token, stream_token, ctx_token, mod_token, event_token;

FakeState *fake_state(void) { return &st; }
CUfunction fake_fn(const FakeKernel *k) { return (CUfunction)(uintptr_t)k; }

static size_t param_offset(const FakeKernel *k, int i) {
    size_t off = 0;
    for (int j = 0; j <= i; j++) {
        size_t sz = k->sizes[j], al = sz >= 8 ? 8 : sz >= 4 ? 4 : sz >= 2 ? 2 : 1;
        off = (off + al - 1) / al * al;
        if (j < i) off += sz;
    }
    return off;
}

static CUresult f_name(CUresult r, const char **s) {
    (void)r;
    *s = NULL;
    return CUDA_ERROR_INVALID_VALUE; /* let driver.c use its own table */
}
static CUresult f_init(unsigned f) { (void)f; return CUDA_SUCCESS; }
static CUresult f_dev_get(CUdevice *d, int o) { *d = o; return CUDA_SUCCESS; }
static CUresult f_dev_count(int *n) { *n = 1; return CUDA_SUCCESS; }
static CUresult f_dev_name(char *n, int len, CUdevice d) { (void)d; snprintf(n, (size_t)len, "Fake GPU"); return CUDA_SUCCESS; }
static CUresult f_total_mem(size_t *b, CUdevice d) { (void)d; *b = (size_t)1 << 34; return CUDA_SUCCESS; }
static CUresult f_attr(int *v, int a, CUdevice d) {
    (void)d;
    *v = a == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT ? 4 : 1;
    if (a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR && st.cc_major) *v = st.cc_major;
    if (a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR && st.cc_major) *v = st.cc_minor;
    return CUDA_SUCCESS;
}
static CUresult f_retain(CUcontext *c, CUdevice d) {
    (void)d;
    if (st.sync_result && st.poison_is_process_wide) return st.sync_result;
    *c = (CUcontext)&ctx_token;
    return CUDA_SUCCESS;
}
static CUresult f_release(CUdevice d) { (void)d; return CUDA_SUCCESS; }
/* Device and pinned host memory live in one list, as in a context: a reset frees it all (as
 * cuDevicePrimaryCtxReset does), so memory the code under test loses with its context is not a
 * leak of the double's (LeakSanitizer) and memory it forgets otherwise still is one. */
typedef union Blk {
    struct {
        union Blk *prev, *next;
    } l;
    max_align_t align;
} Blk;
static Blk live = {.l = {&live, &live}};

static void *blk_alloc(size_t b) {
    Blk *k = calloc(1, sizeof *k + (b ? b : 1));
    if (!k) return NULL;
    k->l.prev = live.l.prev;
    k->l.next = &live;
    live.l.prev->l.next = k;
    live.l.prev = k;
    return k + 1;
}

/* false for an address that is not live (freed, or lost with its context) */
static bool blk_free(void *p) {
    for (Blk *k = live.l.next; k != &live; k = k->l.next)
        if (k + 1 == p) {
            k->l.prev->l.next = k->l.next;
            k->l.next->l.prev = k->l.prev;
            free(k);
            return true;
        }
    return false;
}

static CUresult f_reset(CUdevice d) {
    (void)d;
    st.resets++;
    while (live.l.next != &live) blk_free(live.l.next + 1);
    if (!st.poison_is_process_wide) st.sync_result = CUDA_SUCCESS;
    return CUDA_SUCCESS;
}
static CUresult f_set_current(CUcontext c) { (void)c; return CUDA_SUCCESS; }
static CUresult f_load(CUmodule *m, const void *img) { (void)img; *m = (CUmodule)&mod_token; return CUDA_SUCCESS; }
static CUresult f_unload(CUmodule m) { (void)m; return CUDA_SUCCESS; }
static CUresult f_get_function(CUfunction *f, CUmodule m, const char *name) {
    (void)m;
    for (int i = 0; i < st.n_kernels; i++)
        if (!strcmp(st.kernels[i].name, name)) {
            *f = fake_fn(&st.kernels[i]);
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_NOT_FOUND;
}
static CUresult f_param_info(CUfunction f, size_t i, size_t *off, size_t *sz) {
    const FakeKernel *k = (const FakeKernel *)f;
    if ((int)i >= k->n_params) return CUDA_ERROR_INVALID_VALUE;
    *off = param_offset(k, (int)i);
    *sz = k->sizes[i];
    return CUDA_SUCCESS;
}
static CUresult f_set_attr(CUfunction f, int a, int v) { (void)f; (void)a; (void)v; return CUDA_SUCCESS; }
static CUresult f_mem_info(size_t *fr, size_t *t) { *fr = st.mem_free; *t = (size_t)1 << 34; return CUDA_SUCCESS; }
static CUresult f_alloc(CUdeviceptr *p, size_t b) {
    if (st.alloc_result) return st.alloc_result;
    void *h = blk_alloc(b);
    if (!h) return CUDA_ERROR_OUT_OF_MEMORY;
    st.allocs++;
    *p = (CUdeviceptr)(uintptr_t)h;
    return CUDA_SUCCESS;
}
static CUresult f_free(CUdeviceptr p) {
    st.frees++;
    return !p || blk_free((void *)(uintptr_t)p) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
static CUresult f_host_alloc(void **p, size_t b, unsigned f) { (void)f; *p = blk_alloc(b); return *p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY; }
static CUresult f_host_free(void *p) { return !p || blk_free(p) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
static CUresult f_h2d(CUdeviceptr d, const void *s, size_t b, CUstream x) { (void)x; st.h2d++; memcpy((void *)(uintptr_t)d, s, b); return CUDA_SUCCESS; }
static CUresult f_d2h(void *d, CUdeviceptr s, size_t b, CUstream x) { (void)x; st.d2h++; memcpy(d, (void *)(uintptr_t)s, b); return CUDA_SUCCESS; }
static CUresult f_d2d(CUdeviceptr d, CUdeviceptr s, size_t b, CUstream x) { (void)x; memmove((void *)(uintptr_t)d, (void *)(uintptr_t)s, b); return CUDA_SUCCESS; }
static CUresult f_memset8(CUdeviceptr d, unsigned char v, size_t n, CUstream x) { (void)x; memset((void *)(uintptr_t)d, v, n); return CUDA_SUCCESS; }
static CUresult f_memset32(CUdeviceptr d, unsigned v, size_t n, CUstream x) {
    (void)x;
    for (size_t i = 0; i < n; i++) ((uint32_t *)(uintptr_t)d)[i] = v;
    return CUDA_SUCCESS;
}
static CUresult f_stream_create(CUstream *s, unsigned f) { (void)f; *s = (CUstream)&stream_token; return CUDA_SUCCESS; }
static CUresult f_sync(CUstream s) { (void)s; st.syncs++; return st.sync_result; }
static CUresult f_stream_destroy(CUstream s) { (void)s; return CUDA_SUCCESS; }
static CUresult f_event_create(CUevent *e, unsigned f) { (void)f; *e = (CUevent)&event_token; return CUDA_SUCCESS; }
static CUresult f_event_record(CUevent e, CUstream s) { (void)e; (void)s; return CUDA_SUCCESS; }
static CUresult f_event_sync(CUevent e) { (void)e; return CUDA_SUCCESS; }
static CUresult f_event_elapsed(float *ms, CUevent a, CUevent b) { (void)a; (void)b; *ms = 0.5f; return CUDA_SUCCESS; }
static CUresult f_event_destroy(CUevent e) { (void)e; return CUDA_SUCCESS; }
static CUresult f_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                         unsigned sh, CUstream s, void **params, void **extra) {
    (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)sh; (void)s; (void)extra;
    st.launches++;
    if (st.fail_launch_at && st.launches == st.fail_launch_at) return st.launch_result;
    const FakeKernel *k = (const FakeKernel *)f;
    if (!strcmp(k->name, "zr_fault_trap")) st.sync_result = CUDA_ERROR_LAUNCH_FAILED; /* poisons, like __trap() */
    else if (k->run) k->run(params);
    return CUDA_SUCCESS;
}
static CUresult f_launch_ex(const CUlaunchConfig *c, CUfunction f, void **params, void **extra) {
    st.launches_ex++;
    st.last_ex = *c;
    st.last_ex_attr = c->numAttrs == 1 ? c->attrs[0] : (CUlaunchAttribute){.id = -1};
    for (unsigned i = 0; i < c->numAttrs && i < 4; i++) st.last_ex_attrs[i] = c->attrs[i];
    return f_launch(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ,
                    c->sharedMemBytes, c->hStream, params, extra);
}
static CUresult f_node_set_attr(CUgraphNode node, int attr, const CUlaunchAttributeValue *v) {
    const int i = (int)(uintptr_t)node - 1;
    if (i < 0 || i >= st.n_nodes || attr != CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) return CUDA_ERROR_INVALID_VALUE;
    st.nodes[i].cluster[0] = v->clusterDim.x;
    st.nodes[i].cluster[1] = v->clusterDim.y;
    st.nodes[i].cluster[2] = v->clusterDim.z;
    return CUDA_SUCCESS;
}
static CUresult f_graph_create(CUgraph *g, unsigned f) {
    (void)f;
    st.graphs_created++;
    st.n_nodes = 0;
    *g = (CUgraph)&graph_token;
    return CUDA_SUCCESS;
}
static CUresult f_add_node(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n_deps,
                           const CUDA_KERNEL_NODE_PARAMS *p) {
    (void)g;
    st.nodes_added++;
    if (st.fail_add_node_at && st.nodes_added == st.fail_add_node_at) return st.add_node_result;
    if (st.n_nodes == (int)(sizeof st.nodes / sizeof st.nodes[0])) return CUDA_ERROR_OUT_OF_MEMORY;
    FakeNode *n = &st.nodes[st.n_nodes];
    memset(n, 0, sizeof *n);
    n->k = (const FakeKernel *)p->func;
    n->grid[0] = p->gridDimX; n->grid[1] = p->gridDimY; n->grid[2] = p->gridDimZ;
    n->block[0] = p->blockDimX; n->block[1] = p->blockDimY; n->block[2] = p->blockDimZ;
    n->shared = p->sharedMemBytes;
    for (int i = 0; i < n->k->n_params; i++)
        memcpy(n->params + param_offset(n->k, i), p->kernelParams[i], n->k->sizes[i]);
    n->n_deps = n_deps;
    n->dep = n_deps ? (int)(uintptr_t)deps[0] - 1 : -1;
    *node = (CUgraphNode)(uintptr_t)(st.n_nodes + 1);
    st.n_nodes++;
    return CUDA_SUCCESS;
}
/* What the driver checks: nodes of this graph, a programmatic edge from the programmatic port,
 * no port on the downstream side, reserved bytes zero, no edge twice. */
static CUresult f_add_deps(CUgraph g, const CUgraphNode *from, const CUgraphNode *to, const CUgraphEdgeData *edges,
                           size_t n) {
    (void)g;
    st.add_deps_calls++;
    if (st.add_deps_result) return st.add_deps_result;
    for (size_t i = 0; i < n; i++) {
        int a = (int)(uintptr_t)from[i] - 1, b = (int)(uintptr_t)to[i] - 1;
        CUgraphEdgeData e = edges ? edges[i] : (CUgraphEdgeData){0};
        static const unsigned char zero[5];
        if (a < 0 || a >= st.n_nodes || b < 0 || b >= st.n_nodes || a == b) return CUDA_ERROR_INVALID_VALUE;
        if (e.to_port || memcmp(e.reserved, zero, sizeof zero)) return CUDA_ERROR_INVALID_VALUE;
        if ((e.type == CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC) != (e.from_port == CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC))
            return CUDA_ERROR_INVALID_VALUE;
        if (st.nodes[b].n_deps) return CUDA_ERROR_INVALID_VALUE; /* the double keeps one dependency per node */
        st.nodes[b].n_deps = 1;
        st.nodes[b].dep = a;
        st.nodes[b].edge = e;
    }
    return CUDA_SUCCESS;
}
static CUresult f_instantiate(CUgraphExec *e, CUgraph g, unsigned long long f) {
    (void)g; (void)f;
    if (st.instantiate_result) return st.instantiate_result;
    for (int i = 0; st.instantiate_programmatic_result && i < st.n_nodes; i++)
        if (st.nodes[i].edge.type == CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC) return st.instantiate_programmatic_result;
    st.instantiated++;
    *e = (CUgraphExec)&exec_token;
    return CUDA_SUCCESS;
}
static CUresult f_graph_launch(CUgraphExec e, CUstream s) {
    (void)e; (void)s;
    st.graph_launches++;
    if (st.graph_launch_result) return st.graph_launch_result;
    for (int i = 0; i < st.n_nodes; i++) {
        FakeNode *n = &st.nodes[i];
        void *params[8];
        for (int j = 0; j < n->k->n_params; j++) params[j] = n->params + param_offset(n->k, j);
        if (n->k->run) n->k->run(params);
    }
    return CUDA_SUCCESS;
}
static CUresult f_exec_destroy(CUgraphExec e) { (void)e; st.exec_destroyed++; return CUDA_SUCCESS; }
static CUresult f_graph_destroy(CUgraph g) { (void)g; st.graphs_destroyed++; return CUDA_SUCCESS; }
static CUresult f_dot(CUgraph g, const char *path, unsigned f) {
    (void)g; (void)f;
    st.dot_prints++;
    FILE *o = fopen(path, "w");
    if (!o) return CUDA_ERROR_INVALID_VALUE;
    /* the shape of the driver's file: node statements, then one edge statement per line */
    fprintf(o, "digraph dot {\nsubgraph cluster_1 {\nlabel=\"graph_1\" graph[style=\"dashed\"];\n");
    for (int i = 0; i < st.n_nodes; i++)
        fprintf(o, "\"graph_1_node_%d\"[style=\"bold\" shape=\"record\" label=\"{KERNEL | %s}\"];\n", i, st.nodes[i].k->name);
    for (int i = 0; i < st.n_nodes; i++)
        if (st.nodes[i].n_deps) fprintf(o, "\"graph_1_node_%d\" -> \"graph_1_node_%d\" [headlabel=0];\n", st.nodes[i].dep, i);
    fprintf(o, "}\n}\n");
    fclose(o);
    return CUDA_SUCCESS;
}

void fake_set_node_attributes(bool on) { drv.cuGraphKernelNodeSetAttribute = on ? f_node_set_attr : NULL; }

void fake_set_pdl(int cc_major, int cc_minor, bool add_dependencies, bool launch_ex) {
    st.cc_major = cc_major;
    st.cc_minor = cc_minor;
    drv.cuGraphAddDependencies = add_dependencies ? f_add_deps : NULL;
    drv.cuLaunchKernelEx = launch_ex ? f_launch_ex : NULL;
}

const ZrCuDriver *fake_driver(const FakeKernel *kernels, int n_kernels, bool param_info) {
    memset(&st, 0, sizeof st);
    st.kernels = kernels;
    st.n_kernels = n_kernels;
    st.param_info = param_info;
    st.mem_free = (size_t)3 << 20;
    drv = (ZrCuDriver){
        .driver_version = 13000,
        .cuGetErrorName = f_name,
        .cuInit = f_init,
        .cuDeviceGet = f_dev_get,
        .cuDeviceGetCount = f_dev_count,
        .cuDeviceGetName = f_dev_name,
        .cuDeviceTotalMem = f_total_mem,
        .cuDeviceGetAttribute = f_attr,
        .cuDevicePrimaryCtxRetain = f_retain,
        .cuDevicePrimaryCtxRelease = f_release,
        .cuDevicePrimaryCtxReset = f_reset,
        .cuCtxSetCurrent = f_set_current,
        .cuModuleLoadData = f_load,
        .cuModuleUnload = f_unload,
        .cuModuleGetFunction = f_get_function,
        .cuFuncGetParamInfo = param_info ? f_param_info : NULL,
        .cuFuncSetAttribute = f_set_attr,
        .cuMemGetInfo = f_mem_info,
        .cuMemAlloc = f_alloc,
        .cuMemFree = f_free,
        .cuMemHostAlloc = f_host_alloc,
        .cuMemFreeHost = f_host_free,
        .cuMemcpyHtoDAsync = f_h2d,
        .cuMemcpyDtoHAsync = f_d2h,
        .cuMemcpyDtoDAsync = f_d2d,
        .cuMemsetD8Async = f_memset8,
        .cuMemsetD32Async = f_memset32,
        .cuStreamCreate = f_stream_create,
        .cuStreamSynchronize = f_sync,
        .cuStreamDestroy = f_stream_destroy,
        .cuEventCreate = f_event_create,
        .cuEventRecord = f_event_record,
        .cuEventSynchronize = f_event_sync,
        .cuEventElapsedTime = f_event_elapsed,
        .cuEventDestroy = f_event_destroy,
        .cuLaunchKernel = f_launch,
        .cuGraphCreate = f_graph_create,
        .cuGraphAddKernelNode = f_add_node,
        .cuGraphInstantiateWithFlags = f_instantiate,
        .cuGraphLaunch = f_graph_launch,
        .cuGraphExecDestroy = f_exec_destroy,
        .cuGraphDestroy = f_graph_destroy,
        .cuGraphDebugDotPrint = f_dot,
    };
    return &drv;
}

int fake_open_kernel(const FakeKernel *fk, const char *params, ZrCuda *cuda, ZrKernel *kern, ZrError *err) {
    size_t sizes[64];
    const int n = (int)strlen(params);
    if (n > 64 || n != fk->n_params)
        return zr_err(err, ZR_E_INTERNAL, "%s: %d parameters, %d listed", fk->name, n, fk->n_params);
    for (int i = 0; i < n; i++) sizes[i] = params[i] == 'P' ? 8 : 4;
    const ZrCuDriver *d = fake_driver(fk, 1, false);
    if (zr_cuda_open(d, 0, cuda, err)) return 1;
    if (zr_cuda_load_module(cuda, "image", err) || zr_cuda_kernel(cuda, fk->name, sizes, n, kern, err)) {
        zr_cuda_close(cuda);
        return 1;
    }
    return 0;
}
