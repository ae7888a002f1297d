/*
 * layer.cu: the decoder layer on the device, step for step as cpu/layer.c runs it on the CPU,
 * in compact space with scatter before attention and gather after; and the whole forward.
 * Everything is enqueued on the context's stream: no call here allocates or synchronises, so
 * a host may capture a whole batch in a CUDA graph.
 *
 *   embedding:      hidden = embed[ids] (* embedding_scale: Gemma)          gpu_gather_rows, gpu_scale
 *   pre-attention:  normed = rmsnorm(hidden) * input_norm                   gpu_add_rmsnorm
 *                   qkv = normed Wqkv^T (+ bias: broadcast, GEMM adds onto)  gpu_broadcast_row, cuBLAS
 *                   q/k heads: rmsnorm (Qwen3), RoPE at compact positions    gpu_qk_norm_rope
 *                   (Gemma 3: the head norms first, with 1 + w)              gpu_head_rmsnorm
 *                   q, k, v (batch rows) = qkv[scatter]                      gpu_gather_rows x3
 *   post-attention: attn_c = attn[fold_gather]                               gpu_gather_rows
 *                   (hidden += o bias)                                       gpu_add_row
 *                   hidden += attn_c Wo^T   (the GEMM's beta = 1)            cuBLAS
 *                   normed = rmsnorm(hidden) * post_norm                     gpu_add_rmsnorm
 *                   gu = normed Wgu^T (+ bias); act = act(gate) * up         cuBLAS, gpu_gated_mul
 *                   (hidden += down bias)                                    gpu_add_row
 *                   hidden += act Wdown^T   (beta = 1)                       cuBLAS
 * Gemma's norms scale by 1 + w (the kernels' weight offset 1). With sandwich norms (Gemma 2) O
 * and down write a sublayer output of their own, normed before its residual add
 * (gpu_norm_add_rmsnorm, fused with the MLP's input norm after O).
 * Residual adds ride on the GEMMs (beta = 1): the sum is formed in fp32 and rounded to the
 * dtype once, where a separate add would round the projection first (an O or down bias, added
 * onto the residual just before, rounds once more).
 * With an identity plan (radix off, or nothing shared: gpu_plan_state.identity) there is nothing
 * to scatter or gather: the Q/K/V GEMMs write q, k, v directly (three GEMMs over the stacked
 * weight's row blocks), O reads attn, and the final norm writes out, so the radix-off baseline
 * pays no copies.
 * A whole forward with the built-in attention in full space scatters only Q (options.full_kv_paged,
 * the default): attention reads K and V from the compact rows through the plan's scatter, as
 * pages of one row (GPU_ATT_FULL_PAGED); RADIX_MLP_GPU_FULL_KV=scatter scatters all three.
 * Each launch of the built-in attention is counted by kernel and layout, and each reference launch
 * where FlashInfer serves the context by why FlashInfer did not take it (rmlp_gpu_stats).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "blas.h"
#include "host.h"
#include "kernels.h"
#include "model.h"

/* A launcher's result as a status naming the kernel and the layer. */
static rmlp_status launched(const char *fn, const char *kernel, long layer, cudaError_t error) {
    if (error == cudaSuccess) return RMLP_OK;
    char what[96];
    if (layer >= 0)
        snprintf(what, sizeof what, "%s (layer %ld)", kernel, layer);
    else
        snprintf(what, sizeof what, "%s", kernel);
    return gpu_fail(fn, what, error);
}

#define LAUNCH(kernel, layer, call)                                                                                    \
    do {                                                                                                               \
        rmlp_status launch_status_ = launched(fn, kernel, (layer), (call));                                            \
        if (launch_status_ != RMLP_OK) return launch_status_;                                                          \
    } while (0)

/* y (rows, cols) = x (rows, in) W[col0 : col0 + cols]^T (+ bias), W's rows being the output
 * columns of the linear layer across its parts (one stacked matrix or 2-3 separate ones): one
 * GEMM per part the column range meets, each writing its columns of y. With `accumulate`,
 * y += instead. A bias goes into y before the GEMM (broadcast, or added onto y's rows when
 * accumulating: the O and down projections' biases of Llama and Qwen3) and the GEMM adds onto it. */
