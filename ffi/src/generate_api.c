/*
 * generate_api.c: the exported generation entry points (rmlp_generate_*): the context's guard,
 * the checks of the context and the plan, then the session of generate/session.h on the context's
 * backend. A session needs the context's prefix cache (its rows live there) and an LM head.
 */
#include <string.h>

#include "common/export.h"
#include "common/status.h"
#include "context_checks.h"
#include "generate/session.h"
#include "model_internal.h"
#include "validate.h"

/* The checks of calls that need a session, and of begin that need none. */
static rmlp_status check_context(const char *fn, const rmlp_context *context) {
    if (context->cache == NULL)
        return rmlp_fail(RMLP_ERR_UNSUPPORTED, fn, "generation keeps its rows in the prefix cache: create the "
                         "context with rmlp_context_params.cache_bytes > 0");
    if (!context->model->config.has_lm_head)
        return rmlp_fail(RMLP_ERR_UNSUPPORTED, fn, "the model has no LM head (no lm_head.weight, embeddings not "
                         "tied): it cannot generate");
    return RMLP_OK;
}

static rmlp_status need_session(const char *fn, const rmlp_context *context) {
    return context->gen != NULL ? RMLP_OK
                                : rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "no generation session on this context "
                                            "(rmlp_generate_begin first, or it was ended)");
}

RMLP_EXPORT rmlp_generate_params rmlp_generate_default_params(void) {
    rmlp_generate_params params;
    memset(&params, 0, sizeof params);
    params.struct_size = (uint32_t)sizeof(rmlp_generate_params);
    params.max_new_tokens = 256;
    params.shared_prefix_attention = true;
    return params;
}

static rmlp_status generate_begin(const char *fn, rmlp_context *context, const rmlp_plan *plan,
                                  const rmlp_generate_params *caller, float *logits) {
    rmlp_status status = check_context(fn, context);
    if (status == RMLP_OK && context->gen != NULL)
        status = rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "the context has a generation session already: "
                           "rmlp_generate_end it first");
    if (status == RMLP_OK) status = rmlp_check_call(fn, context, plan);
    if (status == RMLP_OK) status = rmlp_check_compact_plan(fn, plan);
    if (status == RMLP_OK) status = rmlp_check_nonempty_seqs(fn, plan->cu_seqlens, plan->n_seqs);
    if (status == RMLP_OK) status = rmlp_check_inputs(fn, &context->model->config, plan);
    if (status == RMLP_OK && logits == NULL) status = rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "logits is NULL");
    rmlp_generate_params params = rmlp_generate_default_params();
    if (status == RMLP_OK && caller != NULL)
        status = rmlp_read_params(fn, "rmlp_generate_params", caller, &params, sizeof params, NULL, 0);
    if (status != RMLP_OK) return status;
    generate_target target = {context->backend, context->backend_ctx, context->backend_cache, context->cache,
                              &context->model->config};
    return generate_session_begin(fn, &target, plan, &params, logits, &context->gen);
}

RMLP_EXPORT rmlp_status rmlp_generate_begin(rmlp_context *context, const rmlp_plan *plan,
                                            const rmlp_generate_params *params, float *logits) {
    static const char fn[] = "rmlp_generate_begin";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status : rmlp_guard_leave(context, generate_begin(fn, context, plan, params, logits));
}

static rmlp_status generate_step(const char *fn, rmlp_context *context, const uint32_t *tokens, size_t n_tokens,
                                 float *logits) {
    rmlp_status status = need_session(fn, context);
    return status == RMLP_OK ? generate_session_step(fn, context->gen, tokens, n_tokens, logits) : status;
}

RMLP_EXPORT rmlp_status rmlp_generate_step(rmlp_context *context, const uint32_t *tokens, size_t n_tokens,
                                           float *logits) {
    static const char fn[] = "rmlp_generate_step";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status
                             : rmlp_guard_leave(context, generate_step(fn, context, tokens, n_tokens, logits));
}

static rmlp_status generate_finish(const char *fn, rmlp_context *context, uint32_t seq) {
    rmlp_status status = need_session(fn, context);
    return status == RMLP_OK ? generate_session_finish(fn, context->gen, seq) : status;
}

RMLP_EXPORT rmlp_status rmlp_generate_finish(rmlp_context *context, uint32_t seq) {
    static const char fn[] = "rmlp_generate_finish";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status : rmlp_guard_leave(context, generate_finish(fn, context, seq));
}

RMLP_EXPORT rmlp_status rmlp_generate_end(rmlp_context *context) {
    static const char fn[] = "rmlp_generate_end";
    rmlp_status status = rmlp_context_enter(fn, context);
    if (status != RMLP_OK) return status;
    generate_session_end(context->gen);
    context->gen = NULL;
    return rmlp_guard_leave(context, RMLP_OK);
}

static rmlp_status generate_active(const char *fn, rmlp_context *context, uint32_t *seqs, size_t *n_active) {
    if (n_active == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "n_active is NULL");
    *n_active = context->gen != NULL ? generate_session_active(context->gen, seqs) : 0;
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_generate_active(rmlp_context *context, uint32_t *seqs, size_t *n_active) {
    static const char fn[] = "rmlp_generate_active";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status : rmlp_guard_leave(context, generate_active(fn, context, seqs, n_active));
}

static rmlp_status generate_stats(const char *fn, rmlp_context *context, rmlp_generate_stats *out) {
    if (out == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "out is NULL");
    *out = context->gen != NULL ? generate_session_stats(context->gen) : (rmlp_generate_stats){0};
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_generate_get_stats(rmlp_context *context, rmlp_generate_stats *out) {
    static const char fn[] = "rmlp_generate_get_stats";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status : rmlp_guard_leave(context, generate_stats(fn, context, out));
}
