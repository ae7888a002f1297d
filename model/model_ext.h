/*
 * model_ext.h: what config.json decides beyond rmlp_model_config (a public struct whose size is
 * fixed by the ABI): each layer's attention (its sliding window, its logit soft-cap, its query
 * scale, which RoPE it rotates by) and the RoPE tables (inverse frequencies as transformers
 * computes them, scaling included, and the factor its cos and sin carry). config.c fills it from
 * config.json (model_ext_init first, then what the checkpoint asks for); a model bound to a host's
 * tensors gets model_ext_init's, from the public config alone. The model (ffi/) owns it; both
 * backends keep a pointer (model_weights::ext, gpu_model::ext). Internal to the library.
 */
#ifndef RMLP_MODEL_MODEL_EXT_H
#define RMLP_MODEL_MODEL_EXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "radix_mlp/types.h"

/* The RoPE tables a model can hold: [MODEL_ROPE_GLOBAL] for full-attention layers (and every layer
 * of a model with one table), [MODEL_ROPE_LOCAL] for sliding layers where they rotate by their own
 * (Gemma 3's rope_local_base_freq, transformers 5's rope_parameters.sliding_attention). */
enum { MODEL_ROPE_GLOBAL = 0, MODEL_ROPE_LOCAL = 1, MODEL_ROPE_MAX = 2 };

/* The most layers and the widest head a model_ext holds (config.json asking for more is refused:
 * no checkpoint comes near, and the tables are written in full at the load). */
#define MODEL_MAX_LAYERS 65536u
#define MODEL_MAX_HEAD_DIM 65536u

/* One layer's attention. Scores are s = scale * q.k; with softcap > 0, s = softcap * tanh(s /
 * softcap) (Gemma 2), before the mask and the softmax. A query at position p of its sequence (its
 * row's index from the sequence's start, not its position id) sees the keys of its own sequence
 * at positions max(0, p - window + 1) .. p: window keys, itself included, as transformers'
 * sliding-window mask (kv_idx > q_idx - sliding_window); window 0 is full causal attention. */
typedef struct layer_attention {
    uint32_t window;  /* 0: full */
    float softcap;    /* 0: none */
    float scale;      /* 1 / sqrt(head_dim) by default; Gemma: query_pre_attn_scalar^-0.5 */
    uint32_t rope;    /* the table it rotates q and k by: MODEL_ROPE_GLOBAL or MODEL_ROPE_LOCAL */
} layer_attention;

/* A RoPE table: position p rotates dimension pair (i, i + head_dim/2) by the angle p * inv_freq[i]
 * (fp32 product), and cos and sin are multiplied by attention_factor (yarn's; 1 otherwise), as
 * transformers' rotary embeddings compute them. */
typedef struct model_rope {
    float *inv_freq;        /* (head_dim / 2), in model_ext's storage */
    float attention_factor; /* 1 unless scaled (yarn) */
    double theta;           /* the base, for messages and the tests */
} model_rope;

typedef struct model_ext {
    uint32_t n_layers;
    layer_attention *layers; /* (n_layers) */
    uint32_t n_rope;         /* tables in use: 1, or 2 when some layer has rope MODEL_ROPE_LOCAL */
    model_rope rope[MODEL_ROPE_MAX];
    bool any_window, any_softcap; /* some layer has a window / a soft-cap */
    void *storage;           /* the one allocation holding layers and every inv_freq */
} model_ext;

/* The model of the public config alone: every layer full attention (or config->sliding_window,
 * Mistral's, where it is set), config's soft-cap (attn_logit_softcapping) and scale
 * (model_ext_scale), one table of plain RoPE with
 * config->rope_theta (both tables allocated, the local one a copy). On failure
 * (RMLP_ERR_OUT_OF_MEMORY, or RMLP_ERR_MODEL past MODEL_MAX_LAYERS or MODEL_MAX_HEAD_DIM,
 * reported as `fn`) *ext is zeroed. */
rmlp_status model_ext_init(const char *fn, const rmlp_model_config *config, model_ext *ext);
/* The attention scale of config: query_pre_attn_scalar^-0.5 where it is set (Gemma 2 and 3), else
 * 1 / sqrt(head_dim), as an fp32 (transformers multiplies fp32 scores by the Python float). */
float model_ext_scale(const rmlp_model_config *config);
/* Frees the storage and zeroes *ext (a zeroed ext is a no-op). */
void model_ext_free(model_ext *ext);
/* Recomputes any_window, any_softcap and n_rope from the layers (after config.c set them). */
void model_ext_summarize(model_ext *ext);
/* The inverse frequencies of plain RoPE, transformers' expression in fp32: 1 / theta^(2i / head_dim),
 * i < head_dim / 2, into inv_freq. */
void model_rope_default(double theta, uint32_t head_dim, float *inv_freq);

#endif
