/*
 * context_checks.c: the shared checks of context_checks.h.
 */
#include "context_checks.h"

#include "common/guard.h"
#include "plan_checks.h"
#include "validate.h"

rmlp_status rmlp_context_enter(const char *fn, rmlp_context *context) {
    rmlp_clear_error();
    return rmlp_guard_enter(fn, context, RMLP_MAGIC_CONTEXT, "context", "rmlp_context");
}

rmlp_status rmlp_context_enter_nested(const char *fn, rmlp_context *context) {
    rmlp_clear_error();
    return rmlp_guard_enter_nested(fn, context, RMLP_MAGIC_CONTEXT, "context", "rmlp_context");
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

/* The built-in attention runs layer a->layer as the model does: args that say otherwise are refused,
 * naming the field (a->scale is used as given, as before 0.3). */
static rmlp_status check_layer_values(const char *fn, const layer_attention *la, const rmlp_attention_args *a) {
    if (a->sliding_window != la->window)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "args->sliding_window=%u but layer %u attends within %u keys "
                         "(0: no window): set the layer's, from rmlp_model_layer_attention", a->sliding_window,
                         a->layer, la->window);
    if (!(a->softcap == la->softcap)) /* NaN too */
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "args->softcap=%g but layer %u soft-caps its scores at %g "
                         "(0: none): set the layer's, from rmlp_model_layer_attention", (double)a->softcap, a->layer,
                         (double)la->softcap);
    return RMLP_OK;
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
    if (!compact && a->layout != RMLP_ATTENTION_FULL) /* compact args read as full ones: a wrong result */
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "args->layout=%d, rmlp_attention takes RMLP_ATTENTION_FULL "
                         "(a compact-layout callback calls rmlp_attention_compact)", a->layout);
    const uint32_t *cu = compact ? a->kv_indptr : a->cu_seqlens;
    rmlp_status status = rmlp_check_cu_seqlens(fn, cu, a->n_seqs, a->n_tokens);
    if (status == RMLP_OK && a->layer >= context->model->ext.n_layers)
        status = rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "args->layer=%u but the model has %u layers (the built-in "
                           "attention takes the layer's sliding window and soft-cap)", a->layer,
                           context->model->ext.n_layers);
    if (status == RMLP_OK) status = check_layer_values(fn, &context->model->ext.layers[a->layer], a);
    if (status != RMLP_OK || !compact) return status;
    if (a->layout != RMLP_ATTENTION_COMPACT)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "args->layout=%d, rmlp_attention_compact takes "
                         "RMLP_ATTENTION_COMPACT (rmlp_attention takes the full layout)", a->layout);
    if (a->n_compact > a->n_tokens || (a->n_tokens > 0 && a->n_compact == 0))
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "args->n_compact=%u with n_tokens=%u", a->n_compact,
                         a->n_tokens);
    status = rmlp_check_qo_indptr(fn, "args->qo_indptr", a->qo_indptr, cu, a->n_seqs, a->n_compact);
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
