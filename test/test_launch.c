/* The launcher and recorder, on a driver double (no GPU needed). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cuda/graph.h"
#include "cuda/launch.h"
#include "cuda/module.h"
#include "test_launch_double.h"
#include "zt.h"

/* y[0] = a * x[0] + b (pointers are "device" = host addresses in the double) */
static void k_axpb_run(void **p) {
    float *y = *(float **)p[0];
    const float *x = *(const float **)p[1];
    float a = *(float *)p[2];
    int b = *(int *)p[3];
    y[0] = a * x[0] + (float)b;
}
static const FakeKernel kernels[] = {
    {"axpb", 4, {8, 8, 4, 4}, k_axpb_run},
    {"noop", 1, {4}, NULL},
    {"mixed", 3, {1, 8, 2}, NULL},
    {"matvec_q4_k", 1, {4}, NULL},
};
#define N_KERNELS (int)(sizeof kernels / sizeof kernels[0])

typedef struct Fix {
    const ZrCuDriver *drv;
    ZrCuda cuda;
    ZrKernel axpb, noop;
    ZrLauncher l;
} Fix;

static int fix_open(Fix *f, bool param_info) {
    ZrError err = {0};
    f->drv = fake_driver(kernels, N_KERNELS, param_info);
    if (zr_cuda_open(f->drv, 0, &f->cuda, &err) || zr_cuda_load_module(&f->cuda, "image", &err)) return 1;
    const size_t axpb_sizes[] = {8, 8, 4, 4}, noop_sizes[] = {4};
    if (zr_cuda_kernel(&f->cuda, "axpb", axpb_sizes, 4, &f->axpb, &err)) return 1;
    if (zr_cuda_kernel(&f->cuda, "noop", noop_sizes, 1, &f->noop, &err)) return 1;
    zr_launcher_init(&f->l, f->drv, f->cuda.stream);
    return 0;
}

static void fix_close(Fix *f) {
    zr_launcher_free(&f->l);
    zr_cuda_close(&f->cuda);
}

/* A fixture on a device of compute capability major.minor, cuLaunchKernelEx present or not. */
static int fix_open_pdl(Fix *f, int major, int minor, bool launch_ex) {
    ZrError err = {0};
    f->drv = fake_driver(kernels, N_KERNELS, true);
    fake_set_pdl(major, minor, false, launch_ex);
    if (zr_cuda_open(f->drv, 0, &f->cuda, &err) || zr_cuda_load_module(&f->cuda, "image", &err)) return 1;
    const size_t axpb_sizes[] = {8, 8, 4, 4}, noop_sizes[] = {4};
    if (zr_cuda_kernel(&f->cuda, "axpb", axpb_sizes, 4, &f->axpb, &err)) return 1;
    if (zr_cuda_kernel(&f->cuda, "noop", noop_sizes, 1, &f->noop, &err)) return 1;
    zr_launcher_init(&f->l, f->drv, f->cuda.stream);
    return 0;
}

/* y = 2 * 5 + 1 through the launcher; 0 when it ran and returned ZR_OK. */
static int axpb_once(Fix *f, float *y) {
    ZrError err = {0};
    float x = 5, a = 2;
    int b = 1;
    *y = 0;
    CUdeviceptr dy = (CUdeviceptr)(uintptr_t)y, dx = (CUdeviceptr)(uintptr_t)&x;
    return ZR_LAUNCH(&f->l, &f->axpb, ZR_DIM3(3, 2, 1), ZR_DIM1(64), 128, &err, &dy, &dx, &a, &b);
}

