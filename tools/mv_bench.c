/* zrun-mv-bench: the decode matrix-vector kernels alone, on the matrices of Llama-3.2-1B,
 * Llama-3-8B and Gemma-3-4B (g4b: 2560 wide, a 262144-row output; not by default; 3b: Llama-3.2-3B, not by default; q30: Qwen3-30B-A3B's attention products, not by default) (QKV with the input norm, attention output adding into the residual, gate|up
 * with the norm and the gated output, FFN down adding into the residual, the vocabulary
 * output), for each weight type, the type's kernel (cu/matvec_*.cu) at each launch shape (row
 * groups x split-K warps per block). Not a test.
 *
 * Each figure is the median of 5 replays of a graph of K launches, divided by K; the launches
 * rotate over enough copies of the matrix (>= 128 MiB in all) that the L2 cache does not hold
 * them, so it is the time a decode step sees for that matrix, kernel gaps included. Weights
 * are random 16-bit words 0x3000..0x3fff (finite F16 values and scales, any quant bytes).
 *     zrun-mv-bench [-t f16,q8_0,q4_0,q4_k,q6_k,q5_k,q3_k,q2_k,q4_k_m] [-m 1b,8b,g4b,3b,q30] [-o FILE.csv] [-q]
 * -q: the forward pass's kernel and shape only. q4_k_m: the forward pass's own Q4_K / Q6_K
 * kernels and shapes on the matrices of llama.cpp's Q4_K_M mix (tools/synth.c), each launch as
 * the forward pass made it before matvec_mix (Q|K and V apart in the layers whose V is Q6_K), then
 * Q|K and V in one matvec_mix launch (cu/matvec_mix.cu: the decode step's path since).
 * A shape "GxS/B" is the tall kernel on B blocks (mv_shape.c's pick for vocabulary outputs; the CSV's
 * blocks column, 0 for a block per tile); the
 * q4_k_m lines time such a pick against a block per tile too.
 * Prints, per model, type and matrix: the forward pass's own shape and the best shape found, in
 * us and GB/s; then per model and type the matrix-vector time per token, both ways. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/driver.h"
#include "cuda/forward.h"
#include "cuda/graph.h"
#include "cuda/launch.h"
#include "cuda/module.h"
#include "cuda/weights.h"
#include "quant.h"

typedef struct Shape {
    const char *name;
    int embd, q, kv, ff, layers, vocab;
} Shape;

typedef struct Mat {
    const char *name;
    int n_in, n_out, mode, add, per_token; /* per_token: launches per token (layers, or 1) */
} Mat;

/* "GxS": row groups x split-K warps; "GxS/B": the tall kernel on B blocks */
static const char *shape_str(ZrMvShape sp, char buf[32]) {
    if (sp.blocks) snprintf(buf, 32, "%dx%d/%d", sp.groups, sp.split, sp.blocks);
    else snprintf(buf, 32, "%dx%d", sp.groups, sp.split);
    return buf;
}

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* name is one of the comma-separated words of list ("q4_k" is not in "q4_k_m") */
static bool listed(const char *list, const char *name) {
    const size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == 0)) return true;
    return false;
}

static size_t a256(size_t n) { return (n + 255) & ~(size_t)255; }

static double time_recording(ZrCuda *c, ZrLauncher *l, int K, const char *name, ZrError *err);

/* us per launch of the type's kernel with the shape on K rotating copies of the matrix, or < 0 on error */
static double time_config(ZrCuda *c, ZrLauncher *l, const ZrCuKernels *k, const ZrCuWeight *copies, int n_copies,
                          const Mat *m, ZrMvShape shape, CUdeviceptr x, CUdeviceptr g, CUdeviceptr y, ZrError *err) {
    const int K = n_copies * 2 < 16 ? 16 : n_copies * 2 > 256 ? 256 : n_copies * 2;
    zr_launcher_record_begin(l);
    for (int i = 0; i < K; i++) {
        const ZrCuWeight *w = &copies[i % n_copies];
        const CUdeviceptr add = m->add ? y : 0, nw = m->mode & ZR_CUF_MV_RMSNORM ? g : 0;
        const int rc = zr_cuf_matvec_shaped(l, k, w, x, y, add, nw, 1e-5f, m->mode, shape, err);
        if (rc) {
            zr_launcher_record_end(l);
            return -1;
        }
    }
    zr_launcher_record_end(l);
    return time_recording(c, l, K, k->mv[copies[0].type].name, err);
}

