/*
 * fuzz_batcher.c: libFuzzer target for the batcher and the routing key through the public ABI.
 * One input: a head byte (bit 0: FIFO mode; capacity 1 + (head >> 1) % 16 requests; bit 5: a
 * context attached, its prefix cache 4, 12, 40 or 200 rows (bits 6-7) of tiny_load.h's model,
 * loaded once per process), a byte of token capacity (1 + byte % 96) and a byte of max_wait_us;
 * then operations, each a byte whose low 2 bits pick it:
 *   0 push:   id byte (% 24: ids repeat), length byte (% 21: empties too), then the tokens two per
 *             byte, low nibble first, from a 4-token alphabet (requests share, extend and repeat
 *             each other), the clock moved on by the op byte's top bits, the arrival stamped up to
 *             3 before now;
 *   1 next:   max_tokens byte (% 48: 0 too), max_seqs byte (% 9: 0 too); when the max_tokens byte
 *             is 48 or more, rmlp_batcher_next_rows with max_rows from one more byte (% 64: 0 too,
 *             and above max_tokens; 255: SIZE_MAX), else rmlp_batcher_next (max_rows = max_tokens);
 *             with a context attached the batch is then planned and run on it (filling its cache);
 *   2 remove: id byte (% 24);
 *   3 the routing key of the last request pushed, prefix_tokens and separator from the next byte.
 * Oracle: a model of the queue. A push is refused exactly when the model says so (the id queued,
 * empty, longer than the capacity, full), with the status for that reason; a batch holds queued
 * requests only, each with its own tokens and positions from 0, within the budgets of tokens,
 * compact rows (n_tokens - shared_tokens) and requests (or one oversized request, flagged exactly
 * then), non-empty when the queue is not, its shared tokens at most its tokens (a zero budget
 * refused); FIFO batches are the plain queue's, a request's rows there its tokens beyond its
 * longest common prefix with those taken before it; an aged request left behind did not fit the
 * room the aged ones left, in tokens or in the rows it adds to them; with a context attached, the
 * batch never skipped the cache, its cached_tokens are the hits its forward counts (unless the
 * forward bypassed the cache), and in prefix mode with nothing aged no request left behind fit the
 * room (tokens and rows) that those taken of its arrival time or older left; the routing key covers
 * at most prefix_tokens tokens, ends at the separator when there is one, and equals the key of
 * exactly the tokens it covers. Any violation aborts.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cache/kv_cache.h"
#include "harness.h"
#include "radix_mlp.h"
#include "tiny_load.h"

#define IDS 24
#define MAX_LEN 20

#define MAX_BATCH_TOKENS 48 /* max_tokens is a byte % 48; an oversized batch is one request */

static const char TARGET[] = "fuzz_batcher";

static rmlp_model *tiny; /* loaded once per process: the contexts the batchers get attached */
static rmlp_planner *planner;
static float out[MAX_BATCH_TOKENS * FUZZ_TINY_HIDDEN];

typedef struct model {
    uint32_t tokens[IDS][MAX_LEN];
    uint32_t len[IDS];
    uint64_t arrival[IDS], pushed_at[IDS]; /* pushed_at: push number (the plain queue's order) */
    int queued[IDS];
    uint32_t n, live, cap_requests, cap_tokens;
    uint64_t pushes;
} model;

static void fail(const char *what, int op) {
    char detail[64];
    snprintf(detail, sizeof detail, "operation %d", op);
    fuzz_violation(TARGET, what, detail);
}

/* The tiny model (tiny_load.h) and a planner. */
static int setup(void) {
    return fuzz_tiny_model_load(TARGET, 33, &tiny) == 0 && rmlp_planner_create(&planner) == RMLP_OK ? 0 : -1;
}

/* A context whose prefix cache holds `slots` rows of the tiny model; NULL on failure. */
static rmlp_context *cached_context(uint32_t slots) {
    rmlp_model_config cfg;
    rmlp_model_get_config(tiny, &cfg);
    rmlp_context_params params = rmlp_context_default_params();
    uint64_t slot = kv_cache_slot_bytes(&cfg, sizeof(float));
    params.cache_bytes = slots * slot + slot / 2;
    rmlp_context *ctx = NULL;
    return rmlp_context_create_with_params(tiny, MAX_BATCH_TOKENS, &params, &ctx) == RMLP_OK ? ctx : NULL;
}

/* Runs the batch on ctx; its cached_tokens must be the hits the forward counts, unless the forward
 * bypassed the cache (its new rows did not fit). */
