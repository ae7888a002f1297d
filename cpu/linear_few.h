/*
 * linear_few.h: x W^T (+ bias) for the few rows of a decode step, with the decode kernels' row
 * dots (decode_kernels.h) on a pool of threads: W (out_dim, in_dim), nn.Linear's layout, read in
 * place. At these row counts BLAS packs W for every call and runs at a fraction of its GEMM rate
 * (docs/bench/generation-cpu.md); here each block of W's rows is read once, from memory, while
 * every x row passes over it in L1.
 */
#ifndef RMLP_CPU_LINEAR_FEW_H
#define RMLP_CPU_LINEAR_FEW_H

#include <stddef.h>
#include <stdint.h>

#include "workers.h"

/* y (rows, out_dim) = x (rows, in_dim) W^T + bias (out_dim, or NULL), on pool's threads (NULL:
 * the calling thread). The result is the same, bit for bit, on any pool. */
void cpu_linear_few(const float *x, size_t rows, size_t in_dim, const float *w, const float *bias, size_t out_dim,
                    float *y, workers *pool);

/* A generation step's linear layer: cpu_linear_few for 2 to 128 rows, else BLAS (cpu_linear). One
 * row is a matrix-vector product bound by reading W, where BLAS's sgemv is as fast (a few percent
 * faster here); beyond 128, x's rows no longer stay in L2 while W's blocks pass, and BLAS's packed
 * GEMM catches up. */
void cpu_linear_step(const float *x, size_t rows, size_t in_dim, const float *w, const float *bias, size_t out_dim,
                     float *y, workers *pool);

/* The same with W in bf16 (a bf16-weight model, linear_bf16.h): each task widens WIDE_ROWS of W's
 * rows at a time into its thread's part of wide (cpu_linear_few_bf16_scratch_floats) and runs the
 * same row dots over them, so it reads half of fp32's bytes from memory and its result is the
 * fp32 kernel's on the rounded weights, bit for bit. 1 to 128 rows (one row too: BLAS's sgemv
 * would read the widened panel, twice bf16's bytes); else cpu_linear_bf16. */
size_t cpu_linear_few_bf16_scratch_floats(size_t max_in_dim, size_t n_threads);
void cpu_linear_step_bf16(const float *x, size_t rows, size_t in_dim, const uint16_t *w, const float *bias,
                          size_t out_dim, float *y, workers *pool, float *wide, float *panel);

#endif
