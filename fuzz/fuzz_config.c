/*
 * fuzz_config.c: libFuzzer target for the config.json reader (model/config.h, internal to the
 * library). The input is written to one fixed file per process under $TMPDIR and read with
 * config_read_reported. The same bytes are also read here with jansson and judged by an independent
 * statement of the rules config.c documents (its header comment and config.h: required keys,
 * null meaning absent (but hidden_act null refused), types, ranges, defaults, refused features), so
 * in both directions:
 *  - config_read succeeds exactly when the oracle accepts, and then every field is the one the
 *    JSON gives (or its documented default): sizes >= 1, num_key_value_heads dividing
 *    num_attention_heads, head_dim given or hidden_size / num_attention_heads (which must then
 *    divide), rms_norm_eps and rope_theta > 0, and what the architecture's row of model/arch.h
 *    says (the oracle reads its facts, not config.c's use of them): qk_norm exactly where the row
 *    has it (Qwen3), the biases transformers builds (q/k/v always for Qwen2; q/k/v and o_proj
 *    from attention_bias for Llama and Qwen3; gate/up/down from mlp_bias for Llama; none for
 *    Mistral), tie_word_embeddings' default, each layer's window (windows_ok below: Qwen2 and Qwen3
 *    by layer_types, or use_sliding_window, sliding_window and max_window_layers; Mistral's
 *    sliding_window in every layer, 4096 when absent; Llama none, sliding_window refused) and
 *    sliding_window the sliding layers' window, the RoPE (rope_ok below: rope_scaling, else
 *    rope_parameters, of the kinds default, linear, llama3 and yarn with the keys each needs, no
 *    object in it), every layer's model_ext entry (config_read_reported) as the oracle expects;
 *    is_causal not false; attention_chunk_size, kv_sharing_modes, per_layer_config and the
 *    sub-configs text_config, decoder, generator not given; at most MODEL_MAX_LAYERS layers and
 *    heads of MODEL_MAX_HEAD_DIM; the activation by the row's key (hidden_act, or hidden_activation),
 *    one of silu, gelu and gelu_pytorch_tanh; the Gemma family's keys (gemma_ok below:
 *    use_bidirectional_attention not true, final_logit_softcapping, Gemma 2 and 3's query scale,
 *    attention soft-cap, windows by layer type and Gemma 3's RoPE per layer type), norm forms and
 *    embedding scale;
 *  - a failure returns FORMAT (not JSON, not an object, a wrong type or range) or MODEL (a
 *    missing or unsupported key; only for a JSON object), never IO or OUT_OF_MEMORY (the file
 *    was just written, inputs are small), with a message "rmlp_model_load: <the file>: ..." and
 *    a zeroed config.
 * A violation prints what broke and aborts, which libFuzzer saves as a crash.
 */
#define _POSIX_C_SOURCE 200809L

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "model/arch.h"
#include "model/config.h"
#include "model/model_ext.h"
#include "harness.h"
#include "radix_mlp.h"

static void violation(const char *what, const char *detail) { fuzz_violation("fuzz_config", what, detail); }

/* ---- the oracle: what config.c documents it accepts, written from the documentation ---------- */

/* A key's value; NULL when absent or JSON null (both mean "not given"). */
static json_t *given(json_t *object, const char *key) {
    json_t *value = json_object_get(object, key);
    return json_is_null(value) ? NULL : value;
}

/* An integer in 1..2^32-1 into *out (fallback when not given, a failure when required). */
static int size_ok(json_t *root, const char *key, int required, uint32_t fallback, uint32_t *out) {
    json_t *value = given(root, key);
    *out = fallback;
    if (value == NULL) return !required;
    if (!json_is_integer(value) || json_integer_value(value) < 1 || json_integer_value(value) > (json_int_t)UINT32_MAX)
        return 0;
    *out = (uint32_t)json_integer_value(value);
    return 1;
}

static int positive_ok(json_t *object, const char *key, int required, double fallback, double *out) {
    json_t *value = given(object, key);
    *out = fallback;
    if (value == NULL) return !required;
    if (!json_is_number(value) || !(json_number_value(value) > 0)) return 0;
    *out = json_number_value(value);
    return 1;
}

