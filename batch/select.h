/*
 * select.h: how a batcher picks its next batch from the queue (queue.h), under a budget of
 * tokens and sequences, and lays it out for rmlp_plan_build.
 *
 * A batch fits max_tokens token ids, max_rows compact rows (N': its tokens less the prefixes its
 * requests share, what the planner computes) and max_seqs requests.
 * FIFO: requests in push order up to the first that does not fit.
 * Prefix (docs/batching.md has the reasoning and an example):
 *   1. aged: requests that waited max_wait_us or longer, before any other, oldest first, each
 *      pulling its aged group along as in 2 (those that no longer fit are skipped; they stay first
 *      for the next batch);
 *   2. passed over: requests that were queued when the last batch was taken (push number below
 *      the queue's passed_over), oldest first, each pulling along the others passed over of its
 *      group (not newer ones: those wait for step 3, after the older requests of other groups): at
 *      every step the oldest of them is taken unless a cluster's neighbour that was passed over too
 *      (see 3) saves more tokens than it would (its common prefix with the nearest taken request).
 *      So a request waits about as long as in a plain queue, and groups still form around the old
 *      requests;
 *   3. grouped: in token order (the radix tree's depth-first order) the prefix a request shares
 *      with the batch so far is its common prefix with the nearest taken request on either side,
 *      so each taken request grows a cluster outwards. Every step takes the candidate that saves
 *      the most tokens: a cluster's neighbour (its common prefix with the cluster) or a new seed,
 *      the request with the deepest prefix shared with a neighbour (a binary heap; ties: the
 *      oldest). Deepest shared prefixes come first; a group that does not fit whole is cut at its
 *      shallowest branches;
 *   4. fill: when nothing left shares a token with the batch, the oldest requests that fit;
 *   and a request longer than the whole budget goes alone, flagged, when it is the oldest aged
 *   one or nothing else fits.
 *   Whole groups (steps 2-4): a request that shares g tokens with the batch is taken only when
 *   the requests joined to it by a common prefix longer than g (its group beyond the batch; in
 *   step 2, those passed over) fit the room left with it, or the batch is empty: a group is not
 *   split at a batch's end (its part left behind would compute the prefix again), the batch takes
 *   what fits whole and leaves the rest of the room.
 * Prefix, with the attached context's cache read: 1 without the pull (aged requests oldest first),
 * then instead of 2-4 the oldest first, each
 * that fits; requests of the same arrival time deepest prefix shared with a queued neighbour or
 * cached first (then the deepest cached, then in token order). The batch's forward caches what it
 * computes, so a group split over two batches computes its prefix once, and grouping newer
 * requests first only makes older ones wait (docs/batching.md, "With a prefix cache").
 * The batch lists its requests in token order.
 * Steps cost O(queued requests) plus the heap; the prefix a request shares with the batch is
 * O(log n) (taken_index.h); a cluster's side stops where nothing beyond can fit through it; a
 * whole-group check scans at most max_seqs requests. Nothing allocates: the scratch is sized at
 * creation.
 */
#ifndef RMLP_BATCH_SELECT_H
#define RMLP_BATCH_SELECT_H

#include <stdint.h>

#include "queue.h"
#include "radix_mlp/types.h"
#include "taken_index.h"

/* How the batcher reads an attached context's prefix cache (ffi/src/cache_api.c; absent in
 * libradix_mlp_plan). `index` is what enter hands out. */
typedef struct batch_cache_ops {
    /* Enters the context's guard: RMLP_OK with *index set (leave it after), RMLP_ERR_BUSY when
     * another call is in the context (the message cleared: the batch goes without the cache), or
     * another status with a message (a freed context). */
    rmlp_status (*enter)(const char *fn, void *context, const void **index);
    void (*leave)(void *context);
    /* The length (>= depth) of the cached prefix of tokens (n; positions 0..), matching on from
     * `depth` below *slot (the row of tokens[depth - 1], RMLP_NO_PARENT at depth 0); *slot
     * becomes the row of the prefix's last token. */
    uint32_t (*match)(const void *index, const uint32_t *tokens, uint32_t n, uint32_t depth, uint32_t *slot);
    /* The row before `slot` on its path (RMLP_NO_PARENT at a path's start). */
    uint32_t (*parent)(const void *index, uint32_t slot);
} batch_cache_ops;

typedef struct batch_seed {
    uint64_t arrival_us, push_no;
    uint32_t score, pos;
} batch_seed;

/* One side of a cluster: the candidate at position `at` (-1 or n: none) and its common prefix
 * with the cluster's nearest taken request (UINT32_MAX right after a taken one). */
typedef struct batch_side {
    int64_t at;
    uint32_t common;
    int32_t step; /* -1: the left side, +1: the right side */
} batch_side;

/* The scratch of a selection and the arrays of the batch it hands out, for a queue of up to
 * cap_requests requests and cap_tokens tokens. */
typedef struct batch_scratch {
    uint8_t *taken;       /* (cap_requests) by position in token order */
    uint32_t *taken_counts, *lcp_min; /* (cap_requests + 1), (2 cap_requests): taken_index.h's */
    uint32_t *cached;     /* (cap_requests) by position: cached prefix */
    uint32_t *pos_of;     /* (cap_requests) by slot: position in token order */
    uint32_t *picked;     /* (cap_requests) positions in the order they were taken */
    batch_seed *seeds;    /* (cap_requests) the heap of seeds */
    batch_side *sides;    /* (2 cap_requests) */
    uint64_t *ids, *arrivals;         /* (cap_requests) the batch's */
    uint32_t *input_ids, *position_ids; /* (cap_tokens) */
    uint32_t *cu_seqlens;             /* (cap_requests + 1) */
} batch_scratch;

/* What a selection is asked for. */
typedef struct batch_ask {
    uint64_t max_tokens, max_rows, max_seqs, now_us, max_wait_us; /* max_rows: of the batch's N' */
    rmlp_batch_mode mode;
    void *context;                /* attached context, or NULL */
    const batch_cache_ops *cache; /* its reader (set with context) */
} batch_ask;

int batch_scratch_init(batch_scratch *s, uint32_t cap_requests, uint32_t cap_tokens, const char **failed,
                       size_t *failed_bytes);
void batch_scratch_release(batch_scratch *s);

/* Picks the next batch (max_tokens, max_rows, max_seqs >= 1), removes it from the queue and describes it in
 * *out (arrays in the scratch). RMLP_OK, or the status of entering the attached context (nothing
 * taken). */
rmlp_status batch_select(const char *fn, batch_queue *q, batch_scratch *s, const batch_ask *ask,
                         rmlp_batch *out);

#endif
