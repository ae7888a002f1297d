/*
 * safetensors.h: a read-only, memory-mapped safetensors file with a strictly checked header.
 * A file that opens successfully only hands out tensors whose bytes lie inside its data
 * section, match dtype x shape, and tile the section: no overlap, no gap, no trailing bytes.
 */
#ifndef RMLP_MODEL_SAFETENSORS_H
#define RMLP_MODEL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "radix_mlp/types.h"

#define ST_MAX_DIMS 8

typedef struct st_tensor {
    const char *name;           /* NUL-terminated, owned by the file */
    rmlp_dtype dtype;           /* F32, F16 or BF16 (other dtypes are refused at open) */
    uint32_t ndim;
    uint64_t shape[ST_MAX_DIMS];
    const void *data;           /* inside the mapping, nbytes long */
    uint64_t nbytes;
} st_tensor;

typedef struct st_file st_file;

/* Maps and checks `path`. Errors (RMLP_ERR_IO, RMLP_ERR_FORMAT, RMLP_ERR_MODEL for an
 * unsupported dtype, RMLP_ERR_OUT_OF_MEMORY) are reported through rmlp_fail naming the file. */
rmlp_status st_open(const char *path, st_file **out);
/* The same checks (st_open runs them too) on a file's `len` bytes already in memory, which
 * must outlive the file (st_close leaves them alone); `name` stands for the path in messages
 * and st_path. For the fuzzer, which feeds headers without touching the disk. */
rmlp_status st_open_memory(const char *name, const void *bytes, size_t len, st_file **out);
void st_close(st_file *file);

size_t st_count(const st_file *file);
const st_tensor *st_at(const st_file *file, size_t index);
/* NULL when the file has no tensor of that name. */
const st_tensor *st_find(const st_file *file, const char *name);
const char *st_path(const st_file *file);

/* "[d0, d1, ...]" into buf (truncated to len), for messages about shapes; returns buf. */
const char *st_shape_str(uint32_t ndim, const uint64_t *shape, char *buf, size_t len);

#endif
