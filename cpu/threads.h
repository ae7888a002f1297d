/*
 * threads.h: how many threads the CPU path uses (rmlp_set_cpu_threads, rmlp_cpu_threads: the CPU
 * backend's table, common/backend.h): a context's pool (its GEMMs, elementwise passes and
 * attention), a generation session's threads and oneDNN's take that many. OpenBLAS runs on one
 * thread inside each of them.
 */
#ifndef RMLP_CPU_THREADS_H
#define RMLP_CPU_THREADS_H

#include <stdint.h>

#include "radix_mlp/types.h"

/* Sets the count to n_threads (1 .. WORKERS_MAX); 0 or more is refused (RMLP_ERR_INVALID_ARGUMENT
 * naming `fn`) and the count left as it was. */
rmlp_status cpu_threads_set(const char *fn, uint32_t n_threads);
/* The count now (at least 1): at first OpenBLAS's own (OPENBLAS_NUM_THREADS, else one per core). */
uint32_t cpu_threads(void);
/* Sets OpenBLAS's own thread count to 1 where something else changed it (process-wide). */
void cpu_blas_one_thread(void);

#endif
