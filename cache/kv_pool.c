/*
 * kv_pool.c: the prefix cache's index (kv_pool.h). A node is a slot: its row's (parent slot, token,
 * position), how many cached children it has, how many batches hold it, its state and the tick of
 * its last use. Children are found through one open-addressing table keyed by (parent, token,
 * position), at most half full, with backward-shift deletion (no tombstones, so eviction keeps
 * lookups short). Eviction takes unlocked cached leaves from a min-heap on their tick and pushes a
 * parent back when its last child goes, so a cold prefix of any length leaves in one pass.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "kv_pool.h"

#define ROOT UINT32_MAX /* the parent of a path's first row (RMLP_NO_PARENT) */
#define NONE UINT32_MAX /* no slot */

enum { SLOT_FREE, SLOT_NEW, SLOT_CACHED };

typedef struct pool_node {
    uint32_t parent, token, position;
    uint32_t children; /* used slots whose parent this is */
    uint32_t locks;    /* batches using it now */
    uint32_t state;
    uint64_t tick;     /* the pool's clock at its last use */
} pool_node;

typedef struct heap_entry {
    uint64_t tick;
    uint32_t slot;
} heap_entry;

struct kv_pool {
    uint32_t n_slots, n_free;
    pool_node *nodes;  /* (n_slots) */
    uint32_t *free;    /* (n_slots) stack of free slots */
    uint32_t *table;   /* (table_mask + 1) slot + 1, 0 empty */
    uint32_t table_mask;
    heap_entry *heap;  /* (n_slots) eviction scratch */
    uint64_t clock;
    kv_pool_counts counts;
};

static uint32_t key_hash(uint32_t parent, uint32_t token, uint32_t position) {
    uint64_t h = (uint64_t)parent * 0x9E3779B97F4A7C15ull;
    h ^= (((uint64_t)token << 32) | position) * 0xC2B2AE3D27D4EB4Full;
    h ^= h >> 31;
    h *= 0xFF51AFD7ED558CCDull;
    return (uint32_t)(h >> 32);
}

static uint32_t home_of(const kv_pool *p, uint32_t slot) {
    const pool_node *n = &p->nodes[slot];
    return key_hash(n->parent, n->token, n->position) & p->table_mask;
}

/* The table index holding (parent, token, position), or of the empty entry where it would go. */
static uint32_t table_find(const kv_pool *p, uint32_t parent, uint32_t token, uint32_t position) {
    uint32_t i = key_hash(parent, token, position) & p->table_mask;
    for (;;) {
        uint32_t e = p->table[i];
        if (e == 0) return i;
        const pool_node *n = &p->nodes[e - 1];
        if (n->parent == parent && n->token == token && n->position == position) return i;
        i = (i + 1) & p->table_mask;
    }
}

/* Removes the entry at table index i, shifting later entries of its probe run back. */
static void table_delete(kv_pool *p, uint32_t i) {
    p->table[i] = 0;
    for (uint32_t j = (i + 1) & p->table_mask; p->table[j] != 0; j = (j + 1) & p->table_mask) {
        uint32_t k = home_of(p, p->table[j] - 1);
        /* The entry at j may stay when its home k lies cyclically in (i, j]. */
        int stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (stays) continue;
        p->table[i] = p->table[j];
        p->table[j] = 0;
        i = j;
    }
}

kv_pool *kv_pool_new(uint32_t n_slots) {
    kv_pool *p = rmlp_calloc(1, sizeof *p);
    if (p == NULL) return NULL;
    size_t table = 16;
    while (table < 2 * (size_t)n_slots) table *= 2;
    p->n_slots = n_slots;
    p->nodes = rmlp_calloc(n_slots ? n_slots : 1, sizeof *p->nodes);
    p->free = rmlp_malloc((n_slots ? n_slots : 1) * sizeof *p->free);
    p->table = rmlp_calloc(table, sizeof *p->table);
    p->heap = rmlp_malloc((n_slots ? n_slots : 1) * sizeof *p->heap);
    if (p->nodes == NULL || p->free == NULL || p->table == NULL || p->heap == NULL) {
        kv_pool_free(p);
        return NULL;
    }
    p->table_mask = (uint32_t)(table - 1);
    kv_pool_clear(p);
    return p;
}

void kv_pool_free(kv_pool *p) {
    if (p == NULL) return;
    free(p->nodes);
    free(p->free);
    free(p->table);
    free(p->heap);
    free(p);
}

void kv_pool_clear(kv_pool *p) {
    memset(p->nodes, 0, p->n_slots * sizeof *p->nodes);
    memset(p->table, 0, ((size_t)p->table_mask + 1) * sizeof *p->table);
    for (uint32_t s = 0; s < p->n_slots; s++) p->free[s] = p->n_slots - 1 - s; /* slot 0 on top */
    p->n_free = p->n_slots;
}

