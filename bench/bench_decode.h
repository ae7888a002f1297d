/*
 * bench_decode.h: `radixmlp bench --decode`: decode throughput of a generation session
 * (rmlp_generate_*) on the CPU or a CUDA device, in one run: M sequences sharing a prefix of P
 * tokens, each with a distinct 16-token suffix, then --decode-steps steps (default 16) with fixed
 * pseudo-random tokens, three ways on the same tokens: batched with shared-prefix attention (one
 * M-row step), batched with per-sequence attention, and the M sequences one at a time (a session of
 * one each). Cases: P = 1,024 with M = 1, 8, 32, 64, and P = 2,048 with M = 32. Per case: ms per
 * step and tokens/s of each way, and batched over one-at-a-time; on the CPU also attention ms per
 * step with and without shared-prefix attention, their ratio, attention's share of a batched step,
 * and a ceiling: the batched/one ratio the case would reach if its step's position-wise part cost
 * per row what it costs in a step of 128 rows (the reference: a batched session of 128 prompts of
 * a 16-token prefix and one distinct token each, run in turn with the three ways; the case's own
 * cost when that is lower), with the case's own attention time, which shows how far the machine's
 * GEMM throughput lets batching go. Only the
 * steps are timed (the prefill is not); the cache is cleared between the ways, so no way finds
 * another's rows. With --repeat R the ways (and the reference) alternate R times and the fastest
 * run of each is kept (a shared machine's slow spells hit all alike). On CUDA the times are host wall times of rmlp_generate_step, which returns the
 * logits to the host. On CUDA each --gpu-variant (bench_cuda_variant_check's specs) runs the case
 * again in a context of its own, made with its variables set (RADIX_MLP_GPU_DECODE=own: the chain
 * kernels beside FlashInfer's batch decode), its ways alternating with the default's; each gets
 * its line ("variant": the spec, or "default"), with the steps its context ran on each decode
 * attention (rmlp_context_gpu_stats).
 */
#ifndef RMLP_TOOLS_BENCH_DECODE_H
#define RMLP_TOOLS_BENCH_DECODE_H

#include <stddef.h>

#include "radix_mlp.h"

typedef struct decode_options {
    unsigned long steps, repeat;
    const char *device;         /* the CUDA device's name for a model on CUDA, NULL on the CPU */
    size_t elem_bytes;          /* bytes per element of the model's dtype (sizes the prefix cache) */
    const char *const *only;    /* [n_only] case-name fragments ("p1024_m32"); none: every case */
    size_t n_only;
    int json;                   /* a JSON line per case, else a table row */
    const char *const *variants; /* [n_variants] --gpu-variant specs (checked), run after the default */
    size_t n_variants;
} decode_options;

/* Runs the cases named by o->only. Returns 0, or 1 after printing why. */
int bench_decode(rmlp_model *model, const rmlp_model_config *cfg, const decode_options *o);

#endif
