/*
 * queue.h: a batcher's pending requests, stored for a capacity fixed at creation, so pushing and
 * taking allocate nothing. Three views of the same requests:
 *   - slots (req): id, arrival time, push number, where its tokens are; an id table finds a slot
 *     by id (duplicates are refused before a push);
 *   - push order: a doubly linked list, oldest push first (FIFO mode; the token arena's order);
 *   - arrival order: another, by arrival time then push (the age bound; the oldest-first fill),
 *     kept sorted by inserting from its newest end (one step when arrivals come in order);
 *   - token order: the requests sorted by their token ids (lexicographically, a prefix before its
 *     extensions, equal ones in push order) with lcp[i], the length of the common prefix of the
 *     i-th and (i-1)-th: the depth-first order of the radix tree over the queue, in which requests
 *     sharing a prefix are neighbours and the common prefix of any two is the minimum lcp between
 *     them.
 * Tokens live back to back in an arena in push order; when a push finds no room at its end but
 * the arena holds enough free tokens, the live requests are moved down (compaction).
 */
#ifndef RMLP_BATCH_QUEUE_H
#define RMLP_BATCH_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#define BATCH_NONE UINT32_MAX

typedef struct batch_request {
    uint64_t id, arrival_us, push_no; /* push_no: pushes before this one (FIFO order, age ties) */
    uint32_t offset, len;             /* tokens at arena[offset .. offset + len) */
    uint32_t prev, next;              /* push-order list (BATCH_NONE at its ends) */
    uint32_t older, newer;            /* arrival-order list (BATCH_NONE at its ends) */
} batch_request;

typedef struct batch_queue {
    uint32_t cap_requests, cap_tokens;
    batch_request *req;   /* (cap_requests) slots */
    uint32_t *free_slots; /* (cap_requests) a stack of the free slots, n_free of them */
    uint32_t n_free;
    uint32_t *arena;      /* (cap_tokens) */
    uint32_t arena_end;   /* first unused arena token */
    uint64_t live_tokens; /* tokens of the queued requests */
    uint32_t head, tail;  /* push-order list: first and last pushed slot */
    uint32_t oldest, newest; /* arrival-order list: earliest and latest arrival */
    uint32_t *order;      /* (cap_requests) slots in token order, n of them */
    uint32_t *lcp;        /* (cap_requests) lcp[i]: common prefix of order[i-1] and order[i]; lcp[0] = 0 */
    uint32_t n;           /* requests queued */
    uint32_t *table;      /* (table_mask + 1) id table: slot + 1, or 0 for empty; linear probing */
    uint32_t table_mask;
    uint64_t pushes;      /* push numbers handed out */
    uint64_t passed_over; /* pushes when the last batch was taken: a request with a lower push number
                           * was queued then and left behind (select.h, step 2) */
} batch_queue;

/* Allocates a queue's storage; 0, or -1 with the array that failed (name, bytes). */
int batch_queue_init(batch_queue *q, uint32_t cap_requests, uint32_t cap_tokens, const char **failed,
                     size_t *failed_bytes);
void batch_queue_release(batch_queue *q);

/* The slot of the queued request `id`, or BATCH_NONE. */
uint32_t batch_queue_find(const batch_queue *q, uint64_t id);

/* Queues a request (the caller checked: id not queued, 1 <= n, a free slot, live_tokens + n <=
 * cap_tokens). Returns its slot. */
uint32_t batch_queue_push(batch_queue *q, uint64_t id, const uint32_t *tokens, uint32_t n, uint64_t arrival_us);

/* Removes every request whose position in token order is flagged (taken[i] != 0, i < n), in one
 * pass; the lcp of the requests left next to each other is the minimum over what lay between. */
void batch_queue_remove_taken(batch_queue *q, const uint8_t *taken);

static inline const uint32_t *batch_queue_tokens(const batch_queue *q, uint32_t slot) {
    return q->arena + q->req[slot].offset;
}

#endif
