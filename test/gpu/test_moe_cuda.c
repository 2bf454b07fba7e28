/* Mixtures of experts on the CUDA backend (issue 15), on qwen3moe and Mixtral-style llama models
 * zrun-synth writes, against the CPU reference (itself held to llama.cpp by test/test_moe.c).
 *
 * Tolerances (worst row of max|gpu - cpu| / std(cpu row), as test_cuda_backend.c):
 *   decode steps (F32 throughout, as the CPU)                                  <= 3e-5
 *   prefill: tokens grouped by expert, the router through a cuBLASLt GEMM and every expert
 *   through the grouped product (cu/moe_mm.cu) or cuBLASLt GEMMs, both multiplying F16 operands
 *   for F16 / quantized weights                                                <= 1e-2
 *   (F32 weights keep F32 operands: <= 3e-5)
 * The graph replays the eager logits bit for bit over 128 greedy steps, while the chosen experts
 * change from token to token (counted on the CPU reference, fed the same tokens). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu/moe.h"
#include "cpu/ops.h"
#include "cuda/klaunch.h"
#include "cuda/weights.h"
#include "gpu_env.h"
#include "quant.h"
#include "model.h"
#include "zt_decode.h"
#include "zt.h"
#include "zt_synth.h"
#include "zt_fixtures.h"
#include "zt_gpu_model.h"
#include "zt_proc.h"

#define N_POS 40
#define N_GRAPH 128

static const int32_t k_tokens[N_POS] = {2,   71,  294, 436, 413, 394, 35,  133, 63,  256, 392, 233, 244, 336,
                                        197, 406, 110, 51,  252, 17,  460, 430, 202, 224, 314, 393, 395, 45,
                                        88,  301, 19,  477, 150, 222, 9,   380, 265, 128, 499, 64};

typedef struct Case {
    const char *name, *args;
} Case;

static const Case k_cases[] = {
    {"qwen3moe-F32", "--arch qwen3moe --layers 3 --seed 5 --type f32"},
    {"qwen3moe-Q4_K_M", "--arch qwen3moe --layers 3 --seed 5 --type q4_k_m"},
    {"qwen3moe-wide-F16", "--arch qwen3moe --layers 2 --seed 7 --experts 64 --experts-used 8 --ff-expert 32 --type f16"},
    {"qwen3moe-wide-Q8_0", "--arch qwen3moe --layers 2 --seed 7 --experts 128 --experts-used 8 --ff-expert 64 --type q8_0"},
    /* the grouped product's Q4_K gate|up and Q6_K / Q4_K down on 64 experts */
    {"qwen3moe-wide-Q4_K_M", "--arch qwen3moe --layers 2 --seed 7 --experts 64 --experts-used 8 --ff-expert 256 --type q4_k_m"},
    {"llama-moe-F32", "--arch llama --layers 3 --seed 6 --experts 8 --experts-used 2 --type f32"},
    {"llama-moe-Q4_K_M", "--arch llama --layers 3 --seed 6 --experts 8 --experts-used 2 --type q4_k_m"},
    {"llama-moe-Q5_1", "--arch llama --layers 2 --seed 9 --experts 4 --experts-used 2 --type q5_1"},
    {"llama-moe-top1-F32", "--arch llama --layers 2 --seed 8 --experts 4 --experts-used 1 --ff-expert 128 --type f32"},
    /* an expert count and top-k no kernel was tuned for, Q6_K experts: the decode's flat gate|up and
     * the down fused with the mix (5 slots of rows of 256 values: 8 items a lane) */
    {"qwen3moe-odd-Q6_K", "--arch qwen3moe --layers 2 --seed 21 --experts 40 --experts-used 5 --ff-expert 256 --type q6_k"},
    /* gate and up experts of different types: launched apart, down reads their SwiGLU */
    {"qwen3moe-mixed-Q4_K", "--arch qwen3moe --layers 2 --seed 12 --type q4_k --up-type q8_0"},
    {"llama-moe-mixed-Q6_K", "--arch llama --layers 2 --seed 13 --experts 8 --experts-used 2 --type q6_k --up-type f16"},
};
#define N_CASES (sizeof k_cases / sizeof k_cases[0])

/* ---- the kernels alone ---- */

/* n_expert random [n_in, n_rows] matrices of `type`, stacked (ggml layout, zr_row_bytes per row). */
static uint8_t *random_experts(uint32_t type, int n_in, int n_total, uint64_t *s) {
    const size_t rb = zr_row_bytes(type, n_in);
    uint8_t *w = malloc(rb * n_total);
    float *row = malloc(sizeof(float) * n_in);
    for (int r = 0; r < n_total; r++) {
        const float scale = 0.02f + 0.2f * (gpu_rand(s) + 1.0f), off = 0.3f * scale * gpu_rand(s);
        for (int i = 0; i < n_in; i++) row[i] = off + scale * gpu_rand(s);
        zr_quantize_row(type, row, w + rb * r, n_in);
    }
    free(row);
    return w;
}

static ZrCuWeight upload_stacked(GpuEnv *g, uint32_t type, const uint8_t *w, int n_in, int n_out) {
    const size_t rb = zr_row_bytes(type, n_in), mb = zr_cuw_main_row_bytes(type, n_in) * n_out, sb = zr_cuw_side_bytes(type, n_in, n_out);
    uint8_t *hm = calloc(1, mb), *hs = calloc(1, sb ? sb : 1);
    for (int r = 0; r < n_out; r++) zr_cuw_repack_row(type, w + rb * r, n_in, r, n_out, hm, hs);
    ZrCuWeight dw = {.type = type, .n_in = n_in, .n_out = n_out, .main = gpu_upload(g, hm, mb), .side = sb ? gpu_upload(g, hs, sb) : 0};
    free(hm);
    free(hs);
    return dw;
}

/* matvec_id_<type> against zr_dot_row on the chosen experts' rows: plain (each slot its own x),
 * RMSNorm + GLU (one x, each expert's gate rows then up rows) and SwiGLU input (each slot its own
 * gate | up, as the down of split gate and up experts reads them); bound as test_kernels.c's. */
