/*
 * options.c: reads a CUDA context's run-time choices (gpu/options.h) from its parameter and the
 * environment, refusing any value outside a variable's list by name.
 */
#include "options.h"

#include <stdlib.h>
#include <string.h>

#include "common/status.h"

_Static_assert(GPU_ATTENTION_AUTO == RMLP_GPU_ATTENTION_AUTO && GPU_ATTENTION_FLASHINFER == RMLP_GPU_ATTENTION_FLASHINFER &&
                   GPU_ATTENTION_REFERENCE == RMLP_GPU_ATTENTION_REFERENCE,
               "gpu_attention_kernel is rmlp_gpu_attention");

/* *index = the index of the variable's value among its values, `fallback` when unset or empty; a
 * value outside the list is refused by name. */
static rmlp_status read_var(const char *fn, int which, int fallback, int *index) {
    const gpu_option_var *var = &GPU_OPTION_VARS[which];
    const char *value = getenv(var->name);
    *index = fallback;
    if (value == NULL || *value == '\0') return RMLP_OK;
    *index = gpu_option_value(var, value);
    if (*index >= 0) return RMLP_OK;
    const char *const *v = var->values;
    if (v[2] == NULL)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "%s='%s' is neither '%s' nor '%s'", var->name, value, v[0],
                         v[1]);
    return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "%s='%s' is none of '%s', '%s', '%s'", var->name, value, v[0],
                     v[1], v[2]);
}

const char *gpu_attention_kernel_name(gpu_attention_kernel kernel) {
    return kernel >= GPU_ATTENTION_AUTO && kernel <= GPU_ATTENTION_REFERENCE
               ? GPU_OPTION_VARS[GPU_OPT_ATTENTION].values[kernel]
               : "unknown";
}

rmlp_status gpu_options_read(const char *fn, gpu_attention_kernel attention, gpu_options *out) {
    memset(out, 0, sizeof *out);
    if (attention != GPU_ATTENTION_AUTO && attention != GPU_ATTENTION_FLASHINFER &&
        attention != GPU_ATTENTION_REFERENCE)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                         "params->gpu_attention=%d is not RMLP_GPU_ATTENTION_AUTO (0), FLASHINFER (1) or "
                         "REFERENCE (2)", (int)attention);
    out->attention = attention;
    int index[GPU_OPT_COUNT] = {0};
    rmlp_status status = RMLP_OK;
    /* the parameter wins over the variable unless it is auto */
    if (attention == GPU_ATTENTION_AUTO) status = read_var(fn, GPU_OPT_ATTENTION, GPU_ATTENTION_AUTO, &index[0]);
    for (int which = GPU_OPT_FULL_KV; status == RMLP_OK && which < GPU_OPT_COUNT; which++)
        status = read_var(fn, which, 0, &index[which]);
    if (status != RMLP_OK) return status;
    if (attention == GPU_ATTENTION_AUTO && index[GPU_OPT_ATTENTION] != GPU_ATTENTION_AUTO)
        out->attention = (gpu_attention_kernel)index[GPU_OPT_ATTENTION], out->attention_from_env = true;
    out->full_kv_paged = index[GPU_OPT_FULL_KV] == 0;
    out->flashinfer_sm90 = index[GPU_OPT_FLASHINFER_SM90] == 0;
    out->rope_table = index[GPU_OPT_ROPE] == 0;
    out->decode_flashinfer = index[GPU_OPT_DECODE] == 0;
    return RMLP_OK;
}
