/*
 * serve_sim.c: replicas serving a trace in simulated time (serve_sim.h).
 */
#define _POSIX_C_SOURCE 200809L

#include "serve_sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct replica {
    rmlp_batcher *batcher;
    rmlp_planner *planner;
    rmlp_context *ctx;
    double free_at_us; /* when its last batch ends */
    size_t queued;
} replica;

struct serve_sim {
    const serve_trace *t;
    serve_config c;
    replica *replicas;
    size_t next_request;                  /* the first request not yet arrived */
    float *out, *pooled;
    size_t *cached;                       /* (max_seqs) each sequence's cached prefix before its forward */
    double *waits, *latencies, *batch_ms; /* (n_seqs) each: per sequence, per sequence, per batch */
    double *next_us;                      /* (n_seqs) the batcher's CPU time to pick each batch */
    serve_result r;
};

static double cpu_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* Lamping and Veach's jump consistent hash: key to one of n buckets, moving 1/n of the keys when
 * a bucket is added. */
static uint32_t jump_hash(uint64_t key, uint32_t n) {
    int64_t bucket = -1, next = 0;
    while (next < (int64_t)n) {
        bucket = next;
        key = key * 2862933555777941757ull + 1;
        next = (int64_t)((double)(bucket + 1) * ((double)(1ll << 31) / (double)((key >> 33) + 1)));
    }
    return (uint32_t)bucket;
}

static int fail(const char *what) {
    fprintf(stderr, "radixmlp bench --serve: %s: %s\n", what, rmlp_last_error());
    return -1;
}

static double arrival_us(const serve_sim *s, size_t request) {
    return s->c.saturate ? 0.0 : s->t->requests[request].unit_arrival / s->c.rate * 1e6;
}

/* What the batch computed (serve_cost.h): its plan, and each sequence's prefix the cache held before
 * the forward, unless the forward bypassed the cache. */
static void batch_terms(serve_sim *s, const rmlp_plan *plan, const rmlp_cache_stats *before,
                        const rmlp_cache_stats *after, serve_cost_terms *t) {
    int cached = s->c.cache_bytes > 0 && after->bypassed == before->bypassed;
    serve_cost_terms_of(plan, cached ? s->cached : NULL, t);
}

/* Takes and runs one batch on replica p at its clock; its cost (its CPU time, or the model's time
 * for what it computed) moves the clock on. */
static int run_batch(serve_sim *s, replica *p) {
    serve_result *r = &s->r;
    uint64_t now = (uint64_t)p->free_at_us;
    rmlp_batch batch;
    if (p->queued > r->deepest_queue) r->deepest_queue = p->queued;
    double picking = cpu_us();
    if (rmlp_batcher_next_rows(p->batcher, s->c.max_tokens, s->c.max_rows, s->c.max_seqs, now, &batch) != RMLP_OK)
        return fail("next batch");
    s->next_us[r->batches] = cpu_us() - picking;
    rmlp_cache_stats before = {0}, after = {0};
    for (uint32_t q = 0; s->c.cache_bytes > 0 && q < batch.n_seqs; q++) {
        uint32_t at = batch.cu_seqlens[q];
        if (rmlp_context_cached_prefix(p->ctx, batch.input_ids + at, batch.cu_seqlens[q + 1] - at, &s->cached[q]) !=
            RMLP_OK)
            return fail("cached prefix");
    }
    if (s->c.cache_bytes > 0 && rmlp_context_cache_stats(p->ctx, &before) != RMLP_OK) return fail("cache stats");
    rmlp_plan_params params = rmlp_plan_default_params();
    params.threshold = 1.0; /* radix whenever anything is shared: both policies alike */
    rmlp_plan plan;
    double start = cpu_us();
    if (rmlp_plan_build(p->planner, batch.input_ids, batch.position_ids, batch.n_tokens, batch.cu_seqlens,
                        batch.n_seqs, &params, &plan) != RMLP_OK ||
        (!s->c.plan_only && (rmlp_forward_compact(p->ctx, &plan, NULL, NULL, s->out) != RMLP_OK ||
                             rmlp_context_pool_compact(p->ctx, &plan, s->out, RMLP_POOLING_LAST, true, s->pooled) != RMLP_OK)))
        return fail("running a batch");
    double measured = cpu_us() - start;
    if (s->c.cache_bytes > 0 && rmlp_context_cache_stats(p->ctx, &after) != RMLP_OK) return fail("cache stats");
    serve_cost_terms terms;
    batch_terms(s, &plan, &before, &after, &terms);
    double modelled = serve_cost_us(&s->c.model, &terms);
    if (!s->c.plan_only) serve_cost_log_add(&r->cost, &terms, modelled, measured);
    double cost = s->c.cost == SERVE_COST_MODEL ? modelled : measured;
    for (uint32_t q = 0; q < batch.n_seqs; q++) {
        double wait = (double)(now - batch.arrival_us[q]);
        s->waits[r->seqs] = wait * 1e-3, s->latencies[r->seqs] = (wait + cost) * 1e-3;
        r->seqs++;
    }
    s->batch_ms[r->batches++] = cost * 1e-3;
    r->tokens += batch.n_tokens, r->compact_rows += plan.n_compact, r->busy_s += cost * 1e-6;
    p->free_at_us = (double)now + cost;
    p->queued -= batch.n_seqs;
    return 1;
}

