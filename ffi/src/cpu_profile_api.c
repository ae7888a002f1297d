/*
 * cpu_profile_api.c: rmlp_context_cpu_profile, where a CPU context's forwards spend their time
 * (cpu/profile.h measures it; a CUDA context's backend has no profile: zeros).
 */
#include <string.h>

#include "common/export.h"
#include "common/status.h"
#include "context_checks.h"
#include "model_internal.h"
#include "radix_mlp.h"
#include "validate.h"

/* out: NULL, or an output struct versioned by its struct_size (see rmlp_gpu_stats). */
static rmlp_status cpu_profile(const char *fn, rmlp_context *context, bool measure, rmlp_cpu_profile *out) {
    uint32_t size = out != NULL ? out->struct_size : 0;
    if (out != NULL && (size < sizeof(rmlp_cpu_profile) || size > RMLP_MAX_STRUCT_SIZE))
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                         "out->struct_size=%u is not the size of an rmlp_cpu_profile (%zu in this release, or a newer "
                         "header's larger one): set it to sizeof(rmlp_cpu_profile)", size, sizeof(rmlp_cpu_profile));
    rmlp_cpu_profile profile;
    memset(&profile, 0, sizeof profile);
    if (context->backend->cpu != NULL) context->backend->cpu->profile(context->backend_ctx, measure, &profile);
    if (out == NULL) return RMLP_OK;
    profile.struct_size = (uint32_t)sizeof profile;
    memset((char *)out + sizeof profile, 0, size - sizeof profile); /* a newer header's fields: unknown here */
    memcpy(out, &profile, sizeof profile);
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_context_cpu_profile(rmlp_context *context, bool measure, rmlp_cpu_profile *out) {
    static const char fn[] = "rmlp_context_cpu_profile";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status : rmlp_guard_leave(context, cpu_profile(fn, context, measure, out));
}
