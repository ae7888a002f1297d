/*
 * test_concurrency.c: planners on different threads run at the same time without touching each
 * other (4 threads, one planner each, many random batches, results equal to a serial run), and
 * rmlp_last_error is per thread: an error on one thread never shows on another. One planner
 * shared by 8 threads (a misuse: a planner is single-threaded) is refused, not corrupted: every
 * build returns RMLP_OK with the serial plan's counts or RMLP_ERR_BUSY, and some are refused
 * (before the guard this crashed in the radix tree). Those threads read only the counts of their
 * plans: the arrays are the planner's, which the next thread's build rewrites.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "radix_mlp.h"
#include "test_util.h"

#define N_THREADS 4
#define N_BATCHES 48
#define N_ROUNDS 4

static tu_batch batches[N_BATCHES];
static rmlp_plan_params batch_params[N_BATCHES];
static rmlp_plan serial[N_BATCHES]; /* owned copies of the serial results */

typedef struct worker {
    int index;
    int mismatches, error_leaks;
    char first_problem[512];
} worker;

/* Counts a problem; keeps the first message of the thread. */
static void note(worker *w, int *counter, const char *what, const char *detail) {
    if ((*counter)++ == 0 && w->first_problem[0] == '\0')
        snprintf(w->first_problem, sizeof w->first_problem, "%s: %s", what, detail);
}

static void *run_worker(void *arg) {
    worker *w = arg;
    rmlp_planner *planner = NULL;
    if (rmlp_planner_create(&planner) != RMLP_OK) {
        note(w, &w->mismatches, "create failed", rmlp_last_error());
        return NULL;
    }
    char why[256], want[64];
    for (int round = 0; round < N_ROUNDS; round++) {
        for (int k = 0; k < N_BATCHES; k++) {
            int b = (k + w->index * 7 + round) % N_BATCHES;
            const tu_batch *batch = &batches[b];
            rmlp_plan plan;
            rmlp_status status = rmlp_plan_build(planner, batch->ids, batch->pos, batch->n_tokens, batch->cu,
                                                 batch->n_seqs, &batch_params[b], &plan);
            if (status != RMLP_OK) note(w, &w->mismatches, "build failed", rmlp_last_error());
            else if (tu_plan_diff(&plan, &serial[b], why, sizeof why) != 0)
                note(w, &w->mismatches, "differs from the serial plan", why);

            /* an error of this thread's own, read back while the other threads make theirs */
            uint32_t bad_cu[2] = {(uint32_t)(1000 * w->index + k + 1), 0};
            snprintf(want, sizeof want, "cu_seqlens[0]=%u,", bad_cu[0]);
            status = rmlp_plan_build(planner, NULL, NULL, 0, bad_cu, 1, NULL, &plan);
            if (status != RMLP_ERR_INVALID_SEQLENS || strstr(rmlp_last_error(), want) == NULL) {
                snprintf(why, sizeof why, "\"%s\", want \"%s\"", rmlp_last_error(), want);
                note(w, &w->error_leaks, "last error", why);
            }
        }
    }
    rmlp_planner_free(planner);
    return NULL;
}

/* ---- one planner, 8 threads ------------------------------------------------------------------------ */

#define N_SHARERS 8

static rmlp_planner *shared_planner;
static atomic_int busy_seen;

typedef struct sharer {
    int index;
    long ok, busy, wrong;
    char first_problem[512];
    char busy_message[512];
} sharer;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *run_sharer(void *arg) {
    sharer *w = arg;
    double deadline = now_s() + 20.0;
    /* 300 builds each, then on until some thread has been refused (or the deadline). */
    for (long k = 0; k < 300 || (!atomic_load(&busy_seen) && now_s() < deadline); k++) {
        int b = (int)((k + w->index * 5) % N_BATCHES);
        const tu_batch *batch = &batches[b];
        rmlp_plan plan;
        rmlp_status status = rmlp_plan_build(shared_planner, batch->ids, batch->pos, batch->n_tokens, batch->cu,
                                             batch->n_seqs, &batch_params[b], &plan);
        const rmlp_plan *want = &serial[b];
        if (status == RMLP_ERR_BUSY) {
            if (w->busy++ == 0) snprintf(w->busy_message, sizeof w->busy_message, "%s", rmlp_last_error());
            atomic_store(&busy_seen, 1);
        } else if (status != RMLP_OK || plan.n_tokens != want->n_tokens || plan.n_distinct != want->n_distinct ||
                   plan.n_compact != want->n_compact || plan.n_compact_padded != want->n_compact_padded ||
                   plan.use_radix != want->use_radix) {
            if (w->wrong++ == 0)
                snprintf(w->first_problem, sizeof w->first_problem, "batch %d: status %d (%s), N' %u, want %u", b,
                         status, rmlp_last_error(), plan.n_compact, want->n_compact);
        } else {
            w->ok++;
        }
    }
    return NULL;
}

