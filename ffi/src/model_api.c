/*
 * model_api.c: the exported model entry points: load a checkpoint, create contexts, and run
 * the layer in pieces (for hosts that keep attention) or whole (rmlp_forward). Arguments are
 * checked here; cpu/ does the arithmetic on the CPU, and a CUDA model's calls go on to
 * model_cuda.c (device checks) and gpu/ once the checks that need no device have passed.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../cpu/cpu_ops.h"
#include "../../cpu/layer.h"
#include "../../cpu/pool.h"
#include "../../model/config.h"
#include "../../model/weights.h"
#include "alloc.h"
#include "export.h"
#include "model_cuda.h"
#include "model_internal.h"
#include "validate.h"

RMLP_EXPORT rmlp_model_params rmlp_model_default_params(void) {
    rmlp_model_params params;
    memset(&params, 0, sizeof params);
    params.struct_size = (uint32_t)sizeof(rmlp_model_params);
    params.device = RMLP_DEVICE_CPU;
    params.device_index = 0;
    params.dtype = RMLP_DTYPE_F32;
    return params;
}

RMLP_EXPORT rmlp_status rmlp_model_load(const char *path, const rmlp_model_params *params, rmlp_model **out) {
    static const char fn[] = "rmlp_model_load";
    rmlp_clear_error();
    if (out == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "out is NULL");
    *out = NULL;
    if (path == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "path is NULL");
    rmlp_model_params defaults = rmlp_model_default_params();
    if (params == NULL) params = &defaults;
    if (params->struct_size != sizeof(rmlp_model_params))
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "params->struct_size=%u but this library expects %zu",
                         params->struct_size, sizeof(rmlp_model_params));
    if (params->device != RMLP_DEVICE_CPU && params->device != RMLP_DEVICE_CUDA)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                         "params->device=%d is neither RMLP_DEVICE_CPU nor RMLP_DEVICE_CUDA", params->device);
    if (params->device == RMLP_DEVICE_CUDA) {
        rmlp_model *model = rmlp_calloc(1, sizeof *model);
        if (model == NULL)
            return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating the model (%zu bytes) failed", sizeof *model);
        rmlp_status status = cuda_model_load(fn, path, params, model);
        if (status != RMLP_OK) {
            free(model);
            return status;
        }
        *out = model;
        return RMLP_OK;
    }
    if (params->dtype != RMLP_DTYPE_F32)
        return rmlp_fail(RMLP_ERR_UNSUPPORTED, fn, "params->dtype=%d: the CPU computes in RMLP_DTYPE_F32",
                         params->dtype);

    rmlp_model *model = rmlp_calloc(1, sizeof *model);
    if (model == NULL)
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating the model (%zu bytes) failed", sizeof *model);
    checkpoint *ckpt = NULL;
    rmlp_status status = checkpoint_open(path, &ckpt);
    if (status == RMLP_OK) status = config_read(checkpoint_config_path(ckpt), &model->config);
    if (status == RMLP_OK) status = weights_load(ckpt, &model->config, &model->weights);
    checkpoint_close(ckpt);
    if (status != RMLP_OK) {
        free(model);
        return status;
    }
    *out = model;
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_model_bind_cuda(const rmlp_model_config *config, const rmlp_weight_binding *tensors,
                                             size_t n_tensors, const rmlp_model_params *params, rmlp_model **out) {
    static const char fn[] = "rmlp_model_bind_cuda";
    rmlp_clear_error();
    if (out == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "out is NULL");
    *out = NULL;
    if (config == NULL || params == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "config or params is NULL");
    if (params->struct_size != sizeof(rmlp_model_params))
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "params->struct_size=%u but this library expects %zu",
                         params->struct_size, sizeof(rmlp_model_params));
    if (params->device != RMLP_DEVICE_CUDA)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "params->device=%d: binding device pointers needs "
                         "RMLP_DEVICE_CUDA", params->device);
    rmlp_model *model = rmlp_calloc(1, sizeof *model);
    if (model == NULL)
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating the model (%zu bytes) failed", sizeof *model);
    rmlp_status status = cuda_model_bind(fn, config, tensors, n_tensors, params, model);
    if (status != RMLP_OK) {
        free(model);
        return status;
    }
    *out = model;
    return RMLP_OK;
}

RMLP_EXPORT void rmlp_model_free(rmlp_model *model) {
    if (model == NULL) return;
    if (model->gpu != NULL)
        cuda_model_free(model);
    else
        weights_free(&model->weights, &model->config);
    free(model);
}

RMLP_EXPORT rmlp_status rmlp_model_get_config(const rmlp_model *model, rmlp_model_config *out) {
    static const char fn[] = "rmlp_model_get_config";
    rmlp_clear_error();
    if (model == NULL || out == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "model or out is NULL");
    *out = model->config;
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_context_create(const rmlp_model *model, size_t max_tokens, rmlp_context **out) {
    static const char fn[] = "rmlp_context_create";
    rmlp_clear_error();
    if (out == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "out is NULL");
    *out = NULL;
    if (model == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "model is NULL");
    if (max_tokens == 0 || max_tokens > UINT32_MAX)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "max_tokens=%zu must be in 1..2^32-1", max_tokens);
    rmlp_context *context = rmlp_calloc(1, sizeof *context);
    if (context == NULL)
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating the context (%zu bytes) failed", sizeof *context);
    context->model = model;
    if (model->gpu != NULL) {
        rmlp_status status = cuda_context_create(fn, context, max_tokens, max_tokens + RMLP_MAX_PAD_MULTIPLE - 1);
        if (status != RMLP_OK) {
            free(context);
            return status;
        }
        *out = context;
        return RMLP_OK;
    }
    const char *failed_name = NULL;
    size_t failed_bytes = 0;
    if (cpu_workspace_alloc(&context->ws, &model->config, max_tokens, max_tokens + RMLP_MAX_PAD_MULTIPLE - 1,
                            &failed_name, &failed_bytes) != 0) {
        free(context);
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn,
                         "allocating the workspace's %s buffer (%zu bytes) for %zu tokens failed", failed_name,
                         failed_bytes, max_tokens);
    }
    *out = context;
    return RMLP_OK;
}

RMLP_EXPORT void rmlp_context_free(rmlp_context *context) {
    if (context == NULL) return;
    if (context->gpu != NULL) cuda_context_free(context);
    cpu_workspace_free(&context->ws);
    free(context);
}

/* The checks every layer-level call shares: a context, a plan that is valid and fits it. */
static rmlp_status check_call(const char *fn, const rmlp_context *context, const rmlp_plan *plan) {
    if (context == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "context is NULL");
    rmlp_status status = rmlp_check_plan(fn, plan);
    if (status != RMLP_OK) return status;
    if (plan->n_tokens == 0) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "the plan is empty (n_tokens=0)");
    if (plan->n_tokens > context->ws.cap_tokens || plan->n_compact_padded > context->ws.cap_compact)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                         "plan has %u tokens (%u compact rows) but the context was created for %zu tokens",
                         plan->n_tokens, plan->n_compact_padded, context->ws.cap_tokens);
    return RMLP_OK;
}

