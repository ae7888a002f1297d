/*
 * bench_pool_handoff.c: what two thread pools taking turns cost a CPU forward, the bound on what
 * one pool for OpenBLAS and the context's threads (issue 32) could save. A forward alternates
 * OpenBLAS's GEMMs and the context's pool jobs (cpu/workers.c: the fused row passes, attention),
 * about eight hand-offs per layer. Times, on 2 threads, an empty 2-task pool job right after a
 * SmolLM2-sized sgemm and back to back, and a 64-row sgemm right after a pool job and back to
 * back; the differences are the hand-offs' cost. Run it with and without OPENBLAS_THREAD_TIMEOUT=4.
 * Usage: bench_pool_handoff [rounds]   (docs/bench/cpu-path.md)
 */
#define _POSIX_C_SOURCE 200809L

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cpu/workers.h"

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void nothing(void *arg, size_t task, size_t worker) { (void)arg, (void)task, (void)worker; }

/* y (m, 576) = x (m, 576) W^T: SmolLM2's o_proj shape. */
static void gemm(const float *x, const float *w, float *y, int m) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, 576, 576, 1.0f, x, 576, w, 576, 0.0f, y, 576);
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 300, error = 0;
    workers *pool = workers_create(2, &error);
    float *x = calloc(1000 * 576, sizeof(float)), *w = calloc(576 * 576, sizeof(float));
    float *y = calloc(1000 * 576, sizeof(float));
    if (pool == NULL || x == NULL || w == NULL || y == NULL || rounds < 1) {
        fprintf(stderr, "bench_pool_handoff: setup failed\n");
        return 1;
    }
    double job_after = 0, job_alone = 0, gemm_after = 0, gemm_alone = 0;
    for (int i = 0; i < rounds; i++) {
        gemm(x, w, y, 1000);
        double t = now_us();
        workers_run(pool, 2, nothing, NULL);
        job_after += now_us() - t;
    }
    for (int i = 0; i < rounds; i++) {
        double t = now_us();
        workers_run(pool, 2, nothing, NULL);
        job_alone += now_us() - t;
    }
    for (int i = 0; i < rounds; i++) {
        workers_run(pool, 2, nothing, NULL);
        double t = now_us();
        gemm(x, w, y, 64);
        gemm_after += now_us() - t;
    }
    for (int i = 0; i < rounds; i++) {
        double t = now_us();
        gemm(x, w, y, 64);
        gemm_alone += now_us() - t;
    }
    const char *timeout = getenv("OPENBLAS_THREAD_TIMEOUT");
    printf("OPENBLAS_THREAD_TIMEOUT=%s, %d rounds, mean us: empty pool job after an sgemm %.1f, back to back %.1f; "
           "64-row sgemm after a pool job %.1f, back to back %.1f; hand-off cost %.1f + %.1f us\n",
           timeout ? timeout : "(unset)", rounds, job_after / rounds, job_alone / rounds, gemm_after / rounds,
           gemm_alone / rounds, (job_after - job_alone) / rounds, (gemm_after - gemm_alone) / rounds);
    workers_destroy(pool);
    free(x), free(w), free(y);
    return 0;
}
