/*
 * kernels.h: C-callable host launchers of the CUDA kernels in gpu/ (rows.cu, norm.cu, rope.cu,
 * activation.cu, attention.cu, nonfinite.cu). Internal to the library: not part of the ABI.
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

#include "model/model_ext.h"
#include "radix_mlp/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dst[r] = src[index[r]] for r < rows: embedding lookup, scatter to full rows, gather back to
 * compact rows. dst (rows, dim) dense; src (any rows, src_row_stride >= dim); index (rows). */
cudaError_t gpu_gather_rows(void *dst, const void *src, size_t src_row_stride, const uint32_t *index, size_t rows,
                            size_t dim, rmlp_dtype dtype, cudaStream_t stream);

/* dst (n_seqs, dim) = the row of src holding sequence s's last batch row, cu[s + 1] - 1: that row
 * itself, or with scatter (n_tokens) its compact row scatter[..], and with fold too (n_compact) that
 * compact row's representative batch row fold[scatter[..]] (rmlp_forward_last's reads); cu
 * (n_seqs + 1). src rows at src_row_stride >= dim. */
cudaError_t gpu_gather_last_rows(void *dst, const void *src, size_t src_row_stride, const uint32_t *cu,
                                 const uint32_t *scatter, const uint32_t *fold, size_t n_seqs, size_t dim,
                                 rmlp_dtype dtype, cudaStream_t stream);

/* dst[index[r]] = src[r] for r < rows: computed rows into the prefix cache's slots. dst (any rows,
 * dst_row_stride >= dim); src (rows, src_row_stride >= dim); index (rows), distinct. */
cudaError_t gpu_put_rows(void *dst, size_t dst_row_stride, const uint32_t *index, const void *src,
                         size_t src_row_stride, size_t rows, size_t dim, rmlp_dtype dtype, cudaStream_t stream);

/* dst[r, 0:dim] = src[0:dim] for r < rows: a bias broadcast to every row (the layer prefills a
 * GEMM's output with its bias and lets the GEMM accumulate onto it). dst (rows, dst_row_stride
 * >= dim); src (dim). */
cudaError_t gpu_broadcast_row(void *dst, size_t dst_row_stride, const void *src, size_t rows, size_t dim,
                              rmlp_dtype dtype, cudaStream_t stream);

/* dst[r, 0:dim] += src[0:dim] for r < rows, in fp32, rounded once: a bias added onto rows a GEMM
 * then accumulates into (the residual stream, whose O and down projections have biases in some
 * architectures). dst (rows, dst_row_stride >= dim); src (dim). */
cudaError_t gpu_add_row(void *dst, size_t dst_row_stride, const void *src, size_t rows, size_t dim, rmlp_dtype dtype,
                        cudaStream_t stream);

/* residual += add (skipped when add is NULL), then normed = rmsnorm(residual) * (weight_offset +
 * weight), the norm taken over the residual as stored (rounded to dtype); weight_offset 0, or 1
 * for Gemma's 1 + w (added in fp32). residual, add, normed (rows, dim); weight (dim). */
cudaError_t gpu_add_rmsnorm(void *residual, const void *add, const void *weight, float weight_offset, size_t rows,
                            size_t dim, double eps, void *normed, rmlp_dtype dtype, cudaStream_t stream);

/* Norms after a sublayer (Gemma 2): residual += rmsnorm(sub) * (weight_offset + sub_weight), the
 * normed sub rounded to dtype before the add; then, unless weight is NULL, normed =
 * rmsnorm(residual) * (weight_offset + weight). residual, sub, normed (rows, dim), sub and
 * normed may be the same buffer; sub_weight, weight (dim). */
cudaError_t gpu_norm_add_rmsnorm(void *residual, const void *sub, const void *sub_weight, const void *weight,
                                 float weight_offset, size_t rows, size_t dim, double eps, void *normed,
                                 rmlp_dtype dtype, cudaStream_t stream);

/* Per-head RMSNorm in place (Gemma 3's q/k norm, before RoPE): each of the `heads` heads of
 * head_dim at the start of every row of x (rows, stride >= heads * head_dim) scaled by
 * (weight_offset + weight) (head_dim), rounded to dtype. */
cudaError_t gpu_head_rmsnorm(void *x, size_t stride, size_t rows, size_t heads, size_t head_dim, const void *weight,
                             float weight_offset, double eps, rmlp_dtype dtype, cudaStream_t stream);

/* x (n elements) *= scale, the scale rounded to dtype first and the product rounded once (Gemma's
 * embedding times sqrt(hidden_size), as transformers multiplies two tensors of the dtype). */
cudaError_t gpu_scale(void *x, size_t n, double scale, rmlp_dtype dtype, cudaStream_t stream);

/* A RoPE's inverse frequencies (host memory, head_dim / 2: model/model_ext.h's, as transformers
 * computes them, scaling included) and the factor its cos and sin are multiplied by (yarn's; 1
 * otherwise); theta its base. */
