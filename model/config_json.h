/*
 * config_json.h: the typed reads of config.json's keys that config.c and config_attention.c
 * share. A key that is null counts as absent; every failure names the file and the key (with its
 * scope, "rope_parameters." for a key inside that object) in a message named by the entry point
 * that reads the file (cfg::fn: rmlp_model_load, rmlp_model_bind_cuda_config).
 */
#ifndef RMLP_MODEL_CONFIG_JSON_H
#define RMLP_MODEL_CONFIG_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "radix_mlp/types.h"

typedef struct cfg {
    const char *fn;    /* the entry point whose messages these are */
    const char *path;
    json_t *root;
    const char *scope; /* "" or "rope_parameters.", for messages */
} cfg;

/* The value of key; NULL when absent or null. */
json_t *cfg_get(const cfg *c, const char *key);
rmlp_status cfg_missing(const cfg *c, const char *key);
rmlp_status cfg_wrong_type(const cfg *c, const char *key, const json_t *value, const char *want);
/* A positive integer that fits 32 bits; `fallback` when absent unless `required`. */
rmlp_status cfg_u32(const cfg *c, const char *key, int required, uint32_t fallback, uint32_t *out);
/* A positive number; `fallback` when absent unless `required`. */
rmlp_status cfg_positive(const cfg *c, const char *key, int required, double fallback, double *out);
rmlp_status cfg_bool(const cfg *c, const char *key, bool fallback, bool *out);
/* A string; NULL when absent, which is an error when `required`. */
rmlp_status cfg_string(const cfg *c, const char *key, int required, const char **out);

#endif
