/*
 * tiny_model.h: writes a random-weight checkpoint (config.json + model.safetensors, F32) of
 * a Llama-family architecture, as Hugging Face names its tensors. The benchmarks' built-in
 * model, so `radixmlp bench` needs no download.
 */
#ifndef RMLP_BENCH_TINY_MODEL_H
#define RMLP_BENCH_TINY_MODEL_H

#include <stdint.h>

#include "radix_mlp.h"

/* Writes dir/config.json and dir/model.safetensors (dir must exist). Weights are uniform with
 * standard deviation 0.02, norm weights 1 +- 0.1, from `seed`. Returns 0, or -1 after printing
 * why to stderr. */
int tiny_model_write(const char *dir, const rmlp_model_config *cfg, uint64_t seed);

/* Removes what tiny_model_write wrote in dir, then dir itself (when empty); errors are ignored. */
void tiny_model_remove(const char *dir);

#endif
