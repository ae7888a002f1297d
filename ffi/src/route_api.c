/*
 * route_api.c: the exported routing-key entry points (batch/route_key.h), their arguments
 * checked here.
 */
#include <string.h>

#include "batch/route_key.h"
#include "common/export.h"
#include "common/status.h"
#include "radix_mlp.h"
#include "validate.h"

RMLP_EXPORT rmlp_route_params rmlp_route_default_params(void) {
    rmlp_route_params params;
    memset(&params, 0, sizeof params); /* padding bytes too, so params compare with memcmp */
    params.struct_size = (uint32_t)sizeof(rmlp_route_params);
    params.prefix_tokens = RMLP_ROUTE_DEFAULT_PREFIX_TOKENS;
    params.use_separator = false;
    params.separator = 0;
    return params;
}

RMLP_EXPORT rmlp_status rmlp_route_key(const uint32_t *token_ids, size_t n_tokens, const rmlp_route_params *caller,
                                       uint64_t *key, size_t *n_covered) {
    static const char fn[] = "rmlp_route_key";
    rmlp_clear_error();
    if (key == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "key is NULL");
    if (n_tokens > 0 && token_ids == NULL)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "token_ids is NULL but n_tokens=%zu", n_tokens);
    rmlp_route_params params = rmlp_route_default_params();
    if (caller != NULL) {
        rmlp_status status = rmlp_read_params(fn, "rmlp_route_params", caller, &params, sizeof params, NULL, 0);
        if (status != RMLP_OK) return status;
    }
    if (params.prefix_tokens == 0)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "params->prefix_tokens is 0 (a key covers at least a token)");
    size_t span = route_key_span(token_ids, n_tokens, params.prefix_tokens, params.use_separator, params.separator);
    *key = route_key_hash(token_ids, span);
    if (n_covered != NULL) *n_covered = span;
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_route_key_format(uint64_t key, char *out, size_t capacity) {
    static const char fn[] = "rmlp_route_key_format";
    rmlp_clear_error();
    if (out == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "out is NULL");
    if (capacity < RMLP_ROUTE_KEY_CHARS)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                         "capacity=%zu is too small: the key takes %d bytes (16 hex digits and a NUL)", capacity,
                         RMLP_ROUTE_KEY_CHARS);
    route_key_hex(key, out);
    return RMLP_OK;
}
