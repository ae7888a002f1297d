/*
 * fuzz_safetensors.c: libFuzzer target for the safetensors header reader (model/safetensors.h,
 * internal to the library). Every input is opened twice: from memory with st_open_memory (the
 * input buffer itself, so AddressSanitizer catches any read past its end, which a page-rounded
 * mapping would hide) and from a file with st_open (one fixed file per process under $TMPDIR),
 * and both must agree on the status, the message and the tensor table.
 *
 * An open that fails must return FORMAT or MODEL (an unsupported dtype; never IO or OUT_OF_MEMORY:
 * the file was just written and inputs are small) with a message "rmlp_model_load: <the file's
 * name>: ..." and leave *out NULL.
 * An open that succeeds must hand out tensors that keep the header's promises, checked here
 * against the header as jansson reads it independently: one tensor per header key but
 * "__metadata__", each at its data_offsets inside the data section, nbytes == product(shape) x
 * the dtype's size, the tensors tiling the data section in offset order (each begins where the
 * one before it ends, the first at its start, the last at the file's end: no overlap, gap or
 * trailing byte), names NUL-terminated, unique, sorted and found by st_find. A violation
 * prints what broke and aborts, which libFuzzer saves as a crash.
 */
#define _POSIX_C_SOURCE 200809L

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "model/safetensors.h"
#include "harness.h"
#include "radix_mlp.h"

static void violation(const char *what, const char *detail) { fuzz_violation("fuzz_safetensors", what, detail); }

static uint64_t dtype_bytes(rmlp_dtype dtype) {
    switch (dtype) {
    case RMLP_DTYPE_F32: return 4;
    case RMLP_DTYPE_F16:
    case RMLP_DTYPE_BF16: return 2;
    default: violation("tensor with a dtype other than F32, F16, BF16", NULL); return 0;
    }
}

/* By position, an empty tensor before a non-empty one at the same place. */
static int by_data(const void *a, const void *b) {
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    uintptr_t px = (uintptr_t)x->data, py = (uintptr_t)y->data;
    if (px != py) return px < py ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

/* The tensor table of an open file against the bytes it was read from. */
static void check_tensors(const st_file *file, const uint8_t *data, size_t size) {
    char detail[600];
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; i--) header_len = header_len << 8 | data[i];
    if (size < 8 || header_len > size - 8) violation("opened a file whose header runs past its end", NULL);
    const uint8_t *section = data + 8 + header_len, *end = data + size;

    size_t n = st_count(file);
    const st_tensor **by_pos = malloc((n ? n : 1) * sizeof *by_pos);
    if (by_pos == NULL) violation("out of memory in the checker", NULL);
    for (size_t i = 0; i < n; i++) {
        const st_tensor *t = st_at(file, i);
        if (t == NULL || t->name == NULL) violation("st_at gave no tensor or no name", NULL);
        if (i > 0 && strcmp(st_at(file, i - 1)->name, t->name) >= 0)
            violation("tensor names not strictly sorted (duplicate or out of order)", t->name);
        if (st_find(file, t->name) != t) violation("st_find does not find its own tensor", t->name);
        if (t->ndim > ST_MAX_DIMS) violation("ndim above ST_MAX_DIMS", t->name);
        uint64_t want = dtype_bytes(t->dtype);
        for (uint32_t d = 0; d < t->ndim; d++) {
            if (t->shape[d] != 0 && want > UINT64_MAX / t->shape[d]) violation("product(shape) overflows", t->name);
            want *= t->shape[d];
        }
        if (t->nbytes != want) {
            snprintf(detail, sizeof detail, "'%s': nbytes %llu, dtype x shape %llu", t->name,
                     (unsigned long long)t->nbytes, (unsigned long long)want);
            violation("nbytes != product(shape) x dtype size", detail);
        }
        const uint8_t *p = t->data;
        if (p < section || p > end || t->nbytes > (uint64_t)(end - p)) {
            snprintf(detail, sizeof detail, "'%s': [%td, +%llu) outside the data section [%td, %zu)", t->name,
                     p - data, (unsigned long long)t->nbytes, section - data, size);
            violation("tensor bytes outside the data section", detail);
        }
        by_pos[i] = t;
    }
    qsort(by_pos, n, sizeof *by_pos, by_data);
    const uint8_t *next = section; /* where the next tensor must begin */
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = by_pos[i]->data;
        if (p < next) violation("tensors overlap", by_pos[i]->name);
        if (p > next) violation("bytes of the data section before a tensor belong to no tensor", by_pos[i]->name);
        next = p + by_pos[i]->nbytes;
    }
    if (next != end) violation("trailing bytes after the last tensor", NULL);
    free(by_pos);

    /* The header read independently: every entry is in the table, at its data_offsets. */
    json_t *header = json_loadb((const char *)data + 8, (size_t)header_len, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(header)) violation("opened a file whose header jansson does not read as an object", NULL);
    const char *key;
    json_t *entry;
    size_t entries = 0;
    json_object_foreach(header, key, entry) {
        if (strcmp(key, "__metadata__") == 0) continue;
        entries++;
        const st_tensor *t = st_find(file, key);
        if (t == NULL) violation("a header entry is missing from the table", key);
        json_int_t begin = json_integer_value(json_array_get(json_object_get(entry, "data_offsets"), 0));
        if (begin < 0 || (uintptr_t)t->data - (uintptr_t)section != (uint64_t)begin)
            violation("tensor not at its data_offsets", key);
    }
    json_decref(header);
    if (entries != n) {
        snprintf(detail, sizeof detail, "%zu entries in the header, %zu tensors", entries, n);
        violation("tensor count", detail);
    }
}

