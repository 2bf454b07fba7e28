/* The mixed-type Q/K/V launch (cu/matvec_mix.cu) against the launches it replaces, bit for bit:
 *   - every cu/kernels.def ZR_KMIX pair, with RMSNorm (and a bias), with gemma's pending post norm
 *     (ADDNORM, its new residual written once), gated (GLU), parts in either order, three parts
 *     (A|B|A), odd row counts, blocks of 256 and of 512 threads (splits 1, 2 and 4): the outputs
 *     of one matvec_mix launch equal those of zr_cuf_matvec per matrix (each part's own shape),
 *     every byte, and nothing past the parts is written;
 *   - the decode step of every fixture and synthesized model whose layers mix Q/K/V types
 *     (llama3-Q4_K_M and the other K-quant mixes, qwen2 with biases, gemma2/gemma3 with post
 *     norms, a 1B-shaped layer): the logits of 8 steps with the mixed launch equal those with a
 *     launch per type (ZrCuKernels.has_mv_mix cleared: the path before matvec_mix), and the step
 *     issues one launch fewer per mixed layer.
 * The per-type launches themselves are held to the CPU by test_kernels and test_cuda_backend. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/forward.h"
#include "cuda/klaunch.h"
#include "cuda/weights.h"
#include "gpu_env.h"
#include "model.h"
#include "quant.h"
#include "zt.h"
#include "zt_fixtures.h"
#include "zt_synth.h"

/* ---- one launch against a launch per matrix ---- */

/* A random [n_in, n_out] matrix quantized to type, repacked and uploaded; false when the
 * quantizer refuses the type. */
static bool random_weight(GpuEnv *g, uint32_t type, int n_in, int n_out, uint64_t *s, ZrCuWeight *out) {
    const size_t rb = zr_row_bytes(type, n_in), mb = zr_cuw_main_row_bytes(type, n_in) * n_out,
                 sb = zr_cuw_side_bytes(type, n_in, n_out);
    uint8_t *q = malloc(rb * n_out), *hm = calloc(1, mb), *hs = calloc(1, sb ? sb : 1);
    float *row = malloc(sizeof(float) * n_in);
    bool ok = true;
    for (int r = 0; r < n_out && ok; r++) {
        const float scale = 0.02f + 0.2f * (gpu_rand(s) + 1.0f), off = 0.3f * scale * gpu_rand(s);
        for (int i = 0; i < n_in; i++) row[i] = off + scale * gpu_rand(s);
        ok = zr_quantize_row(type, row, q + rb * r, n_in);
    }
    for (int r = 0; r < n_out && ok; r++) zr_cuw_repack_row(type, q + rb * r, n_in, r, n_out, hm, hs);
    if (ok)
        *out = (ZrCuWeight){.type = type, .n_in = n_in, .n_out = n_out, .main = gpu_upload(g, hm, mb),
                            .side = sb ? gpu_upload(g, hs, sb) : 0};
    free(q);
    free(hm);
    free(hs);
    free(row);
    return ok;
}

static CUdeviceptr random_vec(GpuEnv *g, int n, float base, float amp, uint64_t *s) {
    float *v = malloc(sizeof(float) * n);
    for (int i = 0; i < n; i++) v[i] = base + amp * gpu_rand(s);
    const CUdeviceptr d = gpu_upload(g, v, sizeof(float) * n);
    free(v);
    return d;
}

typedef struct MixCase {
    uint32_t type[ZR_CUF_MV_MIX_PARTS];
    int n_out[ZR_CUF_MV_MIX_PARTS];
    int n, n_in, mode;
    bool bias;
    int threads;  /* the block the plan must pick (0: any) */
    int general;  /* 1: the plan must take zr_cuf_mv_shape_general's shapes (the parts' own shapes of
                   * two block sizes, or past one wave), 0: must not, -1: either, on 132
                   * multiprocessors (the H100's and the H200's; elsewhere the plan decides) */
} MixCase;

#define GUARD 64 /* floats after the outputs that no launch may write */

/* Runs the case both ways; returns 1 when the outputs differ or a launch fails, 0 when equal, -1
 * when the quantizer refuses a type. Prints one line. */
