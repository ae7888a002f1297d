/*
 * layer.c: the decoder layer of layer.h, composed from BLAS's GEMMs (cpu_ops.h), the fused
 * elementwise passes (rows.h) and the flash-style attention (attention_flash.h), and the context
 * workspace it runs in (allocated, its threads started, once per context; the calls never
 * allocate).
 */
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "cpu_ops.h"
#include "layer.h"
#include "attention_flash.h"
#include "linear_bf16.h"
#include "linear_few.h"
#include "linear_onednn.h"
#include "rows.h"
#include "threads.h"

/* x W^T (+ bias), W in fp32 (w) or bf16 (w16, the other NULL): a generation step's way where the
 * workspace asks for it (linear_few.h, its bf16 form on widened rows), else oneDNN's bf16 matmul
 * for a model on it (linear_onednn.h; where oneDNN fails, counted, the widening path), else BLAS
 * (bf16: on linear_bf16.h's widened panels). */
static void linear(const cpu_workspace *ws, const float *x, size_t rows, size_t in_dim, const float *w,
                   const uint16_t *w16, const float *bias, size_t out_dim, float *y) {
    if (w16 != NULL && ws->few_rows)
        cpu_linear_step_bf16(x, rows, in_dim, w16, bias, out_dim, y, ws->few_rows_pool, ws->few_rows_wide, ws->wide);
    else if (w16 != NULL) {
        if (ws->x16 != NULL && cpu_linear_onednn(x, rows, in_dim, w16, bias, out_dim, y, ws->x16, ws->pool) == 0)
            return;
        if (ws->x16 != NULL) __atomic_fetch_add(ws->onednn_fallbacks, 1, __ATOMIC_RELAXED);
        cpu_linear_bf16(x, rows, in_dim, w16, bias, out_dim, y, ws->wide, ws->pool);
    } else if (ws->few_rows) cpu_linear_step(x, rows, in_dim, w, bias, out_dim, y, ws->few_rows_pool);
    else cpu_linear(x, rows, in_dim, w, bias, out_dim, y, ws->pool);
}

static size_t q_dim(const rmlp_model_config *c) { return (size_t)c->num_attention_heads * c->head_dim; }
static size_t kv_dim(const rmlp_model_config *c) { return (size_t)c->num_key_value_heads * c->head_dim; }