static void run_on_context(rmlp_context *ctx, const rmlp_batch *batch, int op) {
    rmlp_plan plan;
    rmlp_plan_params params = rmlp_plan_default_params();
    params.threshold = 1.0; /* the compact rows are the distinct paths, as the batcher counts them */
    rmlp_cache_stats before, after;
    if (rmlp_context_cache_stats(ctx, &before) != RMLP_OK ||
        rmlp_plan_build(planner, batch->input_ids, batch->position_ids, batch->n_tokens, batch->cu_seqlens,
                        batch->n_seqs, &params, &plan) != RMLP_OK ||
        rmlp_forward(ctx, &plan, NULL, NULL, out) != RMLP_OK || rmlp_context_cache_stats(ctx, &after) != RMLP_OK)
        fuzz_violation(TARGET, "a batch did not run on the attached context", rmlp_last_error());
    if (after.bypassed == before.bypassed && after.hit_tokens - before.hit_tokens != batch->cached_tokens)
        fail("cached_tokens is not what the forward found cached", op);
    if (after.bypassed == before.bypassed && after.lookups - before.lookups != plan.n_distinct)
        fail("the forward looked up other rows than the batch's distinct paths", op);
}

static uint8_t byte_at(const uint8_t *data, size_t size, size_t *at) { return *at < size ? data[(*at)++] : 0; }

static void push(rmlp_batcher *b, model *m, const uint8_t *data, size_t size, size_t *at, uint64_t now, int op) {
    uint32_t id = byte_at(data, size, at) % IDS, len = byte_at(data, size, at) % (MAX_LEN + 1), tokens[MAX_LEN];
    for (uint32_t t = 0; t < len; t++) {
        tokens[t] = 1 + (*at < size ? data[*at] >> (4 * (t % 2)) : 0) % 4;
        *at += t % 2 == 1 || t + 1 == len;
    }
    uint64_t arrival = now - (now > 3 ? now % 4 : 0);
    rmlp_status want = RMLP_OK; /* in the order the library checks */
    if (len == 0) want = RMLP_ERR_INVALID_ARGUMENT;
    else if (len > m->cap_tokens) want = RMLP_ERR_TOO_LARGE;
    else if (m->queued[id]) want = RMLP_ERR_INVALID_ARGUMENT;
    else if (m->n == m->cap_requests || m->live + len > m->cap_tokens) want = RMLP_ERR_FULL;
    rmlp_status got = rmlp_batcher_push(b, id, tokens, len, arrival);
    if (got != want) fail("a push's status is not the model's", op);
    if (got != RMLP_OK && rmlp_last_error()[0] == '\0') fail("a refused push without a message", op);
    if (got != RMLP_OK) return;
    memcpy(m->tokens[id], tokens, len * sizeof(uint32_t));
    m->len[id] = len, m->arrival[id] = arrival, m->pushed_at[id] = m->pushes++, m->queued[id] = 1;
    m->n++, m->live += len;
}

static int aged(const model *m, uint32_t id, uint64_t now, uint64_t max_wait) {
    return now >= m->arrival[id] && now - m->arrival[id] >= max_wait;
}

/* The compact rows request id adds to the requests set[0..n): its tokens beyond its longest
 * common prefix with any of them (summed over a set in any order: its N'). */
static uint32_t rows_added(const model *m, uint32_t id, const uint32_t *set, uint32_t n) {
    uint32_t best = 0;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t common = 0, len = m->len[set[k]] < m->len[id] ? m->len[set[k]] : m->len[id];
        while (common < len && m->tokens[set[k]][common] == m->tokens[id][common]) common++;
        if (common > best) best = common;
    }
    return m->len[id] - best;
}

/* Whether request id fits the budgets left by the requests set[0..n): its tokens, and the rows it
 * adds to theirs (N' of the set with it, at least what it adds to any subset taken before). */
static int fits_after(const model *m, uint32_t id, const uint32_t *set, uint32_t n, size_t max_tokens,
                      size_t max_rows) {
    uint64_t tokens = m->len[id], rows = rows_added(m, id, set, n);
    for (uint32_t k = 0; k < n; k++) tokens += m->len[set[k]], rows += rows_added(m, set[k], set, k);
    return tokens <= max_tokens && rows <= max_rows;
}

/* The plain queue's next batch into want (ids): push order up to the first that does not fit its
 * tokens or rows, an oversized head alone; its size. */
static uint32_t fifo_batch(const model *m, size_t max_tokens, size_t max_rows, size_t max_seqs, uint32_t *want) {
    uint32_t n = 0;
    for (uint64_t p = 0; p < m->pushes && n < max_seqs; p++)
        for (uint32_t id = 0; id < IDS; id++) {
            if (!m->queued[id] || m->pushed_at[id] != p) continue;
            int fit = fits_after(m, id, want, n, max_tokens, max_rows);
            if (!fit && n > 0) return n;
            want[n++] = id;
            if (!fit) return n;
        }
    return n;
}

