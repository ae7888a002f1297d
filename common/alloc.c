/*
 * alloc.c: the library's allocation functions (alloc.h). In the shipped library they are the
 * libc calls; built with RMLP_ALLOC_HOOKS (tests only) each call first asks the failure hook
 * whether it is the one to fail.
 */
#include "alloc.h"

#include <stdlib.h>
#include <string.h>

#ifdef RMLP_ALLOC_HOOKS
#include <stdatomic.h>

static atomic_long attempts;         /* allocations since the hook was last set */
static atomic_long injected;         /* failures returned since then */
static atomic_long fail_at = -1;     /* the attempt that fails; < 0: none */
static atomic_int fail_only_one;     /* 0: every attempt from fail_at on fails */

void rmlp_alloc_fail_after(long n, int only_one) {
    atomic_store(&fail_at, -1); /* disarm first, so no thread sees the new target with old counts */
    atomic_store(&attempts, 0);
    atomic_store(&injected, 0);
    atomic_store(&fail_only_one, only_one != 0);
    atomic_store(&fail_at, n < 0 ? -1 : n);
}

long rmlp_alloc_count(void) { return atomic_load(&attempts); }

long rmlp_alloc_failures(void) { return atomic_load(&injected); }

/* Counts one attempt; 1 when it is to fail. */
static int inject_failure(void) {
    long attempt = atomic_fetch_add(&attempts, 1), target = atomic_load(&fail_at);
    if (target < 0 || attempt < target || (attempt > target && atomic_load(&fail_only_one))) return 0;
    atomic_fetch_add(&injected, 1);
    return 1;
}
#else
static int inject_failure(void) { return 0; }
#endif

void *rmlp_malloc(size_t bytes) { return inject_failure() ? NULL : malloc(bytes); }

void *rmlp_calloc(size_t count, size_t size) { return inject_failure() ? NULL : calloc(count, size); }

void *rmlp_realloc(void *pointer, size_t bytes) { return inject_failure() ? NULL : realloc(pointer, bytes); }

void *rmlp_malloc_aligned(size_t bytes) {
    size_t rounded = (bytes + RMLP_ALIGN - 1) / RMLP_ALIGN * RMLP_ALIGN; /* aligned_alloc's contract */
    if (inject_failure() || rounded < bytes) return NULL;
    return aligned_alloc(RMLP_ALIGN, rounded ? rounded : RMLP_ALIGN);
}

char *rmlp_strdup(const char *text) {
    size_t bytes = strlen(text) + 1;
    char *copy = rmlp_malloc(bytes);
    return copy != NULL ? memcpy(copy, text, bytes) : NULL;
}
