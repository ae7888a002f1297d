/*
 * decode_steps.h: random decode steps for the tests of a step's attention layouts (test_decode_split.c
 * on the CPU, test_gpu_decode.c on the device): query rows whose paths share a common prefix, then
 * a part their group shares, then slots of their own (the shape cpu/decode_attention.h's chains
 * are cut from), cut into chains with or without shared prefixes (decode_build_chains) and packed
 * as gpu/backend.c packs them for the device: keys and members by chain, memberships by row.
 * Include after test_util.h, in the one translation unit of a test.
 */
#ifndef RMLP_TESTS_DECODE_STEPS_H
#define RMLP_TESTS_DECODE_STEPS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/decode_attention.h"

typedef struct decode_step {
    size_t n_rows, max_path, n_slots;
    uint32_t *paths, *path_len; /* (n_rows, max_path) root first; (n_rows) */
    size_t n_chains;
    decode_chain *chains;
    uint32_t *members; /* by chain */
    /* packed (gpu_decode_chains): key_indptr, member_indptr (n_chains + 1), keys, row_indptr
     * (n_rows + 1), row_members (n_members) */
    uint32_t *key_indptr, *keys, *member_indptr, *row_indptr, *row_members;
    uint32_t n_members;
} decode_step;

/* n_rows rows in `groups` groups: a common prefix of up to max_common slots (at least 1), each
 * group's part of up to max_group, each row's own part of 1 to max_own; the chains cut with
 * shared prefixes or without. */
static inline void decode_step_make(uint64_t *rng, size_t n_rows, uint32_t groups, uint32_t max_common,
                                    uint32_t max_group, uint32_t max_own, bool shared, decode_step *st) {
    memset(st, 0, sizeof *st);
    st->n_rows = n_rows, st->max_path = (size_t)max_common + max_group + max_own;
    uint32_t common = tu_rand_range(rng, 1, max_common), group_at = max_common;
    uint32_t own_at = group_at + groups * max_group, next = own_at;
    uint32_t *group_len = tu_xmalloc(groups * sizeof(uint32_t));
    for (uint32_t g = 0; g < groups; g++) group_len[g] = tu_rand_range(rng, 0, max_group);
    st->paths = tu_xmalloc(n_rows * st->max_path * sizeof(uint32_t));
    st->path_len = tu_xmalloc(n_rows * sizeof(uint32_t));
    for (size_t r = 0; r < n_rows; r++) {
        uint32_t *p = st->paths + r * st->max_path, g = (uint32_t)(r % groups), n = 0;
        uint32_t own = tu_rand_range(rng, 1, max_own);
        for (uint32_t i = 0; i < common; i++) p[n++] = i;
        for (uint32_t i = 0; i < group_len[g]; i++) p[n++] = group_at + g * max_group + i;
        for (uint32_t i = 0; i < own; i++) p[n++] = next++;
        st->path_len[r] = n;
    }
    free(group_len);
    st->n_slots = next;
    uint32_t *below = calloc(st->n_slots, 4), *chain_of = tu_xmalloc(st->n_slots * 4);
    memset(chain_of, 0xFF, st->n_slots * 4);
    st->chains = tu_xmalloc(decode_max_chains(n_rows) * sizeof *st->chains);
    st->members = tu_xmalloc(decode_max_members(n_rows, st->max_path) * 4);
    st->n_chains = decode_build_chains(st->paths, st->max_path, st->path_len, n_rows, shared, below, chain_of,
                                       st->chains, st->members);
    free(below), free(chain_of);
    size_t nc = st->n_chains;
    st->key_indptr = calloc(nc + 1, 4), st->member_indptr = calloc(nc + 1, 4);
    st->keys = tu_xmalloc(n_rows * st->max_path * 4 + 4);
    for (size_t c = 0; c < nc; c++) {
        memcpy(st->keys + st->key_indptr[c], st->chains[c].keys, st->chains[c].n_keys * 4);
        st->key_indptr[c + 1] = st->key_indptr[c] + st->chains[c].n_keys;
        st->member_indptr[c + 1] = st->chains[c].first + st->chains[c].count;
    }
    st->n_members = st->member_indptr[nc];
    st->row_indptr = calloc(n_rows + 1, 4), st->row_members = tu_xmalloc(st->n_members * 4 + 4);
    uint32_t *fill = calloc(n_rows, 4);
    for (uint32_t i = 0; i < st->n_members; i++) st->row_indptr[st->members[i] + 1]++;
    for (size_t r = 0; r < n_rows; r++) st->row_indptr[r + 1] += st->row_indptr[r];
    for (uint32_t i = 0; i < st->n_members; i++)
        st->row_members[st->row_indptr[st->members[i]] + fill[st->members[i]]++] = i;
    free(fill);
}

static inline void decode_step_free(decode_step *st) {
    free(st->paths), free(st->path_len), free(st->chains), free(st->members), free(st->key_indptr);
    free(st->keys), free(st->member_indptr), free(st->row_indptr), free(st->row_members);
    memset(st, 0, sizeof *st);
}

#endif
