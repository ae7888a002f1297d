/*
 * bench_cuda.h: the device side of `radixmlp bench --device cuda`: one case, radix off vs on vs on
 * with attention in compact space vs "last" (on, attention in compact space, each sequence's last
 * row only: rmlp_forward_last), on a model loaded with RMLP_DEVICE_CUDA, timed on the device
 * with CUDA events around the forward (a warm-up round first, then R rounds of the four sides in
 * turn: median and min), plan build and rmlp_context_set_plan timed on the host, attention's share
 * measured through the attention callback with events around the built-in attention, and the on
 * compact and last outputs (device memory in the model's dtype) copied back and compared in fp32
 * with the off one (last: its rows against off's last rows). The CUDA code sits behind
 * RMLP_WITH_CUDA in bench_cuda.c; in a build without CUDA these functions say so and fail.
 *
 * Variants (--gpu-variant NAME=VALUE[,NAME=VALUE...], NAME one of the RADIX_MLP_GPU_* variables of
 * gpu/options.h): each adds contexts of its own, made with those variables set (and the
 * environment restored right after), whose four sides take their turns in the same rounds as the
 * default context's, so old and new paths are timed side by side under the same conditions. Which
 * attention kernel ran in each side's timed forwards comes from rmlp_context_gpu_stats.
 */
#ifndef RMLP_TOOLS_BENCH_CUDA_H
#define RMLP_TOOLS_BENCH_CUDA_H

#include <stdbool.h>
#include <stddef.h>

#include "radix_mlp.h"
#include "workload.h"

/* The sides of a case, the index of the per-side figures: radix off; on, attention in full space;
 * on, attention in compact space (rmlp_forward_compact); on, each sequence's last row only
 * (rmlp_forward_last on a context with attention in compact space). */
enum { BENCH_OFF, BENCH_ON, BENCH_COMPACT, BENCH_LAST, BENCH_SIDES };

typedef struct bench_cuda_result {
    const char *variant; /* "default", or the --gpu-variant setting */
    uint32_t n_compact; /* N' of the on plan */
    bool use_radix;     /* the on plan's gate decision */
    unsigned long repeat;
    /* per side (BENCH_OFF, BENCH_ON, BENCH_COMPACT, BENCH_LAST): */
    double ms[BENCH_SIDES], ms_min[BENCH_SIDES]; /* median and fastest forward over the repeats (events) */
    double plan_us[BENCH_SIDES];                 /* median rmlp_plan_build time (the plan's build_us) */
    double set_plan_us[BENCH_SIDES];             /* median host time of rmlp_context_set_plan */
    double attn_ms[BENCH_SIDES], fwd_ms[BENCH_SIDES]; /* instrumented runs: attention and whole forward (events) */
    /* the last hidden states of every batch row (BENCH_LAST: of each sequence's last row; fp32)
     * against the off run's; [BENCH_OFF] is 0: */
    double max_abs_diff[BENCH_SIDES];  /* max |off - x| */
    double rel_norm_diff[BENCH_SIDES]; /* ||off - x|| / ||off|| */
    /* a variant's outputs against the default context's, side by side: ||default - x|| / ||default||
     * (0 for the default itself) */
    double rel_norm_vs_default[BENCH_SIDES];
    /* what the context's built-in attention was and did in the timed forwards (rmlp_gpu_stats):
     * the kernel setting, whether FlashInfer serves it, per side the kernel ("flashinfer",
     * "reference", "mixed"; "flashinfer_sm90" when every FlashInfer launch ran its Hopper kernels,
     * "flashinfer_part_sm90" when some did) and layout ("full", "full_paged", "compact", joined by
     * '+' when several) its launches took, and its fallbacks to the reference kernel (and of the
     * Hopper kernels to FA2) and failed plans */
    char attention[16];
    bool flashinfer, sm90;
    char kernel[BENCH_SIDES][24], layout[BENCH_SIDES][32];
    unsigned long long fallbacks, sm90_fallbacks, plan_errors;
} bench_cuda_result;

/* Whether this build and machine can run the bench on CUDA device 0. On success writes the
 * device's name to name (cap bytes) and returns 0; otherwise prints why to stderr ("built
 * without CUDA", "no CUDA device: ...") and returns -1. */
int bench_cuda_available(char *name, size_t cap);

/* One case on `model` (loaded with RMLP_DEVICE_CUDA in `dtype`): off (threshold 0) vs on, compact
 * and last (`threshold`), `repeat` rounds of the four in turn after one warm-up round, on the
 * default context and on one context per variant (variants[0 .. n_variants), checked), in turn.
 * r: 1 + n_variants results, the default's first. pooled_last and pooled_mean (n_seqs,
 * hidden_size) host f32, either may be NULL: the default context's on run's last hidden states
 * pooled per sequence (last token, mean), for comparison with a peer. Returns 0, or -1 after
 * printing why. */
int bench_cuda_case(const rmlp_model *model, rmlp_dtype dtype, const workload *w, double threshold,
                    unsigned long repeat, const char *const *variants, size_t n_variants, float *pooled_last,
                    float *pooled_mean, bench_cuda_result *r);

/* Whether `spec` is a valid --gpu-variant: NAME=VALUE pairs separated by commas, each NAME one of
 * gpu/options.h's RADIX_MLP_GPU_* variables (at most once) and VALUE one of its values. Returns 0,
 * or -1 after printing why (naming the variables and their values). Needs no CUDA. */
int bench_cuda_variant_check(const char *spec);

/* The variables of a checked spec set in the environment (what they held kept in `saved`, `n`
 * of them set), and put back as they were. */
typedef struct bench_env_saved {
    char name[48];
    char *old; /* strdup of the old value, NULL when unset */
} bench_env_saved;
enum { BENCH_VARIANT_MAX_VARS = 8 };
size_t bench_cuda_variant_apply(const char *spec, bench_env_saved saved[BENCH_VARIANT_MAX_VARS]);
void bench_cuda_variant_restore(bench_env_saved *saved, size_t n);

/* The variant and attention keys of a --json row (", \"variant\": ..., \"kernel_on\": ..."), or of
 * a text line; into buf (cap bytes), which is returned. */
const char *bench_cuda_json_keys(const bench_cuda_result *r, char *buf, size_t cap);
const char *bench_cuda_text_keys(const bench_cuda_result *r, char *buf, size_t cap);

#endif
