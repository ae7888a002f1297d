/*
 * plan_maps.c: the consistency check of a plan's maps (plan_maps.h). Why it suffices: with
 * fold_gather[j] the first row reading j and every row's compact row carrying the compact row of
 * the row before it as its parent, two rows that share a compact row share, by induction on their
 * offset, every (token, position) of their paths, so full[i] = compact[scatter[i]] is exact and a
 * cache slot keyed by (parent slot, token, position) holds what the batch computed for it.
 */
#include "plan_checks.h"

#include <stdio.h>

#include "context_checks.h"
#include "common/status.h"

static const char forged[] = "the plan's maps disagree (a plan built or edited by the host?)";

/* fold_gather over the compact rows: increasing, each gathered from a row that reads it. */
static rmlp_status check_gather(const char *fn, const rmlp_plan *p) {
    for (uint32_t j = 0; j < p->n_compact; j++) {
        uint32_t g = p->fold_gather[j];
        if (j > 0 && g <= p->fold_gather[j - 1])
            return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                             "plan->fold_gather[%u]=%u is not after fold_gather[%u]=%u (compact rows go in the order "
                             "of their first rows): %s", j, g, j - 1, p->fold_gather[j - 1], forged);
        if (p->scatter[g] != j)
            return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                             "plan->fold_gather[%u]=%u but plan->scatter[%u]=%u: compact row %u is gathered from a "
                             "row that does not read it: %s", j, g, g, p->scatter[g], j, forged);
    }
    return RMLP_OK;
}

/* Row i (offset t of sequence s) reads compact row j: its first occurrence, with the right parent. */
static rmlp_status check_row(const char *fn, const rmlp_plan *p, uint32_t s, uint32_t i, uint32_t t) {
    uint32_t j = p->scatter[i], parent = p->compact_parent[j];
    uint32_t want = t == 0 ? RMLP_NO_PARENT : p->scatter[i - 1];
    if (p->fold_gather[j] > i)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                         "plan->scatter[%u]=%u reads compact row %u, which is gathered from the later row "
                         "fold_gather[%u]=%u (not causal: a row reads its path's first occurrence): %s", i, j, j, j,
                         p->fold_gather[j], forged);
    if (parent == want) return RMLP_OK;
    if (parent != RMLP_NO_PARENT && parent >= p->n_compact)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "plan->compact_parent[%u]=%u is out of range (< n_compact=%u)",
                         j, parent, p->n_compact);
    if (parent != RMLP_NO_PARENT && parent >= j)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                         "plan->compact_parent[%u]=%u points forward (a compact row's parent comes before it): %s", j,
                         parent, forged);
    if (want == RMLP_NO_PARENT)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                         "plan->compact_parent[%u]=%u, but compact row %u starts sequence %u (row %u), so its parent "
                         "is RMLP_NO_PARENT: %s", j, parent, j, s, i, forged);
    char got[16] = "RMLP_NO_PARENT";
    if (parent != RMLP_NO_PARENT) snprintf(got, sizeof got, "%u", parent);
    return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                     "plan->compact_parent[%u]=%s, but row %u (sequence %u, offset %u) reads compact row %u after row "
                     "%u's compact row %u: %s", j, got, i, s, t, j, i - 1, want, forged);
}

/* Row i at offset t of sequence s (of len rows) against the compact rows s owns (qo_indptr). */
static rmlp_status check_owned(const char *fn, const rmlp_plan *p, uint32_t s, uint32_t i, uint32_t t, uint32_t len) {
    const uint32_t *qo = p->qo_indptr;
    uint32_t before = len - (qo[s + 1] - qo[s]), j = p->scatter[i];
    if (t < before ? j < qo[s] : j == qo[s] + (t - before)) return RMLP_OK;
    if (t < before)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                         "plan->scatter[%u]=%u, but row %u (sequence %u, offset %u) comes before the last %u rows, "
                         "the ones that own compact rows qo_indptr[%u]=%u.., so it reads an earlier sequence's row: %s",
                         i, j, i, s, t, len - before, s, qo[s], forged);
    return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                     "plan->scatter[%u]=%u, but qo_indptr gives sequence %u (rows %u..%u) compact rows %u..%u, which "
                     "its last %u rows read in order: row %u reads %u: %s", i, j, s, p->cu_seqlens[s],
                     p->cu_seqlens[s + 1], qo[s], qo[s + 1], len - before, i, qo[s] + (t - before), forged);
}

/* The path runs: each sequence's start at its first row, increasing, consecutive compact rows in
 * each, maximal. */