/* Routes the next request to its replica and queues its sequences there. */
static int arrive(serve_sim *s, const rmlp_route_params *route) {
    const serve_trace *t = s->t;
    size_t i = s->next_request++;
    const serve_request *q = &t->requests[i];
    double at = arrival_us(s, i);
    uint32_t target = (uint32_t)(i % s->c.replicas);
    if (s->c.route_prefix) {
        uint64_t key = 0;
        if (rmlp_route_key(t->tokens + t->seq_start[q->first_seq], t->seq_len[q->first_seq], route, &key, NULL) !=
            RMLP_OK)
            return fail("routing key");
        target = jump_hash(key, s->c.replicas);
    }
    replica *p = &s->replicas[target];
    if (p->queued == 0 && p->free_at_us < at) p->free_at_us = at; /* idle until now */
    for (uint32_t k = 0; k < q->n_seqs; k++) {
        uint32_t seq = q->first_seq + k;
        double pushing = cpu_us();
        if (rmlp_batcher_push(p->batcher, seq, t->tokens + t->seq_start[seq], t->seq_len[seq], (uint64_t)at) != RMLP_OK)
            return fail("queueing a request");
        s->r.push_us += cpu_us() - pushing, s->r.pushes++;
        p->queued++;
    }
    s->r.requests++;
    return 0;
}

int serve_sim_step(serve_sim *s) {
    rmlp_route_params route = rmlp_route_default_params();
    route.prefix_tokens = 256, route.use_separator = true, route.separator = SERVE_SEPARATOR;
    if (s->c.max_batches != 0 && s->r.batches >= s->c.max_batches) return 0;
    for (;;) {
        replica *due = NULL; /* the replica with work whose next batch starts first */
        for (uint32_t k = 0; k < s->c.replicas; k++)
            if (s->replicas[k].queued > 0 && (due == NULL || s->replicas[k].free_at_us < due->free_at_us))
                due = &s->replicas[k];
        if (s->next_request < s->t->n_requests &&
            (due == NULL || s->c.saturate || arrival_us(s, s->next_request) <= due->free_at_us)) {
            if (arrive(s, &route) != 0) return -1;
            continue;
        }
        return due == NULL ? 0 : run_batch(s, due);
    }
}

double serve_sim_busy(const serve_sim *s) { return s->r.busy_s; }