static int mix_case(const MixCase *c) {
    GpuEnv *g = gpu_env();
    uint64_t s = 0x9e3779b97f4a7c15ull ^ ((uint64_t)c->type[0] << 40 | (uint64_t)c->type[1] << 32 | (uint64_t)c->n_in << 8 | (uint64_t)c->mode);
    const bool glu = (c->mode & ZR_CUF_MV_GLU) != 0, addnorm = (c->mode & 3) == ZR_CUF_MV_ADDNORM;
    ZrCuWeight w[ZR_CUF_MV_MIX_PARTS] = {0};
    int off[ZR_CUF_MV_MIX_PARTS], total = 0, rc = 0;
    char desc[160];
    int dl = snprintf(desc, sizeof desc, "[%d:", c->n_in);
    for (int p = 0; p < c->n; p++) {
        if (!random_weight(g, c->type[p], c->n_in, c->n_out[p], &s, &w[p])) {
            for (int q = 0; q < p; q++) gpu_free(g, w[q].main), gpu_free(g, w[q].side);
            return -1;
        }
        off[p] = total;
        total += glu ? c->n_out[p] / 2 : c->n_out[p];
        dl += snprintf(desc + dl, sizeof desc - dl, " %s %d", zr_type_name(c->type[p]), c->n_out[p]);
    }
    snprintf(desc + dl, sizeof desc - dl, "] %s%s%s", addnorm ? "addnorm" : "rmsnorm", glu ? "+glu" : "",
             c->bias ? "+bias" : "");
    const CUdeviceptr x = random_vec(g, c->n_in, 0.0f, 1.0f, &s), norm_w = random_vec(g, c->n_in, 1.0f, 0.2f, &s);
    const CUdeviceptr bias = c->bias ? random_vec(g, total, 0.0f, 10.0f, &s) : 0;
    int n_ss = 0;
    CUdeviceptr post_r = 0;
    if (addnorm) { /* with its sum of squares in pieces after it (cuda/mv_shape.h ZrMvPost) */
        float *r = malloc(sizeof(float) * c->n_in);
        for (int i = 0; i < c->n_in; i++) r[i] = 3.0f * gpu_rand(&s);
        post_r = gpu_upload_post_r(g, r, c->n_in, &n_ss);
        free(r);
    }
    const CUdeviceptr post_w = addnorm ? random_vec(g, c->n_in, 1.0f, 0.2f, &s) : 0;
    /* outputs and residuals start as NaN (gpu_alloc's poison) on both sides */
    const size_t yb = sizeof(float) * (total + GUARD), xb = sizeof(float) * c->n_in;
    const CUdeviceptr y_sep = gpu_alloc(g, yb), y_mix = gpu_alloc(g, yb);
    const CUdeviceptr xo_sep = gpu_alloc(g, xb), xo_mix = gpu_alloc(g, xb);
    ZrError e = {0};
    const float eps = 1e-5f;
    ZrMvMix plan;
    if (!zr_cuf_mv_mix_plan(&g->k, w, c->n, c->mode, &plan)) {
        fprintf(stderr, "  FAIL %s: the plan keeps a launch per matrix\n", desc);
        rc = 1;
    } else if ((g->k.sm_count == 132 && c->general >= 0 && plan.general != (c->general == 1)) || (addnorm && plan.general)) {
        fprintf(stderr, "  FAIL %s: the plan %s the general rule, the case %s\n", desc, plan.general ? "takes" : "leaves",
                c->general == 1 ? "expects it" : "does not");
        rc = 1;
    }
    /* a launch per matrix, as forward.c's mv_in: the first writes the new residual; with the
     * plan's general rule, each in that rule's shape (the cases keep ADDNORM off it) */
    const uint64_t l0 = g->l.n_launches;
    for (int p = 0; p < c->n && !rc; p++) {
        const CUdeviceptr y = y_sep + sizeof(float) * off[p], add = bias ? bias + sizeof(float) * off[p] : 0;
        const ZrMvPost post = {.r = post_r, .post_w = post_w, .x_out = p == 0 ? xo_sep : 0, .n_ss = n_ss};
        if (addnorm) rc = zr_cuf_matvec_post(&g->l, &g->k, &w[p], x, &post, y, norm_w, eps, c->mode, &e);
        else if (plan.general)
            rc = zr_cuf_matvec_shaped(&g->l, &g->k, &w[p], x, y, add, norm_w, eps, c->mode,
                                      zr_cuf_mv_shape_general(&g->k, &w[p], c->mode), &e);
        else rc = zr_cuf_matvec(&g->l, &g->k, &w[p], x, y, add, norm_w, eps, c->mode, &e);
    }
    const uint64_t n_sep = g->l.n_launches - l0;
    if (!rc && c->threads && plan.threads != c->threads) {
        fprintf(stderr, "  FAIL %s: blocks of %d threads, the case is for %d\n", desc, plan.threads, c->threads);
        rc = 1;
    }
    const uint64_t l1 = g->l.n_launches;
    if (!rc) {
        const ZrMvPost post = {.r = post_r, .post_w = post_w, .x_out = xo_mix, .n_ss = n_ss};
        rc = zr_k_matvec_mix(&g->l, &g->k, &plan, w, off, x, y_mix, bias, norm_w, eps, c->mode, addnorm ? &post : NULL, &e);
    }
    if (rc && e.msg[0]) fprintf(stderr, "  FAIL %s: %s\n", desc, e.msg);
    if (!rc) {
        float *a = malloc(yb), *b = malloc(yb), *xa = malloc(xb), *xm = malloc(xb);
        gpu_download(g, a, y_sep, yb);
        gpu_download(g, b, y_mix, yb);
        gpu_download(g, xa, xo_sep, xb);
        gpu_download(g, xm, xo_mix, xb);
        int first = -1;
        for (int i = 0; i < total + GUARD && first < 0; i++)
            if (memcmp(&a[i], &b[i], sizeof(float))) first = i;
        const bool x_same = !memcmp(xa, xm, xb);
        if (first >= 0 || !x_same || g->l.n_launches - l1 != 1) {
            if (first >= 0)
                fprintf(stderr, "  FAIL %s: output %d of %d%s: per type %.9g, mixed %.9g\n", desc, first, total,
                        first >= total ? " (past the parts)" : "", a[first], b[first]);
            if (!x_same) fprintf(stderr, "  FAIL %s: the new residual differs\n", desc);
            rc = 1;
        } else {
            fprintf(stderr, "  PASS %s: bit for bit, 1 launch of %d threads for %llu\n", desc, plan.threads,
                    (unsigned long long)n_sep);
        }
        free(a);
        free(b);
        free(xa);
        free(xm);
    }
    for (int p = 0; p < c->n; p++) gpu_free(g, w[p].main), gpu_free(g, w[p].side);
    gpu_free(g, x), gpu_free(g, norm_w), gpu_free(g, bias), gpu_free(g, post_r), gpu_free(g, post_w);
    gpu_free(g, y_sep), gpu_free(g, y_mix), gpu_free(g, xo_sep), gpu_free(g, xo_mix);
    return rc;
}

