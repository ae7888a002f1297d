/*
 * bench_dump.h: `radixmlp bench --dump-batches FILE`: one JSON line per case with the batch as
 * the bench ran it (input_ids already reduced to the model's vocabulary, position_ids,
 * cu_seqlens) and what the bench measured and computed on it (times, and the radix-on run's last
 * hidden states pooled per sequence: last token and mean), so that a peer
 * (bench/peer_transformers.py) can run the very same batch on the very same checkpoint and
 * compare both its time and its outputs.
 */
#ifndef RMLP_TOOLS_BENCH_DUMP_H
#define RMLP_TOOLS_BENCH_DUMP_H

#include <stdint.h>
#include <stdio.h>

#include "workload.h"

typedef struct bench_dump_row {
    const char *case_name;
    const char *device; /* "cpu" or "cuda" */
    const char *dtype;  /* "f32", "f16" or "bf16" */
    const char *timing; /* what ms_off / ms_on are: "min" or "median" */
    unsigned long layers;
    uint32_t hidden_size;
    uint32_t n_compact;
    double ms_off, ms_on;
    const float *last_on; /* (n_seqs, hidden_size) or NULL: the on run's last-token hidden states */
    const float *mean_on; /* (n_seqs, hidden_size) or NULL: the on run's mean over each sequence */
} bench_dump_row;

/* Writes one line for `w` and `row` to f (the file `path`) and flushes it. Returns 0, or -1 after
 * printing why ("radixmlp: writing PATH failed: WHY"). */
int bench_dump_write(FILE *f, const char *path, const workload *w, const bench_dump_row *row);

#endif