typedef struct gpu_rope_freqs {
    const float *inv_freq;
    float attention_factor;
    double theta;
} gpu_rope_freqs;

/* RoPE's cos and sin by position (rope.cu), fp32 device memory, 16-byte aligned: cos_sin
 * (n_positions, head_dim / 2, 2) holds (cos, sin) of the angles gpu_qk_norm_rope forms for
 * its RoPE and head_dim, computed by the same expression and sincosf (gpu_rope_table_fill), so a
 * table changes no bit of the result. n_positions 0: no table. inv_freq: the host frequencies
 * of the gpu_rope_freqs it was filled from (a launch must pass the same), or NULL for plain RoPE
 * of theta. */
typedef struct gpu_rope_table {
    const float *cos_sin;
    uint32_t n_positions, head_dim;
    double theta;
    const float *inv_freq;
} gpu_rope_table;

/* Fills cos_sin (n_positions, head_dim / 2, 2) for freqs (or plain RoPE of theta) and head_dim
 * (even, at most 256). */
cudaError_t gpu_rope_table_fill_freqs(float *cos_sin, size_t n_positions, size_t head_dim,
                                      const gpu_rope_freqs *freqs, cudaStream_t stream);
cudaError_t gpu_rope_table_fill(float *cos_sin, size_t n_positions, size_t head_dim, double theta,
                                cudaStream_t stream);

/* In place on q and k heads: per-head RMSNorm (when q_norm / k_norm is non-NULL, Qwen3), then
 * rotate-half RoPE at positions[row] with the inverse frequencies of freqs (cos and sin times its
 * factor), or of plain RoPE, 1 / theta^(2i / head_dim) computed in fp32 on the host, as the CPU path
 * does. q (rows, q_stride >= n_q_heads * head_dim) and
 * k (rows, k_stride >= n_kv_heads * head_dim): the q and k parts of fused qkv rows (k = q +
 * n_q_heads * head_dim, both strides the fused width; v untouched) or separate buffers.
 * q_norm, k_norm (head_dim) or NULL; positions (rows). head_dim even, at most 256. table: cos and
 * sin of the positions below its n_positions (the same bits as without), or NULL (sincosf per
 * element); one of another RoPE or head_dim is refused. */
cudaError_t gpu_qk_norm_rope_freqs(void *q, size_t q_stride, void *k, size_t k_stride, size_t rows, size_t n_q_heads,
                                   size_t n_kv_heads, size_t head_dim, const void *q_norm, const void *k_norm,
                                   const uint32_t *positions, const gpu_rope_table *table,
                                   const gpu_rope_freqs *freqs, double eps, rmlp_dtype dtype, cudaStream_t stream);
cudaError_t gpu_qk_norm_rope(void *q, size_t q_stride, void *k, size_t k_stride, size_t rows, size_t n_q_heads,
                             size_t n_kv_heads, size_t head_dim, const void *q_norm, const void *k_norm,
                             const uint32_t *positions, const gpu_rope_table *table, double theta, double eps,
                             rmlp_dtype dtype, cudaStream_t stream);

/* out = silu(gu[:, :inter]) * gu[:, inter:]. gu (rows, 2 * inter); out (rows, inter). */
cudaError_t gpu_silu_mul(const void *gu, size_t rows, size_t inter, void *out, rmlp_dtype dtype, cudaStream_t stream);

/* out = act(gu[:, :inter]) * gu[:, inter:] for an RMLP_ACTIVATION_* act: SiLU (gpu_silu_mul),
 * GELU's tanh form 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))), or GELU 0.5 g (1 + erf(g /
 * sqrt(2))); an unknown act is refused. */
cudaError_t gpu_gated_mul(const void *gu, size_t rows, size_t inter, void *out, rmlp_activation act,
                          rmlp_dtype dtype, cudaStream_t stream);

/* Causal attention of each sequence over its own rows, grouped KV heads (query head h reads KV
 * head h / (n_heads / n_kv_heads)), softmax(scale * q k^T) v with fp32 accumulation, scored and
 * windowed as the layer's la says (model/model_ext.h: scale, soft-cap, sliding window; la.rope
 * unused); the attention launchers below take la too.
 * q, out (n_tokens, n_heads, head_dim); k, v (n_tokens, n_kv_heads, head_dim);
 * cu_seqlens (n_seqs + 1) device memory, non-decreasing, cu_seqlens[n_seqs] == n_tokens. The
 * launch depends on the counts only (attention_tiles.h), never on the lengths, so a captured
 * graph replays correctly over any cu_seqlens of the same n_tokens and n_seqs.
 * head_dim at most 256; n_heads a multiple of n_kv_heads, at most 65535. */
cudaError_t gpu_attention(const void *q, const void *k, const void *v, void *out, const uint32_t *cu_seqlens,
                          size_t n_seqs, size_t n_tokens, size_t n_heads, size_t n_kv_heads, size_t head_dim,
                          layer_attention la, rmlp_dtype dtype, cudaStream_t stream);

