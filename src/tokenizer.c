/* Tokenizers from tokenizer.ggml.* metadata, reproducing llama.cpp's llama-vocab.cpp:
 *
 * - Special-token partition (tokenizer_st_partition): the text is cut at every occurrence of
 *   a control, unknown or user-defined token's text, longest tokens first; control and unknown
 *   tokens only when parse_special is on, user-defined ones always.
 * - SentencePiece ("llama", llm_tokenizer_spm): spaces become U+2581, a space is prepended to
 *   each text piece that starts the input or follows a special token (add_space_prefix); the
 *   text is cut into UTF-8 characters and adjacent symbols are merged best score first (ties:
 *   leftmost) while the merged text is a vocabulary entry; symbols left that are not entries
 *   fall back to the byte tokens <0xNN>.
 * - Byte-level BPE ("gpt2", llm_tokenizer_bpe): the pre-tokenizer splits the text into words
 *   (tokenizer_pre.c), each word's bytes are mapped to GPT-2's printable byte alphabet, and
 *   adjacent symbols are merged lowest merge rank first (ties: leftmost). llama3-style
 *   vocabularies take a word that is itself a vocabulary entry whole (ignore_merges).
 */
#include "tokenizer.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hash.h"
#include "tokenizer_pre.h"

/* token attributes (llama_token_attr bits) */
enum {
    ATTR_NORMAL = 1 << 0,
    ATTR_UNKNOWN = 1 << 1,
    ATTR_CONTROL = 1 << 2,
    ATTR_USER_DEFINED = 1 << 3,
    ATTR_UNUSED = 1 << 4,
    ATTR_BYTE = 1 << 5,
};
#define ATTR_EOG 0x80 /* zrun's own: ends generation */

enum { KIND_SPM, KIND_BPE };

typedef struct HashSlot {
    int32_t id; /* -1 = empty */
    uint32_t tag;
} HashSlot;

typedef struct MergeSlot {
    uint64_t key; /* left id << 32 | right id; UINT64_MAX = empty */
    int32_t rank;
    int32_t result; /* id of the merged text, -1 if it is not a token */
} MergeSlot;

typedef struct StrMerge { /* a merge whose halves are not both tokens (rare) */
    uint32_t off, len; /* "left right" in the pool */
    int32_t rank;
} StrMerge;

struct ZrTokenizer {
    int kind;
    int32_t n_vocab;
    char *pool;     /* [pool_len] token texts back to back, then StrMerge texts */
    uint32_t *off;  /* [n_vocab] */
    uint32_t *len;  /* [n_vocab] */
    float *score;   /* [n_vocab] */
    uint8_t *attr;  /* [n_vocab] */
    HashSlot *hash; /* [hash_mask + 1] text -> id */
    uint32_t hash_mask;
    size_t max_len; /* longest token text */
    ZrHashKey hkey; /* keys hash, merge and str_hash */

    /* BPE */
    ZrPretok *pre;
    bool ignore_merges;
    MergeSlot *merge; /* [merge_mask + 1] */
    uint64_t merge_mask;
    StrMerge *str_merge; /* [n_str_merge] */
    HashSlot *str_hash;  /* [str_mask + 1] "left right" -> index into str_merge */
    uint32_t str_mask;
    size_t n_str_merge;
    char byte_chr[256][2]; /* GPT-2 alphabet: byte -> UTF-8 of its code point (1 or 2 bytes) */
    uint8_t byte_chr_len[256];
    int16_t chr_byte[0x144]; /* code point < 0x144 -> byte, or -1 */

    /* SPM: bit b of joins[a] (a bitset of 256): some token's text holds byte a directly
     * followed by byte b. Where no token does, no merge can ever span the two characters. */
    uint8_t joins[256][32];
    /* SPM byte fallback (<0xNN>) or, for BPE, the token of each byte's alphabet character */
    int32_t byte_tok[256];

    int32_t bos, eos, eot, eom, unk, sep, pad;
    bool add_bos, add_eos, add_space_prefix;
    int32_t *special; /* [n_special] control/unknown/user-defined ids, longest text first */
    size_t n_special;
    char kind_name[96];
};

/* ---- hashing ---------------------------------------------------------------------------- */

/* Keyed per tokenizer (hash.h): a vocabulary cannot be written so that its texts or merges
 * all fall into one slot. */
static uint64_t hash_bytes(const ZrTokenizer *t, const char *p, size_t n) { return zr_hash_bytes(&t->hkey, p, n); }
static uint64_t hash_pair(const ZrTokenizer *t, uint64_t k) { return zr_hash_u64(&t->hkey, k); }

static int32_t find_text(const ZrTokenizer *t, const char *p, size_t n) {
    uint64_t h = hash_bytes(t, p, n);
    uint32_t tag = (uint32_t)(h >> 32);
    for (uint32_t i = (uint32_t)h & t->hash_mask;; i = (i + 1) & t->hash_mask) {
        const HashSlot *s = &t->hash[i];
        if (s->id < 0) return -1;
        if (s->tag == tag && t->len[s->id] == n && memcmp(t->pool + t->off[s->id], p, n) == 0)
            return s->id;
    }
}

static const MergeSlot *find_merge(const ZrTokenizer *t, int32_t a, int32_t b) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (uint64_t i = hash_pair(t, key) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
        const MergeSlot *s = &t->merge[i];
        if (s->key == key) return s;
        if (s->key == UINT64_MAX) return NULL;
    }
}

static const StrMerge *find_str_merge(const ZrTokenizer *t, const char *p, size_t n) {
    if (!t->n_str_merge) return NULL;
    uint64_t h = hash_bytes(t, p, n);
    uint32_t tag = (uint32_t)(h >> 32);
    for (uint32_t i = (uint32_t)h & t->str_mask;; i = (i + 1) & t->str_mask) {
        const HashSlot *s = &t->str_hash[i];
        if (s->id < 0) return NULL;
        const StrMerge *m = &t->str_merge[s->id];
        if (s->tag == tag && m->len == n && memcmp(t->pool + m->off, p, n) == 0) return m;
    }
}

/* ---- the load's lookups on the host's cores ------------------------------------------- */

/* fn(ctx, lo, hi) over [0, n) in slices on up to 8 threads (this one among them); small n, or
 * no thread to be had, on this thread alone. The slices write disjoint parts of what ctx holds. */
typedef void (*ParFn)(void *ctx, size_t lo, size_t hi);
typedef struct ParJob {
    ParFn fn;
    void *ctx;
    size_t lo, hi;
} ParJob;

static void *par_main(void *arg) {
    ParJob *j = arg;
    j->fn(j->ctx, j->lo, j->hi);
    return NULL;
}

