/*
 * runner.h: the C interface of the CUDA model path, as gpu/backend.c calls it: device
 * weights (loaded from a checkpoint or bound to the host's device pointers), contexts (device
 * workspace, stream, cuBLAS handle, the plan's maps on the device) and the layer runner, which
 * mirrors cpu/layer.h call for call. Every function takes the exported entry point's name
 * (`fn`) for its messages, runs on the model's device (restoring the caller's current device)
 * and returns an rmlp_status. Argument checks that do not need the device (plans, layer
 * indices, NULL buffers, token ids) are the ffi layer's, done before these are called.
 * Internal to the library.
 */
#ifndef RMLP_GPU_RUNNER_H
#define RMLP_GPU_RUNNER_H

#include <stdbool.h>
#include <stddef.h>

#include "common/forward_rows.h"
#include "radix_mlp/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpu_model gpu_model;
typedef struct gpu_context gpu_context;
struct checkpoint;
struct gpu_options;
struct model_ext;
struct rmlp_backend;

/* CUDA's backend table (common/backend.h) over the functions below: backend.c, in CUDA builds only. */
extern const struct rmlp_backend rmlp_backend_cuda;

/* ---- models (weights.cu, bind.cu) --------------------------------------------------------- */

/* ext (model/model_ext.h): the model's, which outlives the gpu_model (kept as gpu_model::ext).
 * Uploads every tensor `config` calls for to `device` in `dtype` (Q/K/V and gate/up stacked, as
 * on the CPU); sets config->has_lm_head. Errors name the tensor; RMLP_ERR_NO_DEVICE when the
 * device is absent, RMLP_ERR_OUT_OF_MEMORY when the device memory does not suffice. */
rmlp_status gpu_model_load(const char *fn, const struct checkpoint *ckpt, rmlp_model_config *config,
                           const struct model_ext *ext, int device, rmlp_dtype dtype, gpu_model **out);
/* A model over the host's device tensors (see rmlp_model_bind_cuda); sets config->has_lm_head. */
rmlp_status gpu_model_bind(const char *fn, rmlp_model_config *config, const struct model_ext *ext,
                           const rmlp_weight_binding *tensors, size_t n, int device, rmlp_dtype dtype, gpu_model **out);
void gpu_model_free(gpu_model *model);

/* ---- contexts (context.cu) ------------------------------------------------------------------ */

rmlp_status gpu_context_create(const char *fn, const gpu_model *model, size_t max_tokens, size_t max_compact,
                               const struct gpu_options *options, gpu_context **out);
void gpu_context_free(gpu_context *ctx);
rmlp_status gpu_context_set_stream(const char *fn, gpu_context *ctx, void *stream);
rmlp_status gpu_context_set_plan(const char *fn, gpu_context *ctx, const rmlp_plan *plan);
/* RMLP_OK when `plan` is the one last set (same counts and array pointers; with `contents`, the
 * maps also still hold what was copied to the device), else RMLP_ERR_INVALID_ARGUMENT saying so. */
rmlp_status gpu_context_check_plan(const char *fn, const gpu_context *ctx, const rmlp_plan *plan, bool contents);
/* Whether `plan` is the one last set, its maps unchanged (gpu_context_check_plan with contents, as
 * a question: no error recorded). */
bool gpu_context_plan_is_set(const gpu_context *ctx, const rmlp_plan *plan);
/* RMLP_OK when `ptr` is device (or managed) memory usable on the model's device; skipped (OK)
 * while the context's stream is capturing. `name` names the argument in the message. */
rmlp_status gpu_context_check_buffer(const char *fn, const gpu_context *ctx, const char *name, const void *ptr);
/* The built-in attention's counters and the options of ctx into out (every field but struct_size). */
void gpu_context_stats(const gpu_context *ctx, rmlp_gpu_stats *out);
/* For tests only: the context's FlashInfer state (gpu/flashinfer.h), NULL when it has none. */
struct gpu_flashinfer *gpu_context_flashinfer(gpu_context *ctx);

/* ---- the layer (layer.cu), on the context's stream, never allocating or synchronising --------- */

