/*
 * cmd_bench.c: `radixmlp bench [--json] [--layers L] [--repeat R] [--quick]`: RadixMLP off vs on, in one
 * run, on a built-in random model shaped like Qwen3-0.6B layers (hidden 1024, intermediate
 * 3072, 16 query / 8 KV heads of 128; written to a temporary folder and loaded like any
 * checkpoint). Cases: the synthetic grid (32 sequences, shared prefix 128/448/2048, suffix
 * 32/64/256), a reranking batch shaped like MS MARCO (template + query of 40-80 tokens, 32
 * passages of 40-120), and a batch with nothing shared (where the default gate picks the
 * identity). Per case: N, N', ratio, ms off, ms on, measured speedup, the model-predicted
 * speedup 1/((1-f)+f/r) with f the position-wise share of the off run's time and r = N/N', and
 * the max |off - on| of the last hidden states. --quick: the three smallest grid cases;
 * --repeat R: R alternating off/on runs per case, the fastest of each kept; --case NAME: only the
 * cases whose name contains NAME (may be given several times).
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "radix_mlp.h"
#include "tiny_model.h"
#include "workload.h"

typedef struct bench_case {
    const char *name;
    size_t n_seqs, prefix, suffix; /* suffix 0: the reranking batch */
    double threshold;              /* of the "on" run */
} bench_case;

static const bench_case cases[] = {
    {"b32_p128_s32", 32, 128, 32, 1.0},    {"b32_p128_s64", 32, 128, 64, 1.0},   {"b32_p448_s32", 32, 448, 32, 1.0},
    {"b32_p448_s64", 32, 448, 64, 1.0},    {"b32_p128_s256", 32, 128, 256, 1.0}, {"b32_p448_s256", 32, 448, 256, 1.0},
    {"b32_p2048_s32", 32, 2048, 32, 1.0},  {"b32_p2048_s64", 32, 2048, 64, 1.0}, {"b32_p2048_s256", 32, 2048, 256, 1.0},
    {"rerank_msmarco_32", 32, 0, 0, 1.0},  {"no_sharing_b32_s512", 32, 0, 512, RMLP_DEFAULT_THRESHOLD},
};

typedef struct timing_state {
    rmlp_context *ctx;
    double attention_ms;
} timing_state;

/* The built-in attention, timed: what is not attention is the position-wise share f. */
static rmlp_status timed_attention(void *user_data, const rmlp_attention_args *args) {
    timing_state *t = user_data;
    double start = cli_now_ms();
    rmlp_status status = rmlp_attention(t->ctx, args);
    t->attention_ms += cli_now_ms() - start;
    return status;
}

typedef struct run_result {
    double ms, attention_ms, plan_us;
    rmlp_plan plan;
} run_result;

/* One plan and forward; with repeats, the fastest forward is kept. */
static int run_once(rmlp_planner *planner, timing_state *t, const workload *w, double threshold, float *out,
                    run_result *r) {
    rmlp_plan_params params = rmlp_plan_default_params();
    params.threshold = threshold;
    if (rmlp_plan_build(planner, w->input_ids, w->position_ids, w->n_tokens, w->cu_seqlens, w->n_seqs, &params,
                        &r->plan) != RMLP_OK)
        return -1;
    t->attention_ms = 0.0;
    double start = cli_now_ms();
    if (rmlp_forward(t->ctx, &r->plan, timed_attention, t, out) != RMLP_OK) return -1;
    double ms = cli_now_ms() - start;
    if (r->ms > 0.0 && r->ms <= ms) return 0;
    r->ms = ms;
    r->attention_ms = t->attention_ms;
    r->plan_us = r->plan.build_us;
    return 0;
}

static int make_workload(const bench_case *c, workload *w) {
    if (c->suffix == 0) return workload_rerank(w, c->n_seqs, 7);
    return workload_shared_prefix(w, c->n_seqs, c->prefix + c->suffix, c->prefix, 7);
}

static void clamp_ids(workload *w, uint32_t vocab) {
    for (size_t i = 0; i < w->n_tokens; i++) w->input_ids[i] %= vocab;
}

