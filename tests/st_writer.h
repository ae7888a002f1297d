/*
 * st_writer.h: writes safetensors and JSON files from C, so tests make their own checkpoints,
 * valid and corrupt, in a temporary folder (no Python, no fixtures on disk). Every function
 * aborts the test on an I/O or allocation failure: a test that cannot write its input has
 * nothing to report.
 */
#ifndef RMLP_TESTS_ST_WRITER_H
#define RMLP_TESTS_ST_WRITER_H

#include <stddef.h>
#include <stdint.h>

#define STW_MAX_DIMS 16

typedef struct stw_tensor {
    char name[128];
    char dtype[16]; /* written as given: "F32", "BF16", "I64", ... */
    uint32_t ndim;
    uint64_t shape[STW_MAX_DIMS];
    unsigned char *data; /* nbytes */
    size_t nbytes;
} stw_tensor;

/* Tensors in the order they are written; start from stw w = {0}. */
typedef struct stw {
    stw_tensor *t;
    size_t n, cap;
} stw;

/* Adds a tensor (copying data; data NULL: zeros), or replaces the one of that name in place. */
void stw_add(stw *w, const char *name, const char *dtype, uint32_t ndim, const uint64_t *shape, const void *data,
             size_t nbytes);
stw_tensor *stw_find(const stw *w, const char *name);
/* Removes the tensor of that name; 0 when there is none. */
int stw_remove(stw *w, const char *name);
void stw_free(stw *w);

/* Writes the tensors back to back after a header with an "__metadata__" entry; the header is
 * padded with spaces to a multiple of 8 bytes when align8 (as Hugging Face writes it), else left
 * unpadded so the data section is misaligned. */
void stw_write(const stw *w, const char *path, int align8);
/* A raw file: header_len as 8 little-endian bytes, then header, then data_len zero bytes (a
 * sparse extension, so large sizes cost nothing). */
void stw_write_raw(const char *path, uint64_t header_len, const char *header, uint64_t data_len);
void stw_write_bytes(const char *path, const void *bytes, size_t n);

/* A JSON object of raw JSON values, keys in insertion order. */
#define STW_JSON_MAX 64
typedef struct stw_json {
    size_t n;
    char *key[STW_JSON_MAX];
    char *value[STW_JSON_MAX];
} stw_json;

/* Sets key to a raw JSON value ("16", "\"silu\"", "null", "{...}"); NULL removes the key. */
void stw_json_set(stw_json *j, const char *key, const char *raw_value);
/* The object as text, malloc'ed. */
char *stw_json_string(const stw_json *j);
void stw_json_write(const stw_json *j, const char *path);
void stw_json_copy(stw_json *dst, const stw_json *src);
void stw_json_free(stw_json *j);

/* A new folder under $TMPDIR (or /tmp), malloc'ed; stw_rmtree removes it and everything in it. */
char *stw_mkdtemp(void);
void stw_rmtree(const char *dir);

#endif