ZT_TEST(matvec_id_computes_the_chosen_experts_rows_of_every_type) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    static const uint32_t types[] = {ZR_TYPE_F32,  ZR_TYPE_F16,  ZR_TYPE_BF16, ZR_TYPE_Q8_0, ZR_TYPE_Q4_0, ZR_TYPE_Q4_1, ZR_TYPE_Q5_0,
                                     ZR_TYPE_Q5_1, ZR_TYPE_Q2_K, ZR_TYPE_Q3_K, ZR_TYPE_Q4_K, ZR_TYPE_Q5_K, ZR_TYPE_Q6_K};
    enum { N_IN = 512, ROWS = 96, N_EXPERT = 6, K = 3 };
    const int32_t ids[K] = {4, 0, 5}; /* the last expert, the first, one between */
    int failed = 0;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const uint32_t type = types[ti];
        uint64_t s = 77 + type;
        uint8_t *w = random_experts(type, N_IN, ROWS * N_EXPERT, &s);
        const size_t rb = zr_row_bytes(type, N_IN);
        static float x[K][2 * N_IN], xn[N_IN], xs[N_IN], gw[N_IN], y[K * ROWS], deq[N_IN];
        for (int j = 0; j < K; j++)
            for (int i = 0; i < 2 * N_IN; i++) x[j][i] = (i < N_IN ? 1.0f : 4.0f) * gpu_rand(&s);
        for (int i = 0; i < N_IN; i++) gw[i] = 1.0f + 0.2f * gpu_rand(&s);
        ZrCuWeight dw = upload_stacked(g, type, w, N_IN, ROWS * N_EXPERT);
        CUdeviceptr dx = gpu_upload(g, x, sizeof x), dids = gpu_upload(g, ids, sizeof ids), dg = gpu_upload(g, gw, sizeof gw);
        CUdeviceptr dy = gpu_alloc(g, sizeof y);
        ZrError e = {0};
        double worst_of[3] = {0, 0, 0};
        for (int v = 0; v < 3; v++) { /* plain, rmsnorm + glu, swiglu input */
            const int glu = v == 1;
            const int mode = v == 1 ? ZR_CUF_MV_RMSNORM | ZR_CUF_MV_GLU : v == 2 ? ZR_CUF_MV_SWIGLU : ZR_CUF_MV_PLAIN, results = glu ? ROWS / 2 : ROWS;
            const ZrCuWeight one = {.type = type, .n_in = N_IN, .n_out = ROWS};
            int rc = zr_k_matvec_id(&g->l, &g->k.mv_id[type], zr_cuf_mv_rows_per_warp(type), &dw, ROWS, dids, K, dx, glu ? 0 : 2 * N_IN, dy,
                                    results, glu ? dg : 0, 1e-5f, mode, zr_cuf_mv_shape_expert(&g->k, &one, mode), NULL, &e);
            ZT_CHECKF(rc == 0, "%s: %s", zr_type_name(type), e.msg);
            gpu_download(g, y, dy, sizeof(float) * K * results);
            if (glu) zr_cpu_rmsnorm(xn, x[0], gw, N_IN, 1e-5f);
            for (int j = 0; j < K; j++) {
                if (v == 2) zr_cpu_swiglu(xs, x[j], x[j] + N_IN, N_IN);
                const float *xr = glu ? xn : v == 2 ? xs : x[j];
                for (int r = 0; r < results; r++) {
                    double ref[2], tol[2];
                    for (int h = 0; h < 1 + glu; h++) {
                        const uint8_t *row = w + rb * ((size_t)ids[j] * ROWS + r + h * results);
                        ref[h] = zr_dot_row(type, row, xr, N_IN);
                        zr_dequant_row(type, row, deq, N_IN);
                        double mag = 0;
                        for (int i = 0; i < N_IN; i++) mag += fabs((double)deq[i] * xr[i]);
                        tol[h] = 1e-5 * mag + 1e-5 * fabs(ref[h]);
                    }
                    double want = ref[0], t = tol[0];
                    if (glu) {
                        const double sg = ref[0] / (1.0 + exp(-ref[0]));
                        want = sg * ref[1];
                        t = 1.1 * tol[0] * fabs(ref[1]) + fabs(sg) * tol[1] + 1e-6 * fabs(want);
                    }
                    const float got = ((const float *)y)[j * results + r]; /* slot j's row at j * results */
                    const double q = isfinite(got) ? fabs(got - want) / t : 1e30;
                    if (q > worst_of[v]) worst_of[v] = q;
                }
            }
        }
        const bool ok = worst_of[0] <= 1 && worst_of[1] <= 1 && worst_of[2] <= 1;
        fprintf(stderr, "  matvec_id %-5s worst |diff|/bound plain %.3g, rmsnorm+glu %.3g, swiglu %.3g%s\n", zr_type_name(type), worst_of[0],
                worst_of[1], worst_of[2], ok ? "  PASS" : "  FAIL");
        failed += !ok;
        gpu_free(g, dw.main);
        if (dw.side) gpu_free(g, dw.side);
        gpu_free(g, dx);
        gpu_free(g, dids);
        gpu_free(g, dg);
        gpu_free(g, dy);
        free(w);
    }
    ZT_CHECKF(failed == 0, "%d types over the bound", failed);
}

/* moe_route_f32 chooses the CPU reference's experts in its order, with its weights (to float
 * rounding), for rows of random logits of 5 to 1024 experts; moe_combine_f32 mixes as the CPU. */
ZT_TEST(route_and_combine_match_the_cpu_reference) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    /* every register count of cu/moe_topk.cuh (1 to 32 experts a lane), and more than 32 chosen (their p through memory) */
    static const int shapes[][2] = {{8, 2}, {16, 4}, {64, 8}, {128, 8}, {256, 1}, {5, 5}, {512, 16}, {1024, 8}, {300, 40}};
    enum { ROWS = 33, N = 300 };
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int ne = shapes[si][0], k = shapes[si][1];
        uint64_t s = 1000 + si;
        float *lg = malloc(sizeof(float) * ROWS * ne), *probs = malloc(sizeof(float) * ne);
        int32_t *ids = malloc(sizeof(int32_t) * ROWS * k), *gids = malloc(sizeof(int32_t) * ROWS * k);
        float *w = malloc(sizeof(float) * ROWS * k), *gw = malloc(sizeof(float) * ROWS * k);
        for (int i = 0; i < ROWS * ne; i++) lg[i] = 3.0f * gpu_rand(&s);
        /* equal p, chosen lowest id first: experts 3 and 35 (one lane's registers), and the last
         * expert (another lane's); in odd rows they are the largest, so the first rounds take them */
        for (int r = 0; r < ROWS && ne >= 64; r++) {
            float *l = lg + (size_t)r * ne;
            if (r & 1) l[3] = 3.5f;
            l[35] = l[ne - 1] = l[3];
        }
        for (int r = 0; r < ROWS; r++) zr_cpu_moe_route(lg + r * ne, probs, ne, k, ids + r * k, w + r * k);
        CUdeviceptr dl = gpu_upload(g, lg, sizeof(float) * ROWS * ne), di = gpu_alloc(g, sizeof(int32_t) * ROWS * k),
                    dw = gpu_alloc(g, sizeof(float) * ROWS * k);
        ZrError e = {0};
        ZT_CHECKF(zr_k_moe_route(&g->l, &g->k, dl, ne, k, di, dw, ROWS, &e) == 0, "%s", e.msg);
        gpu_download(g, gids, di, sizeof(int32_t) * ROWS * k);
        gpu_download(g, gw, dw, sizeof(float) * ROWS * k);
        int same = 0;
        double worst = 0;
        for (int i = 0; i < ROWS * k; i++) {
            same += ids[i] == gids[i];
            const double d = fabs((double)w[i] - gw[i]);
            if (d > worst) worst = d;
        }
        fprintf(stderr, "  route %3d experts, %d used: ids %d/%d equal, weights max|diff| %.2g%s\n", ne, k, same, ROWS * k, worst,
                same == ROWS * k && worst < 1e-6 ? "  PASS" : "  FAIL");
        ZT_CHECK(same == ROWS * k && worst < 1e-6);
        /* the mix: x += sum_j w_j out_j */
        float *out = malloc(sizeof(float) * ROWS * k * N), *x = malloc(sizeof(float) * ROWS * N), *gx = malloc(sizeof(float) * ROWS * N);
        for (int i = 0; i < ROWS * k * N; i++) out[i] = gpu_rand(&s);
        for (int i = 0; i < ROWS * N; i++) x[i] = gpu_rand(&s);
        CUdeviceptr dout = gpu_upload(g, out, sizeof(float) * ROWS * k * N), dx = gpu_upload(g, x, sizeof(float) * ROWS * N);
        ZT_CHECKF(zr_k_moe_combine(&g->l, &g->k, dout, dw, k, dx, N, ROWS, &e) == 0, "%s", e.msg);
        gpu_download(g, gx, dx, sizeof(float) * ROWS * N);
        int exact = 0;
        for (int r = 0; r < ROWS; r++)
            for (int i = 0; i < N; i++) {
                float acc = out[(size_t)(r * k) * N + i] * gw[r * k];
                for (int j = 1; j < k; j++) acc += out[(size_t)(r * k + j) * N + i] * gw[r * k + j];
                const float want = x[r * N + i] + acc;
                exact += !memcmp(&want, &gx[r * N + i], sizeof want);
            }
        fprintf(stderr, "  combine %d used: %d/%d values equal the CPU's bit for bit%s\n", k, exact, ROWS * N, exact == ROWS * N ? "  PASS" : "  FAIL");
        ZT_CHECK(exact == ROWS * N);
        gpu_free(g, dl);
        gpu_free(g, di);
        gpu_free(g, dw);
        gpu_free(g, dout);
        gpu_free(g, dx);
        free(lg), free(probs), free(ids), free(gids), free(w), free(gw), free(out), free(x), free(gx);
    }
}

