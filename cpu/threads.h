/*
 * threads.h: how many threads the CPU path uses (rmlp_set_cpu_threads, rmlp_cpu_threads: the CPU
 * backend's table, common/backend.h). The layer code itself runs on the calling thread; its GEMMs
 * run on OpenBLAS's thread pool, which is one per process, and a context's elementwise passes, a
 * generation session's attention and oneDNN take as many threads as it has.
 */
#ifndef RMLP_CPU_THREADS_H
#define RMLP_CPU_THREADS_H

#include <stdint.h>

#include "radix_mlp/types.h"

/* Sets OpenBLAS's thread count to n_threads (>= 1); a count above what this OpenBLAS can run is
 * refused (RMLP_ERR_INVALID_ARGUMENT naming `fn`) and the count left as it was. */
rmlp_status cpu_threads_set(const char *fn, uint32_t n_threads);
/* The count now (at least 1). */
uint32_t cpu_threads(void);

#endif