/* us per launch of the K launches recorded in l: the median of 5 replays of their graph / K */
static double time_recording(ZrCuda *c, ZrLauncher *l, int K, const char *name, ZrError *err) {
    const ZrCuDriver *d = c->drv;
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
        if (!err->msg[0]) zr_err(err, ZR_E_CUDA, "%s: timing failed", name);
        return -1;
    }
    qsort(t, 5, sizeof *t, cmpd);
    return t[2];
}

/* us per launch of Q|K (Q4_K) and V (Q6_K) of one layer in one matvec_mix launch (cu/matvec_mix.cu,
 * the forward pass's path for them), on rotating copies of the pair; or < 0 on error (-2: the plan
 * keeps two launches for this shape) */
static double time_mix(ZrCuda *c, ZrLauncher *l, const ZrCuKernels *k, const Shape *sh, CUdeviceptr pool,
                       size_t pool_bytes, CUdeviceptr x, CUdeviceptr g, CUdeviceptr y, ZrError *err) {
    const ZrCuWeight qk = {.type = ZR_TYPE_Q4_K, .n_in = sh->embd, .n_out = sh->q + sh->kv},
                     v = {.type = ZR_TYPE_Q6_K, .n_in = sh->embd, .n_out = sh->kv};
    const size_t mq = a256(zr_cuw_main_row_bytes(qk.type, qk.n_in) * (size_t)qk.n_out),
                 sq = a256(zr_cuw_side_bytes(qk.type, qk.n_in, qk.n_out)),
                 mv = a256(zr_cuw_main_row_bytes(v.type, v.n_in) * (size_t)v.n_out),
                 sv = a256(zr_cuw_side_bytes(v.type, v.n_in, v.n_out)), bytes = mq + sq + mv + sv;
    int n_copies = (int)((((size_t)128 << 20) + bytes - 1) / bytes);
    if ((size_t)n_copies * bytes > pool_bytes) n_copies = (int)(pool_bytes / bytes);
    const int K = n_copies * 2 < 16 ? 16 : n_copies * 2 > 256 ? 256 : n_copies * 2, off[2] = {0, qk.n_out};
    ZrCuWeight w[2] = {qk, v};
    ZrMvMix plan;
    if (!zr_cuf_mv_mix_plan(k, w, 2, ZR_CUF_MV_RMSNORM, &plan)) return -2;
    zr_launcher_record_begin(l);
    for (int i = 0; i < K; i++) {
        const CUdeviceptr base = pool + (size_t)(i % n_copies) * bytes;
        w[0].main = base;
        w[0].side = base + mq;
        w[1].main = base + mq + sq;
        w[1].side = base + mq + sq + mv;
        if (zr_k_matvec_mix(l, k, &plan, w, off, x, y, 0, g, 1e-5f, ZR_CUF_MV_RMSNORM, NULL, err)) {
            zr_launcher_record_end(l);
            return -1;
        }
    }
    zr_launcher_record_end(l);
    return time_recording(c, l, K, k->mv_mix[plan.kernel].name, err);
}

/* Q4_K_M (tools/synth.c's mix of llama.cpp's rule): of n layers, those i < n/8, i >= 7n/8 and
 * every third between have attn_v and ffn_down in Q6_K; the output is Q6_K; the rest Q4_K. */
