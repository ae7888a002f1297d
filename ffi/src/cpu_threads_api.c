/*
 * cpu_threads_api.c: how many threads the CPU path uses, through the CPU backend's table
 * (cpu/threads.c holds the count: OpenBLAS's thread pool, one per process). A server that runs
 * one context per worker thread usually wants 1 here (its own threads are the parallelism), a
 * single-batch tool all cores. A request above what OpenBLAS can run is refused and the count left
 * as it was, never silently lowered.
 */
#include "backends.h"
#include "common/export.h"
#include "common/status.h"
#include "radix_mlp.h"

RMLP_EXPORT rmlp_status rmlp_set_cpu_threads(uint32_t n_threads) {
    static const char fn[] = "rmlp_set_cpu_threads";
    rmlp_clear_error();
    return rmlp_backend_for(RMLP_DEVICE_CPU)->cpu->set_threads(fn, n_threads);
}

RMLP_EXPORT uint32_t rmlp_cpu_threads(void) { return rmlp_backend_for(RMLP_DEVICE_CPU)->cpu->threads(); }
