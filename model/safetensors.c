/*
 * safetensors.c: maps a safetensors file read-only and checks its header before anything
 * reads a tensor: 8-byte little-endian header length, a JSON object of
 * {"name": {"dtype", "shape", "data_offsets"}} (plus an optional "__metadata__" object of
 * strings), each tensor's byte range exactly dtype x shape, and the ranges tiling the data
 * section (no overlap, no gap, no trailing bytes, as the reference reader requires).
 * Checkpoints come from anywhere, so every number in the header is untrusted: all arithmetic
 * on it is overflow-checked. Only F32, F16 and BF16 are accepted, the dtypes the weight loader
 * converts.
 */
#define _POSIX_C_SOURCE 200809L

#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/status.h"
#include "config.h"

#define ST_MAX_HEADER ((uint64_t)100 << 20)

static const char fn[] = "rmlp_model_load";

struct st_file {
    char *path;
    const void *map; /* the whole file: mmapped (mapped = 1, st_close unmaps it) or the caller's bytes */
    size_t map_len;
    int mapped;
    size_t count;
    st_tensor *tensors; /* sorted by name */
    char *names;        /* every tensor's name, NUL-terminated, back to back */
};

const char *st_shape_str(uint32_t ndim, const uint64_t *shape, char *buf, size_t len) {
    size_t used = (size_t)snprintf(buf, len, "[");
    for (uint32_t d = 0; d < ndim && used < len; d++)
        used += (size_t)snprintf(buf + used, len - used, "%s%llu", d ? ", " : "", (unsigned long long)shape[d]);
    if (used < len) snprintf(buf + used, len - used, "]");
    return buf;
}

static uint64_t dtype_size(rmlp_dtype dtype) { return dtype == RMLP_DTYPE_F32 ? 4 : 2; }

static const char *dtype_name(rmlp_dtype dtype) {
    return dtype == RMLP_DTYPE_F32 ? "F32" : dtype == RMLP_DTYPE_F16 ? "F16" : "BF16";
}

/* A JSON integer >= 0 into *out; anything else (negative, fractional, not a number) fails. */
static int get_count(const json_t *value, uint64_t *out) {
    if (!json_is_integer(value) || json_integer_value(value) < 0) return 0;
    *out = (uint64_t)json_integer_value(value);
    return 1;
}

/* One header entry into *t (t->data holds the offset into the data section until the caller
 * rebases it). */
