/*
 * planner.c: owns a planner's arrays, runs the radix tree, applies the gate (identity maps
 * when sharing is too small to pay) and pads the compact rows.
 *
 * Arrays only grow, each group in one allocation made before the old one is released, so a
 * failed growth leaves the planner as it was and a planner that has seen a batch this large
 * builds without allocating. Allocations go through the library's allocator (common/alloc.h),
 * so a test can fail each of them; a failure names the array and its size.
 *
 * The gate has two rules (rmlp_gate): this library's, on the unpadded count in double precision,
 * and text-embeddings-inference's in-tree one, on the padded compact length in single precision
 * (its threshold is an f32), off at thresholds <= 1e-6 and on empty batches.
 */
#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/guard.h"
#include "row_ops.h"
#include "planner.h"
#include "radix_tree.h"

struct rmlp_planner {
    rmlp_guard guard;           /* first: the ffi layer's handle checks read it from any handle */
    _Atomic uint64_t generation; /* builds and reserves so far (read by other threads' model calls) */
    uint32_t *maps_block;       /* owns the six row arrays below (the first five with spare rows: row_ops.h) */
    uint32_t *fold_gather;      /* (compact_capacity) */
    uint32_t *compact_ids;      /* (compact_capacity) */
    uint32_t *compact_pos;      /* (compact_capacity) */
    uint32_t *compact_parent;   /* (compact_capacity) */
    uint32_t *scatter;          /* (token_capacity) */
    uint32_t *run_start;        /* (token_capacity) path runs: at most one per row */
    uint32_t *cu_seqlens;       /* (seq_capacity + 1) the batch's, copied; owns the two below */
    uint32_t *qo_indptr;        /* (seq_capacity + 1) */
    uint32_t *run_indptr;       /* (seq_capacity + 1) */
    size_t token_capacity;
    size_t seq_capacity;
    size_t compact_capacity;
    size_t node_capacity;
    radix_tree_scratch tree;
    size_t link_capacity;
};

rmlp_planner *trie_planner_new(void) {
    rmlp_planner *planner = rmlp_calloc(1, sizeof(rmlp_planner));
    if (planner != NULL) atomic_init(&planner->generation, 0);
    return planner;
}

size_t trie_planner_size(void) { return sizeof(rmlp_planner); }

uint64_t trie_planner_generation(const rmlp_planner *planner) {
    return atomic_load_explicit(&planner->generation, memory_order_relaxed);
}

/* A new generation: plans stamped with an older one no longer describe the arrays. */
static uint64_t next_generation(rmlp_planner *planner) {
    return atomic_fetch_add_explicit(&planner->generation, 1, memory_order_relaxed) + 1;
}

void trie_planner_delete(rmlp_planner *planner) {
    if (planner == NULL) return;
    free(planner->maps_block);
    free(planner->cu_seqlens);
    free(planner->tree.nodes);
    free(planner->tree.links);
    free(planner);
}

/* -1 with *failed filled in: the allocation of `bytes` for `what` failed. */
static int alloc_failed(trie_alloc_failure *failed, const char *what, size_t bytes) {
    *failed = (trie_alloc_failure){what, bytes};
    return -1;
}

static int grow_maps(rmlp_planner *p, size_t tokens, size_t compact, trie_alloc_failure *failed) {
    if (tokens <= p->token_capacity && compact <= p->compact_capacity) return 0;
    if (tokens < p->token_capacity) tokens = p->token_capacity;
    if (compact < p->compact_capacity) compact = p->compact_capacity;
    /* Each row array but run_start keeps ROWS_GROUP - 1 spare rows for the stores of row_ops.h. */
    size_t compact_rows = compact + ROWS_GROUP, token_rows = tokens + ROWS_GROUP;
    size_t bytes = (4 * compact_rows + token_rows + tokens) * sizeof(uint32_t);
    uint32_t *block = rmlp_malloc(bytes);
    if (block == NULL) return alloc_failed(failed, "the plan's maps", bytes);
    free(p->maps_block);
    p->maps_block = block;
    p->fold_gather = block;
    p->compact_ids = block + compact_rows;
    p->compact_pos = block + 2 * compact_rows;
    p->compact_parent = block + 3 * compact_rows;
    p->scatter = block + 4 * compact_rows;
    p->run_start = block + 4 * compact_rows + token_rows;
    p->token_capacity = tokens;
    p->compact_capacity = compact;
    return 0;
}

