/*
 * nonfinite.h: the check of a CUDA forward's output for infinities and NaN (nonfinite.cu). A CPU
 * forward returns RMLP_ERR_MODEL when its output is not finite (cpu/forward.c); a CUDA forward
 * cannot: it only enqueues its work, and its output stays on the device. So after each whole
 * forward one kernel scans the output and, where it finds a non-finite element, counts the forward
 * in a counter on the device and keeps where the first such element was; rmlp_context_gpu_stats
 * reads the counter (synchronising the context's stream). The kernel never allocates or
 * synchronises, and may be captured in a CUDA graph (each replay checks its own output).
 * Internal to the library; plain C, so ffi/ can call it without the CUDA headers.
 */
#ifndef RMLP_GPU_NONFINITE_H
#define RMLP_GPU_NONFINITE_H

#include <stddef.h>
#include <stdint.h>

#include "radix_mlp/types.h"

#ifdef __cplusplus
extern "C" {
#endif

struct gpu_context;

/* The counter on the device (zeroed once, with the context's workspace). `pending` and
 * `blocks_done` belong to the scan in flight and are 0 between scans. */
typedef struct gpu_nonfinite {
    unsigned long long outputs;  /* scans (forwards) that found a non-finite element */
    unsigned long long pending;  /* ~(smallest index found) by the scan in flight; 0: none yet */
    uint32_t row, col;           /* the latest such scan's first non-finite element: index / width, % width */
    unsigned int blocks_done;    /* blocks of the scan in flight that finished */
    uint32_t unused;
} gpu_nonfinite;

/* The scan itself is a launcher of gpu/kernels.h: gpu_nonfinite_scan. */

/* The scan of a whole forward's output: `rows` rows of the model's hidden size in its dtype
 * (batch rows, or compact rows), on the context's stream, into the context's counter. */
rmlp_status gpu_check_output(const char *fn, struct gpu_context *ctx, const void *out, size_t rows);

/* out->nonfinite_outputs, nonfinite_row, nonfinite_col from the context's counter: synchronises the
 * context's stream (after every forward enqueued before), so it is refused while that stream captures
 * a graph (RMLP_ERR_INVALID_ARGUMENT); RMLP_ERR_CUDA when an earlier kernel failed. */
rmlp_status gpu_nonfinite_stats(const char *fn, struct gpu_context *ctx, rmlp_gpu_stats *out);

#ifdef __cplusplus
}
#endif

#endif
