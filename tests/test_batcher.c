/*
 * test_batcher.c: the batcher's choices on small queues checked by hand (FIFO, grouping by the
 * deepest shared prefix, the age bound and aged groups, oversized requests, the budgets in sequences
 * and compact rows), its bad
 * input (each refusal with its status and message, the queue unchanged), and the routing key
 * against values computed by a separate implementation (Python, in the comments).
 * tests/test_batcher_traces.c checks the properties on random traces.
 */
#include <stdbool.h>

#include "test_util.h"

#define IDS(...) ((const uint64_t[]){__VA_ARGS__}), (sizeof((const uint64_t[]){__VA_ARGS__}) / sizeof(uint64_t))
#define TOKENS(...) ((const uint32_t[]){__VA_ARGS__}), (sizeof((const uint32_t[]){__VA_ARGS__}) / sizeof(uint32_t))

static rmlp_batcher *make(rmlp_batch_mode mode, uint32_t max_requests, uint32_t max_tokens, uint64_t max_wait) {
    rmlp_batcher_params params = rmlp_batcher_default_params();
    params.mode = mode, params.max_requests = max_requests, params.max_queued_tokens = max_tokens;
    params.max_wait_us = max_wait;
    rmlp_batcher *b = NULL;
    CHECK(rmlp_batcher_create(&params, &b) == RMLP_OK && b != NULL, "create: %s", rmlp_last_error());
    return b;
}

static void push(rmlp_batcher *b, uint64_t id, const uint32_t *tokens, size_t n, uint64_t arrival) {
    CHECK(rmlp_batcher_push(b, id, tokens, n, arrival) == RMLP_OK, "push id %llu: %s", (unsigned long long)id,
          rmlp_last_error());
}

/* The next batch (rmlp_batcher_next, or with max_rows != 0 rmlp_batcher_next_rows) holds exactly
 * `want` (n) in this order. */
static rmlp_batch expect_batch_rows(const char *what, rmlp_batcher *b, size_t max_tokens, size_t max_rows,
                                    size_t max_seqs, uint64_t now, const uint64_t *want, size_t n) {
    rmlp_batch batch;
    rmlp_status status = max_rows ? rmlp_batcher_next_rows(b, max_tokens, max_rows, max_seqs, now, &batch)
                                  : rmlp_batcher_next(b, max_tokens, max_seqs, now, &batch);
    if (!CHECK(status == RMLP_OK, "%s: %s", what, rmlp_last_error())) return batch;
    int same = batch.n_seqs == n;
    for (size_t i = 0; same && i < n; i++) same = batch.ids[i] == want[i];
    char got[256] = "", wanted[256] = "";
    for (size_t i = 0, used = 0; i < batch.n_seqs && used < sizeof got; i++)
        used += (size_t)snprintf(got + used, sizeof got - used, " %llu", (unsigned long long)batch.ids[i]);
    for (size_t i = 0, used = 0; i < n && used < sizeof wanted; i++)
        used += (size_t)snprintf(wanted + used, sizeof wanted - used, " %llu", (unsigned long long)want[i]);
    CHECK(same, "%s: batch [%s ] want [%s ]", what, got, wanted);
    CHECK(batch.cu_seqlens[0] == 0 && batch.cu_seqlens[batch.n_seqs] == batch.n_tokens, "%s: cu_seqlens", what);
    return batch;
}

static rmlp_batch expect_batch(const char *what, rmlp_batcher *b, size_t max_tokens, size_t max_seqs, uint64_t now,
                               const uint64_t *want, size_t n) {
    return expect_batch_rows(what, b, max_tokens, 0, max_seqs, now, want, n);
}

static void expect_status(const char *what, rmlp_status got, rmlp_status want, const char *substring) {
    CHECK(got == want && strstr(rmlp_last_error(), substring) != NULL, "%s: status %d (want %d), message '%s' (want '%s')",
          what, got, want, rmlp_last_error(), substring);
}

static void expect_pending(rmlp_batcher *b, size_t requests, size_t tokens, const char *what) {
    size_t n = 0, t = 0;
    CHECK(rmlp_batcher_pending(b, &n, &t) == RMLP_OK && n == requests && t == tokens,
          "%s: %zu requests of %zu tokens pending, want %zu of %zu", what, n, t, requests, tokens);
}

