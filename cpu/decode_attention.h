/*
 * decode_attention.h: the attention of one decode step on the CPU (decode.c). Each query
 * is the new row of a sequence (n_heads heads), its keys the slots of its path in the prefix cache
 * (the prompt's rows, the rows generated so far, and itself last), grouped KV heads.
 *
 * The paths are cut into chains (generate/chains.h). A chain's K/V rows are read once for all its queries (in blocks of up to 64 query
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
#include "generate/chains.h"
#include "model/model_ext.h"
#include "workers.h"

/* Floats of scratch cpu_decode_attention needs for n_queries queries on a pool of n_workers
 * threads (workers_count). */
size_t decode_scratch_floats(size_t n_queries, size_t n_heads, size_t n_kv_heads, size_t head_dim,
                             size_t n_workers);

/* out row r (n_heads, head_dim) = attention of query row r over the keys of the chains it is a
 * member of (every key of its path exactly once), scored and windowed as la says (model_ext.h; with
 * a window, query r sits at path position path_len[r] - 1 and sees the last la->window keys of its
 * path; path_len may be NULL without one). rows: q and out by query (r < n_queries), k and
 * v by slot (a layer's (n_slots, kv_dim) at their strides). Runs on pool's threads (NULL: the
 * calling thread); the result is the same, bit for bit, on any pool. scratch:
 * decode_scratch_floats for workers_count(pool), best 64-byte aligned (any float alignment works;
 * K, V and scratch on cache lines make the kernels' loads faster). */
void cpu_decode_attention(const cpu_attention_rows *rows, const decode_chain *chains, size_t n_chains,
                          const uint32_t *members, size_t n_queries, size_t n_heads, size_t n_kv_heads,
                          size_t head_dim, const layer_attention *la, const uint32_t *path_len, workers *pool,
                          float *scratch);

#endif