static rmlp_status check_runs(const char *fn, const rmlp_plan *p) {
    const uint32_t *ri = p->run_indptr, *rs = p->run_start, *cu = p->cu_seqlens, *sc = p->scatter;
    if (p->n_runs > 0 && rs == NULL)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "plan->run_start is NULL but n_runs=%u", p->n_runs);
    if (ri[0] != 0 || ri[p->n_seqs] != p->n_runs)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "plan->run_indptr[0]=%u, run_indptr[%u]=%u: must be 0 and "
                         "n_runs=%u", ri[0], p->n_seqs, ri[p->n_seqs], p->n_runs);
    for (uint32_t s = 0; s < p->n_seqs; s++) {
        bool empty = cu[s + 1] == cu[s];
        if (ri[s + 1] < ri[s] || ri[s + 1] > p->n_runs || (empty ? ri[s + 1] != ri[s] : ri[s + 1] == ri[s]))
            return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                             "plan->run_indptr[%u]=%u, run_indptr[%u]=%u: sequence %u of %u rows has %s runs", s,
                             ri[s], s + 1, ri[s + 1], s, cu[s + 1] - cu[s], empty ? "no" : "one or more");
        for (uint32_t r = ri[s]; r < ri[s + 1]; r++) {
            uint32_t end = r + 1 < ri[s + 1] ? rs[r + 1] : cu[s + 1];
            if ((r == ri[s] && rs[r] != cu[s]) || end <= rs[r] || end > cu[s + 1])
                return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                                 "plan->run_start[%u]=%u: run %u of sequence %u (rows %u..%u) must start at its first "
                                 "row or after the run before it, and end by the next one", r, rs[r], r, s, cu[s],
                                 cu[s + 1]);
            uint32_t broken = 0; /* the common case first: no branch per row */
            for (uint32_t i = rs[r] + 1; i < end; i++) broken |= sc[i] != sc[i - 1] + 1;
            for (uint32_t i = rs[r] + 1; broken && i < end; i++)
                if (sc[i] != sc[i - 1] + 1)
                    return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                                     "plan->scatter[%u]=%u, but run %u (rows %u..%u) reads consecutive compact rows, "
                                     "so %u: %s", i, sc[i], r, rs[r], end, sc[i - 1] + 1, forged);
            if (r > ri[s] && sc[rs[r]] == sc[rs[r] - 1] + 1)
                return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                                 "plan->run_start[%u]=%u: run %u goes on with run %u's compact rows (runs are maximal)",
                                 r, rs[r], r, r - 1);
        }
    }
    return RMLP_OK;
}

/* Whether fold_gather passes check_gather: the fast path, branch-free, no message. */
static bool gather_ok(const rmlp_plan *p) {
    const uint32_t *fg = p->fold_gather, *sc = p->scatter;
    uint32_t bad = p->n_compact > 0 && sc[fg[0]] != 0;
    for (uint32_t j = 1; j < p->n_compact; j++) bad |= (fg[j] <= fg[j - 1]) | (sc[fg[j]] != j);
    return !bad;
}

/* Whether every row of sequence s passes check_row and check_owned: the fast path. */
static bool sequence_ok(const rmlp_plan *p, uint32_t s) {
    const uint32_t *sc = p->scatter, *fg = p->fold_gather, *parent = p->compact_parent;
    uint32_t start = p->cu_seqlens[s], end = p->cu_seqlens[s + 1], prev = RMLP_NO_PARENT, bad = 0;
    for (uint32_t i = start; i < end; prev = sc[i++]) bad |= (fg[sc[i]] > i) | (parent[sc[i]] != prev);
    if (p->qo_indptr != NULL) {
        uint32_t first = p->qo_indptr[s], owned_from = end - (p->qo_indptr[s + 1] - first);
        for (uint32_t i = start; i < owned_from; i++) bad |= sc[i] >= first;
        for (uint32_t i = owned_from; i < end; i++) bad |= sc[i] != first + (i - owned_from);
    }
    return !bad;
}

rmlp_status rmlp_check_plan_maps(const char *fn, const rmlp_plan *p) {
    if (p->n_compact > 0 && p->compact_parent == NULL)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "plan->compact_parent is NULL but n_compact=%u", p->n_compact);
    bool owned = p->qo_indptr != NULL;
    rmlp_status status = owned ? rmlp_check_compact_plan(fn, p) : RMLP_OK;
    if (status == RMLP_OK && !gather_ok(p)) status = check_gather(fn, p);
    /* a sequence the fast path flags is gone through again row by row, for the message */
    for (uint32_t s = 0; s < p->n_seqs && status == RMLP_OK; s++) {
        if (sequence_ok(p, s)) continue;
        uint32_t start = p->cu_seqlens[s], len = p->cu_seqlens[s + 1] - start;
        for (uint32_t t = 0; t < len && status == RMLP_OK; t++) {
            status = check_row(fn, p, s, start + t, t);
            if (status == RMLP_OK && owned) status = check_owned(fn, p, s, start + t, t, len);
        }
    }
    if (status == RMLP_OK && p->run_indptr != NULL) status = check_runs(fn, p);
    return status;
}
