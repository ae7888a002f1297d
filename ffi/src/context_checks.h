/*
 * context_checks.h: the argument checks every call on a context shares (layer_api.c for the
 * per-layer calls and read-outs, forward_api.c for whole forwards), on the host, before anything
 * runs: the context's guard, layers, buffers and attention arguments in either layout. A plan's
 * checks are plan_checks.h.
 */
#ifndef RMLP_FFI_CONTEXT_CHECKS_H
#define RMLP_FFI_CONTEXT_CHECKS_H

#include <stdbool.h>

#include "model_internal.h"

/* The guard of every call on a context, after clearing the last error: a NULL or freed context,
 * another kind of handle, or a context in a call (on another thread, or on this one: a host
 * callback calling back into the context running it) are refused. */
rmlp_status rmlp_context_enter(const char *fn, rmlp_context *context);
/* The same for the calls a host attention callback may make on the context running it
 * (rmlp_attention, rmlp_attention_compact): a call of this thread may be running. */
rmlp_status rmlp_context_enter_nested(const char *fn, rmlp_context *context);

rmlp_status rmlp_check_layer(const char *fn, const rmlp_context *context, uint32_t layer);
/* Each named buffer is non-NULL. */
rmlp_status rmlp_check_buffers(const char *fn, const void *const *buffers, const char *const *names, size_t n);
/* rmlp_attention's arguments (full layout: 0.1.0's fields, and the layer's sliding_window and
 * softcap), or with `compact` rmlp_attention_compact's (layout, n_compact and the host layout
 * arrays too). */
rmlp_status rmlp_check_attention_args(const char *fn, const rmlp_context *context, const rmlp_attention_args *a,
                                      bool compact);
/* FULL or COMPACT: what `space` (AUTO included) means for this plan. */
rmlp_attention_space rmlp_resolve_space(rmlp_attention_space space, const rmlp_plan *plan);

#endif
