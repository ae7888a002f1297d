/*
 * model_cuda.c: the model entry points on a CUDA device (see model_cuda.h). Device selection
 * and the "no device" status happen here at load; after it, each call checks that its plan is
 * the one set on the context and that its buffers are device memory, then hands over to gpu/.
 * A whole forward ends with the check of its output (gpu/nonfinite.h: counted, not a status).
 */
#include <stdlib.h>
#include <string.h>

#include "model_cuda.h"

#include "../../model/audit.h"
#include "../../model/checkpoint.h"
#include "../../model/config.h"
#include "export.h"

#ifdef RMLP_WITH_CUDA

#include "../../cache/kv_cache.h"
#include "../../gpu/device.h"
#include "../../gpu/nonfinite.h"
#include "../../gpu/options.h"
#include "../../gpu/runner.h"

/* The dtype is one the device computes in, and device_index names a present device. */
static rmlp_status check_device(const char *fn, const rmlp_model_params *params) {
    if (params->dtype != RMLP_DTYPE_F32 && params->dtype != RMLP_DTYPE_F16 && params->dtype != RMLP_DTYPE_BF16)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "params->dtype=%d is not RMLP_DTYPE_F32, F16 or BF16",
                         params->dtype);
    int count = 0, error = rmlp_gpu_device_count(&count);
    if (error != 0)
        return rmlp_fail(rmlp_gpu_error_is_no_device(error) ? RMLP_ERR_NO_DEVICE : RMLP_ERR_CUDA, fn,
                         "params->device=RMLP_DEVICE_CUDA but no CUDA device is usable: cudaGetDeviceCount failed: "
                         "%s (%s)", rmlp_gpu_error_name(error), rmlp_gpu_error_string(error));
    if (count == 0)
        return rmlp_fail(RMLP_ERR_NO_DEVICE, fn,
                         "params->device=RMLP_DEVICE_CUDA but cudaGetDeviceCount reports 0 devices");
    if (params->device_index < 0 || params->device_index >= count)
        return rmlp_fail(RMLP_ERR_NO_DEVICE, fn, "params->device_index=%d but there are %d CUDA device(s)",
                         params->device_index, count);
    return RMLP_OK;
}

rmlp_status cuda_model_load(const char *fn, const char *path, const rmlp_model_params *params, rmlp_model *model) {
    rmlp_status status = check_device(fn, params);
    if (status != RMLP_OK) return status;
    checkpoint *ckpt = NULL;
    char *report = NULL;
    status = checkpoint_open(path, &ckpt);
    if (status == RMLP_OK) status = config_read(checkpoint_config_path(ckpt), &model->config);
    if (status == RMLP_OK) status = audit_checkpoint(ckpt, &model->config, !params->skip_finite_check, &report);
    if (status == RMLP_OK)
        status = gpu_model_load(fn, ckpt, &model->config, params->device_index, params->dtype, &model->gpu);
    checkpoint_close(ckpt);
    if (status != RMLP_OK) {
        free(report);
        return status;
    }
    model->device = RMLP_DEVICE_CUDA, model->dtype = params->dtype, model->load_report = report;
    return RMLP_OK;
}

rmlp_status cuda_model_bind(const char *fn, const rmlp_model_config *config, const rmlp_weight_binding *tensors,
                            size_t n_tensors, const rmlp_model_params *params, rmlp_model *model) {
    rmlp_status status = check_device(fn, params);
    if (status != RMLP_OK) return status;
    model->config = *config;
    status = gpu_model_bind(fn, &model->config, tensors, n_tensors, params->device_index, params->dtype, &model->gpu);
    if (status == RMLP_OK) model->device = RMLP_DEVICE_CUDA, model->dtype = params->dtype;
    return status;
}

void cuda_model_free(rmlp_model *model) { gpu_model_free(model->gpu); }