/* cu/kernels.def's pairs: type a and b of line i */
static bool kmix_types(int i, uint32_t *a, uint32_t *b) {
    for (uint32_t t = 0; t < ZR_TYPE_COUNT; t++)
        for (uint32_t u = 0; u < ZR_TYPE_COUNT; u++) {
            bool sw = true;
            if (zr_cuf_mv_mix_kernel(t, u, &sw) == i && !sw) {
                *a = t;
                *b = u;
                return true;
            }
        }
    return false;
}

ZT_TEST(every_pair_in_one_launch_equals_a_launch_per_matrix_bit_for_bit) {
    if (!gpu_env()) return;
    int failed = 0, ran = 0;
    for (int i = 0; i < ZR_KMIX_COUNT; i++) {
        uint32_t a, b;
        ZT_CHECK(kmix_types(i, &a, &b));
        /* the block and the rule are each pair's: the K-quants split rows from 1 KiB a warp's
         * half on 512 threads, the others from 2 KiB (test_mv_mix.c holds the plan to the rule) */
        const MixCase cases[] = {
            /* q|k and v of odd sizes with a bias (qwen2) */
            {{a, b}, {1283, 257}, 2, 2048, ZR_CUF_MV_RMSNORM, true, 0, -1},
            /* gemma's pending post norm: the new residual once (4096 wide: every pair's parts
             * take their own shapes, one block size, which an ADDNORM case needs) */
            {{a, b}, {1280, 256}, 2, 4096, ZR_CUF_MV_ADDNORM, false, 0, 0},
            /* V first; three parts of two types */
            {{b, a}, {511, 1025}, 2, 1024, ZR_CUF_MV_RMSNORM, false, 256, 0},
            {{a, b, a}, {768, 255, 129}, 3, 1024, ZR_CUF_MV_RMSNORM, true, 256, 0},
            /* gated products (the kernel takes any mode) */
            {{a, b}, {2 * 700, 2 * 301}, 2, 2048, ZR_CUF_MV_RMSNORM | ZR_CUF_MV_GLU, false, 0, -1},
        };
        for (size_t j = 0; j < sizeof cases / sizeof cases[0]; j++) {
            const int r = mix_case(&cases[j]);
            ZT_CHECKF(r >= 0, "the quantizer refused %s or %s", zr_type_name(a), zr_type_name(b));
            failed += r > 0;
            ran++;
        }
    }
    ZT_CHECKF(failed == 0, "%d of %d cases differ", failed, ran);
}

