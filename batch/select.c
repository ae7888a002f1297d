/*
 * select.c: the next batch of a batcher (select.h): FIFO, or aged requests, the passed over, groups
 * by shared prefixes and the oldest of the rest (with a cache read: by age, arrivals together by
 * shared or cached prefix); then the batch laid out for rmlp_plan_build.
 */
#include "select.h"

#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"

int batch_scratch_init(batch_scratch *s, uint32_t cap_requests, uint32_t cap_tokens, const char **failed,
                       size_t *failed_bytes) {
    memset(s, 0, sizeof *s);
    size_t r = cap_requests, t = cap_tokens;
    struct {
        void **at;
        size_t bytes;
        const char *name;
    } parts[] = {
        {(void **)&s->taken, r, "batcher taken flags"},
        {(void **)&s->taken_counts, (r + 1) * sizeof(uint32_t), "batcher taken counts"},
        {(void **)&s->lcp_min, 2 * r * sizeof(uint32_t), "batcher lcp minima"},
        {(void **)&s->cached, r * sizeof(uint32_t), "batcher cached prefixes"},
        {(void **)&s->pos_of, r * sizeof(uint32_t), "batcher positions"},
        {(void **)&s->picked, r * sizeof(uint32_t), "batcher picks"},
        {(void **)&s->seeds, r * sizeof(batch_seed), "batcher seeds"},
        {(void **)&s->sides, 2 * r * sizeof(batch_side), "batcher cluster sides"},
        {(void **)&s->ids, r * sizeof(uint64_t), "batch ids"},
        {(void **)&s->arrivals, r * sizeof(uint64_t), "batch arrival times"},
        {(void **)&s->input_ids, t * sizeof(uint32_t), "batch input_ids"},
        {(void **)&s->position_ids, t * sizeof(uint32_t), "batch position_ids"},
        {(void **)&s->cu_seqlens, (r + 1) * sizeof(uint32_t), "batch cu_seqlens"},
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        *parts[i].at = rmlp_calloc(1, parts[i].bytes);
        if (*parts[i].at == NULL) {
            *failed = parts[i].name, *failed_bytes = parts[i].bytes;
            batch_scratch_release(s);
            return -1;
        }
    }
    return 0;
}

void batch_scratch_release(batch_scratch *s) {
    free(s->taken), free(s->taken_counts), free(s->lcp_min), free(s->cached), free(s->pos_of), free(s->picked);
    free(s->seeds), free(s->sides);
    free(s->ids), free(s->arrivals), free(s->input_ids), free(s->position_ids), free(s->cu_seqlens);
    memset(s, 0, sizeof *s);
}

/* One selection in progress. */
typedef struct picking {
    batch_queue *q;
    batch_scratch *s;
    const batch_ask *ask;
    uint64_t tokens_left, rows_left; /* token ids, and compact rows (tokens beyond shared prefixes) */
    uint32_t n_picked, n_aged, n_sides, n_seeds;
    int only; /* steps 1 and 2: candidates are only the aged requests (ONLY_AGED) or those passed over */
    int with_cache;  /* the attached context's prefix cache was read (s->cached) */
    taken_index index; /* the taken requests by position (the prefix a candidate shares with them) */
    uint32_t min_len;  /* the shortest queued request */
} picking;

enum { ANY = 0, ONLY_AGED = 1, ONLY_PASSED = 2 };

static uint32_t len_at(const picking *p, uint32_t pos) { return p->q->req[p->q->order[pos]].len; }

static int aged(const picking *p, uint32_t slot) {
    uint64_t arrival = p->q->req[slot].arrival_us, now = p->ask->now_us;
    return now >= arrival && now - arrival >= p->ask->max_wait_us;
}

/* (No bound on rows left here: a request that repeats a prefix of the batch adds none.) */
static int room(const picking *p) { return p->n_picked < p->ask->max_seqs && p->tokens_left > 0; }

