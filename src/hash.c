/* SipHash-1-3: one compression round per 8-byte word, three finalization rounds. */
#include "hash.h"

#include <string.h>
#include <sys/random.h>
#include <time.h>

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

typedef struct Sip {
    uint64_t v0, v1, v2, v3;
} Sip;

static inline void sip_round(Sip *s) {
    s->v0 += s->v1; s->v1 = ROTL(s->v1, 13); s->v1 ^= s->v0; s->v0 = ROTL(s->v0, 32);
    s->v2 += s->v3; s->v3 = ROTL(s->v3, 16); s->v3 ^= s->v2;
    s->v0 += s->v3; s->v3 = ROTL(s->v3, 21); s->v3 ^= s->v0;
    s->v2 += s->v1; s->v1 = ROTL(s->v1, 17); s->v1 ^= s->v2; s->v2 = ROTL(s->v2, 32);
}

static inline void sip_word(Sip *s, uint64_t m) {
    s->v3 ^= m;
    sip_round(s);
    s->v0 ^= m;
}

static inline Sip sip_init(const ZrHashKey *k) {
    return (Sip){k->k0 ^ 0x736f6d6570736575ull, k->k1 ^ 0x646f72616e646f6dull, k->k0 ^ 0x6c7967656e657261ull,
                 k->k1 ^ 0x7465646279746573ull};
}

static inline uint64_t sip_final(Sip *s) {
    s->v2 ^= 0xff;
    sip_round(s);
    sip_round(s);
    sip_round(s);
    return s->v0 ^ s->v1 ^ s->v2 ^ s->v3;
}

uint64_t zr_hash_bytes(const ZrHashKey *k, const void *p, size_t n) {
    const unsigned char *b = p;
    Sip s = sip_init(k);
    const uint64_t last = (uint64_t)n << 56;
    for (; n >= 8; n -= 8, b += 8) {
        uint64_t m;
        memcpy(&m, b, 8);
        sip_word(&s, m);
    }
    uint64_t m = 0;
    if (n) memcpy(&m, b, n); /* little-endian host (gguf.c checks) */
    sip_word(&s, m | last);
    return sip_final(&s);
}

uint64_t zr_hash_u64(const ZrHashKey *k, uint64_t v) {
    Sip s = sip_init(k);
    sip_word(&s, v);
    sip_word(&s, (uint64_t)8 << 56);
    return sip_final(&s);
}

void zr_hash_key_random(ZrHashKey *k) {
    uint64_t buf[2];
    if (getrandom(buf, sizeof buf, GRND_NONBLOCK) == (ssize_t)sizeof buf) {
        k->k0 = buf[0];
        k->k1 = buf[1];
        return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const ZrHashKey mix = {0x9E3779B97F4A7C15ull, (uint64_t)(uintptr_t)k};
    k->k0 = zr_hash_u64(&mix, (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30));
    k->k1 = zr_hash_u64(&mix, k->k0 ^ (uint64_t)(uintptr_t)&ts);
}
