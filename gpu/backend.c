/*
 * backend.c: the CUDA backend table (common/backend.h) over runner.h, in CUDA builds only. Device
 * selection and the "no device" status happen at load; after it, each call checks that its plan
 * is the one set on the context and that its buffers are device memory, then hands over to the
 * runner. A whole forward ends with the check of its output (nonfinite.h: counted, not a status:
 * the forward is asynchronous). A generation step's chains are packed here for the device.
 */
#include <stdlib.h>
#include <string.h>

#include "cache/kv_cache.h"
#include "common/alloc.h"
#include "common/backend.h"
#include "common/status.h"
#include "device.h"
#include "generate/chains.h"
#include "nonfinite.h"
#include "options.h"
#include "runner.h"

static rmlp_status device_count(const char *fn, int32_t *count) {
    int devices = 0;
    int error = rmlp_gpu_device_count(&devices);
    if (error != 0) {
        rmlp_status status = rmlp_gpu_error_is_no_device(error) ? RMLP_ERR_NO_DEVICE : RMLP_ERR_CUDA;
        return rmlp_fail(status, fn, "cudaGetDeviceCount failed: %s (%s)", rmlp_gpu_error_name(error),
                         rmlp_gpu_error_string(error));
    }
    *count = devices;
    if (devices == 0) return rmlp_fail(RMLP_ERR_NO_DEVICE, fn, "cudaGetDeviceCount reports 0 devices");
    return RMLP_OK;
}

/* The dtype is one the device computes in, and device_index names a present device. */
static rmlp_status check_model_params(const char *fn, const rmlp_model_params *params) {
    if (params->dtype != RMLP_DTYPE_F32 && params->dtype != RMLP_DTYPE_F16 && params->dtype != RMLP_DTYPE_BF16)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "params->dtype=%d is not RMLP_DTYPE_F32, F16 or BF16",
                         params->dtype);
    if (params->cpu_weight_dtype != RMLP_DTYPE_F32)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "params->cpu_weight_dtype=%d applies to CPU models only: a CUDA "
                         "model holds its weights in params->dtype; leave it RMLP_DTYPE_F32", params->cpu_weight_dtype);
    if (params->cpu_bf16_gemm != RMLP_CPU_BF16_GEMM_AUTO)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "params->cpu_bf16_gemm=%d applies to CPU models only; leave it "
                         "RMLP_CPU_BF16_GEMM_AUTO", params->cpu_bf16_gemm);
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

static rmlp_status model_load(const char *fn, const struct checkpoint *ckpt, rmlp_model_config *config,
                              const struct model_ext *ext, const rmlp_model_params *params, void **out) {
    gpu_model *model = NULL;
    rmlp_status status = gpu_model_load(fn, ckpt, config, ext, params->device_index, params->dtype, &model);
    *out = model;
    return status;
}

static rmlp_status model_bind(const char *fn, rmlp_model_config *config, const struct model_ext *ext,
                              const rmlp_weight_binding *tensors, size_t n_tensors, const rmlp_model_params *params,
                              void **out) {
    gpu_model *model = NULL;
    rmlp_status status =
        gpu_model_bind(fn, config, ext, tensors, n_tensors, params->device_index, params->dtype, &model);
    *out = model;
    return status;
}

static void model_free(void *model, const rmlp_model_config *config) {
    (void)config;
    gpu_model_free(model);
}

static rmlp_status check_context_params(const char *fn, const rmlp_context_params *params) {
    (void)fn, (void)params; /* gpu_attention was checked; RADIX_MLP_GPU_* are read at creation */
    return RMLP_OK;
}

/* gpu_attention: rmlp_context_params::gpu_attention (checked), which RADIX_MLP_GPU_ATTENTION may
 * decide where it is auto; the other RADIX_MLP_GPU_* switches are read here too (options.h). */
