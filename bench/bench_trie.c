/*
 * bench_trie.c: times rmlp_plan_build, one thread, on the grid of the foundation issue
 * (shared-prefix batches, fan-out batches, one long sequence) and a series up to 1M tokens
 * for linearity. Every plan is checked with plan_verify before it is timed. One JSON object
 * per case on stdout:
 *   {"case": ..., "n_tokens": ..., "n_compact": ..., "us_min": ..., "us_median": ..., "ns_per_token": ...}
 * Usage: bench_trie [--quick]   (--quick: fewer repetitions, for smoke tests)
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plan_verify.h"
#include "radix_mlp.h"
#include "workload.h"

typedef struct bench_case {
    const char *name;
    size_t n_seqs, seq_len, prefix_len;
} bench_case;

static const bench_case cases[] = {
    {"b32x512_p0", 32, 512, 0},        {"b32x512_p128", 32, 512, 128},   {"b32x512_p256", 32, 512, 256},
    {"b32x512_p448", 32, 512, 448},    {"b32x512_p512", 32, 512, 512},   {"b128x128_p0", 128, 128, 0},
    {"b128x128_p32", 128, 128, 32},    {"b128x128_p64", 128, 128, 64},   {"b128x128_p96", 128, 128, 96},
    {"b128x128_p112", 128, 128, 112},  {"b128x128_p128", 128, 128, 128}, {"b8x2048_p1024", 8, 2048, 1024},
    {"b1x16384", 1, 16384, 0},         {"fanout_2048x8_at0", 2048, 8, 0}, {"fanout_2048x8_at4", 2048, 8, 4},
    {"fanout_512x32_at16", 512, 32, 16},
    /* linearity: the same shape (512-token sequences, half shared) from 16K to 1M tokens */
    {"scale_b32x512_p256", 32, 512, 256}, {"scale_b128x512_p256", 128, 512, 256},
    {"scale_b512x512_p256", 512, 512, 256}, {"scale_b2048x512_p256", 2048, 512, 256},
};

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int compare_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Returns 0, or 1 after printing why the case failed. */
static int run_case(const bench_case *c, rmlp_planner *planner, int quick) {
    workload w;
    if (workload_shared_prefix(&w, c->n_seqs, c->seq_len, c->prefix_len, 42) != 0) {
        fprintf(stderr, "bench_trie: %s: out of memory\n", c->name);
        return 1;
    }
    rmlp_plan_params params = rmlp_plan_default_params();
    params.threshold = 1.0; /* always radix: time the whole trie */
    rmlp_plan plan;
    rmlp_status status =
        rmlp_plan_build(planner, w.input_ids, w.position_ids, w.n_tokens, w.cu_seqlens, w.n_seqs, &params, &plan);
    char why[256];
    if (status != RMLP_OK) {
        fprintf(stderr, "bench_trie: %s: %s\n", c->name, rmlp_last_error());
    } else if (plan_verify(w.input_ids, w.position_ids, w.n_tokens, w.cu_seqlens, w.n_seqs, 0, &plan, why,
                           sizeof why) != 0) {
        fprintf(stderr, "bench_trie: %s: wrong plan: %s\n", c->name, why);
        status = RMLP_ERR_INTERNAL;
    }
    if (status != RMLP_OK) {
        workload_free(&w);
        return 1;
    }
    /* Repeat for about 0.3 s (0.02 s with --quick), at least 5 and at most 5000 times. */
    double budget_us = quick ? 2e4 : 3e5;
    size_t reps = (size_t)(budget_us / (plan.build_us + 1.0));
    if (reps < 5) reps = 5;
    if (reps > 5000) reps = 5000;
    double *times = malloc(reps * sizeof(double));
    if (times == NULL) {
        workload_free(&w);
        return 1;
    }
    for (size_t r = 0; r < reps; r++) {
        double start = now_us();
        rmlp_plan_build(planner, w.input_ids, w.position_ids, w.n_tokens, w.cu_seqlens, w.n_seqs, &params, &plan);
        times[r] = now_us() - start;
    }
    qsort(times, reps, sizeof(double), compare_double);
    printf("{\"case\": \"%s\", \"n_seqs\": %zu, \"n_tokens\": %zu, \"n_compact\": %u, \"reps\": %zu, "
           "\"us_min\": %.2f, \"us_median\": %.2f, \"ns_per_token\": %.3f}\n",
           c->name, w.n_seqs, w.n_tokens, plan.n_compact, reps, times[0], times[reps / 2],
           times[reps / 2] * 1e3 / (double)w.n_tokens);
    fflush(stdout);
    free(times);
    workload_free(&w);
    return 0;
}

int main(int argc, char **argv) {
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    if (argc > 2 || (argc == 2 && !quick)) {
        fprintf(stderr, "usage: bench_trie [--quick]\n");
        return 2;
    }
    rmlp_planner *planner = NULL;
    if (rmlp_planner_create(&planner) != RMLP_OK) {
        fprintf(stderr, "bench_trie: %s\n", rmlp_last_error());
        return 1;
    }
    int failures = 0;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) failures += run_case(&cases[k], planner, quick);
    rmlp_planner_free(planner);
    return failures ? 1 : 0;
}
