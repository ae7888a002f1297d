/*
 * config.h: config.json of a Llama-family decoder (the architectures of arch.h) into
 * rmlp_model_config, refusing what the layer code does not implement (rope_scaling, an
 * activation other than SiLU or none at all, sliding windows in use, bidirectional or chunked
 * attention, layers that differ or share keys and values), by key.
 */
#ifndef RMLP_MODEL_CONFIG_H
#define RMLP_MODEL_CONFIG_H

#include "model_ext.h"
#include "radix_mlp/types.h"

/* Errors: RMLP_ERR_IO, RMLP_ERR_FORMAT (bad JSON, wrong value type), RMLP_ERR_MODEL (missing
 * key, unsupported model_type or feature), RMLP_ERR_OUT_OF_MEMORY; messages are reported as `fn`
 * (the entry point reading the file) and name the file and the key. */
rmlp_status config_read(const char *fn, const char *config_json_path, rmlp_model_config *out);
/* config_read, and in *ext (when not NULL) each layer's attention and the RoPE tables
 * (config_attention.h), which the caller frees with model_ext_free (zeroed on failure), and in
 * *report (when not NULL) NULL, or a malloc'ed line for the load report naming the keys of
 * config.json that transformers does not read for its architecture (config_keys.h), which the
 * caller frees. */
rmlp_status config_read_reported(const char *fn, const char *config_json_path, rmlp_model_config *out, model_ext *ext,
                                 char **report);

/* The JSON object in the file at `path` (config.json, model.safetensors.index.json), for the
 * caller to json_decref. Errors: RMLP_ERR_IO when it cannot be read or is not a regular file (a
 * FIFO is refused without blocking), RMLP_ERR_FORMAT (naming
 * line and column) when it is not JSON, repeats a key, or is not an object,
 * RMLP_ERR_OUT_OF_MEMORY when jansson ran out of memory; reported as `fn`. */
struct json_t;
rmlp_status config_load_json(const char *fn, const char *path, struct json_t **out);
/* What a JSON value is, for messages: "a string", "an array", "a fractional number", ... */
const char *config_json_kind(const struct json_t *value);
/* Whether a jansson load that returned NULL failed for want of memory (jansson mostly does not
 * say so itself; config.c explains how it is told). `error` must have been zeroed before the
 * load; byte_before_error is the input's byte at error->position - 1 (EOF when unknown). */
struct json_error_t;
int config_json_out_of_memory(const struct json_error_t *error, int byte_before_error);

#endif
