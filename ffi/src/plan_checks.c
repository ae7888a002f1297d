/*
 * plan_checks.c: the checks of a plan before a model call reads it (plan_checks.h). Why the maps'
 * check suffices: with fold_gather[j] the first row reading j and every row's compact row carrying
 * the compact row of the row before it as its parent, two rows that share a compact row share, by
 * induction on their offset, every (token, position) of their paths, so full[i] = compact[scatter[i]]
 * is exact and a cache slot keyed by (parent slot, token, position) holds what the batch computed
 * for it.
 */
#include "plan_checks.h"

#include <stdio.h>

#include "common/guard.h"
#include "common/status.h"
#include "trie/planner.h"
#include "validate.h"

/* ---- a plan at all: origin, counts, cu_seqlens, arrays, index ranges -------------------------- */

/* A plan a planner built refers to that planner's arrays: refused once they are gone or changed. */
static rmlp_status check_plan_origin(const char *fn, const rmlp_plan *plan) {
    if (plan->planner == NULL) return RMLP_OK; /* the host's own arrays */
    if (!rmlp_guard_is_live(plan->planner, RMLP_MAGIC_PLANNER))
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                         "the plan's planner was freed (or plan->planner is not a planner), and its arrays with it; "
                         "copy a plan (planner set to NULL) to keep it");
    uint64_t now = trie_planner_generation(plan->planner);
    if (now != plan->generation)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                         "the plan is stale: its planner has built or reserved since (plan generation %llu, planner at "
                         "%llu), so its arrays hold another batch; copy a plan (planner set to NULL) to keep it",
                         (unsigned long long)plan->generation, (unsigned long long)now);
    return RMLP_OK;
}

static rmlp_status check_indices(const char *fn, const char *name, const uint32_t *array, size_t n, uint32_t bound) {
    if (n > 0 && array == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "plan->%s is NULL", name);
    for (size_t i = 0; i < n; i++)
        if (array[i] >= bound)
            return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "plan->%s[%zu]=%u is out of range (< %u)", name, i,
                             array[i], bound);
    return RMLP_OK;
}

/* A plan as a host may hand one back: from a live planner that has not built since (when
 * plan->planner is set), counts consistent, cu_seqlens valid, arrays present, every index in
 * range. */
static rmlp_status check_valid(const char *fn, const rmlp_plan *plan) {
    if (plan == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "plan is NULL");
    rmlp_status origin = check_plan_origin(fn, plan);
    if (origin != RMLP_OK) return origin;
    if (plan->n_compact > plan->n_compact_padded || plan->n_compact > plan->n_tokens ||
        (plan->n_tokens > 0 && plan->n_compact == 0))
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "plan counts disagree: n_tokens=%u n_compact=%u padded=%u",
                         plan->n_tokens, plan->n_compact, plan->n_compact_padded);
    rmlp_status status = rmlp_check_cu_seqlens(fn, plan->cu_seqlens, plan->n_seqs, plan->n_tokens);
    if (status == RMLP_OK) status = check_indices(fn, "scatter", plan->scatter, plan->n_tokens, plan->n_compact);
    if (status == RMLP_OK)
        status = check_indices(fn, "fold_gather", plan->fold_gather, plan->n_compact_padded,
                               plan->n_tokens > 0 ? plan->n_tokens : 1);
    if (status == RMLP_OK && plan->n_compact_padded > 0 &&
        (plan->compact_input_ids == NULL || plan->compact_position_ids == NULL))
        status = rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "plan->compact_input_ids or compact_position_ids is NULL");
    return status;
}

/* ---- against the context and the model -------------------------------------------------------- */

static rmlp_status check_fits(const char *fn, const rmlp_context *context, const rmlp_plan *plan) {
    if (plan->n_tokens == 0) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "the plan is empty (n_tokens=0)");
    if (plan->n_tokens > context->cap_tokens || plan->n_compact_padded > context->cap_compact)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                         "plan has %u tokens (%u compact rows) but the context was created for %zu tokens",
                         plan->n_tokens, plan->n_compact_padded, context->cap_tokens);
    return RMLP_OK;
}

