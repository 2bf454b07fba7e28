/* zrun-mm-bench: the prefill's small-batch product (cu/matmul_small.cu, issue 19) alone, on the
 * matrices of Llama-3.2-1B and Llama-3-8B (Q, K and V apart, attention output, gate|up stacked,
 * FFN down), for each weight type and n = 1..8 rows of x, at the forward pass's launch shape
 * and at every split of the grid below. Not a test.
 *
 * As zrun-mv-bench: each figure is the median of 5 replays of a graph of K launches divided by
 * K, the launches rotating over copies of the matrix (>= 128 MiB in all) so the L2 cache does
 * not hold them; weights are random 16-bit words 0x3000..0x3fff.
 *     zrun-mm-bench [-t q4_0,q4_k,q6_k,q8_0,q5_k,q2_k,q3_k,bf16] [-m 1b,8b] [-n 1,5,8] [-q]
 * -q: the forward pass's shape only. Prints per matrix, type and n the forward shape's and the
 * best shape's time and GB/s of device bytes, then per model, type and n the products' time per
 * prefill (every layer's matrices; the output is the decode's matrix-vector product). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/driver.h"
#include "cuda/graph.h"
#include "cuda/klaunch.h"
#include "cuda/launch.h"
#include "cuda/mm_small.h"
#include "cuda/module.h"
#include "cuda/weights.h"
#include "quant.h"

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* name is one of the comma-separated words of list */
static bool listed(const char *list, const char *name) {
    const size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == 0)) return true;
    return false;
}

static size_t a256(size_t n) { return (n + 255) & ~(size_t)255; }

/* us per launch with the shape over K rotating copies, or < 0 on error */
static double time_shape(ZrCuda *c, ZrLauncher *l, const ZrCuKernels *k, const ZrCuWeight *copies, int n_copies,
                         int n, ZrMmShape s, CUdeviceptr x, CUdeviceptr y, ZrError *err) {
    const ZrCuDriver *d = c->drv;
    const int K = n_copies * 2 < 16 ? 16 : n_copies * 2 > 256 ? 256 : n_copies * 2;
    zr_launcher_record_begin(l);
    for (int i = 0; i < K; i++) {
        const ZrCuWeight *w = &copies[i % n_copies];
        if (zr_k_matmul_small(l, &k->mm[w->type], w, x, w->n_in, y, w->n_out, 1.0f, n, s, zr_cuf_mm_smem(s, n), err)) {
            zr_launcher_record_end(l);
            return -1;
        }
    }
    zr_launcher_record_end(l);
    ZrGraph gr;
    if (zr_graph_build(d, &l->rec, NULL, 0, &gr, err) != CUDA_SUCCESS) return -1;
    if (zr_graph_instantiate(d, &gr, NULL, 0, err) != CUDA_SUCCESS) {
        zr_graph_destroy(d, &gr);
        return -1;
    }
    CUevent e0, e1;
    d->cuEventCreate(&e0, 0);
    d->cuEventCreate(&e1, 0);
    double t[5];
    int rc = zr_graph_launch(d, &gr, c->stream, err) != CUDA_SUCCESS;
    for (int r = 0; !rc && r < 5; r++) {
        float ms = 0;
        d->cuEventRecord(e0, c->stream);
        rc = zr_graph_launch(d, &gr, c->stream, err) != CUDA_SUCCESS;
        d->cuEventRecord(e1, c->stream);
        if (!rc) rc = d->cuEventSynchronize(e1) != CUDA_SUCCESS || d->cuEventElapsedTime(&ms, e0, e1) != CUDA_SUCCESS;
        t[r] = 1000.0 * ms / K;
    }
    d->cuEventDestroy(e0);
    d->cuEventDestroy(e1);
    zr_graph_destroy(d, &gr);
    if (rc) {
        if (!err->msg[0]) zr_err(err, ZR_E_CUDA, "%s: timing failed", k->mm[copies[0].type].name);
        return -1;
    }
    qsort(t, 5, sizeof *t, cmpd);
    return t[2];
}