/* An 8B Q4_K_M layer (v's split would take blocks of 512 threads beside q|k's 256: the general
 * rule); blocks of 512 threads: rows split over 2 warps (both parts) or 2 and 4 (Q5_0 with Q8_0);
 * rows that are not 256-multiples (Qwen2.5-0.5B's 896: Q4_K_M falls back to Q5_0 and Q8_0). */
ZT_TEST(real_split_and_short_rows_in_one_launch_equal_a_launch_per_matrix) {
    if (!gpu_env()) return;
    const MixCase cases[] = {
        {{ZR_TYPE_Q4_K, ZR_TYPE_Q6_K}, {5120, 1024}, 2, 4096, ZR_CUF_MV_RMSNORM, false, 256, 1},
        {{ZR_TYPE_Q4_K, ZR_TYPE_Q6_K}, {1280, 256}, 2, 8192, ZR_CUF_MV_RMSNORM, false, 512, 0},
        {{ZR_TYPE_Q5_0, ZR_TYPE_Q8_0}, {1280, 256}, 2, 8192, ZR_CUF_MV_RMSNORM, true, 512, 0},
        {{ZR_TYPE_Q5_0, ZR_TYPE_Q8_0}, {896 + 128, 128}, 2, 896, ZR_CUF_MV_RMSNORM, true, 0, 0},
        {{ZR_TYPE_Q5_1, ZR_TYPE_Q8_0}, {896 + 128, 128}, 2, 896, ZR_CUF_MV_ADDNORM, false, 0, 0},
        /* gemma3-12b's layer: v's short split would take another block size than q|k's */
        {{ZR_TYPE_Q4_K, ZR_TYPE_Q6_K}, {6144, 2048}, 2, 3840, ZR_CUF_MV_RMSNORM, false, 256, 1},
    };
    int failed = 0;
    for (size_t j = 0; j < sizeof cases / sizeof cases[0]; j++) {
        const int r = mix_case(&cases[j]);
        ZT_CHECK(r >= 0);
        failed += r > 0;
    }
    ZT_CHECKF(failed == 0, "%d cases differ", failed);
}

/* ---- the decode step ---- */

/* Layers of f whose Q/K/V group the plan merges (the mode does not change the shapes). */
static int mixed_layers(const ZrCuForward *f) {
    int n = 0;
    ZrMvMix plan;
    for (int il = 0; il < f->m->hp.n_layer; il++)
        n += zr_cuf_mv_mix_plan(f->k, f->layers[il].qkv, f->layers[il].n_qkv, ZR_CUF_MV_RMSNORM, &plan);
    return n;
}

#define N_STEPS 8

/* The logits of N_STEPS eager decode steps of tokens at positions 0.. (out [N_STEPS][n_vocab]),
 * with the mixed launch or with a launch per type; *launches: one step's launches; *mixed: the
 * layers merged. false (said on stderr) when the model does not load or a step fails. */
static bool decode_logits(GpuEnv *g, const char *path, bool mix, float *out, uint64_t *launches, int *mixed) {
    ZrModel m;
    ZrError err = {0};
    if (zr_model_load(&m, path, &err)) {
        fprintf(stderr, "  %s: %s\n", path, err.msg);
        return false;
    }
    ZrCublasLt lt;
    ZrCuForward f;
    bool saved[ZR_KMIX_COUNT], ok = false;
    memcpy(saved, g->k.has_mv_mix, sizeof saved);
    if (!mix) memset(g->k.has_mv_mix, 0, sizeof g->k.has_mv_mix);
    if (zr_cublaslt_open(&lt, &err)) goto done_model;
    if (zr_cuf_init(&f, &m, &g->cuda, &g->l, &lt, &g->k, 64, false, NULL, &err)) goto done_lt;
    *mixed = mixed_layers(&f);
    const int V = m.hp.n_vocab;
    ok = true;
    for (int pos = 0; pos < N_STEPS && ok; pos++) {
        const int32_t tok = (int32_t)((7 + 37 * pos) % V);
        const uint64_t l0 = g->l.n_launches;
        ok = !zr_cuda_h2d(&g->cuda, f.d_tok, &tok, 4, &err) && !zr_cuda_h2d(&g->cuda, f.d_pos, &pos, 4, &err) &&
             !zr_cuf_decode_step(&f, &err) && !zr_cuda_d2h(&g->cuda, out + (size_t)pos * V, f.logits, sizeof(float) * V, &err) &&
             !zr_cuda_sync(&g->cuda, &err);
        if (pos == 0) *launches = g->l.n_launches - l0;
    }
    zr_cuf_free(&f);
done_lt:
    zr_cublaslt_close(&lt);
done_model:
    if (!ok) fprintf(stderr, "  %s: %s\n", path, err.msg);
    memcpy(g->k.has_mv_mix, saved, sizeof saved);
    zr_model_free(&m);
    return ok;
}

