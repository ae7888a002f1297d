/*
 * taken_index.h: the requests a selection has taken, indexed by position in token order (queue.h),
 * so that a request's prefix shared with the batch (its common prefix with the nearest taken
 * request on either side: the minimum lcp across the gap) costs O(log n), not a scan across the
 * queue. A Fenwick tree counts the taken positions (the nearest on each side by rank); a segment
 * tree holds the minimum of lcp over ranges. Both are rebuilt per selection, in O(n), over arrays
 * sized at creation.
 */
#ifndef RMLP_BATCH_TAKEN_INDEX_H
#define RMLP_BATCH_TAKEN_INDEX_H

#include <stdint.h>

typedef struct taken_index {
    uint32_t n;         /* positions (requests queued) */
    uint32_t top;       /* the highest power of two <= n (0 when n is 0) */
    uint32_t taken;     /* positions marked */
    uint32_t *counts;   /* (n + 1) Fenwick tree of taken positions, 1-based */
    uint32_t *lcp_min;  /* (2 n) lcp_min[n + i] = lcp[i]; lcp_min[i] = min of its two children */
} taken_index;

/* Clears the marks and indexes lcp (n); counts and lcp_min hold n + 1 and 2 n entries. */
void taken_index_reset(taken_index *t, uint32_t *counts, uint32_t *lcp_min, const uint32_t *lcp, uint32_t n);

/* Marks position pos (not marked yet) taken. */
void taken_index_mark(taken_index *t, uint32_t pos);

/* The common prefix of position pos with the nearest marked position on either side (the larger
 * of the two; 0 when none is marked). */
uint32_t taken_index_shared(const taken_index *t, uint32_t pos);

#endif
