/*
 * backend.c: the CPU's backend table (common/backend.h) over runner.h and layer.h, and the CPU's
 * models (fp32 weights) and contexts (a workspace and its threads). Every device-dependent step of the entry points
 * lands here for a CPU model: the per-layer calls, whole and cached forwards (their output checked
 * to be finite), a generation session's steps, the read-outs. The CPU has no stream, reads the
 * host's plan and keeps the prefix cache's slots in the cache itself.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bf16_gemm.h"
#include "sgemm.h"
#include "cache/kv_cache.h"
#include "common/alloc.h"
#include "common/status.h"
#include "threads.h"
#include "pool.h"
#include "runner.h"

rmlp_status cpu_model_load(const char *fn, const struct checkpoint *ckpt, rmlp_model_config *config,
                           const model_ext *ext, bool bf16_matrices, model_weights **out) {
    *out = rmlp_calloc(1, sizeof **out);
    if (*out == NULL)
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating the CPU model (%zu bytes) failed", sizeof **out);
    rmlp_status status = weights_load(ckpt, config, bf16_matrices, *out);
    if (status != RMLP_OK) {
        free(*out);
        *out = NULL;
        return status;
    }
    (*out)->ext = ext;
    return RMLP_OK;
}

void cpu_model_free(model_weights *weights, const rmlp_model_config *config) {
    if (weights == NULL) return;
    weights_free(weights, config);
    free(weights);
}

rmlp_status cpu_context_create(const char *fn, const model_weights *weights, const rmlp_model_config *config,
                               size_t max_tokens, size_t max_compact, cpu_context **out) {
    *out = rmlp_calloc(1, sizeof **out);
    if (*out == NULL)
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating the CPU context (%zu bytes) failed", sizeof **out);
    (*out)->config = config, (*out)->weights = weights;
    const char *failed_name = NULL;
    size_t failed_bytes = 0;
    int thread_error = 0;
    bool bf16 = config->num_hidden_layers > 0 && weights->layers[0].qkv_bf16 != NULL;
    uint64_t *fallbacks = /* the workspace counts into the model, which contexts share (written atomically) */
        bf16 && weights->bf16_gemm == RMLP_CPU_BF16_GEMM_ONEDNN ? (uint64_t *)&weights->bf16_gemm_fallbacks : NULL;
    if (cpu_workspace_alloc(&(*out)->ws, config, weights->ext, max_tokens, max_compact, bf16, fallbacks, &failed_name,
                            &failed_bytes, &thread_error) != 0) {
        free(*out);
        *out = NULL;
        if (failed_bytes == 0) { /* the threads */
            char why[128] = "out of memory";
            if (thread_error != ENOMEM) strerror_r(thread_error, why, sizeof why);
            return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "starting the context's %u CPU threads failed: %s "
                             "(rmlp_set_cpu_threads sets how many; 1 starts none)", cpu_threads(), why);
        }
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating the workspace's %s buffer (%zu bytes) for %zu "
                         "tokens failed", failed_name, failed_bytes, max_tokens);
    }
    return RMLP_OK;
}

void cpu_context_free(cpu_context *ctx) {
    if (ctx == NULL) return;
    cpu_workspace_free(&ctx->ws);
    free(ctx);
}

/* ---- the table's functions ------------------------------------------------------------------- */

static rmlp_status check_model_params(const char *fn, const rmlp_model_params *params) {
    if (params->dtype != RMLP_DTYPE_F32)
        return rmlp_fail(RMLP_ERR_UNSUPPORTED, fn, "params->dtype=%d: the CPU computes in RMLP_DTYPE_F32",
                         params->dtype);
    if (params->cpu_weight_dtype != RMLP_DTYPE_F32 && params->cpu_weight_dtype != RMLP_DTYPE_BF16)
        return rmlp_fail(params->cpu_weight_dtype == RMLP_DTYPE_F16 ? RMLP_ERR_UNSUPPORTED : RMLP_ERR_INVALID_ARGUMENT,
                         fn, "params->cpu_weight_dtype=%d: the CPU holds its weight matrices in RMLP_DTYPE_F32 (%d) "
                         "or RMLP_DTYPE_BF16 (%d)", params->cpu_weight_dtype, RMLP_DTYPE_F32, RMLP_DTYPE_BF16);
    return cpu_bf16_gemm_check_params(fn, params);
}

