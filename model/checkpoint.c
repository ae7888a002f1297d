/*
 * checkpoint.c: finds the files of a checkpoint and opens its safetensors shards. A folder
 * holds config.json and either model.safetensors or model.safetensors.index.json, whose
 * {"weight_map": {"tensor": "shard file"}} names the shards; a file path is one .safetensors
 * file (or an index) with config.json beside it. Each shard is opened once, and every entry
 * of the weight map is checked against its shard at open, so a lookup cannot fail later.
 * Shard names are plain file names: an index cannot reach outside its folder. A tensor held by
 * two shards is refused; one a shard holds but the weight map lacks is found all the same, as
 * transformers loads every tensor of the shards an index names (audit.c reports it).
 */
#define _POSIX_C_SOURCE 200809L

#include "checkpoint.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/alloc.h"
#include "common/status.h"
#include "config.h"

static const char fn[] = "rmlp_model_load";

struct checkpoint {
    char *config_path;
    json_t *index;            /* the index file; NULL for a single file */
    const json_t *weight_map; /* in index: tensor name -> shard file name */
    size_t n_shards;
    st_file **shards;         /* (n_shards) */
    const char **shard_names; /* (n_shards), as the weight map spells them (strings inside index) */
    const char *hidden;       /* a tensor checkpoint_find no longer finds (checkpoint_hide), or NULL */
};

/* The bytes join() allocates for "dir/name". */
static size_t join_size(const char *dir, const char *name) { return strlen(dir) + strlen(name) + 2; }

/* "dir/name", malloc'ed; NULL when out of memory. */
static char *join(const char *dir, const char *name) {
    size_t len = join_size(dir, name);
    char *path = rmlp_malloc(len);
    if (path != NULL) snprintf(path, len, "%s/%s", dir, name);
    return path;
}

static int is_regular(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static rmlp_status oom(const char *path, const char *what, size_t bytes) {
    return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "%s: allocating %s (%zu bytes) failed", path, what, bytes);
}

/* The shard of that file name, opened on first use. */
static rmlp_status shard_of(checkpoint *ckpt, const char *dir, const char *name, size_t *index) {
    for (*index = 0; *index < ckpt->n_shards; (*index)++)
        if (strcmp(ckpt->shard_names[*index], name) == 0) return RMLP_OK;
    char *path = join(dir, name);
    if (path == NULL) return oom(dir, "a shard's path", join_size(dir, name));
    ckpt->shard_names[*index] = name;
    rmlp_status status = st_open(path, &ckpt->shards[ckpt->n_shards++]);
    free(path);
    return status;
}

/* Every tensor in one shard only: transformers would keep the last shard's copy without a word. */
static rmlp_status check_duplicates(const checkpoint *ckpt, const char *index_path) {
    for (size_t k = 1; k < ckpt->n_shards; k++)
        for (size_t i = 0; i < st_count(ckpt->shards[k]); i++) {
            const char *name = st_at(ckpt->shards[k], i)->name;
            const char *indexed = json_string_value(json_object_get(ckpt->weight_map, name));
            for (size_t other = 0; other < k; other++)
                if (st_find(ckpt->shards[other], name) != NULL)
                    return rmlp_fail(RMLP_ERR_MODEL, fn,
                                     "%s: tensor '%s' is in both %s and %s (weight_map names %s); a checkpoint holds "
                                     "each tensor once", index_path, name, ckpt->shard_names[other],
                                     ckpt->shard_names[k], indexed != NULL ? indexed : "neither");
        }
    return RMLP_OK;
}

static rmlp_status open_index(checkpoint *ckpt, const char *dir, const char *index_path) {
    rmlp_status status = config_load_json(fn, index_path, &ckpt->index);
    if (status != RMLP_OK) return status;
    ckpt->weight_map = json_object_get(ckpt->index, "weight_map");
    if (!json_is_object(ckpt->weight_map))
        return rmlp_fail(RMLP_ERR_FORMAT, fn, "%s: no weight_map object", index_path);
    size_t n = json_object_size(ckpt->weight_map);
    if ((ckpt->shards = rmlp_calloc(n ? n : 1, sizeof *ckpt->shards)) == NULL)
        return oom(index_path, "the table of shards", (n ? n : 1) * sizeof *ckpt->shards);
    if ((ckpt->shard_names = rmlp_calloc(n ? n : 1, sizeof *ckpt->shard_names)) == NULL)
        return oom(index_path, "the table of shard names", (n ? n : 1) * sizeof *ckpt->shard_names);
    const char *tensor;
    json_t *value;
    json_object_foreach((json_t *)ckpt->weight_map, tensor, value) {
        if (!json_is_string(value))
            return rmlp_fail(RMLP_ERR_FORMAT, fn, "%s: weight_map['%s'] is %s, not a file name", index_path, tensor,
                             config_json_kind(value));
        const char *name = json_string_value(value);
        if (name[0] == '\0' || strchr(name, '/') != NULL)
            return rmlp_fail(RMLP_ERR_FORMAT, fn,
                             "%s: weight_map['%s'] = '%s' is not a file name in the checkpoint's folder", index_path,
                             tensor, name);
        size_t k;
        if ((status = shard_of(ckpt, dir, name, &k)) != RMLP_OK) return status;
        if (st_find(ckpt->shards[k], tensor) == NULL)
            return rmlp_fail(RMLP_ERR_MODEL, fn, "%s: weight_map puts tensor '%s' in %s, which does not hold it",
                             index_path, tensor, st_path(ckpt->shards[k]));
    }
    return check_duplicates(ckpt, index_path);
}

