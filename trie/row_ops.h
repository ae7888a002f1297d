/*
 * row_ops.h: the per-row loops the plan is made of, written for short rows as well as long
 * ones. Fan-out batches (thousands of sequences of a few tokens) spend their time in loop
 * set-up, so on x86-64 these use SSE2 four rows at a time, with a scalar tail; elsewhere a
 * plain loop the compiler vectorises.
 */
#ifndef RMLP_TRIE_ROW_OPS_H
#define RMLP_TRIE_ROW_OPS_H

#include <stddef.h>
#include <stdint.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* dst[j] = first + j for j in [0, n). */
static inline void rows_iota(uint32_t *restrict dst, uint32_t first, size_t n) {
    size_t j = 0;
#if defined(__SSE2__)
    __m128i value = _mm_add_epi32(_mm_set1_epi32((int)first), _mm_setr_epi32(0, 1, 2, 3));
    const __m128i four = _mm_set1_epi32(4);
    for (; j + 4 <= n; j += 4) {
        _mm_storeu_si128((__m128i *)(dst + j), value);
        value = _mm_add_epi32(value, four);
    }
#endif
    for (; j < n; j++) dst[j] = first + (uint32_t)j;
}

/* Length of the common start of rows a[0..n) and b[0..n), comparing tokens and positions. */
static inline size_t rows_common(const uint32_t *a_ids, const uint32_t *a_pos, const uint32_t *b_ids,
                                 const uint32_t *b_pos, size_t n) {
    size_t k = 0;
#if defined(__SSE2__)
    for (; k + 4 <= n; k += 4) {
        __m128i same = _mm_and_si128(
            _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(a_ids + k)), _mm_loadu_si128((const __m128i *)(b_ids + k))),
            _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(a_pos + k)), _mm_loadu_si128((const __m128i *)(b_pos + k))));
        unsigned mask = (unsigned)_mm_movemask_ps(_mm_castsi128_ps(same));
        if (mask != 0xF) return k + (size_t)__builtin_ctz(~mask);
    }
#endif
    while (k < n && a_ids[k] == b_ids[k] && a_pos[k] == b_pos[k]) k++;
    return k;
}

#endif