static rmlp_status linear_cols(const char *fn, const char *what, gpu_context *ctx, const gpu_linear *lin,
                               const void *x, size_t rows, size_t in, size_t col0, size_t cols, void *y, size_t ldy,
                               bool accumulate) {
    const gpu_model *m = ctx->model;
    size_t es = gpu_dtype_bytes(m->dtype), part0 = 0, end = col0 + cols;
    for (uint32_t p = 0; p < lin->parts; part0 += lin->out[p], p++) {
        size_t lo = col0 > part0 ? col0 : part0, hi = end < part0 + lin->out[p] ? end : part0 + lin->out[p];
        if (lo >= hi) continue;
        char *yp = (char *)y + (lo - col0) * es;
        const char *w = (const char *)lin->w[p] + (lo - part0) * in * es;
        bool acc = accumulate;
        if (lin->bias[p] != NULL) { /* y = bias, or y += bias onto what y holds; the GEMM adds onto it */
            const char *bias = (const char *)lin->bias[p] + (lo - part0) * es;
            if (accumulate)
                LAUNCH("gpu_add_row (bias)", -1, gpu_add_row(yp, ldy, bias, rows, hi - lo, m->dtype, ctx->stream));
            else
                LAUNCH("gpu_broadcast_row (bias)", -1,
                       gpu_broadcast_row(yp, ldy, bias, rows, hi - lo, m->dtype, ctx->stream));
            acc = true;
        }
        rmlp_status status = gpu_linear_gemm(fn, what, ctx->blas, x, in, rows, in, w, hi - lo, yp, ldy, acc, m->dtype);
        if (status != RMLP_OK) return status;
    }
    return RMLP_OK;
}

/* The whole layer: y (rows, sum of parts) = x (rows, in) W^T (+ bias). */
static rmlp_status linear(const char *fn, const char *what, gpu_context *ctx, const gpu_linear *lin, const void *x,
                          size_t rows, size_t in, void *y, size_t ldy, bool accumulate) {
    size_t total = 0;
    for (uint32_t p = 0; p < lin->parts; p++) total += lin->out[p];
    return linear_cols(fn, what, ctx, lin, x, rows, in, 0, total, y, ldy, accumulate);
}

static size_t q_dim(const rmlp_model_config *c) { return (size_t)c->num_attention_heads * c->head_dim; }
static size_t kv_dim(const rmlp_model_config *c) { return (size_t)c->num_key_value_heads * c->head_dim; }

extern "C" rmlp_status gpu_embed(const char *fn, gpu_context *ctx, void *hidden) {
    GPU_ON_DEVICE(fn, ctx->model->device);
    const gpu_model *m = ctx->model;
    size_t h = m->config.hidden_size;
    size_t rows = ctx->plan.plan.n_compact_padded;
    LAUNCH("gpu_gather_rows (embedding)", -1,
           gpu_gather_rows(hidden, m->embed, h, ctx->plan.ids, rows, h, m->dtype, ctx->stream));
    if (m->config.embedding_scale != 0.0)
        LAUNCH("gpu_scale (embedding)", -1, gpu_scale(hidden, rows * h, m->config.embedding_scale, m->dtype, ctx->stream));
    return RMLP_OK;
}

/* Gemma's norms scale by 1 + w: the norm kernels' weight offset. */
static float norm_offset(const rmlp_model_config *c) { return c->norm_weight_plus_one ? 1.0f : 0.0f; }

/* Input norm, then Q/K/V of every compact row (+ bias), q/k head norms and RoPE: into q, k, v
 * (rows, q_dim / kv_dim each; three GEMMs over the stacked weight's row blocks) when `split`,
 * else into ctx->qkv (rows, q_dim + 2 kv_dim; one GEMM). */
