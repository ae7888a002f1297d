/*
 * context.cu: what a CUDA context holds and the per-batch setup. At creation, everything a
 * batch of up to max_tokens tokens needs is allocated at once — one device arena (activations
 * in the model's dtype, the plan's maps, the cuBLAS workspace), pinned staging for the maps, a
 * cuBLAS handle, two events, FlashInfer's plan workspace (gpu/flashinfer.h) — so no later call
 * allocates. rmlp_context_set_plan copies the host plan into the pinned staging (the host may
 * rebuild its plan right after) and from there to the device with one asynchronous copy on the
 * context's stream, and plans FlashInfer's work split for both attention layouts the same way;
 * the layer calls then check that the plan they are handed is that one. A split FlashInfer fails to
 * plan is no error: the batch runs on the next kernel (the reference kernel; FA2 where only the
 * Hopper planner failed), counted (rmlp_gpu_stats), and the first such error of a context is said in
 * rmlp_last_error() by the rmlp_context_set_plan that met it, which returns RMLP_OK.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "host.h"
#include "model.h"
#include "nonfinite.h"

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

extern "C" void gpu_context_free(gpu_context *ctx) {
    if (ctx == NULL) return;
    /* cudaFree and cudaFreeHost wait for the device to finish with the memory, so no stream
     * sync is needed (nor safe: the host may already have destroyed the stream it set). */
    gpu_device_guard guard(ctx->model->device);
    gpu_blas_destroy(ctx->blas);
    gpu_flashinfer_free(ctx->fi);
    if (ctx->staged_free != NULL) (void)cudaEventDestroy(ctx->staged_free);
    if (ctx->stream_switch != NULL) (void)cudaEventDestroy(ctx->stream_switch);
    if (ctx->staging != NULL) (void)cudaFreeHost(ctx->staging);
    if (ctx->arena != NULL) (void)cudaFree(ctx->arena);
    (void)cudaGetLastError();
    free(ctx);
}

