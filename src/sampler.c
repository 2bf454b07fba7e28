/* The sampling chain, in llama.cpp's default order:
 *   penalties -> top-k -> top-p -> min-p -> temperature -> softmax -> draw.
 * Temperature 0 is greedy (argmax after the penalty). Candidates are ordered by a total order
 * (logit descending, then id ascending), so every filter keeps a well-defined prefix and the
 * result never depends on how a sort or a selection happens to break ties.
 * Top-p and min-p see the probabilities at temperature 1, because the temperature comes after
 * them in the chain (as in llama.cpp). */
#include "sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "zr_exp.h"

typedef struct ZrCand {
    float logit;
    int32_t id;
} ZrCand;

struct ZrSampler {
    ZrSamplerParams p;
    int n_vocab;
    uint64_t rng[4];      /* xoshiro256** state */
    int32_t *hist;        /* [repeat_last_n] ring buffer of recent tokens; 0 past n_hist until it is full */
    int n_hist;           /* tokens in hist (<= repeat_last_n) */
    int hist_head;        /* next write slot */
    int32_t *count;       /* [n_vocab] scratch: occurrences of each id in hist (0 between calls) */
    ZrCand *cand;         /* [n_vocab] candidates */
    double *w;            /* [n_vocab] unnormalized probabilities of the candidates */
    double *sum;          /* [max(n_vocab, zr_tree_node_count(n_vocab))] scratch of zr_tree_sum and draw_all */
};

ZrSamplerParams zr_sampler_defaults(void) {
    return (ZrSamplerParams){
        .temp = 0.8f,
        .top_k = 40,
        .top_p = 0.95f,
        .min_p = 0.05f,
        .repeat_penalty = 1.0f,
        .repeat_last_n = 64,
        .seed = 0,
    };
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro_next(uint64_t s[4]) {
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Uniform in [0, 1) with 53 random bits. */
static double rng_uniform(uint64_t s[4]) { return (double)(xoshiro_next(s) >> 11) * 0x1.0p-53; }

ZrSampler *zr_sampler_create(const ZrSamplerParams *p, int n_vocab, ZrError *err) {
    if (n_vocab <= 0) {
        zr_err(err, ZR_E_USAGE, "sampler: n_vocab: expected > 0, found %d", n_vocab);
        return NULL;
    }
    if (!(p->temp >= 0.0f) || !isfinite(p->temp)) {
        zr_err(err, ZR_E_USAGE, "sampler: temperature: expected a finite value >= 0, found %g", (double)p->temp);
        return NULL;
    }
    if (p->top_k < 0) {
        zr_err(err, ZR_E_USAGE, "sampler: top-k: expected >= 0, found %d", p->top_k);
        return NULL;
    }
    if (!(p->top_p >= 0.0f && p->top_p <= 1.0f)) {
        zr_err(err, ZR_E_USAGE, "sampler: top-p: expected 0..1, found %g", (double)p->top_p);
        return NULL;
    }
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f)) {
        zr_err(err, ZR_E_USAGE, "sampler: min-p: expected 0..1, found %g", (double)p->min_p);
        return NULL;
    }
    if (!(p->repeat_penalty > 0.0f) || !isfinite(p->repeat_penalty)) {
        zr_err(err, ZR_E_USAGE, "sampler: repeat penalty: expected a finite value > 0, found %g",
               (double)p->repeat_penalty);
        return NULL;
    }
    if (!isfinite(p->presence_penalty) || !isfinite(p->frequency_penalty)) {
        zr_err(err, ZR_E_USAGE, "sampler: presence/frequency penalty: expected finite values, found %g and %g",
               (double)p->presence_penalty, (double)p->frequency_penalty);
        return NULL;
    }
    if (p->repeat_last_n < 0) {
        zr_err(err, ZR_E_USAGE, "sampler: repeat-last-n: expected >= 0, found %d", p->repeat_last_n);
        return NULL;
    }
    ZrSampler *s = calloc(1, sizeof *s);
    if (!s) goto nomem;
    s->p = *p;
    s->n_vocab = n_vocab;
    s->cand = malloc((size_t)n_vocab * sizeof *s->cand);
    s->w = malloc((size_t)n_vocab * sizeof *s->w);
    /* zr_tree_sum's scratch, and the whole tree of draw_all */
    const int nodes = zr_tree_node_count(n_vocab);
    s->sum = malloc((size_t)(nodes > n_vocab ? nodes : n_vocab) * sizeof *s->sum);
    s->count = calloc((size_t)n_vocab, sizeof *s->count);
    /* zeroed: the state bytes include the slots not yet written (zr_sampler_get_state) */
    s->hist = calloc((size_t)(p->repeat_last_n > 0 ? p->repeat_last_n : 1), sizeof *s->hist);
    if (!s->cand || !s->w || !s->sum || !s->count || !s->hist) goto nomem;
    uint64_t x = p->seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
    return s;
nomem:
    zr_sampler_free(s);
    zr_err(err, ZR_E_NOMEM, "sampler: out of memory for a vocabulary of %d", n_vocab);
    return NULL;
}