/* A plain queue: push order, up to the first request that does not fit; an oversized head alone. */
static void test_fifo(void) {
    rmlp_batcher *b = make(RMLP_BATCH_FIFO, 16, 256, 0); /* max_wait_us 0: ignored by FIFO */
    push(b, 1, TOKENS(1, 2, 3), 0);
    push(b, 2, TOKENS(1, 2, 3, 4, 5, 6), 1);
    push(b, 3, TOKENS(1, 2), 2);
    expect_batch("fifo stops at the first that does not fit", b, 8, 8, 10, IDS(1));
    expect_batch("fifo fills exactly", b, 8, 8, 10, IDS(2, 3));
    push(b, 4, TOKENS(9, 9, 9, 9, 9, 9, 9, 9, 9, 9), 3);
    push(b, 5, TOKENS(1), 4);
    rmlp_batch batch = expect_batch("fifo: an oversized head goes alone", b, 8, 8, 10, IDS(4));
    CHECK(batch.flags & RMLP_BATCH_OVERSIZED, "flags %u", batch.flags);
    push(b, 6, TOKENS(1), 5);
    push(b, 7, TOKENS(2), 6);
    expect_batch("fifo: max_seqs", b, 8, 2, 10, IDS(5, 6));
    batch = expect_batch("fifo: the last", b, 8, 2, 10, IDS(7));
    CHECK(batch.flags == 0, "flags %u", batch.flags);
    batch = expect_batch("fifo: empty", b, 8, 2, 10, NULL, 0);
    CHECK(batch.n_tokens == 0 && batch.cu_seqlens != NULL, "empty batch: %u tokens", batch.n_tokens);
    rmlp_batcher_free(b);
}

/* Two rerank queries interleaved with other traffic: prefix batching groups each query's passages,
 * the deepest shared prefix first, and fills with the oldest of the rest. */
static void test_groups(void) {
    for (int mode = 0; mode < 2; mode++) {
        rmlp_batcher *b = make(mode ? RMLP_BATCH_FIFO : RMLP_BATCH_PREFIX, 16, 256, UINT64_MAX);
        push(b, 10, TOKENS(1, 2, 3, 10), 0); /* query 1, passage 10 */
        push(b, 20, TOKENS(7, 8, 9), 1);     /* unrelated */
        push(b, 30, TOKENS(4, 5, 6, 20), 2); /* query 2 */
        push(b, 11, TOKENS(1, 2, 3, 11), 3);
        push(b, 31, TOKENS(4, 5, 6, 21), 4);
        push(b, 12, TOKENS(1, 2, 3, 12), 5);
        if (mode == 0) {
            rmlp_batch batch = expect_batch("prefix: query 1 first (oldest of the deepest)", b, 12, 8, 100,
                                            IDS(10, 11, 12));
            CHECK_EQ(batch.shared_tokens, 6, "two passages repeat the query's 3 tokens");
            CHECK_EQ(batch.n_tokens, 12, "tokens");
            batch = expect_batch("prefix: query 2, then the oldest of the rest", b, 12, 8, 100, IDS(30, 31, 20));
            CHECK_EQ(batch.shared_tokens, 3, "one passage repeats query 2");
        } else {
            rmlp_batch batch = expect_batch("fifo: push order", b, 12, 8, 100, IDS(10, 20, 30));
            CHECK_EQ(batch.shared_tokens, 0, "nothing shared");
            expect_batch("fifo: the rest", b, 12, 8, 100, IDS(11, 31, 12));
        }
        rmlp_batcher_free(b);
    }
    /* A pair sharing 6 tokens before a trio sharing 2: the deeper pair first, then a seed of the trio. */
    rmlp_batcher *b = make(RMLP_BATCH_PREFIX, 16, 256, UINT64_MAX);
    push(b, 1, TOKENS(5, 5, 1, 1, 1, 1, 1, 1), 0);
    push(b, 2, TOKENS(5, 5, 2, 2, 2, 2, 2, 2), 1);
    push(b, 3, TOKENS(5, 5, 3, 3, 3, 3, 3, 3), 2);
    push(b, 4, TOKENS(9, 9, 9, 9, 9, 9, 4, 4), 3);
    push(b, 5, TOKENS(9, 9, 9, 9, 9, 9, 5, 5), 4);
    /* The trio (24 tokens) does not fit whole in the 8 left: it is not split (its shared 2 tokens
     * would be computed twice), it goes whole next. */
    rmlp_batch batch = expect_batch("deepest pair; the trio left whole", b, 24, 8, 10, IDS(4, 5));
    CHECK_EQ(batch.shared_tokens, 6, "the pair shares 6");
    batch = expect_batch("the trio, whole", b, 24, 8, 10, IDS(1, 2, 3));
    CHECK_EQ(batch.shared_tokens, 4, "2 + 2 shared");
    /* A group larger than the budget is cut at its shallowest branch: the sub-group sharing 5 tokens
     * goes whole before the members sharing only 3. */
    push(b, 6, TOKENS(7, 7, 7, 1, 9, 9), 5);
    push(b, 7, TOKENS(7, 7, 7, 2, 2, 1), 6);
    push(b, 8, TOKENS(7, 7, 7, 2, 2, 3), 7);
    push(b, 9, TOKENS(7, 7, 7, 2, 2, 2), 8);
    push(b, 10, TOKENS(7, 7, 7, 3, 9, 9), 9);
    batch = expect_batch("the deepest sub-group first", b, 18, 8, 10, IDS(7, 9, 8));
    CHECK_EQ(batch.shared_tokens, 10, "5 + 5");
    batch = expect_batch("then the rest", b, 18, 8, 10, IDS(6, 10));
    CHECK_EQ(batch.shared_tokens, 3, "3");
    rmlp_batcher_free(b);
}

