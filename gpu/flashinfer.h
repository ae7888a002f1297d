/*
 * flashinfer.h: the fast path of the built-in CUDA attention: FlashInfer's batch prefill kernels
 * (FlashAttention-2 style, tensor cores), instantiated in gpu/flashinfer.cu for f16/bf16, head_dim
 * 64, 128 and 256, causal, with each layer's sliding window (model/model_ext.h) and, at head_dim
 * 256, its logit soft-cap (gpu_flashinfer_takes_layer), from the headers scripts/setup.sh
 * fetches (RMLP_FLASHINFER in CMake). Both layouts of gpu/attention.cu (which stays the reference,
 * and runs whatever this does not):
 *   full space:    batch prefill with a ragged KV cache: qo_indptr = kv_indptr = cu_seqlens;
 *   compact space: batch prefill with a paged KV cache of page size 1 (NHD): the compact K/V rows
 *                  are the pages, kv_indptr = cu_seqlens, kv_indices = the plan's scatter,
 *                  qo_indptr the owned query ranges, every last page holding 1 row.
 * FlashInfer splits the work on the host: a plan (which query tile of which sequence each thread
 * block takes) written to page-locked memory and copied to the device, then the kernel reads it.
 * Here the plan is made in rmlp_context_set_plan, for both layouts, in FlashInfer's CUDA-graph mode
 * (every launch shape depends on the counts n_rows and n_seqs only, never on the lengths; whether
 * a layer's window applies, on the key count: gpu_flashinfer_run) and
 * without splitting keys across blocks (no merge pass, no float workspace, same result whatever
 * the device); the forward then only launches: nothing allocates, synchronises or plans there,
 * and a captured graph replays over any batch of the same counts set by rmlp_context_set_plan.
 * Full space may also read K/V as pages (paged_kv): the compact rows through the plan's scatter,
 * kv_indices = scatter, qo = kv_indptr = cu_seqlens; the full-space plan serves it unchanged (the
 * same query and key ranges), so only Q needs scattering to the batch rows.
 * Whatever FlashInfer cannot take runs on the reference kernel, never as an error: each of these
 * calls says why (gpu_fi_reason), and the caller counts it (rmlp_gpu_stats).
 * On a Hopper device (compute capability 9.0) a build with RMLP_WITH_FLASHINFER_SM90 also plans
 * FlashInfer's Hopper kernels (gpu/flashinfer_sm90.h) for the layouts read as pages, and runs them
 * where planned, for layers without a window or soft-cap; the FA2 kernels take whatever they do
 * not (and must be ready themselves).
 * Internal to the library; in a build without FlashInfer every context gets NULL (no fast path).
 */
#ifndef RMLP_GPU_FLASHINFER_H
#define RMLP_GPU_FLASHINFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "kernels.h"
#include "radix_mlp/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpu_flashinfer gpu_flashinfer;

typedef enum gpu_fi_layout { GPU_FI_FULL = 0, GPU_FI_COMPACT = 1 } gpu_fi_layout;

/* Why FlashInfer does not take a batch (GPU_FI_OK: it does); the reference kernel runs it then. */
typedef enum gpu_fi_reason {
    GPU_FI_OK = 0,
    GPU_FI_PLAN_ERROR,  /* FlashInfer's planner raised an error for this batch */
    GPU_FI_SMALL_BATCH, /* FlashInfer picked a query tile (or a key split) not instantiated here */
    GPU_FI_TOO_LARGE,   /* past its 32-bit offsets (2^31 elements), or past the workspace's capacity */
    GPU_FI_UNPLANNED,   /* not the batch planned (other counts, offsets or arrays), or none planned */
    GPU_FI_BUFFERS,     /* strides, alignment or shape it cannot read */
    GPU_FI_LAUNCHER,    /* its launcher refused the configuration on this device */
    GPU_FI_VARIANT,     /* a layer's logit soft-cap at a head_dim without the soft-cap variant (64, 128): see
                           gpu_flashinfer_takes_layer (no field of rmlp_gpu_stats, whose size is fixed:
                           counted in its reference_* only) */
    GPU_FI_REASONS
} gpu_fi_reason;

/* Were FlashInfer's kernels compiled into this build? */
bool gpu_flashinfer_built(void);

/* Are there kernels for this shape: f16 or bf16, head_dim 64, 128 or 256, n_heads a multiple of
 * n_kv_heads (and a build with FlashInfer)? */
bool gpu_flashinfer_supports(rmlp_dtype dtype, size_t n_heads, size_t n_kv_heads, size_t head_dim);

/* Is the variant for a layer of this head_dim with this sliding window (0: none) and logit soft-cap
 * (0: none) instantiated (and the build has FlashInfer)? Windows at every head_dim above, soft-caps
 * at 256 (Gemma 2 2B and 9B); a layer it says no to runs on the reference kernel (GPU_FI_VARIANT). */
bool gpu_flashinfer_takes_layer(size_t head_dim, uint32_t window, float softcap);