static rmlp_status model_load(const char *fn, const struct checkpoint *ckpt, rmlp_model_config *config,
                              const model_ext *ext, const rmlp_model_params *params, void **out) {
    model_weights *weights = NULL; /* dtype fp32, matrices fp32 or bf16 (check_model_params) */
    rmlp_cpu_sgemm_kind sgemm;
    const char *sgemm_detail;
    rmlp_status status = cpu_sgemm_choose(fn, &sgemm, &sgemm_detail); /* a bad RADIX_MLP_CPU_SGEMM fails the load */
    if (status == RMLP_OK)
        status = cpu_model_load(fn, ckpt, config, ext, params->cpu_weight_dtype == RMLP_DTYPE_BF16, &weights);
    if (status == RMLP_OK && (status = cpu_bf16_gemm_choose(fn, params, config, weights)) != RMLP_OK) {
        cpu_model_free(weights, config);
        weights = NULL;
    }
    *out = weights;
    return status;
}

static void model_free(void *model, const rmlp_model_config *config) { cpu_model_free(model, config); }

/* gpu_attention applies to CUDA contexts only (a CPU context reads no RADIX_MLP_GPU_* variable
 * either): a CPU context refuses any other value than auto, since it could not honour it. */
static rmlp_status check_context_params(const char *fn, const rmlp_context_params *p) {
    if (p->gpu_attention == RMLP_GPU_ATTENTION_AUTO) return RMLP_OK;
    return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "params->gpu_attention=%s applies to CUDA contexts only, and "
                     "this model runs on the CPU: leave it RMLP_GPU_ATTENTION_AUTO",
                     p->gpu_attention == RMLP_GPU_ATTENTION_FLASHINFER ? "RMLP_GPU_ATTENTION_FLASHINFER"
                                                                       : "RMLP_GPU_ATTENTION_REFERENCE");
}

static rmlp_status context_create(const char *fn, const void *model, const rmlp_model_config *config,
                                  size_t max_tokens, size_t max_compact, rmlp_gpu_attention gpu_attention, void **out) {
    (void)gpu_attention; /* auto (check_context_params) */
    cpu_context *ctx = NULL;
    rmlp_status status = cpu_context_create(fn, model, config, max_tokens, max_compact, &ctx);
    *out = ctx;
    return status;
}

static void context_free(void *ctx) { cpu_context_free(ctx); }

static rmlp_status set_plan(const char *fn, void *ctx, const rmlp_plan *plan) {
    (void)fn, (void)ctx, (void)plan; /* the CPU reads the host plan */
    return RMLP_OK;
}

static void profile_read(void *ctx, bool measure, rmlp_cpu_profile *out) {
    cpu_profile_read(&((cpu_context *)ctx)->ws.profile, measure, out);
}

static rmlp_status check_attention_dtype(const char *fn, rmlp_dtype dtype, rmlp_dtype model_dtype) {
    (void)model_dtype; /* fp32 */
    return dtype == RMLP_DTYPE_F32
               ? RMLP_OK
               : rmlp_fail(RMLP_ERR_UNSUPPORTED, fn, "args->dtype=%d: the CPU attention is F32", dtype);
}

static rmlp_status embed(const char *fn, void *ctx, const rmlp_plan *plan, void *hidden) {
    (void)fn;
    const cpu_context *c = ctx;
    cpu_embed(c->config, c->weights, plan, hidden);
    return RMLP_OK;
}

static rmlp_status pre_attention(const char *fn, void *ctx, uint32_t layer, const rmlp_plan *plan, const void *hidden,
                                 void *q, void *k, void *v, bool compact) {
    (void)fn;
    cpu_context *c = ctx;
    const layer_weights *lw = &c->weights->layers[layer];
    const layer_attention *la = &c->weights->ext->layers[layer];
    if (compact)
        cpu_pre_attention_compact(c->config, lw, la, &c->ws, plan, hidden, plan->n_compact_padded, q, k, v);
    else
        cpu_pre_attention(c->config, lw, la, &c->ws, plan, hidden, q, k, v);
    return RMLP_OK;
}

