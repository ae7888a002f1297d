/*
 * version.c: the runtime version and build flags, so a host can compare the header it
 * was compiled with (RMLP_VERSION) against the binary it loaded.
 */
#include "export.h"

#define RMLP_STR_(x) #x
#define RMLP_STR(x) RMLP_STR_(x)

RMLP_EXPORT uint32_t rmlp_version(void) { return RMLP_VERSION; }

RMLP_EXPORT const char *rmlp_version_string(void) {
    return RMLP_STR(RMLP_VERSION_MAJOR) "." RMLP_STR(RMLP_VERSION_MINOR) "." RMLP_STR(RMLP_VERSION_PATCH);
}

RMLP_EXPORT uint32_t rmlp_build_flags(void) {
    uint32_t flags = 0;
#ifdef RMLP_WITH_CUDA
    flags |= RMLP_BUILD_CUDA;
#endif
#ifdef RMLP_WITH_FLASHINFER
    flags |= RMLP_BUILD_FLASHINFER;
#endif
    return flags;
}
