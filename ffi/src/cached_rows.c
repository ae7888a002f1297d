/*
 * cached_rows.c: new rows through the model against a prefix cache's slots (cached_rows.h).
 */
#include <string.h>

#include "../../cache/kv_cache.h"
#include "../../cpu/layer.h"
#include "cached_rows.h"

/* Copies rows of src (n, dim, at src_stride) to dst's rows index[m] (dim, at dst_stride). */
static void put_rows(float *dst, size_t dst_stride, const uint32_t *index, const float *src, size_t src_stride,
                     size_t n, size_t dim) {
    for (size_t m = 0; m < n; m++) memcpy(dst + (size_t)index[m] * dst_stride, src + m * src_stride, dim * sizeof(float));
}

void cached_rows_run(rmlp_context *context, const rmlp_plan *rows, const uint32_t *slots,
                     cached_rows_attention attention, void *arg) {
    const rmlp_model_config *cfg = &context->model->config;
    const model_weights *w = &context->model->weights;
    cpu_workspace *ws = &context->ws;
    kv_cache *c = context->cache;
    size_t n = rows->n_compact, hsz = cfg->hidden_size, kvd = c->kv_dim;
    size_t qd = (size_t)cfg->num_attention_heads * cfg->head_dim, width = qd + 2 * kvd;
    cpu_embed(cfg, w, rows, ws->hidden);
    for (uint32_t layer = 0; layer < cfg->num_hidden_layers; layer++) {
        const layer_weights *lw = &w->layers[layer];
        float *k = c->k + (size_t)layer * c->n_slots * kvd, *v = c->v + (size_t)layer * c->n_slots * kvd;
        cpu_project_qkv(cfg, lw, ws, rows, ws->hidden);
        put_rows(k, kvd, slots, ws->qkv + qd, width, n, kvd);
        put_rows(v, kvd, slots, ws->qkv + qd + kvd, width, n, kvd);
        cpu_attention_rows attn = {ws->qkv, k, v, ws->attn_c, width, kvd, kvd, qd};
        attention(arg, &attn);
        cpu_post_attention_compact(cfg, lw, ws, rows, ws->attn_c, ws->hidden);
    }
    cpu_final_norm_compact(cfg, w, rows, ws->hidden, ws->proj);
    put_rows(c->hidden, hsz, slots, ws->proj, hsz, n, hsz);
}
