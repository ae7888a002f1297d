/*
 * layer_api.c: the exported entry points that run the layer in pieces on a context, for hosts that
 * keep attention (rmlp_embed, rmlp_layer_pre_attention, rmlp_attention, rmlp_layer_post_attention,
 * rmlp_final_norm, and their *_compact forms), and the read-outs of the last hidden states
 * (pooling, pair scores; rmlp_pool without a context, by the CPU's table). Arguments are checked here;
 * the context's backend (common/backend.h) runs them. Whole forwards are forward_api.c's.
 */
#include "backends.h"
#include "common/export.h"
#include "common/status.h"
#include "context_checks.h"
#include "model_internal.h"
#include "plan_checks.h"
#include "radix_mlp.h"
#include "validate.h"

/* What the per-layer calls and read-outs check of their plan: it fits, and its maps where the
 * backend reads the host's plan (a CUDA context reads the copy rmlp_context_set_plan checked). */
#define LAYER_CALL (RMLP_PLAN_FITS | RMLP_PLAN_MAPS_ON_HOST)

static rmlp_status embed(const char *fn, rmlp_context *context, const rmlp_plan *plan, void *hidden) {
    rmlp_status status = rmlp_check_plan(fn, context, plan, LAYER_CALL | RMLP_PLAN_INPUTS);
    if (status == RMLP_OK) status = rmlp_check_buffers(fn, (const void *[]){hidden}, (const char *[]){"hidden"}, 1);
    if (status != RMLP_OK) return status;
    return context->backend->embed(fn, context->backend_ctx, plan, hidden);
}

RMLP_EXPORT rmlp_status rmlp_embed(rmlp_context *context, const rmlp_plan *plan, void *hidden) {
    static const char fn[] = "rmlp_embed";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status : rmlp_guard_leave(context, embed(fn, context, plan, hidden));
}

/* Compact calls need the plan's layout (qo_indptr): the per-layer ones only to refuse a plan
 * that could not run compact attention, so a host sees the problem at its first call. */
static unsigned layer_checks(bool compact) { return LAYER_CALL | (compact ? RMLP_PLAN_COMPACT : 0); }

static rmlp_status layer_pre_attention(const char *fn, rmlp_context *context, uint32_t layer, const rmlp_plan *plan,
                                       const void *hidden, void *q, void *k, void *v, bool compact) {
    rmlp_status status = rmlp_check_plan(fn, context, plan, layer_checks(compact));
    if (status == RMLP_OK) status = rmlp_check_layer(fn, context, layer);
    if (status == RMLP_OK)
        status = rmlp_check_buffers(fn, (const void *[]){hidden, q, k, v}, (const char *[]){"hidden", "q", "k", "v"}, 4);
    if (status != RMLP_OK) return status;
    return context->backend->pre_attention(fn, context->backend_ctx, layer, plan, hidden, q, k, v, compact);
}

RMLP_EXPORT rmlp_status rmlp_layer_pre_attention(rmlp_context *context, uint32_t layer, const rmlp_plan *plan,
                                                 const void *hidden, void *q, void *k, void *v) {
    static const char fn[] = "rmlp_layer_pre_attention";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK
               ? status
               : rmlp_guard_leave(context, layer_pre_attention(fn, context, layer, plan, hidden, q, k, v, false));
}

RMLP_EXPORT rmlp_status rmlp_layer_pre_attention_compact(rmlp_context *context, uint32_t layer, const rmlp_plan *plan,
                                                         const void *hidden, void *q, void *k, void *v) {
    static const char fn[] = "rmlp_layer_pre_attention_compact";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK
               ? status
               : rmlp_guard_leave(context, layer_pre_attention(fn, context, layer, plan, hidden, q, k, v, true));
}

static rmlp_status layer_post_attention(const char *fn, rmlp_context *context, uint32_t layer, const rmlp_plan *plan,
                                        const void *attn, void *hidden, bool compact) {
    rmlp_status status = rmlp_check_plan(fn, context, plan, layer_checks(compact));
    if (status == RMLP_OK) status = rmlp_check_layer(fn, context, layer);
    if (status == RMLP_OK)
        status = rmlp_check_buffers(fn, (const void *[]){attn, hidden}, (const char *[]){"attn", "hidden"}, 2);
    if (status != RMLP_OK) return status;
    return context->backend->post_attention(fn, context->backend_ctx, layer, plan, attn, hidden, compact);
}

RMLP_EXPORT rmlp_status rmlp_layer_post_attention(rmlp_context *context, uint32_t layer, const rmlp_plan *plan,
                                                  const void *attn, void *hidden) {
    static const char fn[] = "rmlp_layer_post_attention";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK
               ? status
               : rmlp_guard_leave(context, layer_post_attention(fn, context, layer, plan, attn, hidden, false));
}