static int grow_tree(rmlp_planner *p, size_t max_nodes, trie_alloc_failure *failed) {
    if (max_nodes > p->node_capacity) {
        trie_node *nodes = rmlp_malloc(max_nodes * sizeof(trie_node));
        if (nodes == NULL) return alloc_failed(failed, "the radix tree's nodes", max_nodes * sizeof(trie_node));
        free(p->tree.nodes);
        p->tree.nodes = nodes;
        p->node_capacity = max_nodes;
    }
    size_t links = 16; /* a power of two, at most 2/3 full, so probes stay short */
    while (links < max_nodes + max_nodes / 2) links *= 2;
    if (links > p->link_capacity) {
        trie_link *table = rmlp_calloc(links, sizeof(trie_link));
        if (table == NULL) return alloc_failed(failed, "the radix tree's link table", links * sizeof(trie_link));
        free(p->tree.links);
        p->tree.links = table;
        p->tree.link_mask = (uint32_t)(links - 1);
        p->tree.id_base = 0; /* a zeroed table is empty for any id_base */
        p->link_capacity = links;
    }
    return 0;
}

static int grow_seqs(rmlp_planner *p, size_t n_seqs, trie_alloc_failure *failed) {
    if (n_seqs <= p->seq_capacity && p->cu_seqlens != NULL) return 0;
    uint32_t *cu = rmlp_malloc(3 * (n_seqs + 1) * sizeof(uint32_t));
    if (cu == NULL)
        return alloc_failed(failed, "the copy of cu_seqlens and the per-sequence offsets", 3 * (n_seqs + 1) * sizeof(uint32_t));
    free(p->cu_seqlens);
    p->cu_seqlens = cu;
    p->qo_indptr = cu + n_seqs + 1;
    p->run_indptr = cu + 2 * (n_seqs + 1);
    p->seq_capacity = n_seqs;
    return 0;
}

int trie_planner_reserve(rmlp_planner *planner, size_t n_tokens, size_t n_seqs, uint32_t pad_multiple,
                         trie_alloc_failure *failed) {
    next_generation(planner);
    size_t pad_rows = pad_multiple > 1 ? pad_multiple - 1 : 0;
    if (grow_maps(planner, n_tokens, n_tokens + pad_rows, failed) != 0 || grow_seqs(planner, n_seqs, failed) != 0)
        return -1;
    return grow_tree(planner, radix_tree_max_nodes(n_tokens, n_seqs), failed);
}

static void write_identity(const uint32_t *input_ids, const uint32_t *position_ids, size_t n_tokens,
                           const uint32_t *cu_seqlens, size_t n_seqs, const radix_tree_maps *maps) {
    if (n_tokens == 0) return;
    rows_iota(maps->fold_gather, 0, n_tokens);
    rows_iota(maps->scatter, 0, n_tokens);
    memcpy(maps->compact_ids, input_ids, n_tokens * sizeof(uint32_t));
    memcpy(maps->compact_pos, position_ids, n_tokens * sizeof(uint32_t));
    rows_iota(maps->compact_parent + 1, 0, n_tokens - 1);
    for (size_t s = 0; s < n_seqs; s++)
        if (cu_seqlens[s] < cu_seqlens[s + 1]) maps->compact_parent[cu_seqlens[s]] = RMLP_NO_PARENT;
}

/* The attention layout of identity maps: each sequence owns its rows, one run each. */
static uint32_t write_identity_layout(const uint32_t *cu_seqlens, size_t n_seqs, const radix_tree_maps *maps) {
    uint32_t runs = 0;
    for (size_t s = 0; s < n_seqs; s++) {
        maps->qo_indptr[s] = cu_seqlens[s];
        maps->run_indptr[s] = runs;
        if (cu_seqlens[s] < cu_seqlens[s + 1]) maps->run_start[runs++] = cu_seqlens[s];
    }
    maps->qo_indptr[n_seqs] = cu_seqlens[n_seqs];
    maps->run_indptr[n_seqs] = runs;
    return runs;
}

static size_t round_up(size_t n, uint32_t multiple) {
    return multiple > 1 ? (n + multiple - 1) / multiple * multiple : n;
}

/* TEI's threshold is an f32; thresholds beyond its range become +inf there. */
static float to_f32(double threshold) { return threshold > FLT_MAX ? INFINITY : (float)threshold; }

