/*
 * model_api.c: the exported model entry points: load a checkpoint, create contexts, and run
 * the layer in pieces (for hosts that keep attention) or whole (rmlp_forward). Arguments are
 * checked here; cpu/ does the arithmetic on the CPU, and a CUDA model's calls go on to
 * model_cuda.c (device checks) and gpu/ once the checks that need no device have passed.
 * Every call on a context holds the context's guard (guard.h): a freed context or another kind of
 * handle is refused, and so is a context another thread is using (RMLP_ERR_BUSY); the exported
 * entry point enters the guard and runs the static function of the same name without the prefix.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../cpu/cpu_ops.h"
#include "../../cpu/layer.h"
#include "../../cpu/pool.h"
#include "../../cache/kv_cache.h"
#include "../../model/audit.h"
#include "../../model/config.h"
#include "../../model/weights.h"
#include "alloc.h"
#include "export.h"
#include "generate.h"
#include "guard.h"
#include "model_cuda.h"
#include "context_checks.h"
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

/* rmlp_model_params as 0.1.0 released it: the size callers compiled against that header pass. */
typedef struct model_params_0_1 {
    uint32_t struct_size;
    rmlp_device device;
    int32_t device_index;
    rmlp_dtype dtype;
} model_params_0_1;

/* The caller's params of any version (validate.h) as this library's struct, defaults for NULL. */
static rmlp_status read_model_params(const char *fn, const rmlp_model_params *caller, rmlp_model_params *params) {
    static const size_t older[] = {sizeof(model_params_0_1)};
    *params = rmlp_model_default_params();
    return caller == NULL ? RMLP_OK
                          : rmlp_read_params(fn, "rmlp_model_params", caller, params, sizeof *params, older,
                                             sizeof older / sizeof older[0]);
}

/* A zeroed model with a live guard, or NULL. */
static rmlp_model *new_model(void) {
    rmlp_model *model = rmlp_calloc(1, sizeof *model);
    if (model != NULL) {
        rmlp_guard_init(&model->guard, RMLP_MAGIC_MODEL);
        atomic_init(&model->n_contexts, 0);
    }
    return model;
}

RMLP_EXPORT rmlp_status rmlp_model_load(const char *path, const rmlp_model_params *params, rmlp_model **out) {
    static const char fn[] = "rmlp_model_load";
    rmlp_clear_error();
    if (out == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "out is NULL");
    *out = NULL;
    if (path == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "path is NULL");
    rmlp_model_params read;
    rmlp_status read_status = read_model_params(fn, params, &read);
    if (read_status != RMLP_OK) return read_status;
    params = &read;
    if (params->device != RMLP_DEVICE_CPU && params->device != RMLP_DEVICE_CUDA)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                         "params->device=%d is neither RMLP_DEVICE_CPU nor RMLP_DEVICE_CUDA", params->device);
    if (params->device == RMLP_DEVICE_CUDA) {
        rmlp_model *model = new_model();
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

    rmlp_model *model = new_model();
    if (model == NULL)
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating the model (%zu bytes) failed", sizeof *model);
    checkpoint *ckpt = NULL;
    char *report = NULL;
    rmlp_status status = checkpoint_open(path, &ckpt);
    if (status == RMLP_OK) status = config_read(checkpoint_config_path(ckpt), &model->config);
    if (status == RMLP_OK) status = audit_checkpoint(ckpt, &model->config, !params->skip_finite_check, &report);
    if (status == RMLP_OK) status = weights_load(ckpt, &model->config, &model->weights);
    checkpoint_close(ckpt);
    if (status != RMLP_OK) {
        free(report);
        free(model);
        return status;
    }
    model->load_report = report;
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
    rmlp_model_params read;
    rmlp_status read_status = read_model_params(fn, params, &read);
    if (read_status != RMLP_OK) return read_status;
    params = &read;
    if (params->device != RMLP_DEVICE_CUDA)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "params->device=%d: binding device pointers needs "
                         "RMLP_DEVICE_CUDA", params->device);
    rmlp_model *model = new_model();
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
    static const char fn[] = "rmlp_model_free";
    if (model == NULL) return;
    uint32_t contexts = rmlp_guard_is_live(model, RMLP_MAGIC_MODEL) ? atomic_load(&model->n_contexts) : 0;
    if (contexts != 0) {
        rmlp_clear_error();
        rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "the model still has %u context(s): free them first; not freed",
                  contexts);
        return;
    }
    if (!rmlp_guard_retire(fn, model, RMLP_MAGIC_MODEL, "model", "rmlp_model")) return;
    if (model->gpu != NULL)
        cuda_model_free(model);
    else
        weights_free(&model->weights, &model->config);
    free(model->load_report);
    free(model);
}

