/* Our own declarations of the CUDA Driver API and cuBLASLt ABI that zrun uses, so nothing in
 * src/ needs a CUDA header: libcuda and libcublasLt are opened with dlopen at run time.
 * Every value here is an ABI fact copied from cuda.h / cudaTypedefs.h / cublasLt.h of CUDA 13.0.
 * Function-pointer types are named after the versioned symbol they resolve to; ZR_CU_V_*
 * is the cudaVersion argument that makes cuGetProcAddress return exactly that version. */
#pragma once
#include <stddef.h>
#include <stdint.h>

/* ---- Driver API scalar and handle types ---- */
typedef int CUresult;                      /* enum cudaError_enum */
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;    /* CUdeviceptr_v2: 64-bit on every 64-bit host */
typedef uint64_t cuuint64_t;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUkern_st *CUkernel;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct CUgraphExec_st *CUgraphExec;

/* ---- CUresult values ---- */
enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_DEINITIALIZED = 4,
    CUDA_ERROR_STUB_LIBRARY = 34,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_IMAGE = 200,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
    CUDA_ERROR_ECC_UNCORRECTABLE = 214,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
    CUDA_ERROR_LAUNCH_TIMEOUT = 702,
    CUDA_ERROR_CONTEXT_IS_DESTROYED = 709,
    CUDA_ERROR_ASSERT = 710,
    CUDA_ERROR_HARDWARE_STACK_ERROR = 714,
    CUDA_ERROR_ILLEGAL_INSTRUCTION = 715,
    CUDA_ERROR_MISALIGNED_ADDRESS = 716,
    CUDA_ERROR_INVALID_ADDRESS_SPACE = 717,
    CUDA_ERROR_INVALID_PC = 718,
    CUDA_ERROR_LAUNCH_FAILED = 719,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
    CUDA_ERROR_UNKNOWN = 999,
};

/* ---- enums and flags ---- */
enum {
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
    CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
    CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13,
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
    CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36,
    CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37,
    CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
};
enum {
    CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
    CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
    CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
};
enum { CU_STREAM_NON_BLOCKING = 0x1 };
enum { CU_EVENT_DEFAULT = 0x0, CU_EVENT_DISABLE_TIMING = 0x2 };
enum { CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1 };
enum {
    CU_GET_PROC_ADDRESS_SUCCESS = 0,
    CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
    CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
};
typedef int CUdriverProcAddressQueryResult;
enum { CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE = 1 };

/* CUDA_KERNEL_NODE_PARAMS_v2 (CUDA 12.0+): func is used when kern is NULL; ctx NULL = current. */
typedef struct CUDA_KERNEL_NODE_PARAMS {
    CUfunction func;
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    void **kernelParams;
    void **extra;
    CUkernel kern;
    CUcontext ctx;
} CUDA_KERNEL_NODE_PARAMS;

/* CUgraphEdgeData (CUDA 12.3+): what an edge waits for. All zero = the upstream node's full
 * completion with its memory visible; a programmatic edge (from_port PROGRAMMATIC, type
 * PROGRAMMATIC, kernel to kernel) lets the downstream kernel start once every block of the
 * upstream one has run griddepcontrol.launch_dependents (or exited); it then waits in
 * griddepcontrol.wait for the upstream kernel's completion and memory. */
typedef struct CUgraphEdgeData {
    unsigned char from_port;   /* CU_GRAPH_KERNEL_NODE_PORT_* */
    unsigned char to_port;     /* must be 0 */
    unsigned char type;        /* CU_GRAPH_DEPENDENCY_TYPE_* */
    unsigned char reserved[5]; /* must be 0 */
} CUgraphEdgeData;
enum { CU_GRAPH_KERNEL_NODE_PORT_DEFAULT = 0, CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC = 1 };
enum { CU_GRAPH_DEPENDENCY_TYPE_DEFAULT = 0, CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC = 1 };

/* cuLaunchKernelEx's configuration (CUDA 11.8+), with the two attributes zrun sets:
 * PROGRAMMATIC_STREAM_SERIALIZATION = 1 lets the kernel start before the previous kernel in the
 * stream has finished (once that one runs griddepcontrol.launch_dependents); the kernel then
 * waits in griddepcontrol.wait. CLUSTER_DIMENSION launches the grid as thread block clusters of
 * clusterDim blocks (sm_90+; graph kernel nodes take it through cuGraphKernelNodeSetAttribute). */
