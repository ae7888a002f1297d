/*
 * tiny_load.h: the tiny random Qwen3 model that the fuzz targets running forwards share
 * (fuzz_forged_plans, fuzz_batcher): hidden 16, 2 layers, 2 heads of 8 over 1 K/V head, vocab 8,
 * 64 positions, tied embeddings; written with the benchmarks' writer (bench/tiny_model.h) to a
 * private folder under $TMPDIR, loaded (its weights are then in memory) and removed.
 */
#ifndef RMLP_FUZZ_TINY_LOAD_H
#define RMLP_FUZZ_TINY_LOAD_H

#include <stdint.h>

#include "radix_mlp.h"

/* The model's hidden size, for the targets' output buffers. */
#define FUZZ_TINY_HIDDEN 16

/* Loads the tiny model with weights from `seed` into *out; `target` names the folder. 0 or -1. */
int fuzz_tiny_model_load(const char *target, uint64_t seed, rmlp_model **out);

#endif
