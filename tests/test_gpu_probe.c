/*
 * test_gpu_probe.c: on a machine with a CUDA device and a CUDA build, the library sees at least
 * one device. Elsewhere it skips visibly (exit 77, which CTest reports as skipped), so a CPU-only
 * run never passes a GPU test silently.
 */
#include <stdio.h>

#include "radix_mlp.h"
#include "test_util.h"

#define SKIP_CODE 77

int main(void) {
    if ((rmlp_build_flags() & RMLP_BUILD_CUDA) == 0) {
        printf("SKIP: libradix_mlp was built without CUDA (RMLP_BUILD_CUDA not in rmlp_build_flags())\n");
        return SKIP_CODE;
    }
    int32_t count = 0;
    rmlp_status status = rmlp_cuda_device_count(&count);
    if (status == RMLP_ERR_NO_DEVICE) {
        printf("SKIP: no CUDA device present: %s\n", rmlp_last_error());
        return SKIP_CODE;
    }
    CHECK(status == RMLP_OK, "rmlp_cuda_device_count gave %d (%s): %s", status, rmlp_status_string(status),
          rmlp_last_error());
    CHECK(count >= 1, "device count %d", count);
    printf("CUDA devices: %d\n", count);
    return tu_summary();
}
