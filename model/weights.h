/*
 * weights.h: a model's weights in fp32, checked against its config and laid out for the
 * layer code: Q/K/V stacked into one matrix, gate and up stacked into another, so each is one
 * GEMM. Tensor names as Hugging Face and Candle write them, with or without the "model."
 * prefix; a tied LM head aliases the embedding.
 */
#ifndef RMLP_MODEL_WEIGHTS_H
#define RMLP_MODEL_WEIGHTS_H

#include "checkpoint.h"

typedef struct layer_weights {
    float *input_norm;   /* (hidden) */
    float *qkv;          /* (q_dim + 2 * kv_dim, hidden): q rows, then k, then v; q_dim = heads * head_dim */
    float *qkv_bias;     /* (q_dim + 2 * kv_dim), or NULL without attention bias */
    float *q_norm;       /* (head_dim), or NULL without q/k norm */
    float *k_norm;       /* (head_dim), or NULL without q/k norm */
    float *o_proj;       /* (hidden, q_dim) */
    float *o_bias;       /* (hidden), or NULL without o_proj bias */
    float *post_norm;    /* (hidden): the MLP's input norm (Gemma 2's pre_feedforward_layernorm) */
    float *attn_out_norm; /* (hidden): the attention output's norm (sandwich norms), or NULL */
    float *mlp_out_norm; /* (hidden): the MLP output's norm (sandwich norms), or NULL */
    float *gate_up;      /* (2 * intermediate, hidden): gate rows, then up rows */
    float *gate_up_bias; /* (2 * intermediate), or NULL without MLP bias */
    float *down;         /* (hidden, intermediate) */
    float *down_bias;    /* (hidden), or NULL without MLP bias */
    /* A model loaded with cpu_weight_dtype BF16 holds the four matrices here instead, same shapes,
     * bf16 bits (weights_bf16.h), and qkv, o_proj, gate_up and down are NULL; else these are NULL. */
    uint16_t *qkv_bf16, *o_proj_bf16, *gate_up_bf16, *down_bf16;
} layer_weights;

/* Which weight of a layer a tensor is. The CPU and CUDA loaders and the checkpoint audit all
 * take a layer's tensors from weights_layer_tensors, so they agree on what an architecture has. */
typedef enum weight_role {
    W_INPUT_NORM, W_Q, W_K, W_V, W_Q_BIAS, W_K_BIAS, W_V_BIAS, W_Q_NORM, W_K_NORM, W_O, W_O_BIAS, W_ATTN_OUT_NORM,
    W_POST_NORM, W_GATE, W_UP, W_GATE_BIAS, W_UP_BIAS, W_DOWN, W_DOWN_BIAS, W_MLP_OUT_NORM, W_ROLES
} weight_role;

typedef struct layer_tensor {
    const char *suffix;  /* the name after "layers.<i>.", e.g. "self_attn.q_proj.weight" */
    weight_role role;
    uint64_t rows, cols; /* the shape config.json calls for; cols 0: a vector of rows */
    bool stacked;        /* stacked right after the entry before it (k and v after q, up after gate) */
} layer_tensor;

/* The tensors of one layer that `config` calls for, in the order the layer stacks them (q, k, v;
 * their biases; gate, up; their biases), into out; returns how many (at most W_ROLES). */
size_t weights_layer_tensors(const rmlp_model_config *config, layer_tensor out[W_ROLES]);

struct model_ext;

typedef struct model_weights {
    const struct model_ext *ext; /* each layer's attention, the RoPE tables (model_ext.h): the model's */
    float *embed;          /* (vocab, hidden) */
    float *final_norm;     /* (hidden) */
    float *lm_head;        /* (vocab, hidden); == embed when tied; NULL when the checkpoint has none */
    layer_weights *layers; /* (num_hidden_layers) */
    /* A bf16-weight model's GEMM, as the CPU backend chose it at load (cpu/backend.c):
     * RMLP_CPU_BF16_GEMM_WIDEN or _ONEDNN (RMLP_CPU_BF16_GEMM_NONE for fp32 matrices), what chose
     * it (rmlp_model_cpu_bf16_gemm's detail), and the GEMMs oneDNN failed that the widening path
     * ran instead (counted with __atomic builtins: contexts on several threads share the model;
     * not _Atomic, as gpu/weights.cu reads this header as C++). */
    rmlp_cpu_bf16_gemm bf16_gemm;
    char bf16_gemm_detail[480];
    uint64_t bf16_gemm_fallbacks;
} model_weights;

/* Reads every tensor the config calls for, converting F16/BF16 to fp32; with bf16_matrices each
 * layer's four matrices are then held in bf16 (weights_bf16.h). With norm_weight_plus_one every
 * norm weight is held as 1 + w (the fp32 sum GemmaRMSNorm forms), so the layers apply it as any
 * other. Sets config->has_lm_head.
 * Errors: RMLP_ERR_MODEL naming the missing tensor or the shape that disagrees (or the weight
 * bf16 cannot hold), RMLP_ERR_OUT_OF_MEMORY. On error nothing is left allocated. */
rmlp_status weights_load(const checkpoint *ckpt, rmlp_model_config *config, bool bf16_matrices, model_weights *out);
void weights_free(model_weights *weights, const rmlp_model_config *config);

/* What the CUDA loader (gpu/weights.cu) shares with this one. The prefix of the checkpoint's
 * tensor names, decided once from the embedding: "model." or "" (Qwen3-Embedding). */
const char *weights_prefix(const checkpoint *ckpt);
/* name (len) = "<prefix>[layers.<layer>.]<suffix>" (layer < 0: a tensor outside the layers). */
void weights_name(char *name, size_t len, const char *prefix, long layer, const char *suffix);
/* Element i of a checkpoint tensor (F32, F16 or BF16) as the loaders convert it. */
float weights_value_at(const st_tensor *t, uint64_t i);
/* *out = the tensor `name`, shaped (rows, cols) as config.json calls for ((rows) when cols is 0).
 * Errors: RMLP_ERR_MODEL naming the tensor (missing, or both shapes), reported as rmlp_model_load. */
rmlp_status weights_find(const checkpoint *ckpt, const char *name, uint64_t rows, uint64_t cols,
                         const st_tensor **out);

#endif
