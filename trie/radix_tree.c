/*
 * radix_tree.c: one pass over the batch that builds a compressed prefix tree (a radix tree)
 * over (token, position) paths and writes the RadixMLP maps as it goes.
 *
 * A node is a run of input rows that a sequence added when it left the tree: its rows are
 * new paths, so they get consecutive compact rows and the maps for them are plain copies and
 * index ramps. A later sequence walks a run by comparing its rows with the run's rows (a
 * linear, vectorised compare), and when it diverges inside a run the run is split in two.
 * Children are found through one hash table keyed by (parent node, token, position), so a node
 * with thousands of children costs the same as a node with one. Compact rows are handed out in
 * order of first occurrence, which makes fold_gather strictly increasing and the result
 * identical to the published RadixMLP reference trie.
 *
 * The same walk records the layout of attention in compact space: a sequence owns the compact
 * rows it hands out (the counter before and after it), and its path is the runs of consecutive
 * compact rows it writes into scatter, one per node it walks or adds, merged where the compact
 * rows go on (a node and the tail split off it).
 */
#include <string.h>

#include "row_ops.h"
#include "radix_mlp/types.h"
#include "radix_tree.h"

#ifndef RMLP_TRIE_ID_LIMIT
#define RMLP_TRIE_ID_LIMIT UINT32_MAX /* a test build lowers it to reach the wrap-around often */
#endif

typedef struct walk {
    const uint32_t *ids;
    const uint32_t *pos;
    radix_tree_maps maps;
    trie_node *nodes;
    trie_link *links;
    uint32_t link_mask;
    uint32_t id_base; /* links with child <= id_base are empty */
    uint32_t n_nodes;
    uint32_t n_compact;
    uint32_t n_runs;
    uint32_t seq_start;    /* first row of the sequence being inserted */
    uint32_t next_compact; /* the compact row that would continue its last run */
} walk;

/* Scatter rows [row, row + n) read compact rows [compact, compact + n): a new run of the
 * sequence's path, unless it continues the last one. */
static inline void path_run(walk *w, uint32_t row, uint32_t compact, uint32_t n) {
    if (row == w->seq_start || compact != w->next_compact) w->maps.run_start[w->n_runs++] = row;
    w->next_compact = compact + n;
}

size_t radix_tree_max_nodes(size_t n_tokens, size_t n_seqs) {
    /* A sequence adds a node only with a new row, and two only after a shared row too. */
    size_t per_batch = 2 * n_seqs < n_tokens ? 2 * n_seqs : n_tokens;
    return 1 + per_batch;
}

static inline uint32_t link_hash(uint32_t parent, uint32_t token, uint32_t position) {
    uint64_t h = (uint64_t)parent * 0x9E3779B97F4A7C15ull;
    h ^= (((uint64_t)token << 32) | position) * 0xC2B2AE3D27D4EB4Full;
    h ^= h >> 31;
    h *= 0xFF51AFD7ED558CCDull;
    return (uint32_t)(h >> 32);
}

/* The slot holding (parent, token, position), or the empty slot where it would go. The
 * parent's hint is tried first: sequences of a batch tend to take the same branch. */
static inline uint32_t link_find(const walk *w, uint32_t parent, uint32_t token, uint32_t position) {
    const trie_node *p = &w->nodes[parent];
    if (p->hint_slot != TRIE_NO_HINT && p->hint_token == token && p->hint_position == position) return p->hint_slot;
    uint32_t slot = link_hash(parent, token, position) & w->link_mask;
    for (;;) {
        const trie_link *link = &w->links[slot];
        if (link->child <= w->id_base ||
            (link->parent == parent && link->token == token && link->position == position))
            return slot;
        slot = (slot + 1) & w->link_mask;
    }
}

static inline void set_hint(trie_node *node, uint32_t slot, uint32_t token, uint32_t position) {
    node->hint_slot = slot;
    node->hint_token = token;
    node->hint_position = position;
}

static void link_fill(walk *w, uint32_t slot, uint32_t parent, uint32_t token, uint32_t position, uint32_t child) {
    w->links[slot] = (trie_link){parent, token, position, w->id_base + child};
    set_hint(&w->nodes[parent], slot, token, position);
}