rmlp_status cuda_context_create(const char *fn, rmlp_context *context, size_t max_tokens, size_t max_compact,
                                rmlp_gpu_attention gpu_attention) {
    context->ws.cap_tokens = max_tokens;
    context->ws.cap_compact = max_compact;
    gpu_options options;
    rmlp_status status = gpu_options_read(fn, (gpu_attention_kernel)gpu_attention, &options);
    if (status != RMLP_OK) return status;
    return gpu_context_create(fn, context->model->gpu, max_tokens, max_compact, &options, &context->gpu);
}

void cuda_context_free(rmlp_context *context) { gpu_context_free(context->gpu); }

rmlp_status cuda_set_stream(const char *fn, rmlp_context *context, void *stream) {
    return gpu_context_set_stream(fn, context->gpu, stream);
}

rmlp_status cuda_set_plan(const char *fn, rmlp_context *context, const rmlp_plan *plan) {
    return gpu_context_set_plan(fn, context->gpu, plan);
}

/* Each named buffer is device memory of the model's device. */
static rmlp_status check_device_buffers(const char *fn, const rmlp_context *context, const void *const *buffers,
                                        const char *const *names, size_t n) {
    for (size_t i = 0; i < n; i++) {
        rmlp_status status = gpu_context_check_buffer(fn, context->gpu, names[i], buffers[i]);
        if (status != RMLP_OK) return status;
    }
    return RMLP_OK;
}

rmlp_status cuda_embed(const char *fn, rmlp_context *context, const rmlp_plan *plan, void *hidden) {
    rmlp_status status = gpu_context_check_plan(fn, context->gpu, plan, true);
    if (status == RMLP_OK)
        status = check_device_buffers(fn, context, (const void *[]){hidden}, (const char *[]){"hidden"}, 1);
    return status == RMLP_OK ? gpu_embed(fn, context->gpu, hidden) : status;
}

rmlp_status cuda_pre_attention(const char *fn, rmlp_context *context, uint32_t layer, const rmlp_plan *plan,
                               const void *hidden, void *q, void *k, void *v, bool compact) {
    rmlp_status status = gpu_context_check_plan(fn, context->gpu, plan, false);
    if (status == RMLP_OK)
        status = check_device_buffers(fn, context, (const void *[]){hidden, q, k, v},
                                      (const char *[]){"hidden", "q", "k", "v"}, 4);
    if (status != RMLP_OK) return status;
    return compact ? gpu_pre_attention_compact(fn, context->gpu, layer, hidden, q, k, v)
                   : gpu_pre_attention(fn, context->gpu, layer, hidden, q, k, v);
}

rmlp_status cuda_post_attention(const char *fn, rmlp_context *context, uint32_t layer, const rmlp_plan *plan,
                                const void *attn, void *hidden, bool compact) {
    rmlp_status status = gpu_context_check_plan(fn, context->gpu, plan, false);
    if (status == RMLP_OK)
        status = check_device_buffers(fn, context, (const void *[]){attn, hidden}, (const char *[]){"attn", "hidden"},
                                      2);
    if (status != RMLP_OK) return status;
    return compact ? gpu_post_attention_compact(fn, context->gpu, layer, attn, hidden)
                   : gpu_post_attention(fn, context->gpu, layer, attn, hidden);
}

rmlp_status cuda_final_norm(const char *fn, rmlp_context *context, const rmlp_plan *plan, const void *hidden,
                            void *out, bool compact) {
    rmlp_status status = gpu_context_check_plan(fn, context->gpu, plan, false);
    if (status == RMLP_OK)
        status = check_device_buffers(fn, context, (const void *[]){hidden, out}, (const char *[]){"hidden", "out"}, 2);
    if (status != RMLP_OK) return status;
    return compact ? gpu_final_norm_compact(fn, context->gpu, hidden, out) : gpu_final_norm(fn, context->gpu, hidden, out);
}

