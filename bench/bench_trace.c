/*
 * bench_trace.c: the traces of bench_trace.h, cache off against cache on. Both contexts run every
 * batch of the trace in compact space (rmlp_forward_compact: the best the library does without a
 * cache), on the same plan, one after the other, so a slow spell of the machine hits both alike;
 * the cached context starts empty and fills as the trace goes.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_trace.h"
#include "cli.h"
#include "workload.h"

#define BATCH 32 /* sequences per batch */

typedef struct trace {
    uint32_t *ids, *pos; /* (n_tokens) sequences back to back, positions from 0 */
    uint32_t *lens;      /* (n_seqs) */
    size_t n_tokens, n_seqs;
} trace;

static uint64_t next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint32_t below(uint64_t *s, uint32_t n) { return (uint32_t)(next(s) % n); }

static void trace_free(trace *t) {
    free(t->ids), free(t->pos), free(t->lens);
    memset(t, 0, sizeof *t);
}

/* Appends a sequence: the shared rows `head` (n_head) then n_own random ones. */
static void append(trace *t, const uint32_t *head, size_t n_head, size_t n_own, uint64_t *rng) {
    for (size_t k = 0; k < n_head + n_own; k++) {
        t->ids[t->n_tokens + k] = k < n_head ? head[k] : below(rng, WORKLOAD_VOCAB);
        t->pos[t->n_tokens + k] = (uint32_t)k;
    }
    t->n_tokens += n_head + n_own;
    t->lens[t->n_seqs++] = (uint32_t)(n_head + n_own);
}

static int trace_alloc(trace *t, size_t max_tokens, size_t max_seqs) {
    *t = (trace){malloc(max_tokens * 4), malloc(max_tokens * 4), malloc(max_seqs * 4), 0, 0};
    return t->ids && t->pos && t->lens ? 0 : -1;
}

/* The trace `name`; 0, or -1 when out of memory. */
static int make_trace(const char *name, unsigned long passages, trace *t) {
    uint64_t rng = 0x7EACE;
    if (strcmp(name, "rerank") == 0) {
        enum { QUERIES = 8, TEMPLATE = 32 };
        size_t n = QUERIES * passages;
        if (trace_alloc(t, n * (TEMPLATE + 128 + 96), n) != 0) return -1;
        uint32_t template[TEMPLATE], prompts[QUERIES][TEMPLATE + 128], prompt_len[QUERIES];
        for (int k = 0; k < TEMPLATE; k++) template[k] = below(&rng, WORKLOAD_VOCAB);
        for (int q = 0; q < QUERIES; q++) { /* the template, then a query of 64-128 tokens */
            prompt_len[q] = TEMPLATE + 64 + below(&rng, 65);
            for (uint32_t k = 0; k < prompt_len[q]; k++) prompts[q][k] = k < TEMPLATE ? template[k] : below(&rng, WORKLOAD_VOCAB);
        }
        uint32_t *order = malloc(n * sizeof *order); /* (query, passage) pairs, shuffled */
        if (order == NULL) return -1;
        for (size_t i = 0; i < n; i++) order[i] = (uint32_t)(i % QUERIES);
        for (size_t i = n; i > 1; i--) {
            size_t j = below(&rng, (uint32_t)i);
            uint32_t x = order[i - 1];
            order[i - 1] = order[j], order[j] = x;
        }
        for (size_t i = 0; i < n; i++) append(t, prompts[order[i]], prompt_len[order[i]], 48 + below(&rng, 49), &rng);
        free(order);
    } else if (strcmp(name, "long_prefix") == 0) {
        enum { PREFIX = 2048, SEQS = 16 * BATCH };
        if (trace_alloc(t, SEQS * (PREFIX + 12), SEQS) != 0) return -1;
        uint32_t *prefix = malloc(PREFIX * sizeof *prefix);
        if (prefix == NULL) return -1;
        for (int k = 0; k < PREFIX; k++) prefix[k] = below(&rng, WORKLOAD_VOCAB);
        for (int i = 0; i < SEQS; i++) append(t, prefix, PREFIX, 4 + below(&rng, 9), &rng);
        free(prefix);
    } else {
        enum { SEQS = 8 * BATCH };
        if (trace_alloc(t, SEQS * 128, SEQS) != 0) return -1;
        for (int i = 0; i < SEQS; i++) append(t, NULL, 0, 64 + below(&rng, 65), &rng);
    }
    return 0;
}