extern "C" rmlp_status gpu_context_create(const char *fn, const gpu_model *model, size_t max_tokens,
                                          size_t max_compact, const gpu_options *options, gpu_context **out) {
    *out = NULL;
    GPU_ON_DEVICE(fn, model->device);
    const rmlp_model_config *c = &model->config;
    size_t es = gpu_dtype_bytes(model->dtype), h = c->hidden_size, inter = c->intermediate_size;
    size_t qd = (size_t)c->num_attention_heads * c->head_dim, kvd = (size_t)c->num_key_value_heads * c->head_dim;
    gpu_context *ctx = (gpu_context *)calloc(1, sizeof *ctx);
    if (ctx == NULL) return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating the context failed");
    ctx->model = model;
    ctx->options = *options;
    ctx->cap_tokens = max_tokens;
    ctx->cap_compact = max_compact;
    ctx->maps_words = 3 * max_compact + 3 * max_tokens + 2;
    size_t rows = max_compact > max_tokens ? max_compact : max_tokens; /* of q, k, v, attn */
    /* The read-outs' fp32 scratch lives in gu: pooled rows (n_seqs <= max_tokens) and 2 logits each. */
    size_t pooled_bytes = (max_tokens * h + 2 * max_tokens) * sizeof(float);
    ctx->gu_bytes = max_compact * 2 * inter * es > pooled_bytes ? max_compact * 2 * inter * es : pooled_bytes;

    struct part {
        void **at;
        size_t bytes;
    } parts[] = {
        {&ctx->blas_workspace, GPU_BLAS_WORKSPACE_BYTES},
        {&ctx->normed, max_compact * h * es},
        {&ctx->qkv, max_compact * (qd + 2 * kvd) * es},
        {&ctx->attn_c, max_compact * qd * es},
        {&ctx->gu, ctx->gu_bytes},
        {&ctx->act, max_compact * inter * es},
        {&ctx->hidden, max_compact * h * es},
        /* batch rows, or every compact row (padding included) in compact space */
        {&ctx->q, rows * qd * es},
        {&ctx->attn, rows * qd * es},
        {&ctx->k, rows * kvd * es},
        {&ctx->v, rows * kvd * es},
        {(void **)&ctx->maps, ctx->maps_words * sizeof(uint32_t)},
        {(void **)&ctx->pool_cu, (max_tokens + 1) * sizeof(uint32_t)},
        {(void **)&ctx->nonfinite, sizeof(gpu_nonfinite)}, /* zeroed below with the rest */
    };
    size_t total = 0;
    for (const part &p : parts) total = round_up(total, 256) + p.bytes;
    cudaError_t error = cudaMalloc(&ctx->arena, total);
    if (error != cudaSuccess) {
        ctx->arena = NULL;
        gpu_context_free(ctx);
        (void)cudaGetLastError();
        return rmlp_fail(gpu_status_of(error), fn,
                         "cudaMalloc of the %zu-byte workspace for %zu tokens on device %d failed: %s (%s)", total,
                         max_tokens, model->device, cudaGetErrorName(error), cudaGetErrorString(error));
    }
    size_t offset = 0;
    for (const part &p : parts) {
        offset = round_up(offset, 256);
        *p.at = (char *)ctx->arena + offset;
        offset += p.bytes;
    }
    rmlp_status status = RMLP_OK;
    error = cudaHostAlloc((void **)&ctx->staging, ctx->maps_words * sizeof(uint32_t), cudaHostAllocDefault);
    if (error != cudaSuccess) ctx->staging = NULL, status = gpu_fail(fn, "cudaHostAlloc (plan staging)", error);
    if (status == RMLP_OK && (error = cudaEventCreateWithFlags(&ctx->staged_free, cudaEventDisableTiming)) != cudaSuccess)
        ctx->staged_free = NULL, status = gpu_fail(fn, "cudaEventCreateWithFlags", error);
    if (status == RMLP_OK &&
        (error = cudaEventCreateWithFlags(&ctx->stream_switch, cudaEventDisableTiming)) != cudaSuccess)
        ctx->stream_switch = NULL, status = gpu_fail(fn, "cudaEventCreateWithFlags", error);
    /* Zeroed once, so even a read of rows no plan wrote sees numbers (never done by the layer). */
    if (status == RMLP_OK && (error = cudaMemset(ctx->arena, 0, total)) != cudaSuccess)
        status = gpu_fail(fn, "cudaMemset (workspace)", error);
    if (status == RMLP_OK)
        status = gpu_blas_create(fn, ctx->stream, ctx->blas_workspace, GPU_BLAS_WORKSPACE_BYTES, &ctx->blas);
    /* at most max_tokens sequences, of up to `rows` rows in either layout; required (refused, saying
     * why, where there is none) when asked for by name */
    const char *setting = options->attention != GPU_ATTENTION_FLASHINFER ? NULL
                          : options->attention_from_env ? "RADIX_MLP_GPU_ATTENTION=flashinfer"
                                                         : "params->gpu_attention=RMLP_GPU_ATTENTION_FLASHINFER";
    if (status == RMLP_OK && options->attention != GPU_ATTENTION_REFERENCE)
        status = gpu_flashinfer_create(fn, model->dtype, c->num_attention_heads, c->num_key_value_heads, c->head_dim,
                                       rows, max_tokens, setting, options->flashinfer_sm90, &ctx->fi);
    if (status == RMLP_OK && (error = cudaDeviceSynchronize()) != cudaSuccess)
        status = gpu_fail(fn, "cudaDeviceSynchronize (after setting up the context)", error);
    if (status != RMLP_OK) {
        gpu_context_free(ctx);
        return status;
    }
    *out = ctx;
    return RMLP_OK;
}

/* Is the context's stream capturing a graph? (Errors count as "yes": the caller then refuses.) */
static bool capturing(const gpu_context *ctx) {
    cudaStreamCaptureStatus state = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(ctx->stream, &state) != cudaSuccess) {
        (void)cudaGetLastError();
        return true;
    }
    return state != cudaStreamCaptureStatusNone;
}

extern "C" rmlp_status gpu_context_set_stream(const char *fn, gpu_context *ctx, void *stream) {
    GPU_ON_DEVICE(fn, ctx->model->device);
    cudaStream_t next = (cudaStream_t)stream;
    if (next == ctx->stream) return RMLP_OK;
    /* Whatever was enqueued on the old stream (a plan copy, a forward) comes before the new
     * stream's work: an event, not a host wait. */
    GPU_TRY(fn, cudaEventRecord(ctx->stream_switch, ctx->stream));
    GPU_TRY(fn, cudaStreamWaitEvent(next, ctx->stream_switch, 0));
    rmlp_status status = gpu_blas_set_stream(fn, ctx->blas, next, ctx->blas_workspace, GPU_BLAS_WORKSPACE_BYTES);
    if (status != RMLP_OK) return status;
    ctx->stream = next;
    return RMLP_OK;
}

