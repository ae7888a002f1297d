/*
 * bench_serve.c: `radixmlp bench --serve` (bench_serve.h): its options, the built-in model, the
 * offered load (a fraction of FIFO's capacity on each trace, measured first with every request
 * queued), the runs and their table or JSON lines, the cost model against the measured batches
 * (serve_cost.h), and the targets checked at the end.
 */
#define _POSIX_C_SOURCE 200809L

#include "bench_serve.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "serve_cost.h"
#include "serve_sim.h"
#include "serve_slo.h"
#include "serve_trace.h"
#include "tiny_model.h"

#define MAX_REPLICA_COUNTS 8

typedef struct serve_args {
    const char *traces[4];
    size_t n_traces;
    const char *sweep; /* the trace of the replica sweep, or NULL */
    unsigned long requests, queries, request_seqs, max_tokens, max_rows, max_seqs, max_wait_ms, cache_mb, layers,
        hidden, seed;
    unsigned long replicas[MAX_REPLICA_COUNTS], query_tokens[2];
    size_t n_replicas;
    double load, slo_ms; /* slo_ms: 0 unless --slo-ms */
    int json, no_traces, capacity;
    int routes; /* of the sweep at K > 1: bit 0 round robin, bit 1 prefix routing (--route) */
    serve_cost_kind cost;
    serve_cost_log *cost_all; /* every batch run, for the cost model's line */
} serve_args;

static const char *const ALL_TRACES[] = {"rerank", "embed", "no_sharing", "mixed"};

int bench_serve_wanted(int argc, char **argv) {
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--serve") == 0) return 1;
    return 0;
}

static int usage(FILE *to) {
    fprintf(to,
            "usage: radixmlp bench --serve [--trace rerank|embed|no_sharing|mixed|all|none] [--requests N] [--queries C]\n"
            "                      [--request-seqs S] [--load X] [--max-tokens B] [--max-rows R] [--max-seqs M] [--max-wait-ms W] [--cache-mb MB]\n"
            "                      [--query-tokens MIN,MAX] [--replicas K,K,...] [--route rr|prefix|both]\n"
            "                      [--sweep TRACE|none] [--layers L] [--hidden H] [--seed S] [--cost measured|model] [--capacity] [--slo-ms W] [--json]\n"
            "  Client requests (--requests per trace, default 300) arrive as a Poisson process at --load (default\n"
            "  1.0) times FIFO's capacity on that trace (tokens per second of compute with every request queued),\n"
            "  and are served in simulated time, each batch charged the CPU time of its real forward (one thread;\n"
            "  the built-in random Qwen3-shaped model, --hidden 256, --layers 2). Per trace: FIFO and prefix\n"
            "  batching at the same budget (--max-tokens 4096, --max-seqs 64, --max-wait-ms 500, a prefix cache of\n"
            "  --cache-mb 64 per replica; 0: none), then on --sweep (default mixed) K replicas (--replicas,\n"
            "  default 1,2,4,8,16) routed round robin and by routing key (--route rr|prefix|both, default\n"
            "  both: at K > 1 which to run; K = 1 is one run whatever the route). --queries: concurrent rerank queries\n"
            "  (default 32); --request-seqs: at most this many sequences per client request (default 8: 1-8);\n"
            "  --query-tokens: a rerank query's own tokens after the 32-token template (default 24,72).\n"
            "  --max-rows: also bound each batch's compact rows (N', what RadixMLP computes; default: no bound\n"
            "  beyond --max-tokens); with it --max-tokens bounds the batch's full layout (the context's size).\n"
            "  --capacity: also both policies with the whole trace queued at once and no age bound (the most\n"
            "  each can do at this budget: the ceiling of their ratio).\n"
            "  --slo-ms W (with --cost model): also, per trace, the highest load each policy carries with its p99\n"
            "  queue wait at or under W ms over the whole trace (bisection over loads 0.05-4; without a cache only\n"
            "  the plans run, the forward moving nothing): throughput at a latency objective, and their ratio.\n"
            "  FIFO and prefix (and round robin and prefix routing) run interleaved, batch by batch.\n"
            "  --cost model: charge each batch, instead of its measured CPU time (--cost measured, the default),\n"
            "  the time a fixed model gives what it computed: a + b N' + c R + d P (N' compact rows, R of them\n"
            "  computed, not cached, P their attention score pairs; coefficients fitted once on the default\n"
            "  model, scaled by the arithmetic of --hidden and --layers). Nothing measured then moves\n"
            "  the simulated clock: two runs give the same figures exactly. Either way a '# cost model' line (not\n"
            "  with --json) compares the model with the measured CPU time of the batches run, and fits them.\n"
            "  Columns: N/N' tokens over compact rows; hit: the prefix caches' hit rate; N/comp: tokens over\n"
            "  rows computed (batching and cache together); tok/s: tokens per second of compute; util: compute\n"
            "  over K x the simulated span; wait and latency percentiles in ms. --trace none: the sweep alone.\n");
    return to == stdout ? -1 : 2;
}