static rmlp_status project_qkv(const char *fn, gpu_context *ctx, uint32_t layer, const void *hidden, bool split,
                               void *q, void *k, void *v) {
    const gpu_model *m = ctx->model;
    const rmlp_model_config *c = &m->config;
    const gpu_layer *lw = &m->layers[layer];
    const gpu_plan_state *p = &ctx->plan;
    size_t rows = p->plan.n_compact_padded, h = c->hidden_size, qd = q_dim(c), kvd = kv_dim(c), width = qd + 2 * kvd;
    size_t es = gpu_dtype_bytes(m->dtype), q_stride = split ? qd : width, k_stride = split ? kvd : width;
    cudaStream_t s = ctx->stream;
    /* add == NULL: the kernel only reads `residual`. */
    LAUNCH("gpu_add_rmsnorm (input norm)", layer,
           gpu_add_rmsnorm((void *)hidden, NULL, lw->input_norm, norm_offset(c), rows, h, c->rms_norm_eps, ctx->normed,
                           m->dtype, s));
    rmlp_status status;
    if (split) {
        status = linear_cols(fn, "q", ctx, &lw->qkv, ctx->normed, rows, h, 0, qd, q, qd, false);
        if (status == RMLP_OK) status = linear_cols(fn, "k", ctx, &lw->qkv, ctx->normed, rows, h, qd, kvd, k, kvd, false);
        if (status == RMLP_OK)
            status = linear_cols(fn, "v", ctx, &lw->qkv, ctx->normed, rows, h, qd + kvd, kvd, v, kvd, false);
    } else {
        status = linear(fn, "qkv", ctx, &lw->qkv, ctx->normed, rows, h, ctx->qkv, width, false);
        q = ctx->qkv, k = (char *)ctx->qkv + qd * es;
    }
    if (status != RMLP_OK) return status;
    uint32_t table = m->ext->layers[layer].rope; /* the layer's RoPE (model/model_ext.h) */
    const gpu_rope_table *rope = ctx->options.rope_table ? &m->rope[table] : NULL; /* RADIX_MLP_GPU_ROPE */
    gpu_rope_freqs freqs = gpu_model_rope_freqs(m, table);
    const void *q_norm = lw->q_norm, *k_norm = lw->k_norm;
    if (q_norm != NULL && c->norm_weight_plus_one) { /* Gemma 3: 1 + w, in a pass of its own before RoPE */
        LAUNCH("gpu_head_rmsnorm (q)", layer,
               gpu_head_rmsnorm(q, q_stride, rows, c->num_attention_heads, c->head_dim, q_norm, 1.0f, c->rms_norm_eps,
                                m->dtype, s));
        LAUNCH("gpu_head_rmsnorm (k)", layer,
               gpu_head_rmsnorm(k, k_stride, rows, c->num_key_value_heads, c->head_dim, k_norm, 1.0f, c->rms_norm_eps,
                                m->dtype, s));
        q_norm = k_norm = NULL;
    }
    LAUNCH("gpu_qk_norm_rope", layer,
           gpu_qk_norm_rope_freqs(q, q_stride, k, k_stride, rows, c->num_attention_heads, c->num_key_value_heads,
                                  c->head_dim, q_norm, k_norm, p->pos, rope, &freqs, c->rms_norm_eps, m->dtype, s));
    return RMLP_OK;
}

/* The fused qkv rows' Q (and K and V, unless k is NULL) scattered to the batch rows q (n_tokens,
 * q_dim), k, v (n_tokens, kv_dim). */
static rmlp_status scatter_qkv(const char *fn, gpu_context *ctx, uint32_t layer, void *q, void *k, void *v) {
    const gpu_plan_state *p = &ctx->plan;
    const rmlp_model_config *c = &ctx->model->config;
    rmlp_dtype dt = ctx->model->dtype;
    size_t qd = q_dim(c), kvd = kv_dim(c), width = qd + 2 * kvd, es = gpu_dtype_bytes(dt), n = p->plan.n_tokens;
    const char *qkv = (const char *)ctx->qkv;
    cudaStream_t s = ctx->stream;
    LAUNCH("gpu_gather_rows (scatter q)", layer, gpu_gather_rows(q, qkv, width, p->scatter, n, qd, dt, s));
    if (k == NULL) return RMLP_OK;
    LAUNCH("gpu_gather_rows (scatter k)", layer, gpu_gather_rows(k, qkv + qd * es, width, p->scatter, n, kvd, dt, s));
    LAUNCH("gpu_gather_rows (scatter v)", layer,
           gpu_gather_rows(v, qkv + (qd + kvd) * es, width, p->scatter, n, kvd, dt, s));
    return RMLP_OK;
}

extern "C" rmlp_status gpu_pre_attention(const char *fn, gpu_context *ctx, uint32_t layer, const void *hidden,
                                         void *q, void *k, void *v) {
    GPU_ON_DEVICE(fn, ctx->model->device);
    const gpu_plan_state *p = &ctx->plan;
    /* identity: batch rows are the compact rows, so project straight into q, k, v */
    rmlp_status status = project_qkv(fn, ctx, layer, hidden, p->identity, q, k, v);
    if (status != RMLP_OK || p->identity) return status;
    return scatter_qkv(fn, ctx, layer, q, k, v);
}

extern "C" rmlp_status gpu_pre_attention_compact(const char *fn, gpu_context *ctx, uint32_t layer, const void *hidden,
                                                 void *q, void *k, void *v) {
    GPU_ON_DEVICE(fn, ctx->model->device);
    return project_qkv(fn, ctx, layer, hidden, true, q, k, v);
}

/* hidden (rows, hidden) += O(attn_c) then += MLP(norm(hidden)), the post-attention of `rows` rows
 * (the compact rows, or rmlp_forward_last's last rows). */