/* The decode's fusions (cu/moe_matvec.cu): a gate|up matvec_id that routes for itself writes the
 * CPU reference's ids and moe_route_f32's weights bit for bit and the rows of the unfused launch
 * on those ids bit for bit; a down matvec_id that mixes adds moe_combine_f32's sum (the same
 * float operations in slot order) into the residual bit for bit, launch after launch (each
 * launch leaves its per-block counts at 0 for the next: three launches in a row). */
ZT_TEST(matvec_id_routes_for_itself_and_mixes_into_the_residual) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    static const struct { int ne, k; uint32_t type; } cases[] = {
        {8, 2, ZR_TYPE_Q4_K}, {128, 8, ZR_TYPE_Q4_K}, {256, 8, ZR_TYPE_Q6_K}, {64, 32, ZR_TYPE_Q8_0}, {5, 5, ZR_TYPE_F32}, {40, 1, ZR_TYPE_Q5_1},
    };
    enum { N_IN = 512, ROWS = 100, MIXES = 3 };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const int ne = cases[ci].ne, k = cases[ci].k;
        const uint32_t type = cases[ci].type;
        uint64_t s = 4242 + ci;
        uint8_t *w = random_experts(type, N_IN, ROWS * ne, &s);
        float *lg = malloc(sizeof(float) * ne), *probs = malloc(sizeof(float) * ne), *x = malloc(sizeof(float) * k * 2 * N_IN);
        float *gw = malloc(sizeof(float) * N_IN), *res = malloc(sizeof(float) * ROWS), *want = malloc(sizeof(float) * ROWS);
        float *y_ref = malloc(sizeof(float) * k * ROWS), *y = malloc(sizeof(float) * k * ROWS), *wts = malloc(sizeof(float) * k),
              *wts_ref = malloc(sizeof(float) * k), *wts_cpu = malloc(sizeof(float) * k);
        int32_t *ids = malloc(sizeof(int32_t) * k), *ids_ref = malloc(sizeof(int32_t) * k), *ids_cpu = malloc(sizeof(int32_t) * k);
        for (int i = 0; i < ne; i++) lg[i] = 3.0f * gpu_rand(&s);
        if (ne >= 64) lg[3] = 3.5f, lg[35] = lg[3]; /* the largest p, twice in one lane's registers */
        if (ne >= 8) lg[ne - 1] = lg[3]; /* a tie: the lower id first */
        for (int i = 0; i < k * 2 * N_IN; i++) x[i] = gpu_rand(&s);
        for (int i = 0; i < N_IN; i++) gw[i] = 1.0f + 0.2f * gpu_rand(&s);
        for (int i = 0; i < ROWS; i++) res[i] = gpu_rand(&s);
        zr_cpu_moe_route(lg, probs, ne, k, ids_cpu, wts_cpu);
        ZrCuWeight dw = upload_stacked(g, type, w, N_IN, ROWS * ne);
        CUdeviceptr dl = gpu_upload(g, lg, sizeof(float) * ne), dx = gpu_upload(g, x, sizeof(float) * k * 2 * N_IN),
                    dg = gpu_upload(g, gw, sizeof(float) * N_IN), dres = gpu_upload(g, res, sizeof(float) * ROWS);
        CUdeviceptr dids_ref = gpu_alloc(g, sizeof(int32_t) * k), dw_ref = gpu_alloc(g, sizeof(float) * k), dids = gpu_alloc(g, sizeof(int32_t) * k),
                    dwts = gpu_alloc(g, sizeof(float) * k), dy = gpu_alloc(g, sizeof(float) * k * ROWS),
                    ddone = gpu_upload(g, (uint32_t[ROWS]){0}, sizeof(uint32_t) * ROWS);
        ZrError e = {0};
        const int glu = ZR_CUF_MV_RMSNORM | ZR_CUF_MV_GLU, R = zr_cuf_mv_rows_per_warp(type);
        const ZrCuWeight one = {.type = type, .n_in = N_IN, .n_out = ROWS};
        const ZrKernel *kern = &g->k.mv_id[type];
        /* the reference: moe_route_f32, then the GLU launch on its ids */
        ZT_CHECKF(zr_k_moe_route(&g->l, &g->k, dl, ne, k, dids_ref, dw_ref, 1, &e) == 0, "%s", e.msg);
        ZT_CHECKF(zr_k_matvec_id(&g->l, kern, R, &dw, ROWS, dids_ref, k, dx, 0, dy, ROWS / 2, dg, 1e-5f, glu,
                                 zr_cuf_mv_shape_expert(&g->k, &one, glu), NULL, &e) == 0, "%s", e.msg);
        gpu_download(g, y_ref, dy, sizeof(float) * k * ROWS / 2);
        gpu_download(g, ids_ref, dids_ref, sizeof(int32_t) * k);
        gpu_download(g, wts_ref, dw_ref, sizeof(float) * k);
        /* the GLU launch that routes for itself */
        const ZrMvIdFuse route = {.logits = dl, .n_expert = ne, .weights = dwts};
        ZT_CHECKF(zr_k_matvec_id(&g->l, kern, R, &dw, ROWS, dids, k, dx, 0, dy, ROWS / 2, dg, 1e-5f, glu, zr_cuf_mv_shape_expert(&g->k, &one, glu),
                                 &route, &e) == 0, "%s", e.msg);
        gpu_download(g, y, dy, sizeof(float) * k * ROWS / 2);
        gpu_download(g, ids, dids, sizeof(int32_t) * k);
        gpu_download(g, wts, dwts, sizeof(float) * k);
        const bool route_ok = !memcmp(ids, ids_cpu, sizeof(int32_t) * k) && !memcmp(ids, ids_ref, sizeof(int32_t) * k) &&
                              !memcmp(wts, wts_ref, sizeof(float) * k) && !memcmp(y, y_ref, sizeof(float) * k * ROWS / 2);
        /* the plain launch on those ids, then the same launch mixing into the residual, MIXES times:
         * in one expert's shape, and unsplit in the largest block the type's kernel holds (1024
         * threads but for Q5_0 and Q5_1: zr_cuf_mv_shape_expert_slots' blocks of 32 row groups) */
        int largest = 1024; /* a power of two */
        while (largest > zr_cuf_kernel_max_threads(kern)) largest /= 2;
        const ZrMvShape mix_shapes[2] = {zr_cuf_mv_shape_expert(&g->k, &one, ZR_CUF_MV_PLAIN), {.groups = largest / 32, .split = 1}};
        bool ok = route_ok;
        for (int si = 0; si < 2; si++) {
            const ZrMvShape ms = mix_shapes[si];
            ZT_CHECKF(zr_k_matvec_id(&g->l, kern, R, &dw, ROWS, dids_ref, k, dx, 2 * N_IN, dy, ROWS, 0, 0.0f, ZR_CUF_MV_PLAIN, ms,
                                     NULL, &e) == 0, "%s", e.msg);
            gpu_download(g, y_ref, dy, sizeof(float) * k * ROWS);
            const ZrMvIdFuse mix = {.weights = dw_ref, .mix_x = dres, .done = ddone};
            int mixed_exact = 0;
            bool y_same = true;
            for (int t = 0; t < MIXES; t++) {
                ZT_CHECKF(zr_k_matvec_id(&g->l, kern, R, &dw, ROWS, dids_ref, k, dx, 2 * N_IN, dy, ROWS, 0, 0.0f, ZR_CUF_MV_PLAIN,
                                         ms, &mix, &e) == 0, "%s", e.msg);
                gpu_download(g, y, dy, sizeof(float) * k * ROWS);
                y_same = y_same && !memcmp(y, y_ref, sizeof(float) * k * ROWS);
                for (int r = 0; r < ROWS; r++) { /* moe_combine_f32's arithmetic */
                    float acc = y_ref[r] * wts_ref[0];
                    for (int j = 1; j < k; j++) acc += y_ref[j * ROWS + r] * wts_ref[j];
                    want[r] = res[r] + acc;
                }
                gpu_download(g, res, dres, sizeof(float) * ROWS);
                for (int r = 0; r < ROWS; r++) mixed_exact += !memcmp(&want[r], &res[r], sizeof(float));
                memcpy(res, want, sizeof(float) * ROWS); /* the next launch's expectation starts from the exact sum */
            }
            uint32_t done[ROWS];
            gpu_download(g, done, ddone, sizeof done);
            int left = 0;
            for (int i = 0; i < ROWS; i++) left += done[i] != 0;
            const bool shape_ok = y_same && mixed_exact == MIXES * ROWS && !left;
            ok = ok && shape_ok;
            fprintf(stderr,
                    "  fused %-5s %3d experts, %2d used: routing %s; %2dx%d warps: mix %d/%d values exact over %d launches, rows %s, "
                    "%d counts left%s\n",
                    zr_type_name(type), ne, k, route_ok ? "== moe_route_f32 + matvec_id" : "DIFFERS", ms.groups, ms.split, mixed_exact,
                    MIXES * ROWS, MIXES, y_same ? "== unmixed" : "DIFFER", left, route_ok && shape_ok ? "  PASS" : "  FAIL");
        }
        ZT_CHECK(ok);
        gpu_free(g, dw.main);
        if (dw.side) gpu_free(g, dw.side);
        gpu_free(g, dl), gpu_free(g, dx), gpu_free(g, dg), gpu_free(g, dres), gpu_free(g, dids_ref), gpu_free(g, dw_ref);
        gpu_free(g, dids), gpu_free(g, dwts), gpu_free(g, dy), gpu_free(g, ddone);
        free(w), free(lg), free(probs), free(x), free(gw), free(res), free(want), free(y_ref), free(y), free(wts), free(wts_ref);
        free(wts_cpu), free(ids), free(ids_ref), free(ids_cpu);
    }
}

