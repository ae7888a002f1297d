/*
 * bench_cuda.h: the device side of `radixmlp bench --device cuda`: one case, radix off vs on, on
 * a model loaded with RMLP_DEVICE_CUDA, timed on the device with CUDA events around rmlp_forward
 * (a warm-up pair first, then R alternating off/on runs: median and min), plan build and
 * rmlp_context_set_plan timed on the host, attention's share measured through the attention
 * callback with events around the built-in attention, and the off and on outputs (device memory
 * in the model's dtype) copied back and compared in fp32. The CUDA code sits behind
 * RMLP_WITH_CUDA in bench_cuda.c; in a build without CUDA these functions say so and fail.
 */
#ifndef RMLP_TOOLS_BENCH_CUDA_H
#define RMLP_TOOLS_BENCH_CUDA_H

#include <stdbool.h>
#include <stddef.h>

#include "radix_mlp.h"
#include "workload.h"

typedef struct bench_cuda_result {
    uint32_t n_compact; /* N' of the on plan */
    bool use_radix;     /* the on plan's gate decision */
    unsigned long repeat;
    double ms_off, ms_on;         /* median forward time over the repeats (events) */
    double ms_off_min, ms_on_min; /* fastest forward */
    double plan_us_off, plan_us_on;         /* median rmlp_plan_build time (the plan's build_us) */
    double set_plan_us_off, set_plan_us_on; /* median host time of rmlp_context_set_plan */
    double attn_ms_off, fwd_ms_off;         /* instrumented off run: attention and whole forward (events) */
    double attn_ms_on, fwd_ms_on;           /* the same for the on run */
    double max_abs_diff;  /* max |off - on| over every batch row of the last hidden states (fp32) */
    double rel_norm_diff; /* ||off - on|| / ||off|| */
} bench_cuda_result;

/* Whether this build and machine can run the bench on CUDA device 0. On success writes the
 * device's name to name (cap bytes) and returns 0; otherwise prints why to stderr ("built
 * without CUDA", "no CUDA device: ...") and returns -1. */
int bench_cuda_available(char *name, size_t cap);

/* One case on `model` (loaded with RMLP_DEVICE_CUDA in `dtype`): off (threshold 0) vs on
 * (`threshold`), `repeat` alternating pairs after one warm-up pair. pooled_last and pooled_mean
 * (n_seqs, hidden_size) host f32, either may be NULL: the on run's last hidden states pooled per
 * sequence (last token, mean), for comparison with a peer. Returns 0, or -1 after printing why. */
int bench_cuda_case(const rmlp_model *model, rmlp_dtype dtype, const workload *w, double threshold,
                    unsigned long repeat, float *pooled_last, float *pooled_mean, bench_cuda_result *r);

#endif
