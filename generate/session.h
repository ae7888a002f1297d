/*
 * session.h: generation on the prefix tree, the session logic every backend shares (session.c).
 * A session lives on a context with a prefix cache: begin prefills the plan's prompts through the
 * cached forward (so prompt rows are cache slots, shared where the prompts share) and locks each
 * sequence's last slot (which keeps its whole path: only unlocked leaves are evicted); each step
 * appends one row per active sequence as a child slot of its last one (a row already cached, or
 * appended by another sequence this step, is reused, not recomputed), cuts the new rows' paths
 * into chains (chains.h) and hands them to the backend's step (common/backend.h: cpu/decode.c,
 * gpu/decode.cu); finishing a sequence unlocks its last slot: its rows stay cached and evictable.
 * The entry points (ffi/src/generate_api.c) check the context and the plan before these run.
 */
#ifndef RMLP_GENERATE_SESSION_H
#define RMLP_GENERATE_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "common/backend.h"
#include "radix_mlp/types.h"

struct kv_cache;

typedef struct generate_session generate_session;

/* What a session runs on: a context's backend, its context and cache side, its prefix cache, and
 * the model's config (all the context's, which outlives the session). */
typedef struct generate_target {
    const rmlp_backend *backend;
    void *ctx, *cache_side;
    struct kv_cache *cache;
    const rmlp_model_config *config;
} generate_target;

/* A session for the plan's prompts (a checked compact plan, every sequence non-empty), params
 * read already; logits (n_seqs, vocab) of each prompt's last row. */
rmlp_status generate_session_begin(const char *fn, const generate_target *target, const rmlp_plan *plan,
                                   const rmlp_generate_params *params, float *logits, generate_session **out);
/* One token per active sequence (n_tokens of them, in rmlp_generate_active's order); logits
 * (n_active, vocab). Nothing changes when it fails. */
rmlp_status generate_session_step(const char *fn, generate_session *session, const uint32_t *tokens,
                                  size_t n_tokens, float *logits);
rmlp_status generate_session_finish(const char *fn, generate_session *session, uint32_t seq);
/* Unlocks the active sequences' rows and frees the session. NULL: no-op. */
void generate_session_end(generate_session *session);
/* Frees a session's memory without touching the cache (the context is being freed). NULL: no-op. */
void generate_session_free(generate_session *session);

/* The active sequences, ascending, into seqs (NULL: only the count); their count. */
size_t generate_session_active(const generate_session *session, uint32_t *seqs);
rmlp_generate_stats generate_session_stats(const generate_session *session);

#endif