int cpu_workspace_alloc(cpu_workspace *ws, const rmlp_model_config *cfg, const model_ext *ext, size_t max_tokens,
                        size_t max_compact, bool bf16_weights, uint64_t *onednn_fallbacks, const char **failed_name, size_t *failed_bytes,
                        int *thread_error) {
    size_t hidden = cfg->hidden_size, inter = cfg->intermediate_size, qd = q_dim(cfg), kvd = kv_dim(cfg);
    size_t wide = 0; /* a bf16 model's widest panel, over its four matrices (in, out) */
    const size_t shapes[4][2] = {{hidden, qd + 2 * kvd}, {qd, hidden}, {hidden, 2 * inter}, {inter, hidden}};
    for (size_t i = 0; bf16_weights && i < 4; i++) {
        size_t floats = cpu_linear_bf16_scratch_floats(shapes[i][0], shapes[i][1]);
        wide = floats > wide ? floats : wide;
    }
    *ws = (cpu_workspace){.cap_tokens = max_tokens, .cap_compact = max_compact, .ext = ext};
    struct {
        float **array;
        size_t floats;
        const char *name;
    } parts[] = {
        {&ws->normed, max_compact * hidden, "normed"}, {&ws->qkv, max_compact * (qd + 2 * kvd), "qkv"},
        {&ws->attn_c, max_compact * qd, "attn_c"},     {&ws->gu, max_compact * 2 * inter, "gate_up"},
        {&ws->act, max_compact * inter, "act"},        {&ws->proj, max_compact * hidden, "proj"},
        {&ws->hidden, max_compact * hidden, "hidden"}, {&ws->q, max_tokens * qd, "q"},
        {&ws->attn, max_tokens * qd, "attn"},          {&ws->k, max_tokens * kvd, "k"},
        {&ws->v, max_tokens * kvd, "v"},             {&ws->rope_cs, ext->n_rope * max_compact * cfg->head_dim, "rope"},
        {&ws->wide, wide, "bf16 weight panel"}, /* last: an fp32 model has none */
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0] - (bf16_weights ? 0 : 1); i++) {
        size_t bytes = (parts[i].floats ? parts[i].floats : 1) * sizeof(float);
        *parts[i].array = rmlp_malloc(bytes);
        if (*parts[i].array == NULL) {
            cpu_workspace_free(ws);
            *failed_name = parts[i].name;
            *failed_bytes = bytes;
            return -1;
        }
        memset(*parts[i].array, 0, bytes); /* fault the pages in now, not during the first batch */
    }
    size_t threads = cpu_threads() < WORKERS_MAX ? cpu_threads() : WORKERS_MAX;
    if (threads > 1 && (ws->pool = workers_create(threads, thread_error)) == NULL) {
        cpu_workspace_free(ws);
        *failed_name = "threads";
        *failed_bytes = 0;
        return -1;
    }
    size_t flash = workers_count(ws->pool) *
                   flash_scratch_floats(cfg->num_attention_heads, cfg->num_key_value_heads, cfg->head_dim);
    if ((ws->flash = rmlp_malloc(flash * sizeof(float))) == NULL) {
        cpu_workspace_free(ws);
        *failed_name = "attention scratch";
        *failed_bytes = flash * sizeof(float);
        return -1;
    }
    if (onednn_fallbacks != NULL) {
        size_t widest = hidden > qd ? hidden : qd, bytes;
        widest = inter > widest ? inter : widest;
        bytes = (max_compact ? max_compact : 1) * widest * sizeof(uint16_t);
        if ((ws->x16 = rmlp_malloc(bytes)) == NULL) {
            cpu_workspace_free(ws);
            *failed_name = "bf16 activations";
            *failed_bytes = bytes;
            return -1;
        }
        ws->onednn_fallbacks = onednn_fallbacks;
    }
    return 0;
}

void cpu_workspace_free(cpu_workspace *ws) {
    float *arrays[] = {ws->normed, ws->qkv, ws->attn_c, ws->gu, ws->act,
                       ws->proj,   ws->hidden, ws->q,   ws->attn, ws->k, ws->v, ws->rope_cs, ws->wide};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) free(arrays[i]);
    free(ws->flash);
    free(ws->x16);
    workers_destroy(ws->pool);
    *ws = (cpu_workspace){0};
}

void cpu_rope_begin(const rmlp_model_config *cfg, cpu_workspace *ws, const rmlp_plan *plan) {
    for (uint32_t r = 0; r < ws->ext->n_rope; r++)
        rows_rope_table(plan->compact_position_ids, plan->n_compact_padded, cfg->head_dim, &ws->ext->rope[r],
                        ws->rope_cs + (size_t)r * ws->cap_compact * cfg->head_dim);
    ws->rope_ready = true;
}

void cpu_rope_end(cpu_workspace *ws) { ws->rope_ready = false; }

/* Both layouts run the flash-style kernel on the context's pool: against the BLAS-tile kernels of
 * attention.c (now the tests' reference) it took attention from 17.8 s to 9.7 s on 32 sequences of
 * 2,304 tokens and from 307 to 244 ms on SmolLM2's rerank batch (docs/bench/cpu-path.md). */
void cpu_attend_full(cpu_workspace *ws, const float *q, const float *k, const float *v, const uint32_t *cu_seqlens,
                     size_t n_seqs, size_t n_heads, size_t n_kv_heads, size_t head_dim, const layer_attention *la,
                     float *out) {
    size_t qd = n_heads * head_dim, kvd = n_kv_heads * head_dim;
    cpu_attention_rows rows = {q, k, v, out, qd, kvd, kvd, qd, 0};
    cpu_flash_attention(&rows, cu_seqlens, cu_seqlens, NULL, n_seqs, n_heads, n_kv_heads, head_dim, la, ws->pool,
                        ws->flash);
}

