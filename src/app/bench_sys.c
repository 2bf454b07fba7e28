/* zrun bench: the CPU's name and its read bandwidth (the GPU's is in cuda/bwprobe.c). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>

#include "bench.h"
#include "zr_clock.h"

void zr_bench_cpu_name(char *out, size_t len) {
    char line[512];
    snprintf(out, len, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10)) continue;
            const char *v = strchr(line, ':');
            if (!v) continue;
            v++;
            while (*v == ' ' || *v == '\t') v++;
            line[strcspn(line, "\n")] = 0;
            snprintf(out, len, "%s", v);
            fclose(f);
            return;
        }
        fclose(f);
    }
    struct utsname u;
    if (uname(&u) == 0) snprintf(out, len, "%s CPU", u.machine);
}

typedef struct Slice {
    uint64_t *p;   /* [n] this thread's part of the buffer */
    size_t n;
    bool fill;     /* write the pattern (first touch) instead of reading */
    uint64_t sum;  /* what the reads fold into: a store the compiler must keep */
} Slice;

static void *slice_run(void *arg) {
    Slice *s = arg;
    if (s->fill) {
        for (size_t i = 0; i < s->n; i++) s->p[i] = 0x9e3779b97f4a7c15ull ^ i;
        return NULL;
    }
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    size_t i = 0;
    for (; i + 4 <= s->n; i += 4) {
        a0 += s->p[i];
        a1 += s->p[i + 1];
        a2 += s->p[i + 2];
        a3 += s->p[i + 3];
    }
    for (; i < s->n; i++) a0 += s->p[i];
    s->sum = a0 ^ a1 ^ a2 ^ a3;
    return NULL;
}

/* One pass of every thread over its slice; seconds of wall time. */
static int pass(Slice *sl, pthread_t *th, int n_threads, bool fill, double *secs, ZrError *err) {
    const double t0 = (zr_clock_ms() / 1e3);
    int started = 0, rc = 0;
    for (; started < n_threads; started++) {
        sl[started].fill = fill;
        if (pthread_create(&th[started], NULL, slice_run, &sl[started])) {
            rc = zr_err(err, ZR_E_NOMEM, "bandwidth probe: cannot start thread %d of %d", started + 1, n_threads);
            break;
        }
    }
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    *secs = (zr_clock_ms() / 1e3) - t0;
    return rc;
}

int zr_bench_cpu_bwprobe(size_t bytes, int n_threads, int reps, double *gbps, ZrError *err) {
    *gbps = 0.0;
    if (n_threads < 1) n_threads = 1;
    if (reps < 1) reps = 1;
    const size_t n = bytes / sizeof(uint64_t);
    if (n < (size_t)n_threads * 64)
        return zr_err(err, ZR_E_USAGE, "bandwidth probe: %zu bytes is too small for %d threads", bytes, n_threads);
    uint64_t *buf = aligned_alloc(64, n * sizeof *buf); /* [n] */
    Slice *sl = calloc((size_t)n_threads, sizeof *sl);
    pthread_t *th = calloc((size_t)n_threads, sizeof *th);
    double *v = calloc((size_t)reps, sizeof *v);
    int rc = 0;
    if (!buf || !sl || !th || !v) {
        rc = zr_err(err, ZR_E_NOMEM, "bandwidth probe: cannot allocate %.1f MiB", (double)bytes / 1048576.0);
        goto done;
    }
    const size_t per = (n / (size_t)n_threads + 7) / 8 * 8;
    for (int t = 0; t < n_threads; t++) {
        const size_t lo = per * (size_t)t < n ? per * (size_t)t : n;
        const size_t hi = lo + per < n ? lo + per : n;
        sl[t] = (Slice){.p = buf + lo, .n = hi - lo};
    }
    double secs;
    if ((rc = pass(sl, th, n_threads, true, &secs, err))) goto done;  /* first touch, in the threads */
    if ((rc = pass(sl, th, n_threads, false, &secs, err))) goto done; /* warm-up */
    for (int r = 0; r < reps; r++) {
        if ((rc = pass(sl, th, n_threads, false, &secs, err))) goto done;
        v[r] = secs > 0 ? (double)(n * sizeof *buf) / secs / 1e9 : 0.0;
    }
    *gbps = zr_bench_stats(v, reps).median;
done:
    free(buf);
    free(sl);
    free(th);
    free(v);
    return rc;
}