/* A request that waited max_wait_us is taken first whatever its prefix; its group follows it. */
static void test_age(void) {
    rmlp_batcher *b = make(RMLP_BATCH_PREFIX, 16, 256, 100);
    push(b, 1, TOKENS(9, 9, 9, 9), 0);     /* old, unrelated */
    push(b, 2, TOKENS(1, 2, 3, 4), 150);   /* a group of three sharing 3 tokens */
    push(b, 3, TOKENS(1, 2, 3, 5), 150);
    push(b, 4, TOKENS(1, 2, 3, 6), 150);
    push(b, 5, TOKENS(8, 1, 2, 3, 4), 40); /* aged too (age 160 at now=200), younger than 1 */
    /* The group (12 tokens) does not fit whole in the 4 left after the aged ones: it waits, whole. */
    rmlp_batch batch = expect_batch("aged first; the group left whole", b, 13, 8, 200, IDS(5, 1));
    CHECK(batch.flags & RMLP_BATCH_AGED, "flags %u", batch.flags);
    CHECK_EQ(batch.n_aged, 2, "two aged requests");
    batch = expect_batch("then the group", b, 12, 8, 200, IDS(2, 3, 4));
    CHECK_EQ(batch.n_aged, 0, "none aged");
    CHECK_EQ(batch.flags, 0, "no flag");
    /* An aged request pulls its own group along: it is a seed like any other. */
    push(b, 6, TOKENS(4, 4, 4, 1), 0);
    push(b, 7, TOKENS(1, 1, 1, 1, 1), 300);
    push(b, 8, TOKENS(1, 1, 1, 1, 2), 300);
    push(b, 9, TOKENS(4, 4, 4, 2), 300);
    expect_batch("the aged one, then its group", b, 8, 8, 320, IDS(6, 9));
    expect_batch("the rest", b, 20, 8, 320, IDS(7, 8));
    /* An aged request that does not fit the room left waits for the next batch; the older first. */
    push(b, 10, TOKENS(1, 1, 1, 1, 1, 1), 0);
    push(b, 11, TOKENS(2, 2), 1);
    push(b, 12, TOKENS(3, 3, 3, 3, 3, 3, 3), 2);
    expect_batch("aged that fit", b, 8, 8, 500, IDS(10, 11));
    expect_batch("the next aged", b, 8, 8, 500, IDS(12));
    /* An oversized request: alone once it is the oldest aged, left while others fit before. */
    push(b, 13, TOKENS(5, 5, 5, 5, 5, 5, 5, 5, 5, 5), 1000);
    push(b, 14, TOKENS(6, 6), 1001);
    batch = expect_batch("others before an oversized one", b, 8, 8, 1010, IDS(14));
    CHECK_EQ(batch.flags, 0, "not flagged");
    push(b, 15, TOKENS(6, 6), 1020);
    batch = expect_batch("an oversized aged one alone", b, 8, 8, 1200, IDS(13));
    CHECK_EQ(batch.flags, RMLP_BATCH_OVERSIZED | RMLP_BATCH_AGED, "flags");
    push(b, 16, TOKENS(5, 5, 5, 5, 5, 5, 5, 5, 5, 5), 1200);
    expect_batch("the one that fits", b, 8, 8, 1200, IDS(15));
    batch = expect_batch("nothing else fits: oversized alone", b, 8, 8, 1200, IDS(16));
    CHECK_EQ(batch.flags, RMLP_BATCH_OVERSIZED, "flags");
    rmlp_batcher_free(b);
}

/* Aged requests go first, oldest first, each pulling its aged group along (an aged neighbour that
 * shares more with the batch than the next oldest goes before it). */
