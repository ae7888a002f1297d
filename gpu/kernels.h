/*
 * kernels.h: C-callable host launchers of the CUDA kernels in gpu/ (rows.cu, norm.cu, rope.cu,
 * activation.cu, attention.cu). Internal to the library: not part of the ABI.
 *
 * Every launcher enqueues its work on `stream` and returns at once: it never allocates,
 * never synchronises, and may be captured in a CUDA graph. It returns cudaSuccess, the launch's
 * cudaGetLastError(), or cudaErrorInvalidValue for arguments it refuses (unknown dtype, shapes
 * out of range) without launching anything. Zero rows is a no-op.
 *
 * Pointers are device memory unless said otherwise; shapes are in the comments, rows are
 * densely packed unless a stride is given (strides count elements, not bytes). Activations and
 * weights are all in `dtype` (RMLP_DTYPE_F32/F16/BF16), index arrays are uint32; math is fp32
 * and each result is rounded to `dtype` once, on store. 16-byte vector accesses are used when
 * row sizes, strides and pointers are multiples of 16 bytes, element accesses otherwise.
 * Distinct pointer arguments must not overlap (in-place operations say so).
 */
#ifndef RMLP_GPU_KERNELS_H
#define RMLP_GPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "radix_mlp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dst[r] = src[index[r]] for r < rows: embedding lookup, scatter to full rows, gather back to
 * compact rows. dst (rows, dim) dense; src (any rows, src_row_stride >= dim); index (rows). */
cudaError_t gpu_gather_rows(void *dst, const void *src, size_t src_row_stride, const uint32_t *index, size_t rows,
                            size_t dim, rmlp_dtype dtype, cudaStream_t stream);

/* dst[r, 0:dim] = src[0:dim] for r < rows: a bias broadcast to every row (the layer prefills a
 * GEMM's output with its bias and lets the GEMM accumulate onto it). dst (rows, dst_row_stride
 * >= dim); src (dim). */
cudaError_t gpu_broadcast_row(void *dst, size_t dst_row_stride, const void *src, size_t rows, size_t dim,
                              rmlp_dtype dtype, cudaStream_t stream);

/* residual += add (skipped when add is NULL), then normed = rmsnorm(residual) * weight, the
 * norm taken over the residual as stored (rounded to dtype).
 * residual, add, normed (rows, dim); weight (dim). */
cudaError_t gpu_add_rmsnorm(void *residual, const void *add, const void *weight, size_t rows, size_t dim, double eps,
                            void *normed, rmlp_dtype dtype, cudaStream_t stream);

/* In place on the q and k heads of fused qkv rows: per-head RMSNorm (when q_norm / k_norm is
 * non-NULL, Qwen3), then rotate-half RoPE at positions[row] with inverse frequencies
 * 1 / theta^(2i / head_dim) computed in fp32 on the host, as the CPU path does. v is untouched.
 * qkv (rows, row_stride): q (n_q_heads, head_dim) at 0, k (n_kv_heads, head_dim) right after;
 * q_norm, k_norm (head_dim) or NULL; positions (rows). head_dim even, at most 256. */
cudaError_t gpu_qk_norm_rope(void *qkv, size_t rows, size_t row_stride, size_t n_q_heads, size_t n_kv_heads,
                             size_t head_dim, const void *q_norm, const void *k_norm, const uint32_t *positions,
                             double theta, double eps, rmlp_dtype dtype, cudaStream_t stream);

/* out = silu(gu[:, :inter]) * gu[:, inter:]. gu (rows, 2 * inter); out (rows, inter). */
cudaError_t gpu_silu_mul(const void *gu, size_t rows, size_t inter, void *out, rmlp_dtype dtype, cudaStream_t stream);

/* Causal attention of each sequence over its own rows, grouped KV heads (query head h reads KV
 * head h / (n_heads / n_kv_heads)), softmax(scale * q k^T) v with fp32 accumulation.
 * q, out (n_tokens, n_heads, head_dim); k, v (n_tokens, n_kv_heads, head_dim);
 * cu_seqlens (n_seqs + 1) device memory, non-decreasing, cu_seqlens[n_seqs] == n_tokens;
 * max_seqlen (host value) >= every sequence's length: rows beyond it are not computed.
 * head_dim at most 256; n_heads a multiple of n_kv_heads; n_seqs and n_heads at most 65535. */
cudaError_t gpu_attention(const void *q, const void *k, const void *v, void *out, const uint32_t *cu_seqlens,
                          size_t n_seqs, size_t max_seqlen, size_t n_tokens, size_t n_heads, size_t n_kv_heads,
                          size_t head_dim, float scale, rmlp_dtype dtype, cudaStream_t stream);

/* out (n_seqs, dim) fp32 = per sequence of hidden (n_tokens, dim): its last row
 * (RMLP_POOLING_LAST), first row (FIRST) or the mean of its rows (MEAN, summed in fp32 row by
 * row, the CPU path's order). cu_seqlens (n_seqs + 1) device memory, every sequence non-empty. */
cudaError_t gpu_pool_rows(const void *hidden, size_t dim, const uint32_t *cu_seqlens, size_t n_seqs,
                          rmlp_pooling pooling, float *out, rmlp_dtype dtype, cudaStream_t stream);

/* logits (n_seqs, 2) fp32: the dot products of each sequence's last row of hidden (n_tokens, dim)
 * with row_a and row_b (dim) (two LM-head rows), accumulated in fp32. cu_seqlens (n_seqs + 1)
 * device memory, every sequence non-empty. */
cudaError_t gpu_score_rows(const void *hidden, size_t dim, const uint32_t *cu_seqlens, size_t n_seqs,
                           const void *row_a, const void *row_b, float *logits, rmlp_dtype dtype, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