/* rows_call: rmlp_batcher_next_rows, else rmlp_batcher_next (max_rows is then max_tokens). */
static void next(rmlp_batcher *b, model *m, rmlp_context *ctx, int fifo, uint64_t max_wait, int rows_call,
                 size_t max_tokens, size_t max_rows, size_t max_seqs, uint64_t now, int op) {
    uint32_t want[IDS], n_want = fifo ? fifo_batch(m, max_tokens, max_rows, max_seqs, want) : 0;
    rmlp_batch batch;
    rmlp_status got = rows_call ? rmlp_batcher_next_rows(b, max_tokens, max_rows, max_seqs, now, &batch)
                                : rmlp_batcher_next(b, max_tokens, max_seqs, now, &batch);
    if (max_tokens == 0 || max_rows == 0 || max_seqs == 0) {
        if (got != RMLP_ERR_INVALID_ARGUMENT || rmlp_last_error()[0] == '\0') fail("a zero budget was not refused", op);
        return;
    }
    if (got != RMLP_OK) fail("next failed", op);
    if ((batch.n_seqs == 0) != (m->n == 0)) fail("an empty batch from a queue, or the reverse", op);
    if (batch.n_seqs > max_seqs) fail("more sequences than max_seqs", op);
    if (batch.shared_tokens > batch.n_tokens || batch.cu_seqlens[0] != 0) fail("counts", op);
    int over = batch.n_tokens > max_tokens || batch.n_tokens - batch.shared_tokens > max_rows;
    if (over && batch.n_seqs != 1) fail("more tokens than max_tokens or rows than max_rows", op);
    if (over != ((batch.flags & RMLP_BATCH_OVERSIZED) != 0)) fail("flagged oversized, or not, wrongly", op);
    if (fifo && batch.n_seqs != n_want) fail("a FIFO batch is not the plain queue's", op);
    if (batch.flags & RMLP_BATCH_CACHE_SKIPPED) fail("the cache was skipped with no other thread", op);
    if (ctx == NULL && batch.cached_tokens != 0) fail("cached tokens without a cache", op);
    uint32_t aged_ids[IDS], n_aged = 0;
    for (uint32_t s = 0; s < batch.n_seqs; s++) {
        uint64_t id = batch.ids[s];
        if (id >= IDS || !m->queued[id]) fail("a batch holds a request that is not queued", op);
        if (fifo && id != want[s]) fail("a FIFO batch is not in push order", op);
        uint32_t start = batch.cu_seqlens[s], len = batch.cu_seqlens[s + 1] - start;
        if (len != m->len[id] || batch.arrival_us[s] != m->arrival[id]) fail("a request's length or arrival", op);
        for (uint32_t t = 0; t < len; t++)
            if (batch.input_ids[start + t] != m->tokens[id][t] || batch.position_ids[start + t] != t)
                fail("a request's tokens or positions", op);
        if (!fifo && aged(m, (uint32_t)id, now, max_wait)) aged_ids[n_aged++] = (uint32_t)id;
        m->queued[id] = 0, m->n--, m->live -= len;
    }
    if (n_aged != batch.n_aged) fail("n_aged", op);
    if (!fifo && !(batch.flags & RMLP_BATCH_OVERSIZED) && n_aged < max_seqs)
        for (uint32_t id = 0; id < IDS; id++)
            if (m->queued[id] && aged(m, id, now, max_wait) &&
                fits_after(m, id, aged_ids, n_aged, max_tokens, max_rows)) /* rows: added to the aged ones */
                fail("an aged request that fits was left behind", op);
    /* With a cache attached and nothing aged (aged requests bring their groups), the oldest first,
     * each that fits (batch/select.h): a request left behind did not fit the room that the requests
     * taken of its arrival time or older left. */
    if (ctx != NULL && !fifo && n_aged == 0 && !(batch.flags & RMLP_BATCH_OVERSIZED))
        for (uint32_t id = 0; id < IDS; id++) {
            if (!m->queued[id]) continue;
            uint32_t older[IDS], seqs = 0;
            for (uint32_t s = 0; s < batch.n_seqs; s++)
                if (batch.arrival_us[s] <= m->arrival[id]) older[seqs++] = (uint32_t)batch.ids[s];
            if (seqs < max_seqs && fits_after(m, id, older, seqs, max_tokens, max_rows))
                fail("a request that fit was left behind for newer ones", op);
        }
    if (ctx != NULL && batch.n_seqs > 0) run_on_context(ctx, &batch, op);
}