/* Whether the gate skips the trie (radix off whatever the batch). */
static int gate_skips_tree(const trie_options *options, size_t n_tokens) {
    if (options->gate == RMLP_GATE_TEI) return !(to_f32(options->threshold) > 1e-6f) || n_tokens == 0;
    return options->threshold == 0.0;
}

/* The gate's decision once the trie found n_distinct paths. */
static int gate_uses_radix(const trie_options *options, size_t n_tokens, size_t n_distinct) {
    if (options->gate == RMLP_GATE_TEI) {
        float threshold = to_f32(options->threshold);
        float ratio = (float)round_up(n_distinct, options->pad_multiple) / (float)n_tokens;
        return threshold >= 1.0f || ratio < threshold;
    }
    double ratio = n_tokens > 0 ? (double)n_distinct / (double)n_tokens : 1.0;
    return options->threshold >= 1.0 || ratio < options->threshold;
}

/* Pads rows [n_compact, next multiple) with token 0, position 0, gather 0, no parent. */
static size_t pad_compact(const radix_tree_maps *maps, size_t n_compact, uint32_t pad_multiple) {
    if (pad_multiple <= 1 || n_compact == 0) return n_compact;
    size_t padded = round_up(n_compact, pad_multiple);
    for (size_t j = n_compact; j < padded; j++) {
        maps->fold_gather[j] = 0;
        maps->compact_ids[j] = 0;
        maps->compact_pos[j] = 0;
        maps->compact_parent[j] = RMLP_NO_PARENT;
    }
    return padded;
}

int trie_plan_build(rmlp_planner *planner, const uint32_t *input_ids, const uint32_t *position_ids,
                    size_t n_tokens, const uint32_t *cu_seqlens, size_t n_seqs, const trie_options *options,
                    rmlp_plan *out, trie_alloc_failure *failed) {
    uint64_t generation = next_generation(planner);
    int skip_tree = gate_skips_tree(options, n_tokens);
    size_t pad_rows = options->pad_multiple > 1 ? options->pad_multiple - 1 : 0;
    if (grow_maps(planner, n_tokens, n_tokens + pad_rows, failed) != 0 || grow_seqs(planner, n_seqs, failed) != 0)
        return -1;
    memcpy(planner->cu_seqlens, cu_seqlens, (n_seqs + 1) * sizeof(uint32_t));
    if (!skip_tree && grow_tree(planner, radix_tree_max_nodes(n_tokens, n_seqs), failed) != 0) return -1;

    radix_tree_maps maps = {planner->fold_gather, planner->scatter,    planner->compact_ids,
                            planner->compact_pos, planner->compact_parent, planner->qo_indptr,
                            planner->run_indptr,  planner->run_start};
    uint32_t n_runs = 0;
    size_t n_distinct = skip_tree ? n_tokens
                                  : radix_tree_build(&planner->tree, input_ids, position_ids, cu_seqlens, n_seqs, &maps,
                                                     &n_runs);
    double ratio = n_tokens > 0 ? (double)n_distinct / (double)n_tokens : 1.0;
    int use_radix = !skip_tree && gate_uses_radix(options, n_tokens, n_distinct);
    /* With nothing shared the tree's maps already are the identity. */
    if (!use_radix && (skip_tree || n_distinct != n_tokens)) {
        write_identity(input_ids, position_ids, n_tokens, cu_seqlens, n_seqs, &maps);
        n_runs = write_identity_layout(cu_seqlens, n_seqs, &maps);
    }
    size_t n_compact = use_radix ? n_distinct : n_tokens;
    size_t n_padded = use_radix ? pad_compact(&maps, n_compact, options->pad_multiple) : n_compact;

    *out = (rmlp_plan){
        .n_tokens = (uint32_t)n_tokens,
        .n_seqs = (uint32_t)n_seqs,
        .n_distinct = (uint32_t)n_distinct,
        .n_compact = (uint32_t)n_compact,
        .n_compact_padded = (uint32_t)n_padded,
        .use_radix = use_radix,
        .compact_ratio = ratio,
        .fold_gather = maps.fold_gather,
        .scatter = maps.scatter,
        .compact_input_ids = maps.compact_ids,
        .compact_position_ids = maps.compact_pos,
        .compact_parent = maps.compact_parent,
        .cu_seqlens = planner->cu_seqlens,
        .planner = planner,
        .generation = generation,
        .qo_indptr = maps.qo_indptr,
        .n_runs = n_runs,
        .run_indptr = maps.run_indptr,
        .run_start = maps.run_start,
    };
    return 0;
}
