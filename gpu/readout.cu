/*
 * readout.cu: what a server takes back to the host after a forward on the device, without
 * copying the whole (n_tokens, hidden) output: per-sequence pooling (pool.cu's kernel writes
 * fp32 rows, only those are copied) and a yes/no reranker's two LM-head logits per sequence.
 * The sequence offsets are host memory, copied to the context's own device buffer; compact hidden
 * states are read through the set plan's device scatter. These are
 * the only CUDA calls that synchronise (the stream, before returning the host's results), so
 * they refuse to run while the stream is capturing a graph.
 */
#include <math.h>
#include <string.h>

#include "host.h"
#include "kernels.h"
#include "model.h"
#include "model/logit_softcap.h"

static rmlp_status prepare(const char *fn, gpu_context *ctx, const uint32_t *cu_seqlens, size_t n_seqs) {
    rmlp_status status = gpu_refuse_capture(fn, ctx->stream, "this call synchronises it to return host results");
    if (status != RMLP_OK) return status;
    if (n_seqs > ctx->cap_tokens)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "n_seqs=%zu but the context was created for %zu tokens", n_seqs,
                         ctx->cap_tokens);
    /* Pageable source: the copy is staged before this returns, so the host's array is free again. */
    GPU_TRY(fn, cudaMemcpyAsync(ctx->pool_cu, cu_seqlens, (n_seqs + 1) * sizeof(uint32_t), cudaMemcpyHostToDevice,
                                ctx->stream));
    return RMLP_OK;
}

extern "C" rmlp_status gpu_pool(const char *fn, gpu_context *ctx, const void *hidden, bool compact,
                                const uint32_t *cu_seqlens, size_t n_seqs, rmlp_pooling pooling, bool normalize,
                                float *out) {
    GPU_ON_DEVICE(fn, ctx->model->device);
    rmlp_status status = prepare(fn, ctx, cu_seqlens, n_seqs);
    if (status != RMLP_OK) return status;
    size_t dim = ctx->model->config.hidden_size;
    float *pooled = (float *)ctx->gu; /* fp32 scratch: (n_seqs, dim) fits, see gpu_context_create */
    cudaError_t error = gpu_pool_rows(hidden, dim, compact ? ctx->plan.scatter : NULL, ctx->pool_cu, n_seqs, pooling,
                                      pooled, ctx->model->dtype, ctx->stream);
    if (error != cudaSuccess) return gpu_fail(fn, "gpu_pool_rows", error);
    GPU_TRY(fn, cudaMemcpyAsync(out, pooled, n_seqs * dim * sizeof(float), cudaMemcpyDeviceToHost, ctx->stream));
    GPU_TRY(fn, cudaStreamSynchronize(ctx->stream));
    for (size_t s = 0; normalize && s < n_seqs; s++) { /* as cpu_pool: double sum, torch's 1e-12 floor */
        float *row = out + s * dim;
        double sum = 0.0;
        for (size_t i = 0; i < dim; i++) sum += (double)row[i] * row[i];
        double norm = sqrt(sum);
        float inv = (float)(1.0 / (norm > 1e-12 ? norm : 1e-12));
        for (size_t i = 0; i < dim; i++) row[i] *= inv;
    }
    return RMLP_OK;
}

extern "C" rmlp_status gpu_score_pair(const char *fn, gpu_context *ctx, const void *hidden, bool compact,
                                      const uint32_t *cu_seqlens, size_t n_seqs, uint32_t token_a, uint32_t token_b,
                                      float *logits, float *prob_a) {
    GPU_ON_DEVICE(fn, ctx->model->device);
    const gpu_model *m = ctx->model;
    rmlp_status status = prepare(fn, ctx, cu_seqlens, n_seqs);
    if (status != RMLP_OK) return status;
    size_t dim = m->config.hidden_size, es = gpu_dtype_bytes(m->dtype);
    float *scratch = (float *)ctx->gu;
    const char *lm = (const char *)m->lm_head;
    cudaError_t error = gpu_score_rows(hidden, dim, compact ? ctx->plan.scatter : NULL, ctx->pool_cu, n_seqs,
                                       lm + (size_t)token_a * dim * es,
                                       lm + (size_t)token_b * dim * es, scratch, m->dtype, ctx->stream);
    if (error != cudaSuccess) return gpu_fail(fn, "gpu_score_rows", error);
    GPU_TRY(fn, cudaMemcpyAsync(logits, scratch, 2 * n_seqs * sizeof(float), cudaMemcpyDeviceToHost, ctx->stream));
    GPU_TRY(fn, cudaStreamSynchronize(ctx->stream));
    logit_softcap(logits, 2 * n_seqs, m->config.final_logit_softcapping); /* Gemma 2: as the CPU's */
    for (size_t s = 0; s < n_seqs; s++) prob_a[s] = 1.0f / (1.0f + expf(logits[2 * s + 1] - logits[2 * s]));
    return RMLP_OK;
}