extern "C" rmlp_status gpu_context_set_plan(const char *fn, gpu_context *ctx, const rmlp_plan *plan) {
    GPU_ON_DEVICE(fn, ctx->model->device);
    if (plan->n_seqs > ctx->cap_tokens)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "plan has %u sequences but the context was created for %zu "
                         "tokens (a CUDA context holds at most max_tokens sequences)", plan->n_seqs, ctx->cap_tokens);
    if (capturing(ctx))
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                         "the context's stream is capturing a graph: set the plan before the capture (the copy waits "
                         "on the host for the staging buffer, which a capture cannot do)");
    /* Every row its own compact row: the maps can only be the identity (fold_gather is strictly
     * increasing), and the layer skips their copies; so whether it does is decided by the counts,
     * like every other shape a captured graph holds. */
    bool identity = plan->n_compact == plan->n_tokens && plan->n_compact_padded == plan->n_tokens;
    for (uint32_t i = 0; identity && i < plan->n_tokens; i++)
        if (plan->fold_gather[i] != i || plan->scatter[i] != i)
            return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                             "plan->fold_gather[%u]=%u, scatter[%u]=%u, but n_compact == n_tokens == %u: with every "
                             "row distinct both maps are the identity", i, plan->fold_gather[i], i, plan->scatter[i],
                             plan->n_tokens);
    /* The previous plan's copy must have left the staging buffer before it is overwritten. */
    if (ctx->staged_pending) GPU_TRY(fn, cudaEventSynchronize(ctx->staged_free));
    ctx->staged_pending = false;
    ctx->plan.set = false;
    gpu_flashinfer_unplan(ctx->fi);
    size_t nc = plan->n_compact_padded, nt = plan->n_tokens, ns = plan->n_seqs;
    uint32_t *s = ctx->staging;
    /* Layout: fold (nc) | scatter (nt) | ids (nc) | pos (nc) | cu (ns + 1) | qo_indptr (ns + 1). */
    size_t at_fold = 0, at_scatter = nc, at_ids = nc + nt, at_pos = 2 * nc + nt, at_cu = 3 * nc + nt;
    size_t at_qo = at_cu + ns + 1, words = at_qo + (plan->qo_indptr != NULL ? ns + 1 : 0);
    if (nc) memcpy(s + at_fold, plan->fold_gather, nc * sizeof *s);
    if (nt) memcpy(s + at_scatter, plan->scatter, nt * sizeof *s);
    if (nc) memcpy(s + at_ids, plan->compact_input_ids, nc * sizeof *s);
    if (nc) memcpy(s + at_pos, plan->compact_position_ids, nc * sizeof *s);
    memcpy(s + at_cu, plan->cu_seqlens, (ns + 1) * sizeof *s);
    if (plan->qo_indptr != NULL) memcpy(s + at_qo, plan->qo_indptr, (ns + 1) * sizeof *s);
    GPU_TRY(fn, cudaMemcpyAsync(ctx->maps, s, words * sizeof *s, cudaMemcpyHostToDevice, ctx->stream));
    /* FlashInfer's work split for both layouts, planned here so the forward only launches: its
     * pinned staging is covered by the same event (gpu/flashinfer.h). */
    char errors[2][384];
    gpu_fi_reason reasons[2][2] = {{GPU_FI_UNPLANNED, GPU_FI_UNPLANNED}, {GPU_FI_UNPLANNED, GPU_FI_UNPLANNED}};
    reasons[0][0] = gpu_flashinfer_plan(ctx->fi, GPU_FI_FULL, plan->cu_seqlens, plan->cu_seqlens, ns, ctx->stream,
                                        errors[0], sizeof errors[0], &reasons[0][1]);
    if (plan->qo_indptr != NULL)
        reasons[1][0] = gpu_flashinfer_plan(ctx->fi, GPU_FI_COMPACT, plan->qo_indptr, plan->cu_seqlens, ns,
                                            ctx->stream, errors[1], sizeof errors[1], &reasons[1][1]);
    GPU_TRY(fn, cudaEventRecord(ctx->staged_free, ctx->stream));
    ctx->staged_pending = true;
    for (int l = 0; l < 2; l++) { /* [layout][FA2, Hopper]: each planner's failure counts */
        int failed = (reasons[l][0] == GPU_FI_PLAN_ERROR) + (reasons[l][1] == GPU_FI_PLAN_ERROR);
        if (failed == 0) continue;
        gpu_attention_counts *counts = &ctx->counts;
        counts->plan_errors += (uint64_t)failed;
        if (counts->plan_errors == (uint64_t)failed) { /* the first: said in rmlp_last_error() of this OK call */
            rmlp_fail(RMLP_OK, fn, "%s; such batches run on the next kernel (the reference kernel after FlashInfer's, "
                      "FA2 after the Hopper ones; counted in rmlp_context_gpu_stats; said once per context)",
                      errors[l]);
            snprintf(counts->first_plan_error, sizeof counts->first_plan_error, "%.*s",
                     (int)sizeof counts->first_plan_error - 1, errors[l]);
        }
    }
    uint32_t longest = 0;
    for (size_t i = 0; i < ns; i++)
        if (plan->cu_seqlens[i + 1] - plan->cu_seqlens[i] > longest) longest = plan->cu_seqlens[i + 1] - plan->cu_seqlens[i];
    gpu_plan_state *p = &ctx->plan;
    p->identity = identity;
    p->plan = *plan;
    p->max_seqlen = longest;
    p->fold = ctx->maps + at_fold;
    p->scatter = ctx->maps + at_scatter;
    p->ids = ctx->maps + at_ids;
    p->pos = ctx->maps + at_pos;
    p->cu = ctx->maps + at_cu;
    p->qo = plan->qo_indptr != NULL ? ctx->maps + at_qo : NULL;
    p->staged = s;
    p->staged_words = words;
    p->set = true;
    return RMLP_OK;
}