static rmlp_status parse_entry(const char *path, const char *name, const json_t *entry, uint64_t data_len,
                               st_tensor *t) {
    if (!json_is_object(entry))
        return rmlp_fail(RMLP_ERR_FORMAT, fn, "%s: tensor '%s' is %s, not an object", path, name,
                         config_json_kind(entry));
    const json_t *dtype = json_object_get(entry, "dtype"), *shape = json_object_get(entry, "shape");
    const json_t *offsets = json_object_get(entry, "data_offsets");
    if (!json_is_string(dtype))
        return rmlp_fail(RMLP_ERR_FORMAT, fn, "%s: tensor '%s' has no string dtype", path, name);
    if (!json_is_array(shape)) return rmlp_fail(RMLP_ERR_FORMAT, fn, "%s: tensor '%s' has no shape array", path, name);
    if (!json_is_array(offsets) || json_array_size(offsets) != 2)
        return rmlp_fail(RMLP_ERR_FORMAT, fn, "%s: tensor '%s' has no data_offsets array of 2 numbers", path, name);

    const char *dt = json_string_value(dtype);
    if (strcmp(dt, "F32") == 0)
        t->dtype = RMLP_DTYPE_F32;
    else if (strcmp(dt, "F16") == 0)
        t->dtype = RMLP_DTYPE_F16;
    else if (strcmp(dt, "BF16") == 0)
        t->dtype = RMLP_DTYPE_BF16;
    else
        return rmlp_fail(RMLP_ERR_MODEL, fn, "%s: tensor '%s' has dtype %s, only F32, F16 and BF16 are supported", path,
                         name, dt);

    if (json_array_size(shape) > ST_MAX_DIMS)
        return rmlp_fail(RMLP_ERR_FORMAT, fn, "%s: tensor '%s' has %zu dimensions, at most %d are supported", path,
                         name, json_array_size(shape), ST_MAX_DIMS);
    t->ndim = (uint32_t)json_array_size(shape);
    uint64_t need = dtype_size(t->dtype), overflow = 0;
    for (uint32_t d = 0; d < t->ndim; d++) {
        if (!get_count(json_array_get(shape, d), &t->shape[d]))
            return rmlp_fail(RMLP_ERR_FORMAT, fn, "%s: tensor '%s': shape[%u] is not a non-negative integer", path,
                             name, d);
        if (t->shape[d] != 0 && need > UINT64_MAX / t->shape[d]) overflow = 1;
        need *= t->shape[d];
    }
    uint64_t begin, end;
    if (!get_count(json_array_get(offsets, 0), &begin) || !get_count(json_array_get(offsets, 1), &end))
        return rmlp_fail(RMLP_ERR_FORMAT, fn, "%s: tensor '%s': data_offsets are not non-negative integers", path,
                         name);
    char shape_buf[200];
    st_shape_str(t->ndim, t->shape, shape_buf, sizeof shape_buf);
    if (begin > end)
        return rmlp_fail(RMLP_ERR_FORMAT, fn, "%s: tensor '%s': data_offsets [%llu, %llu] begin after they end", path,
                         name, (unsigned long long)begin, (unsigned long long)end);
    if (overflow || need != end - begin)
        return rmlp_fail(RMLP_ERR_FORMAT, fn,
                         "%s: tensor '%s': dtype %s x shape %s does not match data_offsets [%llu, %llu] (%llu bytes)",
                         path, name, dtype_name(t->dtype), shape_buf, (unsigned long long)begin,
                         (unsigned long long)end, (unsigned long long)(end - begin));
    if (end > data_len)
        return rmlp_fail(RMLP_ERR_FORMAT, fn,
                         "%s: tensor '%s': data_offsets [%llu, %llu] run past the end of the %llu-byte data section",
                         path, name, (unsigned long long)begin, (unsigned long long)end, (unsigned long long)data_len);
    t->data = (const void *)(uintptr_t)begin;
    t->nbytes = end - begin;
    return RMLP_OK;
}

/* By begin, then end (an empty tensor before a non-empty one at the same offset). */
static int by_offset(const void *a, const void *b) {
    const st_tensor *x = a, *y = b;
    uintptr_t bx = (uintptr_t)x->data, by = (uintptr_t)y->data;
    if (bx != by) return bx < by ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const st_tensor *)a)->name, ((const st_tensor *)b)->name);
}

