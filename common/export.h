/*
 * export.h: the export macro for the public entry points and the error helpers every
 * entry point uses. The library is built with -fvisibility=hidden; only definitions marked
 * RMLP_EXPORT are visible in libradix_mlp.so.
 */
#ifndef RMLP_FFI_EXPORT_H
#define RMLP_FFI_EXPORT_H

#include "radix_mlp.h"

#if defined(__GNUC__) || defined(__clang__)
#define RMLP_EXPORT __attribute__((visibility("default")))
#define RMLP_PRINTF(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#else
#define RMLP_EXPORT
#define RMLP_PRINTF(fmt_index, first_arg)
#endif

/* Records "<function>: <detail>" as the calling thread's last error and returns status. */
rmlp_status rmlp_fail(rmlp_status status, const char *function, const char *fmt, ...) RMLP_PRINTF(3, 4);

/* Clears the calling thread's last error; every entry point that returns a status calls it first. */
void rmlp_clear_error(void);

/* Runs the host's attention callback of a forward (CPU and CUDA alike) at args->layer and makes
 * what it returns a status: RMLP_OK, its own error with a message naming the layer, or
 * RMLP_ERR_INVALID_ARGUMENT for a positive value (not a status). */
rmlp_status rmlp_call_attention(const char *function, rmlp_attention_fn attention, void *user_data,
                                const rmlp_attention_args *args);

#endif