static int bool_ok(json_t *root, const char *key, bool fallback, bool *out) {
    json_t *value = given(root, key);
    *out = fallback;
    if (value == NULL) return 1;
    if (!json_is_boolean(value)) return 0;
    *out = json_is_true(value);
    return 1;
}

/* The windows the oracle expects of each layer (want_windows[0 .. num_hidden_layers)). */
static uint32_t want_windows[MODEL_MAX_LAYERS];

/* A number of any sign, when given. */
static int number_ok(json_t *object, const char *key) {
    json_t *value = given(object, key);
    return value == NULL || json_is_number(value);
}

/* One flat RoPE object (NULL: default RoPE of theta): its type (rope_type, else type; absent:
 * default) one of default, linear, llama3, yarn; rope_theta positive (absent: theta) into *out; the
 * scaled kinds rotate whole heads (partial_rotary_factor, the object's else the top-level one, leaves
 * int(head_dim * it) = head_dim) and have a positive factor; llama3 positive low_freq_factor and
 * high_freq_factor; llama3 and yarn a positive original_max_position_embeddings where given (in the
 * object, and at the top level when top_level); yarn a positive attention_factor, numbers for
 * mscale, mscale_all_dim, beta_fast and beta_slow, a boolean truncate, where given. */
static int rope_object_ok(json_t *root, json_t *rope, bool top_level, const rmlp_model_config *want, double theta,
                          double *out) {
    *out = theta;
    if (rope == NULL) return 1;
    const char *type_key = given(rope, "rope_type") ? "rope_type" : "type";
    json_t *type = given(rope, type_key);
    if (!positive_ok(rope, "rope_theta", 0, theta, out)) return 0;
    if (type != NULL && !json_is_string(type)) return 0;
    const char *kind = type != NULL ? json_string_value(type) : "default";
    bool llama3 = strcmp(kind, "llama3") == 0, yarn = strcmp(kind, "yarn") == 0;
    if (strcmp(kind, "default") == 0) return 1;
    if (strcmp(kind, "linear") != 0 && !llama3 && !yarn) return 0;
    double partial, x;
    if (!positive_ok(rope, "partial_rotary_factor", 0, 1.0, &partial)) return 0;
    if (given(rope, "partial_rotary_factor") == NULL && !positive_ok(root, "partial_rotary_factor", 0, 1.0, &partial))
        return 0;
    if (floor(want->head_dim * partial) != want->head_dim || !positive_ok(rope, "factor", 1, 0, &x)) return 0;
    if (llama3 && (!positive_ok(rope, "low_freq_factor", 1, 0, &x) || !positive_ok(rope, "high_freq_factor", 1, 0, &x)))
        return 0;
    if ((llama3 || yarn) && (!positive_ok(rope, "original_max_position_embeddings", 0, 1, &x) ||
                             (top_level && !positive_ok(root, "original_max_position_embeddings", 0, 1, &x))))
        return 0;
    bool truncate;
    return !yarn || (positive_ok(rope, "attention_factor", 0, 1, &x) && number_ok(rope, "mscale") &&
                     number_ok(rope, "mscale_all_dim") && number_ok(rope, "beta_fast") &&
                     number_ok(rope, "beta_slow") && bool_ok(rope, "truncate", true, &truncate));
}

/* RoPE: rope_scaling when given and not empty, else rope_parameters (each an object when given),
 * flat (no object inside), as rope_object_ok with the top-level rope_theta. */
static int rope_ok(json_t *root, rmlp_model_config *want) {
    json_t *scaling = given(root, "rope_scaling"), *params = given(root, "rope_parameters");
    if ((scaling != NULL && !json_is_object(scaling)) || (params != NULL && !json_is_object(params))) return 0;
    json_t *rope = scaling != NULL && json_object_size(scaling) > 0 ? scaling : params;
    const char *sub;
    json_t *value;
    json_object_foreach(rope, sub, value)
        if (json_is_object(value)) return 0; /* parameters per layer type */
    return rope_object_ok(root, rope, true, want, want->rope_theta, &want->rope_theta);
}

/* Gemma 3's two tables: rope_parameters (an object when given) holds one object per layer type
 * (full_attention, sliding_attention; absent or null: default RoPE); rope_scaling (an object when
 * given) updates the full-attention one; each as rope_object_ok with the top-level rope_theta
 * (absent 1e6) for full attention, rope_local_base_freq (absent 1e4) for the sliding layers. */
