/*
 * validate.h: argument checks shared by the exported entry points; each reports through
 * rmlp_fail with the calling function's name and the offending index. A plan's are plan_checks.h.
 */
#ifndef RMLP_FFI_VALIDATE_H
#define RMLP_FFI_VALIDATE_H

#include <stddef.h>

#include "common/status.h"

/* cu_seqlens (n_seqs + 1): not NULL, n_seqs >= 1, starts at 0, non-decreasing, ends at n_tokens. */
rmlp_status rmlp_check_cu_seqlens(const char *fn, const uint32_t *cu_seqlens, size_t n_seqs, size_t n_tokens);

/* Every sequence of cu_seqlens (already checked) has at least one row. */
rmlp_status rmlp_check_nonempty_seqs(const char *fn, const uint32_t *cu_seqlens, size_t n_seqs);


/* Largest struct_size a params struct may claim (a larger one is garbage, not a newer header). */
#define RMLP_MAX_STRUCT_SIZE 1024u

/* Reads a caller's versioned params struct (any rmlp_*_params: its first field is uint32_t
 * struct_size) into `out`, which holds this library's defaults (current_size bytes; `type` names
 * it in messages). The caller's struct may be this library's size; an earlier release's, one of
 * older_sizes (n_older, ascending), whose missing fields keep the defaults; or larger, up to
 * RMLP_MAX_STRUCT_SIZE, with every byte past current_size zero. Anything else is
 * RMLP_ERR_INVALID_ARGUMENT naming params->struct_size. */
rmlp_status rmlp_read_params(const char *fn, const char *type, const void *params, void *out, size_t current_size,
                             const size_t *older_sizes, size_t n_older);

#endif