static void test_aged_pull(void) {
    rmlp_batcher *b = make(RMLP_BATCH_PREFIX, 16, 256, 100);
    push(b, 20, TOKENS(3, 3, 3, 3, 1), 0);
    push(b, 21, TOKENS(8, 8, 8, 8, 8), 1);
    push(b, 22, TOKENS(3, 3, 3, 3, 2), 2);
    push(b, 23, TOKENS(3, 3, 3, 3, 3), 3);
    push(b, 24, TOKENS(3, 3, 3, 3, 4), 400); /* of the group, not aged at 500: after the aged ones */
    rmlp_batch batch = expect_batch("the oldest aged, then its aged group", b, 15, 8, 500, IDS(20, 22, 23));
    CHECK_EQ(batch.n_aged, 3, "three aged");
    CHECK_EQ(batch.shared_tokens, 8, "4 + 4");
    expect_batch("the aged one left, then the rest", b, 15, 8, 500, IDS(24, 21));
    rmlp_batcher_free(b);
}

/* The budget in compact rows (rmlp_batcher_next_rows): a request costs its tokens beyond its longest
 * common prefix with the batch. */
static void test_rows(void) {
    rmlp_batcher *b = make(RMLP_BATCH_FIFO, 16, 256, 0);
    push(b, 1, TOKENS(1, 2, 3, 4, 5, 6, 7, 8), 0);
    push(b, 2, TOKENS(1, 2, 3, 4, 5, 6, 7, 9), 0);
    push(b, 3, TOKENS(9, 9, 9, 9), 0);
    rmlp_batch batch = expect_batch_rows("fifo: 8 + 1 rows", b, 100, 9, 8, 0, IDS(1, 2));
    CHECK(batch.n_tokens == 16 && batch.shared_tokens == 7 && batch.flags == 0, "tokens %u, shared %u, flags %u",
          batch.n_tokens, batch.shared_tokens, batch.flags);
    expect_batch("the tokens budget alone takes one", b, 9, 8, 0, IDS(3));
    push(b, 4, TOKENS(1, 1, 1, 1), 0);
    push(b, 5, TOKENS(2, 2, 2, 2, 2, 2), 0);
    push(b, 6, TOKENS(1, 1, 1, 2), 0);
    push(b, 7, TOKENS(4, 4, 4, 4, 4, 4, 4, 4, 4, 4), 0);
    expect_batch_rows("fifo stops at the first that does not fit its rows", b, 100, 8, 8, 0, IDS(4));
    expect_batch_rows("then one (its 6 rows leave 2)", b, 100, 8, 8, 0, IDS(5));
    expect_batch_rows("one", b, 100, 8, 8, 0, IDS(6));
    batch = expect_batch_rows("longer than max_rows: alone", b, 100, 8, 8, 0, IDS(7));
    CHECK_EQ(batch.flags, RMLP_BATCH_OVERSIZED, "flags");
    rmlp_batcher_free(b);
    /* Prefix: a query's four passages (6 + 4 x 2 = 14 rows, 32 tokens) fit 14 rows in one batch; FIFO
     * takes one and stops at the unrelated request. */
    for (int fifo = 0; fifo < 2; fifo++) {
        b = make(fifo ? RMLP_BATCH_FIFO : RMLP_BATCH_PREFIX, 16, 256, 1000);
        push(b, 10, TOKENS(5, 5, 5, 5, 5, 5, 1, 1), 0);
        push(b, 11, TOKENS(7, 7, 7, 7, 7, 7, 7, 7), 0);
        push(b, 12, TOKENS(5, 5, 5, 5, 5, 5, 2, 2), 0);
        push(b, 13, TOKENS(5, 5, 5, 5, 5, 5, 3, 3), 0);
        push(b, 14, TOKENS(5, 5, 5, 5, 5, 5, 4, 4), 0);
        if (fifo) {
            expect_batch_rows("fifo: the first query passage", b, 64, 14, 8, 0, IDS(10));
        } else {
            batch = expect_batch_rows("prefix: the whole query in 14 rows", b, 64, 14, 8, 0, IDS(10, 12, 13, 14));
            CHECK(batch.n_tokens == 32 && batch.shared_tokens == 18, "tokens %u, shared %u", batch.n_tokens,
                  batch.shared_tokens);
            expect_batch_rows("prefix: then the other", b, 64, 14, 8, 0, IDS(11));
        }
        rmlp_batcher_free(b);
    }
}

/* A request a batch passed over goes, with its group, before groups that arrived since, however
 * deep; and a cluster's neighbour goes before an older passed-over request only when it saves more
 * than that one would. */
