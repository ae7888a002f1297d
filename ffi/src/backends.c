/*
 * backends.c: the backend tables of libradix_mlp (backends.h): the CPU's, and CUDA's where the
 * build has it (the one place that asks), and rmlp_build_flags, what they bring.
 */
#include "backends.h"

#include "common/export.h"
#include "common/status.h"
#include "cpu/runner.h"
#include "gpu/runner.h"
#include "radix_mlp.h"

static const rmlp_backend *const backends[] = {
    &rmlp_backend_cpu,
#ifdef RMLP_WITH_CUDA
    &rmlp_backend_cuda,
#endif
};

const rmlp_backend *rmlp_backend_for(rmlp_device device) {
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
        if (backends[i]->device == device) return backends[i];
    return NULL;
}

rmlp_status rmlp_backend_pick(const char *fn, rmlp_device device, const rmlp_backend **out) {
    *out = rmlp_backend_for(device);
    return *out != NULL ? RMLP_OK /* only CUDA's can be missing: the CPU's is always there */
                        : rmlp_fail(RMLP_ERR_UNSUPPORTED, fn, "params->device=RMLP_DEVICE_CUDA but this libradix_mlp "
                                    "was built without CUDA (-DRMLP_CUDA=OFF or no nvcc)");
}

RMLP_EXPORT uint32_t rmlp_build_flags(void) {
    uint32_t flags = 0;
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++) flags |= backends[i]->build_flags;
    return flags;
}
