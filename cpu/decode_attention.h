/*
 * decode_attention.h: the attention of one decode step on the CPU (ffi/src/generate.c). Each query
 * is the new row of a sequence (n_heads heads), its keys the slots of its path in the prefix cache
 * (the prompt's rows, the rows generated so far, and itself last), grouped KV heads.
 *
 * The paths are cut into chains: with shared-prefix attention, a chain is a maximal run of path
 * nodes below which lies the same set of queries (the nodes a group of sequences shares, then the
 * parts each subgroup shares, down to each query's own rows); without, a chain is one query's
 * whole path. A chain's K/V rows are read once for all its queries (in blocks of up to 64 query
 * rows): per KV head, the queries' grouped heads against a tile of keys, a max-subtracted partial softmax per (query,
 * head) kept as (max, sum, weighted V) over the chain, then merged into the query's state with the
 * log-sum-exp, all in fp32 (cascade attention). Both cuts compute the same function up to the
 * order of additions.
 */
#ifndef RMLP_CPU_DECODE_ATTENTION_H
#define RMLP_CPU_DECODE_ATTENTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu_ops.h"
#include "workers.h"

typedef struct decode_chain {
    const uint32_t *keys;  /* (n_keys) slots, the root side first */
    uint32_t n_keys;
    uint32_t first, count; /* its queries: members[first .. first + count), ascending */
} decode_chain;

/* Bounds for the arrays of decode_build_chains, for n_queries queries with paths of at most
 * max_path slots. */
size_t decode_max_chains(size_t n_queries);
size_t decode_max_members(size_t n_queries, size_t max_path);

/* Cuts the queries' paths into chains (shared: by the sets of queries below each node; else one
 * chain per query). paths: query r's path at paths + r * max_path, path_len[r] slots, root first,
 * each < the slot count of below and chain_of; the queries are leaves (no query's slot lies on
 * another's path). below, chain_of (n_slots): all 0 and all UINT32_MAX on entry, and left so.
 * chains (decode_max_chains), members (decode_max_members). Returns the number of chains. */
size_t decode_build_chains(const uint32_t *paths, size_t max_path, const uint32_t *path_len, size_t n_queries,
                           bool shared, uint32_t *below, uint32_t *chain_of, decode_chain *chains, uint32_t *members);

/* Floats of scratch cpu_decode_attention needs for n_queries queries on a pool of n_workers
 * threads (workers_count). */
size_t decode_scratch_floats(size_t n_queries, size_t n_heads, size_t n_kv_heads, size_t head_dim,
                             size_t n_workers);

/* out row r (n_heads, head_dim) = attention of query row r over the keys of the chains it is a
 * member of (every key of its path exactly once). rows: q and out by query (r < n_queries), k and
 * v by slot (a layer's (n_slots, kv_dim) at their strides). Runs on pool's threads (NULL: the
 * calling thread); the result is the same, bit for bit, on any pool. scratch:
 * decode_scratch_floats for workers_count(pool), best 64-byte aligned (any float alignment works;
 * K, V and scratch on cache lines make the kernels' loads faster). */
void cpu_decode_attention(const cpu_attention_rows *rows, const decode_chain *chains, size_t n_chains,
                          const uint32_t *members, size_t n_queries, size_t n_heads, size_t n_kv_heads,
                          size_t head_dim, float scale, workers *pool, float *scratch);

#endif