ZT_TEST(pdl_launches_go_through_cuLaunchKernelEx_with_programmatic_stream_serialization) {
    Fix f;
    ZT_CHECK(fix_open_pdl(&f, 9, 0, true) == 0);
    ZT_CHECK(zr_launch_pdl_supported(&f.cuda));
    ZT_CHECK(!f.l.pdl); /* off until asked for */
    ZT_CHECK(zr_launcher_set_pdl(&f.l, true) && f.l.pdl);
    float y;
    ZT_CHECK(axpb_once(&f, &y) == 0 && y == 11.0f);
    const FakeState *st = fake_state();
    ZT_CHECK(st->launches == 1 && st->launches_ex == 1);
    ZT_CHECK(st->last_ex.gridDimX == 3 && st->last_ex.gridDimY == 2 && st->last_ex.gridDimZ == 1);
    ZT_CHECK(st->last_ex.blockDimX == 64 && st->last_ex.blockDimY == 1 && st->last_ex.sharedMemBytes == 128);
    ZT_CHECK(st->last_ex.hStream == f.cuda.stream && st->last_ex.numAttrs == 1);
    ZT_CHECK(st->last_ex_attr.id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION &&
             st->last_ex_attr.value.programmaticStreamSerializationAllowed == 1);
    zr_launcher_set_pdl(&f.l, false); /* and back to cuLaunchKernel */
    ZT_CHECK(axpb_once(&f, &y) == 0 && y == 11.0f && st->launches == 2 && st->launches_ex == 1);
    fix_close(&f);
}

ZT_TEST(pdl_launch_failure_names_cuLaunchKernelEx) {
    Fix f;
    ZT_CHECK(fix_open_pdl(&f, 9, 0, true) == 0);
    zr_launcher_set_pdl(&f.l, true);
    FakeState *st = fake_state();
    st->fail_launch_at = 1;
    st->launch_result = CUDA_ERROR_INVALID_VALUE;
    ZrError err = {0};
    float x = 5, a = 2, y = 0;
    int b = 1;
    CUdeviceptr dy = (CUdeviceptr)(uintptr_t)&y, dx = (CUdeviceptr)(uintptr_t)&x;
    ZT_CHECK(ZR_LAUNCH(&f.l, &f.axpb, ZR_DIM1(1), ZR_DIM1(1), 0, &err, &dy, &dx, &a, &b) == ZR_E_CUDA);
    ZT_CHECKF(strstr(err.msg, "launch axpb") && strstr(err.msg, "cuLaunchKernelEx") &&
                  strstr(err.msg, "CUDA_ERROR_INVALID_VALUE"),
              "%s", err.msg);
    fix_close(&f);
}

ZT_TEST(launches_stay_on_cuLaunchKernel_without_the_entry_point_or_below_cc_9_0) {
    Fix f;
    float y;
    ZT_CHECK(fix_open_pdl(&f, 9, 0, false) == 0);
    ZT_CHECK(!zr_launch_pdl_supported(&f.cuda));
    ZT_CHECK(!zr_launcher_set_pdl(&f.l, true) && !f.l.pdl);
    ZT_CHECK(axpb_once(&f, &y) == 0 && y == 11.0f && fake_state()->launches_ex == 0);
    fix_close(&f);
    ZT_CHECK(fix_open_pdl(&f, 8, 6, true) == 0);
    ZT_CHECK(!zr_launch_pdl_supported(&f.cuda));
    ZT_CHECK(zr_launcher_set_pdl(&f.l, zr_launch_pdl_supported(&f.cuda)) == false);
    ZT_CHECK(axpb_once(&f, &y) == 0 && y == 11.0f && fake_state()->launches_ex == 0);
    fix_close(&f);
}

/* A kernel handle named `name`, its name's part of the cluster rule taken as zr_cuda_kernel takes it. */
static ZrKernel named(const char *name) {
    ZrKernel k = {0};
    snprintf(k.name, sizeof k.name, "%s", name);
    k.pairs = zr_launch_kernel_pairs(name);
    return k;
}

