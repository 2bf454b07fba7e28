/* The kernels embedded in the binary (tools/embed.py: the assembler's .incbin of the build's
 * cu/kernels.fatbin) are that file byte for byte, 16-byte aligned (cuModuleLoadData reads the
 * fatbin header in place), with its size. No GPU needed: what the driver loads is these bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/module.h"
#include "zt.h"

ZT_TEST(the_embedded_kernels_are_the_builds_fatbin_byte_for_byte) {
    if (!zr_cuda_have_kernels()) {
        zt_skip("built without CUDA kernels (-Dcuda=disabled or no nvcc)");
        return;
    }
    const char *build = getenv("ZR_BUILD");
    if (!build) {
        zt_skip("ZR_BUILD is not set (run through meson test)");
        return;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/cu/kernels.fatbin", build);
    FILE *f = fopen(path, "rb");
    ZT_CHECKF(f, "%s: cannot open", path);
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *want = malloc(n > 0 ? (size_t)n : 1);
    ZT_CHECK(want);
    ZT_CHECK(fread(want, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    const unsigned char *got = zr_cuda_kernels_image();
    ZT_CHECKF(zr_cuda_kernels_image_size() == (size_t)n, "embedded %zu bytes, the file %ld", zr_cuda_kernels_image_size(), n);
    ZT_CHECK(((uintptr_t)got & 15) == 0);
    ZT_CHECK(memcmp(got, want, (size_t)n) == 0);
    ZT_CHECK(got[n] == 0); /* the trailing 0 */
    printf("the embedded kernels: %ld bytes, as %s\n", n, path);
    free(want);
}

int main(void) { return zt_run(); }