static double want_local_theta;

static int gemma3_rope_ok(json_t *root, rmlp_model_config *want) {
    json_t *scaling = given(root, "rope_scaling"), *params = given(root, "rope_parameters");
    if ((scaling != NULL && !json_is_object(scaling)) || (params != NULL && !json_is_object(params))) return 0;
    json_t *full = params != NULL ? given(params, "full_attention") : NULL;
    json_t *local = params != NULL ? given(params, "sliding_attention") : NULL;
    if ((full != NULL && !json_is_object(full)) || (local != NULL && !json_is_object(local))) return 0;
    double global_default, local_default;
    if (!positive_ok(root, "rope_theta", 0, 1e6, &global_default) ||
        !positive_ok(root, "rope_local_base_freq", 0, 1e4, &local_default))
        return 0;
    json_t *merged = full;
    if (scaling != NULL) {
        merged = full != NULL ? json_deep_copy(full) : json_object();
        json_object_update(merged, scaling);
    }
    int ok = rope_object_ok(root, merged, false, want, global_default, &want->rope_theta) &&
             rope_object_ok(root, local, false, want, local_default, &want_local_theta);
    if (merged != full) json_decref(merged);
    return ok;
}

/* Windows (want_windows, want->sliding_window: the sliding layers' window, 0 when none): the
 * window is sliding_window (an integer >= 1; absent: 4096; null: none) for Mistral (every layer)
 * and for Qwen2/Qwen3 when use_sliding_window is true (a boolean; true refused elsewhere), else
 * none; Llama refuses sliding_window (below). layer_types (one string per layer: full_attention,
 * attention, or sliding_attention, which needs a window, and slides only Qwen's layers: refused
 * elsewhere) sets Qwen's layers; without it Qwen's layer i slides when there is a window and
 * i >= max_window_layers (an integer >= 0, default 28, read only when there is a window). */
static int windows_ok(json_t *root, const arch_info *arch, rmlp_model_config *want) {
    bool use_sliding, per_layer = arch->windows == ARCH_WINDOWS_PER_LAYER;
    uint32_t window = 0, n = want->num_hidden_layers;
    if (!bool_ok(root, "use_sliding_window", false, &use_sliding) || (use_sliding && !per_layer)) return 0;
    if (arch->windows == ARCH_WINDOWS_ALL || (per_layer && use_sliding)) {
        if (!size_ok(root, "sliding_window", 0, 4096, &window)) return 0;
        if (json_is_null(json_object_get(root, "sliding_window"))) window = 0;
    }
    json_t *layers = given(root, "layer_types");
    for (uint32_t i = 0; i < n; i++) want_windows[i] = arch->windows == ARCH_WINDOWS_ALL ? window : 0;
    if (layers != NULL) {
        if (!json_is_array(layers) || json_array_size(layers) != n) return 0;
        for (size_t i = 0; i < n; i++) {
            const char *kind = json_string_value(json_array_get(layers, i));
            if (kind == NULL) return 0;
            if (strcmp(kind, "sliding_attention") == 0 && per_layer && window != 0) want_windows[i] = window;
            else if (strcmp(kind, "full_attention") != 0 && strcmp(kind, "attention") != 0) return 0;
        }
    } else if (per_layer && window != 0) {
        json_t *max = given(root, "max_window_layers");
        json_int_t from = max == NULL ? 28 : json_is_integer(max) ? json_integer_value(max) : -1;
        if (from < 0 || from > (json_int_t)UINT32_MAX) return 0;
        for (uint32_t i = 0; i < n; i++) want_windows[i] = i >= from ? window : 0;
    }
    want->sliding_window = 0;
    for (uint32_t i = 0; i < n; i++)
        if (want_windows[i] != 0) want->sliding_window = want_windows[i];
    return 1;
}

/* The MLP's activation, named by the row's key (hidden_act; Gemma 2 and 3: hidden_activation):
 * absent, the row's default; null refused; silu, gelu_pytorch_tanh, gelu (Gemma's the tanh form,
 * GemmaConfig's rewrite); and the Gemma family's
 * own keys: use_bidirectional_attention true refused, final_logit_softcapping (Gemma 2 and 3: null
 * none, absent the row's default), the row's norm forms and sqrt(hidden_size) embedding scale. */