RMLP_EXPORT rmlp_status rmlp_model_get_config(const rmlp_model *model, rmlp_model_config *out) {
    static const char fn[] = "rmlp_model_get_config";
    rmlp_clear_error();
    if (model == NULL || out == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "model or out is NULL");
    rmlp_status status = rmlp_guard_check(fn, model, RMLP_MAGIC_MODEL, "model", "rmlp_model");
    if (status != RMLP_OK) return status;
    *out = model->config;
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_model_load_report(const rmlp_model *model, const char **out) {
    static const char fn[] = "rmlp_model_load_report";
    rmlp_clear_error();
    if (model == NULL || out == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "model or out is NULL");
    rmlp_status status = rmlp_guard_check(fn, model, RMLP_MAGIC_MODEL, "model", "rmlp_model");
    if (status != RMLP_OK) return status;
    *out = model->load_report != NULL ? model->load_report : "";
    return RMLP_OK;
}

/* Counts a context of `model` made (+1) or freed (-1); rmlp_model_free refuses while any remain.
 * The model is the caller's (const only in the ABI), so its counter may change. */
static rmlp_status count_context(const rmlp_model *model, int delta) {
    atomic_fetch_add(&((rmlp_model *)model)->n_contexts, (uint32_t)delta);
    return RMLP_OK;
}

RMLP_EXPORT rmlp_context_params rmlp_context_default_params(void) {
    rmlp_context_params params;
    memset(&params, 0, sizeof params);
    params.struct_size = (uint32_t)sizeof(rmlp_context_params);
    params.attention_space = RMLP_ATTENTION_FULL;
    params.gpu_attention = RMLP_GPU_ATTENTION_AUTO;
    return params;
}

/* The context parameters' checks that need no device. gpu_attention applies to CUDA contexts only
 * (a CPU context reads no RADIX_MLP_GPU_* variable either): a CPU context refuses any other value
 * than auto, since it could not honour it. */
static rmlp_status check_context_params(const char *fn, const rmlp_model *model, const rmlp_context_params *p) {
    if (p->attention_space != RMLP_ATTENTION_FULL && p->attention_space != RMLP_ATTENTION_COMPACT &&
        p->attention_space != RMLP_ATTENTION_AUTO)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "params->attention_space=%d is not RMLP_ATTENTION_FULL, "
                         "COMPACT or AUTO", p->attention_space);
    if (p->gpu_attention != RMLP_GPU_ATTENTION_AUTO && p->gpu_attention != RMLP_GPU_ATTENTION_FLASHINFER &&
        p->gpu_attention != RMLP_GPU_ATTENTION_REFERENCE)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "params->gpu_attention=%d is not RMLP_GPU_ATTENTION_AUTO (0), "
                         "FLASHINFER (1) or REFERENCE (2)", p->gpu_attention);
    if (model->gpu == NULL && p->gpu_attention != RMLP_GPU_ATTENTION_AUTO)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "params->gpu_attention=%s applies to CUDA contexts only, and "
                         "this model runs on the CPU: leave it RMLP_GPU_ATTENTION_AUTO",
                         p->gpu_attention == RMLP_GPU_ATTENTION_FLASHINFER ? "RMLP_GPU_ATTENTION_FLASHINFER"
                                                                           : "RMLP_GPU_ATTENTION_REFERENCE");
    return RMLP_OK;
}

