/*
 * taken_index.c: nearest taken requests and common prefixes in token order (taken_index.h).
 */
#include "taken_index.h"

#include <string.h>

void taken_index_reset(taken_index *t, uint32_t *counts, uint32_t *lcp_min, const uint32_t *lcp, uint32_t n) {
    t->n = n, t->taken = 0, t->counts = counts, t->lcp_min = lcp_min;
    for (t->top = n ? 1 : 0; t->top && t->top <= n / 2; t->top <<= 1) {}
    memset(counts, 0, ((size_t)n + 1) * sizeof *counts);
    if (n > 0) memcpy(lcp_min + n, lcp, (size_t)n * sizeof *lcp);
    for (uint32_t i = n; i-- > 1;) {
        uint32_t a = lcp_min[2 * i], b = lcp_min[2 * i + 1];
        lcp_min[i] = a < b ? a : b;
    }
}

void taken_index_mark(taken_index *t, uint32_t pos) {
    for (uint32_t i = pos + 1; i <= t->n; i += i & (0u - i)) t->counts[i]++;
    t->taken++;
}

/* Marked positions among 0 .. end-1. */
static uint32_t rank(const taken_index *t, uint32_t end) {
    uint32_t sum = 0;
    for (uint32_t i = end; i > 0; i -= i & (0u - i)) sum += t->counts[i];
    return sum;
}

/* The position of the k-th marked position (1 <= k <= taken). */
static uint32_t select_kth(const taken_index *t, uint32_t k) {
    uint32_t at = 0;
    for (uint32_t step = t->top; step > 0; step >>= 1)
        if (at + step <= t->n && t->counts[at + step] < k) at += step, k -= t->counts[at];
    return at; /* 1-based at + 1, so 0-based at */
}

/* The minimum of lcp[lo .. hi) (lo < hi). */
static uint32_t range_min(const taken_index *t, uint32_t lo, uint32_t hi) {
    uint32_t best = UINT32_MAX;
    for (lo += t->n, hi += t->n; lo < hi; lo >>= 1, hi >>= 1) {
        if (lo & 1) best = t->lcp_min[lo] < best ? t->lcp_min[lo] : best, lo++;
        if (hi & 1) --hi, best = t->lcp_min[hi] < best ? t->lcp_min[hi] : best;
    }
    return best;
}

uint32_t taken_index_shared(const taken_index *t, uint32_t pos) {
    uint32_t best = 0, before = rank(t, pos), through = rank(t, pos + 1);
    if (before > 0) { /* lcp[i] joins i-1 and i: the gap from the left one to pos is lcp[left+1 .. pos] */
        uint32_t common = range_min(t, select_kth(t, before) + 1, pos + 1);
        if (common > best) best = common;
    }
    if (through < t->taken) {
        uint32_t common = range_min(t, pos + 1, select_kth(t, through + 1) + 1);
        if (common > best) best = common;
    }
    return best;
}