static void par_for(size_t n, ParFn fn, void *ctx) {
    enum { MAX_THREADS = 8, MIN_SLICE = 8192 };
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    size_t nt = cores > 1 ? (size_t)cores : 1;
    if (nt > MAX_THREADS) nt = MAX_THREADS;
    if (nt > n / MIN_SLICE) nt = n / MIN_SLICE;
    if (nt < 2) {
        fn(ctx, 0, n);
        return;
    }
    pthread_t th[MAX_THREADS];
    ParJob job[MAX_THREADS];
    bool started[MAX_THREADS] = {false};
    for (size_t i = 0; i < nt; i++) {
        job[i] = (ParJob){fn, ctx, n * i / nt, n * (i + 1) / nt};
        if (i > 0) started[i] = pthread_create(&th[i], NULL, par_main, &job[i]) == 0;
    }
    fn(ctx, job[0].lo, job[0].hi);
    for (size_t i = 1; i < nt; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        else fn(ctx, job[i].lo, job[i].hi); /* no thread: this one does it */
    }
}

/* ---- growable id list --------------------------------------------------------------- */

typedef struct IdVec {
    int32_t *v;
    size_t n, cap;
} IdVec;

static bool ids_push(IdVec *o, int32_t id) {
    if (o->n == o->cap) {
        size_t c = o->cap ? 2 * o->cap : 64;
        int32_t *q = realloc(o->v, c * sizeof *q);
        if (!q) return false;
        o->v = q;
        o->cap = c;
    }
    o->v[o->n++] = id;
    return true;
}

/* ---- symbols and the merge queue (shared by SPM and BPE) ------------------------------ */

typedef struct Sym {
    int32_t prev, next; /* -1 = none */
    uint32_t start, n;  /* bytes of the working text; n == 0: merged away */
    int32_t id;         /* BPE: token id of the text, -1 if none */
} Sym;

/* 16 bytes: a long word queues one per pair of neighbouring characters (the merged id of a BPE
 * pair is looked up again when it is taken, rather than stored). */
typedef struct Bigram {
    union {
        float score;  /* SPM: higher first */
        int32_t rank; /* BPE: lower first */
    } k;
    int32_t left, right;
    uint32_t size; /* bytes of left + right when queued */
} Bigram;

typedef struct Work {
    Sym *sym;
    size_t n_sym, cap_sym;
    Bigram *heap;
    size_t n_heap, cap_heap;
    char *buf; /* SPM: escaped text; BPE: the word in the GPT-2 alphabet */
    size_t cap_buf;
    ZrWords words;
    int spm; /* heap order */
} Work;

static bool before(const Work *w, const Bigram *a, const Bigram *b) {
    if (w->spm) return a->k.score > b->k.score || (a->k.score == b->k.score && a->left < b->left);
    return a->k.rank < b->k.rank || (a->k.rank == b->k.rank && a->left < b->left);
}

static bool heap_push(Work *w, Bigram b) {
    if (w->n_heap == w->cap_heap) {
        size_t c = w->cap_heap ? 2 * w->cap_heap : 256;
        Bigram *q = realloc(w->heap, c * sizeof *q);
        if (!q) return false;
        w->heap = q;
        w->cap_heap = c;
    }
    size_t i = w->n_heap++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!before(w, &b, &w->heap[p])) break;
        w->heap[i] = w->heap[p];
        i = p;
    }
    w->heap[i] = b;
    return true;
}

static Bigram heap_pop(Work *w) {
    Bigram top = w->heap[0];
    Bigram last = w->heap[--w->n_heap];
    size_t i = 0, n = w->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && before(w, &w->heap[c + 1], &w->heap[c])) c++;
        if (!before(w, &w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n) w->heap[i] = last;
    return top;
}

/* Grows *p to hold need elements: doubling when that is enough, else exactly need (so one
 * large first request costs what it asks, not the next power of two). */
static bool reserve(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t c = *cap * 2;
    if (c < need) c = need;
    if (c < 64) c = 64;
    void *q = realloc(*p, c * elem);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

/* ---- SentencePiece ---------------------------------------------------------------------- */

static bool spm_try_bigram(const ZrTokenizer *t, Work *w, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return true;
    const Sym *L = &w->sym[l], *R = &w->sym[r];
    if (L->n + R->n > t->max_len) return true;
    int32_t id = find_text(t, w->buf + L->start, L->n + R->n);
    if (id < 0) return true;
    Bigram b = {.k.score = t->score[id], .left = l, .right = r, .size = L->n + R->n};
    return heap_push(w, b);
}

/* llama.cpp's unicode_len_utf8: the length a lead byte announces (continuation bytes: 1). */
static size_t utf8_len(unsigned char c) {
    static const uint8_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[c >> 4];
}

static bool spm_joins(const ZrTokenizer *t, unsigned char a, unsigned char b) {
    return t->joins[a][b >> 3] >> (b & 7) & 1;
}

/* Merges the symbols sym[0..ns) of one region (their texts in w->buf), best score first (ties:
 * leftmost), while the merged text is a vocabulary entry; then emits the survivors. */
static int spm_region(const ZrTokenizer *t, Work *w, size_t ns, IdVec *out) {
    w->n_heap = 0;
    for (size_t i = 1; i < ns; i++)
        if (!spm_try_bigram(t, w, (int32_t)i - 1, (int32_t)i)) return ZR_E_NOMEM;
    while (w->n_heap) {
        Bigram b = heap_pop(w);
        Sym *L = &w->sym[b.left], *R = &w->sym[b.right];
        if (L->n == 0 || R->n == 0 || L->n + R->n != b.size) continue;
        L->n += R->n;
        R->n = 0;
        L->next = R->next;
        if (R->next >= 0) w->sym[R->next].prev = b.left;
        if (!spm_try_bigram(t, w, L->prev, b.left) || !spm_try_bigram(t, w, b.left, L->next))
            return ZR_E_NOMEM;
    }
    /* merging keeps the left symbol: the survivors are in index order */
    for (size_t i = 0; i < ns; i++) {
        const Sym *s = &w->sym[i];
        if (s->n == 0) continue;
        int32_t id = find_text(t, w->buf + s->start, s->n);
        if (id >= 0) {
            if (!ids_push(out, id)) return ZR_E_NOMEM;
            continue;
        }
        /* not a vocabulary entry: one byte token per byte */
        for (uint32_t j = 0; j < s->n; j++) {
            int32_t bt = t->byte_tok[(unsigned char)w->buf[s->start + j]];
            if (bt < 0) bt = t->unk;
            if (bt >= 0 && !ids_push(out, bt)) return ZR_E_NOMEM;
        }
    }
    return ZR_OK;
}

static int spm_encode(const ZrTokenizer *t, Work *w, const char *text, size_t len, bool prefix,
                      IdVec *out) {
    /* escaped text: ' ' -> U+2581 (3 bytes), sized exactly */
    size_t spaces = prefix;
    for (size_t i = 0; i < len; i++) spaces += text[i] == ' ';
    if (!reserve((void **)&w->buf, &w->cap_buf, len + 2 * spaces + 1, 1)) return ZR_E_NOMEM;
    size_t n = 0;
    if (prefix) {
        memcpy(w->buf, "\xE2\x96\x81", 3);
        n = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(w->buf + n, "\xE2\x96\x81", 3);
            n += 3;
        } else {
            w->buf[n++] = text[i];
        }
    }
    w->spm = 1;
    /* The text is cut into UTF-8 characters, and into regions where two neighbouring
     * characters meet in no token's text (spm_joins): a merged symbol is always a token, so
     * no symbol ever spans such a cut, and each region merges on its own, in the order one
     * queue for the whole text would take (the regions never interact). One region's symbols
     * and queue at a time: the memory is that of the longest region, not of the text. */
    for (size_t o = 0; o < n;) {
        size_t ns = 0;
        do {
            size_t k = utf8_len((unsigned char)w->buf[o]);
            if (k > n - o) k = n - o;
            if (!reserve((void **)&w->sym, &w->cap_sym, ns + 1, sizeof *w->sym)) return ZR_E_NOMEM;
            w->sym[ns] = (Sym){.prev = (int32_t)ns - 1, .next = (int32_t)ns + 1, .start = (uint32_t)o, .n = (uint32_t)k, .id = -1};
            ns++;
            o += k;
        } while (o < n && spm_joins(t, (unsigned char)w->buf[o - 1], (unsigned char)w->buf[o]));
        w->sym[ns - 1].next = -1;
        w->n_sym = ns;
        int rc = spm_region(t, w, ns, out);
        if (rc) return rc;
    }
    return ZR_OK;
}