rmlp_status cuda_attention(const char *fn, rmlp_context *context, const rmlp_attention_args *args, bool compact) {
    if (args->n_tokens == 0) return RMLP_OK;
    rmlp_status status = check_device_buffers(fn, context, (const void *[]){args->q, args->k, args->v, args->out},
                                              (const char *[]){"args->q", "args->k", "args->v", "args->out"}, 4);
    if (status != RMLP_OK) return status;
    if (!compact) {
        if (args->cu_seqlens_device != NULL)
            status = check_device_buffers(fn, context, (const void *[]){args->cu_seqlens_device},
                                          (const char *[]){"args->cu_seqlens_device"}, 1);
        return status == RMLP_OK ? gpu_attention_run(fn, context->gpu, args) : status;
    }
    if (args->qo_indptr_device != NULL && args->kv_indptr_device != NULL && args->kv_indices_device != NULL)
        status = check_device_buffers(fn, context,
                                      (const void *[]){args->qo_indptr_device, args->kv_indptr_device,
                                                       args->kv_indices_device},
                                      (const char *[]){"args->qo_indptr_device", "args->kv_indptr_device",
                                                       "args->kv_indices_device"},
                                      3);
    return status == RMLP_OK ? gpu_attention_compact_run(fn, context->gpu, args) : status;
}

rmlp_status cuda_forward(const char *fn, rmlp_context *context, const rmlp_plan *plan, rmlp_attention_space space,
                         rmlp_attention_fn attention, void *user_data, void *out, bool compact_out) {
    rmlp_status status = gpu_context_check_plan(fn, context->gpu, plan, true);
    if (status == RMLP_OK)
        status = check_device_buffers(fn, context, (const void *[]){out}, (const char *[]){"out"}, 1);
    if (status == RMLP_OK) status = gpu_forward(fn, context->gpu, space, attention, user_data, out, compact_out);
    return status == RMLP_OK ? gpu_check_output(fn, context->gpu, out, compact_out ? plan->n_compact : plan->n_tokens)
                             : status;
}

rmlp_status cuda_cache_create(const char *fn, rmlp_context *context) {
    return gpu_cache_create(fn, context->gpu, context->cache->n_slots, &context->gpu_cache);
}

void cuda_cache_free(rmlp_context *context) { gpu_cache_free(context->gpu_cache); }

rmlp_status cuda_forward_cached(const char *fn, rmlp_context *context, const rmlp_plan *plan, void *out,
                                bool compact_out, bool *bypassed) {
    *bypassed = false;
    rmlp_status status = gpu_context_check_plan(fn, context->gpu, plan, true);
    if (status == RMLP_OK && out != NULL)
        status = check_device_buffers(fn, context, (const void *[]){out}, (const char *[]){"out"}, 1);
    if (status != RMLP_OK) return status;
    kv_cache *c = context->cache;
    if (kv_cache_begin(c, plan, compact_out) != 0) {
        *bypassed = true;
        return RMLP_OK;
    }
    gpu_cached_batch batch = {c->ids, c->pos, c->slots, c->path, c->batch.cqo_indptr, c->out_slots,
                              c->batch.n_computed, c->n_out};
    status = gpu_forward_cached(fn, context->gpu, context->gpu_cache, &batch, out, compact_out);
    kv_pool_end(c->pool, plan, &c->batch, status == RMLP_OK); /* after a failure its new rows hold nothing */
    if (status != RMLP_OK || out == NULL) return status;
    return gpu_check_output(fn, context->gpu, out, compact_out ? plan->n_compact : plan->n_tokens);
}

rmlp_status cuda_generate_open(const char *fn, rmlp_context *context, size_t n_seqs, size_t key_words,
                               size_t max_members, struct gpu_decode **out) {
    return gpu_decode_create(fn, context->gpu, n_seqs, key_words, max_members, out);
}

void cuda_generate_close(struct gpu_decode *dec) { gpu_decode_free(dec); }

rmlp_status cuda_generate_rows(const char *fn, rmlp_context *context, struct gpu_decode *dec, const uint32_t *ids,
                               const uint32_t *pos, const uint32_t *slots, size_t n_rows,
                               const gpu_decode_chains *chains) {
    return gpu_decode_rows(fn, context->gpu, context->gpu_cache, dec, ids, pos, slots, n_rows, chains);
}

