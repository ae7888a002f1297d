/*
 * kv_cache.c: a prefix cache's storage (on the CPU), scratch and batch arrays (kv_cache.h).
 */
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "kv_cache.h"

uint64_t kv_cache_slot_bytes(const rmlp_model_config *cfg, size_t elem_bytes) {
    uint64_t kv_dim = (uint64_t)cfg->num_key_value_heads * cfg->head_dim;
    return (2 * (uint64_t)cfg->num_hidden_layers * kv_dim + cfg->hidden_size) * elem_bytes;
}

void kv_cache_free(kv_cache *c) {
    if (c == NULL) return;
    kv_pool_free(c->pool);
    free(c->k), free(c->v), free(c->hidden);
    free(c->batch.slot_of), free(c->batch.computed), free(c->batch.cqo_indptr);
    free(c->path), free(c->ids), free(c->pos), free(c->slots), free(c->out_slots);
    free(c);
}

kv_cache *kv_cache_new(const rmlp_model_config *cfg, uint64_t budget, size_t elem_bytes, bool host_storage,
                       size_t cap_tokens, size_t cap_compact, const char **failed_name, size_t *failed_bytes) {
    kv_cache *c = rmlp_calloc(1, sizeof *c);
    *failed_name = "prefix cache", *failed_bytes = sizeof *c;
    if (c == NULL) return NULL;
    c->bytes_per_slot = kv_cache_slot_bytes(cfg, host_storage ? sizeof(float) : elem_bytes);
    uint64_t slots = budget / c->bytes_per_slot;
    c->n_slots = slots > UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)slots;
    c->n_layers = cfg->num_hidden_layers;
    c->kv_dim = cfg->num_key_value_heads * cfg->head_dim;
    c->hidden_size = cfg->hidden_size;
    c->budget = budget;
    size_t layer_floats = host_storage ? (size_t)c->n_slots * c->kv_dim * c->n_layers : 0;
    size_t hidden_floats = host_storage ? (size_t)c->n_slots * c->hidden_size : 0;
    struct {
        void **at;
        size_t bytes;
        const char *name;
    } parts[] = {
        {(void **)&c->k, layer_floats * sizeof(float), "prefix cache K"},
        {(void **)&c->v, layer_floats * sizeof(float), "prefix cache V"},
        {(void **)&c->hidden, hidden_floats * sizeof(float), "prefix cache hidden"},
        {(void **)&c->batch.slot_of, cap_compact * sizeof(uint32_t), "prefix cache slot_of"},
        {(void **)&c->batch.computed, cap_compact * sizeof(uint32_t), "prefix cache computed"},
        {(void **)&c->batch.cqo_indptr, (cap_tokens + 1) * sizeof(uint32_t), "prefix cache cqo_indptr"},
        {(void **)&c->path, cap_tokens * sizeof(uint32_t), "prefix cache path"},
        {(void **)&c->ids, cap_compact * sizeof(uint32_t), "prefix cache ids"},
        {(void **)&c->pos, cap_compact * sizeof(uint32_t), "prefix cache positions"},
        {(void **)&c->slots, cap_compact * sizeof(uint32_t), "prefix cache slots"},
        {(void **)&c->out_slots, cap_compact * sizeof(uint32_t), "prefix cache output slots"},
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        if (parts[i].bytes == 0) continue; /* no host storage, or no slots: stays NULL */
        /* cache-line aligned: with head_dim a multiple of 16 every K/V row is, and the decode
         * attention's vector loads never straddle two lines */
        *parts[i].at = rmlp_malloc_aligned(parts[i].bytes);
        if (*parts[i].at == NULL) {
            *failed_name = parts[i].name, *failed_bytes = parts[i].bytes;
            kv_cache_free(c);
            return NULL;
        }
    }
    c->pool = kv_pool_new(c->n_slots);
    if (c->pool == NULL) {
        *failed_name = "prefix cache index", *failed_bytes = (size_t)c->n_slots * 64;
        kv_cache_free(c);
        return NULL;
    }
    return c;
}

int kv_cache_begin(kv_cache *c, const rmlp_plan *plan, forward_rows rows) {
    kv_batch *b = &c->batch;
    if (kv_pool_begin(c->pool, plan, b) != 0) return 1;
    for (size_t r = 0; r < b->n_computed; r++) {
        uint32_t j = b->computed[r];
        c->ids[r] = plan->compact_input_ids[j], c->pos[r] = plan->compact_position_ids[j], c->slots[r] = b->slot_of[j];
    }
    for (size_t i = 0; i < plan->n_tokens; i++) c->path[i] = b->slot_of[plan->scatter[i]];
    c->n_out = (uint32_t)forward_rows_count(plan, rows);
    for (size_t i = 0; i < c->n_out; i++) /* the last rows: the whole forward ran, they are read from their slots */
        c->out_slots[i] = rows == FORWARD_COMPACT_ROWS ? b->slot_of[i]
                          : rows == FORWARD_LAST_ROWS  ? c->path[plan->cu_seqlens[i + 1] - 1]
                                                       : c->path[i];
    return 0;
}

rmlp_cache_stats kv_cache_stats(const kv_cache *c) {
    kv_pool_counts n = kv_pool_counts_of(c->pool);
    return (rmlp_cache_stats){
        .batches = n.batches,
        .bypassed = n.bypassed,
        .lookups = n.lookups,
        .hit_tokens = n.hits,
        .computed_tokens = n.computed,
        .evicted_tokens = n.evicted,
        .slots = n.slots,
        .slots_used = n.used,
        .bytes_per_slot = c->bytes_per_slot,
        .bytes_budget = c->budget,
        .bytes_in_use = (uint64_t)n.used * c->bytes_per_slot,
    };
}
