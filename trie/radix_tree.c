/*
 * radix_tree.c: one pass over the batch that builds a compressed prefix tree (a radix tree)
 * over (token, position) paths and writes the RadixMLP maps as it goes.
 *
 * A node is a run of input rows that a sequence added when it left the tree: its rows are
 * new paths, so they get consecutive compact rows and the maps for them are plain copies and
 * index ramps. A later sequence walks a run by comparing its rows with the run's rows (a
 * linear, vectorised compare), and when it diverges inside a run the run is split in two.
 * Children are found through the parent's hint (the child it took last) or one hash table keyed
 * by (parent node, token, position), so a node with thousands of children costs the same as a
 * node with one. Compact rows are handed out in order of first occurrence, which makes
 * fold_gather strictly increasing and the result identical to the published RadixMLP reference
 * trie.
 *
 * Fan-out batches (thousands of sequences of a few rows) spend their time per sequence, not
 * per row: the walk keeps its work per step small (a hint checked against the child's first
 * row, links of 8 bytes, a new run's five arrays written in one loop) and, for every sequence
 * that ends ROWS_GROUP - 1 rows or more before the batch, uses the whole-group loops of
 * row_ops.h that need no scalar tail.
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
    uint32_t link_shift; /* 64 - log2(slots): the hash's top bits pick the slot */
    uint32_t id_base;    /* links with child <= id_base are empty */
    uint32_t n_nodes;
    uint32_t n_compact;
    uint32_t n_runs;
    uint32_t next_compact; /* the compact row that would continue the sequence's last run */
} walk;

/* For the walk's two copies (reads past the sequence allowed or not), each built in full. */
#if defined(__GNUC__)
#define WALK_INLINE inline __attribute__((always_inline))
#else
#define WALK_INLINE inline
#endif

/* next_compact at the start of a sequence: no compact row continues it (they are < 2^32 - 1). */
#define NO_RUN UINT32_MAX

/* Scatter rows [row, row + n) read compact rows [compact, compact + n): a new run of the
 * sequence's path, unless it continues the last one. */
static inline void path_run(walk *w, uint32_t row, uint32_t compact, uint32_t n) {
    if (compact != w->next_compact) w->maps.run_start[w->n_runs++] = row;
    w->next_compact = compact + n;
}

size_t radix_tree_max_nodes(size_t n_tokens, size_t n_seqs) {
    /* A sequence adds a node only with a new row, and two only after a shared row too. */
    size_t per_batch = 2 * n_seqs < n_tokens ? 2 * n_seqs : n_tokens;
    return 1 + per_batch;
}

/* Multiplicative hashing: the top bits of the product depend on every bit of the key. */
static inline uint32_t link_hash(const walk *w, uint32_t parent, uint32_t token, uint32_t position) {
    uint64_t key = ((uint64_t)(token ^ (parent * 0x9E3779B9u)) << 32) | position;
    return (uint32_t)((key * 0xC2B2AE3D27D4EB4Full) >> w->link_shift);
}

/* The slot holding (parent, token, position), or the empty slot where it would go. */
static inline uint32_t link_probe(const walk *w, uint32_t parent, uint32_t token, uint32_t position) {
    for (uint32_t slot = link_hash(w, parent, token, position);; slot = (slot + 1) & w->link_mask) {
        trie_link link = w->links[slot];
        if (link.child <= w->id_base) return slot;
        if (link.parent == parent) {
            uint32_t first = w->nodes[link.child - w->id_base].src;
            if (w->ids[first] == token && w->pos[first] == position) return slot;
        }
    }
}

/* Links parent to child through the empty slot `slot`; the child becomes the parent's hint. */
static inline void link_fill(walk *w, uint32_t slot, uint32_t parent, uint32_t child) {
    w->links[slot] = (trie_link){parent, w->id_base + child};
    w->nodes[parent].hint = child;
}

/* Rows [row, end) are new paths: give them the next compact rows and return their new node. */
static WALK_INLINE uint32_t append_run(walk *w, uint32_t row, uint32_t end, uint32_t parent_compact, int over) {
    const radix_tree_maps *m = &w->maps;
    uint32_t n = end - row;
    uint32_t first = w->n_compact;
    if (over && n <= 4 * ROWS_GROUP) {
        rows_enter_over(m->fold_gather + first, m->scatter + row, m->compact_ids + first, m->compact_pos + first,
                        m->compact_parent + first, w->ids + row, w->pos + row, row, first, n);
    } else {
        rows_iota_over(m->fold_gather + first, row, n);
        rows_iota_over(m->scatter + row, first, n);
        memcpy(m->compact_ids + first, w->ids + row, (size_t)n * sizeof(uint32_t));
        memcpy(m->compact_pos + first, w->pos + row, (size_t)n * sizeof(uint32_t));
        rows_iota_over(m->compact_parent + first, first - 1, n);
    }
    m->compact_parent[first] = parent_compact;
    path_run(w, row, first, n);
    uint32_t node = w->n_nodes++;
    w->nodes[node] = (trie_node){row, n, first, TRIE_NO_HINT};
    w->n_compact += n;
    return node;
}