int main(int argc, char **argv) {
    const char *types_arg = "q4_0,q4_k,q6_k", *models_arg = "8b", *ns_arg = "1,2,4,5,8";
    int opt, quick = 0;
    while ((opt = getopt(argc, argv, "t:m:n:q")) != -1) {
        if (opt == 'q') quick = 1;
        else if (opt == 't') types_arg = optarg;
        else if (opt == 'm') models_arg = optarg;
        else if (opt == 'n') ns_arg = optarg;
        else {
            fprintf(stderr, "usage: zrun-mm-bench [-t q4_0,q4_k,q6_k,q8_0,...] [-m 1b,8b] [-n 1,5,8] [-q]\n");
            return 2;
        }
    }
    static const struct {
        const char *name;
        int embd, q, kv, ff, layers;
    } shapes[] = {{"1b", 2048, 2048, 512, 8192, 16}, {"8b", 4096, 4096, 1024, 14336, 32}};
    static const struct {
        const char *name;
        uint32_t type;
    } types[] = {{"q4_0", ZR_TYPE_Q4_0}, {"q4_1", ZR_TYPE_Q4_1}, {"q5_0", ZR_TYPE_Q5_0}, {"q5_1", ZR_TYPE_Q5_1},
                 {"q8_0", ZR_TYPE_Q8_0}, {"q2_k", ZR_TYPE_Q2_K}, {"q3_k", ZR_TYPE_Q3_K}, {"q4_k", ZR_TYPE_Q4_K},
                 {"q5_k", ZR_TYPE_Q5_K}, {"q6_k", ZR_TYPE_Q6_K}, {"bf16", ZR_TYPE_BF16}};
    const ZrCuDriver *drv;
    ZrCuda cuda;
    ZrCuKernels k;
    ZrLauncher l;
    ZrError err = {0};
    if (zr_driver_open(&drv, &err) || zr_cuda_open(drv, 0, &cuda, &err) || zr_cuda_load_kernels(&cuda, &err) ||
        zr_cuf_kernels_load(&cuda, &k, 14336, &err)) {
        fprintf(stderr, "zrun-mm-bench: %s\n", err.msg);
        return 1;
    }
    zr_launcher_init(&l, drv, cuda.stream);
    const size_t pool_bytes = (size_t)1152 << 20;
    CUdeviceptr pool, x, y;
    if (zr_cuda_alloc(&cuda, &pool, pool_bytes, "pool", &err) ||
        zr_cuda_alloc(&cuda, &x, sizeof(float) * ZR_CUF_MM_COLS * 14336, "x", &err) ||
        zr_cuda_alloc(&cuda, &y, sizeof(float) * ZR_CUF_MM_COLS * 28672, "y", &err)) {
        fprintf(stderr, "zrun-mm-bench: %s\n", err.msg);
        return 1;
    }
    {
        const size_t chunk = (size_t)64 << 20;
        uint16_t *h = malloc(chunk);
        uint64_t s = 0x9e3779b97f4a7c15ull;
        for (size_t off = 0; off < pool_bytes; off += chunk) {
            for (size_t i = 0; i < chunk / 2; i++) {
                s ^= s << 13, s ^= s >> 7, s ^= s << 17;
                h[i] = (uint16_t)(0x3000 | (s & 0x0fff));
            }
            if (zr_cuda_h2d(&cuda, pool + off, h, chunk, &err) || zr_cuda_sync(&cuda, &err)) {
                fprintf(stderr, "zrun-mm-bench: %s\n", err.msg);
                return 1;
            }
        }
        const int nx = ZR_CUF_MM_COLS * 14336;
        float *hx = malloc(sizeof(float) * nx);
        for (int i = 0; i < nx; i++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            hx[i] = (float)((int)(s % 2001) - 1000) / 1000.0f;
        }
        if (zr_cuda_h2d(&cuda, x, hx, sizeof(float) * nx, &err) ||
            zr_cuda_memset8(&cuda, y, 0, sizeof(float) * ZR_CUF_MM_COLS * 28672, &err) || zr_cuda_sync(&cuda, &err)) {
            fprintf(stderr, "zrun-mm-bench: %s\n", err.msg);
            return 1;
        }
        free(hx);
        free(h);
    }
    static const int splits[] = {1, 2, 4, 8};
    printf("%-3s %-5s %-4s %2s %6s %6s | %-13s %8s %7s | %-13s %8s %7s\n", "mdl", "type", "mat", "n", "n_in", "n_out",
           "forward shape", "us", "GB/s", "best shape", "us", "GB/s");
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        if (!listed(models_arg, shapes[si].name)) continue;
        const int E = shapes[si].embd;
        const struct {
            const char *name;
            int n_in, n_out;
        } mats[] = {{"q", E, shapes[si].q},      {"k", E, shapes[si].kv},        {"v", E, shapes[si].kv},
                    {"wo", shapes[si].q, E},     {"gu", E, 2 * shapes[si].ff},   {"down", shapes[si].ff, E}};
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
            if (!listed(types_arg, types[ti].name)) continue;
            const uint32_t type = types[ti].type;
            for (int n = 1; n <= ZR_CUF_MM_COLS; n++) {
                char nb[4];
                snprintf(nb, sizeof nb, "%d", n);
                if (!listed(ns_arg, nb)) continue;
                double total = 0, total_best = 0, bytes_total = 0;
                for (size_t mi = 0; mi < sizeof mats / sizeof mats[0]; mi++) {
                    const int n_in = mats[mi].n_in, n_out = mats[mi].n_out;
                    const size_t mb = zr_cuw_main_row_bytes(type, n_in) * (size_t)n_out,
                                 sb = zr_cuw_side_bytes(type, n_in, n_out), bytes = a256(mb) + a256(sb);
                    int n_copies = (int)((((size_t)128 << 20) + bytes - 1) / bytes);
                    if ((size_t)n_copies * bytes > pool_bytes) n_copies = (int)(pool_bytes / bytes);
                    ZrCuWeight *copies = malloc(sizeof *copies * n_copies);
                    for (int i = 0; i < n_copies; i++)
                        copies[i] = (ZrCuWeight){.type = type, .n_in = n_in, .n_out = n_out,
                                                 .main = pool + (size_t)i * bytes, .side = pool + (size_t)i * bytes + a256(mb)};
                    const ZrMmShape def = zr_cuf_mm_shape(k.sm_count, n_in, n_out, (int)zr_type_info(type)->item, n);
                    const double t_def = time_shape(&cuda, &l, &k, copies, n_copies, n, def, x, y, &err);
                    if (t_def < 0) {
                        fprintf(stderr, "zrun-mm-bench: %s %s %s n %d: %s\n", shapes[si].name, types[ti].name,
                                mats[mi].name, n, err.msg);
                        return 1;
                    }
                    double t_best = t_def;
                    ZrMmShape best = def;
                    for (size_t sp = 0; !quick && sp < sizeof splits / sizeof splits[0]; sp++) {
                        const ZrMmShape s = {.groups = ZR_CUF_MM_WARPS / splits[sp], .split = splits[sp],
                                             .chunk = def.chunk};
                        if (s.split == def.split) continue;
                        const double t = time_shape(&cuda, &l, &k, copies, n_copies, n, s, x, y, &err);
                        if (t >= 0 && t < t_best) t_best = t, best = s;
                    }
                    char s1[32], s2[32];
                    snprintf(s1, sizeof s1, "%dx%d c%d", def.groups, def.split, def.chunk);
                    snprintf(s2, sizeof s2, "%dx%d c%d", best.groups, best.split, best.chunk);
                    printf("%-3s %-5s %-4s %2d %6d %6d | %-13s %8.2f %7.0f | %-13s %8.2f %7.0f\n", shapes[si].name,
                           types[ti].name, mats[mi].name, n, n_in, n_out, s1, t_def, bytes / t_def / 1e3, s2, t_best,
                           bytes / t_best / 1e3);
                    fflush(stdout);
                    total += t_def * shapes[si].layers;
                    total_best += t_best * shapes[si].layers;
                    bytes_total += (double)bytes * shapes[si].layers;
                    free(copies);
                }
                printf("%-3s %-5s n %d per prefill: products %.1f us (%.0f GB/s) with the forward shapes, %.1f us with "
                       "the best\n",
                       shapes[si].name, types[ti].name, n, total, bytes_total / total / 1e3, total_best);
            }
        }
    }
    zr_launcher_free(&l);
    zr_cuda_free(&cuda, pool);
    zr_cuda_free(&cuda, x);
    zr_cuda_free(&cuda, y);
    zr_cuda_close(&cuda);
    return 0;
}
