/*
 * cuda_api.c: exported CUDA entry points: the device count (in a build without CUDA
 * RMLP_ERR_UNSUPPORTED; with CUDA every runtime error becomes a status whose message names the
 * call and CUDA's error string), and a context's GPU counters (zeros for a CPU context; on CUDA the
 * read of the non-finite output counter synchronises the context's stream).
 */
#include <string.h>

#include "backends.h"
#include "common/export.h"
#include "common/status.h"
#include "context_checks.h"
#include "radix_mlp.h"
#include "validate.h"

RMLP_EXPORT rmlp_status rmlp_cuda_device_count(int32_t *count) {
    static const char fn[] = "rmlp_cuda_device_count";
    rmlp_clear_error();
    if (count == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "count is NULL");
    *count = 0;
    const rmlp_backend *cuda = rmlp_backend_for(RMLP_DEVICE_CUDA);
    if (cuda == NULL)
        return rmlp_fail(RMLP_ERR_UNSUPPORTED, fn, "this libradix_mlp was built without CUDA (-DRMLP_CUDA=OFF or no nvcc)");
    return cuda->cuda->device_count(fn, count);
}

/* out: an output struct versioned by its struct_size (see rmlp_gpu_stats). On CUDA the non-finite
 * output counter is read from the device (synchronising the context's stream). */
static rmlp_status gpu_stats(const char *fn, rmlp_context *context, rmlp_gpu_stats *out) {
    if (out == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "out is NULL");
    uint32_t size = out->struct_size;
    if (size < sizeof(rmlp_gpu_stats) || size > RMLP_MAX_STRUCT_SIZE)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                         "out->struct_size=%u is not the size of an rmlp_gpu_stats (%zu in this release, or a newer "
                         "header's larger one): set it to sizeof(rmlp_gpu_stats)", size, sizeof(rmlp_gpu_stats));
    rmlp_gpu_stats stats;
    memset(&stats, 0, sizeof stats);
    const rmlp_backend_cuda_part *cuda = context->backend->cuda; /* zeros on the CPU */
    rmlp_status status = cuda != NULL ? cuda->gpu_stats(fn, context->backend_ctx, &stats) : RMLP_OK;
    if (status != RMLP_OK) return status;
    stats.struct_size = (uint32_t)sizeof stats;
    memset((char *)out + sizeof stats, 0, size - sizeof stats); /* a newer header's fields: unknown here */
    memcpy(out, &stats, sizeof stats);
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_context_gpu_stats(rmlp_context *context, rmlp_gpu_stats *out) {
    static const char fn[] = "rmlp_context_gpu_stats";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status : rmlp_guard_leave(context, gpu_stats(fn, context, out));
}
