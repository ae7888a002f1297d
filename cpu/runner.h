/*
 * runner.h: the C interface of the CPU model path, mirroring gpu/runner.h: a model (its weights,
 * model/weights.h), contexts (the model's config and weights and a workspace), the whole forward
 * and the forward through a prefix cache (forward.c), new rows against the cache's slots
 * (cached_rows.c), and a generation session's steps (decode.c). The layer itself is layer.h;
 * cpu/backend.c puts these behind the backend table (common/backend.h). Argument checks are the
 * caller's. Internal to the library.
 */
#ifndef RMLP_CPU_RUNNER_H
#define RMLP_CPU_RUNNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/backend.h"
#include "cpu_ops.h"
#include "layer.h"
#include "model/model_ext.h"
#include "radix_mlp/types.h"

struct kv_cache;

/* A context on the CPU: the model's config and weights (the model's, which outlives its
 * contexts) and the context's own scratch. */
typedef struct cpu_context {
    const rmlp_model_config *config;
    const model_weights *weights;
    cpu_workspace ws;
} cpu_context;

/* ---- models and contexts (backend.c) ------------------------------------------------------- */

/* The CPU's backend table (common/backend.h) over the functions below. */
extern const rmlp_backend rmlp_backend_cpu;

/* A CPU model is its weights: every tensor of the checkpoint in fp32, the layers' matrices in bf16
 * with bf16_matrices (config read and audited), and a pointer to ext (the model's, which outlives it). */
rmlp_status cpu_model_load(const char *fn, const struct checkpoint *ckpt, rmlp_model_config *config,
                           const model_ext *ext, bool bf16_matrices, model_weights **out);
void cpu_model_free(model_weights *weights, const rmlp_model_config *config);
rmlp_status cpu_context_create(const char *fn, const model_weights *weights, const rmlp_model_config *config,
                               size_t max_tokens, size_t max_compact, cpu_context **out);
void cpu_context_free(cpu_context *ctx);

/* ---- whole forwards (forward.c) ------------------------------------------------------------- */

/* Embedding, layers, final norm into out (the rows `rows` names: common/forward_rows.h; with the
 * last rows, the last layer's post-attention runs on them alone), attention in `space` (FULL or
 * COMPACT): `attention` (the host's, its status returned) or the built-in. */
rmlp_status cpu_forward(const char *fn, cpu_context *ctx, const rmlp_plan *plan, rmlp_attention_space space,
                        rmlp_attention_fn attention, void *user_data, void *out, forward_rows rows);
/* The forward against the prefix cache: only the rows the cache lacks are computed, the output
 * read from the slots. Returns 1 (nothing done) when the batch's new rows do not fit the cache. */
int cpu_forward_cached(cpu_context *ctx, struct kv_cache *cache, const rmlp_plan *plan, void *out, forward_rows rows);
/* A forward's output (fp32, the rows `rows` names) all finite, or RMLP_ERR_MODEL naming the first
 * row and element that is not (weights so large that fp32 overflows pass the load's check). */
rmlp_status cpu_check_output(const char *fn, const cpu_context *ctx, const rmlp_plan *plan, const float *out,
                             forward_rows rows);

/* ---- new rows against a prefix cache's slots (cached_rows.c): the cached forward's and a
 * generation step's. The rows (a plan whose compact rows are they: ids, positions, n_compact) run
 * every position-wise op as one matrix; each layer puts their K and V into their slots before
 * `attention` reads the keys of their paths from the slots; the final-normed rows go into their
 * slots too. ------------------------------------------------------------------------------------ */

/* The attention of the rows in one layer: rows->q / out are theirs (n rows), rows->k / v the
 * layer's slots (n_slots rows of kv_dim); la the layer's (model_ext.h). */
typedef void (*cached_rows_attention)(void *arg, const cpu_attention_rows *rows, const layer_attention *la);
/* rows: the new rows (n_compact of them); slots (n_compact): each one's slot. */
void cpu_cached_rows_run(cpu_context *ctx, struct kv_cache *cache, const rmlp_plan *rows, const uint32_t *slots,
                         cached_rows_attention attention, void *arg);

/* ---- generation (decode.c): a session's CPU state ---------------------------------------------- */

typedef struct cpu_decode cpu_decode;

/* For steps of up to n_seqs rows: the attention's scratch, the rows the LM head reads, and a pool
 * of threads (rmlp_cpu_threads of them). RMLP_ERR_OUT_OF_MEMORY names what could not be had. */
rmlp_status cpu_decode_create(const char *fn, const cpu_context *ctx, size_t n_seqs, cpu_decode **out);
void cpu_decode_free(cpu_decode *dec);
/* A step's new rows through the model into their slots, each row's attention over its chains
 * (cpu/decode_attention.h); returns the milliseconds its attention took. */
double cpu_decode_rows(cpu_context *ctx, struct kv_cache *cache, cpu_decode *dec, const rmlp_step_rows *rows);
/* logits (n, vocab) = the LM head of the final hidden states in slots (n). */
void cpu_decode_logits(cpu_context *ctx, const struct kv_cache *cache, cpu_decode *dec, const uint32_t *slots,
                       size_t n, float *logits);

#endif
