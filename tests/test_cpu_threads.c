/*
 * test_cpu_threads.c: rmlp_set_cpu_threads and rmlp_cpu_threads, the thread count of the CPU path
 * (a context's pool; OpenBLAS itself on one thread): a count that is set reads back, and leaves
 * OpenBLAS's own count at 1; 0 and a count beyond what the CPU path can run are refused with a
 * message naming the count and leave the count as it was.
 */
#include <string.h>

#include <cblas.h>

#include "test_util.h"

/* Tries a count that must be refused; the count must stay `before`. */
static void refused(uint32_t n_threads, const char *input, const char *want_msg, uint32_t before) {
    rmlp_status status = rmlp_set_cpu_threads(n_threads);
    const char *msg = rmlp_last_error();
    CHECK_EQ(status, RMLP_ERR_INVALID_ARGUMENT, "%s", input);
    CHECK(strstr(msg, want_msg) != NULL, "%s: message '%s' lacks '%s'", input, msg, want_msg);
    CHECK_EQ(rmlp_cpu_threads(), before, "%s changed the count", input);
    tu_record_bad_input(input, status, msg);
}

int main(void) {
    uint32_t start = rmlp_cpu_threads();
    CHECK(start >= 1, "the count at start is %u", start);
    for (uint32_t n = 1; n <= 3; n++) {
        CHECK_EQ(rmlp_set_cpu_threads(n), RMLP_OK, "%u threads: %s", n, rmlp_last_error());
        CHECK_EQ(rmlp_cpu_threads(), n, "read back after setting %u", n);
        CHECK_EQ(openblas_get_num_threads(), 1, "OpenBLAS's own count after setting %u", n);
    }
    refused(0, "n_threads 0", "rmlp_set_cpu_threads: n_threads is 0", 3);
    refused(257, "n_threads 257", "n_threads=257 exceeds the 256 threads", 3);
    refused(1000000, "n_threads 10^6", "n_threads=1000000 exceeds the ", 3);
    refused(UINT32_MAX, "n_threads 2^32-1", "n_threads=4294967295 exceeds the ", 3);
    CHECK_EQ(rmlp_set_cpu_threads(start), RMLP_OK, "restoring %u: %s", start, rmlp_last_error());
    return tu_summary();
}