enum { CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6 };
typedef union CUlaunchAttributeValue {
    char pad[64];
    uint64_t align_; /* the real union holds pointers */
    struct {
        unsigned int x, y, z;
    } clusterDim;
    int programmaticStreamSerializationAllowed;
} CUlaunchAttributeValue;
typedef struct CUlaunchAttribute {
    int id; /* CUlaunchAttributeID */
    char pad[4];
    CUlaunchAttributeValue value;
} CUlaunchAttribute;
typedef struct CUlaunchConfig {
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    CUstream hStream;
    CUlaunchAttribute *attrs;
    unsigned int numAttrs;
} CUlaunchConfig;
_Static_assert(sizeof(CUlaunchAttribute) == 72, "CUlaunchAttribute is 72 bytes in cuda.h");
_Static_assert(sizeof(CUlaunchConfig) == 56, "CUlaunchConfig is 56 bytes in cuda.h");
_Static_assert(sizeof(CUgraphEdgeData) == 8, "CUgraphEdgeData is 8 bytes in cuda.h");

/* ---- function-pointer types (CUDAAPI is empty on Linux) ---- */
typedef CUresult (*PFN_cuGetProcAddress_v12000)(const char *symbol, void **pfn, int cudaVersion,
                                                cuuint64_t flags, CUdriverProcAddressQueryResult *status);
typedef CUresult (*PFN_cuGetProcAddress_v11030)(const char *symbol, void **pfn, int cudaVersion,
                                                cuuint64_t flags);
typedef CUresult (*PFN_cuGetErrorName)(CUresult error, const char **str);
typedef CUresult (*PFN_cuGetErrorString)(CUresult error, const char **str);
typedef CUresult (*PFN_cuInit)(unsigned int flags);
typedef CUresult (*PFN_cuDriverGetVersion)(int *version);
typedef CUresult (*PFN_cuDeviceGet)(CUdevice *dev, int ordinal);
typedef CUresult (*PFN_cuDeviceGetCount)(int *count);
typedef CUresult (*PFN_cuDeviceGetName)(char *name, int len, CUdevice dev);
typedef CUresult (*PFN_cuDeviceTotalMem_v2)(size_t *bytes, CUdevice dev);
typedef CUresult (*PFN_cuDeviceGetAttribute)(int *value, int attrib, CUdevice dev);
typedef CUresult (*PFN_cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
typedef CUresult (*PFN_cuDevicePrimaryCtxRelease_v2)(CUdevice dev);
typedef CUresult (*PFN_cuDevicePrimaryCtxReset_v2)(CUdevice dev);
typedef CUresult (*PFN_cuCtxSetCurrent)(CUcontext ctx);
typedef CUresult (*PFN_cuCtxCreate_v2)(CUcontext *ctx, unsigned int flags, CUdevice dev);
typedef CUresult (*PFN_cuCtxDestroy_v2)(CUcontext ctx);
typedef CUresult (*PFN_cuModuleLoadData)(CUmodule *mod, const void *image);
typedef CUresult (*PFN_cuModuleUnload)(CUmodule mod);
typedef CUresult (*PFN_cuModuleGetFunction)(CUfunction *fn, CUmodule mod, const char *name);
typedef CUresult (*PFN_cuModuleGetGlobal_v2)(CUdeviceptr *dptr, size_t *bytes, CUmodule mod, const char *name);
typedef CUresult (*PFN_cuFuncGetParamInfo)(CUfunction fn, size_t index, size_t *offset, size_t *size);
typedef CUresult (*PFN_cuFuncSetAttribute)(CUfunction fn, int attrib, int value);
typedef CUresult (*PFN_cuFuncGetAttribute)(int *value, int attrib, CUfunction fn);
typedef CUresult (*PFN_cuMemGetInfo_v2)(size_t *free_bytes, size_t *total_bytes);
typedef CUresult (*PFN_cuMemAlloc_v2)(CUdeviceptr *dptr, size_t bytes);
typedef CUresult (*PFN_cuMemFree_v2)(CUdeviceptr dptr);
typedef CUresult (*PFN_cuMemHostAlloc)(void **p, size_t bytes, unsigned int flags);
typedef CUresult (*PFN_cuMemFreeHost)(void *p);
typedef CUresult (*PFN_cuMemHostRegister_v2)(void *p, size_t bytes, unsigned int flags);
typedef CUresult (*PFN_cuMemHostUnregister)(void *p);
typedef CUresult (*PFN_cuMemcpyHtoDAsync_v2)(CUdeviceptr dst, const void *src, size_t bytes, CUstream s);
typedef CUresult (*PFN_cuMemcpyDtoHAsync_v2)(void *dst, CUdeviceptr src, size_t bytes, CUstream s);
typedef CUresult (*PFN_cuMemcpyDtoDAsync_v2)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s);
typedef CUresult (*PFN_cuMemsetD8Async)(CUdeviceptr dst, unsigned char value, size_t n, CUstream s);
typedef CUresult (*PFN_cuMemsetD32Async)(CUdeviceptr dst, unsigned int value, size_t n, CUstream s);
typedef CUresult (*PFN_cuStreamCreate)(CUstream *s, unsigned int flags);
typedef CUresult (*PFN_cuStreamSynchronize)(CUstream s);
typedef CUresult (*PFN_cuStreamQuery)(CUstream s);
typedef CUresult (*PFN_cuStreamDestroy_v2)(CUstream s);
typedef CUresult (*PFN_cuEventCreate)(CUevent *e, unsigned int flags);
typedef CUresult (*PFN_cuEventRecord)(CUevent e, CUstream s);
typedef CUresult (*PFN_cuStreamWaitEvent)(CUstream s, CUevent e, unsigned int flags);
typedef CUresult (*PFN_cuEventSynchronize)(CUevent e);
typedef CUresult (*PFN_cuEventQuery)(CUevent e);
typedef CUresult (*PFN_cuEventElapsedTime)(float *ms, CUevent start, CUevent end);
typedef CUresult (*PFN_cuEventDestroy_v2)(CUevent e);
typedef CUresult (*PFN_cuLaunchKernel)(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                       unsigned int bx, unsigned int by, unsigned int bz,
                                       unsigned int shared_bytes, CUstream s, void **params, void **extra);
