/*
 * naive_plan.h: a deliberately simple O(N^2 L) reference for the RadixMLP maps, written from
 * the definition and sharing no code or idea with the library's radix tree, so the property
 * tests can compare the library's maps with it element by element.
 */
#ifndef RMLP_NAIVE_PLAN_H
#define RMLP_NAIVE_PLAN_H

#include <stddef.h>
#include <stdint.h>

/* The maps of the radix plan (no gate, no padding). Arrays are owned; free with naive_plan_free. */
typedef struct naive_plan {
    size_t n_tokens, n_compact;
    uint32_t *fold_gather;    /* (n_compact) first row of each distinct path, increasing */
    uint32_t *scatter;        /* (n_tokens) index in fold_gather of the row's first occurrence */
    uint32_t *compact_ids;    /* (n_compact) */
    uint32_t *compact_pos;    /* (n_compact) */
    uint32_t *compact_parent; /* (n_compact) RMLP_NO_PARENT at sequence starts */
} naive_plan;

/* Builds the reference maps of a valid batch. Returns 0, or -1 when out of memory. */
int naive_plan_build(const uint32_t *input_ids, const uint32_t *position_ids, size_t n_tokens,
                     const uint32_t *cu_seqlens, size_t n_seqs, naive_plan *out);

void naive_plan_free(naive_plan *plan);

#endif
