/*
 * queue.c: a batcher's pending requests (queue.h): slots, the id table, the push-order and
 * arrival-order lists, the token order with its common prefixes, and the token arena.
 */
#include "queue.h"

#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"

/* MurmurHash3's 64-bit finaliser: ids that differ in any bit land far apart in the id table. */
static uint64_t mix(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

int batch_queue_init(batch_queue *q, uint32_t cap_requests, uint32_t cap_tokens, const char **failed,
                     size_t *failed_bytes) {
    memset(q, 0, sizeof *q);
    uint32_t table = 2;
    while (table < 2 * (uint64_t)cap_requests && table < (1u << 31)) table *= 2;
    q->cap_requests = cap_requests, q->cap_tokens = cap_tokens, q->table_mask = table - 1;
    struct {
        void **at;
        size_t bytes;
        const char *name;
    } parts[] = {
        {(void **)&q->req, (size_t)cap_requests * sizeof *q->req, "batcher request slots"},
        {(void **)&q->free_slots, (size_t)cap_requests * sizeof(uint32_t), "batcher free slots"},
        {(void **)&q->arena, (size_t)cap_tokens * sizeof(uint32_t), "batcher token arena"},
        {(void **)&q->order, (size_t)cap_requests * sizeof(uint32_t), "batcher token order"},
        {(void **)&q->lcp, (size_t)cap_requests * sizeof(uint32_t), "batcher common prefixes"},
        {(void **)&q->table, (size_t)table * sizeof(uint32_t), "batcher id table"},
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        *parts[i].at = rmlp_calloc(1, parts[i].bytes);
        if (*parts[i].at == NULL) {
            *failed = parts[i].name, *failed_bytes = parts[i].bytes;
            batch_queue_release(q);
            return -1;
        }
    }
    for (uint32_t s = 0; s < cap_requests; s++) q->free_slots[s] = cap_requests - 1 - s; /* slot 0 first */
    q->n_free = cap_requests;
    q->head = q->tail = q->oldest = q->newest = BATCH_NONE;
    return 0;
}

void batch_queue_release(batch_queue *q) {
    free(q->req), free(q->free_slots), free(q->arena), free(q->order), free(q->lcp), free(q->table);
    memset(q, 0, sizeof *q);
}

/* The table entry holding `id`, or the empty entry where it would go. */
static uint32_t table_at(const batch_queue *q, uint64_t id) {
    uint32_t at = (uint32_t)mix(id) & q->table_mask;
    while (q->table[at] != 0 && q->req[q->table[at] - 1].id != id) at = (at + 1) & q->table_mask;
    return at;
}

uint32_t batch_queue_find(const batch_queue *q, uint64_t id) {
    uint32_t entry = q->table[table_at(q, id)];
    return entry == 0 ? BATCH_NONE : entry - 1;
}

/* Empties the entry of `id` and shifts back the entries after it that probed past it. */
static void table_remove(batch_queue *q, uint64_t id) {
    uint32_t hole = table_at(q, id), at = hole;
    q->table[hole] = 0;
    for (;;) {
        at = (at + 1) & q->table_mask;
        if (q->table[at] == 0) return;
        uint32_t home = (uint32_t)mix(q->req[q->table[at] - 1].id) & q->table_mask;
        /* the entry may fill the hole when its home is not cyclically in (hole, at] */
        if (((at - home) & q->table_mask) >= ((at - hole) & q->table_mask)) {
            q->table[hole] = q->table[at], q->table[at] = 0;
            hole = at;
        }
    }
}

/* Lexicographic order of two token sequences (a prefix first); *common gets their common prefix. */
static int compare(const uint32_t *a, uint32_t na, const uint32_t *b, uint32_t nb, uint32_t *common) {
    uint32_t n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i]) i++;
    *common = i;
    if (i < n) return a[i] < b[i] ? -1 : 1;
    return (na > nb) - (na < nb);
}

/* Moves the queued requests' tokens to the arena's start, in push order (their arena order). */
static void compact_arena(batch_queue *q) {
    uint32_t end = 0;
    for (uint32_t s = q->head; s != BATCH_NONE; s = q->req[s].next) {
        batch_request *r = &q->req[s];
        memmove(q->arena + end, q->arena + r->offset, (size_t)r->len * sizeof(uint32_t));
        r->offset = end, end += r->len;
    }
    q->arena_end = end;
}

