/* No cold-start tax on the first prompt (issue 19): at load, one short prefill of zeros runs
 * the prefill path once, so what its first use costs is paid before the first prompt: cuBLASLt's
 * heuristic tables and its GEMM kernels (loaded lazily by the driver, CUDA 12.2+), the GEMM
 * plans of the shapes (cuda/cublaslt.h ZrLtPlan). zrun's own kernels are loaded at load
 * already (cuModuleGetFunction of every kernel, cuda/kreg.c). The cache rows it writes are
 * overwritten by the first prompt before anything reads them: the backend's cache stays empty. */
#pragma once
#include "cuda/forward.h"

/* A short prompt. cuBLASLt may pick other kernels for other row counts: those are loaded at their
 * first use (test/gpu/test_startup.c times a first 5-token prompt against the next ones). */
#define ZR_CUF_WARM_TOKENS 8

/* The warm-up prefill at positions 0.. (at most n_ctx of them); *ms: its wall time. */
int zr_cuf_warm(ZrCuForward *f, double *ms, ZrError *err);
