/*
 * plan_repeat.c: builds one bench_trie workload's plan REPS times and nothing else, so a profiler
 * or an instruction counter sees the planner alone (bench_trie also verifies every plan):
 *   valgrind --tool=callgrind bench/plan_repeat B LEN PREFIX REPS
 * then `callgrind_annotate --inclusive=yes` gives trie_plan_build's instructions per REPS builds.
 * The batch is workload_shared_prefix(B sequences of LEN tokens sharing PREFIX, seed 42), the gate
 * always on, as in bench_trie. Prints N, N' and the fastest and median build in µs. It uses the
 * public ABI only, so LD_LIBRARY_PATH can time an older libradix_mlp (whose plans bench_trie's
 * checker may not know) on the same workload.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "radix_mlp.h"
#include "workload.h"

static int compare_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: plan_repeat B LEN PREFIX REPS\n");
        return 2;
    }
    size_t b = strtoul(argv[1], NULL, 10), len = strtoul(argv[2], NULL, 10), prefix = strtoul(argv[3], NULL, 10);
    long reps = strtol(argv[4], NULL, 10);
    workload w;
    rmlp_planner *planner = NULL;
    if (workload_shared_prefix(&w, b, len, prefix, 42) != 0 || rmlp_planner_create(&planner) != RMLP_OK) {
        fprintf(stderr, "plan_repeat: out of memory\n");
        return 1;
    }
    rmlp_plan_params params = rmlp_plan_default_params();
    params.threshold = 1.0;
    rmlp_plan plan;
    double *us = malloc((reps > 0 ? (size_t)reps : 1) * sizeof(double));
    if (us == NULL) {
        fprintf(stderr, "plan_repeat: out of memory\n");
        return 1;
    }
    for (long i = 0; i < reps; i++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (rmlp_plan_build(planner, w.input_ids, w.position_ids, w.n_tokens, w.cu_seqlens, w.n_seqs, &params, &plan) !=
            RMLP_OK) {
            fprintf(stderr, "plan_repeat: %s\n", rmlp_last_error());
            return 1;
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        us[i] = (double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-3;
    }
    qsort(us, (size_t)(reps > 0 ? reps : 0), sizeof(double), compare_double);
    printf("N=%zu N'=%u us_min=%.2f us_median=%.2f\n", w.n_tokens, plan.n_compact, reps > 0 ? us[0] : 0.0,
           reps > 0 ? us[reps / 2] : 0.0);
    free(us);
    rmlp_planner_free(planner);
    workload_free(&w);
    return 0;
}