int bench_trace_known(const char *name) {
    return strcmp(name, "rerank") == 0 || strcmp(name, "long_prefix") == 0 || strcmp(name, "no_sharing") == 0 ||
           strcmp(name, "all") == 0;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n) {
    qsort(v, n, sizeof *v, by_value);
    return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int run_trace(const char *name, rmlp_model *model, const rmlp_model_config *cfg, unsigned long cache_mb,
                     unsigned long passages, int json) {
    trace t;
    if (make_trace(name, passages, &t) != 0) {
        fprintf(stderr, "radixmlp: trace %s: out of memory\n", name);
        return 1;
    }
    for (size_t i = 0; i < t.n_tokens; i++) t.ids[i] %= cfg->vocab_size; /* a --model with a smaller vocabulary */
    size_t n_batches = (t.n_seqs + BATCH - 1) / BATCH, max_tokens = 0, hsz = cfg->hidden_size;
    uint32_t *starts = malloc((t.n_seqs + 1) * sizeof *starts);
    for (size_t s = 0, row = 0; starts && s <= t.n_seqs; s++) starts[s] = (uint32_t)row, row += s < t.n_seqs ? t.lens[s] : 0;
    for (size_t b = 0; starts && b < n_batches; b++) {
        size_t first = b * BATCH, last = first + BATCH < t.n_seqs ? first + BATCH : t.n_seqs;
        if (starts[last] - starts[first] > max_tokens) max_tokens = starts[last] - starts[first];
    }
    rmlp_context_params params = rmlp_context_default_params();
    params.cache_bytes = (uint64_t)cache_mb << 20;
    rmlp_context *off = NULL, *on = NULL;
    rmlp_planner *planner = NULL;
    float *out_off = malloc((max_tokens + RMLP_MAX_PAD_MULTIPLE) * hsz * sizeof(float));
    float *out_on = malloc((max_tokens + RMLP_MAX_PAD_MULTIPLE) * hsz * sizeof(float));
    double *ms_off = malloc(n_batches * sizeof(double)), *ms_on = malloc(n_batches * sizeof(double));
    uint32_t *cu = malloc((BATCH + 1) * sizeof *cu);
    int rc = starts && out_off && out_on && ms_off && ms_on && cu &&
                     rmlp_context_create(model, max_tokens, &off) == RMLP_OK &&
                     rmlp_context_create_with_params(model, max_tokens, &params, &on) == RMLP_OK &&
                     rmlp_planner_create(&planner) == RMLP_OK
                 ? 0
                 : 1;
    double total_off = 0, total_on = 0, diff = 0;
    rmlp_plan_params plan_params = rmlp_plan_default_params();
    plan_params.threshold = 1.0; /* radix whenever anything is shared: the cache's baseline */
    for (size_t b = 0; rc == 0 && b < n_batches; b++) {
        size_t first = b * BATCH, last = first + BATCH < t.n_seqs ? first + BATCH : t.n_seqs;
        for (size_t s = first; s <= last; s++) cu[s - first] = starts[s] - starts[first];
        rmlp_plan plan;
        if (rmlp_plan_build(planner, t.ids + starts[first], t.pos + starts[first], starts[last] - starts[first], cu,
                            last - first, &plan_params, &plan) != RMLP_OK) {
            rc = 1;
            break;
        }
        double t0 = cli_now_ms();
        rc = rmlp_forward_compact(off, &plan, NULL, NULL, out_off) == RMLP_OK ? 0 : 1;
        double t1 = cli_now_ms();
        if (rc == 0) rc = rmlp_forward_compact(on, &plan, NULL, NULL, out_on) == RMLP_OK ? 0 : 1;
        double t2 = cli_now_ms();
        ms_off[b] = t1 - t0, ms_on[b] = t2 - t1;
        total_off += ms_off[b], total_on += ms_on[b];
        for (size_t i = 0; rc == 0 && i < (size_t)plan.n_compact * hsz; i++) {
            double d = fabs((double)out_off[i] - out_on[i]);
            diff = isnan(d) ? INFINITY : (d > diff ? d : diff);
        }
    }
    rmlp_cache_stats st = {0};
    if (rc == 0 && rmlp_context_cache_stats(on, &st) != RMLP_OK) rc = 1;
    if (rc != 0) {
        fprintf(stderr, "radixmlp: trace %s: %s\n", name, rmlp_last_error());
    } else {
        double hit_rate = st.lookups ? (double)st.hit_tokens / (double)st.lookups : 0.0;
        double med_off = median(ms_off, n_batches), med_on = median(ms_on, n_batches);
        if (json)
            printf("{\"trace\": \"%s\", \"batches\": %zu, \"sequences\": %zu, \"tokens\": %zu, \"cache_mb\": %lu, "
                   "\"ms_off\": %.1f, \"ms_on\": %.1f, \"tokens_per_s_off\": %.1f, \"tokens_per_s_on\": %.1f, "
                   "\"speedup\": %.3f, \"hit_rate\": %.4f, \"hit_tokens\": %llu, \"computed_tokens\": %llu, "
                   "\"median_batch_ms_off\": %.1f, \"median_batch_ms_on\": %.1f, \"evicted_tokens\": %llu, "
                   "\"bypassed_batches\": %llu, \"cache_mb_in_use\": %.1f, \"max_abs_diff\": %.3g}\n",
                   name, n_batches, t.n_seqs, t.n_tokens, cache_mb, total_off, total_on, t.n_tokens / total_off * 1e3,
                   t.n_tokens / total_on * 1e3, total_off / total_on, hit_rate, (unsigned long long)st.hit_tokens,
                   (unsigned long long)st.computed_tokens, med_off, med_on, (unsigned long long)st.evicted_tokens,
                   (unsigned long long)st.bypassed, st.bytes_in_use / 1048576.0, diff);
        else
            printf("%-12s %7zu %8zu %10.0f %10.0f %10.0f %10.0f %7.2fx %7.1f%% %9.1f %9.1f %8llu %6llu %10.3g\n", name,
                   n_batches, t.n_tokens, total_off, total_on, t.n_tokens / total_off * 1e3, t.n_tokens / total_on * 1e3,
                   total_off / total_on, 100.0 * hit_rate, med_off, med_on, (unsigned long long)st.evicted_tokens,
                   (unsigned long long)st.bypassed, diff);
        rc = cli_finish_output(stdout, "standard output") == 0 ? 0 : 1; /* a full disk stops the traces */
    }
    free(starts), free(out_off), free(out_on), free(ms_off), free(ms_on), free(cu);
    rmlp_planner_free(planner);
    rmlp_context_free(off);
    rmlp_context_free(on);
    trace_free(&t);
    return rc;
}

int bench_trace(const char *name, rmlp_model *model, const rmlp_model_config *cfg, unsigned long cache_mb,
                unsigned long passages, int json) {
    static const char *const all[] = {"rerank", "long_prefix", "no_sharing"};
    if (!json)
        printf("%-12s %7s %8s %10s %10s %10s %10s %8s %8s %9s %9s %8s %6s %10s\n", "trace", "batches", "tokens", "ms off",
               "ms on", "tok/s off", "tok/s on", "speedup", "hit", "med off", "med on", "evicted", "bypass",
               "max|off-on|");
    for (size_t i = 0; i < 3; i++) {
        if (strcmp(name, "all") != 0 && strcmp(name, all[i]) != 0) continue;
        fprintf(stderr, "radixmlp bench: trace %s (cache %lu MB)...\n", all[i], cache_mb);
        if (run_trace(all[i], model, cfg, cache_mb, passages, json) != 0) return 1;
    }
    return 0;
}