/* Rows [row, end) are new paths: give them the next compact rows and return their new node. */
static inline uint32_t append_run(walk *w, uint32_t row, uint32_t end, uint32_t parent_compact) {
    const radix_tree_maps *m = &w->maps;
    uint32_t n = end - row;
    uint32_t first = w->n_compact;
    rows_iota(m->fold_gather + first, row, n);
    rows_iota(m->scatter + row, first, n);
    path_run(w, row, first, n);
    memcpy(m->compact_ids + first, w->ids + row, (size_t)n * sizeof(uint32_t));
    memcpy(m->compact_pos + first, w->pos + row, (size_t)n * sizeof(uint32_t));
    rows_iota(m->compact_parent + first, first - 1, n);
    m->compact_parent[first] = parent_compact;
    uint32_t node = w->n_nodes++;
    w->nodes[node] = (trie_node){row, n, first, TRIE_NO_HINT, 0, 0};
    w->n_compact += n;
    return node;
}

/* Splits `node` (reached through link `slot`) after `offset` rows: a new head node takes
 * the link and the first rows, `node` keeps the rest and its children. Returns the head. */
static uint32_t split_run(walk *w, uint32_t node, uint32_t offset, uint32_t slot) {
    trie_node *tail = &w->nodes[node];
    uint32_t head = w->n_nodes++;
    w->nodes[head] = (trie_node){tail->src, offset, tail->compact, TRIE_NO_HINT, 0, 0};
    w->links[slot].child = w->id_base + head;
    tail->src += offset;
    tail->len -= offset;
    tail->compact += offset;
    uint32_t token = w->ids[tail->src], position = w->pos[tail->src];
    link_fill(w, link_find(w, head, token, position), head, token, position, node);
    return head;
}

/* Walks one sequence, rows [start, end), down the tree, adding what is new. */
static void insert_sequence(walk *w, uint32_t start, uint32_t end) {
    uint32_t *scatter = w->maps.scatter;
    uint32_t node = 0, offset = 0, slot = 0, row = start;
    while (row < end) {
        if (offset == w->nodes[node].len) {
            uint32_t token = w->ids[row], position = w->pos[row];
            uint32_t found = link_find(w, node, token, position);
            if (w->links[found].child <= w->id_base) {
                uint32_t parent = row > start ? scatter[row - 1] : RMLP_NO_PARENT;
                link_fill(w, found, node, token, position, append_run(w, row, end, parent));
                return;
            }
            slot = found;
            set_hint(&w->nodes[node], found, token, position);
            node = w->links[found].child - w->id_base;
            offset = 0;
        }
        const trie_node run = w->nodes[node];
        uint32_t avail = run.len - offset, left = end - row;
        uint32_t n = avail < left ? avail : left;
        uint32_t matched = (uint32_t)rows_common(w->ids + row, w->pos + row, w->ids + run.src + offset,
                                                w->pos + run.src + offset, n);
        rows_iota(scatter + row, run.compact + offset, matched);
        path_run(w, row, run.compact + offset, matched);
        row += matched;
        offset += matched;
        if (row < end && offset < run.len) { /* diverged inside the run */
            uint32_t head = split_run(w, node, offset, slot);
            uint32_t token = w->ids[row], position = w->pos[row];
            uint32_t fresh = append_run(w, row, end, scatter[row - 1]);
            link_fill(w, link_find(w, head, token, position), head, token, position, fresh);
            return;
        }
    }
}

uint32_t radix_tree_build(radix_tree_scratch *scratch, const uint32_t *input_ids, const uint32_t *position_ids,
                          const uint32_t *cu_seqlens, size_t n_seqs, const radix_tree_maps *maps, uint32_t *n_runs) {
    size_t max_nodes = radix_tree_max_nodes(cu_seqlens[n_seqs], n_seqs);
    if (scratch->id_base > RMLP_TRIE_ID_LIMIT - max_nodes) { /* ids would wrap: empty the table once */
        memset(scratch->links, 0, ((size_t)scratch->link_mask + 1) * sizeof(trie_link));
        scratch->id_base = 0;
    }
    walk w = {
        .ids = input_ids,
        .pos = position_ids,
        .maps = *maps,
        .nodes = scratch->nodes,
        .links = scratch->links,
        .link_mask = scratch->link_mask,
        .id_base = scratch->id_base,
        .n_nodes = 1,
    };
    w.nodes[0] = (trie_node){0, 0, 0, TRIE_NO_HINT, 0, 0};
    for (size_t s = 0; s < n_seqs; s++) {
        maps->qo_indptr[s] = w.n_compact;
        maps->run_indptr[s] = w.n_runs;
        w.seq_start = cu_seqlens[s];
        insert_sequence(&w, cu_seqlens[s], cu_seqlens[s + 1]);
    }
    maps->qo_indptr[n_seqs] = w.n_compact;
    maps->run_indptr[n_seqs] = w.n_runs;
    scratch->id_base += w.n_nodes;
    *n_runs = w.n_runs;
    return w.n_compact;
}
