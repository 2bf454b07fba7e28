#include "cuda/timeline.h"

#include <inttypes.h>
#include <stdlib.h>

static bool find(const ZrCuda *c, const char *name, CUdeviceptr *p, size_t want) {
    size_t bytes = 0;
    return c->mod && c->drv->cuModuleGetGlobal && c->drv->cuModuleGetGlobal(p, &bytes, c->mod, name) == CUDA_SUCCESS &&
           bytes == want;
}

/* the rings' counts and records (cu/timeline.cuh), where the kernels have them */
static bool find_rings(const ZrCuda *c, CUdeviceptr *count, CUdeviceptr *recs) {
    return find(c, "zr_tl_count", count, sizeof(unsigned) * ZR_TL_SMS) &&
           find(c, "zr_tl_recs", recs, sizeof(ZrTlRec) * ZR_TL_SMS * ZR_TL_PER_SM);
}

bool zr_cuda_timeline_built(const ZrCuda *c) {
    CUdeviceptr count, recs;
    return find_rings(c, &count, &recs);
}

static int by_wait(const void *a, const void *b) {
    const ZrTlRec *x = a, *y = b;
    return x->t_wait < y->t_wait ? -1 : x->t_wait > y->t_wait;
}

int zr_cuda_timeline_write(ZrCuda *c, const ZrRecording *rec, FILE *f, ZrError *err) {
    CUdeviceptr d_count, d_recs;
    if (!find_rings(c, &d_count, &d_recs))
        return zr_err(err, ZR_E_UNSUPPORTED, "timeline: the kernels have no stamps (build with meson -Dtimeline=true)");
    const size_t n_all = (size_t)ZR_TL_SMS * ZR_TL_PER_SM;
    unsigned *count = malloc(sizeof(unsigned) * ZR_TL_SMS);
    ZrTlRec *recs = malloc(sizeof(ZrTlRec) * n_all);
    int rc = ZR_OK;
    if (!count || !recs) {
        rc = zr_err(err, ZR_E_NOMEM, "timeline: out of memory for %zu stamps", n_all);
        goto done;
    }
    CUresult r = c->drv->cuStreamSynchronize(c->stream);
    if (r == CUDA_SUCCESS) r = c->drv->cuMemcpyDtoHAsync(count, d_count, sizeof(unsigned) * ZR_TL_SMS, c->stream);
    if (r == CUDA_SUCCESS) r = c->drv->cuMemcpyDtoHAsync(recs, d_recs, sizeof(ZrTlRec) * n_all, c->stream);
    if (r == CUDA_SUCCESS) r = c->drv->cuStreamSynchronize(c->stream);
    if (r != CUDA_SUCCESS) {
        rc = zr_err(err, ZR_E_CUDA, "timeline: reading the stamps: %s", zr_driver_error_name(c->drv, r));
        goto done;
    }
    /* each ring's filled slots, packed to the front */
    size_t n = 0;
    for (int sm = 0; sm < ZR_TL_SMS; sm++) {
        const size_t filled = count[sm] < ZR_TL_PER_SM ? count[sm] : ZR_TL_PER_SM;
        for (size_t i = 0; i < filled; i++) recs[n++] = recs[(size_t)sm * ZR_TL_PER_SM + i];
    }
    qsort(recs, n, sizeof *recs, by_wait);
    for (size_t i = 0; rec && i < rec->n; i++) {
        const ZrLaunchRecord *x = &rec->recs[i];
        fprintf(f, "# launch %zu %s %llu\n", i, x->kernel->name,
                (unsigned long long)x->grid.x * x->grid.y * x->grid.z);
    }
    fprintf(f, "grid,block,sm,t_enter_ns,t_wait_ns,t_exit_ns,t_staged_ns,t_summed_ns\n");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%" PRIu64 ",%" PRIu32 ",%" PRIu32 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n",
                recs[i].grid, recs[i].block, recs[i].sm, recs[i].t_enter, recs[i].t_wait, recs[i].t_exit, recs[i].t_mark[0],
                recs[i].t_mark[1]);
    if (ferror(f)) rc = zr_err(err, ZR_E_IO, "timeline: writing the stamps failed");
done:
    free(count);
    free(recs);
    return rc;
}