static int parse_list(const char *flag, const char *text, serve_args *a) {
    size_t n = 0;
    if (cli_parse_ulong_list(flag, text, 64, a->replicas, MAX_REPLICA_COUNTS, &n) != 0) return -1;
    for (size_t i = 0; i < n; i++)
        if (a->replicas[i] == 0) {
            fprintf(stderr, "radixmlp: %s: a replica count of 0\n", flag);
            return -1;
        }
    a->n_replicas = n;
    return 0;
}

/* MIN,MAX (MIN <= MAX <= SERVE_QUERY_MAX) into range. */
static int parse_range(const char *flag, const char *text, unsigned long *range) {
    unsigned long v[2];
    size_t n = 0;
    if (cli_parse_ulong_list(flag, text, SERVE_QUERY_MAX, v, 2, &n) != 0) return -1;
    if (n != 2 || v[0] > v[1]) {
        fprintf(stderr, "radixmlp: %s expects MIN,MAX with MIN <= MAX, got '%s'\n", flag, text);
        return -1;
    }
    range[0] = v[0], range[1] = v[1];
    return 0;
}

static int parse_trace(const char *flag, const char *v, serve_args *a) {
    if (strcmp(v, "none") == 0) { /* the replica sweep alone */
        a->n_traces = 0, a->no_traces = 1;
        return 0;
    }
    if (strcmp(v, "all") == 0) {
        for (size_t i = 0; i < 4; i++) a->traces[i] = ALL_TRACES[i];
        a->n_traces = 4;
        return 0;
    }
    if (!serve_trace_known(v)) {
        fprintf(stderr, "radixmlp: %s expects rerank, embed, no_sharing, mixed, all or none, got '%s'\n", flag, v);
        return -1;
    }
    if (a->n_traces < 4) a->traces[a->n_traces++] = v;
    return 0;
}

