/* Keyed hashing for the tables that index names and texts taken from a file: GGUF keys and
 * tensor names, vocabulary texts, merges. With an unkeyed hash a file can choose names that
 * all land in one slot, and every insert then scans the whole table (hash flooding: 240k such
 * names took a minute to parse). Each table draws its own key from the kernel, so which names
 * collide cannot be known when the file is written. The function is SipHash-1-3 (Aumasson and
 * Bernstein), as in Rust's and Python's hash tables. */
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct ZrHashKey {
    uint64_t k0, k1;
} ZrHashKey;

/* A fresh random key (getrandom; should that fail, the clock and addresses, which still
 * cannot be predicted by whoever wrote the file). */
void zr_hash_key_random(ZrHashKey *k);
uint64_t zr_hash_bytes(const ZrHashKey *k, const void *p, size_t n);
/* The hash of one 64-bit value (as its 8 little-endian bytes). */
uint64_t zr_hash_u64(const ZrHashKey *k, uint64_t v);
