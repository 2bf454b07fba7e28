/* zr_cuda_bwprobe: the device's read bandwidth with cu/probe.cu's read_bw_probe (see bwprobe.h). */
#include "cuda/bwprobe.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/driver.h"
#include "cuda/launch.h"
#include "cuda/module.h"

/* The kernel driver's version ("580.159.04"): the first dotted number on the first line of
 * /proc/driver/nvidia/version, else /sys/module/nvidia/version, else "unknown". */
static void driver_version(char *out, size_t len) {
    snprintf(out, len, "unknown");
    char line[512];
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    if (f) {
        if (fgets(line, sizeof line, f)) {
            for (char *tok = strtok(line, " \t\n"); tok; tok = strtok(NULL, " \t\n")) {
                const char *p = tok;
                int dots = 0;
                bool ok = isdigit((unsigned char)*p) != 0;
                for (; ok && *p; p++) {
                    if (*p == '.') dots++;
                    else if (!isdigit((unsigned char)*p)) ok = false;
                }
                if (ok && dots >= 1) {
                    snprintf(out, len, "%.40s", tok);
                    fclose(f);
                    return;
                }
            }
        }
        fclose(f);
    }
    f = fopen("/sys/module/nvidia/version", "r");
    if (f) {
        if (fgets(line, sizeof line, f)) {
            line[strcspn(line, " \t\n")] = 0;
            if (line[0]) snprintf(out, len, "%.40s", line);
        }
        fclose(f);
    }
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct Probe {
    ZrCuda *c;
    ZrLauncher *l;
    ZrKernel *k;
    CUdeviceptr buf;  /* [n_vec] uint4 */
    uint64_t n_vec;
    CUdeviceptr sink; /* [blocks] uint32 */
    CUevent ev[2];
} Probe;

/* One timed launch of blocks x threads over the whole buffer, in milliseconds. */
static int time_launch(Probe *p, unsigned blocks, unsigned threads, float *ms, ZrError *err) {
    const ZrCuDriver *d = p->c->drv;
    ZR_CU_TRY(d, err, d->cuEventRecord(p->ev[0], p->c->stream), "bandwidth probe: cuEventRecord");
    int rc = ZR_LAUNCH(p->l, p->k, ZR_DIM1(blocks), ZR_DIM1(threads), 0, err, &p->buf, &p->n_vec, &p->sink);
    if (rc) return rc;
    ZR_CU_TRY(d, err, d->cuEventRecord(p->ev[1], p->c->stream), "bandwidth probe: cuEventRecord");
    ZR_CU_TRY(d, err, d->cuEventSynchronize(p->ev[1]), "bandwidth probe: read_bw_probe (%u x %u threads)", blocks,
              threads);
    ZR_CU_TRY(d, err, d->cuEventElapsedTime(ms, p->ev[0], p->ev[1]), "bandwidth probe: cuEventElapsedTime");
    return ZR_OK;
}

static int measure(Probe *p, size_t bytes, int reps, ZrBwProbe *out, ZrError *err) {
    const ZrCuDriver *d = p->c->drv;
    const int sm = p->c->props.sm_count > 0 ? p->c->props.sm_count : 1;
    /* Resident blocks of 256 threads per SM: 8 fills an SM of 2048 threads; more are extra waves. */
    static const int per_sm[ZR_BWPROBE_CONFIGS] = {8, 16, 32};
    const unsigned threads = 256;
    int rc;
    for (int i = 0; i < 2; i++) {
        ZR_CU_TRY(d, err, d->cuEventCreate(&p->ev[i], CU_EVENT_DEFAULT), "bandwidth probe: cuEventCreate");
    }
    if ((rc = zr_cuda_alloc(p->c, &p->sink, sizeof(uint32_t) * (size_t)sm * per_sm[ZR_BWPROBE_CONFIGS - 1],
                            "bandwidth probe sink", err)))
        return rc;
    if ((rc = zr_cuda_alloc(p->c, &p->buf, bytes, "bandwidth probe buffer", err))) return rc;
    p->n_vec = bytes / 16;
    /* A non-zero pattern: never time on zeros. */
    if ((rc = zr_cuda_memset32(p->c, p->buf, 0x9e3779b1u, bytes / 4, err))) return rc;
    if ((rc = zr_cuda_sync(p->c, err))) return rc;
    double *gbps = malloc(sizeof *gbps * (size_t)reps);
    if (!gbps) return zr_err(err, ZR_E_NOMEM, "bandwidth probe: out of memory");
    out->gbps = 0.0;
    for (int c = 0; c < ZR_BWPROBE_CONFIGS && !rc; c++) {
        const unsigned blocks = (unsigned)(sm * per_sm[c]);
        float ms = 0.0f;
        for (int w = 0; w < 2 && !rc; w++) rc = time_launch(p, blocks, threads, &ms, err); /* warm-up */
        for (int r = 0; r < reps && !rc; r++) {
            rc = time_launch(p, blocks, threads, &ms, err);
            gbps[r] = ms > 0.0f ? (double)bytes / (ms * 1e-3) / 1e9 : 0.0;
        }
        if (rc) break;
        qsort(gbps, (size_t)reps, sizeof *gbps, cmp_double);
        const double med = reps % 2 ? gbps[reps / 2] : 0.5 * (gbps[reps / 2 - 1] + gbps[reps / 2]);
        if (med > out->gbps) {
            out->gbps = med;
            out->gbps_min = gbps[0];
            out->gbps_max = gbps[reps - 1];
            out->blocks = (int)blocks;
            out->threads = (int)threads;
        }
    }
    free(gbps);
    return rc;
}

int zr_cuda_bwprobe(ZrCuda *c, size_t bytes, int reps, ZrBwProbe *out, ZrError *err) {
    memset(out, 0, sizeof *out);
    bytes = (bytes + 15) / 16 * 16;
    if ((bytes && bytes < ((size_t)1 << 20)) || reps < 1)
        return zr_err(err, ZR_E_USAGE, "bandwidth probe: expected at least 1 MiB and 1 repetition, found %zu bytes, %d",
                      bytes, reps);
    const ZrCuDriver *d = c->drv;
    /* its own launcher: the probe's launches are never recorded or profiled with the model's */
    ZrLauncher l;
    zr_launcher_init(&l, d, c->stream);
    ZrKernel k;
    Probe p = {.c = c, .l = &l, .k = &k};
    const size_t sizes[] = {sizeof(CUdeviceptr), sizeof(uint64_t), sizeof(CUdeviceptr)};
    snprintf(out->gpu, sizeof out->gpu, "%s", c->props.name);
    driver_version(out->driver, sizeof out->driver);
    out->cuda_version = c->props.driver_version;
    out->cc_major = c->props.cc_major;
    out->cc_minor = c->props.cc_minor;
    out->sm_count = c->props.sm_count;
    out->total_gib = (double)c->props.total_mem / (1024.0 * 1024.0 * 1024.0);
    out->peak_gbps = 2.0 * c->props.mem_clock_khz * 1e3 * (c->props.bus_width_bits / 8.0) / 1e9;
    out->bytes = bytes;
    out->reps = reps;
    int rc = zr_cuda_kernel(c, "read_bw_probe", sizes, 3, &k, err);
    if (!rc && bytes) rc = measure(&p, bytes, reps, out, err);
    if (rc) zr_err_wrap(err, "bandwidth probe on %s", c->props.name);
    zr_cuda_free(c, p.buf);
    zr_cuda_free(c, p.sink);
    for (int i = 0; i < 2; i++)
        if (p.ev[i]) d->cuEventDestroy(p.ev[i]);
    zr_launcher_free(&l);
    return rc;
}
