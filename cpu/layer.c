/*
 * layer.c: the decoder layer of layer.h, composed from the kernels of cpu_ops.h, and the
 * context workspace it runs in (allocated once per context; the calls never allocate).
 */
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "cpu_ops.h"
#include "layer.h"
#include "linear_few.h"

/* x W^T (+ bias): a generation step's way where the workspace asks for it, else BLAS. */
static void linear(const cpu_workspace *ws, const float *x, size_t rows, size_t in_dim, const float *w,
                   const float *bias, size_t out_dim, float *y) {
    if (ws->few_rows) cpu_linear_step(x, rows, in_dim, w, bias, out_dim, y, ws->few_rows_pool);
    else cpu_linear(x, rows, in_dim, w, bias, out_dim, y);
}

static size_t q_dim(const rmlp_model_config *c) { return (size_t)c->num_attention_heads * c->head_dim; }
static size_t kv_dim(const rmlp_model_config *c) { return (size_t)c->num_key_value_heads * c->head_dim; }

int cpu_workspace_alloc(cpu_workspace *ws, const rmlp_model_config *cfg, size_t max_tokens, size_t max_compact,
                        const char **failed_name, size_t *failed_bytes) {
    size_t hidden = cfg->hidden_size, inter = cfg->intermediate_size, qd = q_dim(cfg), kvd = kv_dim(cfg);
    *ws = (cpu_workspace){.cap_tokens = max_tokens, .cap_compact = max_compact};
    struct {
        float **array;
        size_t floats;
        const char *name;
    } parts[] = {
        {&ws->normed, max_compact * hidden, "normed"}, {&ws->qkv, max_compact * (qd + 2 * kvd), "qkv"},
        {&ws->attn_c, max_compact * qd, "attn_c"},     {&ws->gu, max_compact * 2 * inter, "gate_up"},
        {&ws->act, max_compact * inter, "act"},        {&ws->proj, max_compact * hidden, "proj"},
        {&ws->scores, cpu_attention_scratch_floats(max_tokens, cfg->head_dim), "scores"},
        {&ws->hidden, max_compact * hidden, "hidden"}, {&ws->q, max_tokens * qd, "q"},
        {&ws->attn, max_tokens * qd, "attn"},          {&ws->k, max_tokens * kvd, "k"},
        {&ws->v, max_tokens * kvd, "v"},
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
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
    return 0;
}

void cpu_workspace_free(cpu_workspace *ws) {
    float *arrays[] = {ws->normed, ws->qkv, ws->attn_c, ws->gu,   ws->act, ws->proj,
                       ws->scores, ws->hidden, ws->q,   ws->attn, ws->k,   ws->v};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) free(arrays[i]);
    *ws = (cpu_workspace){0};
}

void cpu_embed(const rmlp_model_config *cfg, const model_weights *w, const rmlp_plan *plan, float *hidden) {
    cpu_gather_rows(w->embed, cfg->hidden_size, plan->compact_input_ids, plan->n_compact_padded, cfg->hidden_size,
                    hidden);
}