static float want_scale, want_softcap_f;
static double want_softcap;

static int gemma_ok(json_t *root, const arch_info *arch, rmlp_model_config *want) {
    static const char *const names[] = {"silu", "gelu_pytorch_tanh", "gelu"};
    static const rmlp_activation ids[] = {RMLP_ACTIVATION_SILU, RMLP_ACTIVATION_GELU_TANH, RMLP_ACTIVATION_GELU};
    json_t *act = json_object_get(root, arch->activation_key);
    if (json_is_null(act)) return 0; /* null is not absent here */
    want->activation = arch->activation_default;
    if (act != NULL) {
        size_t i = 0;
        while (i < 3 && !(json_is_string(act) && strcmp(json_string_value(act), names[i]) == 0)) i++;
        if (i == 3) return 0;
        want->activation = ids[i];
        if (strcmp(arch->model_type, "gemma") == 0 && i == 2) want->activation = RMLP_ACTIVATION_GELU_TANH;
    }
    want->norm_weight_plus_one = arch->norm_plus_one;
    want->sandwich_norms = arch->sandwich_norms;
    want->embedding_scale = arch->embed_scaled ? sqrt((double)want->hidden_size) : 0.0;
    const char *type = arch->model_type;
    bool gemma = strcmp(type, "gemma") == 0, later = strcmp(type, "gemma2") == 0 || strcmp(type, "gemma3_text") == 0;
    bool bidirectional;
    if ((gemma || later) && (!bool_ok(root, "use_bidirectional_attention", false, &bidirectional) || bidirectional))
        return 0;
    if (!later) return 1;
    json_t *cap = json_object_get(root, "final_logit_softcapping");
    if (!positive_ok(root, "final_logit_softcapping", 0, cap == NULL ? arch->final_softcap_default : 0.0,
                     &want->final_logit_softcapping))
        return 0;
    /* every layer's scale query_pre_attn_scalar^-0.5 (default 256); Gemma 2's soft-cap
     * attn_logit_softcapping (default 50, null none; Gemma 3 does not apply it) */
    double scalar;
    json_t *attn_cap = json_object_get(root, "attn_logit_softcapping");
    want_softcap = 0.0;
    if (!positive_ok(root, "query_pre_attn_scalar", 0, 256.0, &scalar)) return 0;
    want_scale = (float)pow(scalar, -0.5);
    want->query_pre_attn_scalar = scalar;
    if (strcmp(type, "gemma2") == 0 &&
        !positive_ok(root, "attn_logit_softcapping", 0, attn_cap == NULL ? 50.0 : 0.0, &want_softcap))
        return 0;
    want->attn_logit_softcapping = want_softcap;
    return 1;
}

/* Gemma 2 and 3's windows (want_windows, want_local): sliding_window (absent 4096, null none);
 * layer_types (one string per layer: full_attention or attention, or sliding_attention, which needs
 * a window), else layer i slides unless i + 1 is a multiple of the pattern (Gemma 2: 2; Gemma 3:
 * sliding_window_pattern, an integer >= 1, default 6), a sliding layer needing a window; Gemma 3's
 * sliding layers rotate by the local table. */
static int gemma_windows_ok(json_t *root, const arch_info *arch, rmlp_model_config *want) {
    uint32_t window, pattern = strcmp(arch->model_type, "gemma2") == 0 ? 2 : 6, n = want->num_hidden_layers;
    if (!size_ok(root, "sliding_window", 0, 4096, &window)) return 0;
    if (json_is_null(json_object_get(root, "sliding_window"))) window = 0;
    json_t *layers = given(root, "layer_types");
    if (layers != NULL) {
        if (!json_is_array(layers) || json_array_size(layers) != n) return 0;
        for (size_t i = 0; i < n; i++) {
            const char *kind = json_string_value(json_array_get(layers, i));
            if (kind == NULL) return 0;
            bool slides = strcmp(kind, "sliding_attention") == 0;
            if (!slides && strcmp(kind, "full_attention") != 0 && strcmp(kind, "attention") != 0) return 0;
            if (slides && window == 0) return 0;
            want_windows[i] = slides ? window : 0;
        }
    } else {
        if (strcmp(arch->model_type, "gemma3_text") == 0 && !size_ok(root, "sliding_window_pattern", 0, 6, &pattern))
            return 0;
        for (uint32_t i = 0; i < n; i++) {
            bool slides = (i + 1) % pattern != 0;
            if (slides && window == 0) return 0;
            want_windows[i] = slides ? window : 0;
        }
    }
    want->sliding_window = 0;
    for (uint32_t i = 0; i < n; i++)
        if (want_windows[i] != 0) want->sliding_window = want_windows[i];
    return 1;
}

