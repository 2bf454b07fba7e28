/* The sampler's exact arithmetic, one definition for the host (src/sampler.c) and the device
 * (cu/sample.cu), so that both compute the same bits for the same inputs:
 *   - zr_exp(x): e^x in double from IEEE basic operations alone (no libm, no fused multiply-add:
 *     libm's exp differs between the host's and the device's libraries, and a compiler that fuses
 *     a*b+c changes the rounding). On the device every operation is an explicit __dmul_rn /
 *     __dadd_rn, which nvcc never contracts; the C build is ISO C11 (c_std=c11), where GCC's
 *     default is -ffp-contract=off. Accuracy: within 2 ulp of e^x (test/test_sampler.c checks
 *     it against libm), 0 below -745.2 (where e^x is below the smallest subnormal), +inf above
 *     709.7.
 *   - zr_tree_sum(w, n): a sum whose order is defined by the indices alone: w[0..n) in chunks of
 *     ZR_SUM_CHUNK consecutive elements summed left to right, then the chunk sums c[0..m)
 *     pairwise, c[i] += c[i + s] for s = 1, 2, 4, ... and every i that is a multiple of 2s with
 *     i + s < m. The device computes the chunks in parallel (a thread each) and the same tree
 *     (a block of a power of two of chunks is a subtree), so the result is the same
 *     bits whatever the grid.
 * Header-only (static inline): it is compiled into both sides. */
#pragma once

#if defined(__CUDACC__)
#define ZR_EXP_FN static __host__ __device__ __forceinline__
#else
#include <stdint.h>
#include <string.h>
#define ZR_EXP_FN static inline
#endif

#if defined(__CUDA_ARCH__)
#define ZR_DMUL(a, b) __dmul_rn((a), (b))
#define ZR_DADD(a, b) __dadd_rn((a), (b))
#define ZR_DSUB(a, b) __dsub_rn((a), (b))
#else
#define ZR_DMUL(a, b) ((a) * (b))
#define ZR_DADD(a, b) ((a) + (b))
#define ZR_DSUB(a, b) ((a) - (b))
#endif

#define ZR_SUM_CHUNK 32

/* 2^k as a double, -1022 <= k <= 1023. */
ZR_EXP_FN double zr_exp_pow2(int k) {
    const unsigned long long bits = (unsigned long long)(k + 1023) << 52;
#if defined(__CUDA_ARCH__)
    return __longlong_as_double((long long)bits);
#else
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
#endif
}

ZR_EXP_FN double zr_exp(double x) {
    if (!(x > -745.2)) return 0.0; /* also -inf and NaN */
    if (x > 709.7) return 1.0 / 0.0;
    /* x = k ln2 + r, |r| <= ln2/2: k rounded to nearest by the 1.5 * 2^52 shift, ln2 in two parts
     * (Cody and Waite) whose high part times k is exact for |k| < 2^11, so r carries no error but
     * the low part's rounding */
    const double shift = 0x1.8p52;
    const double kd = ZR_DSUB(ZR_DADD(ZR_DMUL(x, 0x1.71547652b82fep+0), shift), shift);
    double r = ZR_DSUB(x, ZR_DMUL(kd, 0x1.62e42fee00000p-1));
    r = ZR_DSUB(r, ZR_DMUL(kd, 0x1.a39ef35793c76p-33));
    /* e^r by its Taylor series to r^13 (the remainder is below 2^-57 for |r| <= 0.347), Horner */
    double p = 0x1.6124613a86d09p-33;
    p = ZR_DADD(ZR_DMUL(p, r), 0x1.1eed8eff8d898p-29);
    p = ZR_DADD(ZR_DMUL(p, r), 0x1.ae64567f544e4p-26);
    p = ZR_DADD(ZR_DMUL(p, r), 0x1.27e4fb7789f5cp-22);
    p = ZR_DADD(ZR_DMUL(p, r), 0x1.71de3a556c734p-19);
    p = ZR_DADD(ZR_DMUL(p, r), 0x1.a01a01a01a01ap-16);
    p = ZR_DADD(ZR_DMUL(p, r), 0x1.a01a01a01a01ap-13);
    p = ZR_DADD(ZR_DMUL(p, r), 0x1.6c16c16c16c17p-10);
    p = ZR_DADD(ZR_DMUL(p, r), 0x1.1111111111111p-7);
    p = ZR_DADD(ZR_DMUL(p, r), 0x1.5555555555555p-5);
    p = ZR_DADD(ZR_DMUL(p, r), 0x1.5555555555555p-3);
    p = ZR_DADD(ZR_DMUL(p, r), 0x1.0p-1);
    p = ZR_DADD(ZR_DMUL(p, r), 1.0);
    p = ZR_DADD(ZR_DMUL(p, r), 1.0);
    const int k = (int)kd; /* -1075..1024 */
    if (k >= -1022) return k > 1023 ? ZR_DMUL(ZR_DMUL(p, zr_exp_pow2(k - 1)), 2.0) : ZR_DMUL(p, zr_exp_pow2(k));
    /* a subnormal result: two steps, the second one rounding */
    return ZR_DMUL(ZR_DMUL(p, zr_exp_pow2(k + 200)), zr_exp_pow2(-200));
}