static rmlp_status check_layer(const char *fn, const rmlp_context *context, uint32_t layer) {
    if (layer >= context->model->config.num_hidden_layers)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "layer=%u but the model has %u layers", layer,
                         context->model->config.num_hidden_layers);
    return RMLP_OK;
}

static rmlp_status check_buffers(const char *fn, const void *const *buffers, const char *const *names, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (buffers[i] == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "%s is NULL", names[i]);
    return RMLP_OK;
}

/* Token ids below vocab_size and positions below max_position_embeddings, named by batch row
 * (padding rows too: they are embedded like the others). */
static rmlp_status check_inputs(const char *fn, const rmlp_model_config *cfg, const rmlp_plan *plan) {
    for (uint32_t j = 0; j < plan->n_compact_padded; j++) {
        if (plan->compact_input_ids[j] >= cfg->vocab_size)
            return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "input_ids[%u]=%u >= vocab_size=%u",
                             plan->fold_gather[j], plan->compact_input_ids[j], cfg->vocab_size);
        if (plan->compact_position_ids[j] >= cfg->max_position_embeddings)
            return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "position_ids[%u]=%u >= max_position_embeddings=%u",
                             plan->fold_gather[j], plan->compact_position_ids[j], cfg->max_position_embeddings);
    }
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_embed(rmlp_context *context, const rmlp_plan *plan, void *hidden) {
    static const char fn[] = "rmlp_embed";
    rmlp_clear_error();
    rmlp_status status = check_call(fn, context, plan);
    if (status == RMLP_OK) status = check_buffers(fn, (const void *[]){hidden}, (const char *[]){"hidden"}, 1);
    if (status == RMLP_OK) status = check_inputs(fn, &context->model->config, plan);
    if (status != RMLP_OK) return status;
    if (context->gpu != NULL) return cuda_embed(fn, context, plan, hidden);
    cpu_embed(&context->model->config, &context->model->weights, plan, hidden);
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_layer_pre_attention(rmlp_context *context, uint32_t layer, const rmlp_plan *plan,
                                                 const void *hidden, void *q, void *k, void *v) {
    static const char fn[] = "rmlp_layer_pre_attention";
    rmlp_clear_error();
    rmlp_status status = check_call(fn, context, plan);
    if (status == RMLP_OK) status = check_layer(fn, context, layer);
    if (status == RMLP_OK)
        status = check_buffers(fn, (const void *[]){hidden, q, k, v}, (const char *[]){"hidden", "q", "k", "v"}, 4);
    if (status != RMLP_OK) return status;
    if (context->gpu != NULL) return cuda_pre_attention(fn, context, layer, plan, hidden, q, k, v);
    const rmlp_model *m = context->model;
    cpu_pre_attention(&m->config, &m->weights.layers[layer], &context->ws, plan, hidden, q, k, v);
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_layer_post_attention(rmlp_context *context, uint32_t layer, const rmlp_plan *plan,
                                                  const void *attn, void *hidden) {
    static const char fn[] = "rmlp_layer_post_attention";
    rmlp_clear_error();
    rmlp_status status = check_call(fn, context, plan);
    if (status == RMLP_OK) status = check_layer(fn, context, layer);
    if (status == RMLP_OK)
        status = check_buffers(fn, (const void *[]){attn, hidden}, (const char *[]){"attn", "hidden"}, 2);
    if (status != RMLP_OK) return status;
    if (context->gpu != NULL) return cuda_post_attention(fn, context, layer, plan, attn, hidden);
    const rmlp_model *m = context->model;
    cpu_post_attention(&m->config, &m->weights.layers[layer], &context->ws, plan, attn, hidden);
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_final_norm(rmlp_context *context, const rmlp_plan *plan, const void *hidden, void *out) {
    static const char fn[] = "rmlp_final_norm";
    rmlp_clear_error();
    rmlp_status status = check_call(fn, context, plan);
    if (status == RMLP_OK)
        status = check_buffers(fn, (const void *[]){hidden, out}, (const char *[]){"hidden", "out"}, 2);
    if (status != RMLP_OK) return status;
    if (context->gpu != NULL) return cuda_final_norm(fn, context, plan, hidden, out);
    cpu_final_norm(&context->model->config, &context->model->weights, &context->ws, plan, hidden, out);
    return RMLP_OK;
}

/* Attention is full here: a sequence longer than the model's sliding window would differ. */
static rmlp_status check_window(const char *fn, const rmlp_model_config *cfg, const uint32_t *cu_seqlens,
                                size_t n_seqs) {
    for (size_t s = 0; cfg->sliding_window != 0 && s < n_seqs; s++)
        if (cu_seqlens[s + 1] - cu_seqlens[s] > cfg->sliding_window)
            return rmlp_fail(RMLP_ERR_UNSUPPORTED, fn,
                             "sequence %zu has %u tokens, more than the model's sliding_window=%u "
                             "(sliding-window attention is not implemented)",
                             s, cu_seqlens[s + 1] - cu_seqlens[s], cfg->sliding_window);
    return RMLP_OK;
}

static rmlp_status check_attention_args(const char *fn, const rmlp_context *context, const rmlp_attention_args *a) {
    if (a == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "args is NULL");
    if (context->gpu != NULL && a->dtype != context->model->dtype)
        return rmlp_fail(RMLP_ERR_UNSUPPORTED, fn, "args->dtype=%d but the CUDA model's dtype is %d", a->dtype,
                         context->model->dtype);
    if (context->gpu == NULL && a->dtype != RMLP_DTYPE_F32)
        return rmlp_fail(RMLP_ERR_UNSUPPORTED, fn, "args->dtype=%d: the CPU attention is F32", a->dtype);
    if (a->n_heads == 0 || a->n_kv_heads == 0 || a->head_dim == 0 || a->n_heads % a->n_kv_heads != 0)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "n_heads=%u, n_kv_heads=%u, head_dim=%u are inconsistent",
                         a->n_heads, a->n_kv_heads, a->head_dim);
    if (a->n_tokens > context->ws.cap_tokens)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "n_tokens=%u but the context was created for %zu",
                         a->n_tokens, context->ws.cap_tokens);
    if (a->n_tokens > 0 && (a->q == NULL || a->k == NULL || a->v == NULL || a->out == NULL))
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "args->q, k, v or out is NULL");
    rmlp_status status = rmlp_check_cu_seqlens(fn, a->cu_seqlens, a->n_seqs, a->n_tokens);
    return status == RMLP_OK ? check_window(fn, &context->model->config, a->cu_seqlens, a->n_seqs) : status;
}

