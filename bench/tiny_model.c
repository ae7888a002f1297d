/*
 * tiny_model.c: the random checkpoint writer of tiny_model.h. Tensors are generated while
 * they are written, so a model larger than memory could be written too.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch.h"
#include "tiny_model.h"

typedef struct tensor_spec {
    char name[96];
    uint64_t rows, cols; /* cols 0: a vector of `rows` */
    int is_norm;
} tensor_spec;

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static float unit(uint64_t *state) { return (float)((double)(splitmix64(state) >> 11) * 0x1p-52 - 1.0); }

/* c->architecture is one of arch.h (tiny_model_write checked). */
static size_t list_tensors(const rmlp_model_config *c, tensor_spec *specs) {
    uint64_t h = c->hidden_size, qd = (uint64_t)c->num_attention_heads * c->head_dim;
    uint64_t kvd = (uint64_t)c->num_key_value_heads * c->head_dim, inter = c->intermediate_size;
    size_t n = 0;
#define ADD(rows_, cols_, norm_, ...) \
    (snprintf(specs[n].name, sizeof specs[n].name, __VA_ARGS__), specs[n].rows = rows_, specs[n].cols = cols_, \
     specs[n++].is_norm = norm_)
    /* The biases the architecture builds from the attention_bias and mlp_bias written to
     * config.json (model/arch.h, as model/config.c reads them); q/k norms as c->qk_norm says. */
    rmlp_model_config built = *c;
    arch_set_layer_flags(arch_by_id(c->architecture), c->attention_bias, c->mlp_bias, &built);
    bool qkv_bias = built.attention_bias, o_bias = built.o_proj_bias, mlp_bias = built.mlp_bias;
    ADD(c->vocab_size, h, 0, "model.embed_tokens.weight");
    for (uint32_t l = 0; l < c->num_hidden_layers; l++) {
        ADD(h, 0, 1, "model.layers.%u.input_layernorm.weight", l);
        ADD(qd, h, 0, "model.layers.%u.self_attn.q_proj.weight", l);
        ADD(kvd, h, 0, "model.layers.%u.self_attn.k_proj.weight", l);
        ADD(kvd, h, 0, "model.layers.%u.self_attn.v_proj.weight", l);
        if (qkv_bias) {
            ADD(qd, 0, 0, "model.layers.%u.self_attn.q_proj.bias", l);
            ADD(kvd, 0, 0, "model.layers.%u.self_attn.k_proj.bias", l);
            ADD(kvd, 0, 0, "model.layers.%u.self_attn.v_proj.bias", l);
        }
        if (c->qk_norm) {
            ADD(c->head_dim, 0, 1, "model.layers.%u.self_attn.q_norm.weight", l);
            ADD(c->head_dim, 0, 1, "model.layers.%u.self_attn.k_norm.weight", l);
        }
        ADD(h, qd, 0, "model.layers.%u.self_attn.o_proj.weight", l);
        if (o_bias) ADD(h, 0, 0, "model.layers.%u.self_attn.o_proj.bias", l);
        ADD(h, 0, 1, "model.layers.%u.post_attention_layernorm.weight", l);
        if (built.sandwich_norms) ADD(h, 0, 1, "model.layers.%u.pre_feedforward_layernorm.weight", l);
        ADD(inter, h, 0, "model.layers.%u.mlp.gate_proj.weight", l);
        ADD(inter, h, 0, "model.layers.%u.mlp.up_proj.weight", l);
        ADD(h, inter, 0, "model.layers.%u.mlp.down_proj.weight", l);
        if (mlp_bias) {
            ADD(inter, 0, 0, "model.layers.%u.mlp.gate_proj.bias", l);
            ADD(inter, 0, 0, "model.layers.%u.mlp.up_proj.bias", l);
            ADD(h, 0, 0, "model.layers.%u.mlp.down_proj.bias", l);
        }
        if (built.sandwich_norms) ADD(h, 0, 1, "model.layers.%u.post_feedforward_layernorm.weight", l);
    }
    ADD(h, 0, 1, "model.norm.weight");
    if (!c->tie_word_embeddings) ADD(c->vocab_size, h, 0, "lm_head.weight");
#undef ADD
    return n;
}

/* config.json with the keys transformers' config class of the architecture has (so the load reports
 * none as unread): the bias flags where the architecture reads them, the activation by the
 * architecture's key, sliding_window null unless set (Gemma 2 and 3: 4096, transformers' default);
 * Gemma 2 and 3's query_pre_attn_scalar as c's (0: head_dim), their attention and final logit
 * soft-capping as c's (0: null, none). */