kv_pool_counts kv_pool_counts_of(const kv_pool *p) {
    kv_pool_counts c = p->counts;
    c.slots = p->n_slots;
    c.used = p->n_slots - p->n_free;
    return c;
}

/* ---- eviction: a min-heap of unlocked cached leaves by tick --------------------------------- */

static int older(heap_entry a, heap_entry b) { return a.tick < b.tick || (a.tick == b.tick && a.slot < b.slot); }

static void heap_push(heap_entry *h, uint32_t *n, heap_entry e) {
    uint32_t i = (*n)++;
    while (i > 0 && older(e, h[(i - 1) / 2])) h[i] = h[(i - 1) / 2], i = (i - 1) / 2;
    h[i] = e;
}

static heap_entry heap_pop(heap_entry *h, uint32_t *n) {
    heap_entry top = h[0], last = h[--*n];
    uint32_t i = 0;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && older(h[c + 1], h[c])) c++;
        if (!older(h[c], last)) break;
        h[i] = h[c], i = c;
    }
    if (*n > 0) h[i] = last;
    return top;
}

static int evictable(const pool_node *n) { return n->state == SLOT_CACHED && n->children == 0 && n->locks == 0; }

/* Unlinks a used slot from the tree and frees it. */
static void release(kv_pool *p, uint32_t s) {
    pool_node *n = &p->nodes[s];
    table_delete(p, table_find(p, n->parent, n->token, n->position));
    if (n->parent != ROOT) p->nodes[n->parent].children--;
    n->state = SLOT_FREE;
    p->free[p->n_free++] = s;
}

/* Evicts least recently used unlocked leaves until `need` slots are free or none is left. */
static void evict(kv_pool *p, uint32_t need) {
    uint32_t n = 0;
    for (uint32_t s = 0; s < p->n_slots; s++)
        if (evictable(&p->nodes[s])) heap_push(p->heap, &n, (heap_entry){p->nodes[s].tick, s});
    while (p->n_free < need && n > 0) {
        uint32_t s = heap_pop(p->heap, &n).slot, parent = p->nodes[s].parent;
        release(p, s);
        p->counts.evicted++;
        if (parent != ROOT && evictable(&p->nodes[parent]))
            heap_push(p->heap, &n, (heap_entry){p->nodes[parent].tick, parent});
    }
}

/* ---- batches -------------------------------------------------------------------------------- */

int kv_pool_begin(kv_pool *p, const rmlp_plan *plan, kv_batch *b) {
    uint32_t n = plan->n_compact, hits = 0;
    p->counts.batches++;
    /* 1. Hits: a row whose parent is cached (or which starts a path) and whose key is cached. */
    for (uint32_t j = 0; j < n; j++) {
        uint32_t pc = plan->compact_parent[j], parent = pc == RMLP_NO_PARENT ? ROOT : b->slot_of[pc];
        b->slot_of[j] = NONE;
        if (pc != RMLP_NO_PARENT && parent == NONE) continue; /* the parent is new: so is the row */
        uint32_t e = p->table[table_find(p, parent, plan->compact_input_ids[j], plan->compact_position_ids[j])];
        if (e != 0 && p->nodes[e - 1].state == SLOT_CACHED) {
            b->slot_of[j] = e - 1;
            p->nodes[e - 1].locks++;
            hits++;
        }
    }
    /* 2. Room for the new rows, or nothing changes. */
    uint32_t m = n - hits;
    if (p->n_free < m) evict(p, m);
    if (p->n_free < m) {
        for (uint32_t j = 0; j < n; j++)
            if (b->slot_of[j] != NONE) p->nodes[b->slot_of[j]].locks--;
        p->counts.bypassed++;
        return 1;
    }
    /* 3. New rows: a slot each, linked into the tree (locked until the batch ends). A plan that does
     * not merge equal paths (the identity plan) repeats a new row's key: the repeat shares its slot,
     * whose K/V the first computes in each layer before attention reads them. */
    b->n_computed = 0;
    for (uint32_t j = 0; j < n; j++) {
        if (b->slot_of[j] != NONE) continue;
        uint32_t pc = plan->compact_parent[j], parent = pc == RMLP_NO_PARENT ? ROOT : b->slot_of[pc];
        uint32_t at = table_find(p, parent, plan->compact_input_ids[j], plan->compact_position_ids[j]);
        if (p->table[at] != 0) {
            b->slot_of[j] = p->table[at] - 1;
            p->nodes[p->table[at] - 1].locks++;
            continue;
        }
        uint32_t s = p->free[--p->n_free];
        p->nodes[s] = (pool_node){parent, plan->compact_input_ids[j], plan->compact_position_ids[j], 0, 1, SLOT_NEW, 0};
        p->table[at] = s + 1;
        if (parent != ROOT) p->nodes[parent].children++;
        b->slot_of[j] = s;
        b->computed[b->n_computed++] = j;
    }
    /* 4. Each sequence's computed rows: those of the compact rows it owns, a suffix of them. */
    for (uint32_t s = 0, k = 0; s <= plan->n_seqs; s++) {
        while (k < b->n_computed && b->computed[k] < plan->qo_indptr[s]) k++;
        b->cqo_indptr[s] = k;
    }
    p->counts.lookups += n;
    p->counts.hits += n - b->n_computed; /* cached, or sharing a row computed by an earlier sequence */
    (void)hits;
    return 0;
}