ZT_TEST(clusters_pair_the_products_that_stage_x_whole_on_even_one_dimensional_grids) {
    static const char *const paired[] = {"matvec_q4_k",         "matvec_q6_k_tall", "matvec_q8_0",
                                         "matvec_glu_bal_q4_k", "matvec_f32",       "matvec_f16",
                                         "matvec_mix_q4_k_q6_k", "matvec_q6_k_tall_rn", "matvec_glu_bal_an_q4_k"};
    for (size_t i = 0; i < sizeof paired / sizeof paired[0]; i++) {
        const ZrKernel k = named(paired[i]);
        ZT_CHECKF(zr_launch_cluster_of(&k, ZR_DIM1(264)) == 2, "%s", paired[i]);
        ZT_CHECKF(zr_launch_cluster_of(&k, ZR_DIM1(2)) == 2, "%s", paired[i]);
        ZT_CHECKF(zr_launch_cluster_of(&k, ZR_DIM1(81)) == 1, "%s: odd grid", paired[i]);
        ZT_CHECKF(zr_launch_cluster_of(&k, ZR_DIM1(1)) == 1, "%s: one block", paired[i]);
        ZT_CHECKF(zr_launch_cluster_of(&k, ZR_DIM3(64, 2, 1)) == 1, "%s: 2-D grid", paired[i]);
        ZT_CHECKF(zr_launch_cluster_of(&k, ZR_DIM3(64, 1, 2)) == 1, "%s: 3-D grid", paired[i]);
    }
    static const char *const alone[] = {"matvec_id_q4_k", "matvec_id_q4_k_flat",
                                        "matvec_glu_flat_q4_k", "matvec_glu_flat_an_q4_k", "matvec_q6_k_mma",
                                        "attn_decode_f32_kvh",
                                        "rmsnorm_f32", "argmax_f32"};
    for (size_t i = 0; i < sizeof alone / sizeof alone[0]; i++) {
        const ZrKernel k = named(alone[i]);
        ZT_CHECKF(zr_launch_cluster_of(&k, ZR_DIM1(264)) == 1, "%s", alone[i]);
    }
}

/* A fixture on Hopper with cuLaunchKernelEx, the node attribute's entry point or not, and a
 * product kernel. */
static int fix_open_clusters(Fix *f, int major, bool node_attr, ZrKernel *mv) {
    if (fix_open_pdl(f, major, 0, true)) return 1;
    fake_set_node_attributes(node_attr);
    ZrError err = {0};
    const size_t sizes[] = {4};
    return zr_cuda_kernel(&f->cuda, "matvec_q4_k", sizes, 1, mv, &err);
}

