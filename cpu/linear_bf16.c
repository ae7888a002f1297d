/*
 * linear_bf16.c: the bf16-weight linear layer of linear_bf16.h. A panel holds up to PANEL_FLOATS
 * widened weights (8 MB: a small model's whole matrix, 512 rows of an 8B model's), at least
 * PANEL_MIN_ROWS rows; widening is a 16-bit shift, split over the pool's threads by rows. Panels
 * are large because BLAS packs x again for every call: with 512 KB panels (224 rows of a
 * 576-wide matrix) SmolLM2's forwards were ~30% slower than fp32
 * (docs/backends.md#bf16-weights-on-the-cpu).
 */
#include "linear_bf16.h"

#include <string.h>

#include "cpu_ops.h"

#define PANEL_FLOATS ((size_t)1 << 21)
#define PANEL_MIN_ROWS 16
#define WIDEN_ROWS_PER_TASK 16

static size_t panel_rows(size_t in_dim) {
    size_t n = PANEL_FLOATS / (in_dim ? in_dim : 1);
    n -= n % PANEL_MIN_ROWS;
    return n < PANEL_MIN_ROWS ? PANEL_MIN_ROWS : n;
}

size_t cpu_linear_bf16_scratch_floats(size_t in_dim, size_t out_dim) {
    size_t rows = panel_rows(in_dim);
    return (out_dim < rows ? out_dim : rows) * in_dim;
}

typedef struct widen_job {
    const uint16_t *w; /* the panel's first row */
    size_t rows, in_dim;
    float *wide;
} widen_job;

void cpu_widen_bf16(const uint16_t *src, size_t n, float *dst) {
    uint32_t *bits = (uint32_t *)(void *)dst; /* the floats' bits */
    for (size_t i = 0; i < n; i++) bits[i] = (uint32_t)src[i] << 16;
}

static void widen_task(void *arg, size_t task, size_t worker) {
    (void)worker;
    const widen_job *j = arg;
    size_t r0 = task * WIDEN_ROWS_PER_TASK, r1 = r0 + WIDEN_ROWS_PER_TASK < j->rows ? r0 + WIDEN_ROWS_PER_TASK : j->rows;
    cpu_widen_bf16(j->w + r0 * j->in_dim, (r1 - r0) * j->in_dim, j->wide + r0 * j->in_dim);
}

void cpu_linear_bf16(const float *x, size_t rows, size_t in_dim, const uint16_t *w, const float *bias,
                     size_t out_dim, float *y, float *wide, workers *pool) {
    if (rows == 0 || out_dim == 0) return;
    float beta = 0.0f;
    if (bias != NULL) {
        for (size_t r = 0; r < rows; r++) memcpy(y + r * out_dim, bias, out_dim * sizeof(float));
        beta = 1.0f;
    }
    size_t step = panel_rows(in_dim);
    for (size_t c0 = 0; c0 < out_dim; c0 += step) {
        size_t n = out_dim - c0 < step ? out_dim - c0 : step;
        widen_job job = {w + c0 * in_dim, n, in_dim, wide};
        workers_run(pool, (n + WIDEN_ROWS_PER_TASK - 1) / WIDEN_ROWS_PER_TASK, widen_task, &job);
        cpu_gemm_nt(x, rows, in_dim, wide, n, beta, y + c0, out_dim, pool);
    }
}