/* ---- byte-level BPE --------------------------------------------------------------------- */

static bool bpe_try_bigram(const ZrTokenizer *t, Work *w, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return true;
    const Sym *L = &w->sym[l], *R = &w->sym[r];
    Bigram b = {.left = l, .right = r, .size = L->n + R->n};
    if (L->id >= 0 && R->id >= 0) {
        const MergeSlot *m = find_merge(t, L->id, R->id);
        if (!m) return true;
        b.k.rank = m->rank;
    } else {
        if (!t->n_str_merge) return true;
        /* the merge table is keyed by "left right" for halves that are not tokens */
        char key[1024];
        if (L->n + R->n + 1 > sizeof key) return true;
        memcpy(key, w->buf + L->start, L->n);
        key[L->n] = ' ';
        memcpy(key + L->n + 1, w->buf + R->start, R->n);
        const StrMerge *m = find_str_merge(t, key, L->n + R->n + 1);
        if (!m) return true;
        b.k.rank = m->rank;
    }
    return heap_push(w, b);
}

static int bpe_encode_word(const ZrTokenizer *t, Work *w, const char *word, size_t len,
                           IdVec *out) {
    if (!reserve((void **)&w->buf, &w->cap_buf, 2 * len + 1, 1)) return ZR_E_NOMEM;
    if (!reserve((void **)&w->sym, &w->cap_sym, len + 1, sizeof *w->sym)) return ZR_E_NOMEM;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)word[i];
        w->sym[i] = (Sym){.prev = (int32_t)i - 1, .next = i + 1 == len ? -1 : (int32_t)i + 1,
                          .start = (uint32_t)n, .n = t->byte_chr_len[c], .id = t->byte_tok[c]};
        memcpy(w->buf + n, t->byte_chr[c], t->byte_chr_len[c]);
        n += t->byte_chr_len[c];
    }
    if (t->ignore_merges) {
        int32_t id = find_text(t, w->buf, n);
        if (id >= 0) return ids_push(out, id) ? ZR_OK : ZR_E_NOMEM;
    }
    w->n_sym = len;
    w->spm = 0;
    w->n_heap = 0;
    for (size_t i = 1; i < len; i++)
        if (!bpe_try_bigram(t, w, (int32_t)i - 1, (int32_t)i)) return ZR_E_NOMEM;
    while (w->n_heap) {
        Bigram b = heap_pop(w);
        Sym *L = &w->sym[b.left], *R = &w->sym[b.right];
        if (L->n == 0 || R->n == 0 || L->n + R->n != b.size) continue;
        /* (the pair is as it was queued: its merge gives the same id now) */
        L->id = L->id >= 0 && R->id >= 0 ? find_merge(t, L->id, R->id)->result : find_text(t, w->buf + L->start, L->n + R->n);
        L->n += R->n;
        R->n = 0;
        L->next = R->next;
        if (R->next >= 0) w->sym[R->next].prev = b.left;
        if (!bpe_try_bigram(t, w, L->prev, b.left) || !bpe_try_bigram(t, w, b.left, L->next))
            return ZR_E_NOMEM;
    }
    for (int32_t i = 0; i != -1; i = w->sym[i].next) {
        const Sym *s = &w->sym[i];
        if (s->id >= 0) {
            if (!ids_push(out, s->id)) return ZR_E_NOMEM;
            continue;
        }
        /* llama.cpp looks each byte of the symbol's text up on its own and drops misses */
        for (uint32_t j = 0; j < s->n; j++) {
            int32_t id = find_text(t, w->buf + s->start + j, 1);
            if (id >= 0 && !ids_push(out, id)) return ZR_E_NOMEM;
        }
    }
    return ZR_OK;
}

static int bpe_encode(const ZrTokenizer *t, Work *w, const char *text, size_t len, IdVec *out,
                      ZrError *err) {
    int rc = zr_pretok_split(t->pre, text, len, &w->words, err);
    if (rc) return rc;
    size_t start = 0;
    for (size_t i = 0; i < w->words.n; i++) {
        size_t end = w->words.end[i];
        if (end > start) {
            rc = bpe_encode_word(t, w, w->words.text + start, end - start, out);
            if (rc) return zr_err(err, rc, "tokenizer: out of memory");
        }
        start = end;
    }
    return ZR_OK;
}

/* ---- special-token partition ------------------------------------------------------------ */

typedef struct Frag {
    int32_t id; /* >= 0: a special token; -1: text[off, off + len) */
    size_t off, len;
} Frag;

typedef struct FragVec {
    Frag *v;
    size_t n, cap;
} FragVec;

static bool frag_push(FragVec *f, Frag x) {
    if (!reserve((void **)&f->v, &f->cap, f->n + 1, sizeof *f->v)) return false;
    f->v[f->n++] = x;
    return true;
}

static int partition(const ZrTokenizer *t, const char *text, size_t len, bool parse_special,
                     FragVec *a, FragVec *b) {
    a->n = 0;
    if (len && !frag_push(a, (Frag){-1, 0, len})) return ZR_E_NOMEM;
    for (size_t k = 0; k < t->n_special; k++) {
        int32_t sid = t->special[k];
        if (!parse_special && (t->attr[sid] & (ATTR_CONTROL | ATTR_UNKNOWN))) continue;
        const char *st = t->pool + t->off[sid];
        size_t sl = t->len[sid];
        bool any = false;
        for (size_t i = 0; i < a->n && !any; i++)
            any = a->v[i].id < 0 && a->v[i].len >= sl && memmem(text + a->v[i].off, a->v[i].len, st, sl);
        if (!any) continue;
        b->n = 0;
        for (size_t i = 0; i < a->n; i++) {
            Frag f = a->v[i];
            if (f.id >= 0 || f.len < sl) {
                if (!frag_push(b, f)) return ZR_E_NOMEM;
                continue;
            }
            size_t off = f.off, rem = f.len;
            while (rem > 0) {
                const char *p = rem >= sl ? memmem(text + off, rem, st, sl) : NULL;
                if (!p) {
                    if (!frag_push(b, (Frag){-1, off, rem})) return ZR_E_NOMEM;
                    break;
                }
                size_t m = (size_t)(p - text);
                if (m > off && !frag_push(b, (Frag){-1, off, m - off})) return ZR_E_NOMEM;
                if (!frag_push(b, (Frag){sid, 0, 0})) return ZR_E_NOMEM;
                rem -= m - off + sl;
                off = m + sl;
            }
        }
        FragVec tmp = *a;
        *a = *b;
        *b = tmp;
    }
    return ZR_OK;
}