/* Whether the request at pos was queued when the last batch was taken (select.h, step 2). */
static int passed(const picking *p, uint32_t pos) {
    return p->q->req[p->q->order[pos]].push_no < p->q->passed_over;
}

/* What taking the request at pos saves now: its common prefix with the nearest taken request on
 * either side in token order (the minimum lcp across the gap; taken_index.h). */
static uint32_t saving(const picking *p, uint32_t pos) { return taken_index_shared(&p->index, pos); }

/* Whether the request at pos fits the tokens and compact rows left: its rows are its tokens beyond
 * its prefix shared with the batch. */
static int fits_budget(const picking *p, uint32_t pos) {
    uint32_t len = len_at(p, pos);
    return len <= p->tokens_left && (len <= p->rows_left || len - saving(p, pos) <= p->rows_left);
}

/* Whether the request at pos is a candidate of the step running (any, aged, passed over). */
static int candidate(const picking *p, uint32_t pos) {
    return p->only == ANY || (p->only == ONLY_AGED ? aged(p, p->q->order[pos]) : passed(p, pos));
}

/* Free, a candidate, and fitting the room left. */
static int fits(const picking *p, uint32_t pos) {
    return !p->s->taken[pos] && candidate(p, pos) && fits_budget(p, pos);
}

static void take(picking *p, uint32_t pos) {
    uint32_t len = len_at(p, pos), rows = len - saving(p, pos);
    p->s->taken[pos] = 1;
    taken_index_mark(&p->index, pos);
    p->s->picked[p->n_picked++] = pos;
    p->tokens_left = len < p->tokens_left ? p->tokens_left - len : 0; /* an oversized one leaves none */
    p->rows_left = rows < p->rows_left ? p->rows_left - rows : 0;
    if (p->ask->mode != RMLP_BATCH_FIFO && aged(p, p->q->order[pos])) p->n_aged++; /* FIFO has no age bound */
}

/* The cached prefix of every request, in token order: a request whose common prefix with the
 * previous one is longer than that one's cached prefix has the same cached prefix; otherwise the
 * match resumes from their common prefix (climbing from the previous one's last cached row). */
static void find_cached(picking *p, const batch_cache_ops *ops, const void *index) {
    uint32_t prev = 0, slot = RMLP_NO_PARENT;
    for (uint32_t i = 0; i < p->q->n; i++) {
        uint32_t common = i > 0 ? p->q->lcp[i] : 0;
        if (i > 0 && common > prev) {
            p->s->cached[i] = prev;
            continue;
        }
        for (uint32_t depth = prev; depth > common; depth--) slot = ops->parent(index, slot);
        uint32_t r = p->q->order[i];
        prev = ops->match(index, batch_queue_tokens(p->q, r), p->q->req[r].len, common, &slot);
        p->s->cached[i] = prev;
    }
}

/* ---- seeds (steps 2-4 run without a cache read): a max-heap by score, then age -------------- */

static int seed_before(const batch_seed *a, const batch_seed *b) {
    if (a->score != b->score) return a->score > b->score;
    if (a->arrival_us != b->arrival_us) return a->arrival_us < b->arrival_us;
    return a->push_no < b->push_no;
}

static void sift_down(batch_seed *heap, uint32_t n, uint32_t i) {
    for (;;) {
        uint32_t best = i, l = 2 * i + 1, r = l + 1;
        if (l < n && seed_before(&heap[l], &heap[best])) best = l;
        if (r < n && seed_before(&heap[r], &heap[best])) best = r;
        if (best == i) return;
        batch_seed t = heap[i];
        heap[i] = heap[best], heap[best] = t;
        i = best;
    }
}

/* The deepest prefix the request at pos shares with a queued neighbour (in token order). */
static uint32_t neighbour_lcp(const batch_queue *q, uint32_t pos) {
    uint32_t left = pos > 0 ? q->lcp[pos] : 0, right = pos + 1 < q->n ? q->lcp[pos + 1] : 0;
    return left > right ? left : right;
}