void zr_sampler_free(ZrSampler *s) {
    if (!s) return;
    free(s->cand);
    free(s->w);
    free(s->sum);
    free(s->count);
    free(s->hist);
    free(s);
}

void zr_sampler_accept(ZrSampler *s, int32_t id) {
    if (s->p.repeat_last_n <= 0) return;
    s->hist[s->hist_head] = id;
    s->hist_head = (s->hist_head + 1) % s->p.repeat_last_n;
    if (s->n_hist < s->p.repeat_last_n) s->n_hist++;
}

/* llama.cpp's llama_sampler_penalties: each distinct token of the window (the last
 * repeat_last_n accepted) is penalized once for repetition, however often it occurred (positive
 * logits are divided by the penalty and the others multiplied, so the token always becomes less
 * likely), then count x frequency_penalty + presence_penalty is subtracted from its logit. */
static bool penalties_off(const ZrSamplerParams *p) {
    return p->repeat_last_n <= 0 ||
           (p->repeat_penalty == 1.0f && p->presence_penalty == 0.0f && p->frequency_penalty == 0.0f);
}

static void apply_penalty(ZrSampler *s, float *logits) {
    if (penalties_off(&s->p) || s->n_hist == 0) return;
    const float r = s->p.repeat_penalty, fp = s->p.frequency_penalty, pp = s->p.presence_penalty;
    for (int i = 0; i < s->n_hist; i++) {
        int32_t id = s->hist[i];
        if (id >= 0 && id < s->n_vocab) s->count[id]++;
    }
    for (int i = 0; i < s->n_hist; i++) {
        int32_t id = s->hist[i];
        if (id < 0 || id >= s->n_vocab || s->count[id] == 0) continue;
        float l = logits[id];
        l = l <= 0.0f ? l * r : l / r;
        logits[id] = l - ((float)s->count[id] * fp + pp);
        s->count[id] = 0; /* once per distinct id; the array is clean again afterwards */
    }
}

/* NaN (a backend bug) is treated as impossible rather than poisoning every comparison. */
static float clean(float l) { return isnan(l) ? -INFINITY : l; }

