/*
 * layer.cu: the decoder layer on the device, step for step as cpu/layer.c runs it on the CPU,
 * in compact space with scatter before attention and gather after; and the whole forward.
 * Everything is enqueued on the context's stream: no call here allocates or synchronises, so
 * a host may capture a whole batch in a CUDA graph.
 *
 *   pre-attention:  normed = rmsnorm(hidden) * input_norm                   gpu_add_rmsnorm
 *                   qkv = normed Wqkv^T (+ bias: broadcast, GEMM adds onto)  gpu_broadcast_row, cuBLAS
 *                   q/k heads: rmsnorm (Qwen3), RoPE at compact positions    gpu_qk_norm_rope
 *                   q, k, v (batch rows) = qkv[scatter]                      gpu_gather_rows x3
 *   post-attention: attn_c = attn[fold_gather]                               gpu_gather_rows
 *                   hidden += attn_c Wo^T   (the GEMM's beta = 1)            cuBLAS
 *                   normed = rmsnorm(hidden) * post_norm                     gpu_add_rmsnorm
 *                   gu = normed Wgu^T; act = silu(gate) * up                 cuBLAS, gpu_silu_mul
 *                   hidden += act Wdown^T   (beta = 1)                       cuBLAS
 * Residual adds ride on the GEMMs (beta = 1): the sum is formed in fp32 and rounded to the
 * dtype once, where a separate add would round the projection first.
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

/* y (rows, sum of parts) = x (rows, in) W^T (+ bias), each part its own GEMM into its columns;
 * with `accumulate`, y += instead (then there is no bias). */
static rmlp_status linear(const char *fn, const char *what, gpu_context *ctx, const gpu_linear *lin, const void *x,
                          size_t rows, size_t in, void *y, size_t ldy, bool accumulate) {
    const gpu_model *m = ctx->model;
    size_t es = gpu_dtype_bytes(m->dtype), col = 0;
    for (uint32_t p = 0; p < lin->parts; p++) {
        char *yp = (char *)y + col * es;
        bool acc = accumulate;
        if (lin->bias[p] != NULL) {
            LAUNCH("gpu_broadcast_row (bias)", -1,
                   gpu_broadcast_row(yp, ldy, lin->bias[p], rows, lin->out[p], m->dtype, ctx->stream));
            acc = true;
        }
        rmlp_status status = gpu_linear_gemm(fn, what, ctx->blas, x, in, rows, in, lin->w[p], lin->out[p], yp, ldy,
                                             acc, m->dtype);
        if (status != RMLP_OK) return status;
        col += lin->out[p];
    }
    return RMLP_OK;
}

static size_t q_dim(const rmlp_model_config *c) { return (size_t)c->num_attention_heads * c->head_dim; }
static size_t kv_dim(const rmlp_model_config *c) { return (size_t)c->num_key_value_heads * c->head_dim; }

extern "C" rmlp_status gpu_embed(const char *fn, gpu_context *ctx, void *hidden) {
    GPU_ON_DEVICE(fn, ctx->model->device);
    const gpu_model *m = ctx->model;
    size_t h = m->config.hidden_size;
    LAUNCH("gpu_gather_rows (embedding)", -1,
           gpu_gather_rows(hidden, m->embed, h, ctx->plan.ids, ctx->plan.plan.n_compact_padded, h, m->dtype,
                           ctx->stream));
    return RMLP_OK;
}

extern "C" rmlp_status gpu_pre_attention(const char *fn, gpu_context *ctx, uint32_t layer, const void *hidden,
                                         void *q, void *k, void *v) {
    GPU_ON_DEVICE(fn, ctx->model->device);
    const gpu_model *m = ctx->model;
    const rmlp_model_config *c = &m->config;
    const gpu_layer *lw = &m->layers[layer];
    const gpu_plan_state *p = &ctx->plan;
    size_t rows = p->plan.n_compact_padded, h = c->hidden_size, qd = q_dim(c), kvd = kv_dim(c), width = qd + 2 * kvd;
    size_t es = gpu_dtype_bytes(m->dtype);
    cudaStream_t s = ctx->stream;
    /* add == NULL: the kernel only reads `residual`. */
    LAUNCH("gpu_add_rmsnorm (input norm)", layer,
           gpu_add_rmsnorm((void *)hidden, NULL, lw->input_norm, rows, h, c->rms_norm_eps, ctx->normed, m->dtype, s));
    rmlp_status status = linear(fn, "qkv", ctx, &lw->qkv, ctx->normed, rows, h, ctx->qkv, width, false);
    if (status != RMLP_OK) return status;
    LAUNCH("gpu_qk_norm_rope", layer,
           gpu_qk_norm_rope(ctx->qkv, rows, width, c->num_attention_heads, c->num_key_value_heads, c->head_dim,
                            lw->q_norm, lw->k_norm, p->pos, c->rope_theta, c->rms_norm_eps, m->dtype, s));
    const char *qkv = (const char *)ctx->qkv;
    size_t n = p->plan.n_tokens;
    LAUNCH("gpu_gather_rows (scatter q)", layer, gpu_gather_rows(q, qkv, width, p->scatter, n, qd, m->dtype, s));
    LAUNCH("gpu_gather_rows (scatter k)", layer,
           gpu_gather_rows(k, qkv + qd * es, width, p->scatter, n, kvd, m->dtype, s));
    LAUNCH("gpu_gather_rows (scatter v)", layer,
           gpu_gather_rows(v, qkv + (qd + kvd) * es, width, p->scatter, n, kvd, m->dtype, s));
    return RMLP_OK;
}

