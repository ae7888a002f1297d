/*
 * bench_args.h: the options of `radixmlp bench` (cmd_bench.c) as bench_args_parse reads them
 * (bench_args.c): the device and dtype, the built-in model's shape and layers or --model, the
 * cases, and the modes (--trace, --decode, --gpu-variant) with their checks against each other.
 */
#ifndef RMLP_BENCH_ARGS_H
#define RMLP_BENCH_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "radix_mlp.h"

/* The built-in model's shapes: Qwen3's and Gemma-2B's (bge-reranker-v2-gemma's), as their
 * config.json gives them. */
typedef struct model_shape {
    const char *name, *alias; /* --shape takes either */
    rmlp_arch arch;
    uint32_t hidden, intermediate, heads, kv_heads, head_dim, layers;
    bool tie_word_embeddings;
    double rope_theta;
} model_shape;

typedef struct bench_args {
    int json, quick, cuda;
    int full; /* --full: the whole grid (without it, --quick or --case: one case per regime) */
    int list; /* --list: print the run's cases and its estimate, run nothing */
    const model_shape *shape; /* of the built-in model */
    const char *model_name;   /* the shape's name, or --model DIR */
    rmlp_dtype dtype;
    rmlp_dtype cpu_weights; /* --cpu-weights: rmlp_model_params::cpu_weight_dtype (F32 or BF16) */
    unsigned long layers, repeat; /* 0: the device's default */
    const char *only[16];
    size_t n_only;
    const char *keep_model, *model_dir, *dump_path, *batches_path;
    const char *trace;                   /* --trace NAME: the prefix cache's traces instead of the cases */
    unsigned long cache_mb, passages;    /* of the traces */
    int decode;                          /* --decode: generation steps instead (bench_decode.h) */
    unsigned long decode_steps;
    const char *variants[8]; /* --gpu-variant specs (bench_cuda_variant_check), timed beside the default */
    size_t n_variants;
} bench_args;

/* The names of rmlp_dtype's values (f32, f16, bf16), indexed by it. */
extern const char *const BENCH_DTYPE_NAMES[3];

/* Reads the options (argv without the command's name) into a, defaults filled in. Returns 0, -1
 * after --help (usage printed), or 2 with a message on stderr. */
int bench_args_parse(int argc, char **argv, bench_args *a);

#endif