static rmlp_status post_attention_rows(const char *fn, gpu_context *ctx, uint32_t layer, const void *attn_c,
                                       void *hidden, size_t rows) {
    const gpu_model *m = ctx->model;
    const rmlp_model_config *c = &m->config;
    const gpu_layer *lw = &m->layers[layer];
    size_t h = c->hidden_size, inter = c->intermediate_size, qd = q_dim(c);
    cudaStream_t s = ctx->stream;
    float offset = norm_offset(c);
    bool sandwich = c->sandwich_norms; /* Gemma 2: O and down into normed, normed before their adds */
    rmlp_status status = linear(fn, "o_proj", ctx, &lw->o_proj, attn_c, rows, qd, sandwich ? ctx->normed : hidden, h,
                                !sandwich);
    if (status != RMLP_OK) return status;
    if (sandwich)
        LAUNCH("gpu_norm_add_rmsnorm (post-attention norms)", layer,
               gpu_norm_add_rmsnorm(hidden, ctx->normed, lw->attn_out_norm, lw->post_norm, offset, rows, h,
                                    c->rms_norm_eps, ctx->normed, m->dtype, s));
    else
        LAUNCH("gpu_add_rmsnorm (post-attention norm)", layer,
               gpu_add_rmsnorm(hidden, NULL, lw->post_norm, offset, rows, h, c->rms_norm_eps, ctx->normed, m->dtype,
                               s));
    status = linear(fn, "gate_up", ctx, &lw->gate_up, ctx->normed, rows, h, ctx->gu, 2 * inter, false);
    if (status != RMLP_OK) return status;
    LAUNCH("gpu_gated_mul", layer, gpu_gated_mul(ctx->gu, rows, inter, ctx->act, c->activation, m->dtype, s));
    status = linear(fn, "down_proj", ctx, &lw->down, ctx->act, rows, inter, sandwich ? ctx->normed : hidden, h,
                    !sandwich);
    if (status != RMLP_OK || !sandwich) return status;
    LAUNCH("gpu_norm_add_rmsnorm (post-feedforward norm)", layer,
           gpu_norm_add_rmsnorm(hidden, ctx->normed, lw->mlp_out_norm, NULL, offset, rows, h, c->rms_norm_eps, NULL,
                                m->dtype, s));
    return RMLP_OK;
}

extern "C" rmlp_status gpu_post_attention_compact(const char *fn, gpu_context *ctx, uint32_t layer,
                                                  const void *attn_c, void *hidden) {
    GPU_ON_DEVICE(fn, ctx->model->device);
    return post_attention_rows(fn, ctx, layer, attn_c, hidden, ctx->plan.plan.n_compact_padded);
}

extern "C" rmlp_status gpu_post_attention(const char *fn, gpu_context *ctx, uint32_t layer, const void *attn,
                                          void *hidden) {
    GPU_ON_DEVICE(fn, ctx->model->device);
    const gpu_plan_state *p = &ctx->plan;
    if (p->identity) return gpu_post_attention_compact(fn, ctx, layer, attn, hidden); /* batch rows are compact */
    size_t rows = p->plan.n_compact_padded, qd = q_dim(&ctx->model->config);
    LAUNCH("gpu_gather_rows (fold attention)", layer,
           gpu_gather_rows(ctx->attn_c, attn, qd, p->fold, rows, qd, ctx->model->dtype, ctx->stream));
    return gpu_post_attention_compact(fn, ctx, layer, ctx->attn_c, hidden);
}

/* The final RMSNorm of `rows` compact rows of hidden into out. */
static rmlp_status final_rmsnorm(const char *fn, gpu_context *ctx, const void *hidden, size_t rows, void *out) {
    const gpu_model *m = ctx->model;
    LAUNCH("gpu_add_rmsnorm (final norm)", -1,
           gpu_add_rmsnorm((void *)hidden, NULL, m->final_norm, norm_offset(&m->config), rows, m->config.hidden_size,
                           m->config.rms_norm_eps, out, m->dtype, ctx->stream));
    return RMLP_OK;
}

extern "C" rmlp_status gpu_final_norm(const char *fn, gpu_context *ctx, const void *hidden, void *out) {
    GPU_ON_DEVICE(fn, ctx->model->device);
    const gpu_model *m = ctx->model;
    const gpu_plan_state *p = &ctx->plan;
    size_t h = m->config.hidden_size;
    rmlp_status status = final_rmsnorm(fn, ctx, hidden, p->plan.n_compact, p->identity ? out : ctx->normed);
    if (status != RMLP_OK || p->identity) return status;
    LAUNCH("gpu_gather_rows (scatter to batch rows)", -1,
           gpu_gather_rows(out, ctx->normed, h, p->scatter, p->plan.n_tokens, h, m->dtype, ctx->stream));
    return RMLP_OK;
}

