/*
 * config.c: a Hugging Face config.json into rmlp_model_config and model_ext. The layer code
 * implements one decoder (RMSNorm, RoPE of the static kinds, GQA attention with sliding windows,
 * SwiGLU MLP, the biases each architecture has in transformers, q/k norm), so a config asking for
 * anything else is refused here, by key, rather than producing wrong numbers later. A key that is
 * null counts as absent (Hugging Face writes "rope_scaling": null, "head_dim": null). Both forms
 * on the hub are read: the older one (top-level rope_theta, rope_scaling) and transformers 5's
 * (rope_parameters, layer_types); config_attention.c reads those, and windows; config_gemma.c the
 * keys of the Gemma family. The MLP's activation is SiLU or GELU (exact or tanh). Other keys that
 * transformers reads and the layers cannot honour (is_causal false, attention_chunk_size,
 * kv_sharing_modes, per_layer_config, sub-configs) are refused when set; config_keys.h lists every
 * key and names the rest in the load report. Also the one JSON file reader of
 * model/, which opens only regular files (a FIFO or a device would block or never end).
 */
#define _POSIX_C_SOURCE 200809L

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/status.h"
#include "arch.h"
#include "config_keys.h"
#include "config_attention.h"
#include "config_gemma.h"
#include "config_json.h"

/* jansson (2.14, Debian 12's) sets json_error_out_of_memory for none of the allocations its
 * parser makes; it reports them as: no message at all (a value, object, array or the lexer's
 * buffer could not be allocated), or, when the copy of a string token could not be allocated,
 * "invalid token" (a value) or "string or '}' expected" (a key) right after a complete string,
 * which a real syntax error never is (a string that is itself malformed gets its own message
 * first, and jansson keeps the first). Later versions may set the code, which counts too.
 * `error` was zeroed before the load, so an untouched code reads json_error_unknown. */
int config_json_out_of_memory(const json_error_t *error, int byte_before_error) {
    if (error->text[0] == '\0' || json_error_code(error) == json_error_out_of_memory) return 1;
    return byte_before_error == '"' && json_error_code(error) == json_error_invalid_syntax &&
           (strncmp(error->text, "invalid token", 13) == 0 || strncmp(error->text, "string or '}' expected", 22) == 0);
}

/* `path` opened for reading if it is a regular file: without blocking on a FIFO (O_NONBLOCK, which
 * a regular file's reads ignore), then checked with fstat. */
static rmlp_status open_regular(const char *fn, const char *path, FILE **out) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int error = errno;
        if (fd >= 0) close(fd);
        return rmlp_fail(error == ENOMEM ? RMLP_ERR_OUT_OF_MEMORY : RMLP_ERR_IO, fn, "%s: %s", path, strerror(error));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return rmlp_fail(RMLP_ERR_IO, fn, "%s: not a regular file (a FIFO, device or folder is not read)", path);
    }
    if ((*out = fdopen(fd, "rb")) == NULL) {
        int error = errno;
        close(fd);
        return rmlp_fail(error == ENOMEM ? RMLP_ERR_OUT_OF_MEMORY : RMLP_ERR_IO, fn, "%s: %s", path, strerror(error));
    }
    return RMLP_OK;
}

rmlp_status config_load_json(const char *fn, const char *path, json_t **out) {
    *out = NULL;
    FILE *f;
    rmlp_status opened = open_regular(fn, path, &f);
    if (opened != RMLP_OK) return opened;
    json_error_t error;
    memset(&error, 0, sizeof error);
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &error);
    int read_failed = ferror(f), byte_before_error = EOF;
    if (root == NULL && !read_failed && error.position > 0 && fseek(f, error.position - 1, SEEK_SET) == 0)
        byte_before_error = fgetc(f);
    fclose(f);
    if (root == NULL && read_failed) return rmlp_fail(RMLP_ERR_IO, fn, "%s: reading failed", path);
    if (root == NULL && config_json_out_of_memory(&error, byte_before_error))
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "%s: out of memory while jansson parsed the JSON", path);
    if (root == NULL)
        return rmlp_fail(RMLP_ERR_FORMAT, fn, "%s: not valid JSON: %s at line %d, column %d", path, error.text,
                         error.line, error.column);
    if (!json_is_object(root)) {
        json_decref(root);
        return rmlp_fail(RMLP_ERR_FORMAT, fn, "%s: not a JSON object", path);
    }
    *out = root;
    return RMLP_OK;
}

