/*
 * backend.h: the backend interface, one table of functions per device, as ggml's backend interface
 * is: cpu/backend.c fills it for the CPU (cpu/runner.h), gpu/backend.c for CUDA (gpu/runner.h; in
 * CUDA builds only), ffi/src/backends.c picks the one of a model's device at load, and the entry
 * points (ffi/) and generation (generate/) call through the model's table without asking which
 * device runs it. A build without CUDA simply has no CUDA table.
 *
 * A backend's model, context, its side of a prefix cache and a generation session's state are its
 * own objects (void * here). What only one device has sits in that device's part of the table
 * (rmlp_backend::cpu, ::cuda), NULL in the other's. Every function takes the exported entry
 * point's name (`fn`) for its messages and returns an rmlp_status where it can fail. The checks
 * that need no device (plans against the context, layers, NULL buffers, token ids, windows) are
 * the caller's, done before. Internal to the library.
 */
#ifndef RMLP_COMMON_BACKEND_H
#define RMLP_COMMON_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "forward_rows.h"
#include "radix_mlp/types.h"

struct checkpoint;   /* model/checkpoint.h */
struct kv_cache;     /* cache/kv_cache.h: a context's prefix cache (its index; on the host its slots too) */
struct decode_chain; /* generate/chains.h */
struct model_ext;    /* model/model_ext.h: each layer's attention, the RoPE tables; the model's, outliving the backend's */

/* A generation step's new rows, host arrays: token ids, position ids and cache slots (n_rows
 * each), and the chains their paths were cut into (generate/chains.h: chains (n_chains), whose
 * queries are rows members[first .. first + count)); path_len (n_rows): the rows of each one's
 * path, itself included (its position in its sequence is path_len - 1: a sliding window's). */
typedef struct rmlp_step_rows {
    const uint32_t *ids, *pos, *slots;
    uint32_t n_rows;
    const struct decode_chain *chains;
    size_t n_chains;
    const uint32_t *members;
    const uint32_t *path_len;
} rmlp_step_rows;

/* The CPU's part of its table: the process's CPU threads, pooling host rows without a context,
 * and what only CPU models and contexts have. */
typedef struct rmlp_backend_cpu_part {
    /* rmlp_set_cpu_threads: OpenBLAS's thread count (refused above what it can run, the count then
     * unchanged); rmlp_cpu_threads: the count now. */
    rmlp_status (*set_threads)(const char *fn, uint32_t n_threads);
    uint32_t (*threads)(void);
    /* rmlp_cpu_sgemm: which library the fp32 GEMMs run, process-wide (cpu/sgemm.h). */
    rmlp_status (*sgemm)(const char *fn, rmlp_cpu_sgemm_kind *kind, const char **detail);
    /* rmlp_pool: out (n_seqs, hidden_size) from host rows hidden (n_tokens, hidden_size), checked. */
    void (*pool)(const float *hidden, uint32_t hidden_size, const uint32_t *cu_seqlens, size_t n_seqs,
                 rmlp_pooling pooling, bool normalize, float *out);
    /* rmlp_model_cpu_bf16_gemm's answer (detail owned by the model). */
    void (*bf16_gemm)(const void *model, rmlp_cpu_bf16_gemm *kind, uint64_t *fallbacks, const char **detail);
    /* rmlp_context_cpu_profile: what the forwards measured since the last call into out (zeroed by
     * the caller; every field but struct_size), the count restarted, measuring set to `measure`. */
    void (*profile)(void *ctx, bool measure, rmlp_cpu_profile *out);
} rmlp_backend_cpu_part;

/* CUDA's part of its table: devices, models over the host's device tensors, streams, counters. */
typedef struct rmlp_backend_cuda_part {
    /* rmlp_cuda_device_count's count. */
    rmlp_status (*device_count)(const char *fn, int32_t *count);
    /* A model over the host's device tensors (rmlp_model_bind_cuda). */
    rmlp_status (*model_bind)(const char *fn, rmlp_model_config *config, const struct model_ext *ext,
                              const rmlp_weight_binding *tensors, size_t n_tensors, const rmlp_model_params *params,
                              void **out);
    rmlp_status (*set_stream)(const char *fn, void *ctx, void *stream);
    /* rmlp_context_gpu_stats's counters into out (zeroed by the caller; every field but struct_size). */
    rmlp_status (*gpu_stats)(const char *fn, void *ctx, rmlp_gpu_stats *out);
} rmlp_backend_cuda_part;

