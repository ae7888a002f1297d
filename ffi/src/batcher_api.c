/*
 * batcher_api.c: the exported batcher entry points (batch/batcher.h). Every argument is checked
 * here, with a message naming it, before batch/ (which trusts its input) runs; each call holds the
 * batcher's guard, so a freed batcher or another kind of handle is refused, and so is a batcher
 * another call is using (RMLP_ERR_BUSY). rmlp_batcher_attach_context is in cache_api.c (it
 * needs the context, which libradix_mlp_plan does not have).
 */
#include <string.h>

#include "batch/batcher.h"
#include "common/export.h"
#include "common/status.h"
#include "common/guard.h"
#include "radix_mlp.h"
#include "validate.h"

/* Larger queues would outgrow the id table's 2^31 entries. */
#define MAX_REQUESTS_LIMIT (1u << 30)

RMLP_EXPORT rmlp_batcher_params rmlp_batcher_default_params(void) {
    rmlp_batcher_params params;
    memset(&params, 0, sizeof params); /* padding bytes too, so params compare with memcmp */
    params.struct_size = (uint32_t)sizeof(rmlp_batcher_params);
    params.mode = RMLP_BATCH_PREFIX;
    params.max_requests = RMLP_BATCHER_DEFAULT_MAX_REQUESTS;
    params.max_queued_tokens = RMLP_BATCHER_DEFAULT_MAX_QUEUED_TOKENS;
    params.max_wait_us = RMLP_BATCHER_DEFAULT_MAX_WAIT_US;
    return params;
}

static rmlp_status check_params(const char *fn, const rmlp_batcher_params *caller, rmlp_batcher_params *params) {
    *params = rmlp_batcher_default_params();
    if (caller == NULL) return RMLP_OK;
    rmlp_status status = rmlp_read_params(fn, "rmlp_batcher_params", caller, params, sizeof *params, NULL, 0);
    if (status != RMLP_OK) return status;
    if (params->mode != RMLP_BATCH_PREFIX && params->mode != RMLP_BATCH_FIFO)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                         "params->mode=%d is neither RMLP_BATCH_PREFIX nor RMLP_BATCH_FIFO", params->mode);
    if (params->max_requests == 0)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "params->max_requests is 0 (a queue holds at least one)");
    if (params->max_requests > MAX_REQUESTS_LIMIT)
        return rmlp_fail(RMLP_ERR_TOO_LARGE, fn, "params->max_requests=%u exceeds %u", params->max_requests,
                         MAX_REQUESTS_LIMIT);
    if (params->max_queued_tokens == 0)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "params->max_queued_tokens is 0 (a request has a token)");
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_batcher_create(const rmlp_batcher_params *caller, rmlp_batcher **out) {
    static const char fn[] = "rmlp_batcher_create";
    rmlp_clear_error();
    if (out == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "out is NULL");
    *out = NULL;
    rmlp_batcher_params params;
    rmlp_status status = check_params(fn, caller, &params);
    if (status != RMLP_OK) return status;
    const char *failed = "batcher";
    size_t bytes = 0;
    *out = batcher_new(&params, &failed, &bytes);
    if (*out == NULL)
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating the %s (%zu bytes) for %u requests of %u tokens failed",
                         failed, bytes, params.max_requests, params.max_queued_tokens);
    return RMLP_OK;
}

RMLP_EXPORT void rmlp_batcher_free(rmlp_batcher *batcher) {
    if (batcher != NULL &&
        rmlp_guard_retire("rmlp_batcher_free", batcher, RMLP_MAGIC_BATCHER, "batcher", "rmlp_batcher"))
        batcher_delete(batcher);
}

/* The guard of every other batcher call: NULL, freed, another kind, or busy are refused. */
static rmlp_status enter(const char *fn, rmlp_batcher *batcher) {
    rmlp_clear_error();
    return rmlp_guard_enter(fn, batcher, RMLP_MAGIC_BATCHER, "batcher", "rmlp_batcher");
}