/* The header object into file->tensors / file->names, offsets still relative. */
static rmlp_status parse_header(st_file *file, const json_t *header, uint64_t data_len) {
    const char *key;
    const json_t *value;
    size_t names_len = 0, n = 0;
    json_object_foreach((json_t *)header, key, value) {
        if (strcmp(key, "__metadata__") == 0) {
            const char *meta_key;
            const json_t *meta_value;
            if (!json_is_object(value))
                return rmlp_fail(RMLP_ERR_FORMAT, fn, "%s: __metadata__ is %s, not an object", file->path,
                                 config_json_kind(value));
            json_object_foreach((json_t *)value, meta_key, meta_value) {
                if (!json_is_string(meta_value))
                    return rmlp_fail(RMLP_ERR_FORMAT, fn, "%s: __metadata__ '%s' is %s, not a string", file->path,
                                     meta_key, config_json_kind(meta_value));
            }
            continue;
        }
        names_len += strlen(key) + 1;
        n++;
    }
    if ((file->tensors = rmlp_calloc(n ? n : 1, sizeof *file->tensors)) == NULL)
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "%s: allocating the table of %zu tensors (%zu bytes) failed",
                         file->path, n, (n ? n : 1) * sizeof *file->tensors);
    if ((file->names = rmlp_malloc(names_len ? names_len : 1)) == NULL)
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "%s: allocating the names of %zu tensors (%zu bytes) failed",
                         file->path, n, names_len ? names_len : 1);
    char *name = file->names;
    json_object_foreach((json_t *)header, key, value) {
        if (strcmp(key, "__metadata__") == 0) continue;
        st_tensor *t = &file->tensors[file->count];
        rmlp_status status = parse_entry(file->path, key, value, data_len, t);
        if (status != RMLP_OK) return status;
        size_t len = strlen(key) + 1;
        memcpy(name, key, len);
        t->name = name;
        name += len;
        file->count++;
    }
    /* As the reference reader requires, the tensors tile the data section: sorted by offset,
     * each begins where the one before it ended (the first at 0; empty tensors too), and the
     * last ends where the file does. Earlier is an overlap, later a gap of bytes no tensor
     * owns, which is also what trailing bytes are. */
    qsort(file->tensors, file->count, sizeof *file->tensors, by_offset);
    const st_tensor *before = NULL; /* the tensor that ends at `end` */
    uint64_t end = 0;
    for (size_t i = 0; i < file->count; i++) {
        const st_tensor *t = &file->tensors[i];
        uint64_t begin = (uintptr_t)t->data;
        if (begin < end)
            return rmlp_fail(RMLP_ERR_FORMAT, fn, "%s: tensors '%s' and '%s' overlap", file->path, before->name,
                             t->name);
        if (begin > end)
            return rmlp_fail(RMLP_ERR_FORMAT, fn,
                             "%s: bytes [%llu, %llu) of the data section, before tensor '%s', belong to no tensor",
                             file->path, (unsigned long long)end, (unsigned long long)begin, t->name);
        end = begin + t->nbytes;
        before = t;
    }
    if (end != data_len)
        return rmlp_fail(RMLP_ERR_FORMAT, fn, "%s: %llu trailing byte%s after %s%s%s (the tensors end at byte %llu of "
                         "the %llu-byte data section)", file->path, (unsigned long long)(data_len - end),
                         data_len - end > 1 ? "s" : "", before ? "the last tensor '" : "a header without tensors",
                         before ? before->name : "", before ? "'" : "", (unsigned long long)end,
                         (unsigned long long)data_len);
    const char *data = (const char *)file->map + (file->map_len - data_len);
    for (size_t i = 0; i < file->count; i++) file->tensors[i].data = data + (uintptr_t)file->tensors[i].data;
    qsort(file->tensors, file->count, sizeof *file->tensors, by_name);
    return RMLP_OK;
}

/* Checks the header of the file's bytes. */
static rmlp_status check(st_file *file) {
    const unsigned char *bytes = file->map;
    uint64_t size = file->map_len, header_len = 0;
    if (size < 8)
        return rmlp_fail(RMLP_ERR_FORMAT, fn, "%s: %llu bytes is shorter than the 8-byte header length", file->path,
                         (unsigned long long)size);
    for (int i = 7; i >= 0; i--) header_len = header_len << 8 | bytes[i];
    if (header_len < 2)
        return rmlp_fail(RMLP_ERR_FORMAT, fn, "%s: header length %llu is too short for a JSON object", file->path,
                         (unsigned long long)header_len);
    if (header_len > size - 8)
        return rmlp_fail(RMLP_ERR_FORMAT, fn, "%s: header length %llu exceeds the file size %llu", file->path,
                         (unsigned long long)header_len, (unsigned long long)size);
    if (header_len > ST_MAX_HEADER)
        return rmlp_fail(RMLP_ERR_FORMAT, fn, "%s: header length %llu exceeds the limit of %llu bytes", file->path,
                         (unsigned long long)header_len, (unsigned long long)ST_MAX_HEADER);
    json_error_t error;
    memset(&error, 0, sizeof error);
    json_t *header = json_loadb((const char *)bytes + 8, (size_t)header_len, JSON_REJECT_DUPLICATES, &error);
    int byte_before_error = EOF;
    if (error.position > 0 && (uint64_t)error.position <= header_len) byte_before_error = bytes[8 + error.position - 1];
    if (header == NULL && config_json_out_of_memory(&error, byte_before_error))
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "%s: out of memory while jansson parsed the %llu-byte header",
                         file->path, (unsigned long long)header_len);
    if (header == NULL)
        return rmlp_fail(RMLP_ERR_FORMAT, fn, "%s: header is not valid JSON: %s at byte %d", file->path, error.text,
                         error.position);
    rmlp_status status = json_is_object(header) ? parse_header(file, header, size - 8 - header_len)
                                                : rmlp_fail(RMLP_ERR_FORMAT, fn, "%s: header is %s, not a JSON object",
                                                            file->path, config_json_kind(header));
    json_decref(header);
    return status;
}

