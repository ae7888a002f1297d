/*
 * flashinfer_sm90.h: FlashInfer's Hopper batch prefill (FA3 style: TMA loads of Q, warp-specialised
 * producer and consumers, wgmma), with a paged KV cache of page size 1, behind the C interface
 * gpu/flashinfer.cu calls: the compact layout, and full space reading K/V through the scatter (the
 * layouts whose K/V are pages: gpu/flashinfer.h). Instantiated in gpu/flashinfer_sm90.cu for f16
 * and bf16, head_dim 128, causal, compiled for sm_90a alone (RMLP_FLASHINFER_SM90 in CMake), in a
 * translation unit of its own (FlashInfer's Hopper parameter structs have the FA2 ones' names).
 * Like the FA2 path: planned in rmlp_context_set_plan (CUDA-graph mode: launch shapes depend on the
 * counts only), launched by the forward; whatever it does not take runs on FA2's kernels.
 * Internal to the library; a build without it calls none of this (RMLP_WITH_FLASHINFER_SM90).
 */
#ifndef RMLP_GPU_FLASHINFER_SM90_H
#define RMLP_GPU_FLASHINFER_SM90_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "flashinfer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpu_fi_sm90 gpu_fi_sm90;

/* Query tiles per head a plan may hold (FlashInfer plans one schedule for all heads past 4096,
 * which takes a kernel not instantiated here): batches of more go to FA2. */
#define GPU_FI_SM90_MAX_TILES 4096

/* The state of one context on the current device, for batches of up to max_rows query rows in up
 * to max_seqs sequences: device workspace and page-locked staging of both layouts' plans. *out is
 * NULL (RMLP_OK) where there are no kernels for the shape or the device: f16/bf16, head_dim 128,
 * compute capability 9.0. */
rmlp_status gpu_fi_sm90_create(const char *fn, rmlp_dtype dtype, size_t n_heads, size_t n_kv_heads, size_t head_dim,
                               size_t max_rows, size_t max_seqs, gpu_fi_sm90 **out);
void gpu_fi_sm90_free(gpu_fi_sm90 *s);

/* Plans `layout` as gpu_flashinfer_plan does (host arrays qo_indptr, kv_indptr in rows = pages,
 * n_seqs + 1 each; the copy enqueued on `stream`, the staging free per the caller's event).
 * GPU_FI_OK when planned, else why not (then FA2 takes the layout); GPU_FI_PLAN_ERROR with the
 * planner's message in `error` (cap bytes). */
gpu_fi_reason gpu_fi_sm90_plan(gpu_fi_sm90 *s, gpu_fi_layout layout, const uint32_t *qo_indptr,
                               const uint32_t *kv_indptr, size_t n_seqs, cudaStream_t stream, char *error,
                               size_t cap);
void gpu_fi_sm90_unplan(gpu_fi_sm90 *s);

/* Whether `layout` is planned for these counts. s may be NULL (no). */
bool gpu_fi_sm90_ready(const gpu_fi_sm90 *s, gpu_fi_layout layout, size_t n_seqs, size_t n_rows);

/* Causal attention of the planned `layout` over rows (q, out: query rows; k, v: the pages, read
 * through kv_indices, device memory), as gpu_flashinfer_run's paged case, after
 * gpu_flashinfer_ready said GPU_FI_OK for these buffers and gpu_fi_sm90_ready yes. Enqueues and
 * returns (capturable); cudaErrorNotSupported: refused before launching (FA2 runs it then). */
cudaError_t gpu_fi_sm90_run(const gpu_fi_sm90 *s, gpu_fi_layout layout, const gpu_compact_rows *rows,
                            const uint32_t *kv_indices, float scale, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
