/*
 * status.c: status strings and the thread-local last-error message (and the status of a host
 * attention callback, which both forwards turn into one).
 * Messages are formatted into a fixed per-thread buffer (truncated, never allocated), so
 * reporting an error can itself never fail.
 */
#include <stdarg.h>
#include <stdio.h>

#include "export.h"
#include "radix_mlp/status.h"
#include "status.h"

static _Thread_local char last_error[RMLP_ERROR_CAPACITY];

void rmlp_clear_error(void) { last_error[0] = '\0'; }

rmlp_status rmlp_fail(rmlp_status status, const char *function, const char *fmt, ...) {
    int used = snprintf(last_error, sizeof last_error, "%s: ", function);
    if (used < 0 || (size_t)used >= sizeof last_error) return status;
    va_list args;
    va_start(args, fmt);
    vsnprintf(last_error + used, sizeof last_error - (size_t)used, fmt, args);
    va_end(args);
    return status;
}

rmlp_status rmlp_call_attention(const char *function, rmlp_attention_fn attention, void *user_data,
                                const rmlp_attention_args *args) {
    rmlp_status status = attention(user_data, args);
    if (status > 0)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, function,
                         "the host attention returned %d at layer %u, which is not a status (errors are negative)",
                         status, args->layer);
    if (status != RMLP_OK)
        return rmlp_fail(status, function, "the host attention failed at layer %u with status %d (%s)", args->layer,
                         status, rmlp_status_string(status));
    return RMLP_OK;
}

RMLP_EXPORT const char *rmlp_last_error(void) { return last_error; }

RMLP_EXPORT const char *rmlp_status_string(rmlp_status status) {
    switch (status) {
    case RMLP_OK: return "ok";
    case RMLP_ERR_INVALID_ARGUMENT: return "invalid argument";
    case RMLP_ERR_INVALID_SEQLENS: return "invalid cu_seqlens";
    case RMLP_ERR_TOO_LARGE: return "size does not fit 32-bit indices";
    case RMLP_ERR_OUT_OF_MEMORY: return "out of memory";
    case RMLP_ERR_UNSUPPORTED: return "not supported by this build";
    case RMLP_ERR_CUDA: return "CUDA error";
    case RMLP_ERR_NO_DEVICE: return "no CUDA device";
    case RMLP_ERR_INTERNAL: return "internal error";
    case RMLP_ERR_IO: return "file could not be read";
    case RMLP_ERR_FORMAT: return "malformed file";
    case RMLP_ERR_MODEL: return "checkpoint not supported or inconsistent";
    case RMLP_ERR_BUSY: return "handle in use by another call";
    case RMLP_ERR_FULL: return "queue full";
    default: return "unknown status";
    }
}