static rmlp_status post_attention(const char *fn, void *ctx, uint32_t layer, const rmlp_plan *plan, const void *attn,
                                  void *hidden, bool compact) {
    (void)fn;
    cpu_context *c = ctx;
    const layer_weights *lw = &c->weights->layers[layer];
    if (compact)
        cpu_post_attention_compact(c->config, lw, &c->ws, plan, attn, hidden);
    else
        cpu_post_attention(c->config, lw, &c->ws, plan, attn, hidden);
    return RMLP_OK;
}

static rmlp_status final_norm(const char *fn, void *ctx, const rmlp_plan *plan, const void *hidden, void *out,
                              bool compact) {
    (void)fn;
    cpu_context *c = ctx;
    if (compact)
        cpu_final_norm_compact(c->config, c->weights, &c->ws, plan, hidden, out);
    else
        cpu_final_norm(c->config, c->weights, &c->ws, plan, hidden, out);
    return RMLP_OK;
}

/* args->scale as given, the window and soft-cap of layer args->layer (checked < the model's layers). */
static rmlp_status attention(const char *fn, void *ctx, const rmlp_attention_args *args, bool compact) {
    (void)fn;
    cpu_context *c = ctx;
    layer_attention la = c->weights->ext->layers[args->layer];
    la.scale = args->scale;
    if (!compact) {
        cpu_attend_full(&c->ws, args->q, args->k, args->v, args->cu_seqlens, args->n_seqs, args->n_heads,
                        args->n_kv_heads, args->head_dim, &la, args->out);
        return RMLP_OK;
    }
    size_t qd = (size_t)args->n_heads * args->head_dim, kvd = (size_t)args->n_kv_heads * args->head_dim;
    cpu_attention_rows rows = {args->q, args->k, args->v, args->out, qd, kvd, kvd, qd, 0};
    cpu_attend_compact(&c->ws, &rows, args->qo_indptr, args->kv_indptr, args->kv_indices, args->n_seqs, args->n_heads,
                       args->n_kv_heads, args->head_dim, &la);
    return RMLP_OK;
}

static rmlp_status forward(const char *fn, void *ctx, const rmlp_plan *plan, rmlp_attention_space space,
                           rmlp_attention_fn attention_fn, void *user_data, void *out, forward_rows rows) {
    rmlp_status status = cpu_forward(fn, ctx, plan, space, attention_fn, user_data, out, rows);
    return status == RMLP_OK ? cpu_check_output(fn, ctx, plan, out, rows) : status;
}

static rmlp_status cache_create(const char *fn, void *ctx, kv_cache *cache, void **out) {
    (void)fn, (void)ctx, (void)cache; /* the slots are the cache's own (cache_on_host) */
    *out = NULL;
    return RMLP_OK;
}

static void cache_free(void *cache_side) { (void)cache_side; }

static rmlp_status forward_cached(const char *fn, void *ctx, void *cache_side, kv_cache *cache, const rmlp_plan *plan,
                                  void *out, forward_rows rows, bool *bypassed) {
    (void)cache_side;
    *bypassed = cpu_forward_cached(ctx, cache, plan, out, rows) != 0;
    return *bypassed ? RMLP_OK : cpu_check_output(fn, ctx, plan, out, rows);
}

static rmlp_status generate_open(const char *fn, void *ctx, const rmlp_model_config *config, size_t n_seqs,
                                 size_t max_path, void **out) {
    (void)config, (void)max_path;
    cpu_decode *dec = NULL;
    rmlp_status status = cpu_decode_create(fn, ctx, n_seqs, &dec);
    *out = dec;
    return status;
}

static void generate_close(void *state) { cpu_decode_free(state); }

/* The prompts through the cached forward into a scratch output (compact rows, checked to be
 * finite); when they do not fit the cache, the same forward without it (skipped). */
