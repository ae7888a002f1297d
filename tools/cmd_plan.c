/*
 * cmd_plan.c: `radixmlp plan`: builds RadixMLP plans for a built-in reranking batch (one
 * template + query shared by N passages) and prints N, N', the ratio, the gate's choice and
 * the build time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/cli.h"
#include "commands.h"
#include "radix_mlp.h"
#include "bench/workload.h"

typedef struct plan_args {
    unsigned long passages;
    unsigned long seed;
    unsigned long repeat;
    rmlp_plan_params params;
    int json;
} plan_args;

static int plan_usage(FILE *to) {
    fprintf(to,
            "usage: radixmlp plan [--passages N] [--seed S] [--threshold T] [--pad M] [--gate distinct|tei]\n"
            "                     [--repeat R] [--json]\n"
            "       radixmlp version\n"
            "  plan: plans a built-in reranking batch (template + query shared by N >= 1 passages, default 32)\n"
            "        --threshold T  gate: radix iff T >= 1 or N'/N < T; 0 = off (default %.2f)\n"
            "        --pad M        pad the compact rows to a multiple of M (default: no padding)\n"
            "        --gate RULE    distinct (default): N' unpadded; tei: TEI's rule, N' padded, in f32,\n"
            "                       off at T <= 1e-6 (RADIX_MLP_GATE for hosts)\n"
            "        --repeat R     builds to time (default 100)\n",
            RMLP_DEFAULT_THRESHOLD);
    return to == stdout ? 0 : 2;
}

static int parse_plan_args(int argc, char **argv, plan_args *a) {
    *a = (plan_args){.passages = 32, .seed = 1, .repeat = 100, .params = rmlp_plan_default_params()};
    for (int i = 0; i < argc; i++) {
        const char *flag = argv[i];
        if (strcmp(flag, "--json") == 0) {
            a->json = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "radixmlp: unknown option or missing value: %s\n", flag);
            return -1;
        }
        const char *value = argv[++i];
        unsigned long number = 0;
        if (strcmp(flag, "--passages") == 0) {
            if (cli_parse_count(flag, value, 1000000, &a->passages) != 0) return -1;
        } else if (strcmp(flag, "--seed") == 0) {
            if (cli_parse_ulong(flag, value, ~0ul, &a->seed) != 0) return -1;
        } else if (strcmp(flag, "--repeat") == 0) {
            if (cli_parse_count(flag, value, 1000000, &a->repeat) != 0) return -1;
        } else if (strcmp(flag, "--pad") == 0) {
            if (cli_parse_ulong(flag, value, 1u << 20, &number) != 0) return -1;
            a->params.pad = true;
            a->params.pad_multiple_of = (uint32_t)number; /* 0 is reported by the library */
        } else if (strcmp(flag, "--threshold") == 0) {
            if (cli_parse_double(flag, value, &a->params.threshold) != 0) return -1;
        } else if (strcmp(flag, "--gate") == 0) {
            if (cli_parse_gate(flag, value, &a->params.gate) != 0) return -1;
        } else {
            fprintf(stderr, "radixmlp: unknown option: %s\n", flag);
            return -1;
        }
    }
    return 0;
}

int cmd_plan(int argc, char **argv) {
    plan_args a;
    if (argc > 0 && strcmp(argv[0], "--help") == 0) return plan_usage(stdout);
    if (parse_plan_args(argc, argv, &a) != 0) return plan_usage(stderr);
    workload w;
    if (workload_rerank(&w, a.passages, a.seed) != 0) {
        fprintf(stderr, "radixmlp: out of memory building the workload\n");
        return 1;
    }
    rmlp_planner *planner = NULL;
    double *times = malloc(a.repeat * sizeof(double));
    rmlp_plan plan;
    rmlp_status status = times ? rmlp_planner_create(&planner) : RMLP_ERR_OUT_OF_MEMORY;
    for (unsigned long r = 0; status == RMLP_OK && r < a.repeat; r++) {
        status = rmlp_plan_build(planner, w.input_ids, w.position_ids, w.n_tokens, w.cu_seqlens, w.n_seqs, &a.params,
                                 &plan);
        if (status == RMLP_OK) times[r] = plan.build_us;
    }
    int rc = 0;
    if (status != RMLP_OK) {
        fprintf(stderr, "radixmlp: %s: %s\n", rmlp_status_string(status), rmlp_last_error());
        rc = 1;
    } else {
        double median = cli_sort_median(times, a.repeat);
        const char *gate = plan.use_radix ? "radix" : "identity";
        if (a.json) {
            printf("{\"case\": \"rerank\", \"n_seqs\": %u, \"n_tokens\": %u, \"n_compact\": %u, "
                   "\"n_compact_padded\": %u, \"n_distinct\": %u, \"ratio\": %.4f, \"use_radix\": %s, "
                   "\"threshold\": %g, \"gate\": \"%s\", \"us_min\": %.2f, \"us_median\": %.2f}\n",
                   plan.n_seqs, plan.n_tokens, plan.n_compact, plan.n_compact_padded, plan.n_distinct,
                   plan.compact_ratio, plan.use_radix ? "true" : "false", a.params.threshold,
                   cli_gate_name(a.params.gate), times[0], median);
        } else {
            printf("radixmlp plan: reranking batch, %lu passages sharing one template + query (seed %lu)\n",
                   a.passages, a.seed);
            printf("  tokens N          %u in %u sequences\n", plan.n_tokens, plan.n_seqs);
            printf("  distinct paths    %u (ratio N'/N %.4f)\n", plan.n_distinct, plan.compact_ratio);
            printf("  gate              %s (threshold %g, rule %s)\n", gate, a.params.threshold,
                   cli_gate_name(a.params.gate));
            printf("  compact rows N'   %u (%u padded)\n", plan.n_compact, plan.n_compact_padded);
            printf("  build time        min %.2f us, median %.2f us over %lu builds\n", times[0], median, a.repeat);
        }
    }
    rmlp_planner_free(planner);
    free(times);
    workload_free(&w);
    return rc;
}

