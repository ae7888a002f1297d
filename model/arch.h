/*
 * arch.h: the one table of the decoder architectures the library runs, keyed by config.json's
 * model_type, and what each decides that the code would otherwise switch on: which of the
 * attention_bias / mlp_bias flags it reads, the biases it always has, q/k norm, how it declares
 * sliding windows, its tie_word_embeddings default, and Gemma's layer forms (norm weights as
 * 1 + w, the embedding scaled by sqrt(hidden_size), norms after each sublayer). config.c reads it to take a config.json
 * apart, audit.c to name the architecture in its report, gpu/bind.cu to check a host's config,
 * bench/tiny_model.c to write a checkpoint; every message that lists the accepted model_types
 * builds the list from it. Which tensors a layer has then follows from the rmlp_model_config
 * flags set here (weights_layer_tensors in weights.h), never from the architecture id.
 *
 * The table is in this header (static, inline) so that the programs that link only the exported
 * entry points of libradix_mlp.so (the CLI, the tests writing tiny models) read the same rows.
 * The Rust and Python copies of the list (rmlp_arch constants, Architecture, ARCH_NAMES) are
 * checked against it by the ctest arch_table_bindings (tests/check_arch_table.py). Adding an
 * architecture: docs/adding-an-architecture.md.
 */
#ifndef RMLP_MODEL_ARCH_H
#define RMLP_MODEL_ARCH_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "radix_mlp/types.h"

/* How an architecture declares sliding-window attention (config_attention.c, config_gemma.c). */
typedef enum arch_windows {
    /* None (Llama): transformers does not read use_sliding_window; true is refused. */
    ARCH_WINDOWS_NONE,
    /* Per layer (Qwen2, Qwen3): layer_types, or without it use_sliding_window, sliding_window and
     * max_window_layers, decide which layers slide; a sliding layer is refused. */
    ARCH_WINDOWS_PER_LAYER,
    /* Every layer (Mistral): sliding_window, when set, applies to all layers and is kept in
     * rmlp_model_config.sliding_window (sequences up to it see full attention);
     * use_sliding_window true is refused as under NONE. */
    ARCH_WINDOWS_ALL,
    /* By layer type (Gemma 2, Gemma 3): layer_types names each layer's kind; without it every
     * window_pattern-th layer is full and the others slide (Gemma 3: sliding_window_pattern gives
     * the pattern); sliding_window absent is 4096, null none (config_gemma.c). */
    ARCH_WINDOWS_LAYER_TYPES,
} arch_windows;

typedef struct arch_info {
    rmlp_arch id;              /* RMLP_ARCH_<MODEL_TYPE in capitals> */
    const char *model_type;    /* config.json's model_type */
    bool reads_attention_bias; /* attention_bias gives q, k, v and o_proj biases */
    bool qkv_bias;             /* q, k, v biases always, whatever attention_bias says */
    bool reads_mlp_bias;       /* mlp_bias gives gate, up and down biases */
    bool qk_norm;              /* per-head RMSNorm of q and k (self_attn.q_norm, k_norm) */
    bool tied_default;         /* tie_word_embeddings when config.json does not say */
    arch_windows windows;
    bool norm_plus_one;        /* every RMSNorm weight acts as 1 + w (GemmaRMSNorm) */
    bool embed_scaled;         /* the embedding rows are multiplied by sqrt(hidden_size) */
    bool sandwich_norms;       /* post_attention_layernorm on the attention output, pre_ and
                                  post_feedforward_layernorm around the MLP (Gemma 2 and 3) */
    const char *activation_key; /* the key naming the MLP's activation: hidden_act, or Gemma 2 and
                                   3's hidden_activation */
    rmlp_activation activation_default; /* when that key is absent */
    bool gelu_means_tanh;      /* "gelu" names GELU's tanh form (GemmaConfig's conversion of the
                                  official releases' legacy value) */
    double final_softcap_default; /* final_logit_softcapping when absent (Gemma 2: 30); 0 none */
    double attn_softcap_default; /* attn_logit_softcapping when absent (Gemma 2: 50); 0: the
                                    architecture does not cap attention (Gemma 3 reads the key but
                                    never applies it) */
    uint32_t window_pattern;   /* ARCH_WINDOWS_LAYER_TYPES: layers i with (i + 1) % pattern != 0 slide */
    bool local_rope;           /* sliding layers rotate by their own RoPE (Gemma 3's rope_local_base_freq,
                                  rope_parameters per layer type) */
} arch_info;

/* The table, one row per model_type, as transformers' modeling code builds each. A second
 * model_type for the same id is one more row with that id (the first row names the id). */
