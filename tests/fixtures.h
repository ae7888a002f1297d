/*
 * fixtures.h: the batches of the transformers fixtures (integration_tests/fixtures/<name>/
 * batch.json: {"input_ids": [[...], ...]}, one list of token ids per sequence), read into the
 * varlen form the planner takes, and the model run as a host that keeps attention runs it: what
 * test_model_fixtures (CPU) and test_gpu_model (CUDA) both do.
 */
#ifndef RMLP_TEST_FIXTURES_H
#define RMLP_TEST_FIXTURES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "radix_mlp.h"

/* The fixtures' folders, for `static const char *const names[] = FIXTURE_NAMES;`: the first
 * three are those a quick run takes; the *_bias ones have every bias flag of their
 * architecture's config.json on; the *_window ones sliding windows, llama3_rope, qwen2_yarn and
 * qwen3_linear RoPE scaling; gemma_bias, gemma2_window and gemma3_text the Gemma family. */
#define FIXTURE_NAMES                                                                                      \
    {"qwen3_tiny", "qwen3_bf16", "qwen2_sharded", "llama_tiny", "qwen3_embedding_noprefix", "llama_bias", \
     "qwen3_bias", "qwen2_bias", "mistral_bias", "qwen2_window", "mistral_window", "llama3_rope",           \
     "qwen2_yarn", "qwen3_linear", "gemma_bias", "gemma2_window", "gemma3_text"}

typedef struct fixture_batch {
    uint32_t *ids, *pos; /* (n_tokens): token ids, positions 0.. within each sequence */
    uint32_t *cu;        /* (n_seqs + 1): sequence offsets */
    size_t n_tokens, n_seqs;
} fixture_batch;

/* Reads the batch at `path`. Returns 0, or -1 with why (nothing allocated). */
int fixture_read_batch(const char *path, fixture_batch *b, char *why, size_t why_len);
void fixture_batch_free(fixture_batch *b);

/* rmlp_embed into hidden; per layer rmlp_layer_pre_attention into q, k, v, rmlp_attention(args) on
 * them into args->out, rmlp_layer_post_attention; rmlp_final_norm into out (model's layers, the
 * context's model). args is filled in but for its layer, q, k, v and the layer's scale, window and
 * soft-cap (set here, from rmlp_model_layer_attention); buffers are the context's kind of memory (a CUDA context:
 * its plan set before). With `compact`, the same in compact space: the *_compact calls and
 * rmlp_attention_compact, q, k, v, args->out and out of n_compact_padded rows, args given the
 * plan's layout (host arrays; device ones NULL, so a CUDA context uses the set plan's copies).
 * Returns RMLP_OK or the first failure (rmlp_last_error says which). */
rmlp_status fixture_run_per_layer(rmlp_context *ctx, const rmlp_model *model, const rmlp_plan *plan,
                                  rmlp_attention_args *args, void *hidden, void *q, void *k, void *v, void *out,
                                  bool compact);

#endif