/* Frees what a context holds, made in full or in part. */
static void context_release(rmlp_context *context) {
    if (context->gpu_cache != NULL) cuda_cache_free(context);
    if (context->gpu != NULL) cuda_context_free(context);
    cpu_workspace_free(&context->ws);
    generate_session_free(context->gen);
    kv_cache_free(context->cache);
    free(context);
}

static rmlp_status context_create(const char *fn, const rmlp_model *model, size_t max_tokens,
                                  const rmlp_context_params *params, rmlp_context **out) {
    rmlp_clear_error();
    if (out == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "out is NULL");
    *out = NULL;
    rmlp_status checked = rmlp_guard_check(fn, model, RMLP_MAGIC_MODEL, "model", "rmlp_model");
    if (checked != RMLP_OK) return checked;
    if (max_tokens == 0 || max_tokens > UINT32_MAX)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "max_tokens=%zu must be in 1..2^32-1", max_tokens);
    rmlp_context_params read = rmlp_context_default_params();
    static const size_t older[] = {offsetof(rmlp_context_params, gpu_attention)}; /* before gpu_attention: 16 */
    if (params != NULL) {
        checked = rmlp_read_params(fn, "rmlp_context_params", params, &read, sizeof read, older,
                                   sizeof older / sizeof older[0]);
        if (checked != RMLP_OK) return checked;
    }
    checked = check_context_params(fn, model, &read);
    if (checked != RMLP_OK) return checked;
    rmlp_context *context = rmlp_calloc(1, sizeof *context);
    if (context == NULL)
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating the context (%zu bytes) failed", sizeof *context);
    rmlp_guard_init(&context->guard, RMLP_MAGIC_CONTEXT);
    context->model = model;
    context->attention_space = read.attention_space;
    size_t max_compact = max_tokens + RMLP_MAX_PAD_MULTIPLE - 1;
    const char *failed_name = NULL;
    size_t failed_bytes = 0;
    rmlp_status status = RMLP_OK;
    if (model->gpu != NULL)
        status = cuda_context_create(fn, context, max_tokens, max_compact, read.gpu_attention);
    else if (cpu_workspace_alloc(&context->ws, &model->config, max_tokens, max_compact, &failed_name, &failed_bytes))
        status = rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating the workspace's %s buffer (%zu bytes) for %zu "
                           "tokens failed", failed_name, failed_bytes, max_tokens);
    /* the cache: its index here, its slots here (CPU, fp32) or on the device (the model's dtype) */
    size_t elem_bytes = model->gpu == NULL || model->dtype == RMLP_DTYPE_F32 ? 4 : 2;
    if (status == RMLP_OK && read.cache_bytes != 0 &&
        (context->cache = kv_cache_new(&model->config, read.cache_bytes, elem_bytes, model->gpu == NULL, max_tokens,
                                       max_compact, &failed_name, &failed_bytes)) == NULL)
        status = rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating the %s (%zu bytes) of a %llu-byte cache failed",
                           failed_name, failed_bytes, (unsigned long long)read.cache_bytes);
    if (status == RMLP_OK && context->cache != NULL && model->gpu != NULL) status = cuda_cache_create(fn, context);
    if (status != RMLP_OK) {
        context_release(context);
        return status;
    }
    *out = context;
    return count_context(model, +1);
}

RMLP_EXPORT rmlp_status rmlp_context_create_with_params(const rmlp_model *model, size_t max_tokens,
                                                        const rmlp_context_params *params, rmlp_context **out) {
    return context_create("rmlp_context_create_with_params", model, max_tokens, params, out);
}

RMLP_EXPORT rmlp_status rmlp_context_create(const rmlp_model *model, size_t max_tokens, rmlp_context **out) {
    return context_create("rmlp_context_create", model, max_tokens, NULL, out);
}

RMLP_EXPORT void rmlp_context_free(rmlp_context *context) {
    if (context == NULL ||
        !rmlp_guard_retire("rmlp_context_free", context, RMLP_MAGIC_CONTEXT, "context", "rmlp_context"))
        return;
    count_context(context->model, -1);
    context_release(context);
}






