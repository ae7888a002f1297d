/*
 * radix_tree.h: the compressed prefix tree over (token, position) paths that finds the
 * distinct rows of a batch and writes the RadixMLP maps in one pass.
 */
#ifndef RMLP_TRIE_RADIX_TREE_H
#define RMLP_TRIE_RADIX_TREE_H

#include <stddef.h>
#include <stdint.h>

/* A run of the tree: input rows [src, src + len) whose compact rows are
 * [compact, compact + len). Node 0 is the root, an empty run. The hint is the child taken or
 * added last, tried before the hash table (its first row says whether it is the one);
 * TRIE_NO_HINT until the node has a child. */
typedef struct trie_node {
    uint32_t src;
    uint32_t len;
    uint32_t compact;
    uint32_t hint;
} trie_node;

#define TRIE_NO_HINT UINT32_MAX

/* Child link (parent node, first token, first position) -> child node, in an open-addressing
 * table. The token and position are the child's first row, read through the child. child
 * holds id_base + node of the build that wrote it, so a slot whose child is <= the current
 * id_base is empty: builds never clear the table. */
typedef struct trie_link {
    uint32_t parent;
    uint32_t child;
} trie_link;

/* Scratch kept across builds. links has link_mask + 1 slots (a power of two, at least 1.5
 * times the nodes); nodes holds at least radix_tree_max_nodes() entries; id_base grows by the
 * nodes of each build (links start zeroed with id_base 0). */
typedef struct radix_tree_scratch {
    trie_node *nodes;
    trie_link *links;
    uint32_t link_mask;
    uint32_t id_base;
} radix_tree_scratch;

/* Output arrays of one build, each with room for n_tokens rows (n_seqs + 1 for the indptrs).
 * The attention layout in compact space comes with the maps: the compact rows each sequence owns
 * (first occurrences: a contiguous range) and its path as runs of consecutive compact rows. */
typedef struct radix_tree_maps {
    uint32_t *fold_gather;    /* (n_compact) */
    uint32_t *scatter;        /* (n_tokens) */
    uint32_t *compact_ids;    /* (n_compact) */
    uint32_t *compact_pos;    /* (n_compact) */
    uint32_t *compact_parent; /* (n_compact) */
    uint32_t *qo_indptr;      /* (n_seqs + 1) sequence s owns compact rows [qo_indptr[s], qo_indptr[s+1]) */
    uint32_t *run_indptr;     /* (n_seqs + 1) sequence s's path is runs [run_indptr[s], run_indptr[s+1]) */
    uint32_t *run_start;      /* (n_runs) batch row where a run starts (its compact rows: scatter's) */
} radix_tree_maps;

/* Upper bound on the nodes a batch creates: the root plus, per sequence, at most one split
 * and one new run. */
size_t radix_tree_max_nodes(size_t n_tokens, size_t n_seqs);

/* Builds the tree over a validated batch, writes the maps and returns N' (the number of
 * distinct paths); *n_runs receives the number of path runs. */
uint32_t radix_tree_build(radix_tree_scratch *scratch, const uint32_t *input_ids, const uint32_t *position_ids,
                          const uint32_t *cu_seqlens, size_t n_seqs, const radix_tree_maps *maps, uint32_t *n_runs);

#endif