static inline const arch_info *arch_table(size_t *count) {
    static const arch_info table[] = {
        /* id, model_type,
         *   reads_attention_bias, qkv_bias, reads_mlp_bias, qk_norm, tied_default, windows,
         *   norm_plus_one, embed_scaled, sandwich_norms, activation_key, activation_default, gelu_means_tanh,
         *   final_softcap_default, attn_softcap_default, window_pattern, local_rope
         * (positional: gpu/bind.cu reads this header as C++, which has no mixed designators) */
        {RMLP_ARCH_QWEN3, "qwen3",
         true, false, false, true, false, ARCH_WINDOWS_PER_LAYER,
         false, false, false, "hidden_act", RMLP_ACTIVATION_SILU, false, 0.0, 0.0, 0, false},
        {RMLP_ARCH_QWEN2, "qwen2",
         false, true, false, false, false, ARCH_WINDOWS_PER_LAYER,
         false, false, false, "hidden_act", RMLP_ACTIVATION_SILU, false, 0.0, 0.0, 0, false},
        {RMLP_ARCH_LLAMA, "llama",
         true, false, true, false, false, ARCH_WINDOWS_NONE,
         false, false, false, "hidden_act", RMLP_ACTIVATION_SILU, false, 0.0, 0.0, 0, false},
        {RMLP_ARCH_MISTRAL, "mistral",
         false, false, false, false, false, ARCH_WINDOWS_ALL,
         false, false, false, "hidden_act", RMLP_ACTIVATION_SILU, false, 0.0, 0.0, 0, false},
        {RMLP_ARCH_GEMMA, "gemma",
         true, false, false, false, true, ARCH_WINDOWS_NONE,
         true, true, false, "hidden_act", RMLP_ACTIVATION_GELU_TANH, true, 0.0, 0.0, 0, false},
        {RMLP_ARCH_GEMMA2, "gemma2",
         true, false, false, false, true, ARCH_WINDOWS_LAYER_TYPES,
         true, true, true, "hidden_activation", RMLP_ACTIVATION_GELU_TANH, false, 30.0, 50.0, 2, false},
        {RMLP_ARCH_GEMMA3_TEXT, "gemma3_text",
         true, false, false, true, true, ARCH_WINDOWS_LAYER_TYPES,
         true, true, true, "hidden_activation", RMLP_ACTIVATION_GELU_TANH, false, 0.0, 0.0, 6, true},
    };
    *count = sizeof table / sizeof table[0];
    return table;
}

/* The row of a model_type; NULL when the library does not run it. */
static inline const arch_info *arch_by_model_type(const char *model_type) {
    size_t n;
    const arch_info *table = arch_table(&n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(table[i].model_type, model_type) == 0) return &table[i];
    return NULL;
}

/* The first row of an rmlp_arch; NULL when id is not one. */
static inline const arch_info *arch_by_id(rmlp_arch id) {
    size_t n;
    const arch_info *table = arch_table(&n);
    for (size_t i = 0; i < n; i++)
        if (table[i].id == id) return &table[i];
    return NULL;
}

/* "qwen3, qwen2, llama, mistral": every model_type of the table, for messages, into buf (cap
 * bytes, NUL-terminated, cut short when cap is too small). */
static inline void arch_model_types(char *buf, size_t cap) {
    size_t n, len = 0;
    const arch_info *table = arch_table(&n);
    if (cap > 0) buf[0] = '\0';
    for (size_t i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", table[i].model_type);
}

/* Sets config's architecture and the layer flags the architecture builds from config.json's
 * attention_bias and mlp_bias (a flag it does not read is ignored, as transformers ignores it):
 * attention_bias (q, k, v biases), o_proj_bias, mlp_bias, qk_norm, and the row's own forms:
 * norm_weight_plus_one, sandwich_norms, embedding_scale (sqrt(hidden_size), hidden_size set). */
static inline void arch_set_layer_flags(const arch_info *arch, bool attention_bias, bool mlp_bias,
                                        rmlp_model_config *config) {
    config->architecture = arch->id;
    config->attention_bias = arch->qkv_bias || (arch->reads_attention_bias && attention_bias);
    config->o_proj_bias = arch->reads_attention_bias && attention_bias;
    config->mlp_bias = arch->reads_mlp_bias && mlp_bias;
    config->qk_norm = arch->qk_norm;
    config->norm_weight_plus_one = arch->norm_plus_one;
    config->sandwich_norms = arch->sandwich_norms;
    config->embedding_scale = arch->embed_scaled ? sqrt((double)config->hidden_size) : 0.0;
}

#endif