typedef struct rmlp_backend {
    const char *name;     /* "cpu", "cuda" */
    rmlp_device device;   /* the rmlp_model_params::device it serves */
    uint32_t build_flags; /* the RMLP_BUILD_* bits it brings to rmlp_build_flags */
    /* The per-layer calls and read-outs read the copy of the plan that set_plan made (whose maps
     * were checked then), so they check only that the plan fits; else they read the host plan. */
    bool plan_on_device;
    /* The prefix cache's slots are host memory in struct kv_cache (else cache_create makes them). */
    bool cache_on_host;

    /* The device's own slots: the CPU's part in its table, CUDA's in CUDA's; NULL in the other. */
    const rmlp_backend_cpu_part *cpu;
    const rmlp_backend_cuda_part *cuda;

    /* ---- models ------------------------------------------------------------------------------ */
    /* The params' dtype and device this backend can hold a model in (before anything is read). */
    rmlp_status (*check_model_params)(const char *fn, const rmlp_model_params *params);
    /* The checkpoint's weights (config read and audited already; sets config->has_lm_head). */
    rmlp_status (*model_load)(const char *fn, const struct checkpoint *ckpt, rmlp_model_config *config,
                              const struct model_ext *ext, const rmlp_model_params *params, void **out);
    void (*model_free)(void *model, const rmlp_model_config *config);

    /* ---- contexts --------------------------------------------------------------------------- */
    /* rmlp_context_params this backend cannot honour (read before the context is made). */
    rmlp_status (*check_context_params)(const char *fn, const rmlp_context_params *params);
    /* Scratch for up to max_tokens batch rows and max_compact compact rows. */
    rmlp_status (*context_create)(const char *fn, const void *model, const rmlp_model_config *config,
                                  size_t max_tokens, size_t max_compact, rmlp_gpu_attention gpu_attention, void **out);
    void (*context_free)(void *ctx);
    rmlp_status (*set_plan)(const char *fn, void *ctx, const rmlp_plan *plan);
    /* An rmlp_attention_args::dtype the backend's attention takes, for a model in model_dtype. */
    rmlp_status (*check_attention_dtype)(const char *fn, rmlp_dtype dtype, rmlp_dtype model_dtype);

    /* ---- the layer in pieces (rmlp_embed ...): compact, the *_compact calls ------------------- */
    rmlp_status (*embed)(const char *fn, void *ctx, const rmlp_plan *plan, void *hidden);
    rmlp_status (*pre_attention)(const char *fn, void *ctx, uint32_t layer, const rmlp_plan *plan, const void *hidden,
                                 void *q, void *k, void *v, bool compact);
    rmlp_status (*post_attention)(const char *fn, void *ctx, uint32_t layer, const rmlp_plan *plan,
                                  const void *attn, void *hidden, bool compact);
    rmlp_status (*final_norm)(const char *fn, void *ctx, const rmlp_plan *plan, const void *hidden, void *out,
                              bool compact);
    rmlp_status (*attention)(const char *fn, void *ctx, const rmlp_attention_args *args, bool compact);

    /* ---- whole forwards --------------------------------------------------------------------- */
    /* space: RMLP_ATTENTION_FULL or COMPACT (resolved); out: the rows `rows` names
     * (forward_rows.h); the output checked for infinities and NaN as the backend can. */
    rmlp_status (*forward)(const char *fn, void *ctx, const rmlp_plan *plan, rmlp_attention_space space,
                           rmlp_attention_fn attention, void *user_data, void *out, forward_rows rows);
    /* The backend's side of a context's prefix cache (cache made already: its index), in *out
     * (NULL where the backend needs none); cache_free(NULL) does nothing. */
    rmlp_status (*cache_create)(const char *fn, void *ctx, struct kv_cache *cache, void **out);
    void (*cache_free)(void *cache_side);
    /* The forward through the prefix cache (plan checked as a compact plan); *bypassed (nothing
     * done, RMLP_OK) when the batch's new rows do not fit the cache. */
    rmlp_status (*forward_cached)(const char *fn, void *ctx, void *cache_side, struct kv_cache *cache,
                                  const rmlp_plan *plan, void *out, forward_rows rows, bool *bypassed);

    /* ---- generation steps (generate/session.c): a session's state for steps of up to n_seqs
     * rows over paths of up to max_path slots ---------------------------------------------------- */
    rmlp_status (*generate_open)(const char *fn, void *ctx, const rmlp_model_config *config, size_t n_seqs,
                                 size_t max_path, void **out);
    void (*generate_close)(void *state);
    /* The prompts of plan through the cached forward, their rows left in the cache's slots;
     * *skipped when they do not fit it. */
    rmlp_status (*generate_prefill)(const char *fn, void *ctx, void *cache_side, struct kv_cache *cache,
                                    void *state, const rmlp_plan *plan, bool *skipped);
    /* A step's new rows through the model: their K/V and final hidden states into their slots;
     * *attention_ms += the time its attention took where the backend measures it. */
    rmlp_status (*generate_rows)(const char *fn, void *ctx, void *cache_side, struct kv_cache *cache, void *state,
                                 const rmlp_step_rows *rows, double *attention_ms);
    /* logits (n, vocab), host memory = the LM head of the final hidden states in slots (n). */
    rmlp_status (*generate_logits)(const char *fn, void *ctx, void *cache_side, struct kv_cache *cache, void *state,
                                   const uint32_t *slots, size_t n, float *logits);

    /* ---- read-outs: hidden batch rows, or with compact_plan compact rows read through its scatter */
    rmlp_status (*pool)(const char *fn, void *ctx, const void *hidden, const rmlp_plan *compact_plan,
                        const uint32_t *cu_seqlens, size_t n_seqs, rmlp_pooling pooling, bool normalize, float *out);
    rmlp_status (*score_pair)(const char *fn, void *ctx, const void *hidden, const rmlp_plan *compact_plan,
                              const uint32_t *cu_seqlens, size_t n_seqs, uint32_t token_a, uint32_t token_b,
                              float *logits, float *prob_a);
} rmlp_backend;

#endif