void cpu_attend_compact(cpu_workspace *ws, const cpu_attention_rows *rows, const uint32_t *qo_indptr,
                        const uint32_t *kv_indptr, const uint32_t *kv_indices, size_t n_seqs, size_t n_heads,
                        size_t n_kv_heads, size_t head_dim, const layer_attention *la) {
    cpu_flash_attention(rows, qo_indptr, kv_indptr, kv_indices, n_seqs, n_heads, n_kv_heads, head_dim, la, ws->pool,
                        ws->flash);
}

void cpu_embed(const rmlp_model_config *cfg, const model_weights *w, const rmlp_plan *plan, float *hidden) {
    cpu_gather_rows(w->embed, cfg->hidden_size, plan->compact_input_ids, plan->n_compact_padded, cfg->hidden_size,
                    hidden);
    if (cfg->embedding_scale == 0.0) return;
    /* Gemma: the rows times sqrt(hidden_size) as an fp32 tensor, transformers' normalizer in fp32 */
    float scale = (float)cfg->embedding_scale;
    size_t n = (size_t)plan->n_compact_padded * cfg->hidden_size;
    for (size_t i = 0; i < n; i++) hidden[i] *= scale;
}

void cpu_project_qkv(const rmlp_model_config *cfg, const layer_weights *lw, const layer_attention *la,
                     cpu_workspace *ws, const rmlp_plan *plan, const float *hidden) {
    size_t rows = plan->n_compact_padded, hsz = cfg->hidden_size, hd = cfg->head_dim;
    size_t qd = q_dim(cfg), kvd = kv_dim(cfg), width = qd + 2 * kvd;
    /* the layer's table: the forward's (one per RoPE), or this call's angles for a per-layer call */
    float *cs = ws->rope_ready ? ws->rope_cs + (size_t)la->rope * ws->cap_compact * hd : ws->rope_cs;
    rows_rmsnorm(ws->pool, hidden, rows, hsz, lw->input_norm, cfg->rms_norm_eps, ws->normed);
    if (!ws->rope_ready) rows_rope_table(plan->compact_position_ids, rows, hd, &ws->ext->rope[la->rope], cs);
    cpu_profile_mark(&ws->profile, CPU_PHASE_ELEMENTWISE);
    linear(ws, ws->normed, rows, hsz, lw->qkv, lw->qkv_bf16, lw->qkv_bias, width, ws->qkv);
    cpu_profile_mark(&ws->profile, CPU_PHASE_GEMM);
    /* q and k heads: per-head RMSNorm (where the model has it), then RoPE */
    rows_qk_norm_rope(ws->pool, ws->qkv, rows, width, cfg->num_attention_heads, cfg->num_key_value_heads, hd,
                      lw->q_norm, lw->k_norm, cfg->rms_norm_eps, cs);
    cpu_profile_mark(&ws->profile, CPU_PHASE_ELEMENTWISE);
}

/* q, k, v (rows, q_dim / kv_dim) = the columns of ws->qkv rows index[r] (NULL: row r). */
static void split_qkv(const rmlp_model_config *cfg, cpu_workspace *ws, const uint32_t *index, size_t rows,
                      float *q, float *k, float *v) {
    size_t qd = q_dim(cfg), kvd = kv_dim(cfg), width = qd + 2 * kvd;
    for (size_t i = 0; i < rows; i++) {
        const float *src = ws->qkv + (index != NULL ? (size_t)index[i] : i) * width;
        memcpy(q + i * qd, src, qd * sizeof(float));
        memcpy(k + i * kvd, src + qd, kvd * sizeof(float));
        memcpy(v + i * kvd, src + qd + kvd, kvd * sizeof(float));
    }
    cpu_profile_mark(&ws->profile, CPU_PHASE_GATHER);
}

void cpu_pre_attention(const rmlp_model_config *cfg, const layer_weights *lw, const layer_attention *la,
                       cpu_workspace *ws, const rmlp_plan *plan, const float *hidden, float *q, float *k, float *v) {
    cpu_project_qkv(cfg, lw, la, ws, plan, hidden);
    split_qkv(cfg, ws, plan->scatter, plan->n_tokens, q, k, v); /* scatter to the batch rows */
}

