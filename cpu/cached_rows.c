/*
 * cached_rows.c: new rows through the model against a prefix cache's slots (runner.h): what the
 * cached forward (forward.c) and a generation step (decode.c) share.
 */
#include <string.h>

#include "cache/kv_cache.h"
#include "runner.h"

/* Copies rows of src (n, dim, at src_stride) to dst's rows index[m] (dim, at dst_stride). */
static void put_rows(float *dst, size_t dst_stride, const uint32_t *index, const float *src, size_t src_stride,
                     size_t n, size_t dim) {
    for (size_t m = 0; m < n; m++) memcpy(dst + (size_t)index[m] * dst_stride, src + m * src_stride, dim * sizeof(float));
}

/* Copies the K or V rows of src (n, n_kv_heads x head_dim, at src_stride) into a layer's slots
 * index[m] of the cache's (n_kv_heads, n_slots, head_dim). */
static void put_heads(float *dst, size_t n_slots, const uint32_t *index, const float *src, size_t src_stride,
                      size_t n, size_t n_kv_heads, size_t head_dim) {
    for (size_t g = 0; g < n_kv_heads; g++)
        put_rows(dst + g * n_slots * head_dim, head_dim, index, src + g * head_dim, src_stride, n, head_dim);
}

void cpu_cached_rows_run(cpu_context *ctx, kv_cache *c, const rmlp_plan *rows, const uint32_t *slots,
                         cached_rows_attention attention, void *arg) {
    const rmlp_model_config *cfg = ctx->config;
    const model_weights *w = ctx->weights;
    cpu_workspace *ws = &ctx->ws;
    size_t n = rows->n_compact, hsz = cfg->hidden_size, kvd = c->kv_dim;
    size_t nkv = cfg->num_key_value_heads, hd = cfg->head_dim;
    size_t qd = (size_t)cfg->num_attention_heads * cfg->head_dim, width = qd + 2 * kvd;
    cpu_profile *prof = &ws->profile;
    cpu_rope_begin(cfg, ws, rows);
    cpu_embed(cfg, w, rows, ws->hidden);
    cpu_profile_mark(prof, CPU_PHASE_GATHER);
    for (uint32_t layer = 0; layer < cfg->num_hidden_layers; layer++) {
        const layer_weights *lw = &w->layers[layer];
        const layer_attention *la = &w->ext->layers[layer];
        float *k = c->k + (size_t)layer * c->n_slots * kvd, *v = c->v + (size_t)layer * c->n_slots * kvd;
        cpu_project_qkv(cfg, lw, la, ws, rows, ws->hidden);
        put_heads(k, c->n_slots, slots, ws->qkv + qd, width, n, nkv, hd);
        put_heads(v, c->n_slots, slots, ws->qkv + qd + kvd, width, n, nkv, hd);
        cpu_profile_mark(prof, CPU_PHASE_GATHER);
        cpu_attention_rows attn = {ws->qkv, k, v, ws->attn_c, width, hd, hd, qd, c->n_slots * hd};
        attention(arg, &attn, la);
        cpu_profile_mark(prof, CPU_PHASE_ATTENTION);
        cpu_post_attention_compact(cfg, lw, ws, rows, ws->attn_c, ws->hidden);
    }
    cpu_final_norm_compact(cfg, w, ws, rows, ws->hidden, ws->proj);
    cpu_profile_mark(prof, CPU_PHASE_ELEMENTWISE);
    put_rows(c->hidden, hsz, slots, ws->proj, hsz, n, hsz);
    cpu_profile_mark(prof, CPU_PHASE_GATHER);
    cpu_rope_end(ws);
}