ZT_TEST(clustered_launches_carry_the_cluster_attribute_beside_pdl_and_into_the_graph_node) {
    Fix f;
    ZrKernel mv;
    ZT_CHECK(fix_open_clusters(&f, 9, true, &mv) == 0);
    ZT_CHECK(zr_launch_clusters_supported(&f.cuda));
    ZT_CHECK(!f.l.clusters); /* off until asked for */
    ZT_CHECK(zr_launcher_set_clusters(&f.l, true) && f.l.clusters);
    zr_launcher_set_pdl(&f.l, true);
    ZrError err = {0};
    int v = 1;
    const FakeState *st = fake_state();
    zr_launcher_record_begin(&f.l);
    ZT_CHECK(ZR_LAUNCH(&f.l, &mv, ZR_DIM1(4), ZR_DIM1(256), 0, &err, &v) == 0);
    ZT_CHECK(st->launches_ex == 1 && st->last_ex.numAttrs == 2);
    ZT_CHECK(st->last_ex_attrs[0].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION &&
             st->last_ex_attrs[0].value.programmaticStreamSerializationAllowed == 1);
    ZT_CHECK(st->last_ex_attrs[1].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
    ZT_CHECK(st->last_ex_attrs[1].value.clusterDim.x == 2 && st->last_ex_attrs[1].value.clusterDim.y == 1 &&
             st->last_ex_attrs[1].value.clusterDim.z == 1);
    ZT_CHECK(ZR_LAUNCH(&f.l, &mv, ZR_DIM1(3), ZR_DIM1(256), 0, &err, &v) == 0); /* odd: no cluster */
    ZT_CHECK(st->launches_ex == 2 && st->last_ex.numAttrs == 1 &&
             st->last_ex_attr.id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
    ZT_CHECK(ZR_LAUNCH(&f.l, &f.noop, ZR_DIM1(4), ZR_DIM1(64), 0, &err, &v) == 0); /* not a product */
    ZT_CHECK(st->launches_ex == 3 && st->last_ex.numAttrs == 1);
    zr_launcher_set_pdl(&f.l, false);
    ZT_CHECK(ZR_LAUNCH(&f.l, &mv, ZR_DIM1(8), ZR_DIM1(256), 0, &err, &v) == 0); /* the cluster alone */
    ZT_CHECK(st->launches_ex == 4 && st->last_ex.numAttrs == 1 &&
             st->last_ex_attr.id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION && st->last_ex_attr.value.clusterDim.x == 2);
    ZT_CHECK(ZR_LAUNCH(&f.l, &f.noop, ZR_DIM1(4), ZR_DIM1(64), 0, &err, &v) == 0); /* plain cuLaunchKernel */
    ZT_CHECK(st->launches_ex == 4 && st->launches == 5);
    zr_launcher_record_end(&f.l);
    ZT_CHECK(f.l.rec.n == 5);
    const unsigned want[] = {2, 1, 1, 2, 1};
    for (size_t i = 0; i < 5; i++)
        ZT_CHECKF((f.l.rec.recs[i].cluster > 1 ? f.l.rec.recs[i].cluster : 1) == want[i], "record %zu: %u", i,
                  f.l.rec.recs[i].cluster);
    ZrGraph g = {0};
    ZT_CHECK(zr_graph_build(f.drv, &f.l.rec, NULL, 0, &g, &err) == CUDA_SUCCESS);
    ZT_CHECK(st->n_nodes == 5);
    for (int i = 0; i < st->n_nodes && i < 5; i++) {
        const unsigned *c = st->nodes[i].cluster;
        if (want[i] == 2) ZT_CHECKF(c[0] == 2 && c[1] == 1 && c[2] == 1, "node %d: (%u,%u,%u)", i, c[0], c[1], c[2]);
        else ZT_CHECKF(c[0] == 0, "node %d: a cluster attribute set", i);
    }
    zr_graph_destroy(f.drv, &g);
    /* the launch log names the cluster */
    char text[4096] = {0};
    FILE *mf = fmemopen(text, sizeof text - 1, "w");
    ZT_CHECK(mf != NULL);
    zr_recording_print(&f.l.rec, mf);
    fclose(mf);
    ZT_CHECKF(strstr(text, "grid (4,1,1) block (256,1,1) shared 0 cluster 2 params") &&
                  strstr(text, "grid (3,1,1) block (256,1,1) shared 0 params"),
              "%s", text);
    /* a driver table without the node attribute cannot build a clustered recording: an error
     * that names it, not a crash */
    fake_set_node_attributes(false);
    ZT_CHECK(zr_graph_build(f.drv, &f.l.rec, NULL, 0, &g, &err) == CUDA_ERROR_NOT_SUPPORTED);
    ZT_CHECKF(strstr(err.msg, "cuGraphKernelNodeSetAttribute") && strstr(err.msg, "matvec_q4_k"), "%s", err.msg);
    fix_close(&f);
}

ZT_TEST(a_clustered_launch_the_device_refuses_runs_again_without_clusters_and_turns_them_off) {
    Fix f;
    ZrKernel mv;
    ZT_CHECK(fix_open_clusters(&f, 9, true, &mv) == 0);
    zr_launcher_set_pdl(&f.l, true);
    ZT_CHECK(zr_launcher_set_clusters(&f.l, true));
    FakeState *st = fake_state();
    st->fail_launch_at = 1;
    st->launch_result = CUDA_ERROR_INVALID_VALUE;
    ZrError err = {0};
    int v = 1;
    zr_launcher_record_begin(&f.l);
    ZT_CHECKF(ZR_LAUNCH(&f.l, &mv, ZR_DIM1(4), ZR_DIM1(256), 0, &err, &v) == 0, "%s", err.msg);
    ZT_CHECK(st->launches == 2 && st->launches_ex == 2 && !f.l.clusters);
    ZT_CHECK(st->last_ex.numAttrs == 1 && st->last_ex_attr.id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
    ZT_CHECK(ZR_LAUNCH(&f.l, &mv, ZR_DIM1(4), ZR_DIM1(256), 0, &err, &v) == 0 && st->last_ex.numAttrs == 1);
    zr_launcher_record_end(&f.l);
    ZT_CHECK(f.l.rec.n == 2 && f.l.rec.recs[0].cluster <= 1 && f.l.rec.recs[1].cluster <= 1);
    /* a sticky error is not retried */
    ZT_CHECK(zr_launcher_set_clusters(&f.l, true));
    st->fail_launch_at = 4;
    st->launch_result = CUDA_ERROR_ILLEGAL_ADDRESS;
    ZT_CHECK(ZR_LAUNCH(&f.l, &mv, ZR_DIM1(4), ZR_DIM1(256), 0, &err, &v) == ZR_E_CUDA);
    ZT_CHECKF(strstr(err.msg, "clusters of 2") && strstr(err.msg, "CUDA_ERROR_ILLEGAL_ADDRESS"), "%s", err.msg);
    ZT_CHECK(st->launches == 4);
    fix_close(&f);
}

ZT_TEST(clusters_stay_off_without_the_node_attribute_entry_point_or_below_cc_9_0) {
    Fix f;
    ZrKernel mv;
    ZrError err = {0};
    int v = 1;
    ZT_CHECK(fix_open_clusters(&f, 9, false, &mv) == 0);
    ZT_CHECK(!zr_launch_clusters_supported(&f.cuda));
    ZT_CHECK(!zr_launcher_set_clusters(&f.l, true) && !f.l.clusters);
    ZT_CHECK(ZR_LAUNCH(&f.l, &mv, ZR_DIM1(4), ZR_DIM1(256), 0, &err, &v) == 0);
    ZT_CHECK(fake_state()->launches == 1 && fake_state()->launches_ex == 0);
    fix_close(&f);
    ZT_CHECK(fix_open_clusters(&f, 8, true, &mv) == 0);
    ZT_CHECK(!zr_launch_clusters_supported(&f.cuda));
    ZT_CHECK(zr_launcher_set_clusters(&f.l, zr_launch_clusters_supported(&f.cuda)) == false);
    ZT_CHECK(ZR_LAUNCH(&f.l, &mv, ZR_DIM1(4), ZR_DIM1(256), 0, &err, &v) == 0);
    ZT_CHECK(fake_state()->launches == 1 && fake_state()->launches_ex == 0);
    fix_close(&f);
}

ZT_TEST(record_keeps_parameter_values_after_the_caller_changes_them) {
    Fix f;
    ZT_CHECK(fix_open(&f, true) == 0);
    ZrError err = {0};
    float x = 2, y = 0;
    CUdeviceptr dy = (CUdeviceptr)(uintptr_t)&y, dx = (CUdeviceptr)(uintptr_t)&x;
    float a = 3;
    int b = 7;
    zr_launcher_record_begin(&f.l);
    ZT_CHECK(ZR_LAUNCH(&f.l, &f.axpb, ZR_DIM1(1), ZR_DIM1(32), 0, &err, &dy, &dx, &a, &b) == 0);
    a = -1;
    b = 1000;
    dx = 0;
    zr_launcher_record_end(&f.l);
    ZT_CHECK(f.l.rec.n == 1);
    ZT_CHECK(y == 13.0f);
    float ra;
    int rb;
    CUdeviceptr rx;
    memcpy(&rx, zr_recording_param(&f.l.rec, 0, 1), 8);
    memcpy(&ra, zr_recording_param(&f.l.rec, 0, 2), 4);
    memcpy(&rb, zr_recording_param(&f.l.rec, 0, 3), 4);
    ZT_CHECK(ra == 3.0f);
    ZT_CHECK(rb == 7);
    ZT_CHECK(rx == (CUdeviceptr)(uintptr_t)&x);
    fix_close(&f);
}

ZT_TEST(records_keep_launch_order_configuration_and_count) {
    Fix f;
    ZT_CHECK(fix_open(&f, true) == 0);
    ZrError err = {0};
    float x = 1, y = 0, a = 1;
    CUdeviceptr dy = (CUdeviceptr)(uintptr_t)&y, dx = (CUdeviceptr)(uintptr_t)&x;
    zr_launcher_record_begin(&f.l);
    for (int i = 0; i < 300; i++) { /* crosses the initial capacity of records and arena */
        int v = i;
        if (i % 3 == 0)
            ZT_CHECK(ZR_LAUNCH(&f.l, &f.noop, ZR_DIM3(i + 1, 2, 3), ZR_DIM1(64), (unsigned)i, &err, &v) == 0);
        else
            ZT_CHECK(ZR_LAUNCH(&f.l, &f.axpb, ZR_DIM1(1), ZR_DIM1(32), 0, &err, &dy, &dx, &a, &v) == 0);
    }
    zr_launcher_record_end(&f.l);
    ZT_CHECK(f.l.rec.n == 300);
    ZT_CHECK(f.l.n_launches == 300);
    ZT_CHECK(fake_state()->launches == 300);
    for (size_t i = 0; i < 300; i++) {
        const ZrLaunchRecord *r = &f.l.rec.recs[i];
        int v;
        memcpy(&v, zr_recording_param(&f.l.rec, i, i % 3 == 0 ? 0 : 3), 4);
        ZT_CHECKF(v == (int)i, "record %zu holds %d", i, v);
        if (i % 3 == 0) {
            ZT_CHECK(r->kernel == &f.noop && r->fn == f.noop.fn);
            ZT_CHECK(r->grid.x == i + 1 && r->grid.y == 2 && r->grid.z == 3 && r->block.x == 64);
            ZT_CHECK(r->shared_bytes == i);
        } else {
            ZT_CHECK(r->kernel == &f.axpb);
        }
    }
    fix_close(&f);
}

ZT_TEST(launches_outside_recording_append_nothing) {
    Fix f;
    ZT_CHECK(fix_open(&f, true) == 0);
    ZrError err = {0};
    int v = 1;
    ZT_CHECK(ZR_LAUNCH(&f.l, &f.noop, ZR_DIM1(1), ZR_DIM1(1), 0, &err, &v) == 0);
    zr_launcher_record_begin(&f.l);
    ZT_CHECK(ZR_LAUNCH(&f.l, &f.noop, ZR_DIM1(1), ZR_DIM1(1), 0, &err, &v) == 0);
    zr_launcher_record_end(&f.l);
    ZT_CHECK(ZR_LAUNCH(&f.l, &f.noop, ZR_DIM1(1), ZR_DIM1(1), 0, &err, &v) == 0);
    ZT_CHECK(f.l.rec.n == 1);
    ZT_CHECK(f.l.n_launches == 3);
    zr_launcher_record_begin(&f.l); /* a new pass starts empty */
    ZT_CHECK(f.l.rec.n == 0);
    fix_close(&f);
}

ZT_TEST(launch_rejects_a_wrong_parameter_count) {
    Fix f;
    ZT_CHECK(fix_open(&f, true) == 0);
    ZrError err = {0};
    int v = 1, w = 2;
    ZT_CHECK(ZR_LAUNCH(&f.l, &f.noop, ZR_DIM1(1), ZR_DIM1(1), 0, &err, &v, &w) == ZR_E_INTERNAL);
    ZT_CHECK(strstr(err.msg, "noop") && strstr(err.msg, "2 parameters given"));
    ZT_CHECK(fake_state()->launches == 0);
    fix_close(&f);
}

ZT_TEST(launch_error_names_the_kernel_and_the_cuda_error) {
    Fix f;
    ZT_CHECK(fix_open(&f, true) == 0);
    ZrError err = {0};
    int v = 1;
    fake_state()->fail_launch_at = 1;
    fake_state()->launch_result = CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
    zr_launcher_record_begin(&f.l);
    ZT_CHECK(ZR_LAUNCH(&f.l, &f.noop, ZR_DIM1(5), ZR_DIM1(1024), 0, &err, &v) == ZR_E_CUDA);
    ZT_CHECKF(strstr(err.msg, "noop") && strstr(err.msg, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"), "%s", err.msg);
    ZT_CHECK(f.l.rec.n == 0); /* a failed launch is not recorded */
    fix_close(&f);
}

ZT_TEST(kernel_layout_comes_from_the_driver_and_must_match_the_caller) {
    Fix f;
    ZT_CHECK(fix_open(&f, true) == 0);
    ZrError err = {0};
    ZrKernel k;
    ZT_CHECK(zr_cuda_kernel(&f.cuda, "mixed", NULL, 0, &k, &err) == 0);
    ZT_CHECK(k.n_params == 3);
    ZT_CHECK(k.offset[0] == 0 && k.offset[1] == 8 && k.offset[2] == 16);
    ZT_CHECK(k.size[0] == 1 && k.size[1] == 8 && k.size[2] == 2);
    const size_t wrong[] = {1, 4, 2};
    ZT_CHECK(zr_cuda_kernel(&f.cuda, "mixed", wrong, 3, &k, &err) == ZR_E_INTERNAL);
    ZT_CHECKF(strstr(err.msg, "parameter 1 is 8 bytes"), "%s", err.msg);
    ZT_CHECK(zr_cuda_kernel(&f.cuda, "absent_kernel", NULL, 0, &k, &err) == ZR_E_CUDA);
    ZT_CHECKF(strstr(err.msg, "absent_kernel") && strstr(err.msg, "CUDA_ERROR_NOT_FOUND"), "%s", err.msg);
    fix_close(&f);
}

ZT_TEST(kernel_layout_falls_back_to_caller_sizes_without_param_info) {
    Fix f;
    ZT_CHECK(fix_open(&f, false) == 0);
    ZrError err = {0};
    ZrKernel k;
    ZT_CHECK(zr_cuda_kernel(&f.cuda, "mixed", NULL, 0, &k, &err) == ZR_E_INTERNAL);
    const size_t sizes[] = {1, 8, 2};
    ZT_CHECK(zr_cuda_kernel(&f.cuda, "mixed", sizes, 3, &k, &err) == 0);
    ZT_CHECK(k.n_params == 3 && k.offset[1] == 8 && k.offset[2] == 16);
    fix_close(&f);
}

ZT_TEST(recording_compare_finds_the_first_difference) {
    Fix f;
    ZT_CHECK(fix_open(&f, true) == 0);
    ZrError err = {0};
    ZrRecording a = {0};
    int v = 1;
    char why[256];
    for (int pass = 0; pass < 2; pass++) {
        zr_launcher_record_begin(&f.l);
        ZT_CHECK(ZR_LAUNCH(&f.l, &f.noop, ZR_DIM1(1), ZR_DIM1(1), 0, &err, &v) == 0);
        ZT_CHECK(ZR_LAUNCH(&f.l, &f.noop, ZR_DIM1(2), ZR_DIM1(1), 0, &err, &v) == 0);
        zr_launcher_record_end(&f.l);
        if (pass == 0) zr_recording_move(&a, &f.l.rec);
    }
    ZT_CHECK(zr_recording_compare(&a, &f.l.rec, why, sizeof why) == 0);
    v = 2; /* a value that changed between the passes */
    zr_launcher_record_begin(&f.l);
    ZT_CHECK(ZR_LAUNCH(&f.l, &f.noop, ZR_DIM1(1), ZR_DIM1(1), 0, &err, &v) == 0);
    zr_launcher_record_end(&f.l);
    ZT_CHECK(zr_recording_compare(&a, &f.l.rec, why, sizeof why) != 0);
    ZT_CHECKF(strstr(why, "launch 0 (noop): parameter 0 differs"), "%s", why);
    v = 1;
    zr_launcher_record_begin(&f.l);
    ZT_CHECK(ZR_LAUNCH(&f.l, &f.noop, ZR_DIM1(1), ZR_DIM1(1), 0, &err, &v) == 0);
    zr_launcher_record_end(&f.l);
    ZT_CHECK(zr_recording_compare(&a, &f.l.rec, why, sizeof why) != 0);
    ZT_CHECKF(strstr(why, "2 launches in one pass, 1 in the other"), "%s", why);
    zr_recording_free(&a);
    fix_close(&f);
}

ZT_TEST(recording_print_shows_index_kernel_config_and_parameter_hex) {
    Fix f;
    ZT_CHECK(fix_open(&f, true) == 0);
    ZrError err = {0};
    int v = 0x01020304;
    zr_launcher_record_begin(&f.l);
    ZT_CHECK(ZR_LAUNCH(&f.l, &f.noop, ZR_DIM3(3, 2, 1), ZR_DIM1(128), 64, &err, &v) == 0);
    zr_launcher_record_end(&f.l);
    char path[4200];
    snprintf(path, sizeof path, "%s/launches.txt", zt_tmpdir());
    FILE *o = fopen(path, "w");
    ZT_CHECK(o);
    zr_recording_print(&f.l.rec, o);
    fclose(o);
    char *text = zt_read_file(path, NULL);
    ZT_CHECK(text);
    ZT_CHECKF(strstr(text, "launch    0 noop") && strstr(text, "grid (3,2,1) block (128,1,1) shared 64 params 04030201"),
              "%s", text);
    free(text);
    fix_close(&f);
}

ZT_TEST(out_of_memory_says_needed_and_free) {
    Fix f;
    ZT_CHECK(fix_open(&f, true) == 0);
    ZrError err = {0};
    CUdeviceptr p = 1;
    fake_state()->alloc_result = CUDA_ERROR_OUT_OF_MEMORY;
    ZT_CHECK(zr_cuda_alloc(&f.cuda, &p, (size_t)5 << 20, "KV cache", &err) == ZR_E_NOMEM);
    ZT_CHECK(p == 0);
    ZT_CHECKF(strstr(err.msg, "KV cache") && strstr(err.msg, "5.0 MiB") && strstr(err.msg, "3.0 MiB free"), "%s",
              err.msg);
    fix_close(&f);
}

ZT_TEST(profile_sums_time_per_kernel_name) {
    Fix f;
    ZT_CHECK(fix_open(&f, true) == 0);
    ZrError err = {0};
    ZrProfile prof;
    zr_profile_init(&prof, f.drv);
    f.l.profile = &prof;
    int v = 0;
    float x = 1, y = 0, a = 1;
    CUdeviceptr dy = (CUdeviceptr)(uintptr_t)&y, dx = (CUdeviceptr)(uintptr_t)&x;
    for (int i = 0; i < 600; i++) ZT_CHECK(ZR_LAUNCH(&f.l, &f.noop, ZR_DIM1(1), ZR_DIM1(1), 0, &err, &v) == 0);
    ZT_CHECK(ZR_LAUNCH(&f.l, &f.axpb, ZR_DIM1(1), ZR_DIM1(1), 0, &err, &dy, &dx, &a, &v) == 0);
    ZT_CHECK(zr_profile_collect(&prof, &err) == 0);
    ZT_CHECK(prof.n_rows == 2);
    ZrProfileRow rows[2];
    zr_profile_sorted(&prof, rows);
    ZT_CHECK(!strcmp(rows[0].name, "noop") && rows[0].calls == 600);
    ZT_NEAR(rows[0].total_ms, 300.0, 1e-6); /* the double times every launch at 0.5 ms */
    ZT_CHECK(!strcmp(rows[1].name, "axpb") && rows[1].calls == 1);
    zr_profile_free(&prof);
    fix_close(&f);
}

ZT_TEST(driver_open_without_libcuda_is_a_clear_nodev) {
    const ZrCuDriver *d = NULL;
    ZrError err = {0};
    int rc = zr_driver_open(&d, &err);
    if (rc == ZR_OK) {
        zt_skip("libcuda.so.1 and a GPU are present here");
        return;
    }
    ZT_CHECK(rc == ZR_E_NODEV);
    ZT_CHECK(d == NULL);
    ZT_CHECKF(strstr(err.msg, "libcuda.so.1") || strstr(err.msg, "GPU"), "%s", err.msg);
}

ZT_TEST(sticky_errors_are_classified) {
    ZT_CHECK(zr_driver_error_is_sticky(CUDA_ERROR_ILLEGAL_ADDRESS));
    ZT_CHECK(zr_driver_error_is_sticky(CUDA_ERROR_LAUNCH_FAILED));
    ZT_CHECK(zr_driver_error_is_sticky(CUDA_ERROR_UNKNOWN));
    ZT_CHECK(!zr_driver_error_is_sticky(CUDA_ERROR_OUT_OF_MEMORY));
    ZT_CHECK(!zr_driver_error_is_sticky(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED));
    ZT_CHECK(!strcmp(zr_driver_error_name(NULL, 901), "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"));
}

int main(void) { return zt_run(); }