static void test_passed_over(void) {
    rmlp_batcher *b = make(RMLP_BATCH_PREFIX, 16, 256, UINT64_MAX);
    push(b, 1, TOKENS(9, 9, 9, 1), 0); /* a pair sharing 3 */
    push(b, 2, TOKENS(9, 9, 9, 2), 0);
    push(b, 3, TOKENS(5, 5, 5, 5, 5, 5, 1), 1); /* a pair sharing 6 */
    push(b, 4, TOKENS(5, 5, 5, 5, 5, 5, 2), 1);
    expect_batch("a fresh queue: the deepest pair", b, 14, 8, 10, IDS(3, 4));
    push(b, 5, TOKENS(5, 5, 5, 5, 5, 5, 3), 2); /* a new pair sharing 6 */
    push(b, 6, TOKENS(5, 5, 5, 5, 5, 5, 4), 2);
    rmlp_batch batch = expect_batch("the passed-over pair before the deeper new one", b, 14, 8, 10, IDS(1, 2));
    CHECK_EQ(batch.shared_tokens, 3, "the pair's 3 tokens");
    expect_batch("then the new pair", b, 14, 8, 10, IDS(5, 6));

    push(b, 7, TOKENS(2, 2, 2, 2, 1), 20); /* p1 */
    push(b, 8, TOKENS(8, 8, 8, 8), 21);    /* x: shares nothing */
    push(b, 9, TOKENS(2, 2, 2, 2, 2), 22); /* p2: saves 4 of its 5 tokens next to p1 */
    push(b, 10, TOKENS(6, 6, 6, 6, 6, 6, 1), 23); /* a deeper pair, taken first */
    push(b, 11, TOKENS(6, 6, 6, 6, 6, 6, 2), 23);
    expect_batch("the deepest pair", b, 14, 8, 30, IDS(10, 11));
    expect_batch("p1, then p2 (saves 4) before the older x (saves 0)", b, 10, 8, 30, IDS(7, 9));
    expect_batch("x", b, 10, 8, 30, IDS(8));

    push(b, 12, TOKENS(3, 3, 3, 1), 40); /* passed over below: q1 */
    push(b, 13, TOKENS(7, 7), 41);       /* y */
    push(b, 14, TOKENS(3, 3, 3, 2), 42); /* q2 */
    push(b, 15, TOKENS(4, 4, 4, 4, 4, 4, 1), 43);
    push(b, 16, TOKENS(4, 4, 4, 4, 4, 4, 2), 43);
    expect_batch("the deepest pair again", b, 14, 8, 50, IDS(15, 16));
    push(b, 17, TOKENS(3, 3, 3, 3), 51); /* new, and shares 3 with q1 and q2 */
    expect_batch("q1, its group, the new one sharing with it, then y", b, 14, 8, 60, IDS(12, 14, 17, 13));
    rmlp_batcher_free(b);
}

/* A batch does not start a group it cannot hold whole: it takes the groups that fit and leaves
 * the room when nothing else fits whole (rerank queries of long prompts: splitting a query's
 * passages over two batches computes its prompt twice). T: a template all share; A, B, C: queries. */
static void test_whole_groups(void) {
    rmlp_batcher *b = make(RMLP_BATCH_PREFIX, 16, 256, UINT64_MAX);
    push(b, 1, TOKENS(7, 7, 1, 1, 1, 1, 10), 0); /* T A p */
    push(b, 2, TOKENS(7, 7, 2, 2, 2, 2, 20), 1); /* T B p: B's three passages, 21 tokens */
    push(b, 3, TOKENS(7, 7, 3, 3, 3, 3, 30), 2); /* T C p: C's only passage */
    push(b, 4, TOKENS(7, 7, 1, 1, 1, 1, 11), 3);
    push(b, 5, TOKENS(7, 7, 2, 2, 2, 2, 21), 4);
    push(b, 6, TOKENS(7, 7, 2, 2, 2, 2, 22), 5);
    /* A (14 tokens) first; of the 14 left, B's passages share the template with A but B does not
     * fit whole: C (the template too, and nothing of its own to split) instead, and 7 tokens left
     * empty. Before: A's pair, then two of B's (28 tokens), B's prompt computed twice. */
    rmlp_batch batch = expect_batch("A whole, then C, B left whole", b, 28, 8, 10, IDS(1, 4, 3));
    CHECK_EQ(batch.shared_tokens, 6 + 2, "A's prompt once, the template with C");
    CHECK_EQ(batch.n_tokens, 21, "room left rather than a split");
    batch = expect_batch("B whole", b, 28, 8, 10, IDS(2, 5, 6));
    CHECK_EQ(batch.shared_tokens, 12, "B's prompt computed once");
    /* A group larger than a whole budget starts a batch (it is split, cut at its shallowest
     * branches): five of B's passages (35 tokens) under 28. */
    for (uint64_t id = 7; id < 12; id++) push(b, id, TOKENS(7, 7, 2, 2, 2, 2, (uint32_t)id), 20);
    batch = expect_batch("a group larger than the budget", b, 28, 8, 30, IDS(7, 8, 9, 10));
    CHECK_EQ(batch.shared_tokens, 18, "B's prompt once");
    expect_batch("its last passage", b, 28, 8, 30, IDS(11));
    rmlp_batcher_free(b);
}

