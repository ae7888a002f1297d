/*
 * threads.c: how many threads the CPU path uses (threads.h). A server that runs one context per
 * worker thread usually wants 1 here (its own threads are the parallelism), a single-batch tool all
 * cores. The count starts at OpenBLAS's own choice, read once; from then on OpenBLAS itself runs on
 * one thread, inside each of the library's threads (linear.c), and the count is the library's.
 */
#include "threads.h"

#include <pthread.h>

#include <cblas.h>

#include "common/status.h"
#include "workers.h"

static uint32_t count; /* 0 until first read; written under `once` and by cpu_threads_set */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void first_read(void) {
    int n = openblas_get_num_threads();
    __atomic_store_n(&count, n > 0 ? (uint32_t)n : 1u, __ATOMIC_RELEASE);
    cpu_blas_one_thread();
}

void cpu_blas_one_thread(void) {
    if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

rmlp_status cpu_threads_set(const char *fn, uint32_t n_threads) {
    pthread_once(&once, first_read);
    if (n_threads == 0)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "n_threads is 0 (1 runs the CPU path on the calling thread)");
    if (n_threads > WORKERS_MAX)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                         "n_threads=%u exceeds the %d threads the CPU path can run (the count stays %u)", n_threads,
                         WORKERS_MAX, cpu_threads());
    __atomic_store_n(&count, n_threads, __ATOMIC_RELEASE);
    cpu_blas_one_thread();
    return RMLP_OK;
}

uint32_t cpu_threads(void) {
    pthread_once(&once, first_read);
    return __atomic_load_n(&count, __ATOMIC_ACQUIRE);
}
