/*
 * options.c: reads a CUDA context's run-time choices (gpu/options.h) from its parameter and the
 * environment, refusing any value outside a variable's list by name.
 */
#include "options.h"

#include <stdlib.h>
#include <string.h>

#include "../ffi/src/export.h"

/* Sets *out from the variable `name`: `yes` -> true, `no` -> false, unset or empty -> `fallback`. */
static rmlp_status read_switch(const char *fn, const char *name, const char *yes, const char *no, bool fallback,
                               bool *out) {
    const char *value = getenv(name);
    *out = fallback;
    if (value == NULL || *value == '\0') return RMLP_OK;
    if (strcmp(value, yes) == 0)
        *out = true;
    else if (strcmp(value, no) == 0)
        *out = false;
    else
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "%s='%s' is neither '%s' nor '%s'", name, value, yes, no);
    return RMLP_OK;
}

const char *gpu_attention_kernel_name(gpu_attention_kernel kernel) {
    switch (kernel) {
    case GPU_ATTENTION_AUTO: return "auto";
    case GPU_ATTENTION_FLASHINFER: return "flashinfer";
    case GPU_ATTENTION_REFERENCE: return "reference";
    }
    return "unknown";
}

rmlp_status gpu_options_read(const char *fn, gpu_attention_kernel attention, gpu_options *out) {
    memset(out, 0, sizeof *out);
    if (attention != GPU_ATTENTION_AUTO && attention != GPU_ATTENTION_FLASHINFER &&
        attention != GPU_ATTENTION_REFERENCE)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                         "gpu_attention = %d is none of 0 (auto), 1 (flashinfer), 2 (reference)", (int)attention);
    out->attention = attention;
    const char *env = getenv("RADIX_MLP_GPU_ATTENTION");
    if (attention == GPU_ATTENTION_AUTO && env != NULL && *env != '\0') {
        if (strcmp(env, "auto") == 0)
            out->attention = GPU_ATTENTION_AUTO;
        else if (strcmp(env, "flashinfer") == 0)
            out->attention = GPU_ATTENTION_FLASHINFER;
        else if (strcmp(env, "reference") == 0)
            out->attention = GPU_ATTENTION_REFERENCE;
        else
            return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                             "RADIX_MLP_GPU_ATTENTION='%s' is none of 'auto', 'flashinfer', 'reference'", env);
    }
    rmlp_status status = read_switch(fn, "RADIX_MLP_GPU_FULL_KV", "paged", "scatter", true, &out->full_kv_paged);
    if (status == RMLP_OK)
        status = read_switch(fn, "RADIX_MLP_GPU_FLASHINFER_SM90", "on", "off", true, &out->flashinfer_sm90);
    if (status == RMLP_OK) status = read_switch(fn, "RADIX_MLP_GPU_ROPE", "table", "sincos", true, &out->rope_table);
    if (status == RMLP_OK)
        status = read_switch(fn, "RADIX_MLP_GPU_DECODE", "flashinfer", "own", true, &out->decode_flashinfer);
    return status;
}
