/*
 * serve_trace.c: the client traffic of serve_trace.h.
 */
#include "serve_trace.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_QUERIES 64
#define PROMPT_MAX (32 + SERVE_QUERY_MAX + 1)

typedef struct rng {
    uint64_t state;
} rng;

static uint64_t next(rng *r) {
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint32_t range(rng *r, uint32_t lo, uint32_t hi) { return lo + (uint32_t)(next(r) % (hi - lo + 1)); }

typedef struct query {
    uint32_t prompt[PROMPT_MAX], prompt_len, passages_left;
} query;

typedef struct maker {
    serve_trace *t;
    rng r;
    uint32_t vocab, template[32], instructions[4][49], instruction_len[4];
    query queries[MAX_QUERIES];
    uint32_t n_queries, per_request, query_min, query_max;
} maker;

/* A token that is not the separator. */
static uint32_t token(maker *m) { return range(&m->r, SERVE_SEPARATOR + 1, m->vocab - 1); }

/* Appends a sequence: head (n_head), then n_own random tokens. */
static void add_seq(maker *m, const uint32_t *head, uint32_t n_head, uint32_t n_own) {
    serve_trace *t = m->t;
    uint32_t *at = t->tokens + t->n_tokens;
    if (n_head > 0) memcpy(at, head, n_head * sizeof(uint32_t)); /* head is NULL for no sharing */
    for (uint32_t k = 0; k < n_own; k++) at[n_head + k] = token(m);
    t->seq_start[t->n_seqs] = (uint32_t)t->n_tokens, t->seq_len[t->n_seqs] = n_head + n_own;
    if (n_head + n_own > t->longest) t->longest = n_head + n_own;
    t->n_tokens += n_head + n_own, t->n_seqs++;
}

static void new_query(maker *m, query *q) {
    memcpy(q->prompt, m->template, sizeof m->template);
    q->prompt_len = 32 + range(&m->r, m->query_min, m->query_max);
    for (uint32_t k = 32; k < q->prompt_len; k++) q->prompt[k] = token(m);
    q->prompt[q->prompt_len++] = SERVE_SEPARATOR;
    q->passages_left = range(&m->r, 20, 100);
}

static void add_request(maker *m, int kind) {
    uint32_t n = range(&m->r, 1, m->per_request);
    if (kind == 0) {
        query *q = &m->queries[range(&m->r, 0, m->n_queries - 1)];
        if (n > q->passages_left) n = q->passages_left;
        for (uint32_t s = 0; s < n; s++) add_seq(m, q->prompt, q->prompt_len, range(&m->r, 40, 120));
        if ((q->passages_left -= n) == 0) new_query(m, q);
    } else if (kind == 1) {
        uint32_t i = range(&m->r, 0, 3);
        for (uint32_t s = 0; s < n; s++) add_seq(m, m->instructions[i], m->instruction_len[i], range(&m->r, 20, 200));
    } else {
        for (uint32_t s = 0; s < n; s++) add_seq(m, NULL, 0, range(&m->r, 32, 256));
    }
}

int serve_trace_known(const char *name) {
    return strcmp(name, "rerank") == 0 || strcmp(name, "embed") == 0 || strcmp(name, "no_sharing") == 0 ||
           strcmp(name, "mixed") == 0;
}

int serve_trace_make(const char *name, size_t n_requests, const serve_shape *shape, uint32_t vocab, uint64_t seed,
                     serve_trace *t) {
    memset(t, 0, sizeof *t);
    uint32_t query_max = shape->query_max > SERVE_QUERY_MAX ? SERVE_QUERY_MAX : shape->query_max;
    uint32_t query_min = shape->query_min > query_max ? query_max : shape->query_min;
    size_t max_seqs = n_requests * 8, seq_max = 256; /* the longest of embed and no_sharing */
    if (32 + query_max + 1 + 120 > seq_max) seq_max = 32 + query_max + 1 + 120; /* a rerank sequence */
    t->tokens = malloc(max_seqs * seq_max * sizeof(uint32_t));
    t->seq_start = malloc(max_seqs * sizeof(uint32_t));
    t->seq_len = malloc(max_seqs * sizeof(uint32_t));
    t->requests = malloc(n_requests * sizeof(serve_request));
    maker *m = malloc(sizeof *m);
    if (t->tokens == NULL || t->seq_start == NULL || t->seq_len == NULL || t->requests == NULL || m == NULL) {
        free(m);
        serve_trace_free(t);
        return -1;
    }
    uint32_t queries = shape->queries, per_request = shape->per_request;
    *m = (maker){.t = t, .r = {seed}, .vocab = vocab, .n_queries = queries < 1 ? 1 : queries > MAX_QUERIES ? MAX_QUERIES : queries,
                 .per_request = per_request < 1 ? 1 : per_request > 8 ? 8 : per_request, .query_min = query_min,
                 .query_max = query_max};
    for (int k = 0; k < 32; k++) m->template[k] = token(m);
    for (int i = 0; i < 4; i++) {
        m->instruction_len[i] = range(&m->r, 16, 48);
        for (uint32_t k = 0; k < m->instruction_len[i]; k++) m->instructions[i][k] = token(m);
        m->instructions[i][m->instruction_len[i]++] = SERVE_SEPARATOR;
    }
    for (uint32_t q = 0; q < m->n_queries; q++) new_query(m, &m->queries[q]);
    double clock = 0.0;
    for (size_t i = 0; i < n_requests; i++) {
        int kind = strcmp(name, "rerank") == 0 ? 0 : strcmp(name, "embed") == 0 ? 1 : strcmp(name, "no_sharing") == 0 ? 2 : -1;
        if (kind < 0) { /* mixed */
            uint32_t pick = range(&m->r, 0, 9);
            kind = pick < 5 ? 0 : pick < 8 ? 1 : 2;
        }
        clock += -log(((double)(next(&m->r) >> 11) + 0.5) * 0x1p-53); /* exponential gaps, mean 1 */
        t->requests[i] = (serve_request){clock, (uint32_t)t->n_seqs, 0};
        add_request(m, kind);
        t->requests[i].n_seqs = (uint32_t)t->n_seqs - t->requests[i].first_seq;
    }
    t->n_requests = n_requests;
    free(m);
    return 0;
}

void serve_trace_free(serve_trace *t) {
    free(t->tokens), free(t->seq_start), free(t->seq_len), free(t->requests);
    memset(t, 0, sizeof *t);
}