RMLP_EXPORT rmlp_status rmlp_attention(rmlp_context *context, const rmlp_attention_args *args) {
    static const char fn[] = "rmlp_attention";
    rmlp_clear_error();
    if (context == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "context is NULL");
    rmlp_status status = check_attention_args(fn, context, args);
    if (status != RMLP_OK) return status;
    if (context->gpu != NULL) return cuda_attention(fn, context, args);
    cpu_attention(args->q, args->k, args->v, args->cu_seqlens, args->n_seqs, args->n_heads, args->n_kv_heads,
                  args->head_dim, args->scale, context->ws.scores, args->out);
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_forward(rmlp_context *context, const rmlp_plan *plan, rmlp_attention_fn attention,
                                     void *user_data, void *out) {
    static const char fn[] = "rmlp_forward";
    rmlp_clear_error();
    rmlp_status status = check_call(fn, context, plan);
    if (status == RMLP_OK) status = check_buffers(fn, (const void *[]){out}, (const char *[]){"out"}, 1);
    if (status == RMLP_OK) status = check_inputs(fn, &context->model->config, plan);
    if (status == RMLP_OK) status = check_window(fn, &context->model->config, plan->cu_seqlens, plan->n_seqs);
    if (status != RMLP_OK) return status;
    if (context->gpu != NULL) return cuda_forward(fn, context, plan, attention, user_data, out);

    const uint32_t *cu_seqlens = plan->cu_seqlens;
    const rmlp_model_config *cfg = &context->model->config;
    cpu_workspace *ws = &context->ws;
    cpu_embed(cfg, &context->model->weights, plan, ws->hidden);
    rmlp_attention_args args = {
        .n_tokens = plan->n_tokens,
        .n_seqs = plan->n_seqs,
        .n_heads = cfg->num_attention_heads,
        .n_kv_heads = cfg->num_key_value_heads,
        .head_dim = cfg->head_dim,
        .scale = 1.0f / sqrtf((float)cfg->head_dim),
        .dtype = RMLP_DTYPE_F32,
        .cu_seqlens = cu_seqlens,
        .q = ws->q,
        .k = ws->k,
        .v = ws->v,
        .out = ws->attn,
        .cu_seqlens_device = cu_seqlens, /* the CPU's memory is the host's */
    };
    for (uint32_t s = 0; s < plan->n_seqs; s++)
        if (cu_seqlens[s + 1] - cu_seqlens[s] > args.max_seqlen) args.max_seqlen = cu_seqlens[s + 1] - cu_seqlens[s];
    for (uint32_t layer = 0; layer < cfg->num_hidden_layers; layer++) {
        const layer_weights *lw = &context->model->weights.layers[layer];
        cpu_pre_attention(cfg, lw, ws, plan, ws->hidden, ws->q, ws->k, ws->v);
        args.layer = layer;
        if (attention != NULL) {
            status = rmlp_call_attention(fn, attention, user_data, &args);
            if (status != RMLP_OK) return status;
        } else {
            cpu_attention(ws->q, ws->k, ws->v, cu_seqlens, plan->n_seqs, args.n_heads, args.n_kv_heads,
                          args.head_dim, args.scale, ws->scores, ws->attn);
        }
        cpu_post_attention(cfg, lw, ws, plan, ws->attn, ws->hidden);
    }
    cpu_final_norm(cfg, &context->model->weights, ws, plan, ws->hidden, out);
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_pool(const float *hidden, size_t n_tokens, uint32_t hidden_size,
                                  const uint32_t *cu_seqlens, size_t n_seqs, rmlp_pooling pooling, bool normalize,
                                  float *out) {
    static const char fn[] = "rmlp_pool";
    rmlp_clear_error();
    if (pooling != RMLP_POOLING_LAST && pooling != RMLP_POOLING_MEAN && pooling != RMLP_POOLING_FIRST)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "pooling=%d is not RMLP_POOLING_LAST, MEAN or FIRST", pooling);
    if (hidden_size == 0) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "hidden_size is 0");
    if (hidden == NULL || out == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "hidden or out is NULL");
    rmlp_status status = rmlp_check_cu_seqlens(fn, cu_seqlens, n_seqs, n_tokens);
    if (status == RMLP_OK) status = rmlp_check_nonempty_seqs(fn, cu_seqlens, n_seqs);
    if (status != RMLP_OK) return status;
    cpu_pool(hidden, hidden_size, cu_seqlens, n_seqs, pooling, normalize, out);
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_score_pair(rmlp_context *context, const void *hidden, size_t n_tokens,
                                        const uint32_t *cu_seqlens, size_t n_seqs, uint32_t token_a, uint32_t token_b,
                                        float *logits, float *prob_a) {
    static const char fn[] = "rmlp_score_pair";
    rmlp_clear_error();
    if (context == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "context is NULL");
    const rmlp_model *m = context->model;
    if (!m->config.has_lm_head)
        return rmlp_fail(RMLP_ERR_UNSUPPORTED, fn, "the model has no LM head (no lm_head.weight, embeddings not tied)");
    if (token_a >= m->config.vocab_size || token_b >= m->config.vocab_size)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "token_a=%u or token_b=%u >= vocab_size=%u", token_a, token_b,
                         m->config.vocab_size);
    if (hidden == NULL || logits == NULL || prob_a == NULL)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "hidden, logits or prob_a is NULL");
    rmlp_status status = rmlp_check_cu_seqlens(fn, cu_seqlens, n_seqs, n_tokens);
    if (status == RMLP_OK) status = rmlp_check_nonempty_seqs(fn, cu_seqlens, n_seqs);
    if (status != RMLP_OK) return status;
    if (context->gpu != NULL)
        return cuda_score_pair(fn, context, hidden, cu_seqlens, n_seqs, token_a, token_b, logits, prob_a);
    cpu_score_pair(hidden, m->config.hidden_size, cu_seqlens, n_seqs, m->weights.lm_head, token_a, token_b, logits,
                   prob_a);
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_context_pool(rmlp_context *context, const void *hidden, size_t n_tokens,
                                          const uint32_t *cu_seqlens, size_t n_seqs, rmlp_pooling pooling,
                                          bool normalize, float *out) {
    static const char fn[] = "rmlp_context_pool";
    rmlp_clear_error();
    if (context == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "context is NULL");
    if (pooling != RMLP_POOLING_LAST && pooling != RMLP_POOLING_MEAN && pooling != RMLP_POOLING_FIRST)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "pooling=%d is not RMLP_POOLING_LAST, MEAN or FIRST", pooling);
    if (hidden == NULL || out == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "hidden or out is NULL");
    rmlp_status status = rmlp_check_cu_seqlens(fn, cu_seqlens, n_seqs, n_tokens);
    if (status == RMLP_OK) status = rmlp_check_nonempty_seqs(fn, cu_seqlens, n_seqs);
    if (status != RMLP_OK) return status;
    if (context->gpu != NULL) return cuda_pool(fn, context, hidden, cu_seqlens, n_seqs, pooling, normalize, out);
    cpu_pool(hidden, context->model->config.hidden_size, cu_seqlens, n_seqs, pooling, normalize, out);
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_context_set_stream(rmlp_context *context, void *stream) {
    static const char fn[] = "rmlp_context_set_stream";
    rmlp_clear_error();
    if (context == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "context is NULL");
    return context->gpu != NULL ? cuda_set_stream(fn, context, stream) : RMLP_OK; /* the CPU has no stream */
}

RMLP_EXPORT rmlp_status rmlp_context_set_plan(rmlp_context *context, const rmlp_plan *plan) {
    static const char fn[] = "rmlp_context_set_plan";
    rmlp_clear_error();
    rmlp_status status = check_call(fn, context, plan);
    if (status != RMLP_OK) return status;
    return context->gpu != NULL ? cuda_set_plan(fn, context, plan) : RMLP_OK; /* the CPU reads the host plan */
}
