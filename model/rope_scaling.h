/*
 * rope_scaling.h: RoPE's inverse frequencies and attention factor for the static kinds of
 * transformers (modeling_rope_utils.py, transformers 5.23): default, linear, llama3 and yarn,
 * computed as transformers computes them (its fp32 tensor arithmetic in fp32, its Python scalar
 * arithmetic in double). dynamic and longrope are not here: they change with the sequence's
 * length, so sequences that share a prefix would rotate it differently (config_attention.c
 * refuses them by name).
 */
#ifndef RMLP_MODEL_ROPE_SCALING_H
#define RMLP_MODEL_ROPE_SCALING_H

#include <stdbool.h>
#include <stdint.h>

typedef enum rope_kind { ROPE_DEFAULT, ROPE_LINEAR, ROPE_LLAMA3, ROPE_YARN } rope_kind;

/* What config.json gives (rope_parameters, or rope_scaling), defaults filled by the reader. */
typedef struct rope_spec {
    rope_kind kind;
    double theta;            /* rope_theta */
    double factor;           /* linear, llama3, yarn */
    double low_freq_factor;  /* llama3 */
    double high_freq_factor; /* llama3 */
    double original_max;     /* llama3, yarn: original_max_position_embeddings */
    bool has_attention_factor;
    double attention_factor; /* yarn, when given */
    double mscale, mscale_all_dim; /* yarn: 0 when absent (both non-zero: their ratio of mscales) */
    double beta_fast, beta_slow;   /* yarn: 32 and 1 when absent or 0 */
    bool truncate;                 /* yarn: true when absent */
} rope_spec;

/* inv_freq (head_dim / 2) and *attention_factor (cos and sin are multiplied by it) of spec. */
void rope_scaling_frequencies(const rope_spec *spec, uint32_t head_dim, float *inv_freq, float *attention_factor);

#endif