/* 1 and the config the oracle expects in *want when root is a config the reader must accept. */
static int oracle(json_t *root, rmlp_model_config *want) {
    memset(want, 0, sizeof *want);
    json_t *type = given(root, "model_type");
    if (!json_is_string(type)) return 0;
    const arch_info *arch = arch_by_model_type(json_string_value(type));
    if (arch == NULL) return 0;
    want->architecture = arch->id;
    if (!size_ok(root, "vocab_size", 1, 0, &want->vocab_size) || !size_ok(root, "hidden_size", 1, 0, &want->hidden_size) ||
        !size_ok(root, "intermediate_size", 1, 0, &want->intermediate_size) ||
        !size_ok(root, "num_hidden_layers", 1, 0, &want->num_hidden_layers) ||
        !size_ok(root, "num_attention_heads", 1, 0, &want->num_attention_heads) ||
        !size_ok(root, "max_position_embeddings", 1, 0, &want->max_position_embeddings) ||
        !size_ok(root, "num_key_value_heads", 0, want->num_attention_heads, &want->num_key_value_heads))
        return 0;
    if (want->num_attention_heads % want->num_key_value_heads != 0) return 0;
    if (given(root, "head_dim") == NULL && want->hidden_size % want->num_attention_heads != 0) return 0;
    if (!size_ok(root, "head_dim", 0, want->hidden_size / want->num_attention_heads, &want->head_dim)) return 0;
    bool attention_bias, mlp_bias;
    if (!positive_ok(root, "rms_norm_eps", 1, 0, &want->rms_norm_eps) ||
        !positive_ok(root, "rope_theta", 0, 10000.0, &want->rope_theta) ||
        !bool_ok(root, "tie_word_embeddings", arch->tied_default, &want->tie_word_embeddings) ||
        !bool_ok(root, "attention_bias", false, &attention_bias) || !bool_ok(root, "mlp_bias", false, &mlp_bias))
        return 0;
    want->attention_bias = arch->qkv_bias || (arch->reads_attention_bias && attention_bias);
    want->o_proj_bias = arch->reads_attention_bias && attention_bias;
    want->mlp_bias = arch->reads_mlp_bias && mlp_bias;
    want->qk_norm = arch->qk_norm;
    if (want->num_hidden_layers > MODEL_MAX_LAYERS || want->head_dim > MODEL_MAX_HEAD_DIM) return 0;
    bool by_type = arch->windows == ARCH_WINDOWS_LAYER_TYPES, local = strcmp(arch->model_type, "gemma3_text") == 0;
    want_scale = 1.0f / sqrtf((float)want->head_dim), want_softcap = 0.0, want_local_theta = 0.0;
    if (!(local ? gemma3_rope_ok(root, want) : rope_ok(root, want)) ||
        !(by_type ? gemma_windows_ok(root, arch, want) : windows_ok(root, arch, want)))
        return 0;
    static const char *const unsupported[] = {"attention_chunk_size", "kv_sharing_modes", "per_layer_config",
                                              "text_config", "decoder", "generator"};
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++)
        if (given(root, unsupported[i]) != NULL) return 0;
    bool causal;
    if (!bool_ok(root, "is_causal", true, &causal) || !causal) return 0;
    if (arch->windows == ARCH_WINDOWS_NONE && given(root, "sliding_window") != NULL) return 0;
    if (!gemma_ok(root, arch, want)) return 0;
    want_softcap_f = (float)want_softcap;
    return 1;
}