/* matvec_id_<type>_flat (cu/moe_matvec.cu), the decode's gate|up as one grid over every slot's
 * tiles: the same bits as the 2-D launch of the same shape (a row's arithmetic does not depend on
 * the grid), for every type on 3 of 6 experts and for 1 block (every tile in one block), 7 blocks
 * (tiles of several slots a block) and a block a tile; and where it routes for itself (the 2-D
 * launch's routing cases, Qwen3's 128 experts / 8 used among them, 32 of 64 and 1 of 40): the ids
 * and weights of moe_route_f32 and the rows of the 2-D launch on them, bit for bit. */
ZT_TEST(matvec_id_flat_equals_the_2d_launch_bit_for_bit) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    static const struct { int ne, k; uint32_t type; bool route; } cases[] = {
        {6, 3, ZR_TYPE_F32, false},  {6, 3, ZR_TYPE_F16, false},  {6, 3, ZR_TYPE_BF16, false}, {6, 3, ZR_TYPE_Q8_0, false},
        {6, 3, ZR_TYPE_Q4_0, false}, {6, 3, ZR_TYPE_Q4_1, false}, {6, 3, ZR_TYPE_Q5_0, false}, {6, 3, ZR_TYPE_Q5_1, false},
        {6, 3, ZR_TYPE_Q2_K, false}, {6, 3, ZR_TYPE_Q3_K, false}, {6, 3, ZR_TYPE_Q4_K, false}, {6, 3, ZR_TYPE_Q5_K, false},
        {6, 3, ZR_TYPE_Q6_K, false}, {8, 2, ZR_TYPE_Q4_K, true},  {128, 8, ZR_TYPE_Q4_K, true}, {256, 8, ZR_TYPE_Q6_K, true},
        {64, 32, ZR_TYPE_Q8_0, true}, {5, 5, ZR_TYPE_F32, true},  {40, 1, ZR_TYPE_Q5_1, true},
    };
    enum { N_IN = 512, ROWS = 96 };
    int failed = 0;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const int ne = cases[ci].ne, k = cases[ci].k, half = ROWS / 2;
        const uint32_t type = cases[ci].type;
        uint64_t s = 5151 + ci;
        uint8_t *w = random_experts(type, N_IN, ROWS * ne, &s);
        float *lg = malloc(sizeof(float) * ne), *x = malloc(sizeof(float) * N_IN), *gw = malloc(sizeof(float) * N_IN);
        float *y_ref = malloc(sizeof(float) * k * half), *y = malloc(sizeof(float) * k * half);
        float *wts = malloc(sizeof(float) * k), *wts_ref = malloc(sizeof(float) * k);
        int32_t *ids = malloc(sizeof(int32_t) * k), *ids_ref = malloc(sizeof(int32_t) * k);
        for (int i = 0; i < ne; i++) lg[i] = 3.0f * gpu_rand(&s);
        if (ne >= 8) lg[ne - 1] = lg[3]; /* a tie: the lower id first */
        for (int i = 0; i < N_IN; i++) x[i] = gpu_rand(&s), gw[i] = 1.0f + 0.2f * gpu_rand(&s);
        for (int j = 0; j < k; j++) ids_ref[j] = (ne - 1 + 4 * j) % ne; /* the last expert first */
        ZrCuWeight dw = upload_stacked(g, type, w, N_IN, ROWS * ne);
        CUdeviceptr dl = gpu_upload(g, lg, sizeof(float) * ne), dx = gpu_upload(g, x, sizeof(float) * N_IN),
                    dg = gpu_upload(g, gw, sizeof(float) * N_IN), dids_ref = gpu_upload(g, ids_ref, sizeof(int32_t) * k),
                    dw_ref = gpu_alloc(g, sizeof(float) * k), dids = gpu_alloc(g, sizeof(int32_t) * k), dwts = gpu_alloc(g, sizeof(float) * k),
                    dy = gpu_alloc(g, sizeof(float) * k * half);
        ZrError e = {0};
        const int glu = ZR_CUF_MV_RMSNORM | ZR_CUF_MV_GLU, R = zr_cuf_mv_rows_per_warp(type);
        const ZrCuWeight one = {.type = type, .n_in = N_IN, .n_out = ROWS};
        const ZrMvShape shape = zr_cuf_mv_shape_expert(&g->k, &one, glu);
        if (cases[ci].route) /* the reference ids: moe_route_f32's */
            ZT_CHECKF(zr_k_moe_route(&g->l, &g->k, dl, ne, k, dids_ref, dw_ref, 1, &e) == 0, "%s", e.msg);
        ZT_CHECKF(zr_k_matvec_id(&g->l, &g->k.mv_id[type], R, &dw, ROWS, dids_ref, k, dx, 0, dy, half, dg, 1e-5f, glu, shape, NULL, &e) == 0,
                  "%s", e.msg);
        gpu_download(g, y_ref, dy, sizeof(float) * k * half);
        gpu_download(g, ids_ref, dids_ref, sizeof(int32_t) * k);
        if (cases[ci].route) gpu_download(g, wts_ref, dw_ref, sizeof(float) * k);
        const unsigned tiles = zr_k_matvec_id_flat_tiles(R, ROWS, k, shape);
        const unsigned grids[3] = {1, tiles < 7 ? tiles : 7, tiles};
        int exact = 0;
        for (int gi = 0; gi < 3; gi++) {
            const ZrMvIdFuse route = {.logits = dl, .n_expert = ne, .weights = dwts};
            ZT_CHECKF(zr_k_matvec_id_flat(&g->l, &g->k.mv_idflat[type], R, &dw, ROWS, cases[ci].route ? dids : dids_ref, k, dx, dy, dg, 1e-5f,
                                          glu, shape, grids[gi], cases[ci].route ? &route : NULL, &e) == 0,
                      "%s", e.msg);
            gpu_download(g, y, dy, sizeof(float) * k * half);
            bool ok = !memcmp(y, y_ref, sizeof(float) * k * half);
            if (cases[ci].route) {
                gpu_download(g, ids, dids, sizeof(int32_t) * k);
                gpu_download(g, wts, dwts, sizeof(float) * k);
                ok = ok && !memcmp(ids, ids_ref, sizeof(int32_t) * k) && !memcmp(wts, wts_ref, sizeof(float) * k);
            }
            exact += ok;
        }
        const bool ok = exact == 3;
        fprintf(stderr, "  matvec_id_flat %-5s %3d experts, %2d used%s: %u tiles on 1 / %u / %u blocks: %d of 3 == the 2-D launch%s\n",
                zr_type_name(type), ne, k, cases[ci].route ? ", routing" : "", tiles, grids[1], grids[2], exact, ok ? "  PASS" : "  FAIL");
        failed += !ok;
        gpu_free(g, dw.main);
        if (dw.side) gpu_free(g, dw.side);
        gpu_free(g, dl), gpu_free(g, dx), gpu_free(g, dg), gpu_free(g, dids_ref), gpu_free(g, dw_ref), gpu_free(g, dids), gpu_free(g, dwts);
        gpu_free(g, dy);
        free(w), free(lg), free(x), free(gw), free(y_ref), free(y), free(wts), free(wts_ref), free(ids), free(ids_ref);
    }
    ZT_CHECKF(failed == 0, "%d cases differ from the 2-D launch", failed);
}

