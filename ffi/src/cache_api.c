/*
 * cache_api.c: read-only looks into a context's prefix cache: how many leading tokens of a
 * sequence it holds (rmlp_context_cached_prefix, for hosts), and the same walk for a batcher with
 * the context attached (rmlp_batcher_attach_context; batch/select.h's batch_cache_ops). Nothing
 * here changes the cache, its counters or its eviction order. In libradix_mlp only (the planner
 * library has no contexts).
 */
#include "batch/batcher.h"
#include "cache/kv_cache.h"
#include "context_checks.h"
#include "common/export.h"
#include "common/status.h"
#include "radix_mlp.h"

/* The length (>= depth) of the cached prefix of tokens (n), from depth on below *slot. */
static uint32_t match(const void *index, const uint32_t *tokens, uint32_t n, uint32_t depth, uint32_t *slot) {
    const kv_pool *pool = index;
    for (; depth < n; depth++) {
        uint32_t row = kv_pool_find(pool, *slot, tokens[depth], depth);
        if (row == UINT32_MAX) break;
        *slot = row;
    }
    return depth;
}

static uint32_t parent(const void *index, uint32_t slot) { return kv_pool_parent(index, slot); }

static rmlp_status enter(const char *fn, void *context, const void **index) {
    rmlp_context *c = context;
    if (!rmlp_guard_is_live(c, RMLP_MAGIC_CONTEXT))
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                         "the attached context was freed (detach it with rmlp_batcher_attach_context(batcher, NULL) "
                         "before rmlp_context_free)");
    rmlp_status status = rmlp_guard_enter(fn, c, RMLP_MAGIC_CONTEXT, "the attached context", "rmlp_context");
    if (status == RMLP_ERR_BUSY) rmlp_clear_error(); /* not an error: the batch goes without the cache */
    if (status == RMLP_OK) *index = c->cache != NULL ? c->cache->pool : NULL;
    return status;
}

static void leave(void *context) { rmlp_guard_leave(context, RMLP_OK); }

static const batch_cache_ops context_cache = {enter, leave, match, parent};

static rmlp_status cached_prefix(const char *fn, rmlp_context *context, const uint32_t *token_ids, size_t n_tokens,
                                 size_t *n_cached) {
    if (n_cached == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "n_cached is NULL");
    *n_cached = 0;
    if (n_tokens > 0 && token_ids == NULL)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "token_ids is NULL but n_tokens=%zu", n_tokens);
    if (n_tokens > UINT32_MAX) n_tokens = UINT32_MAX; /* no path is longer than a position reaches */
    uint32_t slot = RMLP_NO_PARENT;
    if (context->cache != NULL) *n_cached = match(context->cache->pool, token_ids, (uint32_t)n_tokens, 0, &slot);
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_context_cached_prefix(rmlp_context *context, const uint32_t *token_ids, size_t n_tokens,
                                                   size_t *n_cached) {
    static const char fn[] = "rmlp_context_cached_prefix";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status
                             : rmlp_guard_leave(context, cached_prefix(fn, context, token_ids, n_tokens, n_cached));
}

static rmlp_status attach(const char *fn, rmlp_batcher *batcher, rmlp_context *context) {
    if (context != NULL) {
        rmlp_status status = rmlp_guard_check(fn, context, RMLP_MAGIC_CONTEXT, "context", "rmlp_context");
        if (status != RMLP_OK) return status;
        if (context->cache == NULL) /* set at creation, never changed: read without entering */
            return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                             "the context has no prefix cache (create it with rmlp_context_params::cache_bytes > 0)");
    }
    batcher->context = context;
    batcher->cache = context != NULL ? &context_cache : NULL;
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_batcher_attach_context(rmlp_batcher *batcher, rmlp_context *context) {
    static const char fn[] = "rmlp_batcher_attach_context";
    rmlp_clear_error();
    rmlp_status status = rmlp_guard_enter(fn, batcher, RMLP_MAGIC_BATCHER, "batcher", "rmlp_batcher");
    return status != RMLP_OK ? status : rmlp_guard_leave(batcher, attach(fn, batcher, context));
}