void cpu_pre_attention_compact(const rmlp_model_config *cfg, const layer_weights *lw, const layer_attention *la,
                               cpu_workspace *ws, const rmlp_plan *plan, const float *hidden, size_t rows, float *q,
                               float *k, float *v) {
    cpu_project_qkv(cfg, lw, la, ws, plan, hidden);
    split_qkv(cfg, ws, NULL, rows, q, k, v);
}

void cpu_post_attention_compact(const rmlp_model_config *cfg, const layer_weights *lw, cpu_workspace *ws,
                                const rmlp_plan *plan, const float *attn_c, float *hidden) {
    size_t rows = plan->n_compact_padded, hsz = cfg->hidden_size, inter = cfg->intermediate_size, qd = q_dim(cfg);
    cpu_profile *prof = &ws->profile;
    /* the residual is added in the pass that norms it (adding it in the GEMM, beta 1, was tried: a
     * gain within the machine's noise, not kept) */
    linear(ws, attn_c, rows, qd, lw->o_proj, lw->o_proj_bf16, lw->o_bias, hsz, ws->proj);
    cpu_profile_mark(prof, CPU_PHASE_GEMM);
    if (cfg->sandwich_norms) /* Gemma 2: the output normed before its residual add */
        rows_norm_add_rmsnorm(ws->pool, hidden, ws->proj, lw->attn_out_norm, rows, hsz, lw->post_norm,
                              cfg->rms_norm_eps, ws->normed);
    else
        rows_add_rmsnorm(ws->pool, hidden, ws->proj, rows, hsz, lw->post_norm, cfg->rms_norm_eps, ws->normed);
    cpu_profile_mark(prof, CPU_PHASE_ELEMENTWISE);
    linear(ws, ws->normed, rows, hsz, lw->gate_up, lw->gate_up_bf16, lw->gate_up_bias, 2 * inter, ws->gu);
    cpu_profile_mark(prof, CPU_PHASE_GEMM);
    rows_gated_mul(ws->pool, cfg->activation, ws->gu, rows, inter, ws->act);
    cpu_profile_mark(prof, CPU_PHASE_ELEMENTWISE);
    linear(ws, ws->act, rows, inter, lw->down, lw->down_bf16, lw->down_bias, hsz, ws->proj);
    cpu_profile_mark(prof, CPU_PHASE_GEMM);
    if (cfg->sandwich_norms)
        rows_norm_add_rmsnorm(ws->pool, hidden, ws->proj, lw->mlp_out_norm, rows, hsz, NULL, cfg->rms_norm_eps, NULL);
    else
        rows_add(ws->pool, hidden, ws->proj, rows, hsz);
    cpu_profile_mark(prof, CPU_PHASE_ELEMENTWISE);
}

void cpu_post_attention(const rmlp_model_config *cfg, const layer_weights *lw, cpu_workspace *ws,
                        const rmlp_plan *plan, const float *attn, float *hidden) {
    size_t qd = q_dim(cfg);
    cpu_gather_rows(attn, qd, plan->fold_gather, plan->n_compact_padded, qd, ws->attn_c);
    cpu_profile_mark(&ws->profile, CPU_PHASE_GATHER);
    cpu_post_attention_compact(cfg, lw, ws, plan, ws->attn_c, hidden);
}

void cpu_final_norm(const rmlp_model_config *cfg, const model_weights *w, cpu_workspace *ws, const rmlp_plan *plan,
                    const float *hidden, float *out) {
    size_t hsz = cfg->hidden_size;
    rows_rmsnorm(ws->pool, hidden, plan->n_compact, hsz, w->final_norm, cfg->rms_norm_eps, ws->normed);
    cpu_profile_mark(&ws->profile, CPU_PHASE_ELEMENTWISE);
    cpu_gather_rows(ws->normed, hsz, plan->scatter, plan->n_tokens, hsz, out);
    cpu_profile_mark(&ws->profile, CPU_PHASE_GATHER);
}

void cpu_final_norm_compact(const rmlp_model_config *cfg, const model_weights *w, cpu_workspace *ws, const rmlp_plan *plan,
                            const float *hidden, float *out) {
    size_t hsz = cfg->hidden_size;
    rows_rmsnorm(ws->pool, hidden, plan->n_compact_padded, hsz, w->final_norm, cfg->rms_norm_eps, out);
}