const char *config_json_kind(const json_t *value) {
    switch (json_typeof(value)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a fractional number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* The value of key; NULL when absent or null. */
json_t *cfg_get(const cfg *c, const char *key) {
    json_t *value = json_object_get(c->root, key);
    return json_is_null(value) ? NULL : value;
}

rmlp_status cfg_missing(const cfg *c, const char *key) {
    return rmlp_fail(RMLP_ERR_MODEL, c->fn, "%s: missing key '%s%s'", c->path, c->scope, key);
}

rmlp_status cfg_wrong_type(const cfg *c, const char *key, const json_t *value, const char *want) {
    return rmlp_fail(RMLP_ERR_FORMAT, c->fn, "%s: '%s%s' is %s, not %s", c->path, c->scope, key,
                     config_json_kind(value), want);
}

/* A positive integer that fits 32 bits; `fallback` when absent unless `required`. */
rmlp_status cfg_u32(const cfg *c, const char *key, int required, uint32_t fallback, uint32_t *out) {
    const json_t *value = cfg_get(c, key);
    *out = fallback;
    if (value == NULL) return required ? cfg_missing(c, key) : RMLP_OK;
    if (!json_is_integer(value)) return cfg_wrong_type(c, key, value, "an integer");
    json_int_t x = json_integer_value(value);
    if (x < 1 || x > (json_int_t)UINT32_MAX)
        return rmlp_fail(RMLP_ERR_FORMAT, c->fn, "%s: '%s%s' = %lld is not between 1 and 2^32-1", c->path, c->scope,
                         key, (long long)x);
    *out = (uint32_t)x;
    return RMLP_OK;
}

/* A positive number; `fallback` when absent unless `required`. */
rmlp_status cfg_positive(const cfg *c, const char *key, int required, double fallback, double *out) {
    const json_t *value = cfg_get(c, key);
    *out = fallback;
    if (value == NULL) return required ? cfg_missing(c, key) : RMLP_OK;
    if (!json_is_number(value)) return cfg_wrong_type(c, key, value, "a number");
    *out = json_number_value(value);
    if (!(*out > 0))
        return rmlp_fail(RMLP_ERR_FORMAT, c->fn, "%s: '%s%s' = %g is not positive", c->path, c->scope, key, *out);
    return RMLP_OK;
}

rmlp_status cfg_bool(const cfg *c, const char *key, bool fallback, bool *out) {
    const json_t *value = cfg_get(c, key);
    *out = fallback;
    if (value == NULL) return RMLP_OK;
    if (!json_is_boolean(value)) return cfg_wrong_type(c, key, value, "a boolean");
    *out = json_is_true(value);
    return RMLP_OK;
}

/* A string; NULL when absent, which is an error when `required`. */
rmlp_status cfg_string(const cfg *c, const char *key, int required, const char **out) {
    const json_t *value = cfg_get(c, key);
    *out = NULL;
    if (value == NULL) return required ? cfg_missing(c, key) : RMLP_OK;
    if (!json_is_string(value)) return cfg_wrong_type(c, key, value, "a string");
    *out = json_string_value(value);
    return RMLP_OK;
}

/* Keys transformers reads for these architectures that ask for what the layer code does not run
 * (config_keys.h lists them with the rest): refused by name when set. */
static rmlp_status refused_settings(const cfg *c, const arch_info *arch) {
    static const struct {
        const char *key, *what;
    } set[] = {
        {"attention_chunk_size", "attention in chunks (transformers' cache and masks follow it)"},
        {"kv_sharing_modes", "layers that reuse other layers' keys and values"},
        {"per_layer_config", "layers that differ from each other"},
        {"text_config", "a sub-config (the library reads a text decoder's config.json at its top level)"},
        {"decoder", "a sub-config (the library reads a text decoder's config.json at its top level)"},
        {"generator", "a sub-config (the library reads a text decoder's config.json at its top level)"},
        {"quantization_config", "quantized weights"},
    };
    for (size_t i = 0; i < sizeof set / sizeof set[0]; i++)
        if (cfg_get(c, set[i].key) != NULL)
            return rmlp_fail(RMLP_ERR_MODEL, c->fn, "%s: '%s' is set (%s): not supported", c->path, set[i].key,
                             set[i].what);
    bool causal;
    rmlp_status s = cfg_bool(c, "is_causal", true, &causal);
    if (s != RMLP_OK) return s;
    if (!causal)
        return rmlp_fail(RMLP_ERR_MODEL, c->fn, "%s: is_causal is false: transformers then attends in both directions, "
                         "and only causal decoders are supported (a token's state must not depend on later tokens)",
                         c->path);
    if (arch->windows == ARCH_WINDOWS_NONE && cfg_get(c, "sliding_window") != NULL)
        return rmlp_fail(RMLP_ERR_MODEL, c->fn, "%s: sliding_window is set: transformers' %s cache then keeps a "
                         "sliding window in every layer, which is not supported for this architecture", c->path,
                         arch->model_type);
    return RMLP_OK;
}

/* model_types of checkpoints that hold a decoder of the table inside something it does not run. */
static const struct {
    const char *model_type, *why;
} refused_types[] = {
    {"gemma3", "the multimodal Gemma 3 (Gemma3ForConditionalGeneration: a vision tower and the text decoder in "
               "text_config); its text decoder alone, model_type gemma3_text, is supported"},
};

/* The MLP's gate activation, named by the architecture's key (hidden_act, or Gemma 2 and 3's
 * hidden_activation; arch.h), as transformers' ACT2FN maps the three names run here (Gemma's
 * "gelu" being the tanh form, as its config class rewrites it). */
static rmlp_status activation(const cfg *c, const arch_info *arch, rmlp_model_config *m) {
    static const struct {
        const char *name;
        rmlp_activation id;
    } names[] = {{"silu", RMLP_ACTIVATION_SILU},
                 {"gelu_pytorch_tanh", RMLP_ACTIVATION_GELU_TANH},
                 {"gelu", RMLP_ACTIVATION_GELU}};
    const char *key = arch->activation_key, *act;
    /* null is not absent here: transformers takes the key as given and finds no activation None */
    if (json_is_null(json_object_get(c->root, key)))
        return rmlp_fail(RMLP_ERR_MODEL, c->fn, "%s: %s is null (transformers builds no activation from it; silu, gelu "
                         "and gelu_pytorch_tanh are supported)", c->path, key);
    rmlp_status s = cfg_string(c, key, 0, &act);
    if (s != RMLP_OK) return s;
    m->activation = arch->activation_default;
    if (act == NULL) return RMLP_OK;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(act, names[i].name) == 0) {
            /* Gemma: GemmaConfig turns "gelu" into "gelu_pytorch_tanh" */
            m->activation = names[i].id == RMLP_ACTIVATION_GELU && arch->gelu_means_tanh ? RMLP_ACTIVATION_GELU_TANH
                                                                                         : names[i].id;
            return RMLP_OK;
        }
    return rmlp_fail(RMLP_ERR_MODEL, c->fn, "%s: %s '%s' is not supported (silu, gelu and gelu_pytorch_tanh are)",
                     c->path, key, act);
}

static rmlp_status parse(const cfg *c, rmlp_model_config *m, model_ext *ext) {
    const char *model_type;
    rmlp_status s = cfg_string(c, "model_type", 1, &model_type);
    if (s != RMLP_OK) return s;
    const arch_info *arch = arch_by_model_type(model_type);
    for (size_t i = 0; arch == NULL && i < sizeof refused_types / sizeof refused_types[0]; i++)
        if (strcmp(model_type, refused_types[i].model_type) == 0)
            return rmlp_fail(RMLP_ERR_MODEL, c->fn, "%s: model_type '%s' is not supported: %s", c->path, model_type,
                             refused_types[i].why);
    if (arch == NULL) {
        char accepted[256];
        arch_model_types(accepted, sizeof accepted);
        return rmlp_fail(RMLP_ERR_MODEL, c->fn, "%s: model_type '%s' is not supported (%s)", c->path, model_type,
                         accepted);
    }

    const struct {
        const char *key;
        uint32_t *field;
    } sizes[] = {{"vocab_size", &m->vocab_size},
                 {"hidden_size", &m->hidden_size},
                 {"intermediate_size", &m->intermediate_size},
                 {"num_hidden_layers", &m->num_hidden_layers},
                 {"num_attention_heads", &m->num_attention_heads},
                 {"max_position_embeddings", &m->max_position_embeddings}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if ((s = cfg_u32(c, sizes[i].key, 1, 0, sizes[i].field)) != RMLP_OK) return s;
    if ((s = cfg_u32(c, "num_key_value_heads", 0, m->num_attention_heads, &m->num_key_value_heads)) != RMLP_OK)
        return s;
    if (m->num_attention_heads % m->num_key_value_heads != 0)
        return rmlp_fail(RMLP_ERR_MODEL, c->fn, "%s: num_key_value_heads %u does not divide num_attention_heads %u",
                         c->path, m->num_key_value_heads, m->num_attention_heads);
    if (cfg_get(c, "head_dim") == NULL && m->hidden_size % m->num_attention_heads != 0)
        return rmlp_fail(RMLP_ERR_MODEL, c->fn,
                         "%s: no head_dim, and hidden_size %u is not a multiple of num_attention_heads %u", c->path,
                         m->hidden_size, m->num_attention_heads);
    if ((s = cfg_u32(c, "head_dim", 0, m->hidden_size / m->num_attention_heads, &m->head_dim)) != RMLP_OK) return s;
    bool attention_bias, mlp_bias;
    if ((s = cfg_positive(c, "rms_norm_eps", 1, 0, &m->rms_norm_eps)) != RMLP_OK ||
        (s = cfg_positive(c, "rope_theta", 0, 10000.0, &m->rope_theta)) != RMLP_OK ||
        (s = cfg_bool(c, "tie_word_embeddings", arch->tied_default, &m->tie_word_embeddings)) != RMLP_OK ||
        (s = cfg_bool(c, "attention_bias", false, &attention_bias)) != RMLP_OK ||
        (s = cfg_bool(c, "mlp_bias", false, &mlp_bias)) != RMLP_OK)
        return s;
    /* The biases and q/k norm transformers' modeling code builds, by the architecture's row of
     * arch.h (Llama and Qwen3 read attention_bias, Llama mlp_bias, Qwen2 always has q, k, v
     * biases, Mistral none); a flag an architecture does not read is ignored, as transformers
     * ignores it. */
    arch_set_layer_flags(arch, attention_bias, mlp_bias, m);

    if (m->num_hidden_layers > MODEL_MAX_LAYERS || m->head_dim > MODEL_MAX_HEAD_DIM)
        return rmlp_fail(RMLP_ERR_MODEL, c->fn, "%s: num_hidden_layers %u or head_dim %u is more than the library "
                         "holds (%u layers, heads of %u)", c->path, m->num_hidden_layers, m->head_dim, MODEL_MAX_LAYERS,
                         MODEL_MAX_HEAD_DIM);
    /* each layer's window and RoPE (config_attention.h) */
    if ((s = model_ext_init(c->fn, m, ext)) != RMLP_OK || (s = config_attention(c, m, arch, ext)) != RMLP_OK ||
        (s = refused_settings(c, arch)) != RMLP_OK)
        return s;
    if ((s = activation(c, arch, m)) != RMLP_OK || (s = config_gemma(c, m, arch, ext)) != RMLP_OK) return s;
    return RMLP_OK;
}

rmlp_status config_read_reported(const char *fn, const char *config_json_path, rmlp_model_config *out, model_ext *ext,
                                 char **report) {
    memset(out, 0, sizeof *out);
    if (report != NULL) *report = NULL;
    cfg c = {fn, config_json_path, NULL, ""};
    model_ext read = {0};
    rmlp_status status = config_load_json(fn, config_json_path, &c.root);
    if (status == RMLP_OK) status = parse(&c, out, &read);
    const arch_info *arch = status == RMLP_OK ? arch_by_id(out->architecture) : NULL;
    size_t unread = arch != NULL && report != NULL ? config_keys_unread_report(c.root, arch, NULL, 0) : 0;
    size_t custom = arch != NULL && report != NULL ? config_keys_custom_code_report(c.root, arch, NULL, 0) : 0;
    if (unread + custom > 0 && (*report = rmlp_malloc(unread + custom + 1)) == NULL) {
        status = rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating the load report (%zu bytes) failed",
                           unread + custom + 1);
    } else if (unread + custom > 0) {
        config_keys_unread_report(c.root, arch, *report, unread + 1);
        config_keys_custom_code_report(c.root, arch, *report + unread, custom + 1);
    }
    json_decref(c.root);
    if (status != RMLP_OK) memset(out, 0, sizeof *out);
    if (status != RMLP_OK || ext == NULL) model_ext_free(&read);
    if (ext != NULL) *ext = read; /* zeroed on failure */
    return status;
}

rmlp_status config_read(const char *fn, const char *config_json_path, rmlp_model_config *out) {
    return config_read_reported(fn, config_json_path, out, NULL, NULL);
}
