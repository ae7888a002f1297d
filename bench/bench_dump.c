/*
 * bench_dump.c: the JSON lines of bench_dump.h, written with fprintf (arrays of up to ~10^5
 * numbers per line; no JSON tree is built). Floats are written with 9 significant digits, so
 * they read back as the same f32; a non-finite number is written as null (JSON has no NaN).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench_dump.h"

static void write_u32s(FILE *f, const char *key, const uint32_t *v, size_t n) {
    fprintf(f, ", \"%s\": [", key);
    for (size_t i = 0; i < n; i++) fprintf(f, i ? ",%u" : "%u", v[i]);
    fputc(']', f);
}

static void write_number(FILE *f, double v, const char *format) {
    if (isfinite(v)) fprintf(f, format, v);
    else fputs("null", f);
}

/* (rows, cols) floats as a list of lists. */
static void write_matrix(FILE *f, const char *key, const float *m, size_t rows, size_t cols) {
    fprintf(f, ", \"%s\": [", key);
    for (size_t r = 0; r < rows; r++) {
        fputs(r ? ",[" : "[", f);
        for (size_t c = 0; c < cols; c++) {
            if (c) fputc(',', f);
            write_number(f, m[r * cols + c], "%.9g");
        }
        fputc(']', f);
    }
    fputc(']', f);
}

int bench_dump_write(FILE *f, const char *path, const workload *w, const bench_dump_row *row) {
    fprintf(f, "{\"case\": \"%s\", \"device\": \"%s\", \"dtype\": \"%s\", \"timing\": \"%s\", \"layers\": %lu, "
               "\"hidden_size\": %u, \"n_seqs\": %zu, \"n_tokens\": %zu, \"n_compact\": %u, \"ms_off\": ",
            row->case_name, row->device, row->dtype, row->timing, row->layers, row->hidden_size, w->n_seqs,
            w->n_tokens, row->n_compact);
    write_number(f, row->ms_off, "%.4f");
    fputs(", \"ms_on\": ", f);
    write_number(f, row->ms_on, "%.4f");
    write_u32s(f, "input_ids", w->input_ids, w->n_tokens);
    write_u32s(f, "position_ids", w->position_ids, w->n_tokens);
    write_u32s(f, "cu_seqlens", w->cu_seqlens, w->n_seqs + 1);
    if (row->last_on) write_matrix(f, "last_on", row->last_on, w->n_seqs, row->hidden_size);
    if (row->mean_on) write_matrix(f, "mean_on", row->mean_on, w->n_seqs, row->hidden_size);
    fputs("}\n", f);
    if (fflush(f) != 0 || ferror(f)) { /* errno: of the write that failed */
        fprintf(stderr, "radixmlp: writing %s failed: %s (the batch of %s)\n", path, strerror(errno), row->case_name);
        return -1;
    }
    return 0;
}
