/*
 * bench_batches.h: `radixmlp bench --batches FILE`: batches for the bench read from a file instead
 * of the built-in synthetic cases (real text, tokenized elsewhere: tools/real_model_demo.py
 * --dump-batches writes such a file). FILE holds JSON lines, one batch each:
 *   {"case": NAME, "input_ids": [...], "cu_seqlens": [0, ..., n_tokens], "position_ids": [...]}
 * with the sequences back to back in input_ids; position_ids may be left out (0..len-1 in each
 * sequence) and other keys are ignored, so the lines `radixmlp bench --dump-batches` writes read
 * back as the very batches it ran.
 */
#ifndef RMLP_TOOLS_BENCH_BATCHES_H
#define RMLP_TOOLS_BENCH_BATCHES_H

#include <stddef.h>

#include "workload.h"

typedef struct bench_batch {
    char *name;
    workload w;
} bench_batch;

/* Reads every line of `path` into *out (n_out batches, at least one). Returns 0, or -1 after
 * printing what is wrong and where (file and line) to stderr. */
int bench_batches_read(const char *path, bench_batch **out, size_t *n_out);

void bench_batches_free(bench_batch *batches, size_t n);

#endif