/* In step 2 a passed-over request pulls along only the other requests passed over: newer ones of
 * its group wait for step 3, after the older passed-over requests of other groups. */
static void test_passed_over_pull(void) {
    rmlp_batcher *b = make(RMLP_BATCH_PREFIX, 16, 256, UINT64_MAX);
    push(b, 1, TOKENS(9, 9, 9, 1), 0); /* x1: instruction X */
    push(b, 2, TOKENS(8, 8, 8, 1), 1); /* y1: instruction Y */
    push(b, 3, TOKENS(5, 5, 5, 5, 5, 5, 1), 2); /* a deep pair, taken first */
    push(b, 4, TOKENS(5, 5, 5, 5, 5, 5, 2), 2);
    expect_batch("the deep pair; x1 and y1 passed over", b, 14, 8, 10, IDS(3, 4));
    push(b, 5, TOKENS(9, 9, 9, 2), 20); /* x2, x3, x4: new, under X */
    push(b, 6, TOKENS(9, 9, 9, 3), 20);
    push(b, 7, TOKENS(9, 9, 9, 4), 20);
    /* x1, then y1 (passed over, older than x2 and x3 though it shares nothing with x1), then x2.
     * Before: x1 pulled x2 and x3 (3 tokens saved each) and y1 waited. */
    rmlp_batch batch = expect_batch("x1, y1, then x1's group", b, 12, 8, 30, IDS(2, 1, 5));
    CHECK_EQ(batch.shared_tokens, 3, "x1 and x2");
    expect_batch("the rest of X", b, 12, 8, 30, IDS(6, 7));
    rmlp_batcher_free(b);
}

/* The batch feeds rmlp_plan_build as it is; its shared tokens are what the planner finds. */
static void test_plan(void) {
    rmlp_batcher *b = make(RMLP_BATCH_PREFIX, 16, 256, UINT64_MAX);
    push(b, 1, TOKENS(1, 2, 3, 4), 0);
    push(b, 2, TOKENS(1, 2, 3), 0);
    push(b, 3, TOKENS(1, 2, 5, 6, 7), 0);
    push(b, 4, TOKENS(1, 2, 3, 4), 0);
    rmlp_batch batch = expect_batch("a prefix, its extension, a copy", b, 64, 8, 0, IDS(2, 1, 4, 3));
    rmlp_planner *planner = NULL;
    rmlp_plan plan;
    rmlp_plan_params params = rmlp_plan_default_params();
    CHECK(rmlp_planner_create(&planner) == RMLP_OK &&
              rmlp_plan_build(planner, batch.input_ids, batch.position_ids, batch.n_tokens, batch.cu_seqlens,
                              batch.n_seqs, &params, &plan) == RMLP_OK,
          "plan: %s", rmlp_last_error());
    CHECK_EQ(batch.shared_tokens, plan.n_tokens - plan.n_distinct, "shared tokens against the planner");
    CHECK_EQ(batch.shared_tokens, 3 + 4 + 2, "by hand");
    for (uint32_t s = 0; s < batch.n_seqs; s++)
        for (uint32_t t = batch.cu_seqlens[s]; t < batch.cu_seqlens[s + 1]; t++)
            CHECK_EQ(batch.position_ids[t], t - batch.cu_seqlens[s], "positions from 0");
    rmlp_planner_free(planner);
    rmlp_batcher_free(b);
}

