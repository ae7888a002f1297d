/*
 * row_ops.h: the per-row loops the plan is made of, written for short rows as well as long
 * ones. Fan-out batches (thousands of sequences of a few tokens) spend their time in loop
 * set-up, so on x86-64 these use SSE2 four rows at a time; elsewhere a plain loop the compiler
 * vectorises.
 *
 * The _over variants take n >= 1 and work in whole groups of ROWS_GROUP rows, with no scalar
 * tail: they store and read up to ROWS_GROUP - 1 rows past n, to the next multiple of
 * ROWS_GROUP (call that span). The planner's arrays keep ROWS_GROUP spare rows, and the rows
 * stored past n are rows the build writes again later or leaves outside the plan; the caller
 * makes sure the rows read past n are inside the batch.
 */
#ifndef RMLP_TRIE_ROW_OPS_H
#define RMLP_TRIE_ROW_OPS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define ROWS_GROUP 4

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

/* dst[j] = first + j for j in [0, n), and any values in [n, span). */
static inline void rows_iota_over(uint32_t *restrict dst, uint32_t first, size_t n) {
#if defined(__SSE2__)
    __m128i value = _mm_add_epi32(_mm_set1_epi32((int)first), _mm_setr_epi32(0, 1, 2, 3));
    const __m128i four = _mm_set1_epi32(4);
    size_t j = 0;
    do {
        _mm_storeu_si128((__m128i *)(dst + j), value);
        value = _mm_add_epi32(value, four);
    } while ((j += 4) < n);
#else
    rows_iota(dst, first, n);
#endif
}

/* Rows [row, row + n) of the batch entering compact rows [first, first + n): fold_gather[j] =
 * row + j, scatter[j] = first + j (scatter from the batch row), compact ids and positions copied,
 * parent[j] = first + j - 1; any values in [n, span). In one pass, for short runs. */
static inline void rows_enter_over(uint32_t *restrict fold_gather, uint32_t *restrict scatter,
                                   uint32_t *restrict compact_ids, uint32_t *restrict compact_pos,
                                   uint32_t *restrict compact_parent, const uint32_t *restrict ids,
                                   const uint32_t *restrict pos, uint32_t row, uint32_t first, size_t n) {
#if defined(__SSE2__)
    const __m128i ramp = _mm_setr_epi32(0, 1, 2, 3), four = _mm_set1_epi32(4);
    __m128i rows = _mm_add_epi32(_mm_set1_epi32((int)row), ramp);
    __m128i compact = _mm_add_epi32(_mm_set1_epi32((int)first), ramp);
    __m128i parent = _mm_sub_epi32(compact, _mm_set1_epi32(1));
    size_t j = 0;
    do {
        _mm_storeu_si128((__m128i *)(fold_gather + j), rows);
        _mm_storeu_si128((__m128i *)(scatter + j), compact);
        _mm_storeu_si128((__m128i *)(compact_parent + j), parent);
        _mm_storeu_si128((__m128i *)(compact_ids + j), _mm_loadu_si128((const __m128i *)(ids + j)));
        _mm_storeu_si128((__m128i *)(compact_pos + j), _mm_loadu_si128((const __m128i *)(pos + j)));
        rows = _mm_add_epi32(rows, four);
        compact = _mm_add_epi32(compact, four);
        parent = _mm_add_epi32(parent, four);
    } while ((j += 4) < n);
#else
    rows_iota(fold_gather, row, n);
    rows_iota(scatter, first, n);
    memcpy(compact_ids, ids, n * sizeof(uint32_t));
    memcpy(compact_pos, pos, n * sizeof(uint32_t));
    rows_iota(compact_parent, first - 1, n);
#endif
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

/* rows_common, reading both sides to span. */
static inline size_t rows_common_over(const uint32_t *a_ids, const uint32_t *a_pos, const uint32_t *b_ids,
                                      const uint32_t *b_pos, size_t n) {
#if defined(__SSE2__)
    size_t k = 0;
    do {
        __m128i same = _mm_and_si128(
            _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(a_ids + k)), _mm_loadu_si128((const __m128i *)(b_ids + k))),
            _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(a_pos + k)), _mm_loadu_si128((const __m128i *)(b_pos + k))));
        unsigned differ = ~(unsigned)_mm_movemask_ps(_mm_castsi128_ps(same)) & 0xF;
        if (differ != 0) {
            size_t common = k + (size_t)__builtin_ctz(differ);
            return common < n ? common : n;
        }
    } while ((k += 4) < n);
    return n;
#else
    return rows_common(a_ids, a_pos, b_ids, b_pos, n);
#endif
}

#endif