static rmlp_status context_create(const char *fn, const void *model, const rmlp_model_config *config,
                                  size_t max_tokens, size_t max_compact, rmlp_gpu_attention gpu_attention, void **out) {
    (void)config;
    gpu_options options;
    gpu_context *ctx = NULL;
    rmlp_status status = gpu_options_read(fn, (gpu_attention_kernel)gpu_attention, &options);
    if (status == RMLP_OK) status = gpu_context_create(fn, model, max_tokens, max_compact, &options, &ctx);
    *out = ctx;
    return status;
}

static void context_free(void *ctx) { gpu_context_free(ctx); }

static rmlp_status set_stream(const char *fn, void *ctx, void *stream) {
    return gpu_context_set_stream(fn, ctx, stream);
}

static rmlp_status set_plan(const char *fn, void *ctx, const rmlp_plan *plan) {
    return gpu_context_set_plan(fn, ctx, plan);
}

/* The counters, and the non-finite output counter read from the device (synchronising the stream). */
static rmlp_status gpu_stats(const char *fn, void *ctx, rmlp_gpu_stats *out) {
    gpu_context_stats(ctx, out);
    return gpu_nonfinite_stats(fn, ctx, out);
}

static rmlp_status check_attention_dtype(const char *fn, rmlp_dtype dtype, rmlp_dtype model_dtype) {
    return dtype == model_dtype ? RMLP_OK
                                : rmlp_fail(RMLP_ERR_UNSUPPORTED, fn, "args->dtype=%d but the CUDA model's dtype is %d",
                                            dtype, model_dtype);
}

/* Each named buffer is device memory of the model's device. */
static rmlp_status check_device_buffers(const char *fn, const gpu_context *ctx, const void *const *buffers,
                                        const char *const *names, size_t n) {
    for (size_t i = 0; i < n; i++) {
        rmlp_status status = gpu_context_check_buffer(fn, ctx, names[i], buffers[i]);
        if (status != RMLP_OK) return status;
    }
    return RMLP_OK;
}

static rmlp_status embed(const char *fn, void *ctx, const rmlp_plan *plan, void *hidden) {
    rmlp_status status = gpu_context_check_plan(fn, ctx, plan, true);
    if (status == RMLP_OK)
        status = check_device_buffers(fn, ctx, (const void *[]){hidden}, (const char *[]){"hidden"}, 1);
    return status == RMLP_OK ? gpu_embed(fn, ctx, hidden) : status;
}

static rmlp_status pre_attention(const char *fn, void *ctx, uint32_t layer, const rmlp_plan *plan, const void *hidden,
                                 void *q, void *k, void *v, bool compact) {
    rmlp_status status = gpu_context_check_plan(fn, ctx, plan, false);
    if (status == RMLP_OK)
        status = check_device_buffers(fn, ctx, (const void *[]){hidden, q, k, v},
                                      (const char *[]){"hidden", "q", "k", "v"}, 4);
    if (status != RMLP_OK) return status;
    return compact ? gpu_pre_attention_compact(fn, ctx, layer, hidden, q, k, v)
                   : gpu_pre_attention(fn, ctx, layer, hidden, q, k, v);
}

static rmlp_status post_attention(const char *fn, void *ctx, uint32_t layer, const rmlp_plan *plan, const void *attn,
                                  void *hidden, bool compact) {
    rmlp_status status = gpu_context_check_plan(fn, ctx, plan, false);
    if (status == RMLP_OK)
        status = check_device_buffers(fn, ctx, (const void *[]){attn, hidden}, (const char *[]){"attn", "hidden"}, 2);
    if (status != RMLP_OK) return status;
    return compact ? gpu_post_attention_compact(fn, ctx, layer, attn, hidden)
                   : gpu_post_attention(fn, ctx, layer, attn, hidden);
}

static rmlp_status final_norm(const char *fn, void *ctx, const rmlp_plan *plan, const void *hidden, void *out,
                              bool compact) {
    rmlp_status status = gpu_context_check_plan(fn, ctx, plan, false);
    if (status == RMLP_OK)
        status = check_device_buffers(fn, ctx, (const void *[]){hidden, out}, (const char *[]){"hidden", "out"}, 2);
    if (status != RMLP_OK) return status;
    return compact ? gpu_final_norm_compact(fn, ctx, hidden, out) : gpu_final_norm(fn, ctx, hidden, out);
}