typedef CUresult (*PFN_cuLaunchKernelEx_v11060)(const CUlaunchConfig *config, CUfunction f, void **params,
                                                void **extra);
typedef CUresult (*PFN_cuGraphCreate)(CUgraph *g, unsigned int flags);
typedef CUresult (*PFN_cuGraphAddKernelNode_v2)(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
                                                size_t n_deps, const CUDA_KERNEL_NODE_PARAMS *params);
typedef CUresult (*PFN_cuGraphKernelNodeSetAttribute_v11000)(CUgraphNode node, int attr,
                                                             const CUlaunchAttributeValue *value);
/* cuGraphAddDependencies_v2: from[i] -> to[i] with edges[i] (NULL: plain edges). */
typedef CUresult (*PFN_cuGraphAddDependencies_v12030)(CUgraph g, const CUgraphNode *from, const CUgraphNode *to,
                                                      const CUgraphEdgeData *edges, size_t n);
typedef CUresult (*PFN_cuGraphInstantiateWithFlags)(CUgraphExec *exec, CUgraph g, unsigned long long flags);
typedef CUresult (*PFN_cuGraphLaunch)(CUgraphExec exec, CUstream s);
typedef CUresult (*PFN_cuGraphExecDestroy)(CUgraphExec exec);
typedef CUresult (*PFN_cuGraphDestroy)(CUgraph g);
typedef CUresult (*PFN_cuGraphDebugDotPrint)(CUgraph g, const char *path, unsigned int flags);

/* cudaVersion arguments for cuGetProcAddress that select the ABI versions above. */
enum {
    ZR_CU_V_BASE = 4000,          /* cuLaunchKernel, cuStreamDestroy_v2, cuEventDestroy_v2, ... */
    ZR_CU_V_MEM = 3020,           /* cuMemAlloc_v2 family (size_t, 64-bit CUdeviceptr) */
    ZR_CU_V_PRIMARY = 11000,      /* cuDevicePrimaryCtxRelease_v2 / Reset_v2 */
    ZR_CU_V_GRAPH_INST = 11040,   /* cuGraphInstantiateWithFlags */
    ZR_CU_V_GRAPH_NODE = 12000,   /* cuGraphAddKernelNode_v2 */
    ZR_CU_V_LAUNCH_EX = 11060,    /* cuLaunchKernelEx (optional: PDL in eager launches) */
    ZR_CU_V_GRAPH_EDGES = 12030,  /* cuGraphAddDependencies_v2 (optional: edge data, PDL edges) */
    ZR_CU_V_PARAM_INFO = 12040,   /* cuFuncGetParamInfo (optional: older drivers lack it) */
    ZR_CU_V_MIN_DRIVER = 12000,   /* the oldest driver zrun accepts */
};

