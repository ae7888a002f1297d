/*
 * validate.h: argument checks shared by the exported entry points; each reports through
 * rmlp_fail with the calling function's name and the offending index.
 */
#ifndef RMLP_FFI_VALIDATE_H
#define RMLP_FFI_VALIDATE_H

#include <stddef.h>

#include "export.h"

/* cu_seqlens (n_seqs + 1): not NULL, n_seqs >= 1, starts at 0, non-decreasing, ends at n_tokens. */
rmlp_status rmlp_check_cu_seqlens(const char *fn, const uint32_t *cu_seqlens, size_t n_seqs, size_t n_tokens);

/* Every sequence of cu_seqlens (already checked) has at least one row. */
rmlp_status rmlp_check_nonempty_seqs(const char *fn, const uint32_t *cu_seqlens, size_t n_seqs);

/* A plan as a host may hand one back: counts consistent, cu_seqlens valid, arrays present, every
 * index in range. */
rmlp_status rmlp_check_plan(const char *fn, const rmlp_plan *plan);

#endif