rmlp_status cuda_generate_logits(const char *fn, rmlp_context *context, struct gpu_decode *dec, const uint32_t *slots,
                                 size_t n, float *logits) {
    return gpu_decode_logits(fn, context->gpu, context->gpu_cache, dec, slots, n, logits);
}

/* Compact read-outs read through the set plan's device scatter: compact_plan must be that plan. */
static rmlp_status check_readout(const char *fn, rmlp_context *context, const void *hidden,
                                 const rmlp_plan *compact_plan) {
    rmlp_status status =
        compact_plan != NULL ? gpu_context_check_plan(fn, context->gpu, compact_plan, false) : RMLP_OK;
    return status == RMLP_OK
               ? check_device_buffers(fn, context, (const void *[]){hidden}, (const char *[]){"hidden"}, 1)
               : status;
}

rmlp_status cuda_pool(const char *fn, rmlp_context *context, const void *hidden, const rmlp_plan *compact_plan,
                      const uint32_t *cu_seqlens, size_t n_seqs, rmlp_pooling pooling, bool normalize, float *out) {
    rmlp_status status = check_readout(fn, context, hidden, compact_plan);
    return status == RMLP_OK ? gpu_pool(fn, context->gpu, hidden, compact_plan != NULL, cu_seqlens, n_seqs, pooling,
                                        normalize, out)
                             : status;
}

rmlp_status cuda_score_pair(const char *fn, rmlp_context *context, const void *hidden, const rmlp_plan *compact_plan,
                            const uint32_t *cu_seqlens, size_t n_seqs, uint32_t token_a, uint32_t token_b,
                            float *logits, float *prob_a) {
    rmlp_status status = check_readout(fn, context, hidden, compact_plan);
    return status == RMLP_OK ? gpu_score_pair(fn, context->gpu, hidden, compact_plan != NULL, cu_seqlens, n_seqs,
                                              token_a, token_b, logits, prob_a)
                             : status;
}

#else /* built without CUDA: no CUDA model can exist, so only load and bind are reachable */

static rmlp_status no_cuda(const char *fn) {
    return rmlp_fail(RMLP_ERR_UNSUPPORTED, fn,
                     "params->device=RMLP_DEVICE_CUDA but this libradix_mlp was built without CUDA "
                     "(-DRMLP_CUDA=OFF or no nvcc)");
}

rmlp_status cuda_model_load(const char *fn, const char *path, const rmlp_model_params *params, rmlp_model *model) {
    (void)path, (void)params, (void)model;
    return no_cuda(fn);
}

rmlp_status cuda_model_bind(const char *fn, const rmlp_model_config *config, const rmlp_weight_binding *tensors,
                            size_t n_tensors, const rmlp_model_params *params, rmlp_model *model) {
    (void)config, (void)tensors, (void)n_tensors, (void)params, (void)model;
    return no_cuda(fn);
}

void cuda_model_free(rmlp_model *model) { (void)model; }

rmlp_status cuda_context_create(const char *fn, rmlp_context *context, size_t max_tokens, size_t max_compact,
                                rmlp_gpu_attention gpu_attention) {
    (void)context, (void)max_tokens, (void)max_compact, (void)gpu_attention;
    return no_cuda(fn);
}

void cuda_context_free(rmlp_context *context) { (void)context; }

rmlp_status cuda_set_stream(const char *fn, rmlp_context *context, void *stream) {
    (void)context, (void)stream;
    return no_cuda(fn);
}

rmlp_status cuda_set_plan(const char *fn, rmlp_context *context, const rmlp_plan *plan) {
    (void)context, (void)plan;
    return no_cuda(fn);
}

rmlp_status cuda_embed(const char *fn, rmlp_context *context, const rmlp_plan *plan, void *hidden) {
    (void)context, (void)plan, (void)hidden;
    return no_cuda(fn);
}