extern "C" rmlp_status gpu_post_attention(const char *fn, gpu_context *ctx, uint32_t layer, const void *attn,
                                          void *hidden) {
    GPU_ON_DEVICE(fn, ctx->model->device);
    const gpu_model *m = ctx->model;
    const rmlp_model_config *c = &m->config;
    const gpu_layer *lw = &m->layers[layer];
    const gpu_plan_state *p = &ctx->plan;
    size_t rows = p->plan.n_compact_padded, h = c->hidden_size, inter = c->intermediate_size, qd = q_dim(c);
    cudaStream_t s = ctx->stream;
    LAUNCH("gpu_gather_rows (fold attention)", layer,
           gpu_gather_rows(ctx->attn_c, attn, qd, p->fold, rows, qd, m->dtype, s));
    rmlp_status status = linear(fn, "o_proj", ctx, &lw->o_proj, ctx->attn_c, rows, qd, hidden, h, true);
    if (status != RMLP_OK) return status;
    LAUNCH("gpu_add_rmsnorm (post-attention norm)", layer,
           gpu_add_rmsnorm(hidden, NULL, lw->post_norm, rows, h, c->rms_norm_eps, ctx->normed, m->dtype, s));
    status = linear(fn, "gate_up", ctx, &lw->gate_up, ctx->normed, rows, h, ctx->gu, 2 * inter, false);
    if (status != RMLP_OK) return status;
    LAUNCH("gpu_silu_mul", layer, gpu_silu_mul(ctx->gu, rows, inter, ctx->act, m->dtype, s));
    return linear(fn, "down_proj", ctx, &lw->down, ctx->act, rows, inter, hidden, h, true);
}

extern "C" rmlp_status gpu_final_norm(const char *fn, gpu_context *ctx, const void *hidden, void *out) {
    GPU_ON_DEVICE(fn, ctx->model->device);
    const gpu_model *m = ctx->model;
    const rmlp_model_config *c = &m->config;
    const gpu_plan_state *p = &ctx->plan;
    size_t h = c->hidden_size;
    LAUNCH("gpu_add_rmsnorm (final norm)", -1,
           gpu_add_rmsnorm((void *)hidden, NULL, m->final_norm, p->plan.n_compact, h, c->rms_norm_eps, ctx->normed,
                           m->dtype, ctx->stream));
    LAUNCH("gpu_gather_rows (scatter to batch rows)", -1,
           gpu_gather_rows(out, ctx->normed, h, p->scatter, p->plan.n_tokens, h, m->dtype, ctx->stream));
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
    uint32_t longest = 0;
    for (uint32_t i = 0; i < a->n_seqs; i++)
        if (a->cu_seqlens[i + 1] - a->cu_seqlens[i] > longest) longest = a->cu_seqlens[i + 1] - a->cu_seqlens[i];
    if (a->n_seqs > 65535 || a->n_heads > 65535)
        return rmlp_fail(RMLP_ERR_UNSUPPORTED, fn, "n_seqs=%u, n_heads=%u: the built-in CUDA attention takes at most "
                         "65535 of each", a->n_seqs, a->n_heads);
    if (a->head_dim > 256)
        return rmlp_fail(RMLP_ERR_UNSUPPORTED, fn, "head_dim=%u: the built-in CUDA attention takes at most 256",
                         a->head_dim);
    LAUNCH("gpu_attention", (long)a->layer,
           gpu_attention(a->q, a->k, a->v, a->out, cu, a->n_seqs, longest, a->n_tokens, a->n_heads, a->n_kv_heads,
                         a->head_dim, a->scale, ctx->model->dtype, ctx->stream));
    return RMLP_OK;
}

extern "C" rmlp_status gpu_forward(const char *fn, gpu_context *ctx, rmlp_attention_fn attention, void *user_data,
                                   void *out) {
    GPU_ON_DEVICE(fn, ctx->model->device); /* the host's attention runs with the model's device current */
    const gpu_model *m = ctx->model;
    const rmlp_model_config *c = &m->config;
    const gpu_plan_state *p = &ctx->plan;
    rmlp_status status = gpu_embed(fn, ctx, ctx->hidden);
    if (status != RMLP_OK) return status;
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
    args.out = ctx->attn;
    args.stream = (void *)ctx->stream;
    args.cu_seqlens_device = p->cu;
    args.max_seqlen = p->max_seqlen;
    for (uint32_t layer = 0; layer < c->num_hidden_layers; layer++) {
        status = gpu_pre_attention(fn, ctx, layer, ctx->hidden, ctx->q, ctx->k, ctx->v);
        if (status != RMLP_OK) return status;
        args.layer = layer;
        status = attention != NULL ? rmlp_call_attention(fn, attention, user_data, &args)
                                   : gpu_attention_run(fn, ctx, &args);
        if (status != RMLP_OK) return status;
        status = gpu_post_attention(fn, ctx, layer, ctx->attn, ctx->hidden);
        if (status != RMLP_OK) return status;
    }
    return gpu_final_norm(fn, ctx, ctx->hidden, out);
}