static void describe(char *buf, size_t len, const rmlp_model_config *c) {
    snprintf(buf, len,
             "arch %d vocab %u hidden %u inter %u layers %u heads %u kv %u head_dim %u max_pos %u window %u "
             "eps %.17g theta %.17g tie %d bias %d qk_norm %d lm_head %d o_bias %d mlp_bias %d norm+1 %d sandwich %d "
             "act %d embed_scale %.17g final_softcap %.17g qpas %.17g attn_softcap %.17g",
             (int)c->architecture, c->vocab_size, c->hidden_size, c->intermediate_size, c->num_hidden_layers,
             c->num_attention_heads, c->num_key_value_heads, c->head_dim, c->max_position_embeddings,
             c->sliding_window, c->rms_norm_eps, c->rope_theta, (int)c->tie_word_embeddings, (int)c->attention_bias,
             (int)c->qk_norm, (int)c->has_lm_head, (int)c->o_proj_bias, (int)c->mlp_bias,
             (int)c->norm_weight_plus_one, (int)c->sandwich_norms, (int)c->activation, c->embedding_scale,
             c->final_logit_softcapping, c->query_pre_attn_scalar, c->attn_logit_softcapping);
}

static int same_config(const rmlp_model_config *a, const rmlp_model_config *b) {
    return a->architecture == b->architecture && a->vocab_size == b->vocab_size && a->hidden_size == b->hidden_size &&
           a->intermediate_size == b->intermediate_size && a->num_hidden_layers == b->num_hidden_layers &&
           a->num_attention_heads == b->num_attention_heads && a->num_key_value_heads == b->num_key_value_heads &&
           a->head_dim == b->head_dim && a->max_position_embeddings == b->max_position_embeddings &&
           a->sliding_window == b->sliding_window && a->rms_norm_eps == b->rms_norm_eps &&
           a->rope_theta == b->rope_theta && a->tie_word_embeddings == b->tie_word_embeddings &&
           a->attention_bias == b->attention_bias && a->qk_norm == b->qk_norm && a->has_lm_head == b->has_lm_head &&
           a->o_proj_bias == b->o_proj_bias && a->mlp_bias == b->mlp_bias &&
           a->norm_weight_plus_one == b->norm_weight_plus_one && a->sandwich_norms == b->sandwich_norms &&
           a->activation == b->activation && a->embedding_scale == b->embedding_scale &&
           a->final_logit_softcapping == b->final_logit_softcapping &&
           a->query_pre_attn_scalar == b->query_pre_attn_scalar && a->attn_logit_softcapping == b->attn_logit_softcapping;
}

/* What config.c guarantees of every config it returns, whatever the JSON said. */
static void check_guarantees(const rmlp_model_config *c) {
    char detail[600];
    describe(detail, sizeof detail, c);
    const arch_info *arch = arch_by_id(c->architecture);
    if (arch == NULL) {
        violation("architecture not in model/arch.h", detail);
        return;
    }
    if (!c->vocab_size || !c->hidden_size || !c->intermediate_size || !c->num_hidden_layers ||
        !c->num_attention_heads || !c->num_key_value_heads || !c->head_dim || !c->max_position_embeddings)
        violation("a size is 0", detail);
    if (c->num_attention_heads % c->num_key_value_heads != 0)
        violation("num_key_value_heads does not divide num_attention_heads", detail);
    if (!(c->rms_norm_eps > 0) || !isfinite(c->rms_norm_eps) || !(c->rope_theta > 0) || !isfinite(c->rope_theta))
        violation("rms_norm_eps or rope_theta not a positive finite number", detail);
    if (c->qk_norm != arch->qk_norm) violation("qk_norm not exactly where the architecture has it (Qwen3)", detail);
    if (arch->qkv_bias && !c->attention_bias) violation("no QKV bias where the architecture always has it (Qwen2)",
                                                        detail);
    if (!arch->qkv_bias && !arch->reads_attention_bias && (c->attention_bias || c->o_proj_bias))
        violation("an attention bias where the architecture has none (Mistral)", detail);
    if (c->o_proj_bias != (c->attention_bias && arch->reads_attention_bias))
        violation("o_proj bias not exactly with attention_bias where it is read (Llama, Qwen3)", detail);
    if (c->mlp_bias && !arch->reads_mlp_bias) violation("MLP biases where mlp_bias is not read (only Llama)", detail);
    if (arch->windows == ARCH_WINDOWS_NONE && c->sliding_window != 0)
        violation("sliding_window where no layer slides (Llama)", detail);
    if (c->has_lm_head) violation("has_lm_head set from config.json alone", detail);
    if (c->norm_weight_plus_one != arch->norm_plus_one || c->sandwich_norms != arch->sandwich_norms)
        violation("norm forms not exactly the architecture's (Gemma)", detail);
    if (c->activation != RMLP_ACTIVATION_SILU && c->activation != RMLP_ACTIVATION_GELU_TANH &&
        c->activation != RMLP_ACTIVATION_GELU)
        violation("an activation that is not an rmlp_activation", detail);
}