static rmlp_status generate_prefill(const char *fn, void *ctx, void *cache_side, kv_cache *cache, void *state,
                                    const rmlp_plan *plan, bool *skipped) {
    (void)cache_side, (void)state;
    const cpu_context *c = ctx;
    size_t bytes = (size_t)plan->n_compact_padded * c->config->hidden_size * sizeof(float);
    float *out = rmlp_malloc(bytes);
    if (out == NULL)
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating 'prefill output' of the generation session (%zu "
                         "bytes) failed", bytes);
    *skipped = cpu_forward_cached(ctx, cache, plan, out, FORWARD_COMPACT_ROWS) != 0;
    rmlp_status status =
        *skipped ? cpu_forward(fn, ctx, plan, RMLP_ATTENTION_COMPACT, NULL, NULL, out, FORWARD_COMPACT_ROWS) : RMLP_OK;
    if (status == RMLP_OK) status = cpu_check_output(fn, ctx, plan, out, FORWARD_COMPACT_ROWS);
    free(out);
    return status;
}

static rmlp_status generate_rows(const char *fn, void *ctx, void *cache_side, kv_cache *cache, void *state,
                                 const rmlp_step_rows *rows, double *attention_ms) {
    (void)fn, (void)cache_side;
    *attention_ms += cpu_decode_rows(ctx, cache, state, rows);
    return RMLP_OK;
}

static rmlp_status generate_logits(const char *fn, void *ctx, void *cache_side, kv_cache *cache, void *state,
                                   const uint32_t *slots, size_t n, float *logits) {
    (void)fn, (void)cache_side;
    cpu_decode_logits(ctx, cache, state, slots, n, logits);
    return RMLP_OK;
}

static rmlp_status pool(const char *fn, void *ctx, const void *hidden, const rmlp_plan *compact_plan,
                        const uint32_t *cu_seqlens, size_t n_seqs, rmlp_pooling pooling, bool normalize, float *out) {
    (void)fn;
    const cpu_context *c = ctx;
    cpu_pool(hidden, c->config->hidden_size, compact_plan != NULL ? compact_plan->scatter : NULL, cu_seqlens, n_seqs,
             pooling, normalize, out);
    return RMLP_OK;
}

static rmlp_status score_pair(const char *fn, void *ctx, const void *hidden, const rmlp_plan *compact_plan,
                              const uint32_t *cu_seqlens, size_t n_seqs, uint32_t token_a, uint32_t token_b,
                              float *logits, float *prob_a) {
    (void)fn;
    const cpu_context *c = ctx;
    cpu_score_pair(hidden, c->config->hidden_size, compact_plan != NULL ? compact_plan->scatter : NULL, cu_seqlens,
                   n_seqs, c->weights->lm_head, token_a, token_b, c->config->final_logit_softcapping, logits, prob_a);
    return RMLP_OK;
}

static void pool_rows(const float *hidden, uint32_t hidden_size, const uint32_t *cu_seqlens, size_t n_seqs,
                      rmlp_pooling pooling, bool normalize, float *out) {
    cpu_pool(hidden, hidden_size, NULL, cu_seqlens, n_seqs, pooling, normalize, out);
}

static const rmlp_backend_cpu_part cpu_part = {
    .set_threads = cpu_threads_set,
    .threads = cpu_threads,
    .sgemm = cpu_sgemm_choose,
    .pool = pool_rows,
    .bf16_gemm = cpu_bf16_gemm_query,
    .profile = profile_read,
};

const rmlp_backend rmlp_backend_cpu = {
    .name = "cpu",
    .device = RMLP_DEVICE_CPU,
    .build_flags = 0,
    .plan_on_device = false,
    .cache_on_host = true,
    .cpu = &cpu_part,
    .cuda = NULL,
    .check_model_params = check_model_params,
    .model_load = model_load,
    .model_free = model_free,
    .check_context_params = check_context_params,
    .context_create = context_create,
    .context_free = context_free,
    .set_plan = set_plan,
    .check_attention_dtype = check_attention_dtype,
    .embed = embed,
    .pre_attention = pre_attention,
    .post_attention = post_attention,
    .final_norm = final_norm,
    .attention = attention,
    .forward = forward,
    .cache_create = cache_create,
    .cache_free = cache_free,
    .forward_cached = forward_cached,
    .generate_open = generate_open,
    .generate_close = generate_close,
    .generate_prefill = generate_prefill,
    .generate_rows = generate_rows,
    .generate_logits = generate_logits,
    .pool = pool,
    .score_pair = score_pair,
};
