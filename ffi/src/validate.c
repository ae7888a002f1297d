/*
 * validate.c: the shared argument checks of validate.h.
 */
#include "validate.h"

rmlp_status rmlp_check_cu_seqlens(const char *fn, const uint32_t *cu_seqlens, size_t n_seqs, size_t n_tokens) {
    if (n_seqs == 0)
        return rmlp_fail(RMLP_ERR_INVALID_SEQLENS, fn,
                         "n_seqs is 0: a batch has at least one sequence (an empty batch is cu_seqlens=[0, 0])");
    if (cu_seqlens == NULL)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "cu_seqlens is NULL but n_seqs=%zu", n_seqs);
    if (cu_seqlens[0] != 0)
        return rmlp_fail(RMLP_ERR_INVALID_SEQLENS, fn, "cu_seqlens[0]=%u, must be 0", cu_seqlens[0]);
    for (size_t s = 1; s <= n_seqs; s++)
        if (cu_seqlens[s] < cu_seqlens[s - 1])
            return rmlp_fail(RMLP_ERR_INVALID_SEQLENS, fn, "cu_seqlens[%zu]=%u < cu_seqlens[%zu]=%u", s,
                             cu_seqlens[s], s - 1, cu_seqlens[s - 1]);
    if (cu_seqlens[n_seqs] != n_tokens)
        return rmlp_fail(RMLP_ERR_INVALID_SEQLENS, fn, "cu_seqlens[%zu]=%u, must equal n_tokens=%zu", n_seqs,
                         cu_seqlens[n_seqs], n_tokens);
    return RMLP_OK;
}

rmlp_status rmlp_check_nonempty_seqs(const char *fn, const uint32_t *cu_seqlens, size_t n_seqs) {
    for (size_t s = 0; s < n_seqs; s++)
        if (cu_seqlens[s] == cu_seqlens[s + 1])
            return rmlp_fail(RMLP_ERR_INVALID_SEQLENS, fn, "sequence %zu is empty (cu_seqlens[%zu]=cu_seqlens[%zu]=%u)",
                             s, s, s + 1, cu_seqlens[s]);
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

rmlp_status rmlp_check_plan(const char *fn, const rmlp_plan *plan) {
    if (plan == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "plan is NULL");
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
