/*
 * bench_cuda.h: the device side of `radixmlp bench --device cuda`: one case, radix off vs on vs on
 * with attention in compact space, on a model loaded with RMLP_DEVICE_CUDA, timed on the device
 * with CUDA events around the forward (a warm-up round first, then R rounds of the three sides in
 * turn: median and min), plan build and rmlp_context_set_plan timed on the host, attention's share
 * measured through the attention callback with events around the built-in attention, and the on
 * and compact outputs (device memory in the model's dtype) copied back and compared in fp32 with
 * the off one. The CUDA code sits behind
 * RMLP_WITH_CUDA in bench_cuda.c; in a build without CUDA these functions say so and fail.
 */
#ifndef RMLP_TOOLS_BENCH_CUDA_H
#define RMLP_TOOLS_BENCH_CUDA_H

#include <stdbool.h>
#include <stddef.h>

#include "radix_mlp.h"
#include "workload.h"

/* The sides of a case, the index of the per-side figures: radix off; on, attention in full space;
 * on, attention in compact space (rmlp_forward_compact). */
enum { BENCH_OFF, BENCH_ON, BENCH_COMPACT, BENCH_SIDES };

typedef struct bench_cuda_result {
    uint32_t n_compact; /* N' of the on plan */
    bool use_radix;     /* the on plan's gate decision */
    unsigned long repeat;
    /* per side (BENCH_OFF, BENCH_ON, BENCH_COMPACT): */
    double ms[BENCH_SIDES], ms_min[BENCH_SIDES]; /* median and fastest forward over the repeats (events) */
    double plan_us[BENCH_SIDES];                 /* median rmlp_plan_build time (the plan's build_us) */
    double set_plan_us[BENCH_SIDES];             /* median host time of rmlp_context_set_plan */
    double attn_ms[BENCH_SIDES], fwd_ms[BENCH_SIDES]; /* instrumented runs: attention and whole forward (events) */
    /* the last hidden states of every batch row (fp32) against the off run's; [BENCH_OFF] is 0: */
    double max_abs_diff[BENCH_SIDES];  /* max |off - x| */
    double rel_norm_diff[BENCH_SIDES]; /* ||off - x|| / ||off|| */
} bench_cuda_result;

/* Whether this build and machine can run the bench on CUDA device 0. On success writes the
 * device's name to name (cap bytes) and returns 0; otherwise prints why to stderr ("built
 * without CUDA", "no CUDA device: ...") and returns -1. */
int bench_cuda_available(char *name, size_t cap);

/* One case on `model` (loaded with RMLP_DEVICE_CUDA in `dtype`): off (threshold 0) vs on and
 * compact (`threshold`), `repeat` rounds of the three in turn after one warm-up round.
 * pooled_last and pooled_mean (n_seqs, hidden_size) host f32, either may be NULL: the on run's
 * last hidden states pooled per sequence (last token, mean), for comparison with a peer. Returns
 * 0, or -1 after printing why. */
int bench_cuda_case(const rmlp_model *model, rmlp_dtype dtype, const workload *w, double threshold,
                    unsigned long repeat, float *pooled_last, float *pooled_mean, bench_cuda_result *r);

#endif
