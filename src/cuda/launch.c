#include "cuda/launch.h"

#include <stdlib.h>
#include <string.h>

void zr_launcher_init(ZrLauncher *l, const ZrCuDriver *drv, CUstream stream) {
    memset(l, 0, sizeof *l);
    l->drv = drv;
    l->stream = stream;
}

bool zr_launcher_set_pdl(ZrLauncher *l, bool on) { return l->pdl = on && l->drv->cuLaunchKernelEx != NULL; }

bool zr_launch_pdl_supported(const ZrCuda *c) { return c->props.cc_major >= 9 && c->drv->cuLaunchKernelEx != NULL; }

bool zr_launcher_set_clusters(ZrLauncher *l, bool on) {
    return l->clusters = on && l->drv->cuLaunchKernelEx != NULL && l->drv->cuGraphKernelNodeSetAttribute != NULL;
}

bool zr_launch_clusters_supported(const ZrCuda *c) {
    return c->props.cc_major >= 9 && c->drv->cuLaunchKernelEx != NULL && c->drv->cuGraphKernelNodeSetAttribute != NULL;
}

bool zr_launch_kernel_pairs(const char *n) {
    /* the expert products (grids of experts x tiles) and the tensor-core and flat ones measured no
     * gain or a loss: left out by name. The mixed-type ones are paired since their grid is 1-D
     * (session 38): H200 tg128 Llama-3.2-3B +1.0%, Llama-3-8B +0.7%, Gemma-3-4B +0.2% (on the
     * 2-D grid of sessions 36-37 Gemma lost 0.7%; cu/PERF.md session 39) */
    return !strncmp(n, "matvec_", 7) && strncmp(n, "matvec_id", 9) && !strstr(n, "_mma") && !strstr(n, "_flat");
}

unsigned zr_launch_cluster_of(const ZrKernel *k, ZrDim3 grid) {
    return k->pairs && grid.x % 2 == 0 && grid.y == 1 && grid.z == 1 ? 2 : 1;
}

void zr_launcher_free(ZrLauncher *l) {
    zr_recording_free(&l->rec);
    memset(l, 0, sizeof *l);
}

void zr_recording_clear(ZrRecording *r) {
    r->n = 0;
    r->arena_len = 0;
}

void zr_recording_free(ZrRecording *r) {
    free(r->recs);
    free(r->arena);
    memset(r, 0, sizeof *r);
}

void zr_recording_move(ZrRecording *to, ZrRecording *from) {
    zr_recording_free(to);
    *to = *from;
    memset(from, 0, sizeof *from);
}

void zr_launcher_record_begin(ZrLauncher *l) {
    zr_recording_clear(&l->rec);
    l->recording = true;
}

void zr_launcher_record_end(ZrLauncher *l) { l->recording = false; }

const unsigned char *zr_recording_params(const ZrRecording *r, size_t i) { return r->arena + r->recs[i].param_off; }

const void *zr_recording_param(const ZrRecording *r, size_t i, int j) {
    return zr_recording_params(r, i) + r->recs[i].kernel->offset[j];
}

/* Appends a record with a private copy of the parameter values. */
static int record(ZrRecording *r, const ZrKernel *k, ZrDim3 grid, ZrDim3 block, unsigned shared_bytes,
                  unsigned cluster, void *const *params, ZrError *err) {
    size_t bytes = 0;
    for (int i = 0; i < k->n_params; i++)
        if (k->offset[i] + k->size[i] > bytes) bytes = k->offset[i] + k->size[i];
    size_t off = (r->arena_len + 15) & ~(size_t)15; /* 16-byte aligned blocks: any parameter type fits */
    if (off + bytes > r->arena_cap) {
        size_t cap = r->arena_cap ? r->arena_cap : 4096;
        while (cap < off + bytes) cap *= 2;
        unsigned char *a = realloc(r->arena, cap);
        if (!a) return zr_err(err, ZR_E_NOMEM, "launch recorder: no memory for %zu bytes of parameters", cap);
        r->arena = a;
        r->arena_cap = cap;
    }
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 256;
        ZrLaunchRecord *n = realloc(r->recs, cap * sizeof *n);
        if (!n) return zr_err(err, ZR_E_NOMEM, "launch recorder: no memory for %zu records", cap);
        r->recs = n;
        r->cap = cap;
    }
    memset(r->arena + off, 0, bytes);
    for (int i = 0; i < k->n_params; i++) memcpy(r->arena + off + k->offset[i], params[i], k->size[i]);
    r->arena_len = off + bytes;
    r->recs[r->n++] = (ZrLaunchRecord){
        .kernel = k, .fn = k->fn, .grid = grid, .block = block, .shared_bytes = shared_bytes, .cluster = cluster,
        .param_off = off, .param_bytes = bytes,
    };
    return ZR_OK;
}

/* One launch of k: cuLaunchKernelEx with programmatic stream serialization (l->pdl) and a
 * cluster of `cluster` blocks (> 1) where either is asked for, else cuLaunchKernel. */
static CUresult launch_once(const ZrLauncher *l, const ZrKernel *k, ZrDim3 grid, ZrDim3 block, unsigned shared_bytes,
                            void *const *params, unsigned cluster) {
    const ZrCuDriver *d = l->drv;
    if (!l->pdl && cluster <= 1)
        return d->cuLaunchKernel(k->fn, grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes, l->stream,
                                 (void **)params, NULL);
    CUlaunchAttribute attr[2];
    unsigned n_attr = 0;
    if (l->pdl) {
        attr[n_attr] = (CUlaunchAttribute){.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION};
        attr[n_attr++].value.programmaticStreamSerializationAllowed = 1;
    }
    if (cluster > 1) {
        CUlaunchAttribute *a = &attr[n_attr++];
        *a = (CUlaunchAttribute){.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION};
        a->value.clusterDim.x = cluster;
        a->value.clusterDim.y = a->value.clusterDim.z = 1;
    }
    const CUlaunchConfig cfg = {
        .gridDimX = grid.x, .gridDimY = grid.y, .gridDimZ = grid.z,
        .blockDimX = block.x, .blockDimY = block.y, .blockDimZ = block.z,
        .sharedMemBytes = shared_bytes, .hStream = l->stream, .attrs = attr, .numAttrs = n_attr,
    };
    return d->cuLaunchKernelEx(&cfg, k->fn, (void **)params, NULL);
}