static rmlp_status attention(const char *fn, void *ctx, const rmlp_attention_args *args, bool compact) {
    if (args->n_tokens == 0) return RMLP_OK;
    rmlp_status status = check_device_buffers(fn, ctx, (const void *[]){args->q, args->k, args->v, args->out},
                                              (const char *[]){"args->q", "args->k", "args->v", "args->out"}, 4);
    if (status != RMLP_OK) return status;
    if (!compact) {
        if (args->cu_seqlens_device != NULL)
            status = check_device_buffers(fn, ctx, (const void *[]){args->cu_seqlens_device},
                                          (const char *[]){"args->cu_seqlens_device"}, 1);
        return status == RMLP_OK ? gpu_attention_run(fn, ctx, args) : status;
    }
    if (args->qo_indptr_device != NULL && args->kv_indptr_device != NULL && args->kv_indices_device != NULL)
        status = check_device_buffers(fn, ctx,
                                      (const void *[]){args->qo_indptr_device, args->kv_indptr_device,
                                                       args->kv_indices_device},
                                      (const char *[]){"args->qo_indptr_device", "args->kv_indptr_device",
                                                       "args->kv_indices_device"},
                                      3);
    return status == RMLP_OK ? gpu_attention_compact_run(fn, ctx, args) : status;
}

static rmlp_status forward(const char *fn, void *ctx, const rmlp_plan *plan, rmlp_attention_space space,
                           rmlp_attention_fn attention_fn, void *user_data, void *out, forward_rows rows) {
    rmlp_status status = gpu_context_check_plan(fn, ctx, plan, true);
    if (status == RMLP_OK) status = check_device_buffers(fn, ctx, (const void *[]){out}, (const char *[]){"out"}, 1);
    if (status == RMLP_OK) status = gpu_forward(fn, ctx, space, attention_fn, user_data, out, rows);
    return status == RMLP_OK ? gpu_check_output(fn, ctx, out, forward_rows_count(plan, rows)) : status;
}

static rmlp_status cache_create(const char *fn, void *ctx, kv_cache *cache, void **out) {
    gpu_cache *side = NULL;
    rmlp_status status = gpu_cache_create(fn, ctx, cache->n_slots, &side);
    *out = side;
    return status;
}

static void cache_free(void *cache_side) { gpu_cache_free(cache_side); }

/* out NULL: no output (a generation's prefill: the rows are cached). */
static rmlp_status forward_cached(const char *fn, void *ctx, void *cache_side, kv_cache *c, const rmlp_plan *plan,
                                  void *out, forward_rows rows, bool *bypassed) {
    *bypassed = false;
    rmlp_status status = gpu_context_check_plan(fn, ctx, plan, true);
    if (status == RMLP_OK && out != NULL)
        status = check_device_buffers(fn, ctx, (const void *[]){out}, (const char *[]){"out"}, 1);
    if (status != RMLP_OK) return status;
    if (kv_cache_begin(c, plan, rows) != 0) {
        *bypassed = true;
        return RMLP_OK;
    }
    gpu_cached_batch batch = {c->ids, c->pos, c->slots, c->path, c->batch.cqo_indptr, c->out_slots,
                              c->batch.n_computed, c->n_out};
    status = gpu_forward_cached(fn, ctx, cache_side, &batch, out, rows);
    kv_pool_end(c->pool, plan, &c->batch, status == RMLP_OK); /* after a failure its new rows hold nothing */
    if (status != RMLP_OK || out == NULL) return status;
    return gpu_check_output(fn, ctx, out, forward_rows_count(plan, rows));
}

/* A session's device arrays (decode.cu) and its chains packed for them (gpu_decode_chains):
 * key_indptr and member_indptr (decode_max_chains + 1), keys (n_seqs, max_path), row_indptr
 * (n_seqs + 1), row_members (decode_max_members). */
