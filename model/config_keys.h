/*
 * config_keys.h: the config.json keys the library knows, per architecture of arch.h: those
 * config.c reads (implemented, or refused by name when set to what the layer code does not
 * run) and those that cannot change a forward's numbers (token ids, initialisation, dropout,
 * bookkeeping). The list is of what transformers' config classes and modeling code read for
 * these architectures (transformers 5.23), checked against transformers itself by
 * bindings/python/tests_torch/test_config_keys.py. Any other key of a config.json is one
 * transformers does not read for that architecture either; the load report names those keys
 * (docs/backends.md#configjson-keys), so nothing is ignored silently.
 */
#ifndef RMLP_MODEL_CONFIG_KEYS_H
#define RMLP_MODEL_CONFIG_KEYS_H

#include <stdbool.h>
#include <stddef.h>

#include "arch.h"

struct json_t;
/* The load report's line on the top-level keys of `root` (a config.json object) not in the table
 * for `arch`, at most 8 named and the rest counted, ending in '\n', into buf (cap bytes,
 * NUL-terminated when cap suffices; buf NULL to measure). Returns its length without the NUL, 0
 * when every key is known. */
size_t config_keys_unread_report(const struct json_t *root, const arch_info *arch, char *buf, size_t cap);

/* Whether transformers reads key `name` for `arch` (the table's row for it names the arch): the
 * keys only some architectures read (use_bidirectional_attention, final_logit_softcapping) are
 * honoured or refused only for those. */
bool config_keys_read_by(const char *name, const arch_info *arch);

/* The load report's line when `root`'s auto_map names custom code for a model class (AutoModel...),
 * which transformers runs in place of its own layers only with trust_remote_code; buf and the
 * return value as above (0: no such entry). */
size_t config_keys_custom_code_report(const struct json_t *root, const arch_info *arch, char *buf, size_t cap);

#endif
