/*
 * forward_rows.h: which rows a whole forward writes to its output (rmlp_forward: every batch
 * row; rmlp_forward_compact: the compact rows; rmlp_forward_last: each sequence's last row), as the
 * backends (common/backend.h) and the prefix cache (cache/kv_cache.h) take it. Internal.
 */
#ifndef RMLP_COMMON_FORWARD_ROWS_H
#define RMLP_COMMON_FORWARD_ROWS_H

#include <stddef.h>

#include "radix_mlp/types.h"

typedef enum forward_rows {
    FORWARD_BATCH_ROWS,   /* out (n_tokens, hidden): every batch row */
    FORWARD_COMPACT_ROWS, /* out (n_compact_padded, hidden): the compact rows, padding zeroed */
    FORWARD_LAST_ROWS,    /* out (n_seqs, hidden): batch row cu_seqlens[s + 1] - 1 of each sequence s;
                           * the last layer's post-attention runs on those rows only */
} forward_rows;

/* How many rows of output `rows` names for plan (the compact ones without their padding). */
static inline size_t forward_rows_count(const rmlp_plan *plan, forward_rows rows) {
    return rows == FORWARD_COMPACT_ROWS ? plan->n_compact : rows == FORWARD_LAST_ROWS ? plan->n_seqs : plan->n_tokens;
}

#endif