extern "C" rmlp_status gpu_final_norm_compact(const char *fn, gpu_context *ctx, const void *hidden, void *out) {
    GPU_ON_DEVICE(fn, ctx->model->device);
    return final_rmsnorm(fn, ctx, hidden, ctx->plan.plan.n_compact_padded, out);
}

/* rmlp_forward_last's last layer after its attention: the n_seqs last rows alone through the O
 * projection, the MLP and the final norm into out (n_seqs, hidden). attn: the layer's attention
 * output, batch rows (full space; read at each row's fold representative, as gpu_post_attention
 * reads them) or compact rows. The rows' attention goes to q, spent once attention has run. */
static rmlp_status post_attention_last(const char *fn, gpu_context *ctx, uint32_t layer, const void *attn,
                                       bool batch_rows, void *out) {
    const gpu_model *m = ctx->model;
    const gpu_plan_state *p = &ctx->plan;
    size_t n = p->plan.n_seqs, h = m->config.hidden_size, qd = q_dim(&m->config);
    const uint32_t *scatter = p->identity ? NULL : p->scatter, *fold = batch_rows && !p->identity ? p->fold : NULL;
    LAUNCH("gpu_gather_last_rows (attention)", layer,
           gpu_gather_last_rows(ctx->q, attn, qd, p->cu, scatter, fold, n, qd, m->dtype, ctx->stream));
    LAUNCH("gpu_gather_last_rows (hidden)", layer,
           gpu_gather_last_rows(out, ctx->hidden, h, p->cu, scatter, NULL, n, h, m->dtype, ctx->stream));
    rmlp_status status = post_attention_rows(fn, ctx, layer, ctx->q, out, n);
    if (status == RMLP_OK) status = final_rmsnorm(fn, ctx, out, n, ctx->normed);
    if (status != RMLP_OK) return status;
    GPU_TRY(fn, cudaMemcpyAsync(out, ctx->normed, n * h * gpu_dtype_bytes(m->dtype), cudaMemcpyDeviceToDevice,
                                ctx->stream));
    return RMLP_OK;
}

/* The built-in attention's limits, for both layouts. */
static rmlp_status check_builtin(const char *fn, const rmlp_attention_args *a) {
    if (a->n_heads > 65535)
        return rmlp_fail(RMLP_ERR_UNSUPPORTED, fn, "n_heads=%u: the built-in CUDA attention takes at most 65535",
                         a->n_heads);
    if (a->head_dim > 256)
        return rmlp_fail(RMLP_ERR_UNSUPPORTED, fn, "head_dim=%u: the built-in CUDA attention takes at most 256",
                         a->head_dim);
    return RMLP_OK;
}

/* Does `a` describe the batch of the set plan (its own host arrays, counts and offsets)? Then the
 * FlashInfer work split rmlp_context_set_plan made is this batch's. The offsets are compared too: a
 * planner rebuilds a plan in place (same arrays), and a split made for other lengths would leave
 * query tiles out and write rows at the old offsets. */
static bool is_set_plan(const gpu_plan_state *p, const rmlp_attention_args *a, bool compact) {
    if (!p->set || a->n_seqs != p->plan.n_seqs || a->n_tokens != p->plan.n_tokens) return false;
    if (!compact) return a->cu_seqlens == p->plan.cu_seqlens && gpu_plan_offsets_unchanged(p, a->cu_seqlens, NULL);
    return a->qo_indptr == p->plan.qo_indptr && a->kv_indptr == p->plan.cu_seqlens &&
           a->kv_indices == p->plan.scatter && a->n_compact == p->plan.n_compact && a->qo_indptr != NULL &&
           gpu_plan_offsets_unchanged(p, a->kv_indptr, a->qo_indptr);
}

/* GPU_FI_OK when the built-in attention runs FlashInfer's kernel for `a` over `rows` in `layout`,
 * else why not (GPU_FI_UNPLANNED too for a context FlashInfer does not serve). */