/* ---- encode ----------------------------------------------------------------------------- */

int zr_tokenizer_encode(const ZrTokenizer *t, const char *text, size_t len, bool add_special,
                        bool parse_special, int32_t **ids, size_t *n_ids, ZrError *err) {
    *ids = NULL;
    *n_ids = 0;
    if (len > (size_t)1 << 30)
        return zr_err(err, ZR_E_RANGE, "tokenizer: text of %zu bytes is over the 1 GiB limit", len);
    IdVec out = {0};
    FragVec fa = {0}, fb = {0};
    Work w;
    memset(&w, 0, sizeof w);
    zr_words_init(&w.words);
    int rc = ZR_OK;
    if (add_special && t->add_bos && t->bos >= 0 && !ids_push(&out, t->bos)) goto nomem;
    rc = partition(t, text, len, parse_special, &fa, &fb);
    if (rc) goto nomem;
    bool prev_special = true; /* SPM: a space goes before the first text and after specials */
    for (size_t i = 0; i < fa.n; i++) {
        const Frag *f = &fa.v[i];
        if (f->id >= 0) {
            if (!ids_push(&out, f->id)) goto nomem;
            prev_special = true;
            continue;
        }
        if (t->kind == KIND_SPM) {
            rc = spm_encode(t, &w, text + f->off, f->len, t->add_space_prefix && prev_special, &out);
            if (rc) goto nomem;
        } else {
            rc = bpe_encode(t, &w, text + f->off, f->len, &out, err);
            if (rc) goto done;
        }
        prev_special = false;
    }
    if (add_special && t->add_eos && t->eos >= 0 && !ids_push(&out, t->eos)) goto nomem;
    goto done;
nomem:
    rc = zr_err(err, ZR_E_NOMEM, "tokenizer: out of memory encoding %zu bytes", len);
done:
    free(fa.v);
    free(fb.v);
    free(w.sym);
    free(w.heap);
    free(w.buf);
    zr_words_free(&w.words);
    if (rc) {
        free(out.v);
        return rc;
    }
    if (out.n == 0) {
        free(out.v);
        out.v = NULL;
    }
    *ids = out.v;
    *n_ids = out.n;
    return ZR_OK;
}

/* ---- decode ----------------------------------------------------------------------------- */