int cmd_bench(int argc, char **argv) {
    int json = 0, quick = 0;
    unsigned long layers = 2, repeat = 1;
    const char *only[16];
    size_t n_only = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) json = 1;
        else if (strcmp(argv[i], "--quick") == 0) quick = 1;
        else if (strcmp(argv[i], "--layers") == 0 && i + 1 < argc) {
            if (cli_parse_ulong("--layers", argv[++i], 64, &layers) != 0 || layers == 0) return 2;
        } else if (strcmp(argv[i], "--case") == 0 && i + 1 < argc && n_only < 16) {
            only[n_only++] = argv[++i];
        } else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
            if (cli_parse_ulong("--repeat", argv[++i], 100, &repeat) != 0 || repeat == 0) return 2;
        } else {
            fprintf(stderr, "usage: radixmlp bench [--json] [--layers L (default 2)] [--repeat R (default 1)] "
                            "[--case NAME]... [--quick]\n");
            return strcmp(argv[i], "--help") == 0 ? 0 : 2;
        }
    }
    rmlp_model_config cfg = {.architecture = RMLP_ARCH_QWEN3, .vocab_size = 8192, .hidden_size = 1024,
                             .intermediate_size = 3072, .num_hidden_layers = (uint32_t)layers,
                             .num_attention_heads = 16, .num_key_value_heads = 8, .head_dim = 128,
                             .max_position_embeddings = 40960, .rms_norm_eps = 1e-6, .rope_theta = 1e6,
                             .tie_word_embeddings = true, .qk_norm = true};
    char dir[] = "/tmp/radixmlp-bench-XXXXXX";
    if (mkdtemp(dir) == NULL || tiny_model_write(dir, &cfg, 1) != 0) return 1;
    rmlp_model *model = NULL;
    rmlp_status status = rmlp_model_load(dir, NULL, &model);
    char path[128];
    snprintf(path, sizeof path, "%s/model.safetensors", dir), unlink(path);
    snprintf(path, sizeof path, "%s/config.json", dir), unlink(path);
    rmdir(dir);
    if (status != RMLP_OK) {
        fprintf(stderr, "radixmlp: %s\n", rmlp_last_error());
        return 1;
    }
    size_t n_cases = quick ? 3 : sizeof cases / sizeof cases[0];
    int rc = 0;
    if (!json)
        printf("%-22s %7s %7s %6s %10s %10s %8s %9s %11s\n", "case", "N", "N'", "ratio", "ms off", "ms on", "speedup",
               "predicted", "max|off-on|");
    for (size_t k = 0; rc == 0 && k < n_cases; k++) {
        const bench_case *c = &cases[k];
        int wanted = n_only == 0;
        for (size_t o = 0; o < n_only; o++) wanted |= strstr(c->name, only[o]) != NULL;
        if (!wanted) continue;
        workload w;
        if (make_workload(c, &w) != 0) return 1;
        clamp_ids(&w, cfg.vocab_size);
        fprintf(stderr, "radixmlp bench: %s (%zu tokens, %lu layers)...\n", c->name, w.n_tokens, layers);
        timing_state t = {0};
        rmlp_planner *planner = NULL;
        float *out_off = malloc(w.n_tokens * cfg.hidden_size * sizeof(float));
        float *out_on = malloc(w.n_tokens * cfg.hidden_size * sizeof(float));
        run_result off = {0}, on = {0};
        rc = out_off && out_on && rmlp_context_create(model, w.n_tokens, &t.ctx) == RMLP_OK &&
                     rmlp_planner_create(&planner) == RMLP_OK
                 ? 0
                 : 1;
        /* Off and on alternate, so a slow spell of a shared machine hits both alike. */
        for (unsigned long rep = 0; rc == 0 && rep < repeat; rep++)
            rc = run_once(planner, &t, &w, 0.0, out_off, &off) == 0 &&
                         run_once(planner, &t, &w, c->threshold, out_on, &on) == 0
                     ? 0
                     : 1;
        if (rc != 0) {
            fprintf(stderr, "radixmlp: %s: %s\n", c->name, rmlp_last_error());
        } else {
            double diff = 0.0;
            for (size_t i = 0; i < w.n_tokens * cfg.hidden_size; i++) {
                double d = fabs((double)out_off[i] - out_on[i]);
                diff = isnan(d) ? INFINITY : (d > diff ? d : diff);
            }
            double f = 1.0 - off.attention_ms / off.ms, r = (double)w.n_tokens / on.plan.n_compact;
            double predicted = 1.0 / ((1.0 - f) + f / r), speedup = off.ms / on.ms;
            if (json)
                printf("{\"case\": \"%s\", \"n_seqs\": %zu, \"n_tokens\": %zu, \"n_compact\": %u, \"use_radix\": %s, "
                       "\"layers\": %lu, \"ms_off\": %.2f, \"ms_on\": %.2f, \"plan_us\": %.1f, \"speedup\": %.3f, "
                       "\"f_position_wise\": %.4f, \"predicted_speedup\": %.3f, \"max_abs_diff\": %.3g}\n",
                       c->name, w.n_seqs, w.n_tokens, on.plan.n_compact, on.plan.use_radix ? "true" : "false", layers,
                       off.ms, on.ms, on.plan_us, speedup, f, predicted, diff);
            else
                printf("%-22s %7zu %7u %6.3f %10.1f %10.1f %7.2fx %8.2fx %11.3g\n", c->name, w.n_tokens,
                       on.plan.n_compact, (double)on.plan.n_compact / w.n_tokens, off.ms, on.ms, speedup, predicted,
                       diff);
            fflush(stdout);
        }
        free(out_off), free(out_on);
        rmlp_planner_free(planner);
        rmlp_context_free(t.ctx);
        workload_free(&w);
    }
    rmlp_model_free(model);
    return rc;
}
