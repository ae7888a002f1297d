/*
 * chains.c: a generation step's paths cut into chains (chains.h).
 */
#include "chains.h"

#define NO_CHAIN UINT32_MAX

size_t decode_max_chains(size_t n_queries) { return 2 * n_queries + 1; }

size_t decode_max_members(size_t n_queries, size_t max_path) {
    return n_queries * (n_queries < max_path ? n_queries : max_path) + 1;
}

/* The end of the chain of path[p ..): the nodes with the same number of queries below. */
static size_t chain_end(const uint32_t *path, size_t len, size_t p, const uint32_t *below) {
    size_t q = p + 1;
    while (q < len && below[path[q]] == below[path[p]]) q++;
    return q;
}

size_t decode_build_chains(const uint32_t *paths, size_t max_path, const uint32_t *path_len, size_t n_queries,
                           bool shared, uint32_t *below, uint32_t *chain_of, decode_chain *chains, uint32_t *members) {
    if (!shared) {
        for (size_t r = 0; r < n_queries; r++) {
            chains[r] = (decode_chain){paths + r * max_path, path_len[r], (uint32_t)r, 1, 0};
            members[r] = (uint32_t)r;
        }
        return n_queries;
    }
    for (size_t r = 0; r < n_queries; r++)
        for (size_t p = 0; p < path_len[r]; p++) below[paths[r * max_path + p]]++;
    size_t n = 0;
    for (size_t r = 0; r < n_queries; r++) { /* the chains, in order of first sight; count their queries */
        const uint32_t *path = paths + r * max_path;
        for (size_t p = 0, q; p < path_len[r]; p = q) {
            q = chain_end(path, path_len[r], p, below);
            if (chain_of[path[p]] == NO_CHAIN) {
                chain_of[path[p]] = (uint32_t)n;
                chains[n++] = (decode_chain){path + p, (uint32_t)(q - p), 0, 0, (uint32_t)p};
            }
            chains[chain_of[path[p]]].count++;
        }
    }
    for (size_t c = 0, at = 0; c < n; c++) chains[c].first = (uint32_t)at, at += chains[c].count, chains[c].count = 0;
    for (size_t r = 0; r < n_queries; r++) { /* members, ascending */
        const uint32_t *path = paths + r * max_path;
        for (size_t p = 0, q; p < path_len[r]; p = q) {
            q = chain_end(path, path_len[r], p, below);
            decode_chain *c = &chains[chain_of[path[p]]];
            members[c->first + c->count++] = (uint32_t)r;
        }
    }
    for (size_t r = 0; r < n_queries; r++)
        for (size_t p = 0; p < path_len[r]; p++) below[paths[r * max_path + p]] = 0, chain_of[paths[r * max_path + p]] = NO_CHAIN;
    return n;
}
