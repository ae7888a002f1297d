/*
 * plan_checks.h: the checks of a plan before a model call reads it, in one place and run once per
 * call: that it is a plan (a live planner's latest, counts, cu_seqlens, arrays, index ranges), that
 * it fits the context, that its maps agree with each other (whoever built it: a plan a host built or
 * edited, or a library plan whose arrays it changed in place, cannot make a call compute a wrong
 * answer, read outside an array or poison a prefix cache), that it has the compact-attention layout,
 * and what the model takes (token ids, positions).
 */
#ifndef RMLP_FFI_PLAN_CHECKS_H
#define RMLP_FFI_PLAN_CHECKS_H

#include <stddef.h>
#include <stdint.h>

#include "model_internal.h"

/* The kinds of check a call asks for, besides that plan is a plan (always), in the order they run. */
enum {
    /* Non-empty, and no more batch rows or compact rows than the context was created for. */
    RMLP_PLAN_FITS = 1u << 0,
    /* The compact-attention layout (qo_indptr, as rmlp_plan_build makes it), consistent. */
    RMLP_PLAN_COMPACT = 1u << 1,
    /* The maps against each other (below); with qo_indptr the layout too. */
    RMLP_PLAN_MAPS = 1u << 2,
    /* RMLP_PLAN_MAPS where the context's backend reads the host's plan. The per-layer calls and
     * read-outs of a CUDA context read the device copy that rmlp_context_set_plan made after checking
     * the maps, and the CUDA layer refuses any plan but the one set (gpu_context_check_plan), so the
     * maps are not checked again on every layer (O(N) each time, a share of a device layer that
     * counts); on the CPU they read the host's arrays, so they are. */
    RMLP_PLAN_MAPS_ON_HOST = 1u << 3,
    /* Every sequence has at least one row. */
    RMLP_PLAN_NONEMPTY = 1u << 4,
    /* Token ids below vocab_size and positions below max_position_embeddings, named by batch row
     * (padding rows too: they are embedded like the others). */
    RMLP_PLAN_INPUTS = 1u << 5,
};

/* The checks of `checks` (RMLP_PLAN_* bits) on plan for a call on context, each at most once:
 * RMLP_OK, or the first failure (RMLP_ERR_INVALID_ARGUMENT naming the first bad index, or
 * RMLP_ERR_INVALID_SEQLENS as its check says).
 *
 * The maps, in one pass over the batch rows, the compact rows and the runs (O(N + N' + runs), no
 * memory). With i a batch row of sequence s and j = scatter[i]:
 *   - fold_gather strictly increasing over the N' compact rows, and scatter[fold_gather[j]] == j
 *     (every compact row is read, from the row it is gathered from);
 *   - fold_gather[j] <= i (each row reads its path's first occurrence: causal order);
 *   - compact_parent[j] is RMLP_NO_PARENT at a sequence's first row, else scatter[i - 1] (rows
 *     sharing a compact row share their whole path, so every parent also comes before its row);
 *   - with qo_indptr: its counts, and the rows of s past its first qo_indptr[s+1] - qo_indptr[s]
 *     from the end read qo_indptr[s].. in order, the earlier ones rows below qo_indptr[s];
 *   - with run_indptr: the runs of each sequence start at its first row, cover it, read consecutive
 *     compact rows each and are maximal.
 * compact_position_ids are the host's (a batch's positions may be any values), so only their range
 * is checked (RMLP_PLAN_INPUTS). */
rmlp_status rmlp_check_plan(const char *fn, const rmlp_context *context, const rmlp_plan *plan, unsigned checks);

/* qo_indptr (n_seqs + 1, `name` in messages) over n_compact rows, each sequence owning at most its
 * own length of cu_seqlens: a plan's layout, and rmlp_attention_compact's arguments. */
rmlp_status rmlp_check_qo_indptr(const char *fn, const char *name, const uint32_t *qo, const uint32_t *cu_seqlens,
                                 size_t n_seqs, size_t n_compact);

#endif
