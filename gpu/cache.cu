/*
 * cache.cu: the device side of a CUDA context's prefix KV cache (cache/kv_cache.h keeps the index
 * on the host): the slots' storage in the model's dtype (struct gpu_cache, model.h), new rows
 * through the model against the slots (shared with generation, decode.cu), and the cached
 * forward, the CUDA twin of cpu_forward_cached (cpu/forward.c): only the batch's new rows
 * are computed, with the layer calls of layer.cu run on them as if they were a
 * plan's compact rows; each layer puts their K and V into their slots and the compact attention
 * reads every key of a path from the slots (kv_indices = the path's slots, the reference kernel
 * of attention.cu), the final norm puts their hidden states into their slots, and the output is
 * gathered from the slots of every row, cached or computed.
 *
 * The batch's arrays come from the host index, so they are copied to the device with the batch
 * (pinned staging, one asynchronous copy): a cached forward waits on the host for the previous
 * one's copy, and cannot be captured in a CUDA graph.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashinfer_decode.h"
#include "host.h"
#include "kernels.h"
#include "model.h"

extern "C" void gpu_cache_free(gpu_cache *cache) {
    if (cache == NULL) return;
    gpu_device_guard guard(cache->device);
    gpu_staging_close(&cache->batch);
    if (cache->store != NULL) (void)cudaFree(cache->store);
    (void)cudaGetLastError();
    free(cache);
}

extern "C" rmlp_status gpu_cache_create(const char *fn, const gpu_context *ctx, uint32_t n_slots, gpu_cache **out) {
    *out = NULL;
    const gpu_model *m = ctx->model;
    GPU_ON_DEVICE(fn, m->device);
    const rmlp_model_config *c = &m->config;
    size_t es = gpu_dtype_bytes(m->dtype), kvd = (size_t)c->num_key_value_heads * c->head_dim;
    size_t layer_bytes = (size_t)n_slots * kvd * es * c->num_hidden_layers;
    size_t k_at = 0, v_at = (layer_bytes + 255) / 256 * 256, h_at = 2 * v_at;
    size_t total = h_at + (size_t)n_slots * c->hidden_size * es;
    gpu_cache *cache = (gpu_cache *)calloc(1, sizeof *cache);
    if (cache == NULL) return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating the prefix cache failed");
    cache->device = m->device, cache->n_slots = n_slots;
    cudaError_t error = total != 0 ? cudaMalloc(&cache->store, total) : cudaSuccess;
    if (error != cudaSuccess) {
        cache->store = NULL;
        gpu_cache_free(cache);
        return rmlp_fail(gpu_status_of(error), fn, "cudaMalloc of the prefix cache's %u slots (%zu bytes) on device %d "
                         "failed: %s (%s)", n_slots, total, m->device, cudaGetErrorName(error), cudaGetErrorString(error));
    }
    if (total != 0) {
        cache->k = (char *)cache->store + k_at, cache->v = (char *)cache->store + v_at;
        cache->hidden = (char *)cache->store + h_at;
    }
    rmlp_status status = gpu_staging_open(fn, "prefix cache batch arrays", 4 * ctx->cap_compact + 2 * ctx->cap_tokens + 1,
                                          &cache->batch);
    if (status != RMLP_OK) {
        gpu_cache_free(cache);
        return status;
    }
    *out = cache;
    return RMLP_OK;
}

#define LAUNCHED(what, layer, call)                                                                                    \
    do {                                                                                                               \
        cudaError_t launch_error_ = (call);                                                                            \
        if (launch_error_ != cudaSuccess) {                                                                            \
            char launch_what_[96];                                                                                     \
            snprintf(launch_what_, sizeof launch_what_, "%s (prefix cache, layer %ld)", what, (long)(layer));          \
            return gpu_fail(fn, launch_what_, launch_error_);                                                          \
        }                                                                                                              \
    } while (0)

extern "C" rmlp_status gpu_cache_run_rows(const char *fn, gpu_context *ctx, gpu_cache *cache, const gpu_cache_rows *r) {
    const gpu_model *m = ctx->model;
    const rmlp_model_config *c = &m->config;
    size_t rows = r->n_rows, h = c->hidden_size, es = gpu_dtype_bytes(m->dtype);
    size_t qd = (size_t)c->num_attention_heads * c->head_dim, kvd = (size_t)c->num_key_value_heads * c->head_dim;
    if (rows == 0) return RMLP_OK;
    cudaStream_t stream = ctx->stream;
    gpu_rows_swap swap(ctx, r->ids, r->pos, (uint32_t)rows);
    rmlp_status status = gpu_embed(fn, ctx, ctx->hidden);
    for (uint32_t layer = 0; status == RMLP_OK && layer < c->num_hidden_layers; layer++) {
        const layer_attention la = m->ext->layers[layer]; /* its scale, soft-cap, window (model/model_ext.h) */
        char *k = (char *)cache->k + (size_t)layer * cache->n_slots * kvd * es;
        char *v = (char *)cache->v + (size_t)layer * cache->n_slots * kvd * es;
        status = gpu_pre_attention_compact(fn, ctx, layer, ctx->hidden, ctx->q, ctx->k, ctx->v);
        if (status != RMLP_OK) break;
        LAUNCHED("gpu_put_rows (K into slots)", layer,
                 gpu_put_rows(k, kvd, r->slots, ctx->k, kvd, rows, kvd, m->dtype, stream));
        LAUNCHED("gpu_put_rows (V into slots)", layer,
                 gpu_put_rows(v, kvd, r->slots, ctx->v, kvd, rows, kvd, m->dtype, stream));
        gpu_compact_rows attn = {ctx->q, k, v, ctx->attn_c, qd, kvd, kvd, qd};
        if (r->fi_step != NULL) { /* a decode step: each row over its path, in chunks, merged per row (a model
                                   * whose every layer FlashInfer's decode takes: decode.cu) */
            LAUNCHED("gpu_fi_decode_run (FlashInfer's batch decode)", layer,
                     gpu_fi_decode_run(r->fi_step, &attn, la, stream));
        } else if (r->chains != NULL) { /* a decode step: partial states per chain, merged per row */
            LAUNCHED("gpu_chain_attention", layer,
                     gpu_chain_attention(&attn, r->chains, c->num_attention_heads, c->num_key_value_heads,
                                         c->head_dim, la, r->state, m->dtype, stream));
            LAUNCHED("gpu_merge_states", layer,
                     gpu_merge_states(r->state, r->row_indptr, r->row_members, rows, c->num_attention_heads,
                                      c->head_dim, ctx->attn_c, qd, m->dtype, stream));
        } else {
            LAUNCHED("gpu_compact_attention", layer,
                     gpu_compact_attention(&attn, r->qo_indptr, r->kv_indptr, r->kv_indices, r->n_groups, rows,
                                           c->num_attention_heads, c->num_key_value_heads, c->head_dim, la,
                                           m->dtype, stream));
        }
        status = gpu_post_attention_compact(fn, ctx, layer, ctx->attn_c, ctx->hidden);
    }
    if (status == RMLP_OK) status = gpu_final_norm_compact(fn, ctx, ctx->hidden, ctx->normed);
    if (status != RMLP_OK) return status;
    LAUNCHED("gpu_put_rows (hidden states into slots)", -1,
             gpu_put_rows(cache->hidden, h, r->slots, ctx->normed, h, rows, h, m->dtype, stream));
    return RMLP_OK;
}

