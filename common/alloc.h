/*
 * alloc.h: the one place the library's heap allocations go through (free stays free). Every
 * allocation the library makes is one of these calls, so a test build can make any of them fail
 * and check that each caller turns the failure into RMLP_ERR_OUT_OF_MEMORY, with a message, and
 * leaks nothing (tests/test_alloc_failure.c).
 *
 * The test hook (RMLP_ALLOC_HOOKS, defined only for the static test library
 * radix_mlp_alloc_hooks, never for libradix_mlp.so) counts allocations and fails the n-th one
 * from now, alone or with every one after it. Counters are atomics, so threads may allocate
 * while a hook is armed.
 *
 * Not covered: jansson allocates through its own functions (a test routes them here with
 * json_set_alloc_funcs; the library must not, that setting is process-wide and the host's),
 * libc's own allocations (fopen, qsort) report through errno or cope, and OpenBLAS keeps its
 * own buffers, which it allocates once and which no status of ours can report.
 */
#ifndef RMLP_COMMON_ALLOC_H
#define RMLP_COMMON_ALLOC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* malloc, calloc, realloc and strdup, with their contracts (NULL when out of memory). */
void *rmlp_malloc(size_t bytes);
void *rmlp_calloc(size_t count, size_t size);
void *rmlp_realloc(void *pointer, size_t bytes);
char *rmlp_strdup(const char *text);
/* malloc of memory aligned to RMLP_ALIGN bytes (a cache line: whole vector loads from it never
 * straddle two lines), freed by free. */
#define RMLP_ALIGN 64
void *rmlp_malloc_aligned(size_t bytes);

#ifdef RMLP_ALLOC_HOOKS
/* Allocation n (0 = the next one) from now fails; with only_one false every later one fails
 * too. n < 0 disarms. Either way the counters start again from 0. */
void rmlp_alloc_fail_after(long n, int only_one);
/* Allocations attempted (failed ones included) and failures injected since the last
 * rmlp_alloc_fail_after. */
long rmlp_alloc_count(void);
long rmlp_alloc_failures(void);
#endif

#ifdef __cplusplus
}
#endif

#endif