extern "C" bool gpu_plan_offsets_unchanged(const gpu_plan_state *p, const uint32_t *cu, const uint32_t *qo) {
    if (!p->set) return false;
    size_t ns = p->plan.n_seqs, at_cu = 3 * (size_t)p->plan.n_compact_padded + p->plan.n_tokens; /* set_plan's layout */
    if (memcmp(cu, p->staged + at_cu, (ns + 1) * sizeof(uint32_t)) != 0) return false;
    return qo == NULL || (p->plan.qo_indptr != NULL &&
                          memcmp(qo, p->staged + at_cu + ns + 1, (ns + 1) * sizeof(uint32_t)) == 0);
}

/* What keeps `plan` from being the one set on ctx: "none" (no plan set), "counts" (other counts or
 * array pointers), a map's name (with `contents`: it changed since it was copied), NULL when it
 * is that one. */
static const char *plan_difference(const gpu_context *ctx, const rmlp_plan *plan, bool contents) {
    const gpu_plan_state *p = &ctx->plan;
    if (!p->set) return "none";
    const rmlp_plan *s = &p->plan;
    if (plan->n_tokens != s->n_tokens || plan->n_seqs != s->n_seqs || plan->n_compact != s->n_compact ||
        plan->n_compact_padded != s->n_compact_padded || plan->use_radix != s->use_radix ||
        plan->fold_gather != s->fold_gather || plan->scatter != s->scatter ||
        plan->compact_input_ids != s->compact_input_ids || plan->compact_position_ids != s->compact_position_ids ||
        plan->cu_seqlens != s->cu_seqlens || plan->qo_indptr != s->qo_indptr)
        return "counts";
    if (!contents) return NULL;
    size_t nc = plan->n_compact_padded, nt = plan->n_tokens, ns = plan->n_seqs;
    const uint32_t *staged = p->staged;
    struct {
        const char *name;
        const uint32_t *host;
        size_t offset, n;
    } maps[] = {
        {"fold_gather", plan->fold_gather, 0, nc},
        {"scatter", plan->scatter, nc, nt},
        {"compact_input_ids", plan->compact_input_ids, nc + nt, nc},
        {"compact_position_ids", plan->compact_position_ids, 2 * nc + nt, nc},
        {"cu_seqlens", plan->cu_seqlens, 3 * nc + nt, ns + 1},
        {"qo_indptr", plan->qo_indptr, 3 * nc + nt + ns + 1, plan->qo_indptr != NULL ? ns + 1 : 0},
    };
    for (const auto &m : maps)
        if (m.n > 0 && memcmp(m.host, staged + m.offset, m.n * sizeof(uint32_t)) != 0) return m.name;
    return NULL;
}