static rmlp_status push(const char *fn, rmlp_batcher *b, uint64_t id, const uint32_t *token_ids, size_t n_tokens,
                        uint64_t arrival_us) {
    batch_queue *q = &b->queue;
    unsigned long long id_ = (unsigned long long)id;
    if (n_tokens == 0) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "request id=%llu is empty (n_tokens is 0)", id_);
    if (token_ids == NULL)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "token_ids is NULL but n_tokens=%zu (request id=%llu)",
                         n_tokens, id_);
    if (n_tokens > q->cap_tokens)
        return rmlp_fail(RMLP_ERR_TOO_LARGE, fn,
                         "request id=%llu has %zu tokens, more than the queue holds (max_queued_tokens=%u)", id_,
                         n_tokens, q->cap_tokens);
    uint32_t slot = batch_queue_find(q, id);
    if (slot != BATCH_NONE)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                         "id=%llu is already queued (pushed with %u tokens at %llu us); ids must be unique among "
                         "queued requests",
                         id_, q->req[slot].len, (unsigned long long)q->req[slot].arrival_us);
    if (q->n == q->cap_requests)
        return rmlp_fail(RMLP_ERR_FULL, fn, "the queue is full: %u requests queued (max_requests=%u); request id=%llu "
                         "was not added", q->n, q->cap_requests, id_);
    if (q->live_tokens + n_tokens > q->cap_tokens)
        return rmlp_fail(RMLP_ERR_FULL, fn, "the queue is full: %llu + %zu tokens exceed max_queued_tokens=%u; request "
                         "id=%llu was not added", (unsigned long long)q->live_tokens, n_tokens, q->cap_tokens, id_);
    batch_queue_push(q, id, token_ids, (uint32_t)n_tokens, arrival_us);
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_batcher_push(rmlp_batcher *batcher, uint64_t id, const uint32_t *token_ids,
                                          size_t n_tokens, uint64_t arrival_us) {
    static const char fn[] = "rmlp_batcher_push";
    rmlp_status status = enter(fn, batcher);
    return status != RMLP_OK ? status
                             : rmlp_guard_leave(batcher, push(fn, batcher, id, token_ids, n_tokens, arrival_us));
}

static rmlp_status remove_request(const char *fn, rmlp_batcher *b, uint64_t id) {
    batch_queue *q = &b->queue;
    uint32_t slot = batch_queue_find(q, id);
    if (slot == BATCH_NONE)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "no request with id=%llu is queued", (unsigned long long)id);
    memset(b->scratch.taken, 0, q->n);
    for (uint32_t i = 0; i < q->n; i++) b->scratch.taken[i] = q->order[i] == slot;
    batch_queue_remove_taken(q, b->scratch.taken);
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_batcher_remove(rmlp_batcher *batcher, uint64_t id) {
    static const char fn[] = "rmlp_batcher_remove";
    rmlp_status status = enter(fn, batcher);
    return status != RMLP_OK ? status : rmlp_guard_leave(batcher, remove_request(fn, batcher, id));
}

RMLP_EXPORT rmlp_status rmlp_batcher_pending(rmlp_batcher *batcher, size_t *n_requests, size_t *n_tokens) {
    static const char fn[] = "rmlp_batcher_pending";
    rmlp_status status = enter(fn, batcher);
    if (status != RMLP_OK) return status;
    if (n_requests != NULL) *n_requests = batcher->queue.n;
    if (n_tokens != NULL) *n_tokens = (size_t)batcher->queue.live_tokens;
    return rmlp_guard_leave(batcher, RMLP_OK);
}

static rmlp_status next(const char *fn, rmlp_batcher *b, size_t max_tokens, size_t max_rows, size_t max_seqs,
                        uint64_t now_us, rmlp_batch *out) {
    if (max_tokens == 0)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "max_tokens is 0 (a batch holds at least one token)");
    if (max_rows == 0)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "max_rows is 0 (a batch computes at least one row)");
    if (max_seqs == 0)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "max_seqs is 0 (a batch holds at least one request)");
    batch_ask ask = {max_tokens, max_rows, max_seqs, now_us, b->params.max_wait_us, b->params.mode, b->context,
                     b->cache};
    return batch_select(fn, &b->queue, &b->scratch, &ask, out);
}

static rmlp_status next_entry(const char *fn, rmlp_batcher *batcher, size_t max_tokens, size_t max_rows,
                              size_t max_seqs, uint64_t now_us, rmlp_batch *out) {
    rmlp_clear_error();
    if (out == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "out is NULL");
    memset(out, 0, sizeof *out);
    rmlp_status status = enter(fn, batcher);
    return status != RMLP_OK
               ? status
               : rmlp_guard_leave(batcher, next(fn, batcher, max_tokens, max_rows, max_seqs, now_us, out));
}

RMLP_EXPORT rmlp_status rmlp_batcher_next(rmlp_batcher *batcher, size_t max_tokens, size_t max_seqs, uint64_t now_us,
                                          rmlp_batch *out) {
    /* a batch's compact rows never exceed its tokens: max_rows = max_tokens adds no bound */
    return next_entry("rmlp_batcher_next", batcher, max_tokens, max_tokens == 0 ? 1 : max_tokens, max_seqs, now_us,
                      out);
}

RMLP_EXPORT rmlp_status rmlp_batcher_next_rows(rmlp_batcher *batcher, size_t max_tokens, size_t max_rows,
                                               size_t max_seqs, uint64_t now_us, rmlp_batch *out) {
    return next_entry("rmlp_batcher_next_rows", batcher, max_tokens, max_rows, max_seqs, now_us, out);
}
