/* The device's read bandwidth, measured (the CUDA backend's read_bandwidth method: zrun bench
 * divides its achieved GB/s by this). The
 * read_bw_probe kernel (cu/probe.cu) streams a buffer of >= 1 GiB with 16-byte loads; each
 * launch is timed with cuEvents, after warm-up launches, and the median of the repetitions is
 * the device's figure (the best median over a few grid sizes, so the probe itself is not the
 * limit). Also names the GPU, the driver and the CUDA version for the bench header line. */
#pragma once
#include <stddef.h>

#include "cuda/module.h"
#include "err.h"

#define ZR_BWPROBE_CONFIGS 3

typedef struct ZrBwProbe {
    char gpu[256];        /* "NVIDIA H100 80GB HBM3" */
    char driver[64];      /* "580.159.04" (from /proc/driver/nvidia/version), or "unknown" */
    int cuda_version;     /* the driver's CUDA version, e.g. 13000 = 13.0 */
    int cc_major, cc_minor, sm_count;
    double total_gib;     /* device memory */
    double peak_gbps;     /* from the memory clock and bus width (double data rate); 0 if unknown */
    size_t bytes;         /* probe buffer */
    int reps;             /* timed launches per grid size */
    double gbps;          /* THE result: best over grid sizes of the median over reps, 1e9 B/s */
    double gbps_min, gbps_max; /* spread of the chosen grid size's repetitions */
    int blocks, threads;  /* the chosen grid size */
} ZrBwProbe;

/* Measures on c (its kernels loaded), with a private launcher on its stream, and frees what it
 * allocated (bytes more of device memory while it runs). bytes is rounded up to a multiple of
 * 16 and must be >= 1 MiB, or 0: only name the device (gbps 0); reps >= 1. */
int zr_cuda_bwprobe(ZrCuda *c, size_t bytes, int reps, ZrBwProbe *out, ZrError *err);