/* ---- the prefill's grouped expert product (cu/moe_mm.cu) ---- */

/* moe_group_i32 puts nk slots' rows in expert order (expert e's cnt[e] rows right after e - 1's,
 * each row's token slot / k and its slot, every slot once) and writes the tile table exactly:
 * (e, first row, rows) for every bn rows of each expert in order, then (-1, 0, 0, 0) up to the
 * bound nk / bn + n_expert. Ids skewed (squares of uniforms) so that some experts have no slot and
 * some more than two tiles; Qwen3-30B-A3B's 128 experts of 8 a token, Mixtral's 8 of 2, 1024
 * experts, a single slot. */
ZT_TEST(group_sorts_the_slots_by_expert_into_tiles) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    static const int cases[][4] = {{128, 8, 4096, 64}, {128, 8, 4096, 32}, {8, 2, 1024, 64}, {1024, 4, 2000, 64}, {5, 1, 1, 32}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int ne = cases[c][0], k = cases[c][1], nk = cases[c][2], bn = cases[c][3], tmax = nk / bn + ne;
        uint64_t s = 0x67726f7570ull + c;
        int32_t *ids = malloc(sizeof(int32_t) * nk), *idx = malloc(sizeof(int32_t) * nk), *slot = malloc(sizeof(int32_t) * nk);
        int32_t *tiles = malloc(sizeof(int32_t) * 4 * tmax), *cnt = calloc(ne, sizeof(int32_t)), *seen = calloc(nk, sizeof(int32_t));
        for (int i = 0; i < nk; i++) {
            const float u = 0.5f * (gpu_rand(&s) + 1.0f);
            ids[i] = (int)(u * u * ne) % ne;
            cnt[ids[i]]++;
        }
        CUdeviceptr dids = gpu_upload(g, ids, sizeof(int32_t) * nk), didx = gpu_alloc(g, sizeof(int32_t) * nk);
        CUdeviceptr dslot = gpu_alloc(g, sizeof(int32_t) * nk), dt = gpu_alloc(g, sizeof(int32_t) * 4 * tmax);
        ZrError e = {0};
        const int rc = zr_k_moe_group(&g->l, &g->k, dids, nk, k, ne, bn, didx, dslot, dt, tmax, &e);
        ZT_CHECKF(rc == 0, "%s", e.msg);
        gpu_download(g, idx, didx, sizeof(int32_t) * nk);
        gpu_download(g, slot, dslot, sizeof(int32_t) * nk);
        gpu_download(g, tiles, dt, sizeof(int32_t) * 4 * tmax);
        int bad = 0, t = 0, row = 0, empty = 0, big = 0;
        for (int x = 0; x < ne; x++) {
            empty += cnt[x] == 0, big += cnt[x] > 2 * bn;
            for (int i = 0; i < cnt[x]; i += bn, t++) {
                const int want[4] = {x, row + i, cnt[x] - i < bn ? cnt[x] - i : bn, 0};
                bad += t >= tmax || memcmp(tiles + 4 * t, want, sizeof want) != 0;
            }
            for (int r = row; r < row + cnt[x]; r++) {
                const int sl = slot[r];
                const bool ok = sl >= 0 && sl < nk && ids[sl] == x && idx[r] == sl / k && !seen[sl];
                if (ok) seen[sl] = 1;
                bad += !ok;
            }
            row += cnt[x];
        }
        for (; t < tmax; t++) bad += tiles[4 * t] != -1;
        fprintf(stderr, "  moe_group %4d experts x %d, %4d slots, tiles of %d (%d experts empty, %d over two tiles): %d wrong%s\n", ne, k,
                nk, bn, empty, big, bad, bad ? "  FAIL" : "  PASS");
        ZT_CHECKF(bad == 0, "%d experts, %d slots, tiles of %d: %d wrong", ne, nk, bn, bad);
        gpu_free(g, dids), gpu_free(g, didx), gpu_free(g, dslot), gpu_free(g, dt);
        free(ids), free(idx), free(slot), free(tiles), free(cnt), free(seen);
    }
}

static void upload_to(GpuEnv *g, CUdeviceptr dst, const void *src, size_t bytes) {
    ZrError e = {0};
    ZT_CHECKF(zr_cuda_h2d(&g->cuda, dst, src, bytes, &e) == 0, "%s", e.msg);
}

/* matvec_id_mix_<type> (cu/moe_matvec_mix.cu), the decode's down fused with the mix, for every
 * type: the residual gains sum_j weights[j] (W_ids[j] x_j)[r] within the CPU's bound (zr_dot_row
 * per slot, bound as above, times |weights[j]|), the same bits launch after launch from the same
 * residual, and every row of the residual written. Shapes: Qwen3-30B-A3B's (128 experts, 8 used,
 * rows of 768: 6 (slot, item) pairs a lane, all in flight at once), 20 slots of rows shorter than
 * a warp (items of 32 values: 8 a row, so a lane's next pair is 4 slots on; F32's items of 4: 40
 * pairs a lane, more than the kernel keeps in flight), one slot, rows of several steps a lane
 * (2048 values), an odd row count (the last block's warps past the rows), and rows of 160 values
 * (not a multiple of 256: the slots' integer planes share super-blocks). Also printed: how many values
 * equal the unfused path's (matvec_id's rows, then moe_combine_f32's arithmetic) bit for bit: the
 * fused kernel adds the slots in another order, so few do. */