serve_sim *serve_sim_new(const serve_trace *t, rmlp_model *model, uint32_t hidden, const serve_config *c) {
    if (c->plan_only && (c->cost != SERVE_COST_MODEL || c->cache_bytes > 0)) {
        fprintf(stderr, "radixmlp bench --serve: plans alone need the cost model and no cache\n");
        return NULL;
    }
    serve_sim *s = calloc(1, sizeof *s);
    if (s == NULL) return NULL;
    *s = (serve_sim){.t = t, .c = *c};
    rmlp_batcher_params bp = rmlp_batcher_default_params();
    bp.mode = c->mode, bp.max_wait_us = c->max_wait_us;
    bp.max_requests = (uint32_t)t->n_seqs, bp.max_queued_tokens = (uint32_t)t->n_tokens;
    rmlp_context_params cp = rmlp_context_default_params();
    cp.cache_bytes = c->cache_bytes;
    cp.attention_space = RMLP_ATTENTION_COMPACT;
    s->replicas = calloc(c->replicas, sizeof *s->replicas);
    s->out = malloc((c->max_tokens + RMLP_MAX_PAD_MULTIPLE) * hidden * sizeof(float));
    s->pooled = malloc(c->max_seqs * hidden * sizeof(float));
    s->cached = calloc(c->max_seqs + 1, sizeof(size_t));
    s->waits = malloc(t->n_seqs * sizeof(double)), s->latencies = malloc(t->n_seqs * sizeof(double));
    s->batch_ms = malloc(t->n_seqs * sizeof(double)), s->next_us = malloc(t->n_seqs * sizeof(double));
    int ok = s->replicas && s->out && s->pooled && s->cached && s->waits && s->latencies && s->batch_ms && s->next_us;
    if (!ok) fprintf(stderr, "radixmlp bench --serve: out of memory\n");
    for (uint32_t k = 0; ok && k < c->replicas; k++) {
        replica *p = &s->replicas[k];
        ok = rmlp_batcher_create(&bp, &p->batcher) == RMLP_OK && rmlp_planner_create(&p->planner) == RMLP_OK &&
             rmlp_context_create_with_params(model, c->max_tokens, &cp, &p->ctx) == RMLP_OK &&
             (c->cache_bytes == 0 || c->mode != RMLP_BATCH_PREFIX ||
              rmlp_batcher_attach_context(p->batcher, p->ctx) == RMLP_OK);
        if (!ok) fail("making a replica");
    }
    if (!ok) {
        serve_sim_free(s);
        return NULL;
    }
    return s;
}

void serve_sim_free(serve_sim *s) {
    if (s == NULL) return;
    for (uint32_t k = 0; s->replicas && k < s->c.replicas; k++) {
        rmlp_batcher_free(s->replicas[k].batcher);
        rmlp_planner_free(s->replicas[k].planner);
        rmlp_context_free(s->replicas[k].ctx);
    }
    free(s->replicas), free(s->out), free(s->pooled), free(s->cached);
    free(s->waits), free(s->latencies), free(s->batch_ms), free(s->next_us);
    free(s);
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of v (n; sorted here): the nearest rank. */
static double percentile(double *v, size_t n, double q) {
    if (n == 0) return 0.0;
    qsort(v, n, sizeof *v, by_value);
    size_t at = (size_t)(q * (double)(n - 1) + 0.5);
    return v[at < n ? at : n - 1];
}

void serve_sim_result(serve_sim *s, serve_result *out) {
    serve_result *r = &s->r;
    r->wait_p50_ms = percentile(s->waits, r->seqs, 0.5), r->wait_p99_ms = percentile(s->waits, r->seqs, 0.99);
    r->latency_p50_ms = percentile(s->latencies, r->seqs, 0.5);
    r->latency_p99_ms = percentile(s->latencies, r->seqs, 0.99);
    r->batch_p50_ms = percentile(s->batch_ms, r->batches, 0.5);
    r->batch_p99_ms = percentile(s->batch_ms, r->batches, 0.99);
    r->next_p50_us = percentile(s->next_us, r->batches, 0.5), r->next_p99_us = percentile(s->next_us, r->batches, 0.99);
    r->next_max_us = percentile(s->next_us, r->batches, 1.0);
    double end = 0.0;
    r->lookups = r->hits = 0;
    for (uint32_t k = 0; k < s->c.replicas; k++) {
        rmlp_cache_stats st = {0};
        if (s->c.cache_bytes > 0 && rmlp_context_cache_stats(s->replicas[k].ctx, &st) == RMLP_OK)
            r->lookups += st.lookups, r->hits += st.hit_tokens;
        if (s->replicas[k].free_at_us > end) end = s->replicas[k].free_at_us;
    }
    r->span_s = s->t->n_requests ? (end - arrival_us(s, 0)) * 1e-6 : 0.0;
    *out = *r;
}

int serve_run(serve_sim **sims, size_t n, serve_result *r) {
    int *done = calloc(n, sizeof *done);
    if (done == NULL) return 1;
    for (;;) {
        serve_sim *behind = NULL;
        size_t at = 0;
        for (size_t i = 0; i < n; i++)
            if (!done[i] && (behind == NULL || serve_sim_busy(sims[i]) < serve_sim_busy(behind))) behind = sims[i], at = i;
        if (behind == NULL) break;
        int stepped = serve_sim_step(behind);
        if (stepped < 0) {
            free(done);
            return 1;
        }
        done[at] = stepped == 0;
    }
    for (size_t i = 0; i < n; i++) serve_sim_result(sims[i], &r[i]);
    free(done);
    return 0;
}