static void route(const model *m, uint32_t id, uint8_t knob, int op) {
    rmlp_route_params params = rmlp_route_default_params();
    params.prefix_tokens = 1 + knob % 24;
    params.use_separator = (knob & 0x80) != 0;
    params.separator = 1 + (knob >> 5) % 4;
    uint64_t key = 0, exact = 0;
    size_t covered = 0, all = 0;
    rmlp_route_params whole = rmlp_route_default_params();
    whole.prefix_tokens = UINT32_MAX;
    if (rmlp_route_key(m->tokens[id], m->len[id], &params, &key, &covered) != RMLP_OK ||
        rmlp_route_key(m->tokens[id], covered, &whole, &exact, &all) != RMLP_OK)
        fail("rmlp_route_key failed", op);
    if (covered > params.prefix_tokens || covered > m->len[id] || all != covered || key != exact)
        fail("the key does not cover its prefix", op);
    int ends_at_separator = covered > 0 && m->tokens[id][covered - 1] == params.separator;
    for (size_t t = 0; params.use_separator && t + 1 < covered; t++)
        if (m->tokens[id][t] == params.separator) fail("the key passes the separator", op);
    if (params.use_separator && !ends_at_separator && covered < params.prefix_tokens && covered < m->len[id])
        fail("the key stops short", op);
    char text[RMLP_ROUTE_KEY_CHARS];
    if (rmlp_route_key_format(key, text, sizeof text) != RMLP_OK || strlen(text) != 16) fail("format", op);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    if (tiny == NULL && setup() != 0) fuzz_violation(TARGET, "setup", rmlp_last_error());
    static const uint32_t slots[4] = {4, 12, 40, 200};
    rmlp_context *ctx = data[0] & 0x20 ? cached_context(slots[data[0] >> 6]) : NULL;
    if ((data[0] & 0x20) && ctx == NULL) fuzz_violation(TARGET, "a context with a cache", rmlp_last_error());
    static model m;
    memset(&m, 0, sizeof m);
    int fifo = data[0] & 1;
    m.cap_requests = 1 + (data[0] >> 1) % 16, m.cap_tokens = 1 + data[1] % 96;
    uint64_t max_wait = data[2];
    rmlp_batcher_params params = rmlp_batcher_default_params();
    params.mode = fifo ? RMLP_BATCH_FIFO : RMLP_BATCH_PREFIX;
    params.max_requests = m.cap_requests, params.max_queued_tokens = m.cap_tokens, params.max_wait_us = max_wait;
    rmlp_batcher *b = NULL;
    if (rmlp_batcher_create(&params, &b) != RMLP_OK || (ctx != NULL && rmlp_batcher_attach_context(b, ctx) != RMLP_OK))
        fail("create or attach failed", -1);
    uint64_t now = 0;
    uint32_t last_id = IDS;
    size_t at = 3;
    for (int op = 0; at < size; op++) {
        uint8_t code = data[at++];
        now += code >> 2;
        switch (code & 3) {
        case 0: {
            uint32_t id = at < size ? data[at] % IDS : 0;
            push(b, &m, data, size, &at, now, op);
            if (m.queued[id]) last_id = id;
            break;
        }
        case 1: {
            uint8_t tokens_byte = byte_at(data, size, &at);
            size_t max_tokens = tokens_byte % 48, max_seqs = byte_at(data, size, &at) % 9, max_rows = max_tokens;
            int rows_call = tokens_byte >= 48;
            if (rows_call) {
                uint8_t rows_byte = byte_at(data, size, &at);
                max_rows = rows_byte == 255 ? SIZE_MAX : rows_byte % 64u;
            }
            next(b, &m, ctx, fifo, max_wait, rows_call, max_tokens, max_rows, max_seqs, now, op);
            break;
        }
        case 2: {
            uint32_t id = byte_at(data, size, &at) % IDS;
            rmlp_status got = rmlp_batcher_remove(b, id);
            if (got != (m.queued[id] ? RMLP_OK : RMLP_ERR_INVALID_ARGUMENT)) fail("remove's status", op);
            if (got == RMLP_OK) m.queued[id] = 0, m.n--, m.live -= m.len[id];
            break;
        }
        default:
            if (last_id < IDS) route(&m, last_id, byte_at(data, size, &at), op);
        }
        size_t pending = 0, tokens = 0;
        if (rmlp_batcher_pending(b, &pending, &tokens) != RMLP_OK || pending != m.n || tokens != m.live)
            fail("pending disagrees with the model", op);
    }
    rmlp_batcher_free(b);
    rmlp_context_free(ctx);
    return 0;
}
