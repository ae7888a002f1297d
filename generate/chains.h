/*
 * chains.h: a generation step's paths cut into chains, what every backend's decode attention reads
 * (cpu/decode_attention.h; gpu/backend.c packs them for the device). Each query is the new row of
 * a sequence, its keys the slots of its path in the prefix cache (the prompt's rows, the rows
 * generated so far, and itself last). With shared-prefix attention, a chain is a maximal run of path nodes below which lies the
 * same set of queries (the nodes a group of sequences shares, then the parts each subgroup
 * shares, down to each query's own rows); without, a chain is one query's whole path. A chain's
 * keys are read once for all its queries.
 */
#ifndef RMLP_GENERATE_CHAINS_H
#define RMLP_GENERATE_CHAINS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct decode_chain {
    const uint32_t *keys;  /* (n_keys) slots, the root side first */
    uint32_t n_keys;
    uint32_t first, count; /* its queries: members[first .. first + count), ascending */
    uint32_t depth;        /* the position in its queries' paths of keys[0] (a sliding window's reference) */
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

#endif
