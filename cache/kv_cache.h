/*
 * kv_cache.h: a context's prefix KV cache on the CPU: the index (kv_pool.h), what its slots hold,
 * and the scratch a batch needs to run against it, all allocated at context creation so a batch
 * allocates nothing. A slot holds one compact row's K and V in every layer and its final hidden
 * state (the final-normed row, so a cached row needs no recomputation whatever the read-out:
 * last or mean pooling, scores, every row), fp32:
 *   k, v:   (n_layers, n_slots, kv_dim)     layer l's rows at k + l * n_slots * kv_dim
 *   hidden: (n_slots, hidden_size)
 */
#ifndef RMLP_CACHE_KV_CACHE_H
#define RMLP_CACHE_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "kv_pool.h"
#include "radix_mlp.h"

typedef struct kv_cache {
    kv_pool *pool;
    uint32_t n_slots, n_layers, kv_dim, hidden_size;
    uint64_t budget, bytes_per_slot;
    float *k, *v, *hidden;
    /* a batch's scratch: the pool's view (kv_batch) over (cap_compact) and (cap_tokens + 1) arrays,
     * the sequences' paths as slots (cap_tokens), the computed rows' ids, positions and slots
     * (cap_compact each) */
    kv_batch batch;
    uint32_t *path, *ids, *pos, *slots;
} kv_cache;

/* Bytes of one slot for this model: 2 n_layers kv_dim + hidden_size floats. */
uint64_t kv_cache_slot_bytes(const rmlp_model_config *cfg);

/* A cache of budget bytes (floor(budget / slot bytes) slots, maybe 0) for batches of up to
 * cap_tokens tokens and cap_compact compact rows. NULL when out of memory, with what failed. */
kv_cache *kv_cache_new(const rmlp_model_config *cfg, uint64_t budget, size_t cap_tokens, size_t cap_compact,
                       const char **failed_name, size_t *failed_bytes);
void kv_cache_free(kv_cache *cache);

/* The cache's counters as the ABI reports them. */
rmlp_cache_stats kv_cache_stats(const kv_cache *cache);

#endif
