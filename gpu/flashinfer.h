/*
 * flashinfer.h: the fast path of the built-in CUDA attention: FlashInfer's batch prefill kernels
 * (FlashAttention-2 style, tensor cores), instantiated in gpu/flashinfer.cu for f16/bf16, head_dim
 * 64 and 128, causal, from the headers scripts/setup.sh fetches (RMLP_FLASHINFER in CMake). Both
 * layouts of gpu/attention.cu (which stays the reference, and runs whatever this does not):
 *   full space:    batch prefill with a ragged KV cache: qo_indptr = kv_indptr = cu_seqlens;
 *   compact space: batch prefill with a paged KV cache of page size 1 (NHD): the compact K/V rows
 *                  are the pages, kv_indptr = cu_seqlens, kv_indices = the plan's scatter,
 *                  qo_indptr the owned query ranges, every last page holding 1 row.
 * FlashInfer splits the work on the host: a plan (which query tile of which sequence each thread
 * block takes) written to page-locked memory and copied to the device, then the kernel reads it.
 * Here the plan is made in rmlp_context_set_plan, for both layouts, in FlashInfer's CUDA-graph mode
 * (every launch shape depends on the counts n_rows and n_seqs only, never on the lengths) and
 * without splitting keys across blocks (no merge pass, no float workspace, same result whatever
 * the device); the forward then only launches: nothing allocates, synchronises or plans there,
 * and a captured graph replays over any batch of the same counts set by rmlp_context_set_plan.
 * Internal to the library; in a build without FlashInfer every context gets NULL (no fast path).
 */
#ifndef RMLP_GPU_FLASHINFER_H
#define RMLP_GPU_FLASHINFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "kernels.h"
#include "radix_mlp.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpu_flashinfer gpu_flashinfer;

typedef enum gpu_fi_layout { GPU_FI_FULL = 0, GPU_FI_COMPACT = 1 } gpu_fi_layout;

/* Were FlashInfer's kernels compiled into this build? */
bool gpu_flashinfer_built(void);

/* Are there kernels for this shape: f16 or bf16, head_dim 64 or 128, n_heads a multiple of
 * n_kv_heads (and a build with FlashInfer)? */
bool gpu_flashinfer_supports(rmlp_dtype dtype, size_t n_heads, size_t n_kv_heads, size_t head_dim);

/* The state of one context on the current device: device memory for both layouts' plans and the
 * last-page lengths (all 1), page-locked staging for the plans, all allocated here, once, for
 * batches of up to max_rows rows (tokens or compact rows) in up to max_seqs sequences. *out is
 * NULL (RMLP_OK) when FlashInfer has no kernels for the shape or the device (before sm_80). */
rmlp_status gpu_flashinfer_create(const char *fn, rmlp_dtype dtype, size_t n_heads, size_t n_kv_heads,
                                  size_t head_dim, size_t max_rows, size_t max_seqs, gpu_flashinfer **out);
void gpu_flashinfer_free(gpu_flashinfer *fi);

/* Plans `layout` for a batch whose sequence s has the query rows qo_indptr[s] .. qo_indptr[s+1]
 * and the keys kv_indptr[s] .. kv_indptr[s+1] (host arrays, n_seqs + 1 each; full space: both
 * cu_seqlens), and enqueues the plan's copy to the device on `stream`. The caller makes sure the
 * previous plan's copy has left the staging (rmlp_context_set_plan's event). A batch the kernels
 * would not run (too many rows, a tile size not instantiated) leaves the layout unplanned, which
 * is no error: gpu_flashinfer_ready says no and the reference kernel runs. fi may be NULL. */
rmlp_status gpu_flashinfer_plan(const char *fn, gpu_flashinfer *fi, gpu_fi_layout layout, const uint32_t *qo_indptr,
                                const uint32_t *kv_indptr, size_t n_seqs, cudaStream_t stream);
/* Forgets both layouts' plans (a new batch is being set). fi may be NULL. */
void gpu_flashinfer_unplan(gpu_flashinfer *fi);

/* Can gpu_flashinfer_run take `layout` for n_seqs sequences and n_rows query rows (the planned
 * counts) of the shape fi was made for, on these buffers: q, k, v at strides that are multiples of
 * 8 elements, 16-byte aligned, out dense (out_stride = n_heads * head_dim), every offset within
 * FlashInfer's 32-bit indexing? fi may be NULL (no). */
bool gpu_flashinfer_ready(const gpu_flashinfer *fi, gpu_fi_layout layout, const gpu_compact_rows *rows,
                          size_t n_seqs, size_t n_rows, size_t n_heads, size_t n_kv_heads, size_t head_dim);

/* Causal attention as gpu_attention (full: qo_indptr = kv_indptr = cu_seqlens, kv_indices NULL)
 * or gpu_compact_attention (compact) computes it, with the planned work split; the index arrays
 * are device memory (uint32, values below 2^31). Only after gpu_flashinfer_ready said yes.
 * Enqueues on `stream` and returns at once (never allocates or synchronises; capturable).
 * cudaErrorNotSupported: FlashInfer's launcher refused the configuration on this device before
 * launching anything (the caller runs the reference kernel instead). */
cudaError_t gpu_flashinfer_run(const gpu_flashinfer *fi, gpu_fi_layout layout, const gpu_compact_rows *rows,
                               const uint32_t *qo_indptr, const uint32_t *kv_indptr, const uint32_t *kv_indices,
                               float scale, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