void cpu_project_qkv(const rmlp_model_config *cfg, const layer_weights *lw, cpu_workspace *ws, const rmlp_plan *plan,
                     const float *hidden) {
    size_t rows = plan->n_compact_padded, hsz = cfg->hidden_size, hd = cfg->head_dim;
    size_t qd = q_dim(cfg), kvd = kv_dim(cfg), width = qd + 2 * kvd;
    cpu_rmsnorm(hidden, rows, hsz, hsz, lw->input_norm, cfg->rms_norm_eps, ws->normed);
    cpu_profile_mark(&ws->profile, CPU_PHASE_ELEMENTWISE);
    linear(ws, ws->normed, rows, hsz, lw->qkv, lw->qkv_bias, width, ws->qkv);
    cpu_profile_mark(&ws->profile, CPU_PHASE_GEMM);
    float *qc = ws->qkv, *kc = ws->qkv + qd;
    if (lw->q_norm != NULL) { /* per-head RMSNorm: each head is a row of head_dim */
        for (size_t r = 0; r < rows; r++) {
            cpu_rmsnorm(qc + r * width, cfg->num_attention_heads, hd, hd, lw->q_norm, cfg->rms_norm_eps,
                        qc + r * width);
            cpu_rmsnorm(kc + r * width, cfg->num_key_value_heads, hd, hd, lw->k_norm, cfg->rms_norm_eps,
                        kc + r * width);
        }
    }
    cpu_rope(qc, rows, width, cfg->num_attention_heads, hd, plan->compact_position_ids, cfg->rope_theta);
    cpu_rope(kc, rows, width, cfg->num_key_value_heads, hd, plan->compact_position_ids, cfg->rope_theta);
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

void cpu_pre_attention(const rmlp_model_config *cfg, const layer_weights *lw, cpu_workspace *ws,
                       const rmlp_plan *plan, const float *hidden, float *q, float *k, float *v) {
    cpu_project_qkv(cfg, lw, ws, plan, hidden);
    split_qkv(cfg, ws, plan->scatter, plan->n_tokens, q, k, v); /* scatter to the batch rows */
}

void cpu_pre_attention_compact(const rmlp_model_config *cfg, const layer_weights *lw, cpu_workspace *ws,
                               const rmlp_plan *plan, const float *hidden, size_t rows, float *q, float *k, float *v) {
    cpu_project_qkv(cfg, lw, ws, plan, hidden);
    split_qkv(cfg, ws, NULL, rows, q, k, v);
}

void cpu_post_attention_compact(const rmlp_model_config *cfg, const layer_weights *lw, cpu_workspace *ws,
                                const rmlp_plan *plan, const float *attn_c, float *hidden) {
    size_t rows = plan->n_compact_padded, hsz = cfg->hidden_size, inter = cfg->intermediate_size, qd = q_dim(cfg);
    cpu_profile *prof = &ws->profile;
    linear(ws, attn_c, rows, qd, lw->o_proj, lw->o_bias, hsz, ws->proj);
    cpu_profile_mark(prof, CPU_PHASE_GEMM);
    cpu_add(hidden, ws->proj, rows, hsz);
    cpu_rmsnorm(hidden, rows, hsz, hsz, lw->post_norm, cfg->rms_norm_eps, ws->normed);
    cpu_profile_mark(prof, CPU_PHASE_ELEMENTWISE);
    linear(ws, ws->normed, rows, hsz, lw->gate_up, lw->gate_up_bias, 2 * inter, ws->gu);
    cpu_profile_mark(prof, CPU_PHASE_GEMM);
    cpu_silu_mul(ws->gu, rows, inter, ws->act);
    cpu_profile_mark(prof, CPU_PHASE_ELEMENTWISE);
    linear(ws, ws->act, rows, inter, lw->down, lw->down_bias, hsz, ws->proj);
    cpu_profile_mark(prof, CPU_PHASE_GEMM);
    cpu_add(hidden, ws->proj, rows, hsz);
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
    cpu_rmsnorm(hidden, plan->n_compact, hsz, hsz, w->final_norm, cfg->rms_norm_eps, ws->normed);
    cpu_profile_mark(&ws->profile, CPU_PHASE_ELEMENTWISE);
    cpu_gather_rows(ws->normed, hsz, plan->scatter, plan->n_tokens, hsz, out);
    cpu_profile_mark(&ws->profile, CPU_PHASE_GATHER);
}

void cpu_final_norm_compact(const rmlp_model_config *cfg, const model_weights *w, const rmlp_plan *plan,
                            const float *hidden, float *out) {
    size_t hsz = cfg->hidden_size;
    cpu_rmsnorm(hidden, plan->n_compact_padded, hsz, hsz, w->final_norm, cfg->rms_norm_eps, out);
}