static void test_shared_planner(void) {
    if (!CHECK(rmlp_planner_create(&shared_planner) == RMLP_OK, "create: %s", rmlp_last_error())) return;
    sharer sharers[N_SHARERS];
    pthread_t threads[N_SHARERS];
    int started[N_SHARERS];
    for (int t = 0; t < N_SHARERS; t++) {
        memset(&sharers[t], 0, sizeof sharers[t]);
        sharers[t].index = t;
        started[t] = pthread_create(&threads[t], NULL, run_sharer, &sharers[t]) == 0;
        CHECK(started[t], "pthread_create %d", t);
    }
    long ok = 0, busy = 0;
    const char *message = NULL;
    for (int t = 0; t < N_SHARERS; t++) {
        if (started[t]) pthread_join(threads[t], NULL);
        CHECK(sharers[t].wrong == 0, "shared planner, thread %d: %ld wrong builds; first: %s", t, sharers[t].wrong,
              sharers[t].first_problem);
        ok += sharers[t].ok, busy += sharers[t].busy;
        if (message == NULL && sharers[t].busy > 0) message = sharers[t].busy_message;
    }
    CHECK(busy > 0, "%d threads on one planner were never refused (%ld builds ran)", N_SHARERS, ok);
    if (message != NULL) {
        tu_record_bad_input("the planner is in a call on another thread", RMLP_ERR_BUSY, message);
        CHECK(strcmp(message, "rmlp_plan_build: planner is in use by a call on another thread (an rmlp_planner is "
                              "single-threaded: use one per thread, or serialise its calls); nothing was done") == 0,
              "busy message \"%s\"", message);
    }
    printf("%d threads on one planner: %ld builds ran with the serial counts, %ld refused as busy\n", N_SHARERS, ok,
           busy);
    rmlp_planner_free(shared_planner);
}

static void *read_fresh_error(void *arg) {
    char *seen = arg;
    snprintf(seen, 256, "%s", rmlp_last_error()); /* a new thread has no error yet */
    rmlp_plan plan;
    rmlp_plan_build(NULL, NULL, NULL, 0, NULL, 1, NULL, &plan); /* its own error: planner is NULL */
    return NULL;
}

static void test_last_error_is_per_thread(void) {
    rmlp_planner_create(NULL);
    char before[256], seen[256] = "unset";
    snprintf(before, sizeof before, "%s", rmlp_last_error());
    CHECK(strstr(before, "out is NULL") != NULL, "main thread error \"%s\"", before);
    pthread_t thread;
    if (!CHECK(pthread_create(&thread, NULL, read_fresh_error, seen) == 0, "pthread_create")) return;
    pthread_join(thread, NULL);
    CHECK(seen[0] == '\0', "a new thread sees the main thread's error \"%s\"", seen);
    CHECK(strcmp(rmlp_last_error(), before) == 0, "main thread error changed from \"%s\" to \"%s\" by another thread",
          before, rmlp_last_error());
}

int main(void) {
    uint64_t rng = 0xc0ffee;
    rmlp_planner *planner = NULL;
    if (rmlp_planner_create(&planner) != RMLP_OK) {
        printf("FAIL: rmlp_planner_create: %s\n", rmlp_last_error());
        return 1;
    }
    static const double thresholds[4] = {1.0, 0.85, 0.0, 0.5};
    for (int b = 0; b < N_BATCHES; b++) {
        tu_batch_shape shape = {tu_rand_range(&rng, 1, 40), tu_rand_range(&rng, 0, 80), 3, 0, b % 5 == 0};
        if (b % 2 == 0) shape.prefix_len = tu_rand_range(&rng, 1, 40);
        batches[b] = tu_random_batch(&rng, &shape);
        batch_params[b] = tu_params(thresholds[b % 4], (uint32_t)(b % 3) * 4);
        rmlp_plan plan;
        rmlp_status status = rmlp_plan_build(planner, batches[b].ids, batches[b].pos, batches[b].n_tokens,
                                             batches[b].cu, batches[b].n_seqs, &batch_params[b], &plan);
        CHECK(status == RMLP_OK, "serial build of batch %d: %s", b, rmlp_last_error());
        serial[b] = tu_plan_copy(&plan);
    }
    rmlp_planner_free(planner);

    worker workers[N_THREADS];
    pthread_t threads[N_THREADS];
    int started[N_THREADS];
    for (int t = 0; t < N_THREADS; t++) {
        memset(&workers[t], 0, sizeof workers[t]);
        workers[t].index = t;
        started[t] = pthread_create(&threads[t], NULL, run_worker, &workers[t]) == 0;
        CHECK(started[t], "pthread_create %d", t);
    }
    for (int t = 0; t < N_THREADS; t++) {
        if (started[t]) pthread_join(threads[t], NULL);
        CHECK(workers[t].mismatches == 0, "thread %d: %d builds differ from the serial run; first: %s", t,
              workers[t].mismatches, workers[t].first_problem);
        CHECK(workers[t].error_leaks == 0, "thread %d: %d wrong last errors; first: %s", t, workers[t].error_leaks,
              workers[t].first_problem);
    }
    test_last_error_is_per_thread();
    test_shared_planner();
    for (int b = 0; b < N_BATCHES; b++) {
        tu_plan_copy_free(&serial[b]);
        tu_batch_free(&batches[b]);
    }
    return tu_summary();
}