extern "C" bool gpu_context_plan_is_set(const gpu_context *ctx, const rmlp_plan *plan) {
    return plan_difference(ctx, plan, true) == NULL;
}

extern "C" rmlp_status gpu_context_check_plan(const char *fn, const gpu_context *ctx, const rmlp_plan *plan,
                                              bool contents) {
    const char *difference = plan_difference(ctx, plan, contents);
    if (difference == NULL) return RMLP_OK;
    if (strcmp(difference, "none") == 0)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                         "no plan is set on this CUDA context: call rmlp_context_set_plan(context, plan) once per "
                         "batch, before its first call");
    const rmlp_plan *s = &ctx->plan.plan;
    if (strcmp(difference, "counts") == 0)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                         "the plan (%u tokens, %u compact rows, scatter %p) is not the one set on this CUDA context "
                         "(%u tokens, %u compact rows, scatter %p): call rmlp_context_set_plan with it first",
                         plan->n_tokens, plan->n_compact_padded, (const void *)plan->scatter, s->n_tokens,
                         s->n_compact_padded, (const void *)s->scatter);
    return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                     "plan->%s changed since rmlp_context_set_plan (the planner rebuilt it in place?): call "
                     "rmlp_context_set_plan again before running it", difference);
}

extern "C" rmlp_status gpu_context_check_buffer(const char *fn, const gpu_context *ctx, const char *name,
                                                const void *ptr) {
    GPU_ON_DEVICE(fn, ctx->model->device);
    if (capturing(ctx)) return RMLP_OK;
    cudaPointerAttributes attr;
    cudaError_t error = cudaPointerGetAttributes(&attr, ptr);
    if (error != cudaSuccess) return gpu_fail(fn, "cudaPointerGetAttributes", error);
    if ((attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) || attr.device != ctx->model->device)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                         "%s=%p is not device memory of device %d (cudaPointerGetAttributes: type %d, device %d); "
                         "a CUDA model's activations are device buffers in its dtype", name, ptr,
                         ctx->model->device, (int)attr.type, attr.device);
    return RMLP_OK;
}

extern "C" void gpu_context_stats(const gpu_context *ctx, rmlp_gpu_stats *out) {
    const gpu_attention_counts *c = &ctx->counts;
    const gpu_options *o = &ctx->options;
    out->cuda = true;
    out->attention = (rmlp_gpu_attention)o->attention;
    out->flashinfer = ctx->fi != NULL;
    out->full_kv_paged = o->full_kv_paged, out->flashinfer_sm90 = o->flashinfer_sm90;
    out->rope_table = o->rope_table, out->decode_flashinfer = o->decode_flashinfer;
    out->flashinfer_full = c->flashinfer[GPU_ATT_FULL];
    out->flashinfer_full_paged = c->flashinfer[GPU_ATT_FULL_PAGED];
    out->flashinfer_compact = c->flashinfer[GPU_ATT_COMPACT];
    out->reference_full = c->reference[GPU_ATT_FULL];
    out->reference_full_paged = c->reference[GPU_ATT_FULL_PAGED];
    out->reference_compact = c->reference[GPU_ATT_COMPACT];
    out->plan_errors = c->plan_errors;
    out->fallback_plan_error = c->fallbacks[GPU_FI_PLAN_ERROR];
    out->fallback_small_batch = c->fallbacks[GPU_FI_SMALL_BATCH];
    out->fallback_too_large = c->fallbacks[GPU_FI_TOO_LARGE];
    out->fallback_unplanned = c->fallbacks[GPU_FI_UNPLANNED];
    out->fallback_buffers = c->fallbacks[GPU_FI_BUFFERS];
    out->fallback_launcher = c->fallbacks[GPU_FI_LAUNCHER]; /* GPU_FI_VARIANT's: in reference_* only */
    snprintf(out->first_plan_error, sizeof out->first_plan_error, "%s", c->first_plan_error);
    out->sm90 = gpu_flashinfer_has_sm90(ctx->fi);
    out->flashinfer_sm90_full_paged = c->sm90[GPU_ATT_FULL_PAGED];
    out->flashinfer_sm90_compact = c->sm90[GPU_ATT_COMPACT];
    out->sm90_fallbacks = c->sm90_fallbacks;
    out->decode_steps_flashinfer = c->decode_steps[0], out->decode_steps_chains = c->decode_steps[1];
}

extern "C" gpu_flashinfer *gpu_context_flashinfer(gpu_context *ctx) { return ctx->fi; }