static rmlp_status embed(const char *fn, rmlp_context *context, const rmlp_plan *plan, void *hidden) {
    rmlp_status status = rmlp_check_layer_call(fn, context, plan);
    if (status == RMLP_OK) status = rmlp_check_buffers(fn, (const void *[]){hidden}, (const char *[]){"hidden"}, 1);
    if (status == RMLP_OK) status = rmlp_check_inputs(fn, &context->model->config, plan);
    if (status != RMLP_OK) return status;
    if (context->gpu != NULL) return cuda_embed(fn, context, plan, hidden);
    cpu_embed(&context->model->config, &context->model->weights, plan, hidden);
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_embed(rmlp_context *context, const rmlp_plan *plan, void *hidden) {
    static const char fn[] = "rmlp_embed";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status : rmlp_guard_leave(context, embed(fn, context, plan, hidden));
}

/* Compact calls need the plan's layout (qo_indptr): the per-layer ones only to refuse a plan
 * that could not run compact attention, so a host sees the problem at its first call. */
static rmlp_status check_space(const char *fn, const rmlp_plan *plan, bool compact) {
    return compact ? rmlp_check_compact_plan(fn, plan) : RMLP_OK;
}

static rmlp_status layer_pre_attention(const char *fn, rmlp_context *context, uint32_t layer, const rmlp_plan *plan,
                                       const void *hidden, void *q, void *k, void *v, bool compact) {
    rmlp_status status = rmlp_check_layer_call(fn, context, plan);
    if (status == RMLP_OK) status = check_space(fn, plan, compact);
    if (status == RMLP_OK) status = rmlp_check_layer(fn, context, layer);
    if (status == RMLP_OK)
        status = rmlp_check_buffers(fn, (const void *[]){hidden, q, k, v}, (const char *[]){"hidden", "q", "k", "v"}, 4);
    if (status != RMLP_OK) return status;
    if (context->gpu != NULL) return cuda_pre_attention(fn, context, layer, plan, hidden, q, k, v, compact);
    const rmlp_model *m = context->model;
    if (compact)
        cpu_pre_attention_compact(&m->config, &m->weights.layers[layer], &context->ws, plan, hidden,
                                  plan->n_compact_padded, q, k, v);
    else
        cpu_pre_attention(&m->config, &m->weights.layers[layer], &context->ws, plan, hidden, q, k, v);
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_layer_pre_attention(rmlp_context *context, uint32_t layer, const rmlp_plan *plan,
                                                 const void *hidden, void *q, void *k, void *v) {
    static const char fn[] = "rmlp_layer_pre_attention";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK
               ? status
               : rmlp_guard_leave(context, layer_pre_attention(fn, context, layer, plan, hidden, q, k, v, false));
}

RMLP_EXPORT rmlp_status rmlp_layer_pre_attention_compact(rmlp_context *context, uint32_t layer, const rmlp_plan *plan,
                                                         const void *hidden, void *q, void *k, void *v) {
    static const char fn[] = "rmlp_layer_pre_attention_compact";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK
               ? status
               : rmlp_guard_leave(context, layer_pre_attention(fn, context, layer, plan, hidden, q, k, v, true));
}

static rmlp_status layer_post_attention(const char *fn, rmlp_context *context, uint32_t layer, const rmlp_plan *plan,
                                        const void *attn, void *hidden, bool compact) {
    rmlp_status status = rmlp_check_layer_call(fn, context, plan);
    if (status == RMLP_OK) status = check_space(fn, plan, compact);
    if (status == RMLP_OK) status = rmlp_check_layer(fn, context, layer);
    if (status == RMLP_OK)
        status = rmlp_check_buffers(fn, (const void *[]){attn, hidden}, (const char *[]){"attn", "hidden"}, 2);
    if (status != RMLP_OK) return status;
    if (context->gpu != NULL) return cuda_post_attention(fn, context, layer, plan, attn, hidden, compact);
    const rmlp_model *m = context->model;
    if (compact)
        cpu_post_attention_compact(&m->config, &m->weights.layers[layer], &context->ws, plan, attn, hidden);
    else
        cpu_post_attention(&m->config, &m->weights.layers[layer], &context->ws, plan, attn, hidden);
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_layer_post_attention(rmlp_context *context, uint32_t layer, const rmlp_plan *plan,
                                                  const void *attn, void *hidden) {
    static const char fn[] = "rmlp_layer_post_attention";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK
               ? status
               : rmlp_guard_leave(context, layer_post_attention(fn, context, layer, plan, attn, hidden, false));
}

RMLP_EXPORT rmlp_status rmlp_layer_post_attention_compact(rmlp_context *context, uint32_t layer,
                                                          const rmlp_plan *plan, const void *attn, void *hidden) {
    static const char fn[] = "rmlp_layer_post_attention_compact";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK
               ? status
               : rmlp_guard_leave(context, layer_post_attention(fn, context, layer, plan, attn, hidden, true));
}

static rmlp_status final_norm(const char *fn, rmlp_context *context, const rmlp_plan *plan, const void *hidden,
                              void *out, bool compact) {
    rmlp_status status = rmlp_check_layer_call(fn, context, plan);
    if (status == RMLP_OK)
        status = rmlp_check_buffers(fn, (const void *[]){hidden, out}, (const char *[]){"hidden", "out"}, 2);
    if (status != RMLP_OK) return status;
    if (context->gpu != NULL) return cuda_final_norm(fn, context, plan, hidden, out, compact);
    const rmlp_model *m = context->model;
    if (compact)
        cpu_final_norm_compact(&m->config, &m->weights, plan, hidden, out);
    else
        cpu_final_norm(&m->config, &m->weights, &context->ws, plan, hidden, out);
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_final_norm(rmlp_context *context, const rmlp_plan *plan, const void *hidden, void *out) {
    static const char fn[] = "rmlp_final_norm";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status : rmlp_guard_leave(context, final_norm(fn, context, plan, hidden, out, false));
}

RMLP_EXPORT rmlp_status rmlp_final_norm_compact(rmlp_context *context, const rmlp_plan *plan, const void *hidden,
                                                void *out) {
    static const char fn[] = "rmlp_final_norm_compact";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status : rmlp_guard_leave(context, final_norm(fn, context, plan, hidden, out, true));
}

static rmlp_status attend(const char *fn, rmlp_context *context, const rmlp_attention_args *args, bool compact) {
    rmlp_status status = rmlp_check_attention_args(fn, context, args, compact);
    if (status != RMLP_OK) return status;
    if (context->gpu != NULL) return cuda_attention(fn, context, args, compact);
    if (!compact) {
        cpu_attention(args->q, args->k, args->v, args->cu_seqlens, args->n_seqs, args->n_heads, args->n_kv_heads,
                      args->head_dim, args->scale, context->ws.scores, args->out);
        return RMLP_OK;
    }
    size_t qd = (size_t)args->n_heads * args->head_dim, kvd = (size_t)args->n_kv_heads * args->head_dim;
    cpu_attention_rows rows = {args->q, args->k, args->v, args->out, qd, kvd, kvd, qd, 0};
    cpu_compact_attention(&rows, args->qo_indptr, args->kv_indptr, args->kv_indices, args->n_seqs, args->n_heads,
                          args->n_kv_heads, args->head_dim, args->scale, context->ws.scores);
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_attention(rmlp_context *context, const rmlp_attention_args *args) {
    static const char fn[] = "rmlp_attention";
    rmlp_status status = rmlp_context_enter_nested(fn, context); /* from a host attention callback too */
    return status != RMLP_OK ? status : rmlp_guard_leave(context, attend(fn, context, args, false));
}

RMLP_EXPORT rmlp_status rmlp_attention_compact(rmlp_context *context, const rmlp_attention_args *args) {
    static const char fn[] = "rmlp_attention_compact";
    rmlp_status status = rmlp_context_enter_nested(fn, context); /* from a host attention callback too */
    return status != RMLP_OK ? status : rmlp_guard_leave(context, attend(fn, context, args, true));
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
    cpu_pool(hidden, hidden_size, NULL, cu_seqlens, n_seqs, pooling, normalize, out);
    return RMLP_OK;
}

/* The read-outs take batch rows (hidden (n_tokens, hidden_size) with the caller's cu_seqlens) or,
 * `compact`, compact rows read through the plan's scatter (hidden (n_compact_padded, hidden_size),
 * the plan's own cu_seqlens, which replace *cu_seqlens and *n_seqs; on CUDA the plan set on the
 * context). Every sequence must be non-empty. */
static rmlp_status check_readout(const char *fn, rmlp_context *context, bool compact, const rmlp_plan *plan,
                                 size_t n_tokens, const uint32_t **cu_seqlens, size_t *n_seqs) {
    rmlp_status status;
    if (compact) {
        status = rmlp_check_layer_call(fn, context, plan);
        if (status == RMLP_OK) *cu_seqlens = plan->cu_seqlens, *n_seqs = plan->n_seqs;
    } else {
        status = rmlp_check_cu_seqlens(fn, *cu_seqlens, *n_seqs, n_tokens);
    }
    return status == RMLP_OK ? rmlp_check_nonempty_seqs(fn, *cu_seqlens, *n_seqs) : status;
}

static rmlp_status score_pair(const char *fn, rmlp_context *context, const void *hidden, bool compact,
                              const rmlp_plan *plan, size_t n_tokens, const uint32_t *cu_seqlens, size_t n_seqs,
                              uint32_t token_a, uint32_t token_b, float *logits, float *prob_a) {
    const rmlp_model *m = context->model;
    if (!m->config.has_lm_head)
        return rmlp_fail(RMLP_ERR_UNSUPPORTED, fn, "the model has no LM head (no lm_head.weight, embeddings not tied)");
    if (token_a >= m->config.vocab_size || token_b >= m->config.vocab_size)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "token_a=%u or token_b=%u >= vocab_size=%u", token_a, token_b,
                         m->config.vocab_size);
    if (hidden == NULL || logits == NULL || prob_a == NULL)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "hidden, logits or prob_a is NULL");
    rmlp_status status = check_readout(fn, context, compact, plan, n_tokens, &cu_seqlens, &n_seqs);
    if (status != RMLP_OK) return status;
    if (context->gpu != NULL)
        return cuda_score_pair(fn, context, hidden, compact ? plan : NULL, cu_seqlens, n_seqs, token_a, token_b,
                               logits, prob_a);
    cpu_score_pair(hidden, m->config.hidden_size, compact ? plan->scatter : NULL, cu_seqlens, n_seqs,
                   m->weights.lm_head, token_a, token_b, logits, prob_a);
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_score_pair(rmlp_context *context, const void *hidden, size_t n_tokens,
                                        const uint32_t *cu_seqlens, size_t n_seqs, uint32_t token_a, uint32_t token_b,
                                        float *logits, float *prob_a) {
    static const char fn[] = "rmlp_score_pair";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status
                             : rmlp_guard_leave(context, score_pair(fn, context, hidden, false, NULL, n_tokens,
                                                                    cu_seqlens, n_seqs, token_a, token_b, logits,
                                                                    prob_a));
}

RMLP_EXPORT rmlp_status rmlp_score_pair_compact(rmlp_context *context, const rmlp_plan *plan, const void *hidden,
                                                uint32_t token_a, uint32_t token_b, float *logits, float *prob_a) {
    static const char fn[] = "rmlp_score_pair_compact";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status
                             : rmlp_guard_leave(context, score_pair(fn, context, hidden, true, plan, 0, NULL, 0,
                                                                    token_a, token_b, logits, prob_a));
}

static rmlp_status pool(const char *fn, rmlp_context *context, const void *hidden, bool compact, const rmlp_plan *plan,
                        size_t n_tokens, const uint32_t *cu_seqlens, size_t n_seqs, rmlp_pooling pooling,
                        bool normalize, float *out) {
    if (pooling != RMLP_POOLING_LAST && pooling != RMLP_POOLING_MEAN && pooling != RMLP_POOLING_FIRST)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "pooling=%d is not RMLP_POOLING_LAST, MEAN or FIRST", pooling);
    if (hidden == NULL || out == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "hidden or out is NULL");
    rmlp_status status = check_readout(fn, context, compact, plan, n_tokens, &cu_seqlens, &n_seqs);
    if (status != RMLP_OK) return status;
    if (context->gpu != NULL)
        return cuda_pool(fn, context, hidden, compact ? plan : NULL, cu_seqlens, n_seqs, pooling, normalize, out);
    cpu_pool(hidden, context->model->config.hidden_size, compact ? plan->scatter : NULL, cu_seqlens, n_seqs, pooling,
             normalize, out);
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_context_pool(rmlp_context *context, const void *hidden, size_t n_tokens,
                                          const uint32_t *cu_seqlens, size_t n_seqs, rmlp_pooling pooling,
                                          bool normalize, float *out) {
    static const char fn[] = "rmlp_context_pool";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status
                             : rmlp_guard_leave(context, pool(fn, context, hidden, false, NULL, n_tokens, cu_seqlens,
                                                              n_seqs, pooling, normalize, out));
}

RMLP_EXPORT rmlp_status rmlp_context_pool_compact(rmlp_context *context, const rmlp_plan *plan, const void *hidden,
                                                  rmlp_pooling pooling, bool normalize, float *out) {
    static const char fn[] = "rmlp_context_pool_compact";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status
                             : rmlp_guard_leave(context, pool(fn, context, hidden, true, plan, 0, NULL, 0, pooling,
                                                              normalize, out));
}

static rmlp_status cache_stats(const char *fn, rmlp_context *context, rmlp_cache_stats *out) {
    if (out == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "out is NULL");
    *out = context->cache != NULL ? kv_cache_stats(context->cache) : (rmlp_cache_stats){0};
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_context_cache_stats(rmlp_context *context, rmlp_cache_stats *out) {
    static const char fn[] = "rmlp_context_cache_stats";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status : rmlp_guard_leave(context, cache_stats(fn, context, out));
}

RMLP_EXPORT rmlp_status rmlp_context_cache_clear(rmlp_context *context) {
    static const char fn[] = "rmlp_context_cache_clear";
    rmlp_status status = rmlp_context_enter(fn, context);
    if (status != RMLP_OK) return status;
    if (context->gen != NULL) /* its sequences' rows are locked in the cache */
        return rmlp_guard_leave(context, rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "a "
                                "generation session is in progress: rmlp_generate_end it first"));
    if (context->cache != NULL) kv_pool_clear(context->cache->pool);
    return rmlp_guard_leave(context, RMLP_OK);
}

static rmlp_status set_stream(const char *fn, rmlp_context *context, void *stream) {
    return context->gpu != NULL ? cuda_set_stream(fn, context, stream) : RMLP_OK; /* the CPU has no stream */
}

RMLP_EXPORT rmlp_status rmlp_context_set_stream(rmlp_context *context, void *stream) {
    static const char fn[] = "rmlp_context_set_stream";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status : rmlp_guard_leave(context, set_stream(fn, context, stream));
}

static rmlp_status set_plan(const char *fn, rmlp_context *context, const rmlp_plan *plan) {
    rmlp_status status = rmlp_check_call(fn, context, plan);
    if (status != RMLP_OK) return status;
    return context->gpu != NULL ? cuda_set_plan(fn, context, plan) : RMLP_OK; /* the CPU reads the host plan */
}

RMLP_EXPORT rmlp_status rmlp_context_set_plan(rmlp_context *context, const rmlp_plan *plan) {
    static const char fn[] = "rmlp_context_set_plan";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status : rmlp_guard_leave(context, set_plan(fn, context, plan));
}
