/*
 * status.h: the error helpers every entry point and every layer below it uses (status.c): the
 * calling thread's last error, set with the status it goes with, and a host attention callback's
 * return turned into a status. The status codes themselves are rmlp_status of radix_mlp.h (from
 * the -sys crate's status module); their strings are rmlp_status_string, in status.c.
 */
#ifndef RMLP_COMMON_STATUS_H
#define RMLP_COMMON_STATUS_H

#include "export.h"
#include "radix_mlp/types.h"

/* The longest last error kept, its NUL included (longer ones are cut). */
#define RMLP_ERROR_CAPACITY 512

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
