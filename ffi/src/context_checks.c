/*
 * context_checks.c: the shared checks of context_checks.h.
 */
#include "context_checks.h"

#include "common/guard.h"
#include "plan_maps.h"
#include "validate.h"

rmlp_status rmlp_context_enter(const char *fn, rmlp_context *context) {
    rmlp_clear_error();
    return rmlp_guard_enter(fn, context, RMLP_MAGIC_CONTEXT, "context", "rmlp_context");
}

rmlp_status rmlp_context_enter_nested(const char *fn, rmlp_context *context) {
    rmlp_clear_error();
    return rmlp_guard_enter_nested(fn, context, RMLP_MAGIC_CONTEXT, "context", "rmlp_context");
}

/* A valid plan that fits the context (its maps not yet checked against each other). */
static rmlp_status check_fits(const char *fn, const rmlp_context *context, const rmlp_plan *plan) {
    rmlp_status status = rmlp_check_plan(fn, plan);
    if (status != RMLP_OK) return status;
    if (plan->n_tokens == 0) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "the plan is empty (n_tokens=0)");
    if (plan->n_tokens > context->cap_tokens || plan->n_compact_padded > context->cap_compact)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                         "plan has %u tokens (%u compact rows) but the context was created for %zu tokens",
                         plan->n_tokens, plan->n_compact_padded, context->cap_tokens);
    return RMLP_OK;
}

rmlp_status rmlp_check_call(const char *fn, const rmlp_context *context, const rmlp_plan *plan) {
    rmlp_status status = check_fits(fn, context, plan);
    return status == RMLP_OK ? rmlp_check_plan_maps(fn, plan) : status;
}

rmlp_status rmlp_check_layer_call(const char *fn, const rmlp_context *context, const rmlp_plan *plan) {
    return context->backend->plan_on_device ? check_fits(fn, context, plan) : rmlp_check_call(fn, context, plan);
}

rmlp_status rmlp_check_layer(const char *fn, const rmlp_context *context, uint32_t layer) {
    if (layer >= context->model->config.num_hidden_layers)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "layer=%u but the model has %u layers", layer,
                         context->model->config.num_hidden_layers);
    return RMLP_OK;
}

rmlp_status rmlp_check_buffers(const char *fn, const void *const *buffers, const char *const *names, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (buffers[i] == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "%s is NULL", names[i]);
    return RMLP_OK;
}

rmlp_status rmlp_check_inputs(const char *fn, const rmlp_model_config *cfg, const rmlp_plan *plan) {
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

rmlp_status rmlp_check_host_attention(const char *fn, const rmlp_model *model, bool host_attention,
                                      const uint32_t *cu_seqlens, size_t n_seqs) {
    uint32_t longest = 0;
    for (size_t s = 0; host_attention && s < n_seqs; s++)
        longest = cu_seqlens[s + 1] - cu_seqlens[s] > longest ? cu_seqlens[s + 1] - cu_seqlens[s] : longest;
    for (uint32_t l = 0; host_attention && l < model->ext.n_layers; l++) {
        const layer_attention *la = &model->ext.layers[l];
        if (la->softcap != 0.0f)
            return rmlp_fail(RMLP_ERR_UNSUPPORTED, fn, "layer %u soft-caps its attention scores (cap %g), which "
                             "rmlp_attention_args does not tell a host's attention: pass attention=NULL for the "
                             "built-in one", l, la->softcap);
        if (la->window != 0 && longest > la->window)
            return rmlp_fail(RMLP_ERR_UNSUPPORTED, fn, "layer %u attends within a sliding window of %u keys and a "
                             "sequence has %u, which rmlp_attention_args does not tell a host's attention: pass "
                             "attention=NULL for the built-in one", l, la->window, longest);
    }
    return RMLP_OK;
}

/* qo_indptr (n_seqs + 1) over n_compact rows, each sequence owning at most its own length. */
static rmlp_status check_qo_indptr(const char *fn, const char *name, const uint32_t *qo, const uint32_t *cu_seqlens,
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

rmlp_status rmlp_check_compact_plan(const char *fn, const rmlp_plan *plan) {
    return check_qo_indptr(fn, "plan->qo_indptr", plan->qo_indptr, plan->cu_seqlens, plan->n_seqs, plan->n_compact);
}

rmlp_status rmlp_check_attention_args(const char *fn, const rmlp_context *context, const rmlp_attention_args *a,
                                      bool compact) {
    if (a == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "args is NULL");
    rmlp_status dtype = context->backend->check_attention_dtype(fn, a->dtype, context->model->dtype);
    if (dtype != RMLP_OK) return dtype;
    if (a->n_heads == 0 || a->n_kv_heads == 0 || a->head_dim == 0 || a->n_heads % a->n_kv_heads != 0)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "n_heads=%u, n_kv_heads=%u, head_dim=%u are inconsistent",
                         a->n_heads, a->n_kv_heads, a->head_dim);
    if (a->n_tokens > context->cap_tokens)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "n_tokens=%u but the context was created for %zu",
                         a->n_tokens, context->cap_tokens);
    if (a->n_tokens > 0 && (a->q == NULL || a->k == NULL || a->v == NULL || a->out == NULL))
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "args->q, k, v or out is NULL");
    const uint32_t *cu = compact ? a->kv_indptr : a->cu_seqlens;
    rmlp_status status = rmlp_check_cu_seqlens(fn, cu, a->n_seqs, a->n_tokens);
    if (status == RMLP_OK && a->layer >= context->model->ext.n_layers)
        status = rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "args->layer=%u but the model has %u layers (the built-in "
                           "attention takes the layer's sliding window and soft-cap)", a->layer,
                           context->model->ext.n_layers);
    if (status != RMLP_OK || !compact) return status;
    if (a->layout != RMLP_ATTENTION_COMPACT)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "args->layout=%d, rmlp_attention_compact takes "
                         "RMLP_ATTENTION_COMPACT (rmlp_attention takes the full layout)", a->layout);
    if (a->n_compact > a->n_tokens || (a->n_tokens > 0 && a->n_compact == 0))
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "args->n_compact=%u with n_tokens=%u", a->n_compact,
                         a->n_tokens);
    status = check_qo_indptr(fn, "args->qo_indptr", a->qo_indptr, cu, a->n_seqs, a->n_compact);
    if (status != RMLP_OK) return status;
    if (a->n_tokens > 0 && a->kv_indices == NULL)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "args->kv_indices is NULL");
    for (uint32_t i = 0; i < a->n_tokens; i++)
        if (a->kv_indices[i] >= a->n_compact)
            return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "args->kv_indices[%u]=%u is out of range (< n_compact=%u)",
                             i, a->kv_indices[i], a->n_compact);
    return RMLP_OK;
}

rmlp_attention_space rmlp_resolve_space(rmlp_attention_space space, const rmlp_plan *plan) {
    if (space == RMLP_ATTENTION_AUTO) return plan->use_radix && plan->qo_indptr != NULL ? RMLP_ATTENTION_COMPACT
                                                                                          : RMLP_ATTENTION_FULL;
    return space;
}