/* The total order: a before b. */
static int cand_before(const ZrCand *a, const ZrCand *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static int cand_cmp(const void *pa, const void *pb) {
    const ZrCand *a = pa, *b = pb;
    if (cand_before(a, b)) return -1;
    if (cand_before(b, a)) return 1;
    return 0;
}

static int argmax(const float *logits, int n) {
    int best = 0;
    float bl = clean(logits[0]);
    for (int i = 1; i < n; i++) {
        float l = clean(logits[i]);
        if (l > bl) { bl = l; best = i; }
    }
    return best;
}

int32_t zr_sampler_argmax(const float *logits, int n) { return argmax(logits, n); }

bool zr_sampler_is_greedy(const ZrSamplerParams *p) {
    return p->temp <= 0.0f && penalties_off(p);
}

/* The k best tokens, sorted, into cand[0..k): one pass with a min-heap of size k (the heap
 * root is the worst kept candidate, so most tokens cost one comparison), then a sort of k. */
static int select_top_k(ZrSampler *s, const float *logits, int k) {
    ZrCand *h = s->cand;
    int n = 0;
    for (int i = 0; i < s->n_vocab; i++) {
        ZrCand c = {clean(logits[i]), i};
        if (n < k) {
            int j = n++;
            while (j > 0) { /* sift up: the worst goes to the root */
                int parent = (j - 1) / 2;
                if (!cand_before(&h[parent], &c)) break;
                h[j] = h[parent];
                j = parent;
            }
            h[j] = c;
        } else if (cand_before(&c, &h[0])) {
            int j = 0;
            for (;;) { /* sift down */
                int l = 2 * j + 1, r = l + 1, m = j;
                const ZrCand *worst = &c;
                if (l < n && cand_before(worst, &h[l])) { m = l; worst = &h[l]; }
                if (r < n && cand_before(worst, &h[r])) { m = r; }
                if (m == j) break;
                h[j] = h[m];
                j = m;
            }
            h[j] = c;
        }
    }
    qsort(h, (size_t)n, sizeof *h, cand_cmp);
    return n;
}

/* Top-p over the sorted candidates c[0..n) whose weights exp(l - max) sum to total over the
 * whole distribution: the shortest prefix whose probability reaches top_p (llama.cpp: the token
 * that crosses the threshold is kept). Returns the kept count; *reached says whether the
 * threshold was crossed inside c (else all n are kept). The running sum is sequential, so its
 * value at i depends on c[0..i] alone (cu/sample.cu walks it the same way). */
static int top_p_prefix(const ZrCand *c, int n, float max, double total, float top_p, int *reached) {
    double cum = 0.0;
    for (int i = 0; i < n; i++) {
        cum += zr_exp((double)c[i].logit - (double)max) / total;
        if (cum >= (double)top_p) {
            *reached = 1;
            return i + 1;
        }
    }
    *reached = 0;
    return n;
}

/* Without top-k: the top-p prefix (cut by min-p below floor_logit), sorted, without sorting
 * the whole vocabulary. The tokens with probability >= t form a prefix of the total order, so
 * when their mass reaches top_p the top-p prefix lies inside them; t is lowered until that
 * holds (t = 0 at the end: every possible token). Tokens at -inf are never candidates. */
static int select_top_p(ZrSampler *s, const float *logits, float max, float floor_logit, float top_p) {
    /* summed in the fixed tree, so the device's parallel sum is the same bits */
    for (int i = 0; i < s->n_vocab; i++) s->sum[i] = zr_exp((double)clean(logits[i]) - (double)max);
    const double total = zr_tree_sum(s->sum, s->n_vocab);
    static const double thresholds[] = {1e-3, 1e-5, 1e-7, 0.0};
    const int n_thr = (int)(sizeof thresholds / sizeof thresholds[0]);
    int kept = 0;
    for (int t = 0; t < n_thr; t++) {
        /* probability >= thresholds[t]  <=>  logit >= max + log(thresholds[t] * total) */
        float lt = thresholds[t] > 0.0 ? (float)((double)max + log(thresholds[t] * total)) : -INFINITY;
        int cut_by_min_p = lt <= floor_logit;
        if (cut_by_min_p) lt = floor_logit;
        int n = 0;
        for (int i = 0; i < s->n_vocab; i++) {
            float l = clean(logits[i]);
            if (l >= lt && l > -INFINITY) s->cand[n++] = (ZrCand){l, i};
        }
        qsort(s->cand, (size_t)n, sizeof *s->cand, cand_cmp);
        int reached;
        kept = top_p_prefix(s->cand, n, max, total, top_p, &reached);
        /* Crossed inside the set, or min-p cuts at the set's edge anyway: exact. */
        if (reached || cut_by_min_p) break;
    }
    return kept;
}

/* Neither top-k nor top-p: every id with a finite logit >= the min-p floor is a candidate, and the
 * draw needs no order. It runs over all ids in id order, weight 0 for the others (x + 0 == x):
 * the total is zr_tree_sum's tree over the n_vocab weights and the draw descends that tree
 * (zr_tree_draw), a walk the device does the same way in log2(n_vocab / 32) steps
 * (cu/sample_full.cu). One candidate is picked without a draw; a total of 0 (a +inf maximum
 * after the penalties) draws, then picks the first candidate. */
static int32_t draw_all(ZrSampler *s, const float *logits, float max, float floor_logit) {
    const int nv = s->n_vocab;
    const double inv_t = 1.0 / (double)s->p.temp;
    int n = 0, first = 0;
    for (int i = 0; i < nv; i++) {
        const float l = clean(logits[i]);
        const int cand = l > -INFINITY && l >= floor_logit;
        s->w[i] = cand ? zr_exp(((double)l - (double)max) * inv_t) : 0.0;
        if (cand && n++ == 0) first = i;
    }
    if (n == 0) return argmax(logits, nv);
    if (n == 1) return first;
    const int id = zr_tree_draw(s->w, nv, s->sum, rng_uniform(s->rng));
    return id >= 0 ? id : first;
}

int32_t zr_sampler_sample(ZrSampler *s, float *logits) {
    apply_penalty(s, logits);
    if (s->p.temp <= 0.0f) return argmax(logits, s->n_vocab);

    const int nv = s->n_vocab;
    const float max = clean(logits[argmax(logits, nv)]);
    if (max == -INFINITY) return 0; /* nothing is possible: degenerate logits */

    /* min-p keeps logit >= max + log(min_p) (llama.cpp compares in logit space). */
    const float floor_logit = s->p.min_p > 0.0f ? max + logf(s->p.min_p) : -INFINITY;
    int n;
    if (s->p.top_k > 0 && s->p.top_k < nv) {
        n = select_top_k(s, logits, s->p.top_k);
        if (s->p.top_p < 1.0f) {
            /* top-p renormalizes over the top-k survivors, as in llama.cpp */
            for (int i = 0; i < n; i++) s->sum[i] = zr_exp((double)s->cand[i].logit - (double)max);
            const double total = zr_tree_sum(s->sum, n);
            int reached;
            n = top_p_prefix(s->cand, n, max, total, s->p.top_p, &reached);
        }
    } else if (s->p.top_p < 1.0f) {
        n = select_top_p(s, logits, max, floor_logit, s->p.top_p);
    } else {
        return draw_all(s, logits, max, floor_logit);
    }
    /* min-p on what is left (a no-op where the selection already applied it). */
    int m = 0;
    for (int i = 0; i < n; i++)
        if (s->cand[i].logit >= floor_logit && s->cand[i].logit > -INFINITY) s->cand[m++] = s->cand[i];
    n = m;
    if (n == 0) return argmax(logits, nv);
    if (n == 1) return s->cand[0].id;

    /* temperature -> softmax -> draw; weights relative to the maximum, so exp never overflows */
    const double inv_t = 1.0 / (double)s->p.temp;
    for (int i = 0; i < n; i++) {
        s->w[i] = zr_exp(((double)s->cand[i].logit - (double)max) * inv_t);
        s->sum[i] = s->w[i];
    }
    const double total = zr_tree_sum(s->sum, n);
    double u = rng_uniform(s->rng) * total;
    double cum = 0.0;
    int last = 0;
    for (int i = 0; i < n; i++) {
        if (s->w[i] <= 0.0) continue;
        last = i;
        cum += s->w[i];
        if (u < cum) return s->cand[i].id;
    }
    return s->cand[last].id; /* u landed past the last sum through rounding */
}

/* The state bytes: rng[4] (u64), repeat_last_n, n_hist, hist_head (i32), hist[repeat_last_n]
 * (i32), in this machine's byte order (a state only travels to a process on the same machine).
 * Until the history is full its next slot is n_hist and the slots from there on are 0, so the
 * bytes follow from the seed and the tokens accepted alone (two runs compare them). */
size_t zr_sampler_state_size(const ZrSampler *s) {
    return 4 * sizeof(uint64_t) + 3 * sizeof(int32_t) + (size_t)s->p.repeat_last_n * sizeof(int32_t);
}

void zr_sampler_get_state(const ZrSampler *s, void *buf) {
    unsigned char *p = buf;
    const int32_t head[3] = {s->p.repeat_last_n, s->n_hist, s->hist_head};
    memcpy(p, s->rng, sizeof s->rng);
    p += sizeof s->rng;
    memcpy(p, head, sizeof head);
    p += sizeof head;
    memcpy(p, s->hist, (size_t)s->p.repeat_last_n * sizeof *s->hist);
}

int zr_sampler_set_state(ZrSampler *s, const void *buf, size_t len, ZrError *err) {
    const unsigned char *p = buf;
    const size_t fixed = sizeof s->rng + 3 * sizeof(int32_t);
    if (len < fixed)
        return zr_err(err, ZR_E_FORMAT, "sampler state: expected at least %zu bytes, found %zu", fixed, len);
    int32_t head[3];
    memcpy(head, p + sizeof s->rng, sizeof head);
    if (head[0] != s->p.repeat_last_n)
        return zr_err(err, ZR_E_FORMAT, "sampler state: repeat-last-n: expected %d (this sampler's), found %d",
                      s->p.repeat_last_n, head[0]);
    if (len != zr_sampler_state_size(s))
        return zr_err(err, ZR_E_FORMAT, "sampler state: expected %zu bytes, found %zu", zr_sampler_state_size(s), len);
    const int n = s->p.repeat_last_n;
    if (head[1] < 0 || head[1] > n || head[2] < 0 || (n > 0 ? head[2] >= n : head[2] != 0) ||
        (head[1] < n && head[2] != head[1]))
        return zr_err(err, ZR_E_FORMAT,
                      "sampler state: history of %d tokens with its next slot at %d: expected 0..%d tokens, the next "
                      "slot below %d and equal to the count until the history is full",
                      head[1], head[2], n, n > 0 ? n : 1);
    uint64_t rng[4];
    memcpy(rng, p, sizeof rng);
    if (!(rng[0] | rng[1] | rng[2] | rng[3]))
        return zr_err(err, ZR_E_FORMAT, "sampler state: the generator state is all zero (xoshiro would stay stuck)");
    memcpy(s->rng, rng, sizeof rng);
    s->n_hist = head[1];
    s->hist_head = head[2];
    memcpy(s->hist, p + fixed, (size_t)n * sizeof *s->hist);
    for (int i = head[1]; i < n; i++) s->hist[i] = 0; /* not yet written: whatever the bytes held there */
    return ZR_OK;
}
