/*
 * model_cuda.h: the CUDA half of the model entry points, called by model_api.c once the
 * arguments that need no device (plans, layers, NULL buffers, token ids, cu_seqlens) are
 * checked. Each checks what needs the device (the plan set on the context, device buffers) and
 * runs gpu/. In a build without CUDA they return RMLP_ERR_UNSUPPORTED (only the load and bind
 * can be reached there: no CUDA model exists).
 */
#ifndef RMLP_FFI_MODEL_CUDA_H
#define RMLP_FFI_MODEL_CUDA_H

#include "../../gpu/runner.h"
#include "model_internal.h"

/* Fills model->config and model->gpu from the checkpoint at `path` (params already checked
 * for struct_size and device == CUDA). */
rmlp_status cuda_model_load(const char *fn, const char *path, const rmlp_model_params *params, rmlp_model *model);
rmlp_status cuda_model_bind(const char *fn, const rmlp_model_config *config, const rmlp_weight_binding *tensors,
                            size_t n_tensors, const rmlp_model_params *params, rmlp_model *model);
void cuda_model_free(rmlp_model *model);

/* gpu_attention: rmlp_context_params::gpu_attention (checked), which RADIX_MLP_GPU_ATTENTION may
 * decide where it is auto; the other RADIX_MLP_GPU_* switches are read here too (gpu/options.h). */
rmlp_status cuda_context_create(const char *fn, rmlp_context *context, size_t max_tokens, size_t max_compact,
                                rmlp_gpu_attention gpu_attention);
void cuda_context_free(rmlp_context *context);
rmlp_status cuda_set_stream(const char *fn, rmlp_context *context, void *stream);
rmlp_status cuda_set_plan(const char *fn, rmlp_context *context, const rmlp_plan *plan);

rmlp_status cuda_embed(const char *fn, rmlp_context *context, const rmlp_plan *plan, void *hidden);
/* compact: the *_compact entry points (no scatter or gather; q, k, v, attn, out in compact rows). */
rmlp_status cuda_pre_attention(const char *fn, rmlp_context *context, uint32_t layer, const rmlp_plan *plan,
                               const void *hidden, void *q, void *k, void *v, bool compact);
rmlp_status cuda_post_attention(const char *fn, rmlp_context *context, uint32_t layer, const rmlp_plan *plan,
                                const void *attn, void *hidden, bool compact);
rmlp_status cuda_final_norm(const char *fn, rmlp_context *context, const rmlp_plan *plan, const void *hidden,
                            void *out, bool compact);
rmlp_status cuda_attention(const char *fn, rmlp_context *context, const rmlp_attention_args *args, bool compact);
/* space: RMLP_ATTENTION_FULL or COMPACT (resolved); out: batch rows, or compact rows with compact_out. */
rmlp_status cuda_forward(const char *fn, rmlp_context *context, const rmlp_plan *plan, rmlp_attention_space space,
                         rmlp_attention_fn attention, void *user_data, void *out, bool compact_out);
/* The device side of context->cache (already made: its index and host arrays). */
rmlp_status cuda_cache_create(const char *fn, rmlp_context *context);
void cuda_cache_free(rmlp_context *context);
/* The forward through the prefix cache (plan checked as a compact plan); *bypassed (nothing done,
 * RMLP_OK) when the batch's new rows do not fit the cache. out NULL: no output (the rows are cached). */
rmlp_status cuda_forward_cached(const char *fn, rmlp_context *context, const rmlp_plan *plan, void *out,
                                bool compact_out, bool *bypassed);
/* Generation on the device (gpu/decode.cu): a session's device arrays for steps of up to n_seqs
 * rows whose chains hold key_words keys and max_members memberships in all; a step's new rows (host
 * arrays: ids, pos, slots) attending over their chains (gpu/runner.h); logits (n, vocab, host) of
 * the hidden states in slots. The prefill is cuda_forward_cached with out NULL. */
rmlp_status cuda_generate_open(const char *fn, rmlp_context *context, size_t n_seqs, size_t key_words,
                               size_t max_members, struct gpu_decode **out);
void cuda_generate_close(struct gpu_decode *dec);
rmlp_status cuda_generate_rows(const char *fn, rmlp_context *context, struct gpu_decode *dec, const uint32_t *ids,
                               const uint32_t *pos, const uint32_t *slots, size_t n_rows,
                               const gpu_decode_chains *chains);
rmlp_status cuda_generate_logits(const char *fn, rmlp_context *context, struct gpu_decode *dec, const uint32_t *slots,
                                 size_t n, float *logits);
/* compact_plan NULL: hidden holds batch rows; else compact rows, read through that plan's scatter
 * (the plan set on the context). */
rmlp_status cuda_pool(const char *fn, rmlp_context *context, const void *hidden, const rmlp_plan *compact_plan,
                      const uint32_t *cu_seqlens, size_t n_seqs, rmlp_pooling pooling, bool normalize, float *out);
rmlp_status cuda_score_pair(const char *fn, rmlp_context *context, const void *hidden, const rmlp_plan *compact_plan,
                            const uint32_t *cu_seqlens, size_t n_seqs, uint32_t token_a, uint32_t token_b,
                            float *logits, float *prob_a);

#endif
