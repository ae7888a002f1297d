/*
 * fixtures.c: reading a fixture's batch.json (see fixtures.h) with jansson; the per-layer run.
 */
#include "fixtures.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int fixture_read_batch(const char *path, fixture_batch *b, char *why, size_t why_len) {
    memset(b, 0, sizeof *b);
    json_error_t error;
    json_t *root = json_load_file(path, 0, &error);
    json_t *seqs = root ? json_object_get(root, "input_ids") : NULL;
    if (!json_is_array(seqs)) {
        snprintf(why, why_len, "%s: no input_ids array (%s)", path, root ? "" : error.text);
        json_decref(root);
        return -1;
    }
    b->n_seqs = json_array_size(seqs);
    for (size_t s = 0; s < b->n_seqs; s++) b->n_tokens += json_array_size(json_array_get(seqs, s));
    b->ids = malloc(b->n_tokens * sizeof(uint32_t) + 4);
    b->pos = malloc(b->n_tokens * sizeof(uint32_t) + 4);
    b->cu = malloc((b->n_seqs + 1) * sizeof(uint32_t));
    if (b->ids == NULL || b->pos == NULL || b->cu == NULL) {
        snprintf(why, why_len, "%s: out of memory for %zu tokens", path, b->n_tokens);
        fixture_batch_free(b);
        json_decref(root);
        return -1;
    }
    size_t row = 0;
    b->cu[0] = 0;
    for (size_t s = 0; s < b->n_seqs; s++) {
        json_t *seq = json_array_get(seqs, s);
        for (size_t t = 0; t < json_array_size(seq); t++, row++) {
            b->ids[row] = (uint32_t)json_integer_value(json_array_get(seq, t));
            b->pos[row] = (uint32_t)t;
        }
        b->cu[s + 1] = (uint32_t)row;
    }
    json_decref(root);
    return 0;
}

void fixture_batch_free(fixture_batch *b) {
    free(b->ids);
    free(b->pos);
    free(b->cu);
    memset(b, 0, sizeof *b);
}

rmlp_status fixture_run_per_layer(rmlp_context *ctx, const rmlp_model *model, const rmlp_plan *plan,
                                  rmlp_attention_args *args, void *hidden, void *q, void *k, void *v, void *out,
                                  bool compact) {
    rmlp_model_config cfg;
    rmlp_status status = rmlp_model_get_config(model, &cfg);
    if (status != RMLP_OK) return status;
    args->q = q, args->k = k, args->v = v;
    if (compact) {
        args->layout = RMLP_ATTENTION_COMPACT;
        args->n_compact = plan->n_compact;
        args->qo_indptr = plan->qo_indptr, args->kv_indptr = plan->cu_seqlens, args->kv_indices = plan->scatter;
        args->qo_indptr_device = args->kv_indptr_device = args->kv_indices_device = NULL;
    }
    status = rmlp_embed(ctx, plan, hidden);
    for (uint32_t layer = 0; status == RMLP_OK && layer < cfg.num_hidden_layers; layer++) {
        rmlp_layer_attention la;
        status = rmlp_model_layer_attention(model, layer, &la);
        if (status != RMLP_OK) break;
        args->layer = layer;
        args->scale = la.scale, args->sliding_window = la.sliding_window, args->softcap = la.softcap;
        status = compact ? rmlp_layer_pre_attention_compact(ctx, layer, plan, hidden, q, k, v)
                         : rmlp_layer_pre_attention(ctx, layer, plan, hidden, q, k, v);
        if (status == RMLP_OK) status = compact ? rmlp_attention_compact(ctx, args) : rmlp_attention(ctx, args);
        if (status == RMLP_OK)
            status = compact ? rmlp_layer_post_attention_compact(ctx, layer, plan, args->out, hidden)
                             : rmlp_layer_post_attention(ctx, layer, plan, args->out, hidden);
    }
    if (status != RMLP_OK) return status;
    return compact ? rmlp_final_norm_compact(ctx, plan, hidden, out) : rmlp_final_norm(ctx, plan, hidden, out);
}