RMLP_EXPORT rmlp_status rmlp_layer_post_attention_compact(rmlp_context *context, uint32_t layer,
                                                          const rmlp_plan *plan, const void *attn, void *hidden) {
    static const char fn[] = "rmlp_layer_post_attention_compact";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK
               ? status
               : rmlp_guard_leave(context, layer_post_attention(fn, context, layer, plan, attn, hidden, true));
}

static rmlp_status final_norm(const char *fn, rmlp_context *context, const rmlp_plan *plan, const void *hidden,
                              void *out, bool compact) {
    rmlp_status status = rmlp_check_plan(fn, context, plan, LAYER_CALL);
    if (status == RMLP_OK)
        status = rmlp_check_buffers(fn, (const void *[]){hidden, out}, (const char *[]){"hidden", "out"}, 2);
    if (status != RMLP_OK) return status;
    return context->backend->final_norm(fn, context->backend_ctx, plan, hidden, out, compact);
}

RMLP_EXPORT rmlp_status rmlp_final_norm(rmlp_context *context, const rmlp_plan *plan, const void *hidden, void *out) {
    static const char fn[] = "rmlp_final_norm";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status : rmlp_guard_leave(context, final_norm(fn, context, plan, hidden, out, false));
}

RMLP_EXPORT rmlp_status rmlp_final_norm_compact(rmlp_context *context, const rmlp_plan *plan, const void *hidden,
                                                void *out) {
    static const char fn[] = "rmlp_final_norm_compact";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status : rmlp_guard_leave(context, final_norm(fn, context, plan, hidden, out, true));
}

static rmlp_status attend(const char *fn, rmlp_context *context, const rmlp_attention_args *args, bool compact) {
    rmlp_status status = rmlp_check_attention_args(fn, context, args, compact);
    if (status != RMLP_OK) return status;
    return context->backend->attention(fn, context->backend_ctx, args, compact);
}

RMLP_EXPORT rmlp_status rmlp_attention(rmlp_context *context, const rmlp_attention_args *args) {
    static const char fn[] = "rmlp_attention";
    rmlp_status status = rmlp_context_enter_nested(fn, context); /* from a host attention callback too */
    return status != RMLP_OK ? status : rmlp_guard_leave(context, attend(fn, context, args, false));
}

RMLP_EXPORT rmlp_status rmlp_attention_compact(rmlp_context *context, const rmlp_attention_args *args) {
    static const char fn[] = "rmlp_attention_compact";
    rmlp_status status = rmlp_context_enter_nested(fn, context); /* from a host attention callback too */
    return status != RMLP_OK ? status : rmlp_guard_leave(context, attend(fn, context, args, true));
}

RMLP_EXPORT rmlp_status rmlp_pool(const float *hidden, size_t n_tokens, uint32_t hidden_size,
                                  const uint32_t *cu_seqlens, size_t n_seqs, rmlp_pooling pooling, bool normalize,
                                  float *out) {
    static const char fn[] = "rmlp_pool";
    rmlp_clear_error();
    if (pooling != RMLP_POOLING_LAST && pooling != RMLP_POOLING_MEAN && pooling != RMLP_POOLING_FIRST)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "pooling=%d is not RMLP_POOLING_LAST, MEAN or FIRST", pooling);
    if (hidden_size == 0) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "hidden_size is 0");
    if (hidden == NULL || out == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "hidden or out is NULL");
    rmlp_status status = rmlp_check_cu_seqlens(fn, cu_seqlens, n_seqs, n_tokens);
    if (status == RMLP_OK) status = rmlp_check_nonempty_seqs(fn, cu_seqlens, n_seqs);
    if (status != RMLP_OK) return status;
    rmlp_backend_for(RMLP_DEVICE_CPU)->cpu->pool(hidden, hidden_size, cu_seqlens, n_seqs, pooling, normalize, out);
    return RMLP_OK;
}

/* The read-outs take batch rows (hidden (n_tokens, hidden_size) with the caller's cu_seqlens) or,
 * `compact`, compact rows read through the plan's scatter (hidden (n_compact_padded, hidden_size),
 * the plan's own cu_seqlens, which replace *cu_seqlens and *n_seqs; on CUDA the plan set on the
 * context). Every sequence must be non-empty. */
