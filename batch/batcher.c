/*
 * batcher.c: making and freeing a batcher (batcher.h); everything it holds is allocated here.
 */
#include "batcher.h"

#include <stdlib.h>

#include "common/alloc.h"

rmlp_batcher *batcher_new(const rmlp_batcher_params *params, const char **failed, size_t *failed_bytes) {
    rmlp_batcher *b = rmlp_calloc(1, sizeof *b);
    if (b == NULL) {
        *failed = "batcher", *failed_bytes = sizeof *b;
        return NULL;
    }
    b->params = *params;
    if (batch_queue_init(&b->queue, params->max_requests, params->max_queued_tokens, failed, failed_bytes) != 0 ||
        batch_scratch_init(&b->scratch, params->max_requests, params->max_queued_tokens, failed, failed_bytes) != 0) {
        batcher_delete(b);
        return NULL;
    }
    rmlp_guard_init(&b->guard, RMLP_MAGIC_BATCHER);
    return b;
}

void batcher_delete(rmlp_batcher *b) {
    if (b == NULL) return;
    batch_queue_release(&b->queue);
    batch_scratch_release(&b->scratch);
    free(b);
}