static int parse_args(int argc, char **argv, serve_args *a) {
    *a = (serve_args){.sweep = "mixed", .requests = 300, .queries = 32, .request_seqs = 8, .max_tokens = 4096, .max_seqs = 64,
                      .max_wait_ms = 500, .cache_mb = 64, .layers = 2, .hidden = 256, .seed = 33,
                      .replicas = {1, 2, 4, 8, 16}, .n_replicas = 5, .load = 1.0, .routes = 3,
                      .query_tokens = {24, 72}};
    for (int i = 0; i < argc; i++) {
        const char *flag = argv[i];
        if (strcmp(flag, "--serve") == 0) continue;
        if (strcmp(flag, "--json") == 0) {
            a->json = 1;
            continue;
        }
        if (strcmp(flag, "--capacity") == 0) {
            a->capacity = 1;
            continue;
        }
        if (strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0) return usage(stdout);
        if (i + 1 >= argc) {
            fprintf(stderr, "radixmlp: unknown option or missing value: %s (with --serve)\n", flag);
            return usage(stderr);
        }
        const char *v = argv[++i];
        int bad = 0;
        if (strcmp(flag, "--trace") == 0) bad = parse_trace(flag, v, a);
        else if (strcmp(flag, "--sweep") == 0) {
            a->sweep = strcmp(v, "none") == 0 ? NULL : v;
            if (a->sweep && !serve_trace_known(v)) {
                fprintf(stderr, "radixmlp: --sweep expects rerank, embed, no_sharing, mixed or none, got '%s'\n", v);
                bad = -1;
            }
        } else if (strcmp(flag, "--requests") == 0) bad = cli_parse_count(flag, v, 100000, &a->requests);
        else if (strcmp(flag, "--queries") == 0) bad = cli_parse_count(flag, v, 64, &a->queries);
        else if (strcmp(flag, "--request-seqs") == 0) bad = cli_parse_count(flag, v, 8, &a->request_seqs);
        else if (strcmp(flag, "--max-tokens") == 0) bad = cli_parse_count(flag, v, 1u << 20, &a->max_tokens);
        else if (strcmp(flag, "--max-rows") == 0) bad = cli_parse_count(flag, v, 1u << 20, &a->max_rows);
        else if (strcmp(flag, "--max-seqs") == 0) bad = cli_parse_count(flag, v, 4096, &a->max_seqs);
        else if (strcmp(flag, "--max-wait-ms") == 0) bad = cli_parse_ulong(flag, v, 3600000, &a->max_wait_ms);
        else if (strcmp(flag, "--cache-mb") == 0) bad = cli_parse_ulong(flag, v, 1u << 20, &a->cache_mb);
        else if (strcmp(flag, "--layers") == 0) bad = cli_parse_count(flag, v, 64, &a->layers);
        else if (strcmp(flag, "--hidden") == 0) bad = cli_parse_count(flag, v, 4096, &a->hidden);
        else if (strcmp(flag, "--seed") == 0) bad = cli_parse_ulong(flag, v, ~0ul, &a->seed);
        else if (strcmp(flag, "--replicas") == 0) bad = parse_list(flag, v, a);
        else if (strcmp(flag, "--route") == 0) {
            a->routes = strcmp(v, "rr") == 0 ? 1 : strcmp(v, "prefix") == 0 ? 2 : strcmp(v, "both") == 0 ? 3 : 0;
            if (a->routes == 0) {
                fprintf(stderr, "radixmlp: --route expects rr, prefix or both, got '%s'\n", v);
                bad = -1;
            }
        } else if (strcmp(flag, "--slo-ms") == 0) {
            bad = cli_parse_double(flag, v, &a->slo_ms);
            if (bad == 0 && !(a->slo_ms > 0.0 && a->slo_ms <= 3600000.0)) {
                fprintf(stderr, "radixmlp: --slo-ms expects a p99 wait bound in (0, 3600000] ms, got %s\n", v);
                bad = -1;
            }
        } else if (strcmp(flag, "--query-tokens") == 0) bad = parse_range(flag, v, a->query_tokens);
        else if (strcmp(flag, "--cost") == 0) {
            if (strcmp(v, "measured") == 0) a->cost = SERVE_COST_MEASURED;
            else if (strcmp(v, "model") == 0) a->cost = SERVE_COST_MODEL;
            else {
                fprintf(stderr, "radixmlp: --cost expects measured or model, got '%s'\n", v);
                bad = -1;
            }
        }
        else if (strcmp(flag, "--load") == 0) {
            bad = cli_parse_double(flag, v, &a->load);
            if (bad == 0 && !(a->load > 0.0 && a->load <= 100.0)) {
                fprintf(stderr, "radixmlp: --load expects a fraction of FIFO's capacity in (0, 100], got %s\n", v);
                bad = -1;
            }
        } else {
            fprintf(stderr, "radixmlp: %s is not an option of bench --serve\n", flag);
            return usage(stderr);
        }
        if (bad != 0) return 2;
    }
    if (a->hidden % 64 != 0) {
        fprintf(stderr, "radixmlp: --hidden %lu: a multiple of 64 (heads of 64)\n", a->hidden);
        return 2;
    }
    if (a->slo_ms > 0.0 && a->cost != SERVE_COST_MODEL) {
        fprintf(stderr, "radixmlp: --slo-ms needs --cost model (a search over the p99 of measured times would follow "
                        "the machine's noise)\n");
        return 2;
    }
    if (a->n_traces == 0 && !a->no_traces) return parse_trace("--trace", "all", a);
    return 0;
}