/* The draw over the whole vocabulary (src/sampler.c with neither top-k nor top-p, cu/sample_full.cu)
 * descends zr_tree_sum's tree, kept whole: level 0 holds the chunk sums c[0..m), level L + 1 the
 * sums of level L's pairs (2j, 2j + 1), or node 2j alone where 2j + 1 is past the level (the
 * nodes zr_tree_sum computes, in the same order of additions), up to a level of one node: the
 * total. Levels are stored one after the other, level L at off[L], off[L + 1] - off[L] nodes.
 * Sets off[0..levels] and returns the number of levels (m >= 1). */
#define ZR_TREE_MAX_LEVELS 32
ZR_EXP_FN int zr_tree_levels(int m, int *off) {
    int levels = 0, at = 0, size = m;
    for (;;) {
        off[levels++] = at;
        at += size;
        if (size == 1) break;
        size = (size + 1) / 2;
    }
    off[levels] = at;
    return levels;
}

/* One step of the descent, at a node whose children sum to l and r (r = 0 where there is no
 * right child), with u in the node's own units: right when r > 0 and u >= l, carrying u - l
 * down; else left with u as it is. So the draw never enters a subtree of weight zero unless the
 * whole tree is zero (then it ends at chunk 0). Returns 1 for right. */
ZR_EXP_FN int zr_tree_go_right(double *u, double l, double r) {
    if (r > 0.0 && !(*u < l)) {
        *u = ZR_DSUB(*u, l);
        return 1;
    }
    return 0;
}

/* The walk in the leaf chunk the descent reached, w[0..n) (n <= ZR_SUM_CHUNK): the first i with
 * u < w[0] + .. + w[i] (summed left to right, zero weights skipped), else (u at or past the
 * chunk's sum through rounding) the last i with w[i] > 0, else 0. */
ZR_EXP_FN int zr_tree_leaf(const double *w, int n, double u) {
    double cum = 0.0;
    int last = 0;
    for (int i = 0; i < n; i++) {
        if (!(w[i] > 0.0)) continue;
        last = i;
        cum = ZR_DADD(cum, w[i]);
        if (u < cum) return i;
    }
    return last;
}

#if !defined(__CUDA_ARCH__)
/* The host side of the fixed-tree sum; w[0..n) is overwritten (n >= 1). */
static inline double zr_tree_sum(double *w, int n) {
    int m = 0;
    for (int c = 0; c < n; c += ZR_SUM_CHUNK) {
        const int end = c + ZR_SUM_CHUNK < n ? c + ZR_SUM_CHUNK : n;
        double acc = w[c];
        for (int i = c + 1; i < end; i++) acc = ZR_DADD(acc, w[i]);
        w[m++] = acc;
    }
    for (int s = 1; s < m; s *= 2)
        for (int i = 0; i + s < m; i += 2 * s) w[i] = ZR_DADD(w[i], w[i + s]);
    return w[0];
}

/* The draw over w[0..n) (n >= 1, every w >= 0) by the tree: nodes[] holds at least
 * zr_tree_node_count(n) doubles (overwritten). u = uniform * total (total: the root, the bits
 * zr_tree_sum(w, n) returns), then the descent from the root (zr_tree_go_right at every level)
 * and the walk in the leaf chunk (zr_tree_leaf). Returns the index, or -1 when the total is
 * not > 0. */
static inline int zr_tree_node_count(int n) {
    int off[ZR_TREE_MAX_LEVELS + 1];
    return off[zr_tree_levels((n + ZR_SUM_CHUNK - 1) / ZR_SUM_CHUNK, off)];
}

static inline int zr_tree_draw(const double *w, int n, double *nodes, double uniform) {
    int off[ZR_TREE_MAX_LEVELS + 1];
    const int m = (n + ZR_SUM_CHUNK - 1) / ZR_SUM_CHUNK, top = zr_tree_levels(m, off) - 1;
    for (int c = 0; c < m; c++) {
        const int end = (c + 1) * ZR_SUM_CHUNK < n ? (c + 1) * ZR_SUM_CHUNK : n;
        double acc = w[c * ZR_SUM_CHUNK];
        for (int i = c * ZR_SUM_CHUNK + 1; i < end; i++) acc = ZR_DADD(acc, w[i]);
        nodes[c] = acc;
    }
    for (int L = 1; L <= top; L++) {
        const int below = off[L] - off[L - 1];
        for (int j = 0; j < off[L + 1] - off[L]; j++) {
            const double *c = nodes + off[L - 1] + 2 * j;
            nodes[off[L] + j] = 2 * j + 1 < below ? ZR_DADD(c[0], c[1]) : c[0];
        }
    }
    const double total = nodes[off[top]];
    if (!(total > 0.0)) return -1;
    double u = ZR_DMUL(uniform, total);
    int j = 0;
    for (int L = top; L > 0; L--) {
        const double *c = nodes + off[L - 1] + 2 * j;
        j = 2 * j + zr_tree_go_right(&u, c[0], 2 * j + 1 < off[L] - off[L - 1] ? c[1] : 0.0);
    }
    const int first = j * ZR_SUM_CHUNK;
    return first + zr_tree_leaf(w + first, n - first < ZR_SUM_CHUNK ? n - first : ZR_SUM_CHUNK, u);
}
#endif
