/*
 * config_keys.c: the table of config_keys.h and the load report's line on the keys outside it.
 * A row per key that transformers 5.23 reads for at least one of the architectures (its config
 * class's arguments, and what its modeling, masking, RoPE and cache code looks up on the config);
 * config.c implements or refuses each READ key.
 */
#include "config_keys.h"

#include <jansson.h>
#include <stdbool.h>
#include <string.h>

#include "report_append.h"

#define QWEN3 (1u << RMLP_ARCH_QWEN3)
#define QWEN2 (1u << RMLP_ARCH_QWEN2)
#define LLAMA (1u << RMLP_ARCH_LLAMA)
#define MISTRAL (1u << RMLP_ARCH_MISTRAL)
#define GEMMA (1u << RMLP_ARCH_GEMMA)
#define GEMMA2 (1u << RMLP_ARCH_GEMMA2)
#define GEMMA3 (1u << RMLP_ARCH_GEMMA3_TEXT)
#define LLAMA_LIKE (QWEN3 | QWEN2 | LLAMA | MISTRAL)
#define GEMMAS (GEMMA | GEMMA2 | GEMMA3)
#define ALL (LLAMA_LIKE | GEMMAS)
#define LISTED_KEYS 8

typedef enum config_key_use {
    CONFIG_KEY_READ,  /* config.c reads it: used, or refused by name where the layers cannot run it */
    CONFIG_KEY_INERT, /* read by transformers, but nothing a forward computes depends on it */
} config_key_use;

typedef struct config_key {
    const char *name;
    unsigned archs; /* bit (1u << rmlp_arch) per architecture whose transformers code reads it */
    config_key_use use;
    const char *why; /* for INERT keys: why the numbers do not depend on it */
} config_key;

static const config_key table[] = {
    /* read by config.c (sizes, norms, RoPE, attention kind; refused by name where unsupported) */
    {"model_type", ALL, CONFIG_KEY_READ, NULL},
    {"vocab_size", ALL, CONFIG_KEY_READ, NULL},
    {"hidden_size", ALL, CONFIG_KEY_READ, NULL},
    {"intermediate_size", ALL, CONFIG_KEY_READ, NULL},
    {"num_hidden_layers", ALL, CONFIG_KEY_READ, NULL},
    {"num_attention_heads", ALL, CONFIG_KEY_READ, NULL},
    {"num_key_value_heads", ALL, CONFIG_KEY_READ, NULL},
    {"head_dim", ALL, CONFIG_KEY_READ, NULL},
    {"max_position_embeddings", ALL, CONFIG_KEY_READ, NULL},
    {"rms_norm_eps", ALL, CONFIG_KEY_READ, NULL},
    {"rope_theta", ALL, CONFIG_KEY_READ, NULL},
    {"rope_parameters", ALL, CONFIG_KEY_READ, NULL},
    {"rope_scaling", ALL, CONFIG_KEY_READ, NULL},
    /* moved into rope_parameters by transformers: plain RoPE of these architectures ignores it, the
     * scaled kinds rotate part of a head by it (refused) */
    {"partial_rotary_factor", ALL, CONFIG_KEY_READ, NULL},
    /* llama3's and yarn's original context, before rope_parameters' own (transformers' standardisation) */
    {"original_max_position_embeddings", LLAMA_LIKE | GEMMA | GEMMA2, CONFIG_KEY_READ, NULL},
    {"original_max_position_embeddings", GEMMA3, CONFIG_KEY_INERT, "Gemma 3's RoPE per layer type takes it from "
                                                                   "each layer type's object only"},
    {"hidden_act", LLAMA_LIKE | GEMMA, CONFIG_KEY_READ, NULL},
    {"hidden_activation", GEMMA2 | GEMMA3, CONFIG_KEY_READ, NULL},
    {"tie_word_embeddings", ALL, CONFIG_KEY_READ, NULL},
    {"attention_bias", QWEN3 | LLAMA | GEMMAS, CONFIG_KEY_READ, NULL},
    {"mlp_bias", LLAMA, CONFIG_KEY_READ, NULL},
    {"layer_types", ALL, CONFIG_KEY_READ, NULL},
    {"use_sliding_window", LLAMA_LIKE, CONFIG_KEY_READ, NULL},
    {"max_window_layers", QWEN3 | QWEN2, CONFIG_KEY_READ, NULL},
    {"sliding_window", ALL, CONFIG_KEY_READ, NULL},
    {"is_causal", ALL, CONFIG_KEY_READ, NULL},
    {"attention_chunk_size", ALL, CONFIG_KEY_READ, NULL},
    {"kv_sharing_modes", ALL, CONFIG_KEY_READ, NULL},
    {"per_layer_config", ALL, CONFIG_KEY_READ, NULL},
    {"text_config", ALL, CONFIG_KEY_READ, NULL},
    {"decoder", ALL, CONFIG_KEY_READ, NULL},
    {"generator", ALL, CONFIG_KEY_READ, NULL},
    {"quantization_config", ALL, CONFIG_KEY_READ, NULL},
    {"use_bidirectional_attention", GEMMAS, CONFIG_KEY_READ, NULL},
    {"final_logit_softcapping", GEMMA2 | GEMMA3, CONFIG_KEY_READ, NULL},
    {"query_pre_attn_scalar", GEMMA2 | GEMMA3, CONFIG_KEY_READ, NULL},
    {"attn_logit_softcapping", GEMMA2, CONFIG_KEY_READ, NULL},
    {"attn_logit_softcapping", GEMMA3, CONFIG_KEY_INERT, "Gemma3Attention keeps it but never passes it to its "
                                                          "attention: Gemma 3 does not cap"},
    /* read by transformers, without effect on the numbers of a forward */
    {"architectures", ALL, CONFIG_KEY_INERT, "names a class; model_type decides the architecture"},
    {"transformers_version", ALL, CONFIG_KEY_INERT, "bookkeeping"},
    {"_name_or_path", ALL, CONFIG_KEY_INERT, "bookkeeping"},
    {"dtype", ALL, CONFIG_KEY_INERT, "the safetensors give each weight's dtype"},
    {"torch_dtype", ALL, CONFIG_KEY_INERT, "the older name of dtype"},
    {"initializer_range", ALL, CONFIG_KEY_INERT, "initialises new weights only"},
    {"use_cache", ALL, CONFIG_KEY_INERT, "keeps keys and values for generation; the same numbers"},
    {"pad_token_id", ALL, CONFIG_KEY_INERT, "the embedding's padding row for training; the forward reads it as any row"},
    {"bos_token_id", ALL, CONFIG_KEY_INERT, "tokenisation and generation"},
    {"eos_token_id", ALL, CONFIG_KEY_INERT, "tokenisation and generation"},
    {"attention_dropout", ALL, CONFIG_KEY_INERT, "dropout, off at inference"},
    {"pretraining_tp", LLAMA, CONFIG_KEY_INERT, "in LlamaConfig, unused by transformers 5's Llama layers"},
    {"output_hidden_states", ALL, CONFIG_KEY_INERT, "what transformers returns, not how it computes"},
    {"output_attentions", ALL, CONFIG_KEY_INERT, "what transformers returns, not how it computes"},
    {"return_dict", ALL, CONFIG_KEY_INERT, "what transformers returns, not how it computes"},
    {"chunk_size_feed_forward", ALL, CONFIG_KEY_INERT, "not used by these architectures' layers"},
    {"is_encoder_decoder", ALL, CONFIG_KEY_INERT, "generation's bookkeeping; these are decoders"},
    {"id2label", ALL, CONFIG_KEY_INERT, "labels of a classification head; the library outputs hidden states"},
    {"label2id", ALL, CONFIG_KEY_INERT, "labels of a classification head; the library outputs hidden states"},
    {"problem_type", ALL, CONFIG_KEY_INERT, "the loss of a classification head"},
    {"gradient_checkpointing", ALL, CONFIG_KEY_INERT, "recomputation in training; the same numbers"},
    {"attn_implementation", ALL, CONFIG_KEY_INERT, "eager, sdpa and flash kernels compute the same attention"},
    {"_attn_implementation", ALL, CONFIG_KEY_INERT, "eager, sdpa and flash kernels compute the same attention"},
    {"mtp_layer_types", ALL, CONFIG_KEY_INERT, "multi-token-prediction layers, which these architectures do not build"},
    {"auto_map", ALL, CONFIG_KEY_INERT, "custom code, which transformers runs only with trust_remote_code (and "
                                        "otherwise its own layers, as the library does); the load report says so"},
    {"vision_aspect_ratio", ALL, CONFIG_KEY_INERT, "a multimodal call's default; a text decoder takes none"},
    {"vision_feature_layer", ALL, CONFIG_KEY_INERT, "a multimodal call's default; a text decoder takes none"},
    {"vision_feature_select_strategy", ALL, CONFIG_KEY_INERT, "a multimodal call's default; a text decoder takes none"},
    {"_sliding_window_pattern", GEMMA3, CONFIG_KEY_INERT, "what Gemma3TextConfig writes of the pattern it derived "
                                                          "layer_types from; it reads layer_types, else "
                                                          "sliding_window_pattern"},
};