/* Links slot s into the arrival-order list after the latest request that arrived no later. */
static void link_arrival(batch_queue *q, uint32_t s) {
    batch_request *r = &q->req[s];
    uint32_t before = q->newest;
    while (before != BATCH_NONE && q->req[before].arrival_us > r->arrival_us) before = q->req[before].older;
    r->older = before;
    r->newer = before == BATCH_NONE ? q->oldest : q->req[before].newer;
    if (before == BATCH_NONE) q->oldest = s;
    else q->req[before].newer = s;
    if (r->newer == BATCH_NONE) q->newest = s;
    else q->req[r->newer].older = s;
}

/* The position in token order where tokens (n) go: after every request not greater. */
static uint32_t insertion_point(const batch_queue *q, const uint32_t *tokens, uint32_t n) {
    uint32_t lo = 0, hi = q->n, common;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2, s = q->order[mid];
        if (compare(batch_queue_tokens(q, s), q->req[s].len, tokens, n, &common) <= 0) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

uint32_t batch_queue_push(batch_queue *q, uint64_t id, const uint32_t *tokens, uint32_t n, uint64_t arrival_us) {
    if ((uint64_t)q->arena_end + n > q->cap_tokens) compact_arena(q);
    uint32_t s = q->free_slots[--q->n_free];
    batch_request *r = &q->req[s];
    *r = (batch_request){id, arrival_us, q->pushes++, q->arena_end, n, q->tail, BATCH_NONE, BATCH_NONE, BATCH_NONE};
    memcpy(q->arena + r->offset, tokens, (size_t)n * sizeof(uint32_t));
    q->arena_end += n, q->live_tokens += n;
    if (q->tail == BATCH_NONE) q->head = s;
    else q->req[q->tail].next = s;
    q->tail = s;
    link_arrival(q, s);
    q->table[table_at(q, id)] = s + 1;

    uint32_t at = insertion_point(q, tokens, n), common;
    memmove(q->order + at + 1, q->order + at, (size_t)(q->n - at) * sizeof(uint32_t));
    memmove(q->lcp + at + 1, q->lcp + at, (size_t)(q->n - at) * sizeof(uint32_t));
    q->order[at] = s, q->n++;
    q->lcp[at] = 0;
    if (at > 0) {
        uint32_t p = q->order[at - 1];
        compare(batch_queue_tokens(q, p), q->req[p].len, tokens, n, &common);
        q->lcp[at] = common;
    }
    if (at + 1 < q->n) {
        uint32_t f = q->order[at + 1];
        compare(tokens, n, batch_queue_tokens(q, f), q->req[f].len, &common);
        q->lcp[at + 1] = common;
    }
    return s;
}

/* Unlinks slot s from both lists and the id table and frees it. */
static void release_slot(batch_queue *q, uint32_t s) {
    batch_request *r = &q->req[s];
    if (r->prev == BATCH_NONE) q->head = r->next;
    else q->req[r->prev].next = r->next;
    if (r->next == BATCH_NONE) q->tail = r->prev;
    else q->req[r->next].prev = r->prev;
    if (r->older == BATCH_NONE) q->oldest = r->newer;
    else q->req[r->older].newer = r->newer;
    if (r->newer == BATCH_NONE) q->newest = r->older;
    else q->req[r->newer].older = r->older;
    table_remove(q, r->id);
    q->live_tokens -= r->len;
    q->free_slots[q->n_free++] = s;
}

void batch_queue_remove_taken(batch_queue *q, const uint8_t *taken) {
    uint32_t kept = 0, common = UINT32_MAX;
    for (uint32_t i = 0; i < q->n; i++) {
        if (i > 0 && q->lcp[i] < common) common = q->lcp[i];
        if (taken[i]) {
            release_slot(q, q->order[i]);
            continue;
        }
        q->order[kept] = q->order[i];
        q->lcp[kept] = kept == 0 ? 0 : common;
        kept++, common = UINT32_MAX;
    }
    q->n = kept;
    if (kept == 0) q->arena_end = 0;
}