void kv_pool_end(kv_pool *p, const rmlp_plan *plan, const kv_batch *b, int keep) {
    uint64_t tick = ++p->clock;
    for (uint32_t j = 0; j < plan->n_compact; j++) {
        pool_node *node = &p->nodes[b->slot_of[j]];
        node->locks--;
        node->tick = tick;
    }
    if (keep) {
        for (uint32_t k = 0; k < b->n_computed; k++) p->nodes[b->slot_of[b->computed[k]]].state = SLOT_CACHED;
        p->counts.computed += b->n_computed;
        return;
    }
    for (uint32_t k = b->n_computed; k-- > 0;) release(p, b->slot_of[b->computed[k]]); /* children first */
}

int kv_pool_key(const kv_pool *p, uint32_t slot, uint32_t *parent, uint32_t *token, uint32_t *position) {
    if (slot >= p->n_slots || p->nodes[slot].state == SLOT_FREE) return -1;
    *parent = p->nodes[slot].parent, *token = p->nodes[slot].token, *position = p->nodes[slot].position;
    return 0;
}

int kv_pool_check(const kv_pool *p, char *why, size_t why_len) {
    uint32_t used = 0;
    uint32_t *children = rmlp_calloc(p->n_slots ? p->n_slots : 1, sizeof *children);
    if (children == NULL) return 0; /* nothing to report without memory */
    int bad = 0;
    for (uint32_t s = 0; s < p->n_slots && !bad; s++) {
        const pool_node *n = &p->nodes[s];
        if (n->state == SLOT_FREE) continue;
        used++;
        uint32_t e = p->table[table_find(p, n->parent, n->token, n->position)];
        if (n->locks != 0 || n->state != SLOT_CACHED)
            bad = snprintf(why, why_len, "slot %u: locks %u, state %u after the batch", s, n->locks, n->state) > 0;
        else if (e != s + 1)
            bad = snprintf(why, why_len, "slot %u: its key finds slot %d", s, (int)e - 1) > 0;
        else if (n->parent != ROOT && (n->parent >= p->n_slots || p->nodes[n->parent].state == SLOT_FREE))
            bad = snprintf(why, why_len, "slot %u: parent %u is not a used slot", s, n->parent) > 0;
        else if (n->parent != ROOT)
            children[n->parent]++;
    }
    for (uint32_t s = 0; s < p->n_slots && !bad; s++)
        if (p->nodes[s].state != SLOT_FREE && p->nodes[s].children != children[s])
            bad = snprintf(why, why_len, "slot %u: %u children counted, %u found", s, p->nodes[s].children,
                           children[s]) > 0;
    if (!bad && used + p->n_free != p->n_slots)
        bad = snprintf(why, why_len, "%u used + %u free != %u slots", used, p->n_free, p->n_slots) > 0;
    free(children);
    return bad;
}

/* ---- rows one at a time (generation) --------------------------------------------------------- */

uint32_t kv_pool_find(const kv_pool *p, uint32_t parent, uint32_t token, uint32_t position) {
    uint32_t e = p->table[table_find(p, parent, token, position)];
    return e == 0 ? NONE : e - 1;
}

int kv_pool_reserve(kv_pool *p, uint32_t need) {
    if (p->n_free < need) evict(p, need);
    return p->n_free < need;
}

uint32_t kv_pool_add_child(kv_pool *p, uint32_t parent, uint32_t token, uint32_t position) {
    uint32_t at = table_find(p, parent, token, position), s = p->free[--p->n_free];
    p->nodes[s] = (pool_node){parent, token, position, 0, 1, SLOT_NEW, p->clock};
    p->table[at] = s + 1;
    if (parent != ROOT) p->nodes[parent].children++;
    return s;
}

void kv_pool_discard(kv_pool *p, uint32_t slot) { release(p, slot); }

void kv_pool_commit(kv_pool *p, uint32_t slot) {
    p->nodes[slot].state = SLOT_CACHED;
    p->counts.computed++;
}

void kv_pool_lock(kv_pool *p, uint32_t slot) { p->nodes[slot].locks++; }

void kv_pool_unlock(kv_pool *p, uint32_t slot) {
    p->nodes[slot].locks--;
    p->nodes[slot].tick = ++p->clock;
}

uint32_t kv_pool_parent(const kv_pool *p, uint32_t slot) { return p->nodes[slot].parent; }

void kv_pool_count_lookups(kv_pool *p, uint32_t lookups, uint32_t hits) {
    p->counts.lookups += lookups;
    p->counts.hits += hits;
}