static size_t put(char *buf, size_t cap, size_t at, const char *src, size_t n) {
    if (at < cap) memcpy(buf + at, src, at + n <= cap ? n : cap - at);
    return at + n;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* "<0xNN>" -> NN, or -1 */
static int byte_of_text(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int hi = hexval(s[3]), lo = hexval(s[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

size_t zr_tokenizer_token_bytes(const ZrTokenizer *t, int32_t id, bool special, char *buf, size_t cap) {
    if (id < 0 || id >= t->n_vocab) return 0;
    uint8_t a = t->attr[id];
    const char *s = t->pool + t->off[id];
    size_t n = t->len[id];
    if ((a & (ATTR_UNKNOWN | ATTR_CONTROL)) && !special) return 0;
    if (a & (ATTR_UNKNOWN | ATTR_CONTROL | ATTR_USER_DEFINED)) return put(buf, cap, 0, s, n);
    if (a & ATTR_NORMAL) {
        size_t o = 0;
        if (t->kind == KIND_SPM) {
            for (size_t i = 0; i < n;) {
                if (i + 3 <= n && memcmp(s + i, "\xE2\x96\x81", 3) == 0) {
                    o = put(buf, cap, o, " ", 1);
                    i += 3;
                } else {
                    o = put(buf, cap, o, s + i, 1);
                    i++;
                }
            }
            return o;
        }
        /* GPT-2 alphabet back to bytes; a character outside it is copied as it is */
        for (size_t i = 0; i < n;) {
            unsigned char c = (unsigned char)s[i];
            uint32_t cp = 0;
            size_t k = 1;
            if (c < 0x80) cp = c;
            else if ((c & 0xE0) == 0xC0 && i + 1 < n) {
                cp = ((c & 0x1Fu) << 6) | ((unsigned char)s[i + 1] & 0x3Fu);
                k = 2;
            } else {
                k = utf8_len(c);
                if (k > n - i) k = n - i;
                o = put(buf, cap, o, s + i, k);
                i += k;
                continue;
            }
            if (cp < 0x144 && t->chr_byte[cp] >= 0) {
                char b = (char)t->chr_byte[cp];
                o = put(buf, cap, o, &b, 1);
            } else {
                o = put(buf, cap, o, s + i, k);
            }
            i += k;
        }
        return o;
    }
    if (a & ATTR_BYTE) {
        int b = byte_of_text(s, n);
        if (b < 0) return 0;
        char c = (char)b;
        return put(buf, cap, 0, &c, 1);
    }
    return 0;
}

void zr_detok_init(ZrDetok *d, const ZrTokenizer *t) {
    memset(d, 0, sizeof *d);
    d->tok = t;
}

size_t zr_detok_cap(const ZrTokenizer *t) { return 3 * (t->max_len + 8); }

/* Length of the valid UTF-8 character at s[0..n): > 0 complete, 0 valid but incomplete,
 * -1 invalid (the first byte can never begin this character). */
static int utf8_char(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    int k;
    unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) k = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        k = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        k = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else return -1;
    for (int i = 1; i < k; i++) {
        if ((size_t)i >= n) return 0;
        unsigned b = s[i];
        if (i == 1 ? (b < lo || b > hi) : (b & 0xC0) != 0x80) return -1;
    }
    return k;
}

/* Emits the complete characters of s[0..n) into out; returns the bytes consumed. With
 * at_end, an incomplete tail is emitted as U+FFFD too. */
static size_t emit_utf8(const unsigned char *s, size_t n, bool at_end, char *out, size_t cap,
                        size_t *o) {
    size_t i = 0;
    while (i < n) {
        int k = utf8_char(s + i, n - i);
        if (k == 0 && !at_end) break;
        if (k <= 0) {
            if (*o + 3 > cap) break;
            memcpy(out + *o, "\xEF\xBF\xBD", 3);
            *o += 3;
            /* an incomplete tail is one maximal subpart: one replacement for all of it */
            i = k == 0 ? n : i + 1;
            continue;
        }
        if (*o + (size_t)k > cap) break;
        memcpy(out + *o, s + i, (size_t)k);
        *o += (size_t)k;
        i += (size_t)k;
    }
    return i;
}

size_t zr_detok_push(ZrDetok *d, int32_t id, char *out, size_t cap) {
    const ZrTokenizer *t = d->tok;
    char local[1024];
    size_t need = zr_tokenizer_token_bytes(t, id, d->special, NULL, 0);
    char *buf = local;
    if (need + (size_t)d->n_pending > sizeof local) {
        buf = malloc(need + (size_t)d->n_pending);
        if (!buf) return 0;
    }
    memcpy(buf, d->pending, (size_t)d->n_pending);
    size_t n = (size_t)d->n_pending;
    n += zr_tokenizer_token_bytes(t, id, d->special, buf + n, need);
    size_t skip = 0;
    if (d->at_start) {
        d->at_start = false;
        if (t->add_space_prefix && id != t->bos && n > 0 && buf[0] == ' ') skip = 1;
    }
    size_t o = 0;
    size_t used = skip + emit_utf8((const unsigned char *)buf + skip, n - skip, false, out, cap, &o);
    size_t rest = n - used;
    if (rest > sizeof d->pending) rest = 0; /* only when cap was too small: the text is lost */
    memmove(d->pending, buf + used, rest);
    d->n_pending = (int)rest;
    if (buf != local) free(buf);
    return o;
}

size_t zr_detok_flush(ZrDetok *d, char *out, size_t cap) {
    size_t o = 0;
    emit_utf8((const unsigned char *)d->pending, (size_t)d->n_pending, true, out, cap, &o);
    d->n_pending = 0;
    return o;
}

/* ---- accessors -------------------------------------------------------------------------- */

int zr_tokenizer_n_vocab(const ZrTokenizer *t) { return t->n_vocab; }
int32_t zr_tokenizer_bos(const ZrTokenizer *t) { return t->bos; }
int32_t zr_tokenizer_eos(const ZrTokenizer *t) { return t->eos; }
bool zr_tokenizer_add_bos(const ZrTokenizer *t) { return t->add_bos && t->bos >= 0; }
const char *zr_tokenizer_kind(const ZrTokenizer *t) { return t->kind_name; }

bool zr_tokenizer_is_eog(const ZrTokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab && (t->attr[id] & ATTR_EOG);
}

bool zr_tokenizer_is_control(const ZrTokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab && (t->attr[id] & (ATTR_CONTROL | ATTR_UNKNOWN));
}

const char *zr_tokenizer_token_text(const ZrTokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_vocab) return NULL;
    *len = t->len[id];
    return t->pool + t->off[id];
}

int32_t zr_tokenizer_find(const ZrTokenizer *t, const char *text, size_t len) {
    return find_text(t, text, len);
}

/* ---- load ------------------------------------------------------------------------------- */

void zr_tokenizer_free(ZrTokenizer *t) {
    if (!t) return;
    free(t->pool);
    free(t->off);
    free(t->len);
    free(t->score);
    free(t->attr);
    free(t->hash);
    free(t->merge);
    free(t->str_merge);
    free(t->str_hash);
    free(t->special);
    zr_pretok_free(t->pre);
    free(t);
}

static uint32_t pow2_at_least(uint64_t n) {
    uint64_t c = 16;
    while (c < n) c *= 2;
    return (uint32_t)c;
}

/* A special token id from key: absent, or the "none" values (-1, 2^32-1, 2^64-1) leave *id as
 * it is (llama.cpp's default); any other value must be an id of the vocabulary, except for the
 * ids zrun never uses (separator, padding: `strict` false), which are ignored when out of range
 * as llama.cpp does (files in the wild have padding = n_vocab). llama.cpp only warns about an
 * out-of-range bos/eos/eot/eom/unk and keeps its default; zrun refuses the file instead, since
 * generation could never stop at such an eos. */
static int read_id(const ZrGguf *g, const char *key, int32_t n_vocab, bool strict, int32_t *id, ZrError *err) {
    const ZrGgufKv *kv = zr_gguf_find(g, key);
    if (!kv) return 0;
    if (kv->type == ZR_GGUF_STRING || kv->type == ZR_GGUF_ARRAY || kv->type == ZR_GGUF_FLOAT32 ||
        kv->type == ZR_GGUF_FLOAT64 || kv->type == ZR_GGUF_BOOL)
        return zr_err(err, ZR_E_FORMAT, "%s: key '%s': expected an integer token id, found %s", g->path, key, zr_gguf_type_name(kv->type));
    double v = zr_gguf_kv_num(kv);
    if (v == -1.0 || v == 4294967295.0 || v == 18446744073709551615.0) return 0;
    if (!(v >= 0 && v < n_vocab)) {
        if (!strict) return 0;
        return zr_err(err, ZR_E_FORMAT, "%s: key '%s': expected a token id in 0..%d (or -1 for none), found %.0f", g->path, key,
                      (int)n_vocab - 1, v);
    }
    *id = (int32_t)v;
    return 0;
}

static int cmp_special(const void *a, const void *b, void *ctx) {
    const ZrTokenizer *t = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (t->len[x] != t->len[y]) return t->len[x] > t->len[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

static void gpt2_alphabet(ZrTokenizer *t) {
    int n = 0;
    for (int i = 0; i < 0x144; i++) t->chr_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        int cp = printable ? b : 256 + n++;
        t->chr_byte[cp] = (int16_t)b;
        if (cp < 0x80) {
            t->byte_chr[b][0] = (char)cp;
            t->byte_chr_len[b] = 1;
        } else {
            t->byte_chr[b][0] = (char)(0xC0 | (cp >> 6));
            t->byte_chr[b][1] = (char)(0x80 | (cp & 0x3F));
            t->byte_chr_len[b] = 2;
        }
    }
}

/* A merge's left and right texts' ids and its result's (-1: not a token), by rank. */
typedef struct MergeLook {
    const ZrTokenizer *t;
    const ZrStr *m;
    int32_t (*ids)[3];
    uint64_t *home; /* the pair's first slot in t->merge (prefetched before the insert) */
} MergeLook;

static void merge_look(void *ctx, size_t lo, size_t hi) {
    MergeLook *L = ctx;
    const ZrTokenizer *t = L->t;
    char *tmp = malloc(2 * t->max_len + 2); /* without it the result is looked up from the two halves' texts in place */
    for (size_t r = lo; r < hi; r++) {
        const char *s = L->m[r].ptr;
        const size_t len = (size_t)L->m[r].len;
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        int32_t *out = L->ids[r];
        out[0] = out[1] = out[2] = -1;
        if (!sp || sp + 1 == s + len) continue; /* refused by the caller */
        const size_t nl = (size_t)(sp - s), nr = len - nl - 1;
        out[0] = find_text(t, s, nl);
        out[1] = find_text(t, sp + 1, nr);
        L->home[r] = hash_pair(t, (uint64_t)(uint32_t)out[0] << 32 | (uint32_t)out[1]) & t->merge_mask;
        if (out[0] >= 0 && out[1] >= 0 && nl + nr <= 2 * t->max_len) {
            if (tmp) {
                memcpy(tmp, s, nl);
                memcpy(tmp + nl, sp + 1, nr);
                out[2] = find_text(t, tmp, nl + nr);
            } else {
                out[2] = -2; /* out of memory: the caller looks it up */
            }
        }
    }
    free(tmp);
}

static int load_merges(ZrTokenizer *t, const ZrGguf *g, ZrError *err) {
    const ZrGgufKv *kv;
    int rc = zr_gguf_get_arr(g, "tokenizer.ggml.merges", ZR_GGUF_STRING, &kv, err);
    if (rc) return rc;
    if (kv->n > INT32_MAX)
        return zr_err(err, ZR_E_FORMAT, "%s: tokenizer.ggml.merges: %llu entries, expected < 2^31",
                      g->path, (unsigned long long)kv->n);
    size_t nm = (size_t)kv->n;
    ZrStr *m = malloc((nm ? nm : 1) * sizeof *m);
    t->merge_mask = (uint64_t)pow2_at_least(2 * (uint64_t)nm + 16) - 1;
    t->merge = malloc((t->merge_mask + 1) * sizeof *t->merge);
    char *tmp = malloc(2 * t->max_len + 2);
    size_t str_cap = 0, str_bytes = 0;
    if (!m || !t->merge || !tmp) {
        free(m);
        free(tmp);
        return zr_err(err, ZR_E_NOMEM, "%s: out of memory for %zu merges", g->path, nm);
    }
    for (uint64_t i = 0; i <= t->merge_mask; i++) t->merge[i].key = UINT64_MAX;
    zr_gguf_arr_strings(kv, m);
    /* the three texts of every merge looked up on the host's cores (read-only), then added in
     * rank order here */
    MergeLook look = {t, m, malloc((nm ? nm : 1) * sizeof *look.ids), calloc(nm ? nm : 1, sizeof *look.home)};
    if (!look.ids || !look.home) {
        free(look.ids);
        free(look.home);
        free(m);
        free(tmp);
        return zr_err(err, ZR_E_NOMEM, "%s: out of memory for %zu merges", g->path, nm);
    }
    par_for(nm, merge_look, &look);
    for (size_t r = 0; r < nm; r++) {
        const char *s = m[r].ptr;
        size_t len = (size_t)m[r].len;
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        size_t nl = sp ? (size_t)(sp - s) : len, nr = sp ? len - nl - 1 : 0;
        if (!sp || !nr) {
            /* llama.cpp keeps it as a merge that never matches; it is a broken file */
            rc = zr_err(err, ZR_E_FORMAT, "%s: tokenizer.ggml.merges[%zu]: expected 'LEFT RIGHT' (two non-empty texts split by a space), found '%.*s'",
                        g->path, r, (int)(len > 64 ? 64 : len), s);
            free(look.ids);
            free(look.home);
            free(m);
            free(tmp);
            return rc;
        }
        enum { AHEAD = 16 }; /* the table is larger than the caches: its slots are fetched ahead */
        if (r + AHEAD < nm) __builtin_prefetch(&t->merge[look.home[r + AHEAD]]);
        const int32_t a = look.ids[r][0], b = look.ids[r][1];
        if (a >= 0 && b >= 0) {
            uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
            uint64_t i = look.home[r];
            while (t->merge[i].key != UINT64_MAX && t->merge[i].key != key) i = (i + 1) & t->merge_mask;
            if (t->merge[i].key == key) continue; /* the first rank wins, as in llama.cpp */
            int32_t res = look.ids[r][2];
            if (res == -2) { /* a slice without its buffer */
                memcpy(tmp, s, nl);
                memcpy(tmp + nl, sp + 1, nr);
                res = find_text(t, tmp, nl + nr);
            }
            t->merge[i] = (MergeSlot){key, (int32_t)r, res};
        } else {
            /* kept by text (rare: a half that is not a token) */
            if (!reserve((void **)&t->str_merge, &str_cap, t->n_str_merge + 1, sizeof *t->str_merge)) {
                free(look.ids);
                free(look.home);
                free(m);
                free(tmp);
                return zr_err(err, ZR_E_NOMEM, "%s: out of memory for merges", g->path);
            }
            t->str_merge[t->n_str_merge++] = (StrMerge){(uint32_t)(r), (uint32_t)len, (int32_t)r};
            str_bytes += len;
        }
    }
    free(tmp);
    free(look.ids);
    free(look.home);
    if (t->n_str_merge) {
        /* copy their texts after the token texts and index them */
        size_t base = 0;
        for (int32_t i = 0; i < t->n_vocab; i++) base += t->len[i];
        if (base + str_bytes > UINT32_MAX) {
            free(m);
            return zr_err(err, ZR_E_FORMAT, "%s: tokenizer texts exceed 4 GiB", g->path);
        }
        char *pool = realloc(t->pool, base + str_bytes + 1);
        t->str_mask = pow2_at_least(2 * (uint64_t)t->n_str_merge + 16) - 1;
        t->str_hash = malloc(((size_t)t->str_mask + 1) * sizeof *t->str_hash);
        if (!pool || !t->str_hash) {
            if (pool) t->pool = pool;
            free(m);
            return zr_err(err, ZR_E_NOMEM, "%s: out of memory for merges", g->path);
        }
        t->pool = pool;
        for (uint32_t i = 0; i <= t->str_mask; i++) t->str_hash[i].id = -1;
        size_t o = base;
        for (size_t k = 0; k < t->n_str_merge; k++) {
            StrMerge *sm = &t->str_merge[k];
            const ZrStr *src = &m[sm->off]; /* off held the merge index until now */
            memcpy(t->pool + o, src->ptr, (size_t)src->len);
            sm->off = (uint32_t)o;
            o += (size_t)src->len;
            uint64_t h = hash_bytes(t, t->pool + sm->off, sm->len);
            uint32_t i = (uint32_t)h & t->str_mask;
            bool dup = false;
            while (t->str_hash[i].id >= 0) {
                const StrMerge *e = &t->str_merge[t->str_hash[i].id];
                if (e->len == sm->len && memcmp(t->pool + e->off, t->pool + sm->off, sm->len) == 0) {
                    dup = true;
                    break;
                }
                i = (i + 1) & t->str_mask;
            }
            if (!dup) t->str_hash[i] = (HashSlot){(int32_t)k, (uint32_t)(h >> 32)};
        }
    }
    free(m);
    return ZR_OK;
}

/* llama.cpp's end-of-generation texts (llama-vocab.cpp): these tokens end generation and are
 * treated as control tokens whatever their stored type, so without parse_special their text
 * stays text. "</s>" is among them: phi-3 stores it as user-defined (type 4), which alone would
 * make "</s>" in a prompt the token 2 even without --special; llama.cpp makes it control. */
static const char *const k_eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>",
    "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>",
    "<｜end▁of▁sentence｜>",
};
static const char *const k_eot_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "<｜end▁of▁sentence｜>", "<end_of_utterance>",
};

/* Every token text's hash (h[n_vocab]), by id. */
typedef struct VocabHash {
    const ZrTokenizer *t;
    uint64_t *h;
} VocabHash;

static void vocab_hash(void *ctx, size_t lo, size_t hi) {
    VocabHash *v = ctx;
    for (size_t i = lo; i < hi; i++) v->h[i] = hash_bytes(v->t, v->t->pool + v->t->off[i], v->t->len[i]);
}

int zr_tokenizer_load(ZrTokenizer **out, const ZrGguf *g, ZrError *err) {
    *out = NULL;
    ZrStr model, pre = {"", 0};
    int rc = zr_gguf_get_name(g, "tokenizer.ggml.model", &model, err);
    if (rc) return rc;
    rc = zr_gguf_get_name_opt(g, "tokenizer.ggml.pre", &pre, err);
    if (rc) return rc;
    int kind;
    if (zr_str_eq(model, "llama")) kind = KIND_SPM;
    else if (zr_str_eq(model, "gpt2")) kind = KIND_BPE;
    else
        return zr_err(err, ZR_E_UNSUPPORTED,
                      "%s: tokenizer.ggml.model: expected \"llama\" or \"gpt2\", found \"%.*s\"",
                      g->path, (int)(model.len > 64 ? 64 : model.len), model.ptr);

    const ZrGgufKv *tok_kv, *score_kv = NULL, *type_kv = NULL;
    rc = zr_gguf_get_arr(g, "tokenizer.ggml.tokens", ZR_GGUF_STRING, &tok_kv, err);
    if (rc) return rc;
    if (tok_kv->n == 0 || tok_kv->n > INT32_MAX)
        return zr_err(err, ZR_E_FORMAT, "%s: tokenizer.ggml.tokens: %llu entries, expected 1 .. 2^31-1",
                      g->path, (unsigned long long)tok_kv->n);
    const int32_t nv = (int32_t)tok_kv->n;
    if (zr_gguf_find(g, "tokenizer.ggml.scores")) {
        rc = zr_gguf_get_arr(g, "tokenizer.ggml.scores", ZR_GGUF_N_VALUE_TYPES, &score_kv, err);
        if (rc) return rc;
        if (score_kv->n < (uint64_t)nv || score_kv->elem_type == ZR_GGUF_STRING || score_kv->elem_type == ZR_GGUF_ARRAY)
            return zr_err(err, ZR_E_FORMAT, "%s: tokenizer.ggml.scores: expected %d numbers, found %llu %s",
                          g->path, nv, (unsigned long long)score_kv->n, zr_gguf_type_name(score_kv->elem_type));
    }
    if (zr_gguf_find(g, "tokenizer.ggml.token_type")) {
        rc = zr_gguf_get_arr(g, "tokenizer.ggml.token_type", ZR_GGUF_N_VALUE_TYPES, &type_kv, err);
        if (rc) return rc;
        if (type_kv->n < (uint64_t)nv || type_kv->elem_type == ZR_GGUF_STRING || type_kv->elem_type == ZR_GGUF_ARRAY ||
            type_kv->elem_type == ZR_GGUF_FLOAT32 || type_kv->elem_type == ZR_GGUF_FLOAT64)
            return zr_err(err, ZR_E_FORMAT, "%s: tokenizer.ggml.token_type: expected %d integers, found %llu %s",
                          g->path, nv, (unsigned long long)type_kv->n, zr_gguf_type_name(type_kv->elem_type));
    }
    /* a NaN score breaks the ordering SentencePiece merges by; a type outside llama.cpp's
     * enum (0 undefined .. 6 byte) would make a token silently unprintable */
    for (int32_t i = 0; i < nv; i++) {
        double sc = score_kv ? zr_gguf_arr_num(score_kv, (uint64_t)i) : 0.0;
        if (!isfinite(sc) || fabs(sc) > 3.4e38)
            return zr_err(err, ZR_E_FORMAT, "%s: tokenizer.ggml.scores[%d]: expected a finite float32, found %g", g->path, (int)i, sc);
        double ty = type_kv ? zr_gguf_arr_num(type_kv, (uint64_t)i) : 1.0;
        if (!(ty >= 0 && ty <= 6))
            return zr_err(err, ZR_E_FORMAT, "%s: tokenizer.ggml.token_type[%d]: expected a token type in 0..6, found %.0f", g->path, (int)i, ty);
    }

    ZrTokenizer *t = calloc(1, sizeof *t);
    ZrStr *strs = malloc((size_t)nv * sizeof *strs);
    if (!t || !strs) {
        free(t);
        free(strs);
        return zr_err(err, ZR_E_NOMEM, "%s: out of memory for %d tokens", g->path, nv);
    }
    t->kind = kind;
    zr_hash_key_random(&t->hkey);
    t->n_vocab = nv;
    zr_gguf_arr_strings(tok_kv, strs);
    uint64_t pool_len = 0;
    for (int32_t i = 0; i < nv; i++) pool_len += strs[i].len ? strs[i].len : 24;
    if (pool_len > UINT32_MAX) {
        free(strs);
        zr_tokenizer_free(t);
        return zr_err(err, ZR_E_FORMAT, "%s: tokenizer.ggml.tokens: texts exceed 4 GiB", g->path);
    }
    t->pool = malloc((size_t)pool_len + 1);
    t->off = malloc((size_t)nv * sizeof *t->off);
    t->len = malloc((size_t)nv * sizeof *t->len);
    t->score = malloc((size_t)nv * sizeof *t->score);
    t->attr = malloc((size_t)nv);
    t->hash_mask = pow2_at_least(2 * (uint64_t)nv + 16) - 1;
    t->hash = malloc(((size_t)t->hash_mask + 1) * sizeof *t->hash);
    if (!t->pool || !t->off || !t->len || !t->score || !t->attr || !t->hash) {
        free(strs);
        zr_tokenizer_free(t);
        return zr_err(err, ZR_E_NOMEM, "%s: out of memory for %d tokens", g->path, nv);
    }
    for (uint32_t i = 0; i <= t->hash_mask; i++) t->hash[i].id = -1;
    size_t o = 0;
    for (int32_t i = 0; i < nv; i++) {
        t->off[i] = (uint32_t)o;
        if (strs[i].len) {
            memcpy(t->pool + o, strs[i].ptr, (size_t)strs[i].len);
            o += (size_t)strs[i].len;
        } else {
            o += (size_t)sprintf(t->pool + o, "[EMPTY_%d]", (int)i); /* as llama.cpp names it */
        }
        t->len[i] = (uint32_t)(o - t->off[i]);
        if (t->len[i] > t->max_len) t->max_len = t->len[i];
        t->score[i] = score_kv ? (float)zr_gguf_arr_num(score_kv, (uint64_t)i) : 0.0f;
        uint8_t a = ATTR_NORMAL;
        if (type_kv) {
            switch ((int)zr_gguf_arr_num(type_kv, (uint64_t)i)) {
            case 1: a = ATTR_NORMAL; break;
            case 2: a = ATTR_UNKNOWN; break;
            case 3: a = ATTR_CONTROL; break;
            case 4: a = ATTR_USER_DEFINED; break;
            case 5: a = ATTR_UNUSED; break;
            case 6: a = ATTR_BYTE; break;
            default: a = 0; break; /* undefined */
            }
        }
        t->attr[i] = a;
    }
    free(strs);
    /* every text's hash on the host's cores, then indexed here in id order */
    VocabHash vh = {t, malloc((size_t)nv * sizeof *vh.h)};
    if (!vh.h) {
        zr_tokenizer_free(t);
        return zr_err(err, ZR_E_NOMEM, "%s: out of memory for %d tokens", g->path, nv);
    }
    par_for((size_t)nv, vocab_hash, &vh);
    for (int32_t i = 0; i < nv; i++) {
        const char *s = t->pool + t->off[i];
        const uint64_t h = vh.h[i];
        uint32_t k = (uint32_t)h & t->hash_mask;
        for (; t->hash[k].id >= 0; k = (k + 1) & t->hash_mask) {
            int32_t j = t->hash[k].id;
            if (t->len[j] == t->len[i] && memcmp(t->pool + t->off[j], s, t->len[i]) == 0) {
                int len = (int)(t->len[i] > 64 ? 64 : t->len[i]);
                rc = zr_err(err, ZR_E_FORMAT, "%s: tokenizer.ggml.tokens: '%.*s' is both token %d and %d",
                            g->path, len, s, (int)j, (int)i);
                free(vh.h);
                zr_tokenizer_free(t);
                return rc;
            }
        }
        t->hash[k] = (HashSlot){i, (uint32_t)(h >> 32)};
    }
    free(vh.h);

    /* llama.cpp's defaults, then the file's values */
    t->eot = t->eom = t->sep = t->pad = -1;
    if (kind == KIND_SPM) {
        t->bos = 1;
        t->eos = 2;
        t->unk = 0;
        t->add_bos = true;
        t->add_space_prefix = true;
    } else {
        t->bos = t->eos = 11;
        t->unk = -1;
        char name[128];
        if (pre.len >= sizeof name) {
            zr_tokenizer_free(t);
            return zr_err(err, ZR_E_UNSUPPORTED,
                          "%s: tokenizer.ggml.pre: a %llu-byte name is not a known pre-tokenizer",
                          g->path, (unsigned long long)pre.len);
        }
        memcpy(name, pre.ptr, (size_t)pre.len);
        name[pre.len] = 0;
        rc = zr_pretok_create(&t->pre, name, err);
        if (rc) {
            zr_err_wrap(err, "%s", g->path);
            zr_tokenizer_free(t);
            return rc;
        }
        t->ignore_merges = zr_pretok_ignore_merges(t->pre);
        t->add_bos = zr_pretok_default_add_bos(t->pre);
    }
    if (t->bos >= nv) t->bos = -1;
    if (t->eos >= nv) t->eos = -1;
    if (t->unk >= nv) t->unk = -1;
    if ((rc = read_id(g, "tokenizer.ggml.bos_token_id", nv, true, &t->bos, err)) ||
        (rc = read_id(g, "tokenizer.ggml.eos_token_id", nv, true, &t->eos, err)) ||
        (rc = read_id(g, "tokenizer.ggml.eot_token_id", nv, true, &t->eot, err)) ||
        (rc = read_id(g, "tokenizer.ggml.eom_token_id", nv, true, &t->eom, err)) ||
        (rc = read_id(g, "tokenizer.ggml.unknown_token_id", nv, true, &t->unk, err)) ||
        (rc = read_id(g, "tokenizer.ggml.seperator_token_id", nv, false, &t->sep, err)) ||
        (rc = read_id(g, "tokenizer.ggml.padding_token_id", nv, false, &t->pad, err)) ||
        (rc = zr_gguf_get_bool_opt(g, "tokenizer.ggml.add_bos_token", &t->add_bos, err)) ||
        (rc = zr_gguf_get_bool_opt(g, "tokenizer.ggml.add_eos_token", &t->add_eos, err)) ||
        (rc = zr_gguf_get_bool_opt(g, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix, err))) {
        zr_tokenizer_free(t);
        return rc;
    }
    if (t->add_bos && t->bos < 0) {
        zr_tokenizer_free(t);
        return zr_err(err, ZR_E_FORMAT, "%s: tokenizer.ggml.add_bos_token is true, but there is no BOS token", g->path);
    }
    if (t->add_eos && t->eos < 0) {
        zr_tokenizer_free(t);
        return zr_err(err, ZR_E_FORMAT, "%s: tokenizer.ggml.add_eos_token is true, but there is no EOS token", g->path);
    }

    /* byte tokens */
    for (int b = 0; b < 256; b++) t->byte_tok[b] = -1;
    if (kind == KIND_SPM) {
        for (int b = 0; b < 256; b++) {
            char s[8];
            snprintf(s, sizeof s, "<0x%02X>", b);
            t->byte_tok[b] = find_text(t, s, 6);
            if (t->byte_tok[b] < 0) {
                char c = (char)b;
                t->byte_tok[b] = find_text(t, &c, 1);
            }
        }
        for (int32_t i = 0; i < nv; i++)
            for (uint32_t j = 1; j < t->len[i]; j++) {
                const unsigned char a = (unsigned char)t->pool[t->off[i] + j - 1], b = (unsigned char)t->pool[t->off[i] + j];
                t->joins[a][b >> 3] |= (uint8_t)(1u << (b & 7));
            }
        snprintf(t->kind_name, sizeof t->kind_name, "llama (SentencePiece)");
    } else {
        gpt2_alphabet(t);
        for (int b = 0; b < 256; b++) t->byte_tok[b] = find_text(t, t->byte_chr[b], t->byte_chr_len[b]);
        rc = load_merges(t, g, err);
        if (rc) {
            zr_tokenizer_free(t);
            return rc;
        }
        snprintf(t->kind_name, sizeof t->kind_name, "gpt2 (byte-level BPE, %.*s)",
                 pre.len ? (int)(pre.len > 48 ? 48 : pre.len) : 7, pre.len ? pre.ptr : "default");
    }

    /* end of generation: eos/eot/eom and llama.cpp's list of texts */
    if (t->eot < 0) {
        for (size_t k = 0; k < sizeof k_eot_texts / sizeof *k_eot_texts && t->eot < 0; k++)
            t->eot = find_text(t, k_eot_texts[k], strlen(k_eot_texts[k]));
        if (t->eot >= 0) t->attr[t->eot] |= ATTR_CONTROL;
    }
    if (t->eom < 0) {
        t->eom = find_text(t, "<|eom_id|>", 10);
        if (t->eom >= 0) t->attr[t->eom] |= ATTR_CONTROL;
    }
    for (size_t k = 0; k < sizeof k_eog_texts / sizeof *k_eog_texts; k++) {
        int32_t id = find_text(t, k_eog_texts[k], strlen(k_eog_texts[k]));
        if (id >= 0) t->attr[id] |= ATTR_EOG | ATTR_CONTROL;
    }
    if (t->eos >= 0) t->attr[t->eos] |= ATTR_EOG;
    if (t->eot >= 0) t->attr[t->eot] |= ATTR_EOG;
    if (t->eom >= 0) t->attr[t->eom] |= ATTR_EOG;

    /* special tokens, longest text first */
    size_t ns = 0;
    for (int32_t i = 0; i < nv; i++)
        ns += (t->attr[i] & (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN)) != 0;
    t->special = malloc((ns ? ns : 1) * sizeof *t->special);
    if (!t->special) {
        zr_tokenizer_free(t);
        return zr_err(err, ZR_E_NOMEM, "%s: out of memory", g->path);
    }
    for (int32_t i = 0; i < nv; i++)
        if (t->attr[i] & (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN)) t->special[t->n_special++] = i;
    qsort_r(t->special, t->n_special, sizeof *t->special, cmp_special, t);

    *out = t;
    return ZR_OK;
}