static gpu_fi_reason flashinfer_reason(const gpu_context *ctx, const rmlp_attention_args *a,
                                       const gpu_compact_rows *rows, gpu_att_layout layout) {
    bool compact = layout == GPU_ATT_COMPACT;
    if (ctx->fi == NULL || !is_set_plan(&ctx->plan, a, compact)) return GPU_FI_UNPLANNED;
    return gpu_flashinfer_ready(ctx->fi, compact ? GPU_FI_COMPACT : GPU_FI_FULL, layout != GPU_ATT_FULL, rows,
                                a->n_seqs, compact ? a->n_compact : a->n_tokens, a->n_heads, a->n_kv_heads,
                                a->head_dim);
}

/* Whether layer a->layer's window and soft-cap (model/model_ext.h) are a variant FlashInfer's
 * kernels here lack (gpu_flashinfer_takes_layer: a soft-cap at head_dim 64 or 128). */
static bool needs_variant(const gpu_context *ctx, const rmlp_attention_args *a) {
    const layer_attention *la = &ctx->model->ext->layers[a->layer];
    return !gpu_flashinfer_takes_layer(a->head_dim, la->window, la->softcap);
}

extern "C" bool gpu_attention_uses_flashinfer(const gpu_context *ctx, const rmlp_attention_args *a, bool compact) {
    size_t qd = (size_t)a->n_heads * a->head_dim, kvd = (size_t)a->n_kv_heads * a->head_dim;
    gpu_compact_rows rows = {a->q, a->k, a->v, a->out, qd, kvd, kvd, qd};
    return flashinfer_reason(ctx, a, &rows, compact ? GPU_ATT_COMPACT : GPU_ATT_FULL) == GPU_FI_OK &&
           !needs_variant(ctx, a);
}

/* Counts a launch of the built-in attention in `layout`: FlashInfer's (reason GPU_FI_OK; on its
 * Hopper kernels or, where those serve the context for pages, why not) or the reference kernel's,
 * and then, where FlashInfer serves the context, why it did not take it. */
static void count_launch(gpu_context *ctx, gpu_att_layout layout, gpu_fi_reason reason, bool sm90) {
    gpu_attention_counts *c = &ctx->counts;
    if (reason == GPU_FI_OK) {
        c->flashinfer[layout]++;
        if (sm90) c->sm90[layout]++;
        else if (layout != GPU_ATT_FULL && gpu_flashinfer_has_sm90(ctx->fi)) c->sm90_fallbacks++;
        return;
    }
    c->reference[layout]++;
    if (ctx->fi != NULL) c->fallbacks[reason]++;
}

/* The built-in attention over `rows` (q/k/v/out with their strides) and the device layout arrays in
 * `layout`: full space (kv_indices NULL, qo = kv_indptr = cu_seqlens), full space reading K/V
 * through kv_indices = the scatter, or compact: FlashInfer's kernel where the context planned it
 * for this batch and it takes these buffers (gpu/flashinfer.h), else the reference kernel of
 * gpu/attention.cu (f32, other head dims, other batches, odd strides, a plan FlashInfer failed to
 * make, or a configuration its launcher refuses on this device before launching anything, or a
 * layer whose soft-cap the FlashInfer variants instantiated here do not take: GPU_FI_VARIANT).
 * The scale is a->scale; the window and soft-cap are layer a->layer's (model/model_ext.h). */
static rmlp_status builtin_attention(const char *fn, gpu_context *ctx, const rmlp_attention_args *a,
                                     const gpu_compact_rows *rows, const uint32_t *qo, const uint32_t *kv_indptr,
                                     const uint32_t *kv_indices, gpu_att_layout layout) {
    rmlp_status status = check_builtin(fn, a);
    if (status != RMLP_OK) return status;
    layer_attention la = ctx->model->ext->layers[a->layer];
    la.scale = a->scale;
    gpu_fi_reason reason = flashinfer_reason(ctx, a, rows, layout);
    if (reason == GPU_FI_OK && needs_variant(ctx, a)) reason = GPU_FI_VARIANT;
    if (reason == GPU_FI_OK) {
        bool sm90 = false;
        cudaError_t error = gpu_flashinfer_run(ctx->fi, layout == GPU_ATT_COMPACT ? GPU_FI_COMPACT : GPU_FI_FULL, rows,
                                               qo, kv_indptr, kv_indices, la, ctx->stream, &sm90);
        if (error != cudaErrorNotSupported) { /* NotSupported: refused before launching anything */
            LAUNCH(sm90                 ? "FlashInfer Hopper batch prefill (paged KV, page size 1)"
                   : kv_indices != NULL ? "FlashInfer batch prefill (paged KV, page size 1)"
                                        : "FlashInfer batch prefill (ragged KV)",
                   (long)a->layer, error);
            count_launch(ctx, layout, GPU_FI_OK, sm90);
            return RMLP_OK;
        }
        reason = GPU_FI_LAUNCHER;
    }
    if (kv_indices != NULL) /* compact, or full space through the scatter: every batch row a query */
        LAUNCH("gpu_compact_attention", (long)a->layer,
               gpu_compact_attention(rows, qo, kv_indptr, kv_indices, a->n_seqs,
                                     layout == GPU_ATT_COMPACT ? a->n_compact : a->n_tokens, a->n_heads,
                                     a->n_kv_heads, a->head_dim, la, ctx->model->dtype, ctx->stream));
    else
        LAUNCH("gpu_attention", (long)a->layer,
               gpu_attention(rows->q, rows->k, rows->v, rows->out, kv_indptr, a->n_seqs, a->n_tokens, a->n_heads,
                             a->n_kv_heads, a->head_dim, la, ctx->model->dtype, ctx->stream));
    count_launch(ctx, layout, reason, false);
    return RMLP_OK;
}