/* Every request not taken whose prefix is shared with a neighbour, heapified. */
static void make_seeds(picking *p) {
    const batch_queue *q = p->q;
    p->n_seeds = 0;
    for (uint32_t i = 0; i < q->n; i++) {
        if (!fits(p, i)) continue;
        uint32_t score = neighbour_lcp(q, i);
        if (score == 0) continue;
        const batch_request *r = &q->req[q->order[i]];
        p->s->seeds[p->n_seeds++] = (batch_seed){r->arrival_us, r->push_no, score, i};
    }
    for (uint32_t i = p->n_seeds / 2; i-- > 0;) sift_down(p->s->seeds, p->n_seeds, i);
}

static int keeps_group(const picking *p, uint32_t pos, uint32_t g);

/* The best seed still free, fitting and keeping its group whole (those that are not are dropped
 * for good: the budget only shrinks), or NULL. */
static const batch_seed *top_seed(picking *p) {
    batch_seed *heap = p->s->seeds;
    while (p->n_seeds > 0 && (!fits(p, heap[0].pos) || !keeps_group(p, heap[0].pos, saving(p, heap[0].pos)))) {
        heap[0] = heap[--p->n_seeds];
        sift_down(heap, p->n_seeds, 0);
    }
    return p->n_seeds > 0 ? &heap[0] : NULL;
}

/* ---- clusters: the two sides of each taken request ----------------------------------------- */

/* Moves a side past taken requests (its common prefix starts again from them) and past requests
 * that no longer fit (its common prefix shrinks across them) to its next candidate; a side whose
 * common prefix reached 0 is done (what lies beyond shares nothing with the cluster), and so is one
 * whose common prefix and the rows left together fall below the shortest queued request (nothing
 * beyond fits through this cluster; a request the batch shares more with elsewhere is the
 * candidate of that cluster's side). */
static void settle(const picking *p, batch_side *side) {
    int64_t n = p->q->n;
    while (side->at >= 0 && side->at < n && side->common > 0 &&
           (uint64_t)side->common + p->rows_left >= p->min_len && p->tokens_left >= p->min_len) {
        uint32_t at = (uint32_t)side->at;
        if (fits(p, at)) return;
        if (p->s->taken[at]) side->common = UINT32_MAX; /* the cluster reaches this taken request */
        int64_t next = side->at + side->step;
        if (next < 0 || next >= n) break;
        uint32_t link = p->q->lcp[side->step > 0 ? (uint32_t)next : at]; /* between at and next */
        if (link < side->common) side->common = link;
        side->at = next;
    }
    side->at = -1;
}

/* A side starting next to the taken position `pos`. */
static void add_side(picking *p, uint32_t pos, int32_t step) {
    int64_t at = (int64_t)pos + step;
    if (at < 0 || at >= p->q->n) return;
    uint32_t common = p->q->lcp[step > 0 ? (uint32_t)at : pos];
    p->s->sides[p->n_sides++] = (batch_side){at, common, step};
}

static void take_grouped(picking *p, uint32_t pos) {
    take(p, pos);
    add_side(p, pos, -1);
    add_side(p, pos, +1);
}

/* What taking the candidate of a settled side saves: its prefix shared with the cluster; 0 for a
 * side that is done. */
static uint32_t side_gain(const batch_side *side) { return side->at < 0 ? 0 : side->common; }

/* Whether request a (position) is older than b: arrival, then push. */
static int older(const picking *p, uint32_t a, uint32_t b) {
    const batch_request *x = &p->q->req[p->q->order[a]], *y = &p->q->req[p->q->order[b]];
    return x->arrival_us != y->arrival_us ? x->arrival_us < y->arrival_us : x->push_no < y->push_no;
}