/* The built-in model: Qwen3-shaped, hidden H, 3H intermediate, heads of 64 (H/128 KV heads, at
 * least 1), vocabulary 8,192; written to a temporary folder and loaded. */
static int load_model(const serve_args *a, rmlp_model **model, rmlp_model_config *cfg) {
    uint32_t heads = (uint32_t)a->hidden / 64;
    *cfg = (rmlp_model_config){.architecture = RMLP_ARCH_QWEN3, .vocab_size = 8192, .hidden_size = (uint32_t)a->hidden,
                               .intermediate_size = 3 * (uint32_t)a->hidden, .num_hidden_layers = (uint32_t)a->layers,
                               .num_attention_heads = heads, .num_key_value_heads = heads >= 2 ? heads / 2 : 1,
                               .head_dim = 64, .max_position_embeddings = 4096, .rms_norm_eps = 1e-6,
                               .rope_theta = 1e6, .tie_word_embeddings = true, .qk_norm = true};
    char dir[] = "/tmp/radixmlp-serve-XXXXXX";
    if (mkdtemp(dir) == NULL) {
        fprintf(stderr, "radixmlp: cannot create a temporary folder %s: %s\n", dir, strerror(errno));
        return 1;
    }
    int written = tiny_model_write(dir, cfg, 1) == 0; /* says why when not */
    rmlp_status status = written ? rmlp_model_load(dir, NULL, model) : RMLP_ERR_IO;
    char path[64];
    snprintf(path, sizeof path, "%s/model.safetensors", dir), unlink(path);
    snprintf(path, sizeof path, "%s/config.json", dir), unlink(path);
    rmdir(dir);
    if (written && status != RMLP_OK) fprintf(stderr, "radixmlp: %s\n", rmlp_last_error());
    return status == RMLP_OK ? 0 : 1;
}

static double push_mean_us(const serve_result *r) { return r->pushes ? r->push_us / (double)r->pushes : 0.0; }

/* The batcher's own CPU time, FIFO's (r[0]) and prefix batching's (r[1]), as a '#' line. */
static void print_batcher_cost(const char *what, const serve_result *r) {
    printf("# %s, the batcher's CPU time: next batch p50/p99/max FIFO %.0f/%.0f/%.0f us, prefix %.0f/%.0f/%.0f us "
           "(up to %llu sequences queued); push %.2f / %.2f us a sequence\n", what, r[0].next_p50_us, r[0].next_p99_us,
           r[0].next_max_us, r[1].next_p50_us, r[1].next_p99_us, r[1].next_max_us,
           (unsigned long long)(r[0].deepest_queue > r[1].deepest_queue ? r[0].deepest_queue : r[1].deepest_queue),
           push_mean_us(&r[0]), push_mean_us(&r[1]));
}

/* N/N': tokens over compact rows. */
static double n_over_compact(const serve_result *r) {
    return r->compact_rows ? (double)r->tokens / (double)r->compact_rows : 0.0;
}

