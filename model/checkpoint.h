/*
 * checkpoint.h: the files of one Hugging Face / Candle checkpoint: config.json and one
 * safetensors file, or the shards named by model.safetensors.index.json (each tensor in one
 * shard: a tensor two shards hold is refused at open).
 */
#ifndef RMLP_MODEL_CHECKPOINT_H
#define RMLP_MODEL_CHECKPOINT_H

#include <stdbool.h>

#include "safetensors.h"

typedef struct checkpoint checkpoint;

/* `path` is a directory (config.json + model.safetensors or model.safetensors.index.json) or a
 * .safetensors file whose directory holds config.json. Errors name the path. */
rmlp_status checkpoint_open(const char *path, checkpoint **out);
void checkpoint_close(checkpoint *ckpt);

/* Path of the checkpoint's config.json. */
const char *checkpoint_config_path(const checkpoint *ckpt);
/* The tensor of that name in any shard (the one the weight map names, or the one shard holding
 * it when the map lacks it), NULL if none has it. */
const st_tensor *checkpoint_find(const checkpoint *ckpt, const char *name);
/* From now on checkpoint_find does not find the tensor `name` (a string that outlives the
 * checkpoint): a tensor the model must not use (lm_head.c). */
void checkpoint_hide(checkpoint *ckpt, const char *name);
/* Whether the index's weight_map names the tensor (always true for a single file). */
bool checkpoint_indexed(const checkpoint *ckpt, const char *name);
/* The opened safetensors files, for a walk over every tensor they hold (index < count). */
size_t checkpoint_shard_count(const checkpoint *ckpt);
const st_file *checkpoint_shard(const checkpoint *ckpt, size_t index);

#endif