/* Whether taking the request at pos, which shares g tokens with the batch, keeps its
 * group whole (select.h, "whole groups"): the batch is empty (a group larger than a whole budget
 * starts a batch), or the requests joined to it in token order by lcp > g (none of them taken;
 * in step 2 only those passed over count) fit the room left with it, in tokens, compact rows (each
 * member's tokens beyond its common prefix with the member before it in the scan) and requests.
 * The scan stops at the first that does not fit, so it costs at most max_seqs steps. */
static int keeps_group(const picking *p, uint32_t pos, uint32_t g) {
    if (p->n_picked == 0) return 1;
    const batch_queue *q = p->q;
    uint64_t tokens = len_at(p, pos), rows = tokens - g, seqs = 1, room_seqs = p->ask->max_seqs - p->n_picked;
    for (int32_t step = -1; step <= 1; step += 2) {
        uint32_t common = UINT32_MAX; /* with the last member counted */
        for (int64_t at = pos;;) {
            int64_t next = at + step;
            if (next < 0 || next >= (int64_t)q->n) break;
            uint32_t link = q->lcp[step > 0 ? (uint32_t)next : (uint32_t)at]; /* between at and next */
            if (link <= g || p->s->taken[next]) break;
            if (link < common) common = link;
            if (candidate(p, (uint32_t)next)) {
                uint32_t len = len_at(p, (uint32_t)next);
                tokens += len, rows += len - common, seqs++, common = UINT32_MAX;
            }
            if (tokens > p->tokens_left || rows > p->rows_left || seqs > room_seqs) return 0;
            at = next;
        }
    }
    return 1;
}

/* Moves a side whose candidate would split its group past that group (the requests joined to it
 * by lcp > g, away from the cluster), and settles it. */
static void skip_group(const picking *p, batch_side *side, uint32_t g) {
    int64_t n = p->q->n;
    for (;;) {
        int64_t next = side->at + side->step;
        if (next < 0 || next >= n) {
            side->at = -1;
            return;
        }
        uint32_t link = p->q->lcp[side->step > 0 ? (uint32_t)next : (uint32_t)side->at];
        if (link < side->common) side->common = link;
        side->at = next;
        if (link <= g) break;
    }
    settle(p, side);
}

/* The best settled side of the clusters (most saved, then oldest) whose candidate keeps its group
 * whole (a side whose candidate does not is moved past that group, for good: the room only
 * shrinks), or NULL when none saves a token. */
static batch_side *best_side(picking *p, uint32_t *gain_out) {
    for (;;) {
        batch_side *best = NULL;
        uint32_t best_gain = 0;
        for (uint32_t i = 0; i < p->n_sides; i++) {
            batch_side *side = &p->s->sides[i];
            settle(p, side);
            uint32_t gain = side_gain(side);
            if (gain > best_gain || (gain > 0 && gain == best_gain && older(p, (uint32_t)side->at, (uint32_t)best->at)))
                best = side, best_gain = gain;
        }
        *gain_out = best_gain;
        if (best == NULL || keeps_group(p, (uint32_t)best->at, best_gain)) return best;
        skip_group(p, best, best_gain);
    }
}

static void take_side(picking *p, batch_side *side) {
    take(p, (uint32_t)side->at);
    side->common = UINT32_MAX; /* the side now starts from the request taken */
    settle(p, side);
}

/* Steps 1 and 2 of select.h (only: ONLY_AGED, ONLY_PASSED): the candidates oldest first, each
 * unless a cluster's neighbour among them saves more than it would (so each pulls its group
 * along). The oldest aged request that fits is taken whatever its group (the age bound); one
 * passed over, only when its group fits whole. */
