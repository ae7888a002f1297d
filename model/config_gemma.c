/*
 * config_gemma.c: config_gemma.h's reading of the Gemma family's keys, as transformers 5.23's
 * config classes and modeling files use them (cited where applied).
 */
#include "config_gemma.h"

#include <string.h>

#include "common/status.h"
#include "config_attention.h"
#include "config_keys.h"

/* An object's member, NULL when absent or null. */
static json_t *member(json_t *object, const char *key) {
    json_t *value = object != NULL ? json_object_get(object, key) : NULL;
    return json_is_null(value) ? NULL : value;
}

/* Each layer's window (Gemma2Config and Gemma3TextConfig's __post_init__): layer_types, else
 * layer i slides unless (i + 1) is a multiple of the pattern (Gemma 2: 2; Gemma 3:
 * sliding_window_pattern, default 6); sliding_window absent is 4096, null none, and a sliding layer
 * without one is refused, as transformers' sliding mask raises then. Gemma 3's sliding layers
 * rotate by the local table. */
static rmlp_status windows(const cfg *c, rmlp_model_config *m, const arch_info *arch, model_ext *ext) {
    uint32_t window, pattern = arch->window_pattern;
    bool null = json_is_null(json_object_get(c->root, "sliding_window"));
    rmlp_status s = cfg_u32(c, "sliding_window", 0, 4096, &window);
    if (s != RMLP_OK) return s;
    if (null) window = 0;
    const json_t *types = cfg_get(c, "layer_types");
    if (types != NULL) {
        if ((s = config_layer_types(c, types, m, window, ext)) != RMLP_OK) return s;
    } else {
        if (arch->local_rope && (s = cfg_u32(c, "sliding_window_pattern", 0, pattern, &pattern)) != RMLP_OK) return s;
        for (uint32_t i = 0; i < m->num_hidden_layers; i++) {
            bool slides = (i + 1) % pattern != 0;
            if (slides && window == 0)
                return rmlp_fail(RMLP_ERR_MODEL, c->fn, "%s: layer %u slides (every layer but each %u-th, as %s "
                                 "derives layer_types) but sliding_window is null: transformers cannot build its "
                                 "mask either", c->path, i, pattern, arch->model_type);
            ext->layers[i].window = slides ? window : 0;
        }
    }
    m->sliding_window = 0;
    for (uint32_t i = 0; i < m->num_hidden_layers; i++) {
        if (ext->layers[i].window != 0) m->sliding_window = ext->layers[i].window;
        if (arch->local_rope) ext->layers[i].rope = ext->layers[i].window != 0 ? MODEL_ROPE_LOCAL : MODEL_ROPE_GLOBAL;
    }
    return RMLP_OK;
}

/* One of Gemma 3's RoPE objects as Gemma3TextConfig builds it: rope_parameters' `layer_type`
 * object (absent: default RoPE), updated by `overlay` (rope_scaling, for full attention) where set,
 * and given the top-level partial_rotary_factor it lacks (standardize_rope_params); its rope_theta,
 * else `theta`. */
static rmlp_status gemma3_table(const cfg *c, json_t *params, const char *layer_type, json_t *overlay, double theta,
                                const rmlp_model_config *m, model_rope *out) {
    json_t *given = member(params, layer_type), *partial = cfg_get(c, "partial_rotary_factor");
    char name[64], scope[96];
    snprintf(name, sizeof name, "rope_parameters.%s", layer_type);
    snprintf(scope, sizeof scope, "%s%s.", name, overlay != NULL ? " (with rope_scaling)" : "");
    if (given != NULL && !json_is_object(given)) return cfg_wrong_type(c, name, given, "an object");
    json_t *rope = given != NULL ? json_deep_copy(given) : json_object();
    if (rope == NULL || (overlay != NULL && json_object_update(rope, overlay) != 0) ||
        (partial != NULL && member(rope, "partial_rotary_factor") == NULL &&
         json_object_set(rope, "partial_rotary_factor", partial) != 0)) {
        json_decref(rope);
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, c->fn, "%s: copying %s failed", c->path, scope);
    }
    rmlp_status s = config_rope_object(c, rope, scope, theta, m, false, out);
    json_decref(rope);
    return s;
}

