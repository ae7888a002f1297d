/*
 * planner.h: the plan builder behind rmlp_plan_build, on inputs the ffi layer has already
 * validated. Pure C; depends on nothing but the public header's types.
 *
 * A planner owns every array it writes (the plan's maps and the radix tree's scratch) and
 * only ever grows them, so a planner that has seen a batch as large as the next one builds it
 * without allocating. It counts the builds and reserves that may change those arrays (its
 * generation), and stamps each plan with itself and that count, so a model call can tell a plan
 * whose arrays have since changed.
 *
 * An rmlp_planner begins with an rmlp_guard (common/guard.h), which the ffi layer manages.
 */
#ifndef RMLP_TRIE_PLANNER_H
#define RMLP_TRIE_PLANNER_H

#include <stddef.h>
#include <stdint.h>

#include "radix_mlp/types.h"

/* What a growth could not allocate, for the caller's message. */
typedef struct trie_alloc_failure {
    const char *what; /* e.g. "the radix tree's nodes" */
    size_t bytes;
} trie_alloc_failure;

/* Gate and padding of one build, already checked (threshold >= 0, not NaN, gate known). */
typedef struct trie_options {
    uint32_t pad_multiple; /* 0 or 1: no padding */
    double threshold;      /* TEI semantics: >= 1 always radix, 0 never, else radix iff ratio < threshold */
    rmlp_gate gate;        /* which ratio and precision (RMLP_GATE_DISTINCT or RMLP_GATE_TEI, see the header) */
} trie_options;

/* Returns NULL when out of memory (trie_planner_size() bytes). */
rmlp_planner *trie_planner_new(void);
size_t trie_planner_size(void);
void trie_planner_delete(rmlp_planner *planner);

/* The count the plan's `generation` is compared with (any thread may read it). */
uint64_t trie_planner_generation(const rmlp_planner *planner);

/* Grows scratch for n_tokens tokens in n_seqs sequences padded to pad_multiple (a new generation).
 * Returns 0, or -1 when out of memory with *failed saying what (the planner keeps arrays it
 * had, each group either grown or as it was, and builds as before). */
int trie_planner_reserve(rmlp_planner *planner, size_t n_tokens, size_t n_seqs, uint32_t pad_multiple,
                         trie_alloc_failure *failed);

/* Builds the plan into *out (a new generation). n_tokens < 2^32, and the padded compact size fits 32 bits.
 * Returns 0, or -1 when out of memory with *failed saying what. */
int trie_plan_build(rmlp_planner *planner, const uint32_t *input_ids, const uint32_t *position_ids,
                    size_t n_tokens, const uint32_t *cu_seqlens, size_t n_seqs, const trie_options *options,
                    rmlp_plan *out, trie_alloc_failure *failed);

#endif
