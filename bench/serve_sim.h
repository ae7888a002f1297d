/*
 * serve_sim.h: a trace (serve_trace.h) served by K replicas in simulated time. Each replica has its
 * own batcher (the library's, FIFO or prefix mode), planner and context with its own prefix cache;
 * a client request goes to a replica on arrival, round robin or by its routing key (rmlp_route_key
 * up to the separator, on a jump consistent hash of K buckets, as a balancer hashing the header
 * would). A replica that is idle with requests queued takes its next batch at once; the batch runs
 * for real (plan, rmlp_forward_compact, last-token pooling) and the replica's clock advances by the
 * CPU time of that one thread (the library set to one thread), so a busy or noisy machine slows
 * the bench but not the simulated clock; or, with SERVE_COST_MODEL, by the time the cost model
 * gives what the batch computed (serve_cost.h), which nothing measured changes. Queue wait is
 * batch start minus arrival; latency adds the batch's compute time.
 */
#ifndef RMLP_TOOLS_SERVE_SIM_H
#define RMLP_TOOLS_SERVE_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "radix_mlp.h"
#include "serve_cost.h"
#include "serve_trace.h"

typedef struct serve_config {
    rmlp_batch_mode mode;
    size_t max_tokens, max_rows, max_seqs; /* the budget of every batch (max_rows: compact rows N') */
    uint64_t max_wait_us;
    uint64_t cache_bytes;        /* per replica; 0: no cache */
    uint32_t replicas;
    bool route_prefix;           /* false: round robin */
    double rate;                 /* client requests per simulated second */
    size_t max_batches;          /* stop after this many batches in all (0: serve the whole trace) */
    bool saturate;               /* every request queued at time 0 before the first batch (a capacity run) */
    serve_cost_kind cost;        /* what a batch is charged: its measured CPU time or the model's */
    serve_cost_model model;      /* the model (serve_cost.h), with SERVE_COST_MODEL */
    bool plan_only;              /* plan each batch, skip its forward: only with SERVE_COST_MODEL and no
                                  * cache, where the forward moves nothing (no measured times then) */
} serve_config;

typedef struct serve_result {
    uint64_t requests, seqs, tokens, compact_rows, batches;
    uint64_t lookups, hits;      /* of the prefix caches, all replicas */
    double busy_s, span_s;       /* compute time of all batches; first arrival to last batch's end */
    double wait_p50_ms, wait_p99_ms, latency_p50_ms, latency_p99_ms, batch_p50_ms, batch_p99_ms;
    serve_cost_log cost;         /* every batch's terms, modelled and measured times */
    /* The batcher's own cost, CPU time of the calls: next per batch (percentiles), push in all; the
     * most sequences queued on one replica when a batch was picked. */
    double next_p50_us, next_p99_us, next_max_us, push_us;
    uint64_t pushes, deepest_queue;
} serve_result;

/* A simulation of serving t with model (hidden size `hidden`) as c says, stepped batch by batch so
 * that several can run interleaved (every run then meets the machine's slow spells alike). NULL
 * after printing why. */
typedef struct serve_sim serve_sim;
serve_sim *serve_sim_new(const serve_trace *t, rmlp_model *model, uint32_t hidden, const serve_config *c);
void serve_sim_free(serve_sim *s);

/* Queues what arrives up to the next batch start and runs that batch: 1, or 0 when the trace is
 * served, or -1 after printing why. */
int serve_sim_step(serve_sim *s);

/* Compute time so far (what interleaving balances). */
double serve_sim_busy(const serve_sim *s);

/* The figures of a finished simulation. */
void serve_sim_result(serve_sim *s, serve_result *r);

/* Runs the n simulations to the end, always stepping the one with the least compute so far, and
 * fills r (n). 0, or 1 after printing why. */
int serve_run(serve_sim **sims, size_t n, serve_result *r);

#endif
