/*
 * test_version.c: the runtime version matches the header the test was compiled with, and the
 * build flags agree with what rmlp_cuda_device_count answers (a host decides from these whether
 * it can use the GPU path) and with the build's configuration (FlashInfer).
 */
#include <stdio.h>
#include <string.h>

#include "radix_mlp.h"
#include "test_util.h"

int main(void) {
    CHECK_EQ(rmlp_version(), RMLP_VERSION, "rmlp_version() vs RMLP_VERSION of the header");
    CHECK_EQ(RMLP_VERSION, (RMLP_VERSION_MAJOR << 16) | (RMLP_VERSION_MINOR << 8) | RMLP_VERSION_PATCH,
             "RMLP_VERSION packs major.minor.patch");

    char want[64];
    snprintf(want, sizeof want, "%d.%d.%d", RMLP_VERSION_MAJOR, RMLP_VERSION_MINOR, RMLP_VERSION_PATCH);
    const char *got = rmlp_version_string();
    CHECK(got != NULL && strcmp(got, want) == 0, "rmlp_version_string()=\"%s\", want \"%s\"", got ? got : "(null)",
          want);

    uint32_t flags = rmlp_build_flags();
    CHECK((flags & ~(uint32_t)(RMLP_BUILD_CUDA | RMLP_BUILD_FLASHINFER)) == 0,
          "rmlp_build_flags()=%#x has unknown bits", flags);
    CHECK((flags & RMLP_BUILD_FLASHINFER) == 0 || (flags & RMLP_BUILD_CUDA) != 0,
          "rmlp_build_flags()=%#x: FlashInfer without CUDA", flags);
    /* What CMake configured (RMLP_WITH_FLASHINFER) is what the library says it has. */
    CHECK(((flags & RMLP_BUILD_FLASHINFER) != 0) == (RMLP_EXPECT_FLASHINFER != 0),
          "rmlp_build_flags()=%#x, but this build was configured %s FlashInfer", flags,
          RMLP_EXPECT_FLASHINFER ? "with" : "without");

    int32_t count = -1;
    rmlp_status status = rmlp_cuda_device_count(&count);
    const char *error = rmlp_last_error();
    if ((flags & RMLP_BUILD_CUDA) == 0) {
        CHECK(status == RMLP_ERR_UNSUPPORTED, "CPU-only build: rmlp_cuda_device_count gave %d (%s)", status, error);
        CHECK_EQ(count, 0, "CPU-only build: count");
        CHECK(strstr(error, "rmlp_cuda_device_count") != NULL, "message \"%s\" names the function", error);
    } else if (status == RMLP_OK) {
        CHECK(count > 0, "CUDA build, RMLP_OK: count=%d", count);
        CHECK(error[0] == '\0', "CUDA build, RMLP_OK: last error \"%s\" should be empty", error);
    } else {
        CHECK(status == RMLP_ERR_NO_DEVICE || status == RMLP_ERR_CUDA, "CUDA build: status %d (%s)", status, error);
        CHECK_EQ(count, 0, "CUDA build without a device: count");
        CHECK(strstr(error, "cudaGetDeviceCount") != NULL, "message \"%s\" names the CUDA call", error);
    }

    status = rmlp_cuda_device_count(NULL);
    CHECK(status == RMLP_ERR_INVALID_ARGUMENT, "rmlp_cuda_device_count(NULL) gave %d", status);
    CHECK(strstr(rmlp_last_error(), "count is NULL") != NULL, "message \"%s\"", rmlp_last_error());
    return tu_summary();
}