static void print_row(const serve_args *a, const char *trace, const serve_config *c, const serve_result *r) {
    const char *policy = c->mode == RMLP_BATCH_FIFO ? "fifo" : "prefix";
    const char *route = c->replicas == 1 ? "-" : c->route_prefix ? "prefix" : "rr";
    double ratio = n_over_compact(r);
    double hit = r->lookups ? (double)r->hits / (double)r->lookups : 0.0;
    uint64_t computed = r->compact_rows - (r->hits < r->compact_rows ? r->hits : r->compact_rows);
    double reuse = computed ? (double)r->tokens / (double)computed : 0.0; /* batching and cache together */
    double tps = r->busy_s > 0 ? (double)r->tokens / r->busy_s : 0.0;
    double util = r->span_s > 0 ? r->busy_s / (r->span_s * c->replicas) : 0.0;
    if (a->json)
        printf("{\"trace\": \"%s\", \"policy\": \"%s\", \"replicas\": %u, \"route\": \"%s\", \"requests\": %llu, "
               "\"seqs\": %llu, \"tokens\": %llu, \"compact_rows\": %llu, \"n_over_n_compact\": %.3f, "
               "\"cache_lookups\": %llu, \"cache_hits\": %llu, \"hit_rate\": %.4f, \"n_over_computed\": %.3f, "
               "\"tokens_per_s\": %.1f, "
               "\"busy_s\": %.3f, \"span_s\": %.3f, \"utilization\": %.3f, \"wait_p50_ms\": %.2f, "
               "\"wait_p99_ms\": %.2f, \"latency_p50_ms\": %.2f, \"latency_p99_ms\": %.2f, \"batch_p50_ms\": %.2f, "
               "\"batch_p99_ms\": %.2f, \"batches\": %llu, \"load\": %.3f, \"rate_rps\": %.2f, \"max_tokens\": %zu, "
               "\"max_rows\": %zu, \"max_seqs\": %zu, \"max_wait_ms\": %lu, \"cache_mb\": %lu, \"saturated\": %s, "
               "\"cost\": \"%s\", "
               "\"measured_busy_s\": %.3f, \"next_p50_us\": %.1f, \"next_p99_us\": %.1f, \"next_max_us\": %.1f, "
               "\"push_mean_us\": %.2f, \"deepest_queue\": %llu}\n",
               trace, policy, c->replicas, route, (unsigned long long)r->requests, (unsigned long long)r->seqs,
               (unsigned long long)r->tokens, (unsigned long long)r->compact_rows, ratio,
               (unsigned long long)r->lookups, (unsigned long long)r->hits, hit, reuse, tps, r->busy_s, r->span_s, util,
               r->wait_p50_ms, r->wait_p99_ms, r->latency_p50_ms, r->latency_p99_ms, r->batch_p50_ms, r->batch_p99_ms,
               (unsigned long long)r->batches, a->load, c->rate, c->max_tokens, c->max_rows, c->max_seqs,
               a->max_wait_ms, a->cache_mb, c->saturate ? "true" : "false", c->cost == SERVE_COST_MODEL ? "model" : "measured",
               r->cost.measured_us * 1e-6, r->next_p50_us, r->next_p99_us, r->next_max_us, push_mean_us(r),
               (unsigned long long)r->deepest_queue);
    else
        printf("%-10s %-6s %3u %-6s %6llu %8llu %6.2f %6.1f%% %6.2f %9.0f %5.2f %9.1f %9.1f %9.1f %8.1f %8.1f\n",
               trace, policy, c->replicas, route, (unsigned long long)r->seqs, (unsigned long long)r->tokens, ratio,
               100.0 * hit, reuse, tps, util, r->wait_p50_ms, r->wait_p99_ms, r->latency_p99_ms, r->batch_p50_ms,
               r->batch_p99_ms);
    fflush(stdout);
}

static double tokens_per_s(const serve_result *r) { return r->busy_s > 0 ? (double)r->tokens / r->busy_s : 0.0; }
static double hit_rate(const serve_result *r) { return r->lookups ? (double)r->hits / (double)r->lookups : 0.0; }

/* Runs the n configurations c (n) on the trace interleaved into r (n). 0, or 1 after printing why. */
static int run_together(const serve_args *a, const serve_trace *t, rmlp_model *model, const serve_config *c, size_t n,
                        serve_result *r) {
    serve_sim *sims[2] = {NULL, NULL};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) rc = (sims[i] = serve_sim_new(t, model, (uint32_t)a->hidden, &c[i])) ? 0 : 1;
    if (rc == 0) rc = serve_run(sims, n, r);
    for (size_t i = 0; rc == 0 && i < n; i++) serve_cost_log_merge(a->cost_all, &r[i].cost);
    for (size_t i = 0; i < n; i++) serve_sim_free(sims[i]);
    return rc;
}

