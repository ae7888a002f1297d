/*
 * flashinfer_decode.h: generation steps' attention through FlashInfer's batch decode kernel and its
 * state merge (attention/decode.cuh, attention/cascade.cuh of the pinned headers), the other path
 * of RADIX_MLP_GPU_DECODE next to the chain kernels of gpu/attention.cu. A step is laid out by
 * gpu/decode_split.h: each new row one request over its path's slots in the prefix cache (a paged
 * KV cache of page size 1, NHD: a layer's slot rows are the pages), cut into chunks; the kernel
 * writes each (chunk, head)'s normalised output in fp32 and its log-sum-exp, and the merge combines
 * a row's chunks into its output in the model's dtype. For f16/bf16, head_dim 64, 128 and 256,
 * GQA groups of 1, 2, 4 and 8 query heads per KV head, layers with or without a sliding window, and
 * Gemma 2's logit soft-cap at head_dim 256 (the prefill's variants, gpu/flashinfer_variants.cuh),
 * on sm_80 and later; other shapes and layers keep the chain kernels. Only these kernels are
 * instantiated (gpu/flashinfer_decode.cu says why).
 * Internal to the library; in a build without FlashInfer, nothing is supported.
 */
#ifndef RMLP_GPU_FLASHINFER_DECODE_H
#define RMLP_GPU_FLASHINFER_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "kernels.h"
#include "radix_mlp/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpu_fi_decode gpu_fi_decode;

/* Were the decode kernels compiled into this build? */
bool gpu_fi_decode_built(void);

/* Are there kernels for this shape (and a build with them)? */
bool gpu_fi_decode_supports(rmlp_dtype dtype, size_t n_heads, size_t n_kv_heads, size_t head_dim);

/* Is there a kernel for a layer of this head_dim with this soft-cap (0: none)? A session takes
 * FlashInfer's decode only where every layer has one (a soft-cap at head_dim 256 only). */
bool gpu_fi_decode_takes_layer(size_t head_dim, float softcap);

/* The device memory of a session's steps of up to max_rows rows on the current device: the
 * chunks' partial outputs and log-sum-exps, for up to max_rows + gpu_fi_decode_target_chunks
 * chunks, and the last page lengths (all 1). *out is NULL (RMLP_OK) when the shape is not
 * supported, the device is older than sm_80, or the kernel cannot run there (its launch
 * attributes refused): the session keeps the chain kernels. */
rmlp_status gpu_fi_decode_create(const char *fn, rmlp_dtype dtype, size_t n_heads, size_t n_kv_heads,
                                 size_t head_dim, size_t max_rows, gpu_fi_decode **out);
void gpu_fi_decode_free(gpu_fi_decode *fi);

/* The chunks a step aims at (decode_split_build's target_chunks): as many thread blocks per KV
 * head as the device runs at once. */
size_t gpu_fi_decode_target_chunks(const gpu_fi_decode *fi);

/* A step laid out by decode_split_build, its arrays copied to the device (uint32, values below
 * 2^31): kv_indptr, kv_indices, request, tile, o_indptr (decode_split's), chunk (one word). */
typedef struct gpu_fi_decode_step {
    const gpu_fi_decode *fi;
    const uint32_t *kv_indptr, *kv_indices, *request, *tile, *o_indptr, *chunk;
    size_t n_rows, n_chunks;
} gpu_fi_decode_step;

/* Would gpu_fi_decode_run take `step` on these buffers: fi non-NULL, the counts within its room,
 * out dense (out_stride = n_heads * head_dim), strides multiples of 8 elements (k_stride ==
 * v_stride), pointers 16-byte aligned, the query offsets within 32 bits? */
bool gpu_fi_decode_ready(const gpu_fi_decode_step *step, const gpu_compact_rows *rows);

/* out row r (n_heads, head_dim), dense = the attention of q row r (at q_stride) over the slots of
 * its path, k and v rows by slot (k_stride == v_stride, a layer's cache rows), scored as the chain
 * kernels score it with la's scale and soft-cap, and with la's window the last la.window keys of
 * the path only (model/model_ext.h). Enqueues the kernel and the merge on `stream` and returns at
 * once. cudaErrorInvalidValue where gpu_fi_decode_ready or gpu_fi_decode_takes_layer says no;
 * cudaErrorNotSupported when FlashInfer's code refused the configuration (an exception, caught
 * here). */
cudaError_t gpu_fi_decode_run(const gpu_fi_decode_step *step, const gpu_compact_rows *rows, layer_attention la,
                              cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
