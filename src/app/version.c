/* zrun --version: the version and the facts of the build (config.h, version.h): the commit, the
 * compiler, and whether the CUDA kernels are in and for which GPUs. */
#include <stdio.h>

#include "cmd.h"
#include "config.h"
#include "version.h"

void zr_version_text(char *out, size_t cap) {
    char cuda[256];
    if (ZR_HAVE_KERNELS)
        snprintf(cuda, sizeof cuda, "CUDA kernels: built in, SASS for sm %s, PTX of the last%s%s%s", ZR_CUDA_ARCH,
                 ZR_NVCC_RELEASE[0] ? " (nvcc " : "", ZR_NVCC_RELEASE, ZR_NVCC_RELEASE[0] ? ")" : "");
    else
        snprintf(cuda, sizeof cuda, "CUDA kernels: not built in (-Dcuda=disabled, or no nvcc at build time): the CPU "
                                    "backend only");
    snprintf(out, cap, "zrun %s (commit %s)\nbuilt with %s, %s\n%s\n", ZR_VERSION, ZR_COMMIT, ZR_COMPILER,
             ZR_BUILDTYPE, cuda);
}