/* Both ways on one model: 1 when they differ (or fail), 0 when equal, -1 when no layer mixes. */
static int decode_case(GpuEnv *g, const char *name, const char *path) {
    ZrModel m;
    ZrError err = {0};
    if (zr_model_load(&m, path, &err)) {
        fprintf(stderr, "  FAIL %s: %s\n", name, err.msg);
        return 1;
    }
    const size_t V = (size_t)m.hp.n_vocab;
    zr_model_free(&m);
    float *a = malloc(sizeof(float) * N_STEPS * V), *b = malloc(sizeof(float) * N_STEPS * V);
    uint64_t la = 0, lb = 0;
    int ma = 0, mb = 0, rc = 1;
    if (decode_logits(g, path, true, a, &la, &ma) && decode_logits(g, path, false, b, &lb, &mb)) {
        size_t first = SIZE_MAX;
        for (size_t i = 0; i < N_STEPS * V && first == SIZE_MAX; i++)
            if (memcmp(&a[i], &b[i], sizeof(float))) first = i;
        if (ma == 0) {
            rc = -1;
        } else if (first != SIZE_MAX) {
            fprintf(stderr, "  FAIL %s: step %zu logit %zu: mixed %.9g, per type %.9g\n", name, first / V, first % V,
                    a[first], b[first]);
        } else if (mb != 0 || lb - la != (uint64_t)ma) {
            fprintf(stderr, "  FAIL %s: %llu launches mixed, %llu per type, for %d mixed layers\n", name,
                    (unsigned long long)la, (unsigned long long)lb, ma);
        } else {
            fprintf(stderr, "  PASS %s: %d steps bit for bit, %llu launches a step instead of %llu (%d mixed layers)\n",
                    name, N_STEPS, (unsigned long long)la, (unsigned long long)lb, ma);
            rc = 0;
        }
    }
    free(a);
    free(b);
    return rc;
}

ZT_TEST(fixture_decode_logits_with_the_mixed_launch_equal_a_launch_per_type_bit_for_bit) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    static ZtFixture fx[ZT_MAX_FIXTURES];
    const int nf = zt_fixtures(fx, ZT_MAX_FIXTURES);
    if (!nf) return;
    int failed = 0, mixed = 0;
    bool llama3 = false;
    for (int i = 0; i < nf; i++) {
        const int r = decode_case(g, fx[i].name, fx[i].gguf);
        failed += r > 0;
        mixed += r == 0;
        if (r == 0 && !strcmp(fx[i].name, "llama3-Q4_K_M")) llama3 = true;
    }
    /* llama3-Q4_K_M's layer 1 has a Q6_K attn_v (fixtures.json); so do the other K-quant mixes */
    ZT_CHECKF(llama3, "llama3-Q4_K_M has no mixed layer or was not compared");
    ZT_CHECKF(failed == 0 && mixed >= 5, "%d fixtures differ, %d compared", failed, mixed);
}

ZT_TEST(synthesized_mixes_decode_the_same_with_the_mixed_launch_gemma_post_norms_included) {
    GpuEnv *g = gpu_env();
    if (!g) return;
    ZT_NEED_SYNTH();
    static const struct {
        const char *name, *args;
    } cases[] = {
        {"gemma3-Q4_K_M", "--arch gemma3 --layers 7 --seed 4 --type q4_k_m"},
        {"gemma2-Q5_K_M", "--arch gemma2 --layers 4 --seed 3 --type q5_k_m"},
        {"llama-Q3_K_M", "--layers 6 --seed 2 --type q3_k_m"},
        {"qwen2-Q4_K_M", "--arch qwen2 --layers 4 --seed 6 --type q4_k_m"},
        {"llama3.2-1b-layers-Q4_K_M", "--shape llama3.2-1b --layers 4 --vocab 512 --type q4_k_m"},
    };
    int failed = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[4200];
        ZT_CHECK(zt_synth("matvec_mix.gguf", cases[i].args, 0, path, sizeof path) == 0);
        const int r = decode_case(g, cases[i].name, path);
        ZT_CHECKF(r >= 0, "%s: no layer mixes Q/K/V types", cases[i].name);
        failed += r > 0;
    }
    ZT_CHECKF(failed == 0, "%d models differ", failed);
}

int main(void) { return gpu_main(); }
