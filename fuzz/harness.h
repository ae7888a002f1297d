/*
 * harness.h: what the fuzz targets share. The readers under test (fuzz_safetensors, fuzz_config)
 * open paths, so each input is written to a file: under libFuzzer one fixed file per process
 * under $TMPDIR; when fuzz/replay.c runs a seed corpus (CTest, no libFuzzer) a file named after
 * the seed, so messages are stable. In replay mode every target records each refused seed as a
 * row of docs/errors.md's bad-input table (tests/bad_input_row.h).
 */
#ifndef RMLP_FUZZ_HARNESS_H
#define RMLP_FUZZ_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "radix_mlp.h"

/* The name of the seed being replayed, set by fuzz/replay.c; NULL under libFuzzer. */
const char *fuzz_replaying(void);

/* Prints "<target>: invariant violated: what[: detail]" and aborts (libFuzzer keeps the input). */
void fuzz_violation(const char *target, const char *what, const char *detail);

/* Writes the input to the target's file and returns its path (valid until the next call). */
const char *fuzz_write_input(const char *target, const char *suffix, const uint8_t *data, size_t size);

/* In replay mode: appends the docs/errors.md row for this seed's failed read (status != RMLP_OK). */
void fuzz_record_refusal(const char *target, rmlp_status status, const char *message);

#endif
