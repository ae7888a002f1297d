/*
 * version.c: the runtime version, so a host can compare the header it was compiled with
 * (RMLP_VERSION) against the binary it loaded. The build flags (rmlp_build_flags) are what the
 * library's backends bring: ffi/src/backends.c.
 */
#include "export.h"
#include "radix_mlp/library.h"

#define RMLP_STR_(x) #x
#define RMLP_STR(x) RMLP_STR_(x)

RMLP_EXPORT uint32_t rmlp_version(void) { return RMLP_VERSION; }

RMLP_EXPORT const char *rmlp_version_string(void) {
    return RMLP_STR(RMLP_VERSION_MAJOR) "." RMLP_STR(RMLP_VERSION_MINOR) "." RMLP_STR(RMLP_VERSION_PATCH);
}
