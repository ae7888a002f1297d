/*
 * guard.c: handle magic words and the per-handle owner word of guard.h.
 */
#include "guard.h"

#include "status.h"

/* One per thread; its address names the thread in a guard's owner word (never 0). */
static _Thread_local char thread_tag;

static uintptr_t this_thread(void) { return (uintptr_t)&thread_tag; }

void rmlp_guard_init(rmlp_guard *guard, uint32_t magic) {
    atomic_init(&guard->magic, magic);
    guard->depth = 0;
    atomic_init(&guard->owner, 0);
}

int rmlp_guard_is_live(const void *handle, uint32_t magic) {
    if (handle == NULL) return 0;
    rmlp_guard *guard = (rmlp_guard *)handle; /* every handle begins with its guard */
    return atomic_load_explicit(&guard->magic, memory_order_relaxed) == magic;
}

rmlp_status rmlp_guard_check(const char *fn, const void *handle, uint32_t magic, const char *name,
                             const char *type) {
    if (handle == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "%s is NULL", name);
    if (!rmlp_guard_is_live(handle, magic))
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "%s was freed or is not an %s handle", name, type);
    return RMLP_OK;
}

/* rmlp_guard_enter and rmlp_guard_enter_nested: `nest` lets the owning thread in again. */
static rmlp_status enter(const char *fn, void *handle, uint32_t magic, const char *name, const char *type,
                         int nest) {
    rmlp_status status = rmlp_guard_check(fn, handle, magic, name, type);
    if (status != RMLP_OK) return status;
    rmlp_guard *guard = handle;
    uintptr_t owner = 0;
    if (atomic_compare_exchange_strong_explicit(&guard->owner, &owner, this_thread(), memory_order_acquire,
                                                memory_order_relaxed)) {
        guard->depth = 1;
        return RMLP_OK;
    }
    if (owner == this_thread() && nest) { /* a call from within a call of this thread (a host callback) */
        guard->depth++;
        return RMLP_OK;
    }
    if (owner == this_thread())
        return rmlp_fail(RMLP_ERR_BUSY, fn,
                         "%s is inside a call on this thread already (a host attention callback may call only "
                         "rmlp_attention or rmlp_attention_compact on the %s running it); nothing was done",
                         name, name);
    return rmlp_fail(RMLP_ERR_BUSY, fn,
                     "%s is in use by a call on another thread (an %s is single-threaded: use one per thread, "
                     "or serialise its calls); nothing was done",
                     name, type);
}

rmlp_status rmlp_guard_enter(const char *fn, void *handle, uint32_t magic, const char *name, const char *type) {
    return enter(fn, handle, magic, name, type, 0);
}

rmlp_status rmlp_guard_enter_nested(const char *fn, void *handle, uint32_t magic, const char *name,
                                    const char *type) {
    return enter(fn, handle, magic, name, type, 1);
}

rmlp_status rmlp_guard_leave(void *handle, rmlp_status status) {
    rmlp_guard *guard = handle;
    if (--guard->depth == 0) atomic_store_explicit(&guard->owner, 0, memory_order_release);
    return status;
}

int rmlp_guard_retire(const char *fn, void *handle, uint32_t magic, const char *name, const char *type) {
    rmlp_clear_error();
    if (!rmlp_guard_is_live(handle, magic)) {
        rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "%s was freed or is not an %s handle; left alone", name, type);
        return 0;
    }
    rmlp_guard *guard = handle;
    uintptr_t owner = 0;
    if (!atomic_compare_exchange_strong_explicit(&guard->owner, &owner, this_thread(), memory_order_acquire,
                                                 memory_order_relaxed)) {
        rmlp_fail(RMLP_ERR_BUSY, fn, "%s is in use by a call %s; not freed", name,
                  owner == this_thread() ? "of this thread (freed from within that call)" : "on another thread");
        return 0;
    }
    atomic_store_explicit(&guard->magic, RMLP_MAGIC_FREED, memory_order_relaxed);
    return 1;
}
