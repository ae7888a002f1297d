/*
 * threads.c: how many threads the CPU path uses (threads.h). A server that runs one context per
 * worker thread usually wants 1 here (its own threads are the parallelism), a single-batch tool all
 * cores. OpenBLAS caps the count at its build's maximum: a request above it is refused and the
 * count left as it was, never silently lowered.
 */
#include "threads.h"

#include <cblas.h>

#include "common/status.h"

rmlp_status cpu_threads_set(const char *fn, uint32_t n_threads) {
    if (n_threads == 0)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "n_threads is 0 (1 runs BLAS on the calling thread)");
    int before = openblas_get_num_threads();
    int wanted = n_threads > 65536 ? 65536 : (int)n_threads; /* far above any OpenBLAS build's maximum */
    openblas_set_num_threads(wanted);
    int now = openblas_get_num_threads();
    if (now != wanted || (uint32_t)wanted != n_threads) {
        openblas_set_num_threads(before);
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                         "n_threads=%u exceeds the %d threads this OpenBLAS can run (the count stays %d)", n_threads,
                         now, before);
    }
    return RMLP_OK;
}

uint32_t cpu_threads(void) {
    int n = openblas_get_num_threads();
    return n > 0 ? (uint32_t)n : 1u;
}