ZT_TEST(matvec_id_mix_adds_the_chosen_experts_rows_into_the_residual) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    static const uint32_t types[] = {ZR_TYPE_F32,  ZR_TYPE_F16,  ZR_TYPE_BF16, ZR_TYPE_Q8_0, ZR_TYPE_Q4_0, ZR_TYPE_Q4_1, ZR_TYPE_Q5_0,
                                     ZR_TYPE_Q5_1, ZR_TYPE_Q2_K, ZR_TYPE_Q3_K, ZR_TYPE_Q4_K, ZR_TYPE_Q5_K, ZR_TYPE_Q6_K};
    static const struct { int ne, k, n_in, rows; } shapes[] = {{128, 8, 768, 96}, {40, 20, 256, 64}, {4, 1, 512, 100}, {8, 2, 2048, 37},
                                                               {16, 5, 160, 40}};
    int failed = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int ne = shapes[si].ne, k = shapes[si].k, n_in = shapes[si].n_in, rows = shapes[si].rows;
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
            const uint32_t type = types[ti];
            /* rows of 160 values (the last shape): the types of blocks of at most 32 only; their
             * integer planes then put a slot's values across super-blocks it shares */
            if (n_in % zr_type_info(type)->block) continue;
            uint64_t s = 9000 + 31 * si + type;
            uint8_t *w = random_experts(type, n_in, rows * ne, &s);
            const size_t rb = zr_row_bytes(type, n_in);
            float *x = malloc(sizeof(float) * k * n_in), *wts = malloc(sizeof(float) * k), *res = malloc(sizeof(float) * rows);
            float *got = malloc(sizeof(float) * rows), *again = malloc(sizeof(float) * rows), *y = malloc(sizeof(float) * k * rows);
            float *deq = malloc(sizeof(float) * n_in);
            int32_t *ids = malloc(sizeof(int32_t) * k);
            for (int j = 0; j < k; j++) {
                ids[j] = (j * 7 + (int)si) % ne;
                wts[j] = 0.05f + 0.5f * (gpu_rand(&s) + 1.0f);
            }
            ids[0] = ne - 1; /* the last expert (the clamp's edge) */
            for (int i = 0; i < k * n_in; i++) x[i] = gpu_rand(&s);
            for (int r = 0; r < rows; r++) res[r] = gpu_rand(&s);
            ZrCuWeight dw = upload_stacked(g, type, w, n_in, rows * ne);
            CUdeviceptr dx = gpu_upload(g, x, sizeof(float) * k * n_in), dids = gpu_upload(g, ids, sizeof(int32_t) * k),
                        dwts = gpu_upload(g, wts, sizeof(float) * k), dres = gpu_upload(g, res, sizeof(float) * rows),
                        dy = gpu_alloc(g, sizeof(float) * k * rows);
            ZrError e = {0};
            ZT_CHECKF(zr_k_matvec_id_mix_fits(&dw, k), "%s: %d slots of %d values do not fit", zr_type_name(type), k, n_in);
            const ZrKernel *kern = &g->k.mv_idmix[type];
            for (int t = 0; t < 2; t++) { /* twice from the same residual */
                upload_to(g, dres, res, sizeof(float) * rows);
                ZT_CHECKF(zr_k_matvec_id_mix(&g->l, kern, &dw, rows, dids, k, dx, dwts, dres, &e) == 0, "%s", e.msg);
                gpu_download(g, t ? again : got, dres, sizeof(float) * rows);
            }
            /* the unfused rows: matvec_id on the same ids, each slot its own x */
            const ZrCuWeight one = {.type = type, .n_in = n_in, .n_out = rows};
            ZT_CHECKF(zr_k_matvec_id(&g->l, &g->k.mv_id[type], zr_cuf_mv_rows_per_warp(type), &dw, rows, dids, k, dx, n_in, dy, rows, 0, 0.0f,
                                     ZR_CUF_MV_PLAIN, zr_cuf_mv_shape_expert(&g->k, &one, ZR_CUF_MV_PLAIN), NULL, &e) == 0, "%s", e.msg);
            gpu_download(g, y, dy, sizeof(float) * k * rows);
            double worst = 0;
            int same_unfused = 0;
            for (int r = 0; r < rows; r++) {
                double want = res[r], tol = 1e-6 * fabs(res[r]);
                float acc = y[r] * wts[0];
                for (int j = 1; j < k; j++) acc += y[j * rows + r] * wts[j];
                const float unfused = res[r] + acc;
                same_unfused += !memcmp(&unfused, &got[r], sizeof(float));
                for (int j = 0; j < k; j++) {
                    const uint8_t *row = w + rb * ((size_t)ids[j] * rows + r);
                    const float *xr = x + (size_t)j * n_in;
                    const double ref = zr_dot_row(type, row, xr, n_in);
                    zr_dequant_row(type, row, deq, n_in);
                    double mag = 0;
                    for (int i = 0; i < n_in; i++) mag += fabs((double)deq[i] * xr[i]);
                    want += (double)wts[j] * ref;
                    tol += fabs(wts[j]) * (1e-5 * mag + 1e-5 * fabs(ref));
                }
                const double q = isfinite(got[r]) ? fabs(got[r] - want) / tol : 1e30;
                if (q > worst) worst = q;
            }
            const bool same = !memcmp(got, again, sizeof(float) * rows), ok = worst <= 1 && same;
            fprintf(stderr, "  matvec_id_mix %-5s %3d experts, %2d used, rows of %4d: worst |diff|/bound %.3g, repeat %s, %d/%d == unfused%s\n",
                    zr_type_name(type), ne, k, n_in, worst, same ? "same bits" : "DIFFERS", same_unfused, rows, ok ? "  PASS" : "  FAIL");
            failed += !ok;
            gpu_free(g, dw.main);
            if (dw.side) gpu_free(g, dw.side);
            gpu_free(g, dx), gpu_free(g, dids), gpu_free(g, dwts), gpu_free(g, dres), gpu_free(g, dy);
            free(w), free(x), free(wts), free(res), free(got), free(again), free(y), free(deq), free(ids);
        }
    }
    ZT_CHECKF(failed == 0, "%d type and shape pairs over the bound or not repeatable", failed);
}

/* Rows per expert: none, one, one short of and one past a 32-row tile, two 32-row tiles and a
 * row, more than two 64-row tiles. */
static const int k_counts[] = {33, 0, 1, 70, 31, 0, 129};
#define N_COUNTS (int)(sizeof k_counts / sizeof k_counts[0])

/* moe_mm_<type>_n32 and _n64 over N_COUNTS stacked random [n_in, rpe] experts with k_counts[e]
 * rows each (the compact layout: expert e's rows after expert e - 1's, tiles of bn rows of one
 * expert) against the dequantized product in double on the same F16 x. Gathered: row r reads x
 * row (7 r + 3) % n_x (the gate|up launch's xidx); scattered: row r reads x row r and writes y row
 * rows - 1 - r (the down launch's yidx, into the slots). Bound per value: the F16 rounding of the
 * weights (2^-11 of each |w_k x_k|) and of the F32 sums, 1e-3 sum_k |w_k x_k| + 1e-6; values of
 * y's rows past rpe must keep their sentinel. */