rmlp_status cuda_pre_attention(const char *fn, rmlp_context *context, uint32_t layer, const rmlp_plan *plan,
                               const void *hidden, void *q, void *k, void *v, bool compact) {
    (void)context, (void)layer, (void)plan, (void)hidden, (void)q, (void)k, (void)v, (void)compact;
    return no_cuda(fn);
}

rmlp_status cuda_post_attention(const char *fn, rmlp_context *context, uint32_t layer, const rmlp_plan *plan,
                                const void *attn, void *hidden, bool compact) {
    (void)context, (void)layer, (void)plan, (void)attn, (void)hidden, (void)compact;
    return no_cuda(fn);
}

rmlp_status cuda_final_norm(const char *fn, rmlp_context *context, const rmlp_plan *plan, const void *hidden,
                            void *out, bool compact) {
    (void)context, (void)plan, (void)hidden, (void)out, (void)compact;
    return no_cuda(fn);
}

rmlp_status cuda_attention(const char *fn, rmlp_context *context, const rmlp_attention_args *args, bool compact) {
    (void)context, (void)args, (void)compact;
    return no_cuda(fn);
}

rmlp_status cuda_forward(const char *fn, rmlp_context *context, const rmlp_plan *plan, rmlp_attention_space space,
                         rmlp_attention_fn attention, void *user_data, void *out, bool compact_out) {
    (void)context, (void)plan, (void)space, (void)attention, (void)user_data, (void)out, (void)compact_out;
    return no_cuda(fn);
}

rmlp_status cuda_cache_create(const char *fn, rmlp_context *context) {
    (void)context;
    return no_cuda(fn);
}

void cuda_cache_free(rmlp_context *context) { (void)context; }

rmlp_status cuda_forward_cached(const char *fn, rmlp_context *context, const rmlp_plan *plan, void *out,
                                bool compact_out, bool *bypassed) {
    (void)context, (void)plan, (void)out, (void)compact_out;
    *bypassed = false;
    return no_cuda(fn);
}

rmlp_status cuda_generate_open(const char *fn, rmlp_context *context, size_t n_seqs, size_t key_words,
                               size_t max_members, struct gpu_decode **out) {
    (void)context, (void)n_seqs, (void)key_words, (void)max_members;
    *out = NULL;
    return no_cuda(fn);
}

void cuda_generate_close(struct gpu_decode *dec) { (void)dec; }

rmlp_status cuda_generate_rows(const char *fn, rmlp_context *context, struct gpu_decode *dec, const uint32_t *ids,
                               const uint32_t *pos, const uint32_t *slots, size_t n_rows,
                               const gpu_decode_chains *chains) {
    (void)context, (void)dec, (void)ids, (void)pos, (void)slots, (void)n_rows, (void)chains;
    return no_cuda(fn);
}

rmlp_status cuda_generate_logits(const char *fn, rmlp_context *context, struct gpu_decode *dec, const uint32_t *slots,
                                 size_t n, float *logits) {
    (void)context, (void)dec, (void)slots, (void)n, (void)logits;
    return no_cuda(fn);
}

rmlp_status cuda_pool(const char *fn, rmlp_context *context, const void *hidden, const rmlp_plan *compact_plan,
                      const uint32_t *cu_seqlens, size_t n_seqs, rmlp_pooling pooling, bool normalize, float *out) {
    (void)context, (void)hidden, (void)compact_plan, (void)cu_seqlens, (void)n_seqs, (void)pooling, (void)normalize,
        (void)out;
    return no_cuda(fn);
}

rmlp_status cuda_score_pair(const char *fn, rmlp_context *context, const void *hidden, const rmlp_plan *compact_plan,
                            const uint32_t *cu_seqlens, size_t n_seqs, uint32_t token_a, uint32_t token_b,
                            float *logits, float *prob_a) {
    (void)context, (void)hidden, (void)compact_plan, (void)cu_seqlens, (void)n_seqs, (void)token_a, (void)token_b,
        (void)logits, (void)prob_a;
    return no_cuda(fn);
}

#endif