static int kquant_mix(ZrCuda *c, ZrLauncher *l, const ZrCuKernels *k, const Shape *sh, CUdeviceptr pool,
                      size_t pool_bytes, CUdeviceptr x, CUdeviceptr g, CUdeviceptr y, FILE *csv, ZrError *err) {
    int more = 0;
    for (int i = 0; i < sh->layers; i++)
        more += i < sh->layers / 8 || i >= 7 * sh->layers / 8 || (i - sh->layers / 8) % 3 == 2;
    const int rest = sh->layers - more, K4 = ZR_TYPE_Q4_K, K6 = ZR_TYPE_Q6_K;
    const struct {
        Mat m;
        uint32_t type;
    } mats[] = {
        {{"qkv", sh->embd, sh->q + 2 * sh->kv, ZR_CUF_MV_RMSNORM, 0, rest}, K4},
        {{"qk", sh->embd, sh->q + sh->kv, ZR_CUF_MV_RMSNORM, 0, more}, K4},
        {{"v", sh->embd, sh->kv, ZR_CUF_MV_RMSNORM, 0, more}, K6},
        {{"wo", sh->q, sh->embd, ZR_CUF_MV_PLAIN, 1, sh->layers}, K4},
        {{"gu", sh->embd, 2 * sh->ff, ZR_CUF_MV_RMSNORM | ZR_CUF_MV_GLU, 0, sh->layers}, K4},
        {{"down", sh->ff, sh->embd, ZR_CUF_MV_PLAIN, 1, rest}, K4},
        {{"down", sh->ff, sh->embd, ZR_CUF_MV_PLAIN, 1, more}, K6},
        {{"out", sh->embd, sh->vocab, ZR_CUF_MV_RMSNORM, 0, 1}, K6},
    };
    double tok = 0, bytes_tok = 0, t_apart = 0; /* t_apart: qk + v of one layer, two launches */
    for (size_t mi = 0; mi < sizeof mats / sizeof mats[0]; mi++) {
        const Mat *m = &mats[mi].m;
        const uint32_t type = mats[mi].type;
        const size_t mb = zr_cuw_main_row_bytes(type, m->n_in) * (size_t)m->n_out,
                     sb = zr_cuw_side_bytes(type, m->n_in, m->n_out), bytes = a256(mb) + a256(sb);
        int n_copies = (int)((((size_t)128 << 20) + bytes - 1) / bytes);
        if ((size_t)n_copies * bytes > pool_bytes) n_copies = (int)(pool_bytes / bytes);
        ZrCuWeight *copies = malloc(sizeof *copies * n_copies);
        if (!copies) return zr_err(err, ZR_E_NOMEM, "out of host memory");
        for (int i = 0; i < n_copies; i++)
            copies[i] = (ZrCuWeight){.type = type, .n_in = m->n_in, .n_out = m->n_out,
                                     .main = pool + (size_t)i * bytes, .side = pool + (size_t)i * bytes + a256(mb)};
        const ZrMvShape def = zr_cuf_mv_shape(k, &copies[0], m->mode);
        const double t = time_config(c, l, k, copies, n_copies, m, def, x, g, y, err);
        if (t < 0) {
            free(copies);
            return ZR_E_CUDA;
        }
        /* GB/s of the file's bytes (ggml's block sizes), the figure zrun bench reports */
        const double file_bytes = (double)zr_row_bytes(type, m->n_in) * m->n_out;
        char sbuf[32];
        printf("%-3s %-6s %-6s %6d %7d | %-5s %-9s %8.2f us %7.0f GB/s (device bytes %.0f) x %d per token\n",
               sh->name, "q4_k_m", m->name, m->n_in, m->n_out, zr_type_name(type), shape_str(def, sbuf), t,
               file_bytes / t / 1e3, bytes / t / 1e3, m->per_token);
        if (def.blocks) { /* the tall kernel's pick against a block per tile */
            const ZrMvShape one = {.groups = def.groups, .split = def.split, .blocks = 0};
            const double t1 = time_config(c, l, k, copies, n_copies, m, one, x, g, y, err);
            if (t1 < 0) {
                free(copies);
                return ZR_E_CUDA;
            }
            printf("%-3s %-6s %-6s %6d %7d | %-5s %-9s %8.2f us %7.0f GB/s (a block per tile)\n", sh->name, "q4_k_m",
                   m->name, m->n_in, m->n_out, zr_type_name(type), shape_str(one, sbuf), t1, file_bytes / t1 / 1e3);
        }
        if (csv)
            fprintf(csv, "%s,q4_k_m:%s,%s,%d,%d,%d,%d,%d,%.3f,%.1f,1\n", sh->name, zr_type_name(type), m->name, m->n_in,
                    m->n_out, def.groups, def.split, def.blocks, t, file_bytes / t / 1e3);
        fflush(stdout);
        free(copies);
        tok += t * m->per_token;
        bytes_tok += file_bytes * m->per_token;
        if (!strcmp(m->name, "qk") || !strcmp(m->name, "v")) t_apart += t;
    }
    printf("%-3s q4_k_m per token: matrix-vector %.1f us (%.0f GB/s of file bytes), %d launches\n", sh->name, tok,
           bytes_tok / tok / 1e3, 4 * sh->layers + more + 1);
    /* the decode step's path for qk and v: one launch (the lines above time them apart) */
    const double t_mix = time_mix(c, l, k, sh, pool, pool_bytes, x, g, y, err);
    if (t_mix == -1) return ZR_E_CUDA;
    if (t_mix > 0) {
        const double file_bytes = (double)zr_row_bytes(ZR_TYPE_Q4_K, sh->embd) * (sh->q + sh->kv) +
                                  (double)zr_row_bytes(ZR_TYPE_Q6_K, sh->embd) * sh->kv;
        printf("%-3s %-6s %-6s %6d %7d | q4_K+q6_K one launch %8.2f us %7.0f GB/s x %d per token\n", sh->name, "q4_k_m",
               "qk+v", sh->embd, sh->q + 2 * sh->kv, t_mix, file_bytes / t_mix / 1e3, more);
        if (csv)
            fprintf(csv, "%s,q4_k_m:mix,qk+v,%d,%d,0,0,0,%.3f,%.1f,1\n", sh->name, sh->embd, sh->q + 2 * sh->kv, t_mix,
                    file_bytes / t_mix / 1e3);
        printf("%-3s q4_k_m per token with qk+v in one launch: matrix-vector %.1f us (qk+v %.2f -> %.2f us a layer), "
               "%d launches\n", sh->name, tok - more * (t_apart - t_mix), t_apart, t_mix, 4 * sh->layers + 1);
    }
    fflush(stdout);
    return ZR_OK;
}

