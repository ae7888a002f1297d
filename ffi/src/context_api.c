/*
 * context_api.c: the exported context entry points: create a context of a model (its backend's
 * context, and a prefix cache when asked), free it, set its stream and plan (what a CUDA context
 * reads on the device), and its prefix cache's counters and clearing. Every call on a context
 * holds the context's guard (common/guard.h): a freed context or another kind of handle is
 * refused, and so is a context another thread is using (RMLP_ERR_BUSY); the exported entry point
 * enters the guard and runs the static function of the same name without the prefix.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cache/kv_cache.h"
#include "common/alloc.h"
#include "common/export.h"
#include "common/guard.h"
#include "common/status.h"
#include "context_checks.h"
#include "generate/session.h"
#include "model_internal.h"
#include "plan_checks.h"
#include "radix_mlp.h"
#include "validate.h"

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

/* The context parameters' checks that need no device, then what the model's backend cannot honour
 * (a CPU context refuses a gpu_attention other than auto). */
static rmlp_status check_context_params(const char *fn, const rmlp_model *model, const rmlp_context_params *p) {
    if (p->attention_space != RMLP_ATTENTION_FULL && p->attention_space != RMLP_ATTENTION_COMPACT &&
        p->attention_space != RMLP_ATTENTION_AUTO)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "params->attention_space=%d is not RMLP_ATTENTION_FULL, "
                         "COMPACT or AUTO", p->attention_space);
    if (p->gpu_attention != RMLP_GPU_ATTENTION_AUTO && p->gpu_attention != RMLP_GPU_ATTENTION_FLASHINFER &&
        p->gpu_attention != RMLP_GPU_ATTENTION_REFERENCE)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "params->gpu_attention=%d is not RMLP_GPU_ATTENTION_AUTO (0), "
                         "FLASHINFER (1) or REFERENCE (2)", p->gpu_attention);
    return model->backend->check_context_params(fn, p);
}

/* Frees what a context holds, made in full or in part. */
static void context_release(rmlp_context *context) {
    generate_session_free(context->gen);
    if (context->backend_cache != NULL) context->backend->cache_free(context->backend_cache);
    if (context->backend_ctx != NULL) context->backend->context_free(context->backend_ctx);
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
    const rmlp_backend *backend = model->backend;
    context->model = model, context->backend = backend;
    context->attention_space = read.attention_space;
    size_t max_compact = max_tokens + RMLP_MAX_PAD_MULTIPLE - 1;
    context->cap_tokens = max_tokens, context->cap_compact = max_compact;
    rmlp_status status = backend->context_create(fn, model->backend_model, &model->config, max_tokens, max_compact,
                                                 read.gpu_attention, &context->backend_ctx);
    /* the cache: its index here, its slots here (CPU, fp32) or the backend's (the model's dtype) */
    const char *failed_name = NULL;
    size_t failed_bytes = 0;
    size_t elem_bytes = model->dtype == RMLP_DTYPE_F32 ? 4 : 2;
    if (status == RMLP_OK && read.cache_bytes != 0 &&
        (context->cache = kv_cache_new(&model->config, read.cache_bytes, elem_bytes, backend->cache_on_host,
                                       max_tokens, max_compact, &failed_name, &failed_bytes)) == NULL)
        status = rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating the %s (%zu bytes) of a %llu-byte cache failed",
                           failed_name, failed_bytes, (unsigned long long)read.cache_bytes);
    if (status == RMLP_OK && context->cache != NULL)
        status = backend->cache_create(fn, context->backend_ctx, context->cache, &context->backend_cache);
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
    const rmlp_backend_cuda_part *cuda = context->backend->cuda; /* the CPU has no stream */
    return cuda != NULL ? cuda->set_stream(fn, context->backend_ctx, stream) : RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_context_set_stream(rmlp_context *context, void *stream) {
    static const char fn[] = "rmlp_context_set_stream";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status : rmlp_guard_leave(context, set_stream(fn, context, stream));
}

static rmlp_status set_plan(const char *fn, rmlp_context *context, const rmlp_plan *plan) {
    rmlp_status status = rmlp_check_plan(fn, context, plan, RMLP_PLAN_FITS | RMLP_PLAN_MAPS);
    if (status != RMLP_OK) return status;
    return context->backend->set_plan(fn, context->backend_ctx, plan); /* the CPU reads the host plan */
}

RMLP_EXPORT rmlp_status rmlp_context_set_plan(rmlp_context *context, const rmlp_plan *plan) {
    static const char fn[] = "rmlp_context_set_plan";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status : rmlp_guard_leave(context, set_plan(fn, context, plan));
}