static void test_bad_input(void) {
    rmlp_batcher *b = make(RMLP_BATCH_PREFIX, 3, 10, 100);
    push(b, 1, TOKENS(1, 2, 3, 4), 0);
    const uint32_t five[] = {1, 2, 3, 4, 5};
    expect_status("an id twice", rmlp_batcher_push(b, 1, five, 2, 0), RMLP_ERR_INVALID_ARGUMENT,
                  "id=1 is already queued");
    expect_status("an empty request", rmlp_batcher_push(b, 2, five, 0, 0), RMLP_ERR_INVALID_ARGUMENT,
                  "request id=2 is empty");
    expect_status("NULL tokens", rmlp_batcher_push(b, 2, NULL, 3, 0), RMLP_ERR_INVALID_ARGUMENT, "token_ids is NULL");
    const uint32_t eleven[11] = {0};
    expect_status("longer than the queue", rmlp_batcher_push(b, 2, eleven, 11, 0), RMLP_ERR_TOO_LARGE,
                  "more than the queue holds (max_queued_tokens=10)");
    push(b, 2, five, 5, 0);
    expect_status("tokens full", rmlp_batcher_push(b, 3, five, 2, 0), RMLP_ERR_FULL, "9 + 2 tokens exceed");
    push(b, 3, five, 1, 0);
    expect_status("requests full", rmlp_batcher_push(b, 4, five, 1, 0), RMLP_ERR_FULL, "3 requests queued");
    expect_pending(b, 3, 10, "after the refusals");
    rmlp_batch batch;
    expect_status("max_tokens 0", rmlp_batcher_next(b, 0, 4, 0, &batch), RMLP_ERR_INVALID_ARGUMENT, "max_tokens is 0");
    expect_status("max_rows 0", rmlp_batcher_next_rows(b, 4, 0, 4, 0, &batch), RMLP_ERR_INVALID_ARGUMENT,
                  "max_rows is 0");
    expect_status("max_seqs 0", rmlp_batcher_next(b, 4, 0, 0, &batch), RMLP_ERR_INVALID_ARGUMENT, "max_seqs is 0");
    expect_status("out NULL", rmlp_batcher_next(b, 4, 4, 0, NULL), RMLP_ERR_INVALID_ARGUMENT, "out is NULL");
    expect_status("remove unknown", rmlp_batcher_remove(b, 99), RMLP_ERR_INVALID_ARGUMENT, "no request with id=99");
    CHECK(rmlp_batcher_remove(b, 2) == RMLP_OK, "remove: %s", rmlp_last_error());
    expect_pending(b, 2, 5, "after removing id 2");
    expect_batch("what is left", b, 16, 4, 0, IDS(3, 1));
    expect_pending(b, 0, 0, "drained");
    CHECK(rmlp_batcher_pending(b, NULL, NULL) == RMLP_OK, "pending with NULLs");

    rmlp_batcher *none = NULL;
    rmlp_batcher_params params = rmlp_batcher_default_params();
    params.max_requests = 0;
    expect_status("no capacity", rmlp_batcher_create(&params, &none), RMLP_ERR_INVALID_ARGUMENT, "max_requests is 0");
    params = rmlp_batcher_default_params();
    params.max_queued_tokens = 0;
    expect_status("no token capacity", rmlp_batcher_create(&params, &none), RMLP_ERR_INVALID_ARGUMENT,
                  "max_queued_tokens is 0");
    params = rmlp_batcher_default_params();
    params.mode = 7;
    expect_status("a mode", rmlp_batcher_create(&params, &none), RMLP_ERR_INVALID_ARGUMENT, "params->mode=7");
    params = rmlp_batcher_default_params();
    params.struct_size = 12;
    expect_status("a struct size", rmlp_batcher_create(&params, &none), RMLP_ERR_INVALID_ARGUMENT,
                  "params->struct_size=12 is not the size of a rmlp_batcher_params");
    params = rmlp_batcher_default_params();
    params.max_requests = 1u << 31;
    expect_status("too many requests", rmlp_batcher_create(&params, &none), RMLP_ERR_TOO_LARGE, "max_requests=");
    CHECK(none == NULL, "out stays NULL");
    expect_status("out NULL", rmlp_batcher_create(NULL, NULL), RMLP_ERR_INVALID_ARGUMENT, "out is NULL");
    CHECK(rmlp_batcher_create(NULL, &none) == RMLP_OK, "defaults: %s", rmlp_last_error());
    rmlp_batcher_free(none);

    expect_status("NULL batcher", rmlp_batcher_push(NULL, 1, five, 1, 0), RMLP_ERR_INVALID_ARGUMENT, "batcher is NULL");
    rmlp_planner *planner = NULL;
    CHECK(rmlp_planner_create(&planner) == RMLP_OK, "planner");
    expect_status("a planner as a batcher", rmlp_batcher_next((rmlp_batcher *)planner, 4, 4, 0, &batch),
                  RMLP_ERR_INVALID_ARGUMENT, "batcher was freed or is not an rmlp_batcher handle");
    expect_status("a batcher as a planner", rmlp_planner_reserve((rmlp_planner *)b, 4, 1, 1),
                  RMLP_ERR_INVALID_ARGUMENT, "planner was freed or is not an rmlp_planner handle");
    rmlp_planner_free(planner);
    rmlp_batcher_free(NULL);
    rmlp_batcher_free(b);
}