int zr_launch(ZrLauncher *l, const ZrKernel *k, ZrDim3 grid, ZrDim3 block, unsigned shared_bytes,
              void *const *params, int n_params, ZrError *err) {
    const ZrCuDriver *d = l->drv;
    if (n_params != k->n_params)
        return zr_err(err, ZR_E_INTERNAL, "launch %s: %d parameters given, the kernel takes %d", k->name, n_params,
                      k->n_params);
    if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z)
        return zr_err(err, ZR_E_INTERNAL, "launch %s: empty grid (%u,%u,%u) or block (%u,%u,%u)", k->name, grid.x,
                      grid.y, grid.z, block.x, block.y, block.z);
    int rc;
    if (l->profile && (rc = zr_profile_begin(l->profile, k, l->stream, err))) return rc;
    unsigned cluster = l->clusters ? zr_launch_cluster_of(k, grid) : 1;
    CUresult r = launch_once(l, k, grid, block, shared_bytes, params, cluster);
    if (r != CUDA_SUCCESS && cluster > 1 && !zr_driver_error_is_sticky(r)) {
        /* a device that cannot place the clusters: the launch as before, and no more clusters */
        l->clusters = false;
        cluster = 1;
        r = launch_once(l, k, grid, block, shared_bytes, params, cluster);
    }
    if (r != CUDA_SUCCESS) {
        char how[96] = "", cl[32] = "";
        if (cluster > 1) snprintf(cl, sizeof cl, ", clusters of %u", cluster);
        if (l->pdl || cluster > 1)
            snprintf(how, sizeof how, " (cuLaunchKernelEx%s%s)", l->pdl ? ", programmatic stream serialization" : "", cl);
        return zr_driver_err(d, err, r, "launch %s grid (%u,%u,%u) block (%u,%u,%u) shared %u%s", k->name, grid.x,
                             grid.y, grid.z, block.x, block.y, block.z, shared_bytes, how);
    }
    if (l->profile && (rc = zr_profile_end(l->profile, l->stream, err))) return rc;
    l->n_launches++;
    if (l->sync_each) ZR_CU_TRY(d, err, d->cuStreamSynchronize(l->stream), "kernel %s failed", k->name);
    if (l->recording && (rc = record(&l->rec, k, grid, block, shared_bytes, cluster, params, err))) return rc;
    return ZR_OK;
}

void zr_recording_print(const ZrRecording *r, FILE *f) {
    for (size_t i = 0; i < r->n; i++) {
        const ZrLaunchRecord *x = &r->recs[i];
        fprintf(f, "launch %4zu %-28s grid (%u,%u,%u) block (%u,%u,%u) shared %u", i, x->kernel->name, x->grid.x,
                x->grid.y, x->grid.z, x->block.x, x->block.y, x->block.z, x->shared_bytes);
        if (x->cluster > 1) fprintf(f, " cluster %u", x->cluster);
        fputs(" params", f);
        for (int j = 0; j < x->kernel->n_params; j++) {
            const unsigned char *p = zr_recording_param(r, i, j);
            fputc(' ', f);
            for (uint32_t b = 0; b < x->kernel->size[j]; b++) fprintf(f, "%02x", p[b]);
        }
        fputc('\n', f);
    }
}

int zr_recording_compare(const ZrRecording *a, const ZrRecording *b, char *why, size_t why_len) {
    size_t n = a->n < b->n ? a->n : b->n;
    for (size_t i = 0; i < n; i++) {
        const ZrLaunchRecord *x = &a->recs[i], *y = &b->recs[i];
        if (x->fn != y->fn) {
            snprintf(why, why_len, "launch %zu is %s in one pass and %s in the other", i, x->kernel->name,
                     y->kernel->name);
            return 1;
        }
        if (memcmp(&x->grid, &y->grid, sizeof x->grid) || memcmp(&x->block, &y->block, sizeof x->block) ||
            x->shared_bytes != y->shared_bytes) {
            snprintf(why, why_len,
                     "launch %zu (%s): grid (%u,%u,%u) block (%u,%u,%u) shared %u vs grid (%u,%u,%u) block "
                     "(%u,%u,%u) shared %u",
                     i, x->kernel->name, x->grid.x, x->grid.y, x->grid.z, x->block.x, x->block.y, x->block.z,
                     x->shared_bytes, y->grid.x, y->grid.y, y->grid.z, y->block.x, y->block.y, y->block.z,
                     y->shared_bytes);
            return 1;
        }
        for (int j = 0; j < x->kernel->n_params; j++)
            if (memcmp(zr_recording_param(a, i, j), zr_recording_param(b, i, j), x->kernel->size[j])) {
                snprintf(why, why_len, "launch %zu (%s): parameter %d differs (a value that changes per token "
                         "must be read from device memory, not passed as a parameter)",
                         i, x->kernel->name, j);
                return 1;
            }
    }
    if (a->n != b->n) {
        snprintf(why, why_len, "%zu launches in one pass, %zu in the other", a->n, b->n);
        return 1;
    }
    return 0;
}