/* An empty record for `path` (the name messages give) into *out. */
static rmlp_status new_file(const char *path, st_file **out) {
    *out = NULL;
    st_file *file = rmlp_calloc(1, sizeof *file);
    if (file == NULL)
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "%s: allocating the file's record (%zu bytes) failed", path,
                         sizeof *file);
    if ((file->path = rmlp_strdup(path)) == NULL) {
        free(file);
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "%s: allocating a copy of the path (%zu bytes) failed", path,
                         strlen(path) + 1);
    }
    *out = file;
    return RMLP_OK;
}

/* Checks the header of a file whose bytes are in place (when status is still OK); hands the
 * file to *out, or closes it and returns the error. */
static rmlp_status finish_open(st_file *file, rmlp_status status, st_file **out) {
    if (status == RMLP_OK) status = check(file);
    if (status != RMLP_OK) {
        st_close(file);
        return status;
    }
    *out = file;
    return RMLP_OK;
}

rmlp_status st_open_memory(const char *name, const void *bytes, size_t len, st_file **out) {
    *out = NULL;
    st_file *file;
    rmlp_status status = new_file(name, &file);
    if (status != RMLP_OK) return status;
    file->map = bytes;
    file->map_len = len;
    return finish_open(file, RMLP_OK, out);
}

rmlp_status st_open(const char *path, st_file **out) {
    *out = NULL;
    st_file *file;
    rmlp_status status = new_file(path, &file);
    if (status != RMLP_OK) return status;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a FIFO must not block the open: fstat refuses it */
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0)
        status = rmlp_fail(RMLP_ERR_IO, fn, "%s: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        status = rmlp_fail(RMLP_ERR_IO, fn, "%s: not a regular file", path);
    else if (st.st_size > 0) { /* an empty file cannot be mapped; check() refuses it as too short */
        void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) /* ENOMEM: no address space left, or too many mappings */
            status = rmlp_fail(errno == ENOMEM ? RMLP_ERR_OUT_OF_MEMORY : RMLP_ERR_IO, fn,
                               "%s: mmap of %lld bytes failed: %s", path, (long long)st.st_size, strerror(errno));
        else {
            file->map = map;
            file->map_len = (size_t)st.st_size;
            file->mapped = 1;
        }
    }
    if (fd >= 0) close(fd);
    return finish_open(file, status, out);
}

void st_close(st_file *file) {
    if (file == NULL) return;
    if (file->mapped) munmap((void *)file->map, file->map_len);
    free(file->tensors);
    free(file->names);
    free(file->path);
    free(file);
}

size_t st_count(const st_file *file) { return file->count; }

const st_tensor *st_at(const st_file *file, size_t index) { return index < file->count ? &file->tensors[index] : NULL; }

const st_tensor *st_find(const st_file *file, const char *name) {
    st_tensor key = {.name = name};
    return bsearch(&key, file->tensors, file->count, sizeof *file->tensors, by_name);
}

const char *st_path(const st_file *file) { return file->path; }
