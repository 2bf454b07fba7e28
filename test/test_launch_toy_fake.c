#include "test_launch_toy_fake.h"

#include <stdint.h>
#include <string.h>

/* Host versions of cu/graph_selftest.cu (pointers are host addresses in the double). The
 * parameter bytes sit in the recorder's arena at any alignment, so they are copied out. */
static void *ptr_at(void **p, int i) {
    void *v;
    memcpy(&v, p[i], sizeof v);
    return v;
}
static int int_at(void **p, int i) {
    int v;
    memcpy(&v, p[i], sizeof v);
    return v;
}
static void embed_run(void **p) {
    float *kv = ptr_at(p, 0);
    const int32_t *io = ptr_at(p, 1);
    kv[io[1]] = (float)((io[0] * 31) % 97) * 0.01f + 0.5f;
}
static void attend_at(float *logits, const float *kv, int pos, int n) {
    for (int i = 0; i < n; i++) {
        float acc = 0;
        for (int j = 0; j <= pos; j++) acc += kv[j] * (float)(((i + 1) * (j + 3)) % 17);
        logits[i] = acc;
    }
}
static void attend_run(void **p) {
    const int32_t *io = ptr_at(p, 2);
    attend_at(ptr_at(p, 0), ptr_at(p, 1), io[1], int_at(p, 3));
}
static void attend_pv_run(void **p) { attend_at(ptr_at(p, 0), ptr_at(p, 1), int_at(p, 2), int_at(p, 3)); }
static void scale_run(void **p) {
    float *x = ptr_at(p, 0);
    float s;
    memcpy(&s, p[1], sizeof s);
    int n = int_at(p, 2);
    for (int i = 0; i < n; i++) x[i] *= s;
}
const FakeKernel toy_fake_kernels[] = {
    {"zr_selftest_embed", 2, {8, 8}, embed_run},
    {"zr_selftest_attend", 4, {8, 8, 8, 4}, attend_run},
    {"zr_selftest_attend_pv", 4, {8, 8, 4, 4}, attend_pv_run},
    {"zr_selftest_scale", 3, {8, 4, 4}, scale_run},
    {"zr_fault_trap", 0, {0}, NULL},
};
const int toy_fake_n_kernels = (int)(sizeof toy_fake_kernels / sizeof toy_fake_kernels[0]);