/* Gemma 3's two RoPE tables (Gemma3TextConfig.convert_rope_params_to_dict): rope_parameters per
 * layer type; rope_scaling, when set, updates the full-attention one; a table without rope_theta
 * takes the top-level rope_theta (full attention; absent 1e6) or rope_local_base_freq (sliding
 * layers; absent 1e4). */
static rmlp_status gemma3_rope(const cfg *c, rmlp_model_config *m, model_ext *ext) {
    json_t *params = cfg_get(c, "rope_parameters"), *scaling = cfg_get(c, "rope_scaling");
    if (params != NULL && !json_is_object(params)) return cfg_wrong_type(c, "rope_parameters", params, "an object");
    if (scaling != NULL && !json_is_object(scaling)) return cfg_wrong_type(c, "rope_scaling", scaling, "an object");
    double global, local;
    rmlp_status s;
    if ((s = cfg_positive(c, "rope_theta", 0, 1e6, &global)) != RMLP_OK ||
        (s = cfg_positive(c, "rope_local_base_freq", 0, 1e4, &local)) != RMLP_OK ||
        (s = gemma3_table(c, params, "full_attention", scaling, global, m, &ext->rope[MODEL_ROPE_GLOBAL])) != RMLP_OK ||
        (s = gemma3_table(c, params, "sliding_attention", NULL, local, m, &ext->rope[MODEL_ROPE_LOCAL])) != RMLP_OK)
        return s;
    m->rope_theta = ext->rope[MODEL_ROPE_GLOBAL].theta;
    return RMLP_OK;
}

/* Gemma 2 and 3's attention (their Attention modules): scores scaled by query_pre_attn_scalar^-0.5
 * (default 256) in every layer, capped by attn_logit_softcapping where the architecture applies it
 * (Gemma 2; default 50, null none), each layer's window, and Gemma 3's tables. */
static rmlp_status attention(const cfg *c, rmlp_model_config *m, const arch_info *arch, model_ext *ext) {
    double scalar, softcap = 0.0;
    bool softcap_absent = json_object_get(c->root, "attn_logit_softcapping") == NULL;
    rmlp_status s = cfg_positive(c, "query_pre_attn_scalar", 0, 256.0, &scalar);
    if (s == RMLP_OK && arch->attn_softcap_default != 0.0)
        s = cfg_positive(c, "attn_logit_softcapping", 0, softcap_absent ? arch->attn_softcap_default : 0.0, &softcap);
    if (s == RMLP_OK) s = windows(c, m, arch, ext);
    if (s == RMLP_OK && arch->local_rope) s = gemma3_rope(c, m, ext);
    if (s != RMLP_OK) return s;
    m->query_pre_attn_scalar = scalar, m->attn_logit_softcapping = softcap;
    for (uint32_t i = 0; i < m->num_hidden_layers; i++) {
        ext->layers[i].scale = model_ext_scale(m);
        ext->layers[i].softcap = (float)softcap;
    }
    model_ext_summarize(ext);
    return RMLP_OK;
}

rmlp_status config_gemma(const cfg *c, rmlp_model_config *m, const arch_info *arch, model_ext *ext) {
    bool bidirectional = false;
    rmlp_status s;
    if (config_keys_read_by("use_bidirectional_attention", arch) &&
        (s = cfg_bool(c, "use_bidirectional_attention", false, &bidirectional)) != RMLP_OK)
        return s;
    if (bidirectional)
        return rmlp_fail(RMLP_ERR_MODEL, c->fn, "%s: use_bidirectional_attention is true: transformers' %s then "
                         "attends in both directions (an embedder such as EmbeddingGemma), and only causal decoders "
                         "are supported (a token's state must not depend on later tokens)", c->path, arch->model_type);
    if (config_keys_read_by("final_logit_softcapping", arch)) { /* null: none; absent: the default (Gemma 2: 30) */
        bool absent = json_object_get(c->root, "final_logit_softcapping") == NULL;
        if ((s = cfg_positive(c, "final_logit_softcapping", 0, absent ? arch->final_softcap_default : 0.0,
                              &m->final_logit_softcapping)) != RMLP_OK)
            return s;
    }
    return arch->windows == ARCH_WINDOWS_LAYER_TYPES ? attention(c, m, arch, ext) : RMLP_OK;
}