typedef struct cuda_generation {
    uint32_t *key_indptr, *member_indptr, *keys, *row_indptr, *row_members;
    uint32_t *chain_depth; /* (chains) each chain's first key's position in its queries' paths */
    gpu_decode *dev;
} cuda_generation;

static void generate_close(void *state) {
    cuda_generation *s = state;
    if (s == NULL) return;
    void *arrays[] = {s->key_indptr, s->member_indptr, s->keys, s->row_indptr, s->row_members, s->chain_depth};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) free(arrays[i]);
    gpu_decode_free(s->dev);
    free(s);
}

static rmlp_status generate_open(const char *fn, void *ctx, const rmlp_model_config *config, size_t n_seqs,
                                 size_t max_path, void **out) {
    (void)config;
    *out = NULL;
    cuda_generation *s = rmlp_calloc(1, sizeof *s);
    if (s == NULL)
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating 'CUDA state' of the generation session (%zu bytes) "
                         "failed", sizeof *s);
    size_t u = sizeof(uint32_t);
    struct {
        uint32_t **at;
        size_t bytes;
        const char *name;
    } parts[] = {
        {&s->key_indptr, (decode_max_chains(n_seqs) + 1) * u, "key_indptr"},
        {&s->member_indptr, (decode_max_chains(n_seqs) + 1) * u, "member_indptr"},
        {&s->keys, n_seqs * max_path * u, "keys"},
        {&s->row_indptr, (n_seqs + 1) * u, "row_indptr"},
        {&s->row_members, decode_max_members(n_seqs, max_path) * u, "row_members"},
        {&s->chain_depth, decode_max_chains(n_seqs) * u, "chain_depth"},
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if ((*parts[i].at = rmlp_malloc_aligned(parts[i].bytes)) == NULL) {
            generate_close(s);
            return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating '%s' of the generation session (%zu bytes) "
                             "failed", parts[i].name, parts[i].bytes);
        }
    rmlp_status status =
        gpu_decode_create(fn, ctx, n_seqs, n_seqs * max_path, decode_max_members(n_seqs, max_path), &s->dev);
    if (status != RMLP_OK) {
        generate_close(s);
        return status;
    }
    *out = s;
    return RMLP_OK;
}

/* The cached forward on the device, no output needed. It reads the plan set on the context: begin
 * sets it itself, as rmlp_context_set_plan does, unless the host set this one already. Begin
 * synchronises and cannot be captured anyway, so nothing is lost by not asking the host, and a
 * host begins a session alike on the CPU and on CUDA. */
static rmlp_status generate_prefill(const char *fn, void *ctx, void *cache_side, kv_cache *cache, void *state,
                                    const rmlp_plan *plan, bool *skipped) {
    (void)state;
    *skipped = false;
    rmlp_status status = gpu_context_plan_is_set(ctx, plan) ? RMLP_OK : gpu_context_set_plan(fn, ctx, plan);
    return status == RMLP_OK ? forward_cached(fn, ctx, cache_side, cache, plan, NULL, FORWARD_COMPACT_ROWS, skipped) : status;
}

/* The chains packed for the device (gpu_decode_chains), with each row's memberships. */
static gpu_decode_chains pack_chains(cuda_generation *s, const rmlp_step_rows *rows) {
    size_t n_chains = rows->n_chains;
    uint32_t n_rows = rows->n_rows;
    s->key_indptr[0] = s->member_indptr[0] = 0;
    for (size_t c = 0; c < n_chains; c++) {
        const decode_chain *ch = &rows->chains[c];
        memcpy(s->keys + s->key_indptr[c], ch->keys, ch->n_keys * sizeof(uint32_t));
        s->key_indptr[c + 1] = s->key_indptr[c] + ch->n_keys;
        s->chain_depth[c] = ch->depth;
        s->member_indptr[c + 1] = ch->first + ch->count; /* a chain's members follow the previous chain's */
    }
    uint32_t n_members = s->member_indptr[n_chains];
    memset(s->row_indptr, 0, (n_rows + 1) * sizeof(uint32_t));
    for (uint32_t i = 0; i < n_members; i++) s->row_indptr[rows->members[i] + 1]++;
    for (uint32_t r = 0; r < n_rows; r++) s->row_indptr[r + 1] += s->row_indptr[r];
    for (uint32_t i = 0; i < n_members; i++) s->row_members[s->row_indptr[rows->members[i]]++] = i;
    for (uint32_t r = n_rows; r > 0; r--) s->row_indptr[r] = s->row_indptr[r - 1]; /* back to starts */
    s->row_indptr[0] = 0;
    return (gpu_decode_chains){s->key_indptr,  s->keys,        s->member_indptr, rows->members, s->row_indptr,
                               s->row_members, n_chains,      s->chain_depth,   rows->path_len};
}

