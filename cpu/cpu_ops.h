/*
 * cpu_ops.h: the fp32 CPU kernels a layer is made of. Matrices are row-major; a weight
 * (out, in) is applied as y = x W^T, as Hugging Face stores nn.Linear weights. These are the
 * reference the GPU kernels are checked against, so they follow transformers' arithmetic
 * (fp32 RMSNorm, fp32 RoPE tables, max-subtracted softmax).
 */
#ifndef RMLP_CPU_OPS_H
#define RMLP_CPU_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "model/model_ext.h"
#include "workers.h"

/* y (rows, out_dim) = x (rows, in_dim) W^T + bias; W (out_dim, in_dim); bias (out_dim) or NULL; on
 * pool's threads (NULL: the calling thread), each running BLAS on one thread (linear.c). */
void cpu_linear(const float *x, size_t rows, size_t in_dim, const float *w, const float *bias, size_t out_dim,
                float *y, workers *pool);

/* y (rows, n at row stride ldy) = x (rows, in_dim) W^T + beta y, W (n, in_dim): cpu_linear's split
 * over pool without the bias. */
void cpu_gemm_nt(const float *x, size_t rows, size_t in_dim, const float *w, size_t n, float beta, float *y,
                 size_t ldy, workers *pool);

/* out (rows, dim) = x / sqrt(mean(x^2) + eps) * weight, row by row; x may equal out.
 * stride: distance between rows of x and out, in floats (>= dim). */
void cpu_rmsnorm(const float *x, size_t rows, size_t dim, size_t stride, const float *weight, double eps, float *out);

/* x (rows, heads, head_dim) at row stride `stride`: rotate-half RoPE at positions[row], in place. */
void cpu_rope(float *x, size_t rows, size_t stride, size_t heads, size_t head_dim, const uint32_t *positions,
              double theta);

/* out (rows, inter) = silu(gu[:, :inter]) * gu[:, inter:]; gu (rows, 2 * inter). */
void cpu_silu_mul(const float *gu, size_t rows, size_t inter, float *out);

/* out (rows, inter) = gelu_tanh(gu[:, :inter]) * gu[:, inter:] (GeGLU, PyTorch's gelu with
 * approximate='tanh': 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))); gu (rows, 2 * inter). */
void cpu_gelu_tanh_mul(const float *gu, size_t rows, size_t inter, float *out);

/* The same with the exact GELU, 0.5 x (1 + erf(x / sqrt(2))) (PyTorch's gelu, approximate='none'). */
void cpu_gelu_mul(const float *gu, size_t rows, size_t inter, float *out);

/* y (rows, dim) += x (rows, dim). */
void cpu_add(float *y, const float *x, size_t rows, size_t dim);

/* dst[i] (dim) = src[index[i]] (dim), i < rows, rows of src at stride src_stride, dst dense. */
void cpu_gather_rows(const float *src, size_t src_stride, const uint32_t *index, size_t rows, size_t dim, float *dst);

/* Causal attention of every sequence over its own rows, grouped KV heads, scored and windowed as la
 * says (its scale, soft-cap and window; model/model_ext.h). The attention calls below take la too.
 * q, out (n_tokens, n_heads, head_dim); k, v (n_tokens, n_kv_heads, head_dim);
 * scratch: cpu_attention_scratch_floats(max_seq_len, head_dim) floats (either layout). */
size_t cpu_attention_scratch_floats(size_t max_seq_len, size_t head_dim);
void cpu_attention(const float *q, const float *k, const float *v, const uint32_t *cu_seqlens, size_t n_seqs,
                   size_t n_heads, size_t n_kv_heads, size_t head_dim, const layer_attention *la, float *scratch,
                   float *out);

/* Where attention reads and writes: rows of q, k, v and out, each at its own row stride in floats
 * (the heads of a row are contiguous: (n_heads or n_kv_heads, head_dim)), so the q/k/v columns
 * of a fused qkv buffer are read in place. K and V may instead keep each KV head's rows apart,
 * kv_head_stride floats from one head to the next (the prefix cache's (n_kv_heads, slots,
 * head_dim), where a head's keys are contiguous); 0 means head_dim, the heads side by side. */
typedef struct cpu_attention_rows {
    const float *q, *k, *v; /* (rows, n_heads, head_dim), (rows, n_kv_heads, head_dim) x2 */
    float *out;             /* (rows, n_heads, head_dim) */
    size_t q_stride, k_stride, v_stride, out_stride;
    size_t kv_head_stride;  /* K and V head h of row r at r * k_stride + h * kv_head_stride; 0: head_dim */
} cpu_attention_rows;

/* Causal attention in compact space: the owned queries of sequence s, compact rows
 * qo_indptr[s] .. qo_indptr[s+1] (the last rows of its path), over its path, the compact rows
 * kv_indices[kv_indptr[s] .. kv_indptr[s+1]) (bottom-right aligned). Rows of `rows` are compact
 * rows; only owned rows of out are written. qo_indptr, kv_indptr (n_seqs + 1); kv_indices
 * (kv_indptr[n_seqs]). scratch: cpu_attention_scratch_floats(longest path, head_dim) floats. */
void cpu_compact_attention(const cpu_attention_rows *rows, const uint32_t *qo_indptr, const uint32_t *kv_indptr,
                           const uint32_t *kv_indices, size_t n_seqs, size_t n_heads, size_t n_kv_heads,
                           size_t head_dim, const layer_attention *la, float *scratch);

#endif
