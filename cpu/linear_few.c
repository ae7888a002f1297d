/*
 * linear_few.c: the few-row linear layer of linear_few.h, as tasks of COLUMNS_PER_TASK outputs
 * (W's rows) on a workers pool.
 */
#include "linear_few.h"

#include "cpu_ops.h"
#include "decode_kernels.h"
#include "linear_bf16.h"

/* Outputs per task: a multiple of the kernel's 4-column block, enough tasks to balance threads
 * (16 for a hidden size of 1,024), few enough to keep each task's W rows a long sequential read. */
#define COLUMNS_PER_TASK 64

/* The most rows cpu_linear_step gives cpu_linear_few (linear_few.h says why). */
#define STEP_MAX_ROWS 128

/* W rows a bf16 task widens at a time: two of the kernel's 4-column blocks, a few KB a row. */
#define WIDE_ROWS 8

typedef struct linear_job {
    const float *x, *w, *bias;
    const uint16_t *w16; /* W in bf16 instead (w NULL) */
    float *wide;         /* WIDE_ROWS * in_dim floats per pool thread, with w16 */
    size_t rows, in_dim, out_dim;
    float *y;
    decode_kernels kernels;
} linear_job;

static void linear_task(void *arg, size_t task, size_t worker) {
    const linear_job *j = arg;
    size_t c0 = task * COLUMNS_PER_TASK, n = j->out_dim - c0 < COLUMNS_PER_TASK ? j->out_dim - c0 : COLUMNS_PER_TASK;
    if (j->w16 == NULL) {
        j->kernels.row_dots(j->x, j->rows, j->in_dim, j->w + c0 * j->in_dim, j->in_dim, NULL, n, 1.0f, j->y + c0,
                            j->out_dim);
    } else {
        float *wide = j->wide + worker * WIDE_ROWS * j->in_dim;
        for (size_t c = c0; c < c0 + n; c += WIDE_ROWS) {
            size_t m = c0 + n - c < WIDE_ROWS ? c0 + n - c : WIDE_ROWS;
            cpu_widen_bf16(j->w16 + c * j->in_dim, m * j->in_dim, wide);
            j->kernels.row_dots(j->x, j->rows, j->in_dim, wide, j->in_dim, NULL, m, 1.0f, j->y + c, j->out_dim);
        }
    }
    if (j->bias != NULL)
        for (size_t r = 0; r < j->rows; r++)
            for (size_t c = c0; c < c0 + n; c++) j->y[r * j->out_dim + c] += j->bias[c];
}

void cpu_linear_few(const float *x, size_t rows, size_t in_dim, const float *w, const float *bias, size_t out_dim,
                    float *y, workers *pool) {
    if (rows == 0 || out_dim == 0) return;
    linear_job job = {x, w, bias, NULL, NULL, rows, in_dim, out_dim, y, decode_kernels_pick()};
    workers_run(pool, (out_dim + COLUMNS_PER_TASK - 1) / COLUMNS_PER_TASK, linear_task, &job);
}

void cpu_linear_step(const float *x, size_t rows, size_t in_dim, const float *w, const float *bias, size_t out_dim,
                     float *y, workers *pool) {
    if (rows >= 2 && rows <= STEP_MAX_ROWS) cpu_linear_few(x, rows, in_dim, w, bias, out_dim, y, pool);
    else cpu_linear(x, rows, in_dim, w, bias, out_dim, y, pool);
}

size_t cpu_linear_few_bf16_scratch_floats(size_t max_in_dim, size_t n_threads) {
    return WIDE_ROWS * max_in_dim * n_threads;
}

void cpu_linear_step_bf16(const float *x, size_t rows, size_t in_dim, const uint16_t *w, const float *bias,
                          size_t out_dim, float *y, workers *pool, float *wide, float *panel) {
    if (rows > STEP_MAX_ROWS || rows == 0 || out_dim == 0) { /* one row too: sgemv would read W widened */
        cpu_linear_bf16(x, rows, in_dim, w, bias, out_dim, y, panel, pool);
        return;
    }
    linear_job job = {x, NULL, bias, w, wide, rows, in_dim, out_dim, y, decode_kernels_pick()};
    workers_run(pool, (out_dim + COLUMNS_PER_TASK - 1) / COLUMNS_PER_TASK, linear_task, &job);
}