static rmlp_status check_inputs(const char *fn, const rmlp_model_config *cfg, const rmlp_plan *plan) {
    for (uint32_t j = 0; j < plan->n_compact_padded; j++) {
        if (plan->compact_input_ids[j] >= cfg->vocab_size)
            return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "input_ids[%u]=%u >= vocab_size=%u",
                             plan->fold_gather[j], plan->compact_input_ids[j], cfg->vocab_size);
        if (plan->compact_position_ids[j] >= cfg->max_position_embeddings)
            return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "position_ids[%u]=%u >= max_position_embeddings=%u",
                             plan->fold_gather[j], plan->compact_position_ids[j], cfg->max_position_embeddings);
    }
    return RMLP_OK;
}

/* ---- the compact-attention layout --------------------------------------------------------------- */

rmlp_status rmlp_check_qo_indptr(const char *fn, const char *name, const uint32_t *qo, const uint32_t *cu_seqlens,
                                 size_t n_seqs, size_t n_compact) {
    if (qo == NULL)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "%s is NULL: attention in compact space needs the plan's "
                         "layout (a plan from rmlp_plan_build has it; a plan filled in by hand does not)", name);
    if (qo[0] != 0) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "%s[0]=%u, must be 0", name, qo[0]);
    for (size_t s = 0; s < n_seqs; s++)
        if (qo[s + 1] < qo[s] || qo[s + 1] - qo[s] > cu_seqlens[s + 1] - cu_seqlens[s])
            return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                             "%s[%zu]=%u, %s[%zu]=%u: sequence %zu of %u rows cannot own that many compact rows", name,
                             s, qo[s], name, s + 1, qo[s + 1], s, cu_seqlens[s + 1] - cu_seqlens[s]);
    if (qo[n_seqs] != n_compact)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "%s[%zu]=%u, must equal n_compact=%zu", name, n_seqs,
                         qo[n_seqs], n_compact);
    return RMLP_OK;
}

/* ---- the maps against each other ----------------------------------------------------------------- */

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

/* The maps, on a plan whose layout (when it has one) passed rmlp_check_qo_indptr. */
static rmlp_status check_maps(const char *fn, const rmlp_plan *p) {
    if (p->n_compact > 0 && p->compact_parent == NULL)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "plan->compact_parent is NULL but n_compact=%u", p->n_compact);
    bool owned = p->qo_indptr != NULL;
    rmlp_status status = RMLP_OK;
    if (!gather_ok(p)) status = check_gather(fn, p);
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

rmlp_status rmlp_check_plan(const char *fn, const rmlp_context *context, const rmlp_plan *plan, unsigned checks) {
    if ((checks & RMLP_PLAN_MAPS_ON_HOST) && !context->backend->plan_on_device) checks |= RMLP_PLAN_MAPS;
    rmlp_status status = check_valid(fn, plan);
    if (status == RMLP_OK && (checks & RMLP_PLAN_FITS)) status = check_fits(fn, context, plan);
    /* the layout once: where the call needs it, or where the maps' check reads it; a plan without
     * one that a compact call needs is refused after its maps, whose fault says more */
    bool layout = (checks & RMLP_PLAN_COMPACT) || (checks & RMLP_PLAN_MAPS);
    if (status == RMLP_OK && layout && plan->qo_indptr != NULL)
        status = rmlp_check_qo_indptr(fn, "plan->qo_indptr", plan->qo_indptr, plan->cu_seqlens, plan->n_seqs,
                                      plan->n_compact);
    if (status == RMLP_OK && (checks & RMLP_PLAN_MAPS)) status = check_maps(fn, plan);
    if (status == RMLP_OK && (checks & RMLP_PLAN_COMPACT) && plan->qo_indptr == NULL)
        status = rmlp_check_qo_indptr(fn, "plan->qo_indptr", NULL, plan->cu_seqlens, plan->n_seqs, plan->n_compact);
    if (status == RMLP_OK && (checks & RMLP_PLAN_NONEMPTY))
        status = rmlp_check_nonempty_seqs(fn, plan->cu_seqlens, plan->n_seqs);
    if (status == RMLP_OK && (checks & RMLP_PLAN_INPUTS)) status = check_inputs(fn, &context->model->config, plan);
    return status;
}
