/*
 * bench_batches.c: the --batches file of bench_batches.h, one jansson tree per line. Every
 * array is checked here (ids are u32, cu_seqlens starts at 0, never decreases and ends at the
 * number of ids), so a bad file is a message naming the line and key, not a failed run later;
 * whether the ids fit the model's vocabulary is the library's check.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_batches.h"
#include "cli.h"

/* key of `line` as u32s into a new array of *n values (at least one); -1 after printing why. */
static int read_u32s(const char *where, json_t *line, const char *key, uint32_t **out, size_t *n) {
    json_t *array = json_object_get(line, key);
    if (!json_is_array(array) || json_array_size(array) == 0) {
        fprintf(stderr, "radixmlp: %s: \"%s\" is not a non-empty array\n", where, key);
        return -1;
    }
    *n = json_array_size(array);
    *out = malloc(*n * sizeof(uint32_t));
    if (*out == NULL) {
        fprintf(stderr, "radixmlp: %s: out of memory\n", where);
        return -1;
    }
    for (size_t i = 0; i < *n; i++) {
        json_t *v = json_array_get(array, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > (json_int_t)UINT32_MAX) {
            fprintf(stderr, "radixmlp: %s: %s[%zu] is not a whole number from 0 to 2^32-1\n", where, key, i);
            return -1;
        }
        (*out)[i] = (uint32_t)json_integer_value(v);
    }
    return 0;
}

/* One line into b; -1 after printing why. */
static int read_batch(const char *where, json_t *line, bench_batch *b) {
    json_t *name = json_object_get(line, "case");
    if (!json_is_string(name)) {
        fprintf(stderr, "radixmlp: %s: \"case\" (the batch's name) is not a string\n", where);
        return -1;
    }
    size_t n_cu = 0, n_pos = 0;
    workload *w = &b->w;
    if ((b->name = strdup(json_string_value(name))) == NULL ||
        read_u32s(where, line, "input_ids", &w->input_ids, &w->n_tokens) != 0 ||
        read_u32s(where, line, "cu_seqlens", &w->cu_seqlens, &n_cu) != 0)
        return -1;
    w->n_seqs = n_cu - 1;
    if (n_cu < 2 || w->cu_seqlens[0] != 0 || w->cu_seqlens[w->n_seqs] != w->n_tokens) {
        fprintf(stderr, "radixmlp: %s: cu_seqlens must run from 0 to the %zu input_ids in at least two entries\n",
                where, w->n_tokens);
        return -1;
    }
    for (size_t s = 0; s < w->n_seqs; s++)
        if (w->cu_seqlens[s + 1] < w->cu_seqlens[s]) {
            fprintf(stderr, "radixmlp: %s: cu_seqlens[%zu]=%u < cu_seqlens[%zu]=%u\n", where, s + 1,
                    w->cu_seqlens[s + 1], s, w->cu_seqlens[s]);
            return -1;
        }
    if (json_object_get(line, "position_ids") != NULL) {
        if (read_u32s(where, line, "position_ids", &w->position_ids, &n_pos) != 0) return -1;
        if (n_pos != w->n_tokens) {
            fprintf(stderr, "radixmlp: %s: %zu position_ids for %zu input_ids\n", where, n_pos, w->n_tokens);
            return -1;
        }
        return 0;
    }
    if ((w->position_ids = malloc(w->n_tokens * sizeof(uint32_t))) == NULL) {
        fprintf(stderr, "radixmlp: %s: out of memory\n", where);
        return -1;
    }
    for (size_t s = 0; s < w->n_seqs; s++)
        for (uint32_t row = w->cu_seqlens[s]; row < w->cu_seqlens[s + 1]; row++)
            w->position_ids[row] = row - w->cu_seqlens[s];
    return 0;
}

void bench_batches_free(bench_batch *batches, size_t n) {
    for (size_t i = 0; batches && i < n; i++) {
        free(batches[i].name);
        workload_free(&batches[i].w);
    }
    free(batches);
}

int bench_batches_read(const char *path, bench_batch **out, size_t *n_out) {
    *out = NULL, *n_out = 0;
    FILE *in = fopen(path, "r");
    if (in == NULL) {
        fprintf(stderr, "radixmlp: --batches %s: cannot open it: %s\n", path, strerror(errno));
        return -1;
    }
    char *text = NULL, where[512];
    size_t cap = 0, line_no = 0, n = 0;
    bench_batch *batches = NULL;
    int rc = 0;
    for (ssize_t got; rc == 0 && (got = getline(&text, &cap, in)) > 0;) {
        snprintf(where, sizeof where, "--batches %s:%zu", path, ++line_no);
        int kind = cli_line_kind(where, text, (size_t)got); /* a blank line is skipped, a NUL byte refused */
        if (kind != 0) {
            rc = kind < 0 ? -1 : 0;
            continue;
        }
        json_error_t error;
        json_t *line = json_loads(text, JSON_REJECT_DUPLICATES, &error);
        bench_batch *grown = realloc(batches, (n + 1) * sizeof *batches);
        if (grown) batches = grown, batches[n++] = (bench_batch){0};
        if (line == NULL || !json_is_object(line)) {
            fprintf(stderr, "radixmlp: %s: not a JSON object%s%s\n", where, line ? "" : ": ", line ? "" : error.text);
            rc = -1;
        } else if (grown == NULL) {
            fprintf(stderr, "radixmlp: %s: out of memory\n", where);
            rc = -1;
        } else {
            rc = read_batch(where, line, &batches[n - 1]);
        }
        json_decref(line);
    }
    free(text);
    if (rc == 0 && ferror(in)) {
        fprintf(stderr, "radixmlp: --batches %s: reading it failed: %s\n", path, strerror(errno));
        rc = -1;
    }
    fclose(in);
    if (rc == 0 && n == 0) {
        fprintf(stderr, "radixmlp: --batches %s holds no batch\n", path);
        rc = -1;
    }
    if (rc != 0) {
        bench_batches_free(batches, n);
        return -1;
    }
    *out = batches, *n_out = n;
    return 0;
}