static void take_oldest_pulling(picking *p, int only) {
    const batch_queue *q = p->q;
    p->only = only;
    uint32_t r = q->oldest; /* a cursor: one passed by no longer fits later (the room only shrinks) */
    while (room(p)) {
        while (r != BATCH_NONE && !fits(p, p->s->pos_of[r])) r = q->req[r].newer;
        if (r == BATCH_NONE) break;
        uint32_t gain, pos = p->s->pos_of[r], own = saving(p, pos);
        batch_side *side = best_side(p, &gain);
        if (side != NULL && gain > own) take_side(p, side);
        else if (only == ONLY_AGED || keeps_group(p, pos, own)) take_grouped(p, pos);
        else r = q->req[r].newer;
    }
    p->only = ANY;
    p->n_sides = 0; /* the sides start again next to every request taken: new requests are candidates now */
    for (uint32_t k = 0; k < p->n_picked; k++) {
        add_side(p, p->s->picked[k], -1);
        add_side(p, p->s->picked[k], +1);
    }
}

/* Step 3 of select.h: the candidate saving most, a cluster's neighbour or a new seed, each time. */
static void take_groups(picking *p) {
    make_seeds(p);
    while (room(p)) {
        uint32_t best_gain;
        batch_side *best = best_side(p, &best_gain);
        const batch_seed *seed = top_seed(p);
        if (best == NULL && seed == NULL) return;
        if (seed == NULL || (best != NULL && best_gain >= seed->score)) take_side(p, best);
        else take_grouped(p, seed->pos);
    }
}

/* Steps 2-4 with a cache read (select.h): the oldest first, each that fits; requests of the same
 * arrival time deepest shared or cached prefix first, then the deepest cached, then in token order
 * (a group's requests are neighbours there). Each pick scans the run of its arrival time once (at
 * most max_seqs picks). */
static void take_by_age(picking *p) {
    const batch_queue *q = p->q;
    for (uint32_t r = q->oldest; r != BATCH_NONE && room(p);) {
        uint32_t end = r;
        while (end != BATCH_NONE && q->req[end].arrival_us == q->req[r].arrival_us) end = q->req[end].newer;
        while (room(p)) {
            uint32_t best = BATCH_NONE, best_depth = 0, best_cached = 0;
            for (uint32_t x = r; x != end; x = q->req[x].newer) {
                uint32_t pos = p->s->pos_of[x];
                if (!fits(p, pos)) continue;
                uint32_t c = p->s->cached[pos], shared = neighbour_lcp(q, pos), d = shared > c ? shared : c;
                int before = best == BATCH_NONE || d > best_depth ||
                             (d == best_depth && (c > best_cached || (c == best_cached && pos < best)));
                if (before) best = pos, best_depth = d, best_cached = c;
            }
            if (best == BATCH_NONE) break;
            take(p, best);
        }
        r = end;
    }
}

static void take_prefix(picking *p) {
    const batch_queue *q = p->q;
    for (uint32_t i = 0; i < q->n; i++) p->s->pos_of[q->order[i]] = i;
    uint32_t oldest = q->oldest;
    if (oldest != BATCH_NONE && aged(p, oldest) && !fits_budget(p, p->s->pos_of[oldest])) {
        take(p, p->s->pos_of[oldest]); /* the oldest can never fit: alone */
        return;
    }
    if (p->with_cache) {
        for (uint32_t r = oldest; r != BATCH_NONE && aged(p, r) && room(p); r = q->req[r].newer)
            if (fits(p, p->s->pos_of[r])) take(p, p->s->pos_of[r]);
        take_by_age(p);
    } else {
        p->min_len = UINT32_MAX; /* for settle: the cluster sides run in these steps only */
        for (uint32_t i = 0; i < q->n; i++)
            if (len_at(p, i) < p->min_len) p->min_len = len_at(p, i);
        take_oldest_pulling(p, ONLY_AGED);
        if (room(p)) take_oldest_pulling(p, ONLY_PASSED);
        if (room(p)) take_groups(p);
        for (uint32_t r = q->oldest; r != BATCH_NONE && room(p); r = q->req[r].newer) {
            uint32_t pos = p->s->pos_of[r];
            if (fits(p, pos) && keeps_group(p, pos, saving(p, pos))) take(p, pos);
        }
    }
    if (p->n_picked == 0 && q->oldest != BATCH_NONE) take(p, p->s->pos_of[q->oldest]); /* nothing fits */
}