/* Keys from an independent implementation (python3: FNV-1a 64 over the ids' little-endian bytes,
 * then fmix64), and which tokens a key covers. */
static void test_route_key(void) {
    static const struct {
        uint32_t ids[5];
        size_t n;
        uint64_t key;
    } known[] = {
        {{0}, 0, 0xefd01f60ba992926ull},
        {{0}, 1, 0x4d33a93727192487ull},
        {{1, 2, 3}, 3, 0xf50e90aae860fe4cull},
        {{151668, 7, 0xFFFFFFFFu}, 3, 0xd6213f7e3208661cull},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        uint64_t key = 0;
        size_t covered = 99;
        CHECK(rmlp_route_key(known[i].ids, known[i].n, NULL, &key, &covered) == RMLP_OK && key == known[i].key &&
                  covered == known[i].n,
              "key %zu: %016llx want %016llx (%zu covered)", i, (unsigned long long)key,
              (unsigned long long)known[i].key, covered);
    }
    uint32_t ids[80];
    for (uint32_t i = 0; i < 80; i++) ids[i] = i;
    uint64_t a = 0, b = 0;
    size_t covered = 0;
    rmlp_route_params params = rmlp_route_default_params();
    CHECK(rmlp_route_key(ids, 80, &params, &a, &covered) == RMLP_OK && covered == 64 && a == 0xa0f727075e90486aull,
          "64 by default");
    CHECK(rmlp_route_key(ids, 64, NULL, &b, NULL) == RMLP_OK && a == b, "the first 64 tokens only");
    params.prefix_tokens = 5;
    CHECK(rmlp_route_key(ids, 80, &params, &a, &covered) == RMLP_OK && covered == 5 && a == 0xd43064948384057aull,
          "the first 5");
    params.prefix_tokens = 64, params.use_separator = true, params.separator = 3;
    CHECK(rmlp_route_key(ids, 80, &params, &a, &covered) == RMLP_OK && covered == 4, "up to the separator");
    CHECK(rmlp_route_key(ids, 4, NULL, &b, NULL) == RMLP_OK && a == b, "the key of the first 4");
    params.separator = 70; /* beyond prefix_tokens: the first 64 */
    CHECK(rmlp_route_key(ids, 80, &params, &a, &covered) == RMLP_OK && covered == 64, "no separator within 64");
    char text[RMLP_ROUTE_KEY_CHARS];
    CHECK(rmlp_route_key_format(0xf50e90aae860fe4cull, text, sizeof text) == RMLP_OK &&
              strcmp(text, "f50e90aae860fe4c") == 0,
          "hex: %s", text);
    CHECK(rmlp_route_key_format(0x1ull, text, sizeof text) == RMLP_OK && strcmp(text, "0000000000000001") == 0,
          "leading zeros: %s", text);
    expect_status("short buffer", rmlp_route_key_format(1, text, 16), RMLP_ERR_INVALID_ARGUMENT, "capacity=16");
    expect_status("NULL out", rmlp_route_key_format(1, NULL, 17), RMLP_ERR_INVALID_ARGUMENT, "out is NULL");
    expect_status("NULL key", rmlp_route_key(ids, 3, NULL, NULL, NULL), RMLP_ERR_INVALID_ARGUMENT, "key is NULL");
    expect_status("NULL ids", rmlp_route_key(NULL, 3, NULL, &a, NULL), RMLP_ERR_INVALID_ARGUMENT, "token_ids is NULL");
    params = rmlp_route_default_params();
    params.prefix_tokens = 0;
    expect_status("zero tokens", rmlp_route_key(ids, 3, &params, &a, NULL), RMLP_ERR_INVALID_ARGUMENT,
                  "prefix_tokens is 0");
    params = rmlp_route_default_params();
    params.struct_size = 4;
    expect_status("struct size", rmlp_route_key(ids, 3, &params, &a, NULL), RMLP_ERR_INVALID_ARGUMENT,
                  "params->struct_size=4");
}

int main(void) {
    test_fifo();
    test_groups();
    test_age();
    test_aged_pull();
    test_rows();
    test_passed_over();
    test_whole_groups();
    test_passed_over_pull();
    test_plan();
    test_bad_input();
    test_route_key();
    return tu_summary();
}