static int write_config(const char *dir, const rmlp_model_config *c) {
    char path[4096], flags[256] = "", window[32] = "null";
    const arch_info *arch = arch_by_id(c->architecture);
    static const char *const act_names[] = {"silu", "gelu_pytorch_tanh", "gelu"};
    const char *act = c->activation >= 0 && c->activation < 3 ? act_names[c->activation] : "silu";
    if (arch->reads_attention_bias)
        snprintf(flags, sizeof flags, " \"attention_bias\": %s,", c->attention_bias ? "true" : "false");
    if (arch->reads_mlp_bias)
        snprintf(flags + strlen(flags), sizeof flags - strlen(flags), " \"mlp_bias\": %s,", c->mlp_bias ? "true" : "false");
    if (arch->sandwich_norms) { /* Gemma 2 and 3 */
        char cap[32] = "null", attn_cap[32] = "null";
        if (c->final_logit_softcapping != 0.0) snprintf(cap, sizeof cap, "%g", c->final_logit_softcapping);
        if (c->attn_logit_softcapping != 0.0) snprintf(attn_cap, sizeof attn_cap, "%g", c->attn_logit_softcapping);
        snprintf(flags + strlen(flags), sizeof flags - strlen(flags),
                 " \"query_pre_attn_scalar\": %g, \"attn_logit_softcapping\": %s, \"final_logit_softcapping\": %s,",
                 c->query_pre_attn_scalar != 0.0 ? c->query_pre_attn_scalar : (double)c->head_dim, attn_cap, cap);
    }
    if (c->sliding_window != 0) snprintf(window, sizeof window, "%u", c->sliding_window);
    /* Gemma 2 and 3 slide some layers whatever the config says: their default window */
    else if (arch->windows == ARCH_WINDOWS_LAYER_TYPES) snprintf(window, sizeof window, "4096");
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (f == NULL) return -1;
    fprintf(f,
            "{\"model_type\": \"%s\", \"vocab_size\": %u, \"hidden_size\": %u, \"intermediate_size\": %u,\n"
            " \"num_hidden_layers\": %u, \"num_attention_heads\": %u, \"num_key_value_heads\": %u, \"head_dim\": %u,\n"
            " \"max_position_embeddings\": %u, \"rms_norm_eps\": %g, \"rope_theta\": %.1f,\n"
            " \"tie_word_embeddings\": %s,%s \"%s\": \"%s\", \"sliding_window\": %s}\n",
            arch->model_type, c->vocab_size, c->hidden_size, c->intermediate_size, c->num_hidden_layers,
            c->num_attention_heads, c->num_key_value_heads, c->head_dim, c->max_position_embeddings, c->rms_norm_eps,
            c->rope_theta, c->tie_word_embeddings ? "true" : "false", flags, arch->activation_key, act, window);
    return fclose(f) == 0 ? 0 : -1;
}

static int write_weights(FILE *f, const tensor_spec *specs, size_t n, uint64_t seed) {
    /* Header: every tensor's dtype, shape and byte range, padded with spaces to 8 bytes. */
    size_t cap = 256 * n + 64, len = 0;
    char *header = malloc(cap);
    if (header == NULL) return -1;
    uint64_t offset = 0;
    len += (size_t)snprintf(header + len, cap - len, "{");
    for (size_t i = 0; i < n; i++) {
        uint64_t bytes = specs[i].rows * (specs[i].cols ? specs[i].cols : 1) * 4;
        if (specs[i].cols)
            len += (size_t)snprintf(header + len, cap - len,
                                    "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%llu,%llu],\"data_offsets\":[%llu,%llu]}",
                                    i ? "," : "", specs[i].name, (unsigned long long)specs[i].rows,
                                    (unsigned long long)specs[i].cols, (unsigned long long)offset,
                                    (unsigned long long)(offset + bytes));
        else
            len += (size_t)snprintf(header + len, cap - len,
                                    "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%llu],\"data_offsets\":[%llu,%llu]}",
                                    i ? "," : "", specs[i].name, (unsigned long long)specs[i].rows,
                                    (unsigned long long)offset, (unsigned long long)(offset + bytes));
        offset += bytes;
    }
    header[len++] = '}';
    while (len % 8) header[len++] = ' ';
    uint8_t size_le[8];
    for (int b = 0; b < 8; b++) size_le[b] = (uint8_t)((uint64_t)len >> (8 * b));
    int ok = fwrite(size_le, 1, 8, f) == 8 && fwrite(header, 1, len, f) == len;
    free(header);

    uint64_t state = seed;
    float chunk[4096];
    const float scale = 0.02f * 1.7320508f; /* uniform [-a, a] has standard deviation a / sqrt(3) */
    for (size_t i = 0; ok && i < n; i++) {
        uint64_t count = specs[i].rows * (specs[i].cols ? specs[i].cols : 1);
        for (uint64_t done = 0; ok && done < count;) {
            size_t m = count - done < 4096 ? (size_t)(count - done) : 4096;
            for (size_t j = 0; j < m; j++) chunk[j] = specs[i].is_norm ? 1.0f + 0.1f * unit(&state) : scale * unit(&state);
            ok = fwrite(chunk, sizeof(float), m, f) == m;
            done += m;
        }
    }
    return ok ? 0 : -1;
}

int tiny_model_write(const char *dir, const rmlp_model_config *cfg, uint64_t seed) {
    if (arch_by_id(cfg->architecture) == NULL) {
        fprintf(stderr, "radixmlp: writing the random model to %s failed: architecture %d is not an rmlp_arch\n",
                dir, cfg->architecture);
        return -1;
    }
    tensor_spec *specs = malloc((4 + 20 * (size_t)cfg->num_hidden_layers) * sizeof(tensor_spec)); /* 20 >= a layer's */
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    errno = specs ? 0 : ENOMEM;
    FILE *f = specs ? fopen(path, "wb") : NULL;
    int rc = f && write_config(dir, cfg) == 0 ? write_weights(f, specs, list_tensors(cfg, specs), seed) : -1;
    int reason = errno; /* of the write that failed (a full disk), before fclose */
    if (f && fclose(f) != 0 && rc == 0) rc = -1, reason = errno;
    if (rc != 0) fprintf(stderr, "radixmlp: writing the random model to %s failed: %s\n", dir, strerror(reason));
    free(specs);
    return rc;
}

void tiny_model_remove(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir), remove(path);
    snprintf(path, sizeof path, "%s/config.json", dir), remove(path);
    remove(dir);
}
