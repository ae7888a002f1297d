/*
 * kv_cache.h: a context's prefix KV cache: the index (kv_pool.h), what its slots hold, and the
 * host scratch a batch needs to run against it, all allocated at context creation so a batch
 * allocates nothing. A slot holds one compact row's K and V in every layer and its final hidden
 * state (the final-normed row, so a cached row needs no recomputation whatever the read-out:
 * last or mean pooling, scores, every row), in the model's dtype (fp32 on the CPU):
 *   k, v:   (n_layers, n_kv_heads, n_slots, head_dim)   layer l at k + l * n_slots * kv_dim
 *   hidden: (n_slots, hidden_size)
 * (each KV head's keys contiguous in slot order, so a decode step streams a head's path; one
 * head's K/V rows of slot s at k + (l * n_kv_heads + h) * n_slots * head_dim + s * head_dim). On
 * the CPU these arrays are here; a CUDA context keeps them on its device in its own layout
 * (gpu/cache.cu) and only the index and the batch arrays live here.
 */
#ifndef RMLP_CACHE_KV_CACHE_H
#define RMLP_CACHE_KV_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/forward_rows.h"
#include "kv_pool.h"
#include "radix_mlp/types.h"

typedef struct kv_cache {
    kv_pool *pool;
    uint32_t n_slots, n_layers, kv_dim, hidden_size;
    uint64_t budget, bytes_per_slot;
    float *k, *v, *hidden; /* NULL when the slots live on a device */
    /* a batch's scratch: the pool's view (kv_batch) over (cap_compact) and (cap_tokens + 1) arrays,
     * the sequences' paths as slots (cap_tokens), the computed rows' ids, positions and slots
     * (cap_compact each), the slot of each output row (cap_compact) */
    kv_batch batch;
    uint32_t *path, *ids, *pos, *slots, *out_slots;
    uint32_t n_out; /* output rows of the batch begun: n_tokens, n_compact or n_seqs */
} kv_cache;

/* Bytes of one slot for this model with elem_bytes per element (4: fp32, 2: f16/bf16):
 * 2 n_layers kv_dim + hidden_size elements. */
uint64_t kv_cache_slot_bytes(const rmlp_model_config *cfg, size_t elem_bytes);

/* A cache of budget bytes (floor(budget / slot bytes) slots, maybe 0) for batches of up to
 * cap_tokens tokens and cap_compact compact rows, holding its slots' K/V/hidden in fp32 here when
 * host_storage, else only the index (the device holds the slots, elem_bytes each element). NULL
 * when out of memory, with what failed. */
kv_cache *kv_cache_new(const rmlp_model_config *cfg, uint64_t budget, size_t elem_bytes, bool host_storage,
                       size_t cap_tokens, size_t cap_compact, const char **failed_name, size_t *failed_bytes);
void kv_cache_free(kv_cache *cache);

/* Begins a batch on the cache (kv_pool_begin) and fills the batch arrays: ids, pos, slots of the
 * batch.n_computed rows to compute, path (n_tokens: the slot of every batch row), out_slots (n_out:
 * the slot of every output row: batch rows, compact rows, or each sequence's last row, as `rows`
 * says). Returns 0, or 1
 * when the batch's new rows do not fit (nothing changed; it runs without the cache). End it with
 * kv_pool_end(cache->pool, plan, &cache->batch, keep). */
int kv_cache_begin(kv_cache *cache, const rmlp_plan *plan, forward_rows rows);

/* The cache's counters as the ABI reports them. */
rmlp_cache_stats kv_cache_stats(const kv_cache *cache);

#endif