static rmlp_status generate_rows(const char *fn, void *ctx, void *cache_side, kv_cache *cache, void *state,
                                 const rmlp_step_rows *rows, double *attention_ms) {
    (void)cache, (void)attention_ms; /* the step's attention is not timed apart on the device */
    cuda_generation *s = state;
    gpu_decode_chains chains = pack_chains(s, rows);
    return gpu_decode_rows(fn, ctx, cache_side, s->dev, rows->ids, rows->pos, rows->slots, rows->n_rows, &chains);
}

static rmlp_status generate_logits(const char *fn, void *ctx, void *cache_side, kv_cache *cache, void *state,
                                   const uint32_t *slots, size_t n, float *logits) {
    (void)cache;
    return gpu_decode_logits(fn, ctx, cache_side, ((cuda_generation *)state)->dev, slots, n, logits);
}

/* Compact read-outs read through the set plan's device scatter: compact_plan must be that plan. */
static rmlp_status check_readout(const char *fn, const gpu_context *ctx, const void *hidden,
                                 const rmlp_plan *compact_plan) {
    rmlp_status status = compact_plan != NULL ? gpu_context_check_plan(fn, ctx, compact_plan, false) : RMLP_OK;
    return status == RMLP_OK ? check_device_buffers(fn, ctx, (const void *[]){hidden}, (const char *[]){"hidden"}, 1)
                             : status;
}

static rmlp_status pool(const char *fn, void *ctx, const void *hidden, const rmlp_plan *compact_plan,
                        const uint32_t *cu_seqlens, size_t n_seqs, rmlp_pooling pooling, bool normalize, float *out) {
    rmlp_status status = check_readout(fn, ctx, hidden, compact_plan);
    return status == RMLP_OK
               ? gpu_pool(fn, ctx, hidden, compact_plan != NULL, cu_seqlens, n_seqs, pooling, normalize, out)
               : status;
}

static rmlp_status score_pair(const char *fn, void *ctx, const void *hidden, const rmlp_plan *compact_plan,
                              const uint32_t *cu_seqlens, size_t n_seqs, uint32_t token_a, uint32_t token_b,
                              float *logits, float *prob_a) {
    rmlp_status status = check_readout(fn, ctx, hidden, compact_plan);
    return status == RMLP_OK ? gpu_score_pair(fn, ctx, hidden, compact_plan != NULL, cu_seqlens, n_seqs, token_a,
                                              token_b, logits, prob_a)
                             : status;
}

static const rmlp_backend_cuda_part cuda_part = {
    .device_count = device_count,
    .model_bind = model_bind,
    .set_stream = set_stream,
    .gpu_stats = gpu_stats,
};

const rmlp_backend rmlp_backend_cuda = {
    .name = "cuda",
    .device = RMLP_DEVICE_CUDA,
#ifdef RMLP_WITH_FLASHINFER
    .build_flags = RMLP_BUILD_CUDA | RMLP_BUILD_FLASHINFER,
#else
    .build_flags = RMLP_BUILD_CUDA,
#endif
    .plan_on_device = true,
    .cache_on_host = false,
    .cpu = NULL,
    .cuda = &cuda_part,
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
