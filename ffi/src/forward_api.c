/*
 * forward_api.c: the whole model on one batch, rmlp_forward (batch rows out, attention in the
 * context's space), rmlp_forward_compact (compact rows out, attention in compact space) and
 * rmlp_forward_last (each sequence's last row out, attention in the context's space): the call's
 * checks, then the context's backend (common/backend.h: cpu/forward.c, gpu/layer.cu).
 *
 * With a prefix cache (cache/kv_cache.h), the forward is the compact one over the rows the cache
 * lacks (the backend's forward_cached); a batch whose new rows do not fit the cache runs the same
 * compact forward without it.
 */
#include "common/export.h"
#include "common/status.h"
#include "context_checks.h"
#include "model_internal.h"
#include "plan_checks.h"
#include "radix_mlp.h"

/* Checks the call, then runs the forward on the context's backend, against its cache if it has one. */
static rmlp_status forward(const char *fn, rmlp_context *context, const rmlp_plan *plan, rmlp_attention_space space,
                           rmlp_attention_fn attention, void *user_data, void *out, forward_rows rows) {
    /* the layout is checked once: where compact attention needs it, and with the maps where it is
     * there (which is when AUTO resolves to compact) */
    bool compact = space == RMLP_ATTENTION_COMPACT || context->cache != NULL;
    rmlp_status status = rmlp_check_plan(fn, context, plan, RMLP_PLAN_FITS | RMLP_PLAN_MAPS | RMLP_PLAN_INPUTS |
                                                                (compact ? RMLP_PLAN_COMPACT : 0));
    if (status == RMLP_OK) status = rmlp_check_buffers(fn, (const void *[]){out}, (const char *[]){"out"}, 1);
    if (status != RMLP_OK) return status;
    space = rmlp_resolve_space(space, plan);
    const rmlp_backend *backend = context->backend;
    if (context->cache != NULL) {
        if (attention != NULL)
            return rmlp_fail(RMLP_ERR_UNSUPPORTED, fn, "the context has a prefix cache, whose forward runs the "
                             "built-in attention: pass attention=NULL, or use a context without a cache");
        bool bypassed = false;
        status = backend->forward_cached(fn, context->backend_ctx, context->backend_cache, context->cache, plan, out,
                                         rows, &bypassed);
        if (status != RMLP_OK || !bypassed) return status;
        space = RMLP_ATTENTION_COMPACT; /* the batch does not fit the cache: the same forward without it */
    }
    return backend->forward(fn, context->backend_ctx, plan, space, attention, user_data, out, rows);
}

RMLP_EXPORT rmlp_status rmlp_forward(rmlp_context *context, const rmlp_plan *plan, rmlp_attention_fn attention,
                                     void *user_data, void *out) {
    static const char fn[] = "rmlp_forward";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status
                             : rmlp_guard_leave(context, forward(fn, context, plan, context->attention_space,
                                                                 attention, user_data, out, FORWARD_BATCH_ROWS));
}

RMLP_EXPORT rmlp_status rmlp_forward_compact(rmlp_context *context, const rmlp_plan *plan,
                                             rmlp_attention_fn attention, void *user_data, void *out) {
    static const char fn[] = "rmlp_forward_compact";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status
                             : rmlp_guard_leave(context, forward(fn, context, plan, RMLP_ATTENTION_COMPACT, attention,
                                                                 user_data, out, FORWARD_COMPACT_ROWS));
}

RMLP_EXPORT rmlp_status rmlp_forward_last(rmlp_context *context, const rmlp_plan *plan, rmlp_attention_fn attention,
                                          void *user_data, void *out) {
    static const char fn[] = "rmlp_forward_last";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status
                             : rmlp_guard_leave(context, forward(fn, context, plan, context->attention_space,
                                                                 attention, user_data, out, FORWARD_LAST_ROWS));
}