int main(int argc, char **argv) {
    const char *types_arg = "f16,q8_0,q4_0", *models_arg = "1b,8b", *csv_path = NULL;
    int opt, quick = 0;
    while ((opt = getopt(argc, argv, "t:m:o:q")) != -1) {
        if (opt == 'q') quick = 1;
        else if (opt == 't') types_arg = optarg;
        else if (opt == 'm') models_arg = optarg;
        else if (opt == 'o') csv_path = optarg;
        else {
            fprintf(stderr, "usage: zrun-mv-bench [-t f16,q8_0,q4_0,q4_k,q6_k,q5_k,q3_k,q2_k,q4_k_m] [-m 1b,8b,g4b,3b,q30] [-o FILE.csv] [-q]\n");
            return 2;
        }
    }
    static const Shape shapes[] = {{"1b", 2048, 2048, 512, 8192, 16, 128256},
                                   {"8b", 4096, 4096, 1024, 14336, 32, 128256},
                                   {"g4b", 2560, 2048, 1024, 10240, 34, 262144}, /* gemma3-4b */
                                   {"3b", 3072, 3072, 1024, 8192, 28, 128256},   /* llama3.2-3b */
                                   {"q30", 2048, 4096, 512, 768, 48, 151936}};   /* qwen3-30b-a3b's dense products (ff: one expert's) */
    static const struct {
        const char *name;
        uint32_t type;
    } types[] = {
        {"f16", ZR_TYPE_F16}, {"q8_0", ZR_TYPE_Q8_0}, {"q4_0", ZR_TYPE_Q4_0}, {"q4_k", ZR_TYPE_Q4_K}, {"q6_k", ZR_TYPE_Q6_K},
        {"q5_k", ZR_TYPE_Q5_K}, {"q3_k", ZR_TYPE_Q3_K}, {"q2_k", ZR_TYPE_Q2_K},
    };
    /* blocks < 0: the tall kernel on -blocks per multiprocessor */
    static const ZrMvShape grid[] = {{8, 1, 0, 0}, {16, 1, 0, 0}, {4, 1, 0, 0},  {2, 1, 0, 0},   {4, 2, 0, 0},
                                     {8, 2, 0, 0}, {2, 4, 0, 0},  {4, 4, 0, 0},  {1, 8, 0, 0},   {2, 8, 0, 0},
                                     {16, 2, 0, 0}, {8, 1, -4, 0}, {8, 1, -2, 0}, {16, 1, -2, 0}};
    const ZrCuDriver *drv;
    ZrCuda cuda;
    ZrCuKernels k;
    ZrLauncher l;
    ZrError err = {0};
    if (zr_driver_open(&drv, &err) || zr_cuda_open(drv, 0, &cuda, &err) || zr_cuda_load_kernels(&cuda, &err) ||
        zr_cuf_kernels_load(&cuda, &k, 14336, &err)) {
        fprintf(stderr, "zrun-mv-bench: %s\n", err.msg);
        return 1;
    }
    zr_launcher_init(&l, drv, cuda.stream);
    FILE *csv = csv_path ? fopen(csv_path, "w") : NULL;
    if (csv) fprintf(csv, "model,type,matrix,n_in,n_out,groups,split,blocks,us,gbps,default\n");
    /* one pool of random words holds every copy of every matrix */
    const size_t pool_bytes = (size_t)1152 << 20;
    CUdeviceptr pool, x, g, y;
    if (zr_cuda_alloc(&cuda, &pool, pool_bytes, "pool", &err) || zr_cuda_alloc(&cuda, &x, 2 * 14336 * 4, "x", &err) ||
        zr_cuda_alloc(&cuda, &g, 14336 * 4, "norm", &err) || zr_cuda_alloc(&cuda, &y, 262144 * 4, "y", &err)) {
        fprintf(stderr, "zrun-mv-bench: %s\n", err.msg);
        return 1;
    }
    {
        const size_t chunk = (size_t)64 << 20;
        uint16_t *h = malloc(chunk);
        uint64_t s = 0x9e3779b97f4a7c15ull;
        for (size_t off = 0; off < pool_bytes; off += chunk) {
            for (size_t i = 0; i < chunk / 2; i++) {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                h[i] = (uint16_t)(0x3000 | (s & 0x0fff));
            }
            if (zr_cuda_h2d(&cuda, pool + off, h, chunk, &err) || zr_cuda_sync(&cuda, &err)) {
                fprintf(stderr, "zrun-mv-bench: %s\n", err.msg);
                return 1;
            }
        }
        float *hx = malloc(sizeof(float) * 2 * 14336);
        for (int i = 0; i < 2 * 14336; i++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            hx[i] = (float)((int)(s % 2001) - 1000) / 1000.0f;
        }
        if (zr_cuda_h2d(&cuda, x, hx, sizeof(float) * 2 * 14336, &err) ||
            zr_cuda_h2d(&cuda, g, hx + 14336, sizeof(float) * 14336, &err) || zr_cuda_sync(&cuda, &err)) {
            fprintf(stderr, "zrun-mv-bench: %s\n", err.msg);
            return 1;
        }
        free(hx);
        free(h);
    }
    printf("%-3s %-5s %-6s %6s %7s | %-13s %8s %7s | %-10s %8s %7s\n", "mdl", "type", "matrix", "n_in", "n_out",
           "forward shape", "us", "GB/s", "best shape", "us", "GB/s");
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const Shape *sh = &shapes[si];
        if (!strstr(models_arg, sh->name)) continue;
        const Mat mats[] = {
            {"qkv", sh->embd, sh->q + 2 * sh->kv, ZR_CUF_MV_RMSNORM, 0, sh->layers},
            {"wo", sh->q, sh->embd, ZR_CUF_MV_PLAIN, 1, sh->layers},
            {"gu", sh->embd, 2 * sh->ff, ZR_CUF_MV_RMSNORM | ZR_CUF_MV_GLU, 0, sh->layers},
            {"down", sh->ff, sh->embd, ZR_CUF_MV_PLAIN, 1, sh->layers},
            {"out", sh->embd, sh->vocab, ZR_CUF_MV_RMSNORM, 0, 1},
        };
        if (listed(types_arg, "q4_k_m") && kquant_mix(&cuda, &l, &k, sh, pool, pool_bytes, x, g, y, csv, &err)) {
            fprintf(stderr, "zrun-mv-bench: %s q4_k_m: %s\n", sh->name, err.msg);
            return 1;
        }
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
            if (!listed(types_arg, types[ti].name)) continue;
            const uint32_t type = types[ti].type;
            double tok_fwd = 0, tok_best = 0, bytes_tok = 0;
            for (size_t mi = 0; mi < sizeof mats / sizeof mats[0]; mi++) {
                const Mat *m = &mats[mi];
                const size_t mb = zr_cuw_main_row_bytes(type, m->n_in) * (size_t)m->n_out,
                             sb = zr_cuw_side_bytes(type, m->n_in, m->n_out), bytes = a256(mb) + a256(sb);
                int n_copies = (int)((((size_t)128 << 20) + bytes - 1) / bytes);
                if ((size_t)n_copies * bytes > pool_bytes) n_copies = (int)(pool_bytes / bytes);
                if (n_copies < 1) { /* g4b's F16 output (1.3 GB) */
                    fprintf(stderr, "zrun-mv-bench: %s %s %s does not fit the pool: not timed\n", sh->name,
                            types[ti].name, m->name);
                    continue;
                }
                ZrCuWeight *copies = malloc(sizeof *copies * n_copies);
                for (int i = 0; i < n_copies; i++)
                    copies[i] = (ZrCuWeight){.type = type, .n_in = m->n_in, .n_out = m->n_out,
                                             .main = pool + (size_t)i * bytes, .side = pool + (size_t)i * bytes + a256(mb)};
                const ZrMvShape def = zr_cuf_mv_shape(&k, &copies[0], m->mode);
                double t_fwd = -1, t_best = 1e30;
                ZrMvShape best_s = def;
                for (size_t gi = 0; gi < sizeof grid / sizeof grid[0]; gi++) {
                    ZrMvShape sp = quick ? def : grid[gi];
                    if (quick && gi > 0) break;
                    if (sp.blocks < 0) sp.blocks = -sp.blocks * k.sm_count;
                    const int epi = (int)zr_type_info(type)->item; /* values per 16-byte item */
                    if (sp.split > 1 && m->n_in / epi / sp.split < 32) continue;
                    char sbuf[32];
                    const double t = time_config(&cuda, &l, &k, copies, n_copies, m, sp, x, g, y, &err);
                    if (t < 0) {
                        fprintf(stderr, "zrun-mv-bench: %s %s %s %s: %s\n", sh->name, types[ti].name, m->name,
                                shape_str(sp, sbuf), err.msg);
                        return 1;
                    }
                    const bool is_def = sp.groups == def.groups && sp.split == def.split && sp.blocks == def.blocks;
                    if (is_def) t_fwd = t;
                    if (t < t_best) {
                        t_best = t;
                        best_s = sp;
                    }
                    if (csv)
                        fprintf(csv, "%s,%s,%s,%d,%d,%d,%d,%d,%.3f,%.1f,%d\n", sh->name, types[ti].name, m->name,
                                m->n_in, m->n_out, sp.groups, sp.split, sp.blocks, t, bytes / t / 1e3, is_def);
                }
                if (t_fwd < 0) { /* the default shape is not in the grid: time it on its own */
                    t_fwd = time_config(&cuda, &l, &k, copies, n_copies, m, def, x, g, y, &err);
                }
                char s1[32], s2[32];
                printf("%-3s %-5s %-6s %6d %7d | %-13s %8.2f %7.0f | %-10s %8.2f %7.0f\n", sh->name, types[ti].name,
                       m->name, m->n_in, m->n_out, shape_str(def, s1), t_fwd, bytes / t_fwd / 1e3, shape_str(best_s, s2),
                       t_best, bytes / t_best / 1e3);
                fflush(stdout);
                tok_fwd += t_fwd * m->per_token;
                tok_best += t_best * m->per_token;
                bytes_tok += (double)bytes * m->per_token;
                free(copies);
            }
            printf("%-3s %-5s per token: matrix-vector %.1f us (%.0f GB/s) with the forward shapes, %.1f us (%.0f GB/s) "
                   "with the best",
                   sh->name, types[ti].name, tok_fwd, bytes_tok / tok_fwd / 1e3, tok_best, bytes_tok / tok_best / 1e3);
            printf("\n");
            fflush(stdout);
        }
    }
    if (csv) fclose(csv);
    zr_launcher_free(&l);
    zr_cuda_free(&cuda, pool);
    zr_cuda_free(&cuda, x);
    zr_cuda_free(&cuda, g);
    zr_cuda_free(&cuda, y);
    zr_cuda_close(&cuda);
    return 0;
}
