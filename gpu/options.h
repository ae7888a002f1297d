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
 * compiled in every build, so a CPU-only build refuses the same values.
 * Internal to the library.
 */
#ifndef RMLP_GPU_OPTIONS_H
#define RMLP_GPU_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "radix_mlp.h"

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
    bool full_kv_paged;   /* RADIX_MLP_GPU_FULL_KV: paged (true, default) or scatter */
    bool flashinfer_sm90; /* RADIX_MLP_GPU_FLASHINFER_SM90: on (true, default) or off */
    bool rope_table;      /* RADIX_MLP_GPU_ROPE: table (true, default) or sincos */
    bool decode_flashinfer; /* RADIX_MLP_GPU_DECODE: flashinfer (true, default) or own */
} gpu_options;

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