static void grouped_type(uint32_t type, int n_in, int rpe) {
    GpuEnv *g = gpu_env();
    const int ne = N_COUNTS;
    uint64_t s = 0x6d6f65ull + type * 131 + (uint64_t)n_in * 7 + (uint64_t)rpe;
    uint8_t *w = random_experts(type, n_in, rpe * ne, &s);
    const size_t rb = zr_row_bytes(type, n_in);
    float *deq = malloc(sizeof(float) * (size_t)n_in * rpe * ne);
    for (int r = 0; r < rpe * ne; r++) zr_dequant_row(type, w + rb * r, deq + (size_t)r * n_in, n_in);
    ZrCuWeight dw = upload_stacked(g, type, w, n_in, rpe * ne);
    free(w);
    int rows = 0;
    for (int e = 0; e < ne; e++) rows += k_counts[e];
    const int n_x = rows + 5, ldx = n_in + 8, ldy = rpe + 5;
    uint16_t *xh = malloc(sizeof(uint16_t) * (size_t)n_x * ldx);
    float *xf = malloc(sizeof(float) * (size_t)n_x * ldx), *y = malloc(sizeof(float) * (size_t)rows * ldy);
    double *ref = malloc(sizeof(double) * (size_t)rows * rpe), *mag = malloc(sizeof(double) * (size_t)rows * rpe);
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)rows), *owner = malloc(sizeof(int32_t) * (size_t)rows);
    int32_t *tiles = malloc(sizeof(int32_t) * 4 * (size_t)rows);
    for (size_t i = 0; i < (size_t)n_x * ldx; i++) xh[i] = zr_f32_to_f16(gpu_rand(&s)), xf[i] = zr_f16_to_f32(xh[i]);
    for (int e = 0, r0 = 0; e < ne; r0 += k_counts[e], e++)
        for (int j = 0; j < k_counts[e]; j++) owner[r0 + j] = e;
    const float sentinel = 12345.0f;
    CUdeviceptr dx = gpu_upload(g, xh, sizeof(uint16_t) * (size_t)n_x * ldx), dy = gpu_alloc(g, sizeof(float) * (size_t)rows * ldy);
    CUdeviceptr didx = gpu_alloc(g, sizeof(int32_t) * (size_t)rows), dt = gpu_alloc(g, sizeof(int32_t) * 4 * (size_t)rows);
    double worst = 0.0;
    for (int gather = 0; gather < 2; gather++) {
        for (int r = 0; r < rows; r++) idx[r] = gather ? (7 * r + 3) % n_x : rows - 1 - r;
        upload_to(g, didx, idx, sizeof(int32_t) * (size_t)rows);
        for (int r = 0; r < rows; r++) { /* the reference of row r, whichever tile takes it */
            const float *xr = xf + (size_t)(gather ? idx[r] : r) * ldx;
            for (int o = 0; o < rpe; o++) {
                const float *wr = deq + ((size_t)owner[r] * rpe + o) * n_in;
                double a = 0.0, m = 0.0;
                for (int k = 0; k < n_in; k++) a += (double)wr[k] * xr[k], m += fabs((double)wr[k] * xr[k]);
                ref[(size_t)r * rpe + o] = a, mag[(size_t)r * rpe + o] = m;
            }
        }
        for (int bn = 32; bn <= 64; bn *= 2) {
            int n_tiles = 0;
            for (int e = 0, r0 = 0; e < ne; r0 += k_counts[e], e++)
                for (int i = 0; i < k_counts[e]; i += bn, n_tiles++) {
                    int32_t *T = tiles + 4 * n_tiles;
                    T[0] = e, T[1] = r0 + i, T[2] = k_counts[e] - i < bn ? k_counts[e] - i : bn, T[3] = 0;
                }
            for (size_t i = 0; i < (size_t)rows * ldy; i++) y[i] = sentinel;
            upload_to(g, dy, y, sizeof(float) * (size_t)rows * ldy);
            upload_to(g, dt, tiles, sizeof(int32_t) * 4 * (size_t)n_tiles);
            ZrError e = {0};
            const int rc = zr_k_moe_mm(&g->l, &g->k, bn, &dw, rpe, dx, ldx, gather ? didx : 0, dy, ldy, gather ? 0 : didx, dt, n_tiles, &e);
            if (rc) {
                fprintf(stderr, "  %s\n", e.msg);
                worst = 1e30;
                continue;
            }
            gpu_download(g, y, dy, sizeof(float) * (size_t)rows * ldy);
            for (int r = 0; r < rows; r++) {
                const float *yr = y + (size_t)(gather ? r : idx[r]) * ldy;
                for (int o = 0; o < ldy; o++) {
                    double q;
                    if (o >= rpe) {
                        q = yr[o] == sentinel ? 0.0 : 1e30;
                    } else {
                        const double want = ref[(size_t)r * rpe + o], tol = 1e-3 * mag[(size_t)r * rpe + o] + 1e-6;
                        q = isfinite(yr[o]) ? fabs(yr[o] - want) / tol : 1e30;
                    }
                    if (q > 1.0 && worst <= 1.0)
                        fprintf(stderr, "  %s [%d x %d] bn %d %s expert %d row %d out %d: gpu %.9g cpu %.9g\n", zr_type_name(type), n_in,
                                rpe, bn, gather ? "gathered" : "scattered", owner[r], r, o, yr[o], o < rpe ? ref[(size_t)r * rpe + o] : sentinel);
                    if (q > worst) worst = q;
                }
            }
        }
    }
    fprintf(stderr, "  moe_mm %-5s [%4d x %4d] tiles of 32 and 64, gathered and scattered: worst |diff|/bound = %.3g%s\n", zr_type_name(type),
            n_in, rpe, worst, worst <= 1.0 ? "  PASS" : "  FAIL");
    ZT_CHECKF(worst <= 1.0, "%s [%d x %d]: worst |diff|/bound %.3g", zr_type_name(type), n_in, rpe, worst);
    gpu_free(g, dw.main);
    if (dw.side) gpu_free(g, dw.side);
    gpu_free(g, dx), gpu_free(g, dy), gpu_free(g, didx), gpu_free(g, dt);
    free(deq), free(xh), free(xf), free(y), free(ref), free(mag), free(idx), free(owner), free(tiles);
}

/* Qwen3-30B-A3B's expert shapes in the types of its Q4_K_M and Q8_0 files: gate|up 2048 -> 2 x 768
 * (Q4_K, Q8_0), down 768 -> 2048 (Q6_K, Q4_K, Q8_0). */
ZT_TEST(grouped_product_matches_the_cpu_on_qwen3_expert_shapes) {
    if (!gpu_env()) return;
    grouped_type(ZR_TYPE_Q4_K, 2048, 1536);
    grouped_type(ZR_TYPE_Q8_0, 2048, 1536);
    grouped_type(ZR_TYPE_Q6_K, 768, 2048);
    grouped_type(ZR_TYPE_Q4_K, 768, 2048);
    grouped_type(ZR_TYPE_Q8_0, 768, 2048);
}

/* Every other type (through the element-wise reader), rows a multiple of 64 but not of 128 per
 * expert's block of outputs (200: the last block's rows past the expert are read, not written). */
ZT_TEST(grouped_product_matches_the_cpu_for_every_type) {
    if (!gpu_env()) return;
    static const uint32_t types[] = {ZR_TYPE_F16,  ZR_TYPE_BF16, ZR_TYPE_Q4_0, ZR_TYPE_Q4_1, ZR_TYPE_Q5_0, ZR_TYPE_Q5_1, ZR_TYPE_Q8_0,
                                     ZR_TYPE_Q2_K, ZR_TYPE_Q3_K, ZR_TYPE_Q4_K, ZR_TYPE_Q5_K, ZR_TYPE_Q6_K};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) grouped_type(types[i], 512, 200);
}

/* ---- whole models ---- */

ZT_TEST(moe_decode_and_prefill_match_the_cpu) {
    if (!gpu_env()) return;
    int failed = 0;
    for (size_t i = 0; i < N_CASES; i++) {
        const Case *k = &k_cases[i];
        char path[4200];
        ZrModel m;
        ZrError err = {0};
        ZT_CHECK(zt_synth("cuda_moe.gguf", k->args, 0, path, sizeof path) == 0);
        ZT_CHECKF(zr_model_load(&m, path, &err) == 0, "%s: %s", k->name, err.msg);
        const int V = m.hp.n_vocab;
        float *ref = zt_cpu_logits(&m, k_tokens, N_POS, 128), *lg = malloc(sizeof(float) * N_POS * V);
        ZT_CHECK(ref != NULL);
        ZrBackendOptions o = {.n_ctx = 128, .verify_graph = 1, .quiet = true};
        ZrBackend *be = zr_cuda_backend_create(&m, &o, &err);
        ZT_CHECKF(be != NULL, "%s: %s", k->name, err.msg);
        /* decode one position at a time; prefill 24 positions, then 16 more reading their cache */
        failed += zt_gpu_decode_prefill(be, &m, k->name, k_tokens, N_POS, 24, ref, lg);
        /* the same prefill again: the same logits bit for bit (the grouped prefill places a token's
         * rows in its expert's tiles by atomics, so their order may change; their results may not) */
        float *again = malloc(sizeof(float) * N_POS * V);
        ZT_CHECK(again != NULL);
        be->truncate(be, 0);
        int rc = be->forward(be, k_tokens, 24, 0, again, true, &err);
        if (!rc) rc = be->forward(be, k_tokens + 24, N_POS - 24, 24, again + (size_t)24 * V, true, &err);
        const bool ok = !rc && memcmp(again, lg, sizeof(float) * N_POS * V) == 0;
        if (!ok)
            fprintf(stderr, "  prefill %-20s run twice: logits differ%s%s  FAIL\n", k->name, rc ? ": " : "", rc ? err.msg : "");
        failed += !ok;
        free(again);
        be->destroy(be);
        free(ref);
        free(lg);
        zr_model_free(&m);
    }
    ZT_CHECKF(failed == 0, "%d runs over tolerance", failed);
}

