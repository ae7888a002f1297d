/*
 * batcher.h: what an rmlp_batcher is: its guard (common/guard.h: the handle checks and
 * RMLP_ERR_BUSY), its settings, the queue of pending requests (queue.h), the scratch and batch
 * arrays of its selections (select.h), and the context whose prefix cache it reads, if any. The
 * exported entry points (ffi/src/batcher_api.c) check arguments and call these.
 */
#ifndef RMLP_BATCH_BATCHER_H
#define RMLP_BATCH_BATCHER_H

#include "common/guard.h"
#include "queue.h"
#include "radix_mlp/types.h"
#include "select.h"

struct rmlp_batcher {
    rmlp_guard guard; /* first: the handle checks of guard.h */
    rmlp_batcher_params params;
    batch_queue queue;
    batch_scratch scratch;
    void *context;                /* the attached context, or NULL */
    const batch_cache_ops *cache; /* how to read its cache (set with context) */
};

/* A batcher with storage for params' capacities (checked by the caller), guard live; NULL when
 * out of memory, with the array that failed. */
rmlp_batcher *batcher_new(const rmlp_batcher_params *params, const char **failed, size_t *failed_bytes);
void batcher_delete(rmlp_batcher *batcher);

#endif
