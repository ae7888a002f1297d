/*
 * config_attention.c: config_attention.h's reading of sliding windows and RoPE. The rules are
 * transformers 5.23's (its config classes' __post_init__, masking_utils' sliding-window mask,
 * modeling_rope_utils' standardisation), each cited where it is applied.
 */
#include "config_attention.h"

#include <math.h>
#include <string.h>

#include "common/status.h"
#include "rope_scaling.h"

/* ---- windows --------------------------------------------------------------------------------- */

rmlp_status config_layer_types(const cfg *c, const json_t *types, const rmlp_model_config *m, uint32_t window,
                               model_ext *ext) {
    if (!json_is_array(types)) return cfg_wrong_type(c, "layer_types", types, "an array");
    if (json_array_size(types) != m->num_hidden_layers)
        return rmlp_fail(RMLP_ERR_MODEL, c->fn, "%s: layer_types has %zu entries but num_hidden_layers is %u", c->path,
                         json_array_size(types), m->num_hidden_layers);
    for (size_t i = 0; i < json_array_size(types); i++) {
        const char *type = json_string_value(json_array_get(types, i));
        /* "attention": transformers' older name (remap_legacy_layer_types) */
        if (type != NULL && (strcmp(type, "full_attention") == 0 || strcmp(type, "attention") == 0)) {
            ext->layers[i].window = 0;
        } else if (type != NULL && strcmp(type, "sliding_attention") == 0) {
            if (window == 0)
                return rmlp_fail(RMLP_ERR_MODEL, c->fn, "%s: layer_types[%zu] is \"sliding_attention\" but the config "
                                 "has no sliding_window (null, or use_sliding_window false): transformers cannot "
                                 "build its mask either", c->path, i);
            ext->layers[i].window = window;
        } else {
            return rmlp_fail(RMLP_ERR_MODEL, c->fn, "%s: layer_types[%zu] is not \"full_attention\" or "
                             "\"sliding_attention\" (other kinds of layer are not supported)", c->path, i);
        }
    }
    return RMLP_OK;
}

/* sliding_window as transformers' config holds it: absent, its default 4096; null, none (0). */
static rmlp_status sliding_window(const cfg *c, uint32_t *window) {
    bool null = json_is_null(json_object_get(c->root, "sliding_window"));
    rmlp_status s = cfg_u32(c, "sliding_window", 0, 4096, window);
    if (null) *window = 0;
    return s;
}

/* A count that may be 0 (max_window_layers: 0 slides every layer); `fallback` when absent. */
static rmlp_status get_count(const cfg *c, const char *key, uint32_t fallback, uint32_t *out) {
    const json_t *value = cfg_get(c, key);
    *out = fallback;
    if (value == NULL) return RMLP_OK;
    if (!json_is_integer(value)) return cfg_wrong_type(c, key, value, "an integer");
    if (json_integer_value(value) < 0 || json_integer_value(value) > (json_int_t)UINT32_MAX)
        return rmlp_fail(RMLP_ERR_FORMAT, c->fn, "%s: '%s' = %lld is not between 0 and 2^32-1", c->path, key,
                         (long long)json_integer_value(value));
    *out = (uint32_t)json_integer_value(value);
    return RMLP_OK;
}

/* Each layer's window, by the architecture's kind (arch.h):
 *  - per layer (Qwen2, Qwen3: their __post_init__): the window is sliding_window when
 *    use_sliding_window is true, else none; layer_types, when given, names each layer's kind, else
 *    layer i slides when there is a window and i >= max_window_layers (default 28; read only when
 *    there is a window);
 *  - every layer (Mistral): sliding_window (absent: 4096; null: none) in every layer, as its model
 *    masks whenever config.sliding_window is set; use_sliding_window, which it does not read,
 *    refused when true, and layer_types (which it ignores, with a warning) only all full;
 *  - none (Llama): sliding_window refused (refused_settings in config.c), use_sliding_window true
 *    refused, layer_types only all full. */
