/*
 * options.h: the run-time choices of a CUDA context, fixed at its creation: which attention
 * kernel runs (a context parameter, else RADIX_MLP_GPU_ATTENTION), and the switches that pick a
 * newer path or the one it replaced, so that one benchmark run on a device can time both (each
 * read from the environment at context creation; unset or empty means the default):
 *   RADIX_MLP_GPU_ATTENTION=auto|flashinfer|reference   (default auto: FlashInfer where it runs)
 *   RADIX_MLP_GPU_FULL_KV=paged|scatter     full-space attention reads K/V through the plan's
 *                                           scatter (paged, page size 1) or from scattered copies
 *   RADIX_MLP_GPU_FLASHINFER_SM90=on|off    FlashInfer's Hopper prefill kernels on sm_90
 *   RADIX_MLP_GPU_ROPE=table|sincos         RoPE from a cos/sin table or sincosf per element
 *   RADIX_MLP_GPU_DECODE=flashinfer|own     generation steps' attention kernels
 * A value outside its list is refused by name (RMLP_ERR_INVALID_ARGUMENT). Plain C, no CUDA:
 * compiled in every build, so a CPU-only build refuses the same values. CPU contexts read none of
 * these (cpu/backend.c). The table of variables and values is header-only, so that tools
 * (radixmlp bench --gpu-variant) check a setting the way the library will.
 * Internal to the library.
 */
#ifndef RMLP_GPU_OPTIONS_H
#define RMLP_GPU_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "radix_mlp/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Which attention kernel a context's built-in attention runs. */
typedef enum gpu_attention_kernel {
    GPU_ATTENTION_AUTO = 0,       /* FlashInfer where built and supported, else the reference */
    GPU_ATTENTION_FLASHINFER = 1, /* FlashInfer required at creation (per-batch fallbacks counted) */
    GPU_ATTENTION_REFERENCE = 2,  /* gpu/attention.cu's kernels only */
} gpu_attention_kernel;

typedef struct gpu_options {
    gpu_attention_kernel attention;
    bool attention_from_env; /* RADIX_MLP_GPU_ATTENTION decided it (the parameter was auto) */
    bool full_kv_paged;   /* RADIX_MLP_GPU_FULL_KV: paged (true, default) or scatter */
    bool flashinfer_sm90; /* RADIX_MLP_GPU_FLASHINFER_SM90: on (true, default) or off */
    bool rope_table;      /* RADIX_MLP_GPU_ROPE: table (true, default) or sincos */
    bool decode_flashinfer; /* RADIX_MLP_GPU_DECODE: flashinfer (true, default) or own */
} gpu_options;

/* The variables, each with its values: the first is the default (a switch's true), the second a
 * switch's false; RADIX_MLP_GPU_ATTENTION's are gpu_attention_kernel's, in its order. */
typedef struct gpu_option_var {
    const char *name;
    const char *values[3]; /* NULL past the last */
} gpu_option_var;

enum { GPU_OPT_ATTENTION, GPU_OPT_FULL_KV, GPU_OPT_FLASHINFER_SM90, GPU_OPT_ROPE, GPU_OPT_DECODE, GPU_OPT_COUNT };

static const gpu_option_var GPU_OPTION_VARS[GPU_OPT_COUNT] = {
    {"RADIX_MLP_GPU_ATTENTION", {"auto", "flashinfer", "reference"}},
    {"RADIX_MLP_GPU_FULL_KV", {"paged", "scatter", NULL}},
    {"RADIX_MLP_GPU_FLASHINFER_SM90", {"on", "off", NULL}},
    {"RADIX_MLP_GPU_ROPE", {"table", "sincos", NULL}},
    {"RADIX_MLP_GPU_DECODE", {"flashinfer", "own", NULL}},
};

/* The index of `value` among var's values, or -1. */
static inline int gpu_option_value(const gpu_option_var *var, const char *value) {
    for (int i = 0; i < 3 && var->values[i] != NULL; i++)
        if (strcmp(value, var->values[i]) == 0) return i;
    return -1;
}

/* The variable named `name`, or NULL. */
static inline const gpu_option_var *gpu_option_find(const char *name) {
    for (int i = 0; i < GPU_OPT_COUNT; i++)
        if (strcmp(name, GPU_OPTION_VARS[i].name) == 0) return &GPU_OPTION_VARS[i];
    return NULL;
}

/* The options of a new context: `attention` is the context parameter (GPU_ATTENTION_AUTO lets
 * RADIX_MLP_GPU_ATTENTION decide; another value wins over it), the switches from the
 * environment. Errors name the variable and the values it takes. */
rmlp_status gpu_options_read(const char *fn, gpu_attention_kernel attention, gpu_options *out);

/* "auto", "flashinfer", "reference" (for messages, stats and benchmark output). */
const char *gpu_attention_kernel_name(gpu_attention_kernel kernel);

#ifdef __cplusplus
}
#endif

#endif
