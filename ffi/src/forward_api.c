/*
 * forward_api.c: the whole model on one batch, rmlp_forward (batch rows out, attention in the
 * context's space) and rmlp_forward_compact (compact rows out, attention in compact space): the
 * call's checks, then the context's backend (common/backend.h: cpu/forward.c, gpu/layer.cu).
 *
 * With a prefix cache (cache/kv_cache.h), the forward is the compact one over the rows the cache
 * lacks (the backend's forward_cached); a batch whose new rows do not fit the cache runs the same
 * compact forward without it.
 */
#include "common/export.h"
#include "common/status.h"
#include "context_checks.h"
#include "model_internal.h"

/* Checks the call, then runs the forward on the context's backend, against its cache if it has one. */
static rmlp_status forward(const char *fn, rmlp_context *context, const rmlp_plan *plan, rmlp_attention_space space,
                           rmlp_attention_fn attention, void *user_data, void *out, bool compact_out) {
    rmlp_status status = rmlp_check_call(fn, context, plan);
    if (status == RMLP_OK) status = rmlp_check_buffers(fn, (const void *[]){out}, (const char *[]){"out"}, 1);
    if (status == RMLP_OK) status = rmlp_check_inputs(fn, &context->model->config, plan);
    if (status == RMLP_OK && context->cache == NULL) /* (with a cache a host's attention is refused below) */
        status = rmlp_check_host_attention(fn, context->model, attention != NULL, plan->cu_seqlens, plan->n_seqs);
    space = rmlp_resolve_space(space, plan);
    if (status == RMLP_OK && space == RMLP_ATTENTION_COMPACT) status = rmlp_check_compact_plan(fn, plan);
    if (status != RMLP_OK) return status;
    const rmlp_backend *backend = context->backend;
    if (context->cache != NULL) {
        if (attention != NULL)
            return rmlp_fail(RMLP_ERR_UNSUPPORTED, fn, "the context has a prefix cache, whose forward runs the "
                             "built-in attention: pass attention=NULL, or use a context without a cache");
        status = rmlp_check_compact_plan(fn, plan);
        if (status != RMLP_OK) return status;
        bool bypassed = false;
        status = backend->forward_cached(fn, context->backend_ctx, context->backend_cache, context->cache, plan, out,
                                         compact_out, &bypassed);
        if (status != RMLP_OK || !bypassed) return status;
        space = RMLP_ATTENTION_COMPACT; /* the batch does not fit the cache: the same forward without it */
    }
    return backend->forward(fn, context->backend_ctx, plan, space, attention, user_data, out, compact_out);
}

RMLP_EXPORT rmlp_status rmlp_forward(rmlp_context *context, const rmlp_plan *plan, rmlp_attention_fn attention,
                                     void *user_data, void *out) {
    static const char fn[] = "rmlp_forward";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status
                             : rmlp_guard_leave(context, forward(fn, context, plan, context->attention_space,
                                                                 attention, user_data, out, false));
}

RMLP_EXPORT rmlp_status rmlp_forward_compact(rmlp_context *context, const rmlp_plan *plan,
                                             rmlp_attention_fn attention, void *user_data, void *out) {
    static const char fn[] = "rmlp_forward_compact";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status
                             : rmlp_guard_leave(context, forward(fn, context, plan, RMLP_ATTENTION_COMPACT, attention,
                                                                 user_data, out, true));
}