/* Splits `node`, parent's child through (token, position), after `offset` rows: a new head
 * node takes the link and the first rows, `node` keeps the rest and its children. Returns the
 * head. */
static WALK_INLINE uint32_t split_run(walk *w, uint32_t parent, uint32_t node, uint32_t offset, uint32_t token,
                                      uint32_t position) {
    trie_node *tail = &w->nodes[node];
    uint32_t head = w->n_nodes++;
    w->nodes[head] = (trie_node){tail->src, offset, tail->compact, TRIE_NO_HINT};
    w->links[link_probe(w, parent, token, position)].child = w->id_base + head;
    w->nodes[parent].hint = head;
    tail->src += offset;
    tail->len -= offset;
    tail->compact += offset;
    uint32_t tail_token = w->ids[tail->src], tail_position = w->pos[tail->src];
    link_fill(w, link_probe(w, head, tail_token, tail_position), head, node);
    return head;
}

/* Walks one sequence, rows [start, end) with start < end, down the tree, adding what is new.
 * Each step stands at the end of a node (the root first) and takes the child that starts with
 * the next row: the node's hint, else the hash table's. With `over`, the sequence ends
 * ROWS_GROUP - 1 rows or more before the batch does, so the _over ops may read past it. */
static WALK_INLINE void insert_sequence(walk *w, uint32_t start, uint32_t end, int over) {
    const uint32_t *ids = w->ids, *pos = w->pos;
    uint32_t node = 0, row = start, parent_compact = RMLP_NO_PARENT;
    w->next_compact = NO_RUN;
    for (;;) {
        uint32_t token = ids[row], position = pos[row];
        uint32_t child = w->nodes[node].hint;
        if (child == TRIE_NO_HINT || ids[w->nodes[child].src] != token || pos[w->nodes[child].src] != position) {
            uint32_t slot = link_probe(w, node, token, position);
            if (w->links[slot].child <= w->id_base) { /* a new branch */
                link_fill(w, slot, node, append_run(w, row, end, parent_compact, over));
                return;
            }
            child = w->links[slot].child - w->id_base;
            w->nodes[node].hint = child;
        }
        const trie_node run = w->nodes[child];
        uint32_t left = end - row, n = run.len < left ? run.len : left;
        uint32_t matched =
            (uint32_t)(over ? rows_common_over(ids + row, pos + row, ids + run.src, pos + run.src, n)
                            : rows_common(ids + row, pos + row, ids + run.src, pos + run.src, n));
        rows_iota_over(w->maps.scatter + row, run.compact, matched);
        path_run(w, row, run.compact, matched);
        row += matched;
        parent_compact = run.compact + matched - 1;
        if (matched < run.len) { /* the sequence ends or diverges inside the run */
            if (row < end) {
                uint32_t head = split_run(w, node, child, matched, token, position);
                token = ids[row];
                position = pos[row];
                link_fill(w, link_probe(w, head, token, position), head,
                          append_run(w, row, end, parent_compact, over));
            }
            return;
        }
        if (row == end) return;
        node = child;
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
        .link_shift = 64 - (uint32_t)__builtin_popcount(scratch->link_mask),
        .id_base = scratch->id_base,
        .n_nodes = 1,
    };
    w.nodes[0] = (trie_node){0, 0, 0, TRIE_NO_HINT};
    /* The sequences before n_over end ROWS_GROUP - 1 rows or more before the batch does. */
    size_t n_over = n_seqs;
    while (n_over > 0 && (uint64_t)cu_seqlens[n_over] + (ROWS_GROUP - 1) > cu_seqlens[n_seqs]) n_over--;
    for (size_t s = 0; s < n_over; s++) {
        maps->qo_indptr[s] = w.n_compact;
        maps->run_indptr[s] = w.n_runs;
        if (cu_seqlens[s] < cu_seqlens[s + 1]) insert_sequence(&w, cu_seqlens[s], cu_seqlens[s + 1], 1);
    }
    for (size_t s = n_over; s < n_seqs; s++) { /* the same, reading no row past the batch */
        maps->qo_indptr[s] = w.n_compact;
        maps->run_indptr[s] = w.n_runs;
        if (cu_seqlens[s] < cu_seqlens[s + 1]) insert_sequence(&w, cu_seqlens[s], cu_seqlens[s + 1], 0);
    }
    maps->qo_indptr[n_seqs] = w.n_compact;
    maps->run_indptr[n_seqs] = w.n_runs;
    scratch->id_base += w.n_nodes;
    *n_runs = w.n_runs;
    return w.n_compact;
}