static rmlp_status windows(const cfg *c, rmlp_model_config *m, const arch_info *arch, model_ext *ext) {
    const json_t *types = cfg_get(c, "layer_types");
    bool use_sliding;
    uint32_t window = 0, max_window_layers;
    rmlp_status s = cfg_bool(c, "use_sliding_window", false, &use_sliding);
    if (s != RMLP_OK) return s;
    if (use_sliding && arch->windows != ARCH_WINDOWS_PER_LAYER)
        return rmlp_fail(RMLP_ERR_MODEL, c->fn, "%s: use_sliding_window true is not supported: transformers' %s does "
                         "not read it (its windows follow sliding_window alone)", c->path, arch->model_type);
    if (arch->windows == ARCH_WINDOWS_ALL || (arch->windows == ARCH_WINDOWS_PER_LAYER && use_sliding))
        if ((s = sliding_window(c, &window)) != RMLP_OK) return s;
    for (size_t i = 0; types != NULL && arch->windows != ARCH_WINDOWS_PER_LAYER && i < json_array_size(types); i++) {
        const char *type = json_string_value(json_array_get(types, i));
        if (type != NULL && strcmp(type, "sliding_attention") == 0)
            return rmlp_fail(RMLP_ERR_MODEL, c->fn, "%s: layer_types[%zu] is \"sliding_attention\", which "
                             "transformers' %s ignores (its windows follow sliding_window alone): refused as a "
                             "config whose layers cannot be told", c->path, i, arch->model_type);
    }
    if (types != NULL) { /* only the per-layer kind slides by layer_types */
        s = config_layer_types(c, types, m, arch->windows == ARCH_WINDOWS_PER_LAYER ? window : 0, ext);
        if (s != RMLP_OK) return s;
    } else if (arch->windows == ARCH_WINDOWS_PER_LAYER && window != 0) { /* read only then, as transformers */
        if ((s = get_count(c, "max_window_layers", 28, &max_window_layers)) != RMLP_OK) return s;
        for (uint32_t i = 0; i < m->num_hidden_layers; i++) ext->layers[i].window = i >= max_window_layers ? window : 0;
    }
    if (arch->windows == ARCH_WINDOWS_ALL)
        for (uint32_t i = 0; i < m->num_hidden_layers; i++) ext->layers[i].window = window;
    m->sliding_window = 0;
    for (uint32_t i = 0; i < m->num_hidden_layers; i++)
        if (ext->layers[i].window != 0) m->sliding_window = ext->layers[i].window;
    return RMLP_OK;
}

/* ---- RoPE ------------------------------------------------------------------------------------ */

/* A number (any sign) into *out; `fallback` when absent or null. */
static rmlp_status get_number(const cfg *c, const char *key, double fallback, double *out) {
    const json_t *value = cfg_get(c, key);
    *out = fallback;
    if (value == NULL) return RMLP_OK;
    if (!json_is_number(value)) return cfg_wrong_type(c, key, value, "a number");
    *out = json_number_value(value);
    return RMLP_OK;
}

/* original_max_position_embeddings of llama3 and yarn: transformers' standardisation puts the
 * config's top-level one first (a flat object), then the object's, then max_position_embeddings. */
static rmlp_status original_max(const cfg *c, const cfg *sub, const rmlp_model_config *m, bool top_level,
                                double *out) {
    rmlp_status s = cfg_positive(sub, "original_max_position_embeddings", 0, m->max_position_embeddings, out);
    if (s == RMLP_OK && top_level) s = cfg_positive(c, "original_max_position_embeddings", 0, *out, out);
    return s;
}

/* yarn's optional keys (the required ones are read by the caller). */
static rmlp_status yarn_keys(const cfg *sub, rope_spec *r) {
    rmlp_status s;
    r->has_attention_factor = cfg_get(sub, "attention_factor") != NULL;
    if ((s = cfg_positive(sub, "attention_factor", 0, 1.0, &r->attention_factor)) != RMLP_OK ||
        (s = get_number(sub, "mscale", 0.0, &r->mscale)) != RMLP_OK ||
        (s = get_number(sub, "mscale_all_dim", 0.0, &r->mscale_all_dim)) != RMLP_OK ||
        (s = get_number(sub, "beta_fast", 32.0, &r->beta_fast)) != RMLP_OK ||
        (s = get_number(sub, "beta_slow", 1.0, &r->beta_slow)) != RMLP_OK ||
        (s = cfg_bool(sub, "truncate", true, &r->truncate)) != RMLP_OK)
        return s;
    if (r->beta_fast == 0) r->beta_fast = 32; /* `beta_fast or 32` */
    if (r->beta_slow == 0) r->beta_slow = 1;
    return RMLP_OK;
}