rmlp_status gpu_embed(const char *fn, gpu_context *ctx, void *hidden);
rmlp_status gpu_pre_attention(const char *fn, gpu_context *ctx, uint32_t layer, const void *hidden, void *q, void *k,
                              void *v);
rmlp_status gpu_post_attention(const char *fn, gpu_context *ctx, uint32_t layer, const void *attn, void *hidden);
rmlp_status gpu_final_norm(const char *fn, gpu_context *ctx, const void *hidden, void *out);
/* The built-in attention on args' buffers; cu_seqlens_device NULL means the set plan's copy. */
rmlp_status gpu_attention_run(const char *fn, gpu_context *ctx, const rmlp_attention_args *args);

/* Compact space (no scatter, no gather): q (n_compact_padded, q_dim), k, v (.., kv_dim);
 * attn (n_compact_padded, q_dim); out (n_compact_padded, hidden). */
rmlp_status gpu_pre_attention_compact(const char *fn, gpu_context *ctx, uint32_t layer, const void *hidden, void *q,
                                      void *k, void *v);
rmlp_status gpu_post_attention_compact(const char *fn, gpu_context *ctx, uint32_t layer, const void *attn,
                                       void *hidden);
rmlp_status gpu_final_norm_compact(const char *fn, gpu_context *ctx, const void *hidden, void *out);
/* The built-in attention in the compact layout; NULL device arrays mean the set plan's copies. */
rmlp_status gpu_attention_compact_run(const char *fn, gpu_context *ctx, const rmlp_attention_args *args);
/* Would the two calls above run FlashInfer's kernel (gpu/flashinfer.h) for args (dense q, k, v, out)
 * rather than the reference kernel? The same decision they take; for tests. */
bool gpu_attention_uses_flashinfer(const gpu_context *ctx, const rmlp_attention_args *args, bool compact);

/* The whole model on the set plan: internal buffers, `attention` (or the built-in) in full or
 * compact space (RMLP_ATTENTION_FULL / COMPACT), `out`: the rows `rows` names (common/forward_rows.h:
 * batch rows (n_tokens, hidden), compact rows (n_compact_padded, hidden), or each sequence's last
 * row (n_seqs, hidden), the last layer's post-attention on those rows alone). */
rmlp_status gpu_forward(const char *fn, gpu_context *ctx, rmlp_attention_space space, rmlp_attention_fn attention,
                        void *user_data, void *out, forward_rows rows);

/* ---- the prefix cache's device side (cache.cu) ------------------------------------------------ */

typedef struct gpu_cache gpu_cache;

/* Storage for n_slots slots (each layer's K and V and the final hidden state of a row, in the
 * model's dtype) and the batch arrays of ctx's capacity. RMLP_ERR_OUT_OF_MEMORY names the bytes. */
rmlp_status gpu_cache_create(const char *fn, const gpu_context *ctx, uint32_t n_slots, gpu_cache **out);
void gpu_cache_free(gpu_cache *cache);

/* A batch against the cache, host arrays from the index (cache/kv_cache.h, kv_cache_begin) for the
 * plan set on the context: the n_computed rows to compute (ids, pos, slots), every batch row's
 * slot (path, n_tokens), the computed rows of each sequence (cqo_indptr, n_seqs + 1) and the slot
 * of each output row (out_slots, n_out). */
typedef struct gpu_cached_batch {
    const uint32_t *ids, *pos, *slots, *path, *cqo_indptr, *out_slots;
    uint32_t n_computed, n_out;
} gpu_cached_batch;

/* New rows through the model against the cache's slots, device arrays: the rows' ids, pos, slots
 * (n_rows each), and attention in groups (gpu_compact_attention's layout): group g's queries are
 * rows qo_indptr[g] .. qo_indptr[g+1], its keys the slots kv_indices[kv_indptr[g] .. kv_indptr[g+1]),
 * its queries the last of them. Each layer puts the rows' K/V into their slots before attention;
 * the final-normed rows go into their slots. On the context's stream. */
