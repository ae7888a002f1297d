/*
 * config.h: config.json of a Llama-family decoder (Qwen3, Qwen2, Llama, Mistral) into
 * rmlp_model_config, refusing what the layer code does not implement (rope_scaling, an
 * activation other than SiLU, sliding windows in use).
 */
#ifndef RMLP_MODEL_CONFIG_H
#define RMLP_MODEL_CONFIG_H

#include "radix_mlp.h"

/* Errors: RMLP_ERR_IO, RMLP_ERR_FORMAT (bad JSON, wrong value type), RMLP_ERR_MODEL (missing
 * key, unsupported model_type or feature); messages name the file and the key. */
rmlp_status config_read(const char *config_json_path, rmlp_model_config *out);

/* The JSON object in the file at `path` (config.json, model.safetensors.index.json), for the
 * caller to json_decref. Errors: RMLP_ERR_IO when it cannot be read, RMLP_ERR_FORMAT (naming
 * line and column) when it is not JSON, repeats a key, or is not an object. */
struct json_t;
rmlp_status config_load_json(const char *path, struct json_t **out);
/* What a JSON value is, for messages: "a string", "an array", "a fractional number", ... */
const char *config_json_kind(const struct json_t *value);

#endif