/* ---- cuBLASLt ---- */
typedef int cublasStatus_t;
enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_SUPPORTED = 15 };
typedef struct cublasLtContext *cublasLtHandle_t;
typedef struct { uint64_t data[32]; } cublasLtMatmulDescOpaque_t;
typedef cublasLtMatmulDescOpaque_t *cublasLtMatmulDesc_t;
typedef struct { uint64_t data[8]; } cublasLtMatrixLayoutOpaque_t;
typedef cublasLtMatrixLayoutOpaque_t *cublasLtMatrixLayout_t;
typedef struct { uint64_t data[8]; } cublasLtMatmulPreferenceOpaque_t;
typedef cublasLtMatmulPreferenceOpaque_t *cublasLtMatmulPreference_t;
typedef struct { uint64_t data[8]; } cublasLtMatmulAlgo_t;
typedef struct {
    cublasLtMatmulAlgo_t algo;
    size_t workspaceSize;
    cublasStatus_t state;
    float wavesCount;
    int reserved[4];
} cublasLtMatmulHeuristicResult_t;
enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum { CUBLAS_COMPUTE_32F = 68 };
enum { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 };            /* cudaDataType */
enum { CUBLASLT_MATMUL_DESC_TRANSA = 3, CUBLASLT_MATMUL_DESC_TRANSB = 4 }; /* int32 values */
enum { CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1 };                  /* uint64 value */
enum { CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6 }; /* int32, int64 (elements) */

typedef cublasStatus_t (*PFN_cublasLtCreate)(cublasLtHandle_t *h);
typedef cublasStatus_t (*PFN_cublasLtDestroy)(cublasLtHandle_t h);
typedef const char *(*PFN_cublasLtGetStatusName)(cublasStatus_t s);
typedef size_t (*PFN_cublasLtGetVersion)(void);
typedef cublasStatus_t (*PFN_cublasLtMatmulDescCreate)(cublasLtMatmulDesc_t *d, int compute_type, int scale_type);
typedef cublasStatus_t (*PFN_cublasLtMatmulDescDestroy)(cublasLtMatmulDesc_t d);
typedef cublasStatus_t (*PFN_cublasLtMatmulDescSetAttribute)(cublasLtMatmulDesc_t d, int attr,
                                                             const void *buf, size_t size);
typedef cublasStatus_t (*PFN_cublasLtMatrixLayoutCreate)(cublasLtMatrixLayout_t *l, int type, uint64_t rows,
                                                         uint64_t cols, int64_t ld);
typedef cublasStatus_t (*PFN_cublasLtMatrixLayoutDestroy)(cublasLtMatrixLayout_t l);
typedef cublasStatus_t (*PFN_cublasLtMatrixLayoutSetAttribute)(cublasLtMatrixLayout_t l, int attr, const void *buf, size_t size);
typedef cublasStatus_t (*PFN_cublasLtMatmulPreferenceCreate)(cublasLtMatmulPreference_t *p);
typedef cublasStatus_t (*PFN_cublasLtMatmulPreferenceDestroy)(cublasLtMatmulPreference_t p);
typedef cublasStatus_t (*PFN_cublasLtMatmulPreferenceSetAttribute)(cublasLtMatmulPreference_t p, int attr,
                                                                   const void *buf, size_t size);
typedef cublasStatus_t (*PFN_cublasLtMatmulAlgoGetHeuristic)(
    cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
    cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t pref, int requested,
    cublasLtMatmulHeuristicResult_t *results, int *returned);
typedef cublasStatus_t (*PFN_cublasLtMatmulAlgoCheck)(
    cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
    cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, const cublasLtMatmulAlgo_t *algo,
    cublasLtMatmulHeuristicResult_t *result);
typedef cublasStatus_t (*PFN_cublasLtMatmul)(
    cublasLtHandle_t h, cublasLtMatmulDesc_t op, const void *alpha, const void *A, cublasLtMatrixLayout_t a,
    const void *B, cublasLtMatrixLayout_t b, const void *beta, const void *C, cublasLtMatrixLayout_t c, void *D,
    cublasLtMatrixLayout_t d, const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspace_bytes,
    CUstream stream);