extern "C" rmlp_status gpu_attention_run(const char *fn, gpu_context *ctx, const rmlp_attention_args *a) {
    GPU_ON_DEVICE(fn, ctx->model->device);
    const gpu_plan_state *p = &ctx->plan;
    const uint32_t *cu = a->cu_seqlens_device;
    if (cu == NULL) {
        if (!p->set || a->cu_seqlens != p->plan.cu_seqlens || a->n_seqs != p->plan.n_seqs ||
            a->n_tokens != p->plan.n_tokens)
            return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                             "args->cu_seqlens_device is NULL and args->cu_seqlens is not the cu_seqlens of the plan "
                             "set by rmlp_context_set_plan: pass device offsets, or the set plan's own");
        cu = p->cu;
    }
    size_t qd = (size_t)a->n_heads * a->head_dim, kvd = (size_t)a->n_kv_heads * a->head_dim;
    gpu_compact_rows rows = {a->q, a->k, a->v, a->out, qd, kvd, kvd, qd};
    return builtin_attention(fn, ctx, a, &rows, cu, cu, NULL, GPU_ATT_FULL);
}

extern "C" rmlp_status gpu_attention_compact_run(const char *fn, gpu_context *ctx, const rmlp_attention_args *a) {
    GPU_ON_DEVICE(fn, ctx->model->device);
    const gpu_plan_state *p = &ctx->plan;
    const uint32_t *qo = a->qo_indptr_device, *kv_indptr = a->kv_indptr_device, *kv_indices = a->kv_indices_device;
    if (qo == NULL && kv_indptr == NULL && kv_indices == NULL) {
        if (!p->set || p->qo == NULL || a->qo_indptr != p->plan.qo_indptr || a->kv_indptr != p->plan.cu_seqlens ||
            a->kv_indices != p->plan.scatter || a->n_seqs != p->plan.n_seqs || a->n_tokens != p->plan.n_tokens)
            return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                             "args->qo_indptr_device, kv_indptr_device and kv_indices_device are NULL, and the host "
                             "arrays are not those of the plan set by rmlp_context_set_plan: pass device arrays, or "
                             "the set plan's own");
        qo = p->qo, kv_indptr = p->cu, kv_indices = p->scatter;
    } else if (qo == NULL || kv_indptr == NULL || kv_indices == NULL) {
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "args->qo_indptr_device, kv_indptr_device and "
                         "kv_indices_device must be all given or all NULL");
    }
    size_t qd = (size_t)a->n_heads * a->head_dim, kvd = (size_t)a->n_kv_heads * a->head_dim;
    gpu_compact_rows rows = {a->q, a->k, a->v, a->out, qd, kvd, kvd, qd};
    return builtin_attention(fn, ctx, a, &rows, qo, kv_indptr, kv_indices, GPU_ATT_COMPACT);
}