/* The state of one context on the current device: device memory for both layouts' plans and the
 * last-page lengths (all 1), page-locked staging for the plans, all allocated here, once, for
 * batches of up to max_rows rows (tokens or compact rows) in up to max_seqs sequences. *out is
 * NULL (RMLP_OK) when FlashInfer has no kernels for the build, the shape or the device (before
 * sm_80); with `required` that is RMLP_ERR_UNSUPPORTED instead, the message saying which and
 * naming `setting` (what asked for FlashInfer, e.g. "params->gpu_attention=..."). */
rmlp_status gpu_flashinfer_create(const char *fn, rmlp_dtype dtype, size_t n_heads, size_t n_kv_heads,
                                  size_t head_dim, size_t max_rows, size_t max_seqs, const char *setting,
                                  bool sm90, gpu_flashinfer **out);
/* Whether the Hopper kernels serve fi (made with sm90, built, and the shape and device take them). */
bool gpu_flashinfer_has_sm90(const gpu_flashinfer *fi);
void gpu_flashinfer_free(gpu_flashinfer *fi);

/* Plans `layout` for a batch whose sequence s has the query rows qo_indptr[s] .. qo_indptr[s+1]
 * and the keys kv_indptr[s] .. kv_indptr[s+1] (host arrays, n_seqs + 1 each; full space: both
 * cu_seqlens), and enqueues the plan's copy to the device on `stream`. The caller makes sure the
 * previous plan's copy has left the staging (rmlp_context_set_plan's event). GPU_FI_OK when
 * planned; otherwise the layout stays unplanned and the reason is returned (and kept: see
 * gpu_flashinfer_ready), never an error: the reference kernel runs the batch. With
 * GPU_FI_PLAN_ERROR, `error` (cap bytes) receives what FlashInfer's planner reported. fi may be
 * NULL (GPU_FI_UNPLANNED). *sm90 (may be NULL) receives the Hopper kernels' reason for the layout
 * (GPU_FI_UNPLANNED where they do not serve fi); when only their planner failed, `error` holds its
 * message. */
gpu_fi_reason gpu_flashinfer_plan(gpu_flashinfer *fi, gpu_fi_layout layout, const uint32_t *qo_indptr,
                                  const uint32_t *kv_indptr, size_t n_seqs, cudaStream_t stream, char *error,
                                  size_t cap, gpu_fi_reason *sm90);
/* Forgets both layouts' plans (a new batch is being set). fi may be NULL. */
void gpu_flashinfer_unplan(gpu_flashinfer *fi);

/* Can gpu_flashinfer_run take `layout` for n_seqs sequences and n_rows query rows (the planned
 * counts) of the shape fi was made for, on these buffers: q, k, v at strides that are multiples of
 * 8 elements, 16-byte aligned, out dense (out_stride = n_heads * head_dim), every offset within
 * FlashInfer's 32-bit indexing? K/V are read as pages (`paged`: compact space, or full space
 * through the scatter) from rows the capacity bounds, else as ragged rows (full space). GPU_FI_OK,
 * or why not: the reason the layout was left unplanned, GPU_FI_UNPLANNED for other counts (or fi
 * NULL), GPU_FI_BUFFERS, GPU_FI_TOO_LARGE. */
gpu_fi_reason gpu_flashinfer_ready(const gpu_flashinfer *fi, gpu_fi_layout layout, bool paged,
                                   const gpu_compact_rows *rows, size_t n_seqs, size_t n_rows, size_t n_heads,
                                   size_t n_kv_heads, size_t head_dim);

/* Causal attention as gpu_attention (full: qo_indptr = kv_indptr = cu_seqlens, kv_indices NULL)
 * or gpu_compact_attention (kv_indices given: compact space, or full space reading K/V through the
 * scatter) computes it for a layer `la` (its scale, sliding window and soft-cap; la.rope is not
 * read), with the planned work split of `layout`; the index arrays are device memory (uint32,
 * values below 2^31). Only after gpu_flashinfer_ready said GPU_FI_OK (with paged = kv_indices !=
 * NULL) and for a layer gpu_flashinfer_takes_layer takes (else cudaErrorInvalidValue). Enqueues on
 * `stream` and returns at once (never allocates or synchronises; capturable). A window is applied
 * unless the planned batch holds no more keys in all than it (kv_indptr[n_seqs]: then it cuts
 * nothing); a captured launch holds that choice, so replay it over plans of the same key count too
 * (the library's plans: n_tokens, one of the counts its graphs hold). cudaErrorNotSupported: FlashInfer's launcher refused the configuration on this
 * device before launching anything (the caller runs the reference kernel instead). Pages of a
 * layout the Hopper kernels planned run on them where the layer has no window (as just said) and
 * no soft-cap (*sm90 set true; may be NULL), and on the FA2 kernels if their launcher refuses. */
cudaError_t gpu_flashinfer_run(const gpu_flashinfer *fi, gpu_fi_layout layout, const gpu_compact_rows *rows,
                               const uint32_t *qo_indptr, const uint32_t *kv_indptr, const uint32_t *kv_indices,
                               layer_attention la, cudaStream_t stream, bool *sm90);

/* For tests only: the next n plans of fi get too small a workspace, so FlashInfer's planner raises
 * its out-of-space error (the path a real planner error takes). fi may be NULL. */
void gpu_flashinfer_test_starve(gpu_flashinfer *fi, unsigned n);

#ifdef __cplusplus
}
#endif

#endif
