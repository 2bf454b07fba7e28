/* Helpers shared by the CPU forward tests: the fixture set of ../shared/fixtures and the
 * comparison of logits against a reference (worst row max|diff| / row std, argmax). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ZT_MAX_FIXTURES 64

typedef struct ZtFixture {
    char name[64];       /* e.g. "llama-Q4_0" */
    char gguf[4096];     /* NAME.gguf, or ../models/stories260K.gguf for stories260K-F32 */
    char base[4096];     /* fixtures/NAME: append ".tokens", ".exact.f32", ".greedy" */
} ZtFixture;

/* Every NAME with a NAME.exact.f32 in ../shared/fixtures, sorted; 0 (after zt_skip: the caller
 * returns) when there is none. */
int zt_fixtures(ZtFixture *out, int cap);

/* Whitespace-separated ids from path (malloc'ed); NULL when unreadable. */
int32_t *zt_read_ids(const char *path, int *n);
/* Little-endian float32 file (malloc'ed); NULL when unreadable. */
float *zt_read_f32(const char *path, size_t *n);

typedef struct ZtLogitsDiff {
    double worst_rel;     /* max over rows of max|a - ref| / std(ref row) */
    double worst_abs;     /* max |a - ref| */
    int argmax_equal;     /* rows whose argmax agrees */
} ZtLogitsDiff;
ZtLogitsDiff zt_compare_logits(const float *a, const float *ref, int n_rows, int n_vocab);

int zt_argmax(const float *v, int n);
/* best - second best */
float zt_top2_gap(const float *v, int n);
