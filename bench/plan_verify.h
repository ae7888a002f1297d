/*
 * plan_verify.h: an independent checker of RadixMLP plans, used by the tests and by
 * bench_trie to validate every plan it times. It trusts nothing the library computed.
 */
#ifndef RMLP_PLAN_VERIFY_H
#define RMLP_PLAN_VERIFY_H

#include <stddef.h>
#include <stdint.h>

#include "radix_mlp.h"

/* Checks a plan against its batch in O(N log N) without trusting the library. Returns 0 if the
 * plan is valid, else non-zero with a message in why (why_len bytes). pad_multiple: the padding
 * asked for (0 or 1 = none). */
int plan_verify(const uint32_t *input_ids, const uint32_t *position_ids, size_t n_tokens,
                const uint32_t *cu_seqlens, size_t n_seqs, uint32_t pad_multiple,
                const rmlp_plan *plan, char *why, size_t why_len);

#endif