extern "C" rmlp_status gpu_cache_check_capture(const char *fn, const gpu_context *ctx) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    GPU_TRY(fn, cudaStreamIsCapturing(ctx->stream, &capture));
    if (capture != cudaStreamCaptureStatusNone)
        return rmlp_fail(RMLP_ERR_UNSUPPORTED, fn, "the context's stream is capturing a graph, but work through the "
                         "prefix cache cannot be captured (which rows it computes depends on the cache's state)");
    return RMLP_OK;
}

extern "C" rmlp_status gpu_forward_cached(const char *fn, gpu_context *ctx, gpu_cache *cache,
                                          const gpu_cached_batch *b, void *out, forward_rows out_rows) {
    const gpu_model *m = ctx->model;
    GPU_ON_DEVICE(fn, m->device);
    rmlp_status status = gpu_cache_check_capture(fn, ctx);
    if (status != RMLP_OK) return status;
    const gpu_plan_state *set = &ctx->plan;
    size_t n_seqs = set->plan.n_seqs, n_tokens = set->plan.n_tokens, rows = b->n_computed;
    size_t h = m->config.hidden_size, es = gpu_dtype_bytes(m->dtype);
    /* staging layout: ids (rows) | pos (rows) | slots (rows) | path (n_tokens) | cqo (n_seqs + 1) | out (n_out) */
    size_t at_pos = rows, at_slots = 2 * rows, at_path = 3 * rows, at_cqo = at_path + n_tokens;
    size_t at_out = at_cqo + n_seqs + 1, words = at_out + b->n_out;
    if (words > cache->batch.words)
        return rmlp_fail(RMLP_ERR_INTERNAL, fn, "the prefix cache's batch arrays (%zu words) exceed its staging (%zu)",
                         words, cache->batch.words);
    status = gpu_staging_acquire(fn, &cache->batch);
    if (status != RMLP_OK) return status;
    uint32_t *s = cache->batch.host;
    memcpy(s, b->ids, rows * sizeof *s);
    memcpy(s + at_pos, b->pos, rows * sizeof *s);
    memcpy(s + at_slots, b->slots, rows * sizeof *s);
    memcpy(s + at_path, b->path, n_tokens * sizeof *s);
    memcpy(s + at_cqo, b->cqo_indptr, (n_seqs + 1) * sizeof *s);
    memcpy(s + at_out, b->out_slots, b->n_out * sizeof *s);
    status = gpu_staging_send(fn, &cache->batch, words, ctx->stream);
    if (status != RMLP_OK) return status;
    const uint32_t *d = cache->batch.device;
    /* attention: sequence s's computed rows over its path; kv_indptr is the set plan's cu_seqlens */
    gpu_cache_rows run = {d, d + at_pos, d + at_slots, d + at_cqo, set->cu, d + at_path, rows, n_seqs, NULL, NULL,
                          NULL, NULL, NULL};
    status = gpu_cache_run_rows(fn, ctx, cache, &run);
    /* the output, read from the slots: compact rows (padding zeroed), batch rows or the last rows;
     * none without out */
    if (status != RMLP_OK || out == NULL) return status;
    LAUNCHED("gpu_gather_rows (output from slots)", -1,
             gpu_gather_rows(out, cache->hidden, h, d + at_out, b->n_out, h, m->dtype, ctx->stream));
    if (out_rows == FORWARD_COMPACT_ROWS && set->plan.n_compact_padded > b->n_out)
        GPU_TRY(fn, cudaMemsetAsync((char *)out + b->n_out * h * es, 0, (set->plan.n_compact_padded - b->n_out) * h * es,
                                    ctx->stream));
    return RMLP_OK;
}
