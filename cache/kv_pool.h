/*
 * kv_pool.h: the index of a context's prefix KV cache (docs/design.md, "The prefix KV cache"): token
 * slots, a radix tree over (token id, position id) paths whose nodes are slots, reference counts
 * that lock the slots a batch uses, and LRU eviction of unlocked leaves. What a slot holds (each
 * layer's K and V and the final hidden state of its row) lives with the context, on the CPU or the
 * device; this file only says which slot holds which row. Pure C, no dependencies.
 *
 * A batch goes through begin and end. begin matches the plan's compact rows against the tree in
 * their order (a row's parent comes first): a row whose path is in the tree is a hit and reuses its
 * slot; every other row must be computed and gets a free slot, evicting least recently used
 * unlocked leaves when the free slots run short. The tree is prefix-closed (only leaves are
 * evicted, paths are inserted whole), so a sequence's cached rows are the start of its path and its
 * computed rows are the end of the rows it owns. When the pool cannot hold the new rows even after
 * evicting everything unlocked, begin changes nothing and says so (the batch then runs without the
 * cache). end makes the computed rows cached, or, after a failure, releases them.
 */
#ifndef RMLP_CACHE_KV_POOL_H
#define RMLP_CACHE_KV_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "radix_mlp/types.h"

typedef struct kv_pool kv_pool;

/* Counters since the pool was made (rmlp_cache_stats gives them to the host). */
typedef struct kv_pool_counts {
    uint64_t batches, bypassed;  /* batches begun; of them, run without the cache (too small) */
    uint64_t lookups, hits;      /* compact rows looked up; of them, found cached */
    uint64_t computed, evicted;  /* rows computed and cached; rows evicted */
    uint32_t slots, used;        /* slots in all; holding a row */
} kv_pool_counts;

/* A pool of n_slots slots (0: every batch bypasses), NULL when out of memory. */
kv_pool *kv_pool_new(uint32_t n_slots);
void kv_pool_free(kv_pool *pool);

/* One batch's view of the pool, filled by kv_pool_begin (arrays of the caller's):
 *   slot_of (n_compact):    the slot of each compact row, cached or computed
 *   computed (n_compact):   the compact rows to compute, in order, n_computed of them
 *   cqo_indptr (n_seqs + 1): sequence s computes computed[cqo_indptr[s] .. cqo_indptr[s+1]], the last
 *                            of the compact rows it owns (the rest of them are cached). */
typedef struct kv_batch {
    uint32_t *slot_of, *computed, *cqo_indptr;
    uint32_t n_computed;
} kv_batch;

/* Matches plan (with its qo_indptr) against the pool and locks every slot the batch uses.
 * Returns 0, or 1 when the new rows do not fit (nothing changed; count as bypassed). */
int kv_pool_begin(kv_pool *pool, const rmlp_plan *plan, kv_batch *batch);

/* Ends the batch begun with these arguments: with keep, its computed rows become cached; without,
 * they are released (their slots hold nothing valid). Every slot of the batch is unlocked and
 * marked used now. */
void kv_pool_end(kv_pool *pool, const rmlp_plan *plan, const kv_batch *batch, int keep);

/* Forgets every cached row (no batch may be in progress). */
void kv_pool_clear(kv_pool *pool);

kv_pool_counts kv_pool_counts_of(const kv_pool *pool);

/* The key of a used slot: its parent slot (RMLP_NO_PARENT at a path's start), token and
 * position. 0, or -1 when the slot is free or out of range. For tests. */
int kv_pool_key(const kv_pool *pool, uint32_t slot, uint32_t *parent, uint32_t *token, uint32_t *position);

/* Checks the invariants between batches: no slot locked, used + free == slots, every used slot
 * reachable by its key with a used parent, child counts right. 0, or 1 with why. For tests. */
int kv_pool_check(const kv_pool *pool, char *why, size_t why_len);

/* ---- rows one at a time, for generation (generate/session.c) -------------------------------------
 * A generation session appends one row per active sequence and step below the sequence's last slot
 * and holds one lock on that last slot (which keeps its whole path: only unlocked leaves go). */

/* The used slot with key (parent, token, position), cached or new, or UINT32_MAX. */
uint32_t kv_pool_find(const kv_pool *pool, uint32_t parent, uint32_t token, uint32_t position);

/* Evicts least recently used unlocked leaves until `need` slots are free. 0, or 1 when that many
 * cannot be freed (what was evicted stays evicted: it was unlocked, so nothing used it). */
int kv_pool_reserve(kv_pool *pool, uint32_t need);

/* A free slot (there must be one: kv_pool_reserve) as the child (parent, token, position) of a used
 * slot (or RMLP_NO_PARENT), new (its row not computed yet) and locked once. Its key must not be in
 * the tree (kv_pool_find). */
uint32_t kv_pool_add_child(kv_pool *pool, uint32_t parent, uint32_t token, uint32_t position);

/* A new slot whose row could not be computed (a device failure): it leaves the tree, freed. It
 * must be a leaf (discard a step's new rows children first). */
void kv_pool_discard(kv_pool *pool, uint32_t slot);

/* A new slot's row is computed: it becomes cached (counted as computed). */
void kv_pool_commit(kv_pool *pool, uint32_t slot);

/* One more lock on a used slot; one lock less (and the slot marked used now). */
void kv_pool_lock(kv_pool *pool, uint32_t slot);
void kv_pool_unlock(kv_pool *pool, uint32_t slot);

/* The parent slot of a used slot (RMLP_NO_PARENT at a path's start). */
uint32_t kv_pool_parent(const kv_pool *pool, uint32_t slot);

/* Counts `lookups` rows looked up one at a time, `hits` of them found cached. */
void kv_pool_count_lookups(kv_pool *pool, uint32_t lookups, uint32_t hits);

#endif
