/*
 * st_writer.c: see st_writer.h. Headers are written by hand (printf into a growing buffer),
 * not with a JSON library, so a test controls every byte of what the loader reads.
 */
#define _XOPEN_SOURCE 700

#include "st_writer.h"

#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void die(const char *what, const char *detail) {
    printf("FAIL: st_writer: %s %s\n", what, detail ? detail : "");
    exit(2);
}

static void *xrealloc(void *p, size_t bytes) {
    p = realloc(p, bytes ? bytes : 1);
    if (p == NULL) die("out of memory", NULL);
    return p;
}

static char *xstrdup(const char *s) {
    char *c = xrealloc(NULL, strlen(s) + 1);
    return strcpy(c, s);
}

/* ---- a growing string ---------------------------------------------------------------------- */

typedef struct sbuf {
    char *s;
    size_t len, cap;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) {
    for (;;) {
        va_list args;
        va_start(args, fmt);
        int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, args);
        va_end(args);
        if (n < 0) die("vsnprintf failed", fmt);
        if (b->s && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        b->cap = (b->len + (size_t)n + 1) * 2;
        b->s = xrealloc(b->s, b->cap);
    }
}

/* ---- safetensors ----------------------------------------------------------------------------- */

stw_tensor *stw_find(const stw *w, const char *name) {
    for (size_t i = 0; i < w->n; i++)
        if (strcmp(w->t[i].name, name) == 0) return &w->t[i];
    return NULL;
}

void stw_add(stw *w, const char *name, const char *dtype, uint32_t ndim, const uint64_t *shape, const void *data,
             size_t nbytes) {
    if (ndim > STW_MAX_DIMS || strlen(name) >= sizeof w->t[0].name || strlen(dtype) >= sizeof w->t[0].dtype)
        die("tensor too large for the writer:", name);
    stw_tensor *t = stw_find(w, name);
    if (t == NULL) {
        if (w->n == w->cap) {
            w->cap = w->cap ? 2 * w->cap : 16;
            w->t = xrealloc(w->t, w->cap * sizeof *w->t);
        }
        t = &w->t[w->n++];
        memset(t, 0, sizeof *t);
        strcpy(t->name, name);
    }
    strcpy(t->dtype, dtype);
    t->ndim = ndim;
    memcpy(t->shape, shape, ndim * sizeof *shape);
    t->data = xrealloc(t->data, nbytes);
    if (data != NULL)
        memcpy(t->data, data, nbytes);
    else
        memset(t->data, 0, nbytes);
    t->nbytes = nbytes;
}

int stw_remove(stw *w, const char *name) {
    stw_tensor *t = stw_find(w, name);
    if (t == NULL) return 0;
    free(t->data);
    memmove(t, t + 1, (size_t)(w->t + w->n - (t + 1)) * sizeof *t);
    w->n--;
    return 1;
}

void stw_free(stw *w) {
    for (size_t i = 0; i < w->n; i++) free(w->t[i].data);
    free(w->t);
    memset(w, 0, sizeof *w);
}

static FILE *xfopen(const char *path) {
    FILE *f = fopen(path, "wb");
    if (f == NULL) die("cannot create", path);
    return f;
}

static void xfclose(FILE *f, const char *path) {
    if (ferror(f) || fclose(f) != 0) die("writing failed:", path);
}

static void write_u64_le(FILE *f, uint64_t x) {
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(x >> (8 * i));
    fwrite(b, 1, 8, f);
}

void stw_write(const stw *w, const char *path, int align8) {
    sbuf h = {0};
    uint64_t offset = 0;
    sb_printf(&h, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (size_t i = 0; i < w->n; i++) {
        const stw_tensor *t = &w->t[i];
        sb_printf(&h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t->name, t->dtype);
        for (uint32_t d = 0; d < t->ndim; d++) sb_printf(&h, "%s%llu", d ? "," : "", (unsigned long long)t->shape[d]);
        sb_printf(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)offset,
                  (unsigned long long)(offset + t->nbytes));
        offset += t->nbytes;
    }
    sb_printf(&h, "}");
    while (align8 && h.len % 8 != 0) sb_printf(&h, " ");
    FILE *f = xfopen(path);
    write_u64_le(f, h.len);
    fwrite(h.s, 1, h.len, f);
    for (size_t i = 0; i < w->n; i++) fwrite(w->t[i].data, 1, w->t[i].nbytes, f);
    xfclose(f, path);
    free(h.s);
}

void stw_write_raw(const char *path, uint64_t header_len, const char *header, uint64_t data_len) {
    FILE *f = xfopen(path);
    write_u64_le(f, header_len);
    fwrite(header, 1, strlen(header), f);
    xfclose(f, path);
    if (truncate(path, (off_t)(8 + strlen(header) + data_len)) != 0) die("truncate failed:", path);
}

void stw_write_bytes(const char *path, const void *bytes, size_t n) {
    FILE *f = xfopen(path);
    fwrite(bytes, 1, n, f);
    xfclose(f, path);
}

/* ---- JSON objects ------------------------------------------------------------------------- */

void stw_json_set(stw_json *j, const char *key, const char *raw_value) {
    size_t i = 0;
    while (i < j->n && strcmp(j->key[i], key) != 0) i++;
    if (raw_value == NULL) {
        if (i == j->n) return;
        free(j->key[i]);
        free(j->value[i]);
        memmove(&j->key[i], &j->key[i + 1], (j->n - i - 1) * sizeof j->key[0]);
        memmove(&j->value[i], &j->value[i + 1], (j->n - i - 1) * sizeof j->value[0]);
        j->n--;
        return;
    }
    if (i == j->n) {
        if (j->n == STW_JSON_MAX) die("too many JSON keys at", key);
        j->key[j->n] = xstrdup(key);
        j->value[j->n++] = NULL;
    }
    free(j->value[i]);
    j->value[i] = xstrdup(raw_value);
}

char *stw_json_string(const stw_json *j) {
    sbuf b = {0};
    sb_printf(&b, "{");
    for (size_t i = 0; i < j->n; i++) sb_printf(&b, "%s\n  \"%s\": %s", i ? "," : "", j->key[i], j->value[i]);
    sb_printf(&b, "\n}\n");
    return b.s;
}

void stw_json_write(const stw_json *j, const char *path) {
    char *text = stw_json_string(j);
    stw_write_bytes(path, text, strlen(text));
    free(text);
}

void stw_json_copy(stw_json *dst, const stw_json *src) {
    memset(dst, 0, sizeof *dst);
    for (size_t i = 0; i < src->n; i++) stw_json_set(dst, src->key[i], src->value[i]);
}

void stw_json_free(stw_json *j) {
    for (size_t i = 0; i < j->n; i++) {
        free(j->key[i]);
        free(j->value[i]);
    }
    memset(j, 0, sizeof *j);
}

/* ---- folders ------------------------------------------------------------------------------ */

char *stw_mkdtemp(void) {
    const char *base = getenv("TMPDIR");
    sbuf b = {0};
    sb_printf(&b, "%s/rmlp_model_XXXXXX", base && base[0] ? base : "/tmp");
    if (mkdtemp(b.s) == NULL) die("mkdtemp failed:", b.s);
    return b.s;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

void stw_rmtree(const char *dir) {
    if (nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0) die("removing failed:", dir);
}
