/*
 * rows.h: the elementwise passes of a layer on the CPU, fused to one pass over each row and run
 * in row blocks on a context's pool (workers.h; NULL: the calling thread). Each row's result
 * depends only on that row, never on the split, so radix off and on agree bit for bit, and a
 * result is the same for any thread count. Vector code compiled for AVX-512 (sixteen lanes), for
 * AVX2 + FMA and for the x86-64 baseline (eight lanes); the widest the CPU runs is used. The widths
 * round differently (a norm's sum of squares), so results agree across CPUs within test_rows'
 * bound, not bit for bit.
 * The scalar kernels of cpu_ops.h (elementwise.c) are the reference they are tested against
 * (test_rows: within 4 ulp-scale relative error; the exp here is a degree-6 polynomial).
 */
#ifndef RMLP_CPU_ROWS_H
#define RMLP_CPU_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "radix_mlp/types.h"
#include "model/model_ext.h"
#include "workers.h"

/* The copies this CPU runs, widest first ("avx512", "avx2-fma", "baseline"), into names[0 ..
 * cap); returns how many were written. */
size_t rows_kernels(const char **names, size_t cap);

/* Runs every later pass on the copy named (one rows_kernels gives), or again on the widest when
 * name is NULL; -1 (nothing changed) for a name this CPU does not run. For tests: process-wide. */
int rows_kernels_force(const char *name);

/* cs (rows, head_dim): per row, cos of the rotary angles at [0, head_dim/2) and their sin at
 * [head_dim/2, head_dim), for the row's position, by rope's inverse frequencies (model_ext.h: the
 * fp32 angle position * inv_freq[i], cos and sin times its attention factor; plain RoPE's are
 * cpu_rope's), computed once per forward instead of once per layer and head (on the calling
 * thread: it is that small). */
void rows_rope_table(const uint32_t *positions, size_t rows, size_t head_dim, const model_rope *rope, float *cs);

/* out (rows, dim) = RMSNorm of x (rows, dim) with weight. */
void rows_rmsnorm(workers *pool, const float *x, size_t rows, size_t dim, const float *weight, double eps,
                  float *out);

/* hidden (rows, dim) += add (rows, dim); normed (rows, dim) = RMSNorm of the sum with weight. */
void rows_add_rmsnorm(workers *pool, float *hidden, const float *add, size_t rows, size_t dim, const float *weight,
                      double eps, float *normed);

/* Norms after a sublayer (Gemma 2): sub (rows, dim) = RMSNorm of sub with sub_weight, in place;
 * hidden (rows, dim) += sub; then, unless normed is NULL, normed (rows, dim) = RMSNorm of the sum
 * with weight. */
void rows_norm_add_rmsnorm(workers *pool, float *hidden, float *sub, const float *sub_weight, size_t rows, size_t dim,
                           const float *weight, double eps, float *normed);

/* y (rows, dim) += x (rows, dim). */
void rows_add(workers *pool, float *y, const float *x, size_t rows, size_t dim);

/* out (rows, inter) = SiLU(gate) * up, gu (rows, 2 * inter) holding gate then up per row. */
void rows_silu_mul(workers *pool, const float *gu, size_t rows, size_t inter, float *out);

/* out (rows, inter) = act(gate) * up, gu as rows_silu_mul's, act the RMLP_ACTIVATION_* given:
 * SiLU (rows_silu_mul), GELU's tanh form or GELU (cpu_gelu_tanh_mul, cpu_gelu_mul). */
void rows_gated_mul(workers *pool, rmlp_activation activation, const float *gu, size_t rows, size_t inter,
                    float *out);

/* In qkv (rows, width), the n_q query heads from column 0 and the n_kv key heads after them, each
 * head_dim wide: per-head RMSNorm with q_norm / k_norm (both NULL: none), then rotate-half RoPE
 * from cs (rows_rope_table). */
void rows_qk_norm_rope(workers *pool, float *qkv, size_t rows, size_t width, size_t n_q, size_t n_kv,
                       size_t head_dim, const float *q_norm, const float *k_norm, double eps, const float *cs);

#endif