/* Where compact attention reads and writes (device memory, rows at strides in elements): q and
 * out rows (n_heads, head_dim), k and v rows (n_kv_heads, head_dim), k_stride == v_stride, so
 * the q/k/v columns of fused qkv rows are read in place. */
typedef struct gpu_compact_rows {
    const void *q, *k, *v;
    void *out;
    size_t q_stride, k_stride, v_stride, out_stride;
} gpu_compact_rows;

/* Causal attention in compact space, as cpu_compact_attention: the owned queries of sequence s,
 * compact rows qo_indptr[s] .. qo_indptr[s+1] (the last rows of its path), over its path, the
 * compact rows kv_indices[kv_indptr[s] .. kv_indptr[s+1]) (the plan's scatter over cu_seqlens),
 * causal aligned bottom-right. qo_indptr, kv_indptr (n_seqs + 1), kv_indices device memory;
 * qo_indptr[n_seqs] == n_compact. The launch depends on (n_compact, n_seqs) only. */
cudaError_t gpu_compact_attention(const gpu_compact_rows *rows, const uint32_t *qo_indptr, const uint32_t *kv_indptr,
                                  const uint32_t *kv_indices, size_t n_seqs, size_t n_compact, size_t n_heads,
                                  size_t n_kv_heads, size_t head_dim, layer_attention la, rmlp_dtype dtype,
                                  cudaStream_t stream);

/* A decode step's chains (cpu/decode_attention.h cuts a step's paths into them), device arrays:
 * chain c's keys are the slots keys[key_indptr[c] .. key_indptr[c+1]), its queries the rows
 * members[member_indptr[c] .. member_indptr[c+1]) (n_members in all); every key of a chain is
 * visible to each of its queries, but for a sliding window: then chain_depth (n_chains) holds each
 * chain's first key's position in its queries' paths and row_pos (query rows) each query's own
 * position (its path's length - 1), and a query sees the keys at positions past row_pos - window
 * (both NULL without a window). */
typedef struct gpu_chain_layout {
    const uint32_t *key_indptr, *keys, *member_indptr, *members;
    size_t n_chains, n_members;
    const uint32_t *chain_depth, *row_pos;
} gpu_chain_layout;

/* Each membership's partial attention over its chain's keys (the K/V rows read by one block for
 * up to ATT_BQ of the chain's queries), as state rows (member index * n_heads + head) of
 * (max, sum, unnormalised o (head_dim)) in fp32: state (n_members * n_heads, head_dim + 2).
 * rows: q by query row, k and v by slot; out unused. As gpu_compact_attention otherwise. */
cudaError_t gpu_chain_attention(const gpu_compact_rows *rows, const gpu_chain_layout *chains, size_t n_heads,
                                size_t n_kv_heads, size_t head_dim, layer_attention la, float *state, rmlp_dtype dtype,
                                cudaStream_t stream);

/* out row r (n_heads, head_dim) at out_stride = the log-sum-exp merge, in fp32, of the states of
 * its memberships row_members[row_indptr[r] .. row_indptr[r+1]) (indices into state's member rows). */
cudaError_t gpu_merge_states(const float *state, const uint32_t *row_indptr, const uint32_t *row_members,
                             size_t n_rows, size_t n_heads, size_t head_dim, void *out, size_t out_stride,
                             rmlp_dtype dtype, cudaStream_t stream);

/* out (n_seqs, dim) fp32 = per sequence of the batch rows of hidden: its last row
 * (RMLP_POOLING_LAST), first row (FIRST) or the mean of its rows (MEAN, summed in fp32 row by
 * row, the CPU path's order). Batch row i is hidden's row rows[i] (compact rows read through
 * the plan's scatter, device memory) or row i when rows is NULL (hidden (n_tokens, dim)).
 * cu_seqlens (n_seqs + 1) device memory, every sequence non-empty. */
cudaError_t gpu_pool_rows(const void *hidden, size_t dim, const uint32_t *rows, const uint32_t *cu_seqlens,
                          size_t n_seqs, rmlp_pooling pooling, float *out, rmlp_dtype dtype, cudaStream_t stream);

/* logits (n_seqs, 2) fp32: the dot products of each sequence's last batch row of hidden (rows
 * as gpu_pool_rows) with row_a and row_b (dim) (two LM-head rows), accumulated in fp32.
 * cu_seqlens (n_seqs + 1) device memory, every sequence non-empty. */
cudaError_t gpu_score_rows(const void *hidden, size_t dim, const uint32_t *rows, const uint32_t *cu_seqlens,
                           size_t n_seqs, const void *row_a, const void *row_b, float *logits, rmlp_dtype dtype,
                           cudaStream_t stream);

/* Scans x (n elements, rows of `width`) for an infinity or NaN: where there is one, counts the
 * scan in state->outputs and sets state->row, col to the first one (nonfinite.cu; state is the
 * device counter of gpu/nonfinite.h). width 0 is refused. */
struct gpu_nonfinite;
cudaError_t gpu_nonfinite_scan(const void *x, size_t n, uint32_t width, rmlp_dtype dtype, struct gpu_nonfinite *state,
                               cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
