/*
 * guard.h: the misuse checks every handle (planner, model, context) carries as its first member.
 *
 * - A magic word per kind, set at creation and cleared on free: an entry point handed a freed
 *   handle, or a handle of another kind, returns RMLP_ERR_INVALID_ARGUMENT ("context was freed or
 *   is not an rmlp_context handle"), and a second free does nothing. Best-effort: reading a freed
 *   handle is itself undefined behaviour (in practice the allocator's free list has overwritten
 *   the word, so it no longer matches), and a freed handle whose memory went to a new handle of
 *   the same kind looks alive. Since the guard is the first member of every handle, reading it
 *   through a pointer to another kind of handle stays inside that handle's memory.
 * - An owner word for the single-threaded kinds (planner, context): the thread inside a call on
 *   the handle. A call from another thread meanwhile returns RMLP_ERR_BUSY and touches nothing;
 *   so does one from the owning thread (a host callback calling back into the handle whose call
 *   runs it), except the calls a callback is meant to make, which nest (rmlp_attention and
 *   rmlp_attention_compact on the context whose forward runs the attention callback). Taking and releasing the owner word is an acquire/release
 *   pair, so one thread's writes to the handle happen before the next owner's reads.
 */
#ifndef RMLP_COMMON_GUARD_H
#define RMLP_COMMON_GUARD_H

#include <stdatomic.h>
#include <stdint.h>

#include "radix_mlp/types.h"

/* Magic words of live handles ("plnr", "modl", "ctxt"); a freed one holds RMLP_MAGIC_FREED. */
#define RMLP_MAGIC_PLANNER 0x706c6e72u
#define RMLP_MAGIC_MODEL 0x6d6f646cu
#define RMLP_MAGIC_CONTEXT 0x63747874u
#define RMLP_MAGIC_BATCHER 0x62746368u /* "btch": batch/batcher.h */
#define RMLP_MAGIC_FREED 0xdeadf4eeu

typedef struct rmlp_guard {
    _Atomic uint32_t magic;   /* RMLP_MAGIC_* while live */
    uint32_t depth;           /* nested entries of the owning thread (only it touches this) */
    _Atomic uintptr_t owner;  /* the thread inside a call (its tag's address), 0 when idle */
} rmlp_guard;

/* A new handle's guard: live, idle. */
void rmlp_guard_init(rmlp_guard *guard, uint32_t magic);

/* Whether `handle` (any pointer, NULL included) is a live handle of this kind. */
int rmlp_guard_is_live(const void *handle, uint32_t magic);

/* RMLP_OK when `handle` (named `name` in messages, of type `type`) is a live handle of this kind,
 * else RMLP_ERR_INVALID_ARGUMENT: "<name> is NULL" or "<name> was freed or is not an <type> handle". */
rmlp_status rmlp_guard_check(const char *fn, const void *handle, uint32_t magic, const char *name, const char *type);

/* Checks `handle` as rmlp_guard_check does and makes the calling thread its owner:
 * RMLP_OK, or RMLP_ERR_INVALID_ARGUMENT (NULL, freed or another kind) or RMLP_ERR_BUSY (a call on
 * it is running, on another thread or on this one), each with a message. Every RMLP_OK is paired
 * with one rmlp_guard_leave. */
rmlp_status rmlp_guard_enter(const char *fn, void *handle, uint32_t magic, const char *name, const char *type);

/* As rmlp_guard_enter, but a call of this thread may be running (it nests): for the calls a host
 * callback may make on the handle whose call runs it. */
rmlp_status rmlp_guard_enter_nested(const char *fn, void *handle, uint32_t magic, const char *name,
                                    const char *type);

/* Ends the calling thread's entry; returns `status`, so a call can end in one expression. */
rmlp_status rmlp_guard_leave(void *handle, rmlp_status status);

/* For a free: 1 when `handle` is a live, idle handle of this kind, now marked freed (the caller
 * releases its memory); else 0 with a message naming why it is left alone. Clears the calling
 * thread's last error first, so an empty rmlp_last_error() after a free means it was freed. */
int rmlp_guard_retire(const char *fn, void *handle, uint32_t magic, const char *name, const char *type);

#endif