/* The error of a failed open: a status of the reader's, a message naming the file. */
static void check_error(const char *file_path, rmlp_status status, const st_file *file) {
    char detail[700];
    const char *message = rmlp_last_error();
    snprintf(detail, sizeof detail, "status %d (%s), message \"%s\"", (int)status, rmlp_status_string(status), message);
    if (file != NULL) violation("*out not NULL after a failed open", detail);
    /* Inputs are small and the file was just written: IO or OUT_OF_MEMORY would be a format
     * error misreported (say, a JSON syntax error taken for jansson's failure to allocate). */
    if (status != RMLP_ERR_FORMAT && status != RMLP_ERR_MODEL) violation("unexpected status", detail);
    char prefix[600];
    snprintf(prefix, sizeof prefix, "rmlp_model_load: %s: ", file_path);
    if (strncmp(message, prefix, strlen(prefix)) != 0 || message[strlen(prefix)] == '\0')
        violation("error message does not name the file", detail);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *file_path = fuzz_write_input("fuzz_safetensors", "", data, size);
    st_file *mem = NULL, *disk = NULL;
    rmlp_clear_error(); /* as the exported entry point does before it opens a file */
    rmlp_status mem_status = st_open_memory(file_path, data, size, &mem);
    char mem_message[512];
    snprintf(mem_message, sizeof mem_message, "%s", rmlp_last_error());
    if (mem_status == RMLP_OK && mem_message[0] != '\0') violation("success set an error message", mem_message);
    if (mem_status == RMLP_OK)
        check_tensors(mem, data, size);
    else
        check_error(file_path, mem_status, mem);

    rmlp_clear_error();
    rmlp_status disk_status = st_open(file_path, &disk);
    if (disk_status != mem_status || strcmp(mem_message, rmlp_last_error()) != 0) {
        char detail[1200];
        snprintf(detail, sizeof detail, "memory: %d \"%s\", file: %d \"%s\"", (int)mem_status, mem_message,
                 (int)disk_status, rmlp_last_error());
        violation("st_open and st_open_memory disagree", detail);
    }
    if (disk_status == RMLP_OK) {
        if (st_count(disk) != st_count(mem) || strcmp(st_path(disk), file_path) != 0)
            violation("st_open and st_open_memory give different tables", NULL);
        /* Offsets from the first tensor's: the mapping's own address is not visible. */
        for (size_t i = 0; i < st_count(mem); i++) {
            const st_tensor *a = st_at(mem, i), *b = st_at(disk, i);
            uintptr_t a_offset = (uintptr_t)a->data - (uintptr_t)st_at(mem, 0)->data;
            uintptr_t b_offset = (uintptr_t)b->data - (uintptr_t)st_at(disk, 0)->data;
            if (strcmp(a->name, b->name) != 0 || a->dtype != b->dtype || a->ndim != b->ndim ||
                a->nbytes != b->nbytes || memcmp(a->shape, b->shape, sizeof a->shape) != 0 || a_offset != b_offset ||
                memcmp(a->data, b->data, a->nbytes) != 0)
                violation("st_open and st_open_memory give different tensors", a->name);
        }
    } else {
        check_error(file_path, disk_status, disk);
        fuzz_record_refusal("fuzz_safetensors", disk_status, rmlp_last_error());
    }
    st_close(disk);
    st_close(mem);
    return 0;
}