/* FIFO's capacity on the trace (every request queued; the first 8 batches) as the request rate that
 * offers it: load 1. */
static int rate_per_load(const serve_args *a, const serve_trace *t, rmlp_model *model, serve_config c, double *rate) {
    c.mode = RMLP_BATCH_FIFO, c.replicas = 1, c.saturate = true, c.max_batches = 8, c.rate = 1.0;
    serve_result r;
    if (run_together(a, t, model, &c, 1, &r) != 0) return 1;
    double tokens_per_request = (double)t->n_tokens / (double)t->n_requests;
    *rate = tokens_per_s(&r) / tokens_per_request;
    return 0;
}

/* Both policies with the whole trace queued at once and no age bound (the deepest queue, every
 * group whole): the most each can do on the trace at this budget, so the ceiling of their ratio. */
static int capacity(const serve_args *a, const char *name, const serve_trace *t, rmlp_model *model, serve_config c) {
    serve_config pair[2] = {c, c};
    for (int mode = 0; mode < 2; mode++) {
        pair[mode].saturate = true, pair[mode].max_wait_us = UINT64_MAX, pair[mode].max_batches = 0;
        pair[mode].mode = mode ? RMLP_BATCH_PREFIX : RMLP_BATCH_FIFO;
    }
    serve_result r[2];
    if (run_together(a, t, model, pair, 2, r) != 0) return 1;
    if (a->json) {
        for (int mode = 0; mode < 2; mode++) print_row(a, name, &pair[mode], &r[mode]);
        return 0;
    }
    printf("# %s capacity (every request queued at once, no age bound): FIFO %.0f tok/s (N/N' %.2f, p99 wait %.1f ms), "
           "prefix %.0f tok/s (N/N' %.2f, p99 wait %.1f ms): %.2fx\n", name, tokens_per_s(&r[0]), n_over_compact(&r[0]),
           r[0].wait_p99_ms, tokens_per_s(&r[1]), n_over_compact(&r[1]), r[1].wait_p99_ms, tokens_per_s(&r[1]) / tokens_per_s(&r[0]));
    char what[64];
    snprintf(what, sizeof what, "%s capacity", name);
    print_batcher_cost(what, r);
    return 0;
}

/* Per policy, the highest load carried at p99 wait <= --slo-ms over the trace (serve_slo.h), and
 * prefix batching's over FIFO's. */
static int slo(const serve_args *a, const char *name, const serve_trace *t, rmlp_model *model, serve_config c,
               double per_load, double *ratio) {
    serve_slo found[2];
    c.plan_only = c.cache_bytes == 0; /* the cost model without a cache: the forward moves nothing */
    for (int mode = 0; mode < 2; mode++) {
        c.mode = mode ? RMLP_BATCH_PREFIX : RMLP_BATCH_FIFO;
        if (serve_slo_search(t, model, (uint32_t)a->hidden, c, per_load, a->slo_ms, &found[mode]) != 0) return 1;
    }
    *ratio = found[0].load > 0 ? found[1].load / found[0].load : 0.0;
    if (a->json) {
        for (int mode = 0; mode < 2; mode++) {
            const serve_result *r = &found[mode].at;
            printf("{\"trace\": \"%s\", \"policy\": \"%s\", \"slo_ms\": %.1f, \"carried_load\": %.17g, "
                   "\"refused_load\": %.17g, \"wait_p99_ms\": %.2f, \"n_over_n_compact\": %.3f, \"requests\": %zu, "
                   "\"search_runs\": %u}\n",
                   name, mode ? "prefix" : "fifo", a->slo_ms, found[mode].load, found[mode].refused, r->wait_p99_ms,
                   n_over_compact(r), t->n_requests, found[mode].runs);
        }
        return 0;
    }
    const serve_result *r = &found[0].at, *q = &found[1].at;
    printf("# %s at p99 wait <= %.0f ms (%zu client requests): FIFO carries load %.3f (p99 %.1f ms, N/N' %.2f), "
           "prefix %.3f (p99 %.1f ms, N/N' %.2f): %.2fx\n", name, a->slo_ms, t->n_requests, found[0].load,
           r->wait_p99_ms, n_over_compact(r), found[1].load, q->wait_p99_ms, n_over_compact(q), *ratio);
    return 0;
}

