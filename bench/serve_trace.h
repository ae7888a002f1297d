/*
 * serve_trace.h: the client traffic of `radixmlp bench --serve` (bench_serve.h), deterministic
 * from a seed. A trace is a list of client requests, each one to a few sequences, in arrival
 * order; arrival times are a Poisson process whose rate the bench sets later (unit-rate times
 * here, scaled by 1 / rate). Kinds of request:
 *   rerank      C concurrent queries (8-64, --queries) of 20-100 passages each; a request sends the
 *               next 1-8 (--request-seqs) passages of one of them (picked at random, so queries interleave); a
 *               sequence is the shared template (32 tokens), the query (24-72, or a range set:
 *               --query-tokens), a separator, the passage (40-120); a query whose passages are all
 *               sent is replaced by a new one
 *   embed       1-8 texts (20-200 tokens) under one of 4 instructions (16-48 tokens + separator)
 *   no_sharing  1-8 sequences of 32-256 random tokens
 * Traces: "rerank", "embed", "no_sharing", and "mixed" (each request rerank with probability 1/2,
 * embed 3/10, no-sharing 1/5).
 */
#ifndef RMLP_TOOLS_SERVE_TRACE_H
#define RMLP_TOOLS_SERVE_TRACE_H

#include <stddef.h>
#include <stdint.h>

/* Token id that ends a rerank query's prompt and an instruction (what the routing key stops at). */
#define SERVE_SEPARATOR 1u

typedef struct serve_request {
    double unit_arrival; /* arrival in units of the mean gap (a Poisson process of rate 1) */
    uint32_t first_seq, n_seqs;
} serve_request;

typedef struct serve_trace {
    uint32_t *tokens;           /* (n_tokens) the sequences back to back */
    uint32_t *seq_start, *seq_len; /* (n_seqs) */
    serve_request *requests;    /* (n_requests) in arrival order */
    size_t n_tokens, n_seqs, n_requests;
    uint32_t longest;           /* the longest sequence */
} serve_trace;

/* Whether `name` is a trace. */
int serve_trace_known(const char *name);

/* The shape of a trace's rerank traffic. */
typedef struct serve_shape {
    uint32_t queries;              /* concurrent queries (1-64) */
    uint32_t per_request;          /* sequences a client request (1 to this, at most 8) */
    uint32_t query_min, query_max; /* a query's own tokens (after the template; at most SERVE_QUERY_MAX) */
} serve_shape;

#define SERVE_QUERY_MAX 1024u

/* n_requests client requests of trace `name` of that shape, token ids below vocab. 0, or -1 when
 * out of memory. */
int serve_trace_make(const char *name, size_t n_requests, const serve_shape *shape, uint32_t vocab, uint64_t seed,
                     serve_trace *t);
void serve_trace_free(serve_trace *t);

#endif
