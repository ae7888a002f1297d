/*
 * plan_maps.h: a plan's maps checked against each other before a model call reads them, so a plan
 * a host built or edited (or a library plan whose arrays it changed in place) cannot make a call
 * compute a wrong answer, read outside an array or poison a prefix cache.
 */
#ifndef RMLP_FFI_PLAN_MAPS_H
#define RMLP_FFI_PLAN_MAPS_H

#include "radix_mlp.h"

/* One pass over the batch rows, the compact rows and the runs (O(N + N' + runs), no memory), on a
 * plan whose counts, cu_seqlens and index ranges rmlp_check_plan has passed. With i a batch row of
 * sequence s and j = scatter[i]:
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
 * is checked (rmlp_check_inputs). RMLP_ERR_INVALID_ARGUMENT naming the first bad index. */
rmlp_status rmlp_check_plan_maps(const char *fn, const rmlp_plan *plan);

#endif
