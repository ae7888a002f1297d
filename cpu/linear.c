/*
 * linear.c: x W^T through BLAS (OpenBLAS, or oneDNN's sgemm where sgemm.h chooses it), split over
 * the context's own pool of threads: each task one single-threaded BLAS call on a block of x's rows
 * (or, for a few rows, of W's rows, y's columns). OpenBLAS runs on one thread (cpu_blas_one_thread):
 * with its own pool as well, its idle threads spun while the pool ran the elementwise passes and
 * attention (SmolLM2's rerank forward: 0.86-0.89x the time of OpenBLAS's threads with their default
 * spin, level with a short one: docs/bench/cpu-path.md). Each task's block is fixed by its index, so
 * a pool size gives the same bits on every run; another size rounds differently. OpenBLAS allocates
 * its own work buffers outside common/alloc.h and outside our control: when that fails OpenBLAS
 * handles it itself (it prints, and may stop the process), and no status of ours can carry it;
 * test_alloc_failure covers every allocation but those (oneDNN's sgemm reports its own failures:
 * OpenBLAS then runs the call).
 */
#include <stdbool.h>
#include <string.h>

#include "cpu_ops.h"
#include "sgemm.h"
#include "threads.h"

/* Rows of x per block are a multiple of this (BLAS's kernels take x's rows in groups of 8 or 16);
 * with fewer than this many rows per task, the split goes by W's rows instead. */
#define ROW_GRAIN 16
#define COLUMN_GRAIN 16

typedef struct gemm_job {
    const float *x; /* (rows, in_dim) */
    const float *w; /* (n, in_dim) */
    size_t rows, in_dim, n, ldy, tasks;
    float beta;
    float *y; /* (rows, ldy), its first n columns written */
    bool by_rows;
} gemm_job;

/* [*from, *to) of `units` units of `grain` (the last block takes the remainder of `total`). */
static void block(size_t total, size_t grain, size_t tasks, size_t task, size_t *from, size_t *to) {
    size_t units = total / grain;
    *from = units * task / tasks * grain;
    *to = task + 1 == tasks ? total : units * (task + 1) / tasks * grain;
}

static void gemm_task(void *arg, size_t task, size_t worker) {
    (void)worker;
    const gemm_job *j = arg;
    size_t a, b;
    if (j->by_rows) {
        block(j->rows, ROW_GRAIN, j->tasks, task, &a, &b);
        if (b > a) cpu_sgemm_nt(j->x + a * j->in_dim, b - a, j->in_dim, j->w, j->n, j->beta, j->y + a * j->ldy, j->ldy);
    } else {
        block(j->n, COLUMN_GRAIN, j->tasks, task, &a, &b);
        if (b > a) cpu_sgemm_nt(j->x, j->rows, j->in_dim, j->w + a * j->in_dim, b - a, j->beta, j->y + a, j->ldy);
    }
}

void cpu_gemm_nt(const float *x, size_t rows, size_t in_dim, const float *w, size_t n, float beta, float *y,
                 size_t ldy, workers *pool) {
    if (rows == 0 || n == 0) return;
    cpu_blas_one_thread();
    size_t tasks = workers_count(pool);
    if (tasks == 1) {
        cpu_sgemm_nt(x, rows, in_dim, w, n, beta, y, ldy);
        return;
    }
    gemm_job job = {x, w, rows, in_dim, n, ldy, tasks, beta, y, rows >= ROW_GRAIN * tasks};
    if (!job.by_rows && n < COLUMN_GRAIN * tasks) job.tasks = n / COLUMN_GRAIN > 0 ? n / COLUMN_GRAIN : 1;
    workers_run(pool, job.tasks, gemm_task, &job);
}

void cpu_linear(const float *x, size_t rows, size_t in_dim, const float *w, const float *bias, size_t out_dim,
                float *y, workers *pool) {
    if (rows == 0) return;
    float beta = 0.0f;
    if (bias != NULL) {
        for (size_t r = 0; r < rows; r++) memcpy(y + r * out_dim, bias, out_dim * sizeof(float));
        beta = 1.0f;
    }
    cpu_gemm_nt(x, rows, in_dim, w, out_dim, beta, y, out_dim, pool);
}