bool config_keys_read_by(const char *name, const arch_info *arch) {
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) /* a key may have a row per use */
        if (strcmp(table[i].name, name) == 0 && (table[i].archs & (1u << arch->id)) != 0) return true;
    return false;
}

size_t config_keys_unread_report(const json_t *root, const arch_info *arch, char *buf, size_t cap) {
    size_t unread = 0, listed = 0, len = 0;
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)root, key, value) unread += !config_keys_read_by(key, arch);
    if (unread == 0) return 0;
    APPEND(buf, cap, &len, "config.json has %zu key%s that transformers' %s model does not read, ignored as it "
           "ignores them:", unread, unread > 1 ? "s" : "", arch->model_type);
    json_object_foreach((json_t *)root, key, value) {
        if (listed == LISTED_KEYS) break;
        if (!config_keys_read_by(key, arch)) APPEND(buf, cap, &len, "%s '%s'", listed++ ? "," : "", key);
    }
    if (unread > listed) APPEND(buf, cap, &len, " and %zu more", unread - listed);
    APPEND(buf, cap, &len, "\n");
    return len;
}

size_t config_keys_custom_code_report(const json_t *root, const arch_info *arch, char *buf, size_t cap) {
    const json_t *map = json_object_get(root, "auto_map");
    const char *key;
    json_t *value;
    size_t len = 0;
    json_object_foreach((json_t *)map, key, value) {
        if (strncmp(key, "AutoModel", 9) != 0 || !json_is_string(value)) continue;
        APPEND(buf, cap, &len, "config.json's auto_map names custom code for %s ('%s'), which transformers runs only "
               "with trust_remote_code: the library runs transformers' own %s layers, as transformers does without "
               "it\n", key, json_string_value(value), arch->model_type);
        break;
    }
    return len;
}