rmlp_status config_rope_object(const cfg *c, json_t *rope, const char *scope, double theta,
                               const rmlp_model_config *m, bool top_level, model_rope *out) {
    static const struct {
        const char *name;
        rope_kind kind;
    } kinds[] = {{"default", ROPE_DEFAULT}, {"linear", ROPE_LINEAR}, {"llama3", ROPE_LLAMA3}, {"yarn", ROPE_YARN}};
    rope_spec r = {.kind = ROPE_DEFAULT, .theta = theta};
    const cfg sub = {c->fn, c->path, rope, scope};
    const char *type = NULL, *key = "rope_type";
    rmlp_status s = RMLP_OK;
    if (rope != NULL) {
        key = cfg_get(&sub, "rope_type") != NULL ? "rope_type" : "type"; /* rope_type first, as transformers */
        if ((s = cfg_string(&sub, key, 0, &type)) != RMLP_OK ||
            (s = cfg_positive(&sub, "rope_theta", 0, theta, &r.theta)) != RMLP_OK)
            return s;
    }
    size_t k = 0, n = sizeof kinds / sizeof kinds[0];
    while (type != NULL && k < n && strcmp(type, kinds[k].name) != 0) k++;
    if (type != NULL && (strcmp(type, "dynamic") == 0 || strcmp(type, "longrope") == 0))
        return rmlp_fail(RMLP_ERR_MODEL, c->fn, "%s: %s%s '%s' is not supported: its frequencies depend on the "
                         "sequence's length, so sequences of different lengths sharing a prefix would rotate it "
                         "differently and no row could be shared exactly", c->path, scope, key, type);
    if (k == n)
        return rmlp_fail(RMLP_ERR_MODEL, c->fn, "%s: %s%s '%s' is not supported (default, linear, llama3 and yarn are)",
                         c->path, scope, key, type);
    r.kind = kinds[k].kind;
    if (r.kind != ROPE_DEFAULT) {
        double partial = 1.0; /* transformers rotates int(head_dim * partial_rotary_factor) dims then */
        if ((s = cfg_positive(&sub, "partial_rotary_factor", 0, 1.0, &partial)) != RMLP_OK ||
            (top_level && cfg_get(&sub, "partial_rotary_factor") == NULL &&
             (s = cfg_positive(c, "partial_rotary_factor", 0, 1.0, &partial)) != RMLP_OK))
            return s;
        if (floor(m->head_dim * partial) != m->head_dim)
            return rmlp_fail(RMLP_ERR_MODEL, c->fn, "%s: partial_rotary_factor %g with %s%s '%s': RoPE on part of a "
                             "head is not supported", c->path, partial, scope, key, type);
        if ((s = cfg_positive(&sub, "factor", 1, 0, &r.factor)) != RMLP_OK) return s;
    }
    if (r.kind == ROPE_LLAMA3 && ((s = cfg_positive(&sub, "low_freq_factor", 1, 0, &r.low_freq_factor)) != RMLP_OK ||
                                  (s = cfg_positive(&sub, "high_freq_factor", 1, 0, &r.high_freq_factor)) != RMLP_OK))
        return s;
    if ((r.kind == ROPE_LLAMA3 || r.kind == ROPE_YARN) &&
        (s = original_max(c, &sub, m, top_level, &r.original_max)) != RMLP_OK)
        return s;
    if (r.kind == ROPE_YARN && (s = yarn_keys(&sub, &r)) != RMLP_OK) return s;
    rope_scaling_frequencies(&r, m->head_dim, out->inv_freq, &out->attention_factor);
    out->theta = r.theta;
    return RMLP_OK;
}

/* The RoPE of config.json, as transformers 5.23 standardises it: rope_scaling when set and not empty,
 * else rope_parameters (`rope_scaling or rope_parameters`), flat, its rope_theta else the top-level
 * rope_theta else 10000. Parameters per layer type (an object inside) are refused: these
 * architectures' rotary embedding reads one flat object. */
static rmlp_status rope(const cfg *c, rmlp_model_config *m, model_ext *ext) {
    json_t *scaling = cfg_get(c, "rope_scaling"), *params = cfg_get(c, "rope_parameters");
    if (scaling != NULL && !json_is_object(scaling)) return cfg_wrong_type(c, "rope_scaling", scaling, "an object");
    if (params != NULL && !json_is_object(params)) return cfg_wrong_type(c, "rope_parameters", params, "an object");
    bool from_scaling = scaling != NULL && json_object_size(scaling) > 0;
    json_t *object = from_scaling ? scaling : params;
    const char *scope = from_scaling ? "rope_scaling." : "rope_parameters.", *name;
    json_t *value;
    json_object_foreach(object, name, value)
        if (json_is_object(value))
            return rmlp_fail(RMLP_ERR_MODEL, c->fn, "%s: %s%s is an object: RoPE parameters per layer type are not "
                             "supported for this architecture", c->path, scope, name);
    rmlp_status s = config_rope_object(c, object, scope, m->rope_theta, m, true, &ext->rope[MODEL_ROPE_GLOBAL]);
    if (s != RMLP_OK) return s;
    m->rope_theta = ext->rope[MODEL_ROPE_GLOBAL].theta;
    for (uint32_t i = 0; i < m->num_hidden_layers; i++) ext->layers[i].rope = MODEL_ROPE_GLOBAL;
    return RMLP_OK;
}

rmlp_status config_attention(const cfg *c, rmlp_model_config *m, const arch_info *arch, model_ext *ext) {
    /* windows by layer type and RoPE per layer type (Gemma 2 and 3): config_gemma.c */
    rmlp_status s = arch->local_rope ? RMLP_OK : rope(c, m, ext);
    if (s == RMLP_OK && arch->windows != ARCH_WINDOWS_LAYER_TYPES) s = windows(c, m, arch, ext);
    if (s == RMLP_OK) model_ext_summarize(ext);
    return s;
}