static rmlp_status open_single(checkpoint *ckpt, const char *file_path) {
    ckpt->shards = rmlp_calloc(1, sizeof *ckpt->shards);
    if (ckpt->shards == NULL) return oom(file_path, "the table of shards", sizeof *ckpt->shards);
    ckpt->n_shards = 1;
    return st_open(file_path, &ckpt->shards[0]);
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Finds the folder and the tensor file(s) of `path`, then opens them. */
static rmlp_status open_files(checkpoint *ckpt, const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return rmlp_fail(RMLP_ERR_IO, fn, "%s: %s", path, strerror(errno));
    char *dir = rmlp_strdup(path), *file = NULL;
    rmlp_status status = RMLP_OK;
    if (dir == NULL) return oom(path, "a copy of the path", strlen(path) + 1);
    const char *file_name = "model.safetensors"; /* in dir; NULL: the path itself */
    if (S_ISDIR(st.st_mode)) {
        for (size_t len = strlen(dir); len > 1 && dir[len - 1] == '/';) dir[--len] = '\0';
        file = join(dir, file_name);
        if (file != NULL && !is_regular(file)) {
            free(file);
            file = join(dir, file_name = "model.safetensors.index.json");
            if (file != NULL && !is_regular(file))
                status = rmlp_fail(RMLP_ERR_IO, fn,
                                   "%s: holds neither model.safetensors nor model.safetensors.index.json", dir);
        }
    } else {
        char *slash = strrchr(dir, '/');
        if (slash == NULL)
            strcpy(dir, ".");
        else
            slash[slash == dir ? 1 : 0] = '\0'; /* "/x.safetensors" lives in "/" */
        file = rmlp_strdup(path);
        file_name = NULL;
    }
    if (status == RMLP_OK && file == NULL)
        status = oom(path, "the tensor file's path", file_name ? join_size(dir, file_name) : strlen(path) + 1);
    if (status == RMLP_OK && (ckpt->config_path = join(dir, "config.json")) == NULL)
        status = oom(path, "the path of config.json", join_size(dir, "config.json"));
    if (status == RMLP_OK)
        status = ends_with(file, ".index.json") ? open_index(ckpt, dir, file) : open_single(ckpt, file);
    free(file);
    free(dir);
    return status;
}

rmlp_status checkpoint_open(const char *path, checkpoint **out) {
    *out = NULL;
    checkpoint *ckpt = rmlp_calloc(1, sizeof *ckpt);
    if (ckpt == NULL) return oom(path, "the checkpoint", sizeof *ckpt);
    rmlp_status status = open_files(ckpt, path);
    if (status != RMLP_OK) {
        checkpoint_close(ckpt);
        return status;
    }
    *out = ckpt;
    return RMLP_OK;
}

void checkpoint_close(checkpoint *ckpt) {
    if (ckpt == NULL) return;
    for (size_t i = 0; i < ckpt->n_shards; i++) st_close(ckpt->shards[i]);
    free(ckpt->shards);
    free(ckpt->shard_names);
    json_decref(ckpt->index);
    free(ckpt->config_path);
    free(ckpt);
}

const char *checkpoint_config_path(const checkpoint *ckpt) { return ckpt->config_path; }

void checkpoint_hide(checkpoint *ckpt, const char *name) { ckpt->hidden = name; }

const st_tensor *checkpoint_find(const checkpoint *ckpt, const char *name) {
    if (ckpt->hidden != NULL && strcmp(name, ckpt->hidden) == 0) return NULL;
    if (ckpt->index == NULL) return st_find(ckpt->shards[0], name);
    const char *shard = json_string_value(json_object_get(ckpt->weight_map, name));
    for (size_t i = 0; i < ckpt->n_shards; i++)
        if (shard == NULL || strcmp(ckpt->shard_names[i], shard) == 0) { /* unindexed: in any shard (once) */
            const st_tensor *t = st_find(ckpt->shards[i], name);
            if (t != NULL || shard != NULL) return t;
        }
    return NULL;
}

bool checkpoint_indexed(const checkpoint *ckpt, const char *name) {
    return ckpt->index == NULL || json_object_get(ckpt->weight_map, name) != NULL;
}

size_t checkpoint_shard_count(const checkpoint *ckpt) { return ckpt->n_shards; }

const st_file *checkpoint_shard(const checkpoint *ckpt, size_t index) { return ckpt->shards[index]; }