static void take_fifo(picking *p) {
    const batch_queue *q = p->q;
    for (uint32_t i = 0; i < q->n; i++) p->s->pos_of[q->order[i]] = i;
    for (uint32_t r = q->head; r != BATCH_NONE && room(p); r = q->req[r].next) {
        uint32_t pos = p->s->pos_of[r];
        int fit = fits_budget(p, pos);
        if (!fit && p->n_picked > 0) break;
        take(p, pos);
        if (!fit) break; /* the first, oversized: alone */
    }
}

/* Lays the picked requests out (FIFO: as picked; prefix: in token order) with the batch's shared
 * and cached paths, then removes them from the queue. */
static void write_batch(picking *p, rmlp_batch *out) {
    batch_queue *q = p->q;
    batch_scratch *s = p->s;
    uint32_t shared = 0, cached = 0, common = 0, n = 0;
    int first = 1;
    for (uint32_t i = 0; i < q->n; i++) { /* paths in token order: the trie of the batch */
        if (i > 0 && q->lcp[i] < common) common = q->lcp[i];
        if (!s->taken[i]) continue;
        uint32_t with_prev = first ? 0 : common;
        shared += with_prev;
        if (s->cached[i] > with_prev) cached += s->cached[i] - with_prev;
        if (p->ask->mode != RMLP_BATCH_FIFO) s->picked[n++] = i;
        first = 0, common = UINT32_MAX;
    }
    uint32_t tokens = 0;
    s->cu_seqlens[0] = 0;
    for (uint32_t k = 0; k < p->n_picked; k++) {
        const batch_request *r = &q->req[q->order[s->picked[k]]];
        s->ids[k] = r->id, s->arrivals[k] = r->arrival_us;
        memcpy(s->input_ids + tokens, q->arena + r->offset, (size_t)r->len * sizeof(uint32_t));
        for (uint32_t t = 0; t < r->len; t++) s->position_ids[tokens + t] = t;
        tokens += r->len;
        s->cu_seqlens[k + 1] = tokens;
    }
    int oversized = tokens > p->ask->max_tokens || tokens - shared > p->ask->max_rows;
    uint32_t flags = (p->n_aged ? RMLP_BATCH_AGED : 0) | (oversized ? RMLP_BATCH_OVERSIZED : 0);
    *out = (rmlp_batch){p->n_picked, tokens, flags, p->n_aged, shared, cached, s->ids, s->arrivals, s->input_ids,
                        s->position_ids, s->cu_seqlens};
    batch_queue_remove_taken(q, s->taken);
}

rmlp_status batch_select(const char *fn, batch_queue *q, batch_scratch *s, const batch_ask *ask, rmlp_batch *out) {
    picking p = {.q = q, .s = s, .ask = ask, .tokens_left = ask->max_tokens, .rows_left = ask->max_rows};
    memset(s->taken, 0, q->n);
    taken_index_reset(&p.index, s->taken_counts, s->lcp_min, q->lcp, q->n);
    memset(s->cached, 0, (size_t)q->n * sizeof(uint32_t));
    uint32_t skipped = 0;
    if (ask->context != NULL && q->n > 0) {
        const void *index = NULL;
        rmlp_status status = ask->cache->enter(fn, ask->context, &index);
        if (status == RMLP_ERR_BUSY) skipped = RMLP_BATCH_CACHE_SKIPPED;
        else if (status != RMLP_OK) return status;
        else {
            if (index != NULL) find_cached(&p, ask->cache, index), p.with_cache = 1;
            ask->cache->leave(ask->context);
        }
    }
    if (ask->mode == RMLP_BATCH_FIFO) take_fifo(&p);
    else take_prefix(&p);
    write_batch(&p, out);
    if (out->n_seqs > 0) q->passed_over = q->pushes; /* what is still queued was passed over */
    out->flags |= skipped;
    return RMLP_OK;
}
