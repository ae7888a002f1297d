/*
 * forward.h: the whole-model forward of forward.c for calls inside the library that already hold
 * the context's guard (generation's prefill), which may not enter it again (guard.h).
 */
#ifndef RMLP_FFI_FORWARD_H
#define RMLP_FFI_FORWARD_H

#include <stdbool.h>

#include "model_internal.h"

/* rmlp_forward_compact (compact_out) or rmlp_forward with the built-in attention, every check
 * included, its messages under `fn`, for a caller inside a call on `context`. */
rmlp_status rmlp_forward_in_call(const char *fn, rmlp_context *context, const rmlp_plan *plan, void *out,
                                 bool compact_out);

#endif
