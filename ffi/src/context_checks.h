/*
 * context_checks.h: the argument checks every call on a context shares (model_api.c for the
 * per-layer calls and read-outs, forward_api.c for whole forwards), on the host, before anything
 * runs: the context's guard, the plan against the context, layers, buffers, token ids, sliding
 * windows, attention arguments in either layout, and a plan's compact-attention layout.
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

/* A plan that is valid, fits the context and whose maps agree with each other (plan_maps.h: every
 * call, whoever built the plan, since a host may have edited a library plan's arrays in place). */
rmlp_status rmlp_check_call(const char *fn, const rmlp_context *context, const rmlp_plan *plan);
/* rmlp_check_call for the per-layer calls and read-outs. On a CUDA context these read the device
 * copy of the plan that rmlp_context_set_plan made after rmlp_check_call passed it, and the CUDA
 * layer refuses any plan but the one set (gpu_context_check_plan), so the maps are not checked
 * again on every layer (O(N) each time, a share of a device layer that counts); on the CPU they read
 * the host's arrays, so they are. */
rmlp_status rmlp_check_layer_call(const char *fn, const rmlp_context *context, const rmlp_plan *plan);
rmlp_status rmlp_check_layer(const char *fn, const rmlp_context *context, uint32_t layer);
/* Each named buffer is non-NULL. */
rmlp_status rmlp_check_buffers(const char *fn, const void *const *buffers, const char *const *names, size_t n);
/* Token ids below vocab_size and positions below max_position_embeddings, named by batch row
 * (padding rows too: they are embedded like the others). */
rmlp_status rmlp_check_inputs(const char *fn, const rmlp_model_config *cfg, const rmlp_plan *plan);
/* A host's attention (host_attention) is not told a layer's sliding window or soft-cap
 * (model/model_ext.h): refused, naming the layer, on a model with a soft-cap, or with a window
 * shorter than a sequence of the batch (up to it the window changes nothing). */
rmlp_status rmlp_check_host_attention(const char *fn, const rmlp_model *model, bool host_attention,
                                      const uint32_t *cu_seqlens, size_t n_seqs);
/* The plan has the compact-attention layout (qo_indptr from rmlp_plan_build) and it is consistent. */
rmlp_status rmlp_check_compact_plan(const char *fn, const rmlp_plan *plan);
/* rmlp_attention's arguments (full layout; 0.1.0's fields only), or with `compact`
 * rmlp_attention_compact's (layout, n_compact and the host layout arrays too). */
rmlp_status rmlp_check_attention_args(const char *fn, const rmlp_context *context, const rmlp_attention_args *a,
                                      bool compact);
/* FULL or COMPACT: what `space` (AUTO included) means for this plan. */
rmlp_attention_space rmlp_resolve_space(rmlp_attention_space space, const rmlp_plan *plan);

#endif