extern "C" rmlp_status gpu_forward(const char *fn, gpu_context *ctx, rmlp_attention_space space,
                                   rmlp_attention_fn attention, void *user_data, void *out, forward_rows rows) {
    GPU_ON_DEVICE(fn, ctx->model->device); /* the host's attention runs with the model's device current */
    const gpu_model *m = ctx->model;
    const rmlp_model_config *c = &m->config;
    const gpu_plan_state *p = &ctx->plan;
    bool compact = space == RMLP_ATTENTION_COMPACT;
    rmlp_status status = gpu_embed(fn, ctx, ctx->hidden);
    if (status != RMLP_OK) return status;
    size_t qd = q_dim(c), kvd = kv_dim(c), width = qd + 2 * kvd, es = gpu_dtype_bytes(m->dtype);
    rmlp_attention_args args;
    memset(&args, 0, sizeof args);
    args.n_tokens = p->plan.n_tokens;
    args.n_seqs = p->plan.n_seqs;
    args.n_heads = c->num_attention_heads;
    args.n_kv_heads = c->num_key_value_heads;
    args.head_dim = c->head_dim;
    args.scale = 1.0f / sqrtf((float)c->head_dim);
    args.dtype = m->dtype;
    args.cu_seqlens = p->plan.cu_seqlens;
    args.q = ctx->q;
    args.k = ctx->k;
    args.v = ctx->v;
    args.out = compact ? ctx->attn_c : ctx->attn; /* compact: (n_compact_padded, q_dim) rows, as post reads them */
    args.stream = (void *)ctx->stream;
    args.cu_seqlens_device = p->cu;
    args.max_seqlen = p->max_seqlen;
    args.layout = compact ? RMLP_ATTENTION_COMPACT : RMLP_ATTENTION_FULL;
    if (compact) {
        args.n_compact = p->plan.n_compact;
        args.qo_indptr = p->plan.qo_indptr, args.kv_indptr = p->plan.cu_seqlens, args.kv_indices = p->plan.scatter;
        args.qo_indptr_device = p->qo, args.kv_indptr_device = p->cu, args.kv_indices_device = p->scatter;
    }
    /* The built-in compact attention reads q, k, v in place from the fused qkv rows; in full space
     * with paged K/V (options.full_kv_paged), k and v too, q from the batch rows. */
    const char *qkv = (const char *)ctx->qkv;
    gpu_compact_rows fused = {qkv, qkv + qd * es, qkv + (qd + kvd) * es, ctx->attn_c, width, width, width, qd};
    gpu_compact_rows paged = {ctx->q, fused.k, fused.v, ctx->attn, qd, width, width, qd};
    bool full_paged = !compact && attention == NULL && ctx->options.full_kv_paged && !p->identity, last = false;
    for (uint32_t layer = 0; layer < c->num_hidden_layers; layer++) {
        /* rmlp_forward_last: the last layer's post-attention on the last rows alone, then return */
        if (rows == FORWARD_LAST_ROWS && layer + 1 == c->num_hidden_layers) last = true;
        args.layer = layer;
        const layer_attention *la = &m->ext->layers[layer]; /* the layer's (model/model_ext.h) */
        args.scale = la->scale, args.sliding_window = la->window, args.softcap = la->softcap;
        if (full_paged) { /* only Q is scattered to the batch rows */
            status = project_qkv(fn, ctx, layer, ctx->hidden, false, NULL, NULL, NULL);
            if (status == RMLP_OK) status = scatter_qkv(fn, ctx, layer, ctx->q, NULL, NULL);
            if (status == RMLP_OK)
                status = builtin_attention(fn, ctx, &args, &paged, p->cu, p->cu, p->scatter, GPU_ATT_FULL_PAGED);
        } else if (!compact) {
            status = gpu_pre_attention(fn, ctx, layer, ctx->hidden, ctx->q, ctx->k, ctx->v);
            if (status == RMLP_OK)
                status = attention != NULL ? rmlp_call_attention(fn, attention, user_data, &args)
                                           : gpu_attention_run(fn, ctx, &args);
        } else if (attention != NULL) { /* the host's attention gets separate, dense q, k, v */
            status = project_qkv(fn, ctx, layer, ctx->hidden, true, ctx->q, ctx->k, ctx->v);
            if (status == RMLP_OK) status = rmlp_call_attention(fn, attention, user_data, &args);
        } else {
            status = project_qkv(fn, ctx, layer, ctx->hidden, false, NULL, NULL, NULL);
            if (status == RMLP_OK)
                status = builtin_attention(fn, ctx, &args, &fused, p->qo, p->cu, p->scatter, GPU_ATT_COMPACT);
        }
        /* full space: the batch rows' output (folded to the compact rows); compact: attn_c */
        const void *attn = compact ? ctx->attn_c : ctx->attn;
        if (status == RMLP_OK && last) return post_attention_last(fn, ctx, layer, attn, !compact, out);
        if (status == RMLP_OK)
            status = compact ? gpu_post_attention_compact(fn, ctx, layer, attn, ctx->hidden)
                             : gpu_post_attention(fn, ctx, layer, attn, ctx->hidden);
        if (status != RMLP_OK) return status;
    }
    return rows == FORWARD_COMPACT_ROWS ? gpu_final_norm_compact(fn, ctx, ctx->hidden, out)
                                        : gpu_final_norm(fn, ctx, ctx->hidden, out);
}