static rmlp_status check_readout(const char *fn, rmlp_context *context, bool compact, const rmlp_plan *plan,
                                 size_t n_tokens, const uint32_t **cu_seqlens, size_t *n_seqs) {
    rmlp_status status;
    if (compact) {
        status = rmlp_check_plan(fn, context, plan, LAYER_CALL | RMLP_PLAN_NONEMPTY);
        if (status == RMLP_OK) *cu_seqlens = plan->cu_seqlens, *n_seqs = plan->n_seqs;
        return status;
    }
    status = rmlp_check_cu_seqlens(fn, *cu_seqlens, *n_seqs, n_tokens);
    return status == RMLP_OK ? rmlp_check_nonempty_seqs(fn, *cu_seqlens, *n_seqs) : status;
}

static rmlp_status score_pair(const char *fn, rmlp_context *context, const void *hidden, bool compact,
                              const rmlp_plan *plan, size_t n_tokens, const uint32_t *cu_seqlens, size_t n_seqs,
                              uint32_t token_a, uint32_t token_b, float *logits, float *prob_a) {
    const rmlp_model *m = context->model;
    if (!m->config.has_lm_head)
        return rmlp_fail(RMLP_ERR_UNSUPPORTED, fn, "the model has no LM head (no lm_head.weight, embeddings not tied)");
    if (token_a >= m->config.vocab_size || token_b >= m->config.vocab_size)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "token_a=%u or token_b=%u >= vocab_size=%u", token_a, token_b,
                         m->config.vocab_size);
    if (hidden == NULL || logits == NULL || prob_a == NULL)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "hidden, logits or prob_a is NULL");
    rmlp_status status = check_readout(fn, context, compact, plan, n_tokens, &cu_seqlens, &n_seqs);
    if (status != RMLP_OK) return status;
    return context->backend->score_pair(fn, context->backend_ctx, hidden, compact ? plan : NULL, cu_seqlens, n_seqs,
                                        token_a, token_b, logits, prob_a);
}

RMLP_EXPORT rmlp_status rmlp_score_pair(rmlp_context *context, const void *hidden, size_t n_tokens,
                                        const uint32_t *cu_seqlens, size_t n_seqs, uint32_t token_a, uint32_t token_b,
                                        float *logits, float *prob_a) {
    static const char fn[] = "rmlp_score_pair";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status
                             : rmlp_guard_leave(context, score_pair(fn, context, hidden, false, NULL, n_tokens,
                                                                    cu_seqlens, n_seqs, token_a, token_b, logits,
                                                                    prob_a));
}

RMLP_EXPORT rmlp_status rmlp_score_pair_compact(rmlp_context *context, const rmlp_plan *plan, const void *hidden,
                                                uint32_t token_a, uint32_t token_b, float *logits, float *prob_a) {
    static const char fn[] = "rmlp_score_pair_compact";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status
                             : rmlp_guard_leave(context, score_pair(fn, context, hidden, true, plan, 0, NULL, 0,
                                                                    token_a, token_b, logits, prob_a));
}

static rmlp_status pool(const char *fn, rmlp_context *context, const void *hidden, bool compact, const rmlp_plan *plan,
                        size_t n_tokens, const uint32_t *cu_seqlens, size_t n_seqs, rmlp_pooling pooling,
                        bool normalize, float *out) {
    if (pooling != RMLP_POOLING_LAST && pooling != RMLP_POOLING_MEAN && pooling != RMLP_POOLING_FIRST)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "pooling=%d is not RMLP_POOLING_LAST, MEAN or FIRST", pooling);
    if (hidden == NULL || out == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "hidden or out is NULL");
    rmlp_status status = check_readout(fn, context, compact, plan, n_tokens, &cu_seqlens, &n_seqs);
    if (status != RMLP_OK) return status;
    return context->backend->pool(fn, context->backend_ctx, hidden, compact ? plan : NULL, cu_seqlens, n_seqs, pooling,
                                  normalize, out);
}

RMLP_EXPORT rmlp_status rmlp_context_pool(rmlp_context *context, const void *hidden, size_t n_tokens,
                                          const uint32_t *cu_seqlens, size_t n_seqs, rmlp_pooling pooling,
                                          bool normalize, float *out) {
    static const char fn[] = "rmlp_context_pool";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status
                             : rmlp_guard_leave(context, pool(fn, context, hidden, false, NULL, n_tokens, cu_seqlens,
                                                              n_seqs, pooling, normalize, out));
}

RMLP_EXPORT rmlp_status rmlp_context_pool_compact(rmlp_context *context, const rmlp_plan *plan, const void *hidden,
                                                  rmlp_pooling pooling, bool normalize, float *out) {
    static const char fn[] = "rmlp_context_pool_compact";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status
                             : rmlp_guard_leave(context, pool(fn, context, hidden, true, plan, 0, NULL, 0, pooling,
                                                              normalize, out));
}