typedef struct gpu_cache_rows {
    const uint32_t *ids, *pos, *slots, *qo_indptr, *kv_indptr, *kv_indices;
    size_t n_rows, n_groups;
    /* a decode step instead (qo/kv arrays unused): the step's chains (kernels.h), each row's
     * memberships row_members[row_indptr[r] .. row_indptr[r+1]) and the fp32 state of every
     * membership (n_members * n_heads, head_dim + 2); chains NULL otherwise */
    const struct gpu_chain_layout *chains;
    const uint32_t *row_indptr, *row_members;
    float *state;
    /* or a decode step through FlashInfer's batch decode (gpu/flashinfer_decode.h; chains then NULL) */
    const struct gpu_fi_decode_step *fi_step;
} gpu_cache_rows;
rmlp_status gpu_cache_run_rows(const char *fn, gpu_context *ctx, gpu_cache *cache, const gpu_cache_rows *rows);
/* RMLP_ERR_UNSUPPORTED while the context's stream captures a graph (work through the cache waits on
 * the host for its staging, and depends on the cache's state). */
rmlp_status gpu_cache_check_capture(const char *fn, const gpu_context *ctx);

/* The forward through the cache: computes the new rows into their slots, then out = the slots'
 * hidden states of the output rows (batch.out_slots: batch rows, the compact rows with their
 * padding zeroed when `rows` says so, or the last rows; nothing when out is NULL: a generation's
 * prefill). Synchronises on the previous cached forward's copy; refused while capturing. */
rmlp_status gpu_forward_cached(const char *fn, gpu_context *ctx, gpu_cache *cache, const gpu_cached_batch *batch,
                               void *out, forward_rows rows);

/* ---- generation (decode.cu): a session's device arrays ------------------------------------ */

typedef struct gpu_decode gpu_decode;

/* For steps of up to n_seqs new rows whose chains hold at most key_words slots and max_members
 * memberships in all, and logits of up to n_seqs rows. RMLP_ERR_OUT_OF_MEMORY names the bytes. */
rmlp_status gpu_decode_create(const char *fn, const gpu_context *ctx, size_t n_seqs, size_t key_words,
                              size_t max_members, gpu_decode **out);
void gpu_decode_free(gpu_decode *dec);
/* A step's chains on the host (cpu/decode_attention.h's cut, packed): chain c's keys
 * keys[key_indptr[c] ..), its member rows members[member_indptr[c] ..); row r's memberships
 * row_members[row_indptr[r] ..) (indices into members). */
typedef struct gpu_decode_chains {
    const uint32_t *key_indptr, *keys, *member_indptr, *members, *row_indptr, *row_members;
    size_t n_chains;
    const uint32_t *chain_depth, *path_len; /* (n_chains), (n_rows): for a model with sliding windows */
} gpu_decode_chains;
/* A step's new rows (host arrays): ids, pos, slots (n_rows), attending over their chains. */
rmlp_status gpu_decode_rows(const char *fn, gpu_context *ctx, gpu_cache *cache, gpu_decode *dec, const uint32_t *ids,
                            const uint32_t *pos, const uint32_t *slots, size_t n_rows, const gpu_decode_chains *chains);
/* logits (n, vocab), host memory, fp32 = the LM head of the hidden states in slots (n, host);
 * synchronises the stream. */
rmlp_status gpu_decode_logits(const char *fn, gpu_context *ctx, gpu_cache *cache, gpu_decode *dec,
                              const uint32_t *slots, size_t n, float *logits);

/* ---- read-outs (readout.cu): run on the stream, then synchronise it ---------------------------- */

/* hidden: batch rows, or (compact) compact rows read through the set plan's scatter. */
rmlp_status gpu_pool(const char *fn, gpu_context *ctx, const void *hidden, bool compact, const uint32_t *cu_seqlens,
                     size_t n_seqs, rmlp_pooling pooling, bool normalize, float *out);
rmlp_status gpu_score_pair(const char *fn, gpu_context *ctx, const void *hidden, bool compact,
                           const uint32_t *cu_seqlens, size_t n_seqs, uint32_t token_a, uint32_t token_b,
                           float *logits, float *prob_a);

#ifdef __cplusplus
}
#endif

#endif
