/*
 * validate.c: the shared argument checks of validate.h.
 */
#include "validate.h"

#include <stdio.h>
#include <string.h>

rmlp_status rmlp_read_params(const char *fn, const char *type, const void *params, void *out, size_t current_size,
                             const size_t *older_sizes, size_t n_older) {
    uint32_t size;
    memcpy(&size, params, sizeof size);
    if (size > RMLP_MAX_STRUCT_SIZE)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                         "params->struct_size=%u is not the size of any %s (at most %u; use the defaults function)",
                         size, type, RMLP_MAX_STRUCT_SIZE);
    if (size > current_size) { /* a newer header: its extra fields must be unset */
        const unsigned char *bytes = params;
        for (size_t i = current_size; i < size; i++)
            if (bytes[i] != 0)
                return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                                 "params->struct_size=%u: byte %zu, past the %zu bytes of this library's %s, is %u, "
                                 "not 0 (a field this older library does not know is set)",
                                 size, i, current_size, type, bytes[i]);
        size = (uint32_t)current_size;
    }
    int known = size == current_size;
    for (size_t k = 0; k < n_older; k++) known |= size == older_sizes[k];
    if (!known) {
        char sizes[64] = ""; /* ", 24 in earlier ones", or nothing for a struct no earlier release had */
        for (size_t k = 0, used = 0; k < n_older && used < sizeof sizes; k++)
            used += (size_t)snprintf(sizes + used, sizeof sizes - used, ", %zu%s", older_sizes[k],
                                     k + 1 == n_older ? " in earlier ones" : "");
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                         "params->struct_size=%u is not the size of a %s: %zu in this release%s "
                         "(use the defaults function)",
                         size, type, current_size, sizes);
    }
    memcpy(out, params, size); /* fields past an older struct keep their defaults */
    memcpy(out, &(uint32_t){(uint32_t)current_size}, sizeof(uint32_t));
    return RMLP_OK;
}

rmlp_status rmlp_check_cu_seqlens(const char *fn, const uint32_t *cu_seqlens, size_t n_seqs, size_t n_tokens) {
    if (n_seqs == 0)
        return rmlp_fail(RMLP_ERR_INVALID_SEQLENS, fn,
                         "n_seqs is 0: a batch has at least one sequence (an empty batch is cu_seqlens=[0, 0])");
    if (cu_seqlens == NULL)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "cu_seqlens is NULL but n_seqs=%zu", n_seqs);
    if (cu_seqlens[0] != 0)
        return rmlp_fail(RMLP_ERR_INVALID_SEQLENS, fn, "cu_seqlens[0]=%u, must be 0", cu_seqlens[0]);
    for (size_t s = 1; s <= n_seqs; s++)
        if (cu_seqlens[s] < cu_seqlens[s - 1])
            return rmlp_fail(RMLP_ERR_INVALID_SEQLENS, fn, "cu_seqlens[%zu]=%u < cu_seqlens[%zu]=%u", s,
                             cu_seqlens[s], s - 1, cu_seqlens[s - 1]);
    if (cu_seqlens[n_seqs] != n_tokens)
        return rmlp_fail(RMLP_ERR_INVALID_SEQLENS, fn, "cu_seqlens[%zu]=%u, must equal n_tokens=%zu", n_seqs,
                         cu_seqlens[n_seqs], n_tokens);
    return RMLP_OK;
}

rmlp_status rmlp_check_nonempty_seqs(const char *fn, const uint32_t *cu_seqlens, size_t n_seqs) {
    for (size_t s = 0; s < n_seqs; s++)
        if (cu_seqlens[s] == cu_seqlens[s + 1])
            return rmlp_fail(RMLP_ERR_INVALID_SEQLENS, fn, "sequence %zu is empty (cu_seqlens[%zu]=cu_seqlens[%zu]=%u)",
                             s, s, s + 1, cu_seqlens[s]);
    return RMLP_OK;
}