/* Each layer's window, scale and soft-cap the oracle's; the RoPE tables: one, its base the config's
 * rope_theta, or Gemma 3's two where a layer slides (sliding layers on the local one). */
static void check_layers(const model_ext *ext, const rmlp_model_config *want, const char *detail) {
    bool two = want_local_theta != 0.0 && want->sliding_window != 0;
    if (ext->n_layers != want->num_hidden_layers || ext->n_rope != (two ? 2u : 1u) ||
        ext->rope[0].theta != want->rope_theta || (two && ext->rope[1].theta != want_local_theta)) {
        violation("model_ext's layers or RoPE tables differ from the config", detail);
        return;
    }
    for (uint32_t i = 0; i < ext->n_layers; i++)
        if (ext->layers[i].window != want_windows[i] || ext->layers[i].softcap != want_softcap_f ||
            ext->layers[i].scale != want_scale ||
            ext->layers[i].rope != (two && want_windows[i] != 0 ? MODEL_ROPE_LOCAL : MODEL_ROPE_GLOBAL)) {
            violation("a layer's window, scale, soft-cap or RoPE table differs from the documented rules", detail);
            return;
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *file_path = fuzz_write_input("fuzz_config", ".json", data, size);
    rmlp_model_config got;
    memset(&got, 0xA5, sizeof got); /* config_read must overwrite or zero all of it */
    rmlp_clear_error();              /* as the exported entry point does before it calls config_read */
    model_ext ext;
    rmlp_status status = config_read_reported("rmlp_model_load", file_path, &got, &ext, NULL);
    const char *message = rmlp_last_error();

    json_t *root = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    rmlp_model_config want;
    int parsed_object = json_is_object(root);
    int accept = parsed_object && oracle(root, &want);
    json_decref(root);

    char detail[1800], got_text[800], want_text[800];
    if (status == RMLP_OK) {
        check_guarantees(&got);
        describe(got_text, sizeof got_text, &got);
        if (!accept) violation("config_read accepted a config the documented rules refuse", got_text);
        if (!same_config(&got, &want)) {
            describe(want_text, sizeof want_text, &want);
            snprintf(detail, sizeof detail, "got %s; want %s", got_text, want_text);
            violation("config_read's values differ from the JSON's", detail);
        }
        if (message[0] != '\0') violation("success set an error message", message);
        check_layers(&ext, &want, got_text);
        model_ext_free(&ext);
        return 0;
    }
    snprintf(detail, sizeof detail, "status %d (%s), message \"%s\"", (int)status, rmlp_status_string(status), message);
    if (accept) violation("config_read refused a config the documented rules accept", detail);
    /* The file was just written and inputs are a few KB, so neither IO nor OUT_OF_MEMORY is a
     * true answer here (an OUT_OF_MEMORY would be a syntax error misread as jansson's failure to
     * allocate): JSON that does not parse, or is no object, is FORMAT; a config refused by its
     * keys and values is FORMAT (wrong type or range) or MODEL (missing or unsupported). */
    if (status != RMLP_ERR_FORMAT && (!parsed_object || status != RMLP_ERR_MODEL))
        violation("unexpected status", detail);
    char prefix[600];
    snprintf(prefix, sizeof prefix, "rmlp_model_load: %s: ", file_path);
    if (strncmp(message, prefix, strlen(prefix)) != 0 || message[strlen(prefix)] == '\0')
        violation("error message does not name the file", detail);
    static const rmlp_model_config zero;
    if (memcmp(&got, &zero, sizeof zero) != 0) violation("config not zeroed on error", detail);
    fuzz_record_refusal("fuzz_config", status, message);
    return 0;
}
