/*
 * iota.h: the one fill loop the plan maps are made of (consecutive indices), written so the
 * compiler vectorises it.
 */
#ifndef RMLP_TRIE_IOTA_H
#define RMLP_TRIE_IOTA_H

#include <stddef.h>
#include <stdint.h>

/* dst[j] = first + j for j in [0, n). */
static inline void trie_fill_iota(uint32_t *restrict dst, uint32_t first, size_t n) {
    for (size_t j = 0; j < n; j++) dst[j] = first + (uint32_t)j;
}

#endif