/* Distinct ordered expert sets of one layer: sets [n][k], the new one at n. */
static bool new_set(const int32_t *sets, int n, int k) {
    for (int u = 0; u < n; u++)
        if (!memcmp(sets + (size_t)u * k, sets + (size_t)n * k, sizeof(int32_t) * k)) return false;
    return true;
}

/* The recorded graph replays the eager decode bit for bit over 128 greedy steps from position 8,
 * and the experts the router chooses change along the way (the graph's launches read them from
 * device memory: nothing in it is updated per token). */
ZT_TEST(graph_decode_equals_eager_bit_for_bit_while_the_experts_change) {
    if (!gpu_env()) return;
    int failed = 0;
    for (size_t i = 0; i < N_CASES; i++) {
        const Case *k = &k_cases[i];
        char path[4200];
        ZrModel m;
        ZrError err = {0};
        ZT_CHECK(zt_synth("cuda_moe.gguf", k->args, 0, path, sizeof path) == 0);
        ZT_CHECKF(zr_model_load(&m, path, &err) == 0, "%s: %s", k->name, err.msg);
        const int V = m.hp.n_vocab, n_ctx = 8 + N_GRAPH + 8, last = m.hp.n_layer - 1, ku = m.layers[last].facts.n_expert_used;
        ZrBackendOptions oe = {.n_ctx = n_ctx, .graph = 0, .quiet = true}, og = {.n_ctx = n_ctx, .graph = 1, .verify_graph = 2, .quiet = true},
                         oc = {.n_ctx = n_ctx, .n_threads = 4};
        ZrBackend *eg = zr_cuda_backend_create(&m, &oe, &err), *gg = eg ? zr_cuda_backend_create(&m, &og, &err) : NULL;
        ZrBackend *cb = gg ? zr_cpu_backend_create(&m, &oc, &err) : NULL;
        ZT_CHECKF(eg && gg && cb, "%s: %s", k->name, err.msg);
        float *a = malloc(sizeof(float) * V), *b = malloc(sizeof(float) * V), *c = malloc(sizeof(float) * V);
        int32_t *sets0 = malloc(sizeof(int32_t) * N_GRAPH * m.layers[0].facts.n_expert_used), *setsl = malloc(sizeof(int32_t) * N_GRAPH * ku);
        int rc = eg->forward(eg, k_tokens, 8, 0, a, false, &err);
        if (!rc) rc = gg->forward(gg, k_tokens, 8, 0, b, false, &err);
        if (!rc) rc = cb->forward(cb, k_tokens, 8, 0, c, false, &err);
        int diff_step = -1, distinct0 = 0, distinctl = 0;
        const int k0 = m.layers[0].facts.n_expert_used;
        for (int s = 0; !rc && s < N_GRAPH; s++) {
            const int pos = 8 + s;
            const int32_t t = zt_argmax(a, V);
            if ((rc = eg->forward(eg, &t, 1, pos, a, false, &err)) || (rc = gg->forward(gg, &t, 1, pos, b, false, &err)) ||
                (rc = cb->forward(cb, &t, 1, pos, c, false, &err)))
                break;
            if (memcmp(a, b, sizeof(float) * V) && diff_step < 0) diff_step = pos;
            memcpy(sets0 + (size_t)s * k0, zr_cpu_backend_moe_last(cb, 0), sizeof(int32_t) * k0);
            memcpy(setsl + (size_t)s * ku, zr_cpu_backend_moe_last(cb, last), sizeof(int32_t) * ku);
            distinct0 += new_set(sets0, s, k0);
            distinctl += new_set(setsl, s, ku);
        }
        ZrBackendStats st;
        gg->stats(gg, &st);
        const bool ok = !rc && diff_step < 0 && st.graph_active && distinct0 > 1 && distinctl > 1;
        fprintf(stderr, "  graph %-20s %s over %d steps (kernels/token %llu); distinct expert sets: layer 0 %d, layer %d %d%s%s%s\n", k->name,
                diff_step < 0 ? "== eager" : "DIFFERS from eager", N_GRAPH, (unsigned long long)st.kernels_per_token, distinct0, last,
                distinctl, ok ? "  PASS" : "  FAIL", rc ? " error: " : "", rc ? err.msg : "");
        if (diff_step >= 0) fprintf(stderr, "    first difference at position %d\n", diff_step);
        failed += !ok;
        eg->destroy(eg);
        gg->destroy(gg);
        cb->destroy(cb);
        free(a);
        free(b);
        free(c);
        free(sets0);
        free(setsl);
        zr_model_free(&m);
    }
    ZT_CHECKF(failed == 0, "%d of %zu models differ", failed, N_CASES);
}

/* Greedy ids of the CUDA backend's own pick equal the CPU reference's over 48 steps, F32 models. */
ZT_TEST(greedy_ids_equal_the_cpu_on_moe_models) {
    if (!gpu_env()) return;
    for (size_t i = 0; i < N_CASES; i++) {
        const Case *k = &k_cases[i];
        if (strstr(k->args, "f32") == NULL) continue;
        char path[4200];
        ZrModel m;
        ZrError err = {0};
        ZT_CHECK(zt_synth("cuda_moe.gguf", k->args, 0, path, sizeof path) == 0);
        ZT_CHECKF(zr_model_load(&m, path, &err) == 0, "%s: %s", k->name, err.msg);
        ZrBackendOptions oc = {.n_ctx = 128, .n_threads = 4}, og = {.n_ctx = 128, .quiet = true};
        ZrBackend *cb = zr_cpu_backend_create(&m, &oc, &err), *gb = cb ? zr_cuda_backend_create(&m, &og, &err) : NULL;
        ZT_CHECKF(cb && gb, "%s: %s", k->name, err.msg);
        int rc = cb->forward(cb, k_tokens, 8, 0, NULL, false, &err);
        if (!rc) rc = gb->forward(gb, k_tokens, 8, 0, NULL, false, &err);
        int32_t tc = k_tokens[8], tg = k_tokens[8], same = 0;
        for (int pos = 8; !rc && pos < 56; pos++) {
            int32_t nc = 0, ng = 0;
            if ((rc = zt_greedy_step(cb, m.hp.n_vocab, tc, pos, m.hp.n_vocab, NULL, &nc, &err)) ||
                (rc = zt_greedy_step(gb, m.hp.n_vocab, tg, pos, m.hp.n_vocab, NULL, &ng, &err)))
                break;
            same += nc == ng;
            tc = nc;
            tg = ng;
        }
        fprintf(stderr, "  greedy %-20s %d of 48 ids equal%s%s%s\n", k->name, same, same == 48 ? "  PASS" : "  FAIL", rc ? " error: " : "",
                rc ? err.msg : "");
        ZT_CHECKF(!rc && same == 48, "%s: %d of 48 greedy ids equal", k->name, same);
        cb->destroy(cb);
        gb->destroy(gb);
        zr_model_free(&m);
    }
}

int main(void) { return gpu_main(); }