int bench_serve(int argc, char **argv) {
    serve_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != 0) return rc < 0 ? 0 : rc;
    rmlp_model *model = NULL;
    rmlp_model_config cfg;
    if (rmlp_set_cpu_threads(1) != RMLP_OK || load_model(&a, &model, &cfg) != 0) {
        if (model == NULL) fprintf(stderr, "radixmlp: %s\n", rmlp_last_error());
        return 1;
    }
    serve_config base = {RMLP_BATCH_FIFO, a.max_tokens, a.max_rows ? a.max_rows : a.max_tokens, a.max_seqs,
                         (uint64_t)a.max_wait_ms * 1000, (uint64_t)a.cache_mb << 20, 1, false, 1.0, 0, false, a.cost, serve_cost_default(&cfg), false};
    serve_cost_log cost_all = {0};
    a.cost_all = &cost_all;
    if (!a.json)
        printf("%-10s %-6s %3s %-6s %6s %8s %6s %7s %6s %9s %5s %9s %9s %9s %8s %8s\n", "trace", "policy", "K",
               "route", "seqs", "tokens", "N/N'", "hit", "N/comp", "tok/s", "util", "wait p50", "wait p99", "lat p99", "batch50",
               "batch99");
    double fifo_tps[4] = {0}, prefix_tps[4] = {0}, fifo_p99[4] = {0}, prefix_p99[4] = {0}, slo_ratio[4] = {0};
    serve_shape shape = {(uint32_t)a.queries, (uint32_t)a.request_seqs, (uint32_t)a.query_tokens[0],
                         (uint32_t)a.query_tokens[1]};
    for (size_t i = 0; rc == 0 && i < a.n_traces; i++) {
        serve_trace t;
        if (serve_trace_make(a.traces[i], a.requests, &shape, cfg.vocab_size, a.seed, &t) != 0) {
            fprintf(stderr, "radixmlp: trace %s: out of memory\n", a.traces[i]);
            rc = 1;
            break;
        }
        serve_config c = base;
        double per_load = 0.0;
        rc = t.longest > a.max_tokens ? (fprintf(stderr, "radixmlp: --max-tokens %lu is below the trace's longest "
                                                 "sequence (%u tokens)\n", a.max_tokens, t.longest), 2)
                                      : rate_per_load(&a, &t, model, c, &per_load);
        c.rate = a.load * per_load;
        serve_config pair[2] = {c, c};
        pair[1].mode = RMLP_BATCH_PREFIX;
        serve_result r[2];
        if (rc == 0) rc = run_together(&a, &t, model, pair, 2, r);
        for (int mode = 0; rc == 0 && mode < 2; mode++) {
            print_row(&a, a.traces[i], &pair[mode], &r[mode]);
            (mode == 0 ? fifo_tps : prefix_tps)[i] = tokens_per_s(&r[mode]);
            (mode == 0 ? fifo_p99 : prefix_p99)[i] = r[mode].wait_p99_ms;
        }
        if (rc == 0 && !a.json) {
            char said[2][96];
            for (int mode = 0; mode < 2; mode++)
                serve_cost_describe(said[mode], sizeof said[mode], &base.model, &r[mode].cost);
            printf("# %s: prefix/FIFO throughput %.2fx, p99 wait %.1f vs %.1f ms (cost %s; model vs measured: FIFO "
                   "%s, prefix %s)\n", a.traces[i], prefix_tps[i] / fifo_tps[i], prefix_p99[i], fifo_p99[i],
                   a.cost == SERVE_COST_MODEL ? "model" : "measured", said[0], said[1]);
            print_batcher_cost(a.traces[i], r);
        }
        if (rc == 0 && a.capacity) rc = capacity(&a, a.traces[i], &t, model, c);
        if (rc == 0 && a.slo_ms > 0.0) rc = slo(&a, a.traces[i], &t, model, c, per_load, &slo_ratio[i]);
        serve_trace_free(&t);
    }
    double one_hit = 0.0, k8_hit[2] = {-1.0, -1.0};
    if (rc == 0 && a.sweep != NULL && a.cache_mb > 0) {
        serve_trace t;
        serve_config c = base;
        c.mode = RMLP_BATCH_PREFIX;
        rc = serve_trace_make(a.sweep, a.requests, &shape, cfg.vocab_size, a.seed, &t) != 0 ? 1 : 0;
        double per_load = 0.0;
        if (rc == 0) rc = rate_per_load(&a, &t, model, c, &per_load);
        c.rate = a.load * per_load;
        for (size_t k = 0; rc == 0 && k < a.n_replicas; k++) {
            serve_config pair[2] = {c, c}; /* round robin and prefix routing, interleaved */
            size_t n = 0;
            if (a.replicas[k] == 1) pair[n++].route_prefix = true; /* one replica: one run, whatever the route */
            else
                for (int route = 0; route < 2; route++)
                    if (a.routes >> route & 1) pair[n++].route_prefix = route == 1;
            for (size_t i = 0; i < n; i++) pair[i].replicas = (uint32_t)a.replicas[k];
            serve_result r[2];
            rc = run_together(&a, &t, model, pair, n, r);
            for (size_t i = 0; rc == 0 && i < n; i++) {
                const serve_config *ci = &pair[i];
                print_row(&a, a.sweep, ci, &r[i]);
                if (ci->replicas == 1) one_hit = hit_rate(&r[i]);
                if (ci->replicas == 8) k8_hit[ci->route_prefix] = hit_rate(&r[i]);
            }
        }
        serve_trace_free(&t);
    }
    if (rc == 0 && !a.json) {
        serve_cost_print(stdout, &base.model, &cost_all);
        for (size_t i = 0; i < a.n_traces; i++) {
            if (strcmp(a.traces[i], "rerank") == 0)
                printf("# target, rerank: prefix >= 1.5x FIFO throughput at no worse p99 wait: %.2fx, %.1f vs %.1f ms: "
                       "%s\n", prefix_tps[i] / fifo_tps[i], prefix_p99[i], fifo_p99[i],
                       prefix_tps[i] >= 1.5 * fifo_tps[i] && prefix_p99[i] <= fifo_p99[i] ? "met" : "NOT met");
            if (strcmp(a.traces[i], "rerank") == 0 && a.slo_ms > 0.0)
                printf("# target, rerank at p99 wait <= %.0f ms: prefix carries >= 1.5x FIFO's load: %.2fx: %s\n",
                       a.slo_ms, slo_ratio[i], slo_ratio[i] >= 1.5 ? "met" : "NOT met");
            if (strcmp(a.traces[i], "no_sharing") == 0)
                printf("# target, no_sharing: prefix no more than 2%% behind FIFO: %.3fx: %s\n",
                       prefix_tps[i] / fifo_tps[i], prefix_tps[i] >= 0.98 * fifo_tps[i] ? "met" : "NOT met");
        }
        char rr[32] = "not run";
        if (k8_hit[0] >= 0.0) snprintf(rr, sizeof rr, "%.1f%%", 100.0 * k8_hit[0]);
        if (k8_hit[1] >= 0.0)
            printf("# target, %s K=8: prefix routing's hit rate within 90%% of one replica's: %.1f%% vs %.1f%% (%.2f; "
                   "round robin %s): %s\n", a.sweep, 100.0 * k8_hit[1], 100.0 * one_hit,
                   one_hit > 0 ? k8_hit[1] / one_hit : 0.0, rr,
                   k8_hit[1] >= 0.9 * one_hit ? "met" : "NOT met");
    }
    rmlp_model_free(model);
    if (rc == 0 && cli_finish_output(stdout, "standard output") != 0) rc = 1;
    return rc;
}
