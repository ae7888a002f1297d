/*
 * linear_bf16.h: x W^T with W held in bf16 (a model loaded with cpu_weight_dtype BF16,
 * model/weights_bf16.h): W is widened back to fp32 a panel of rows at a time, each panel one
 * BLAS call writing its columns of y, so the GEMMs are OpenBLAS's fp32 ones, accumulating in
 * fp32, and the product equals the fp32 product with W rounded to bf16 (up to the summation order
 * BLAS picks for the panel's width).
 */
#ifndef RMLP_CPU_LINEAR_BF16_H
#define RMLP_CPU_LINEAR_BF16_H

#include <stddef.h>
#include <stdint.h>

#include "workers.h"

/* dst (n) = the floats of the bf16 bits src (n). */
void cpu_widen_bf16(const uint16_t *src, size_t n, float *dst);

/* Floats of the widened panel for a W of (out_dim, in_dim). */
size_t cpu_linear_bf16_scratch_floats(size_t in_dim, size_t out_dim);

/* y (rows, out_dim) = x (rows, in_dim) W^T + bias; W (out_dim, in_dim) bf16 bits; bias (out_dim)
 * or NULL; wide: cpu_linear_bf16_scratch_floats(in_dim, out_dim) floats; pool: the threads that widen
 * (NULL: the calling thread). */
void cpu_linear_bf16(const float *x, size_t rows, size_t in_dim, const uint16_t *w, const float *bias,
                     size_t out_dim, float *y, float *wide, workers *pool);

#endif
