/*
 * cli.h: what the radixmlp subcommands share (the benchmarks' here, the others' in tools/, which
 * include bench/ and not the other way round): strict number parsing (a bad value is an error
 * naming the flag, never a silent default), reading JSONL input, ending an output file with its
 * errors reported, and order statistics of timings.
 */
#ifndef RMLP_BENCH_CLI_H
#define RMLP_BENCH_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "radix_mlp.h"

/* Whole number in [0, max] into *out (decimal digits only: no sign, space or trailing text);
 * prints "radixmlp: FLAG expects ..." and returns -1 otherwise. Every numeric option goes
 * through this or the helpers below. */
int cli_parse_ulong(const char *flag, const char *text, unsigned long max, unsigned long *out);
/* Whole number in [1, max] (a count: 0 is an error, said as such). */
int cli_parse_count(const char *flag, const char *text, unsigned long max, unsigned long *out);
/* Comma-separated whole numbers, each in [0, max], into out[0 .. *n) (at least one, at most cap);
 * prints an error naming FLAG and returns -1 otherwise (an empty item, a bad one, too many). */
int cli_parse_ulong_list(const char *flag, const char *text, unsigned long max, unsigned long *out, size_t cap,
                         size_t *n);
/* Where attention runs: "full", "compact" or "auto" (RMLP_ATTENTION_*); prints an error and
 * returns -1 otherwise. */
int cli_parse_attention(const char *flag, const char *text, rmlp_attention_space *out);
const char *cli_attention_name(rmlp_attention_space space);

/* The gate's rule: "distinct" or "tei" (RMLP_GATE_*); prints an error and returns -1 otherwise. */
int cli_parse_gate(const char *flag, const char *text, rmlp_gate *out);
/* "distinct" or "tei". */
const char *cli_gate_name(rmlp_gate gate);
/* Finite number into *out; prints an error and returns -1 otherwise. */
int cli_parse_double(const char *flag, const char *text, double *out);

/* Sorts values[0..n) ascending (n >= 1) and returns the median. */
double cli_sort_median(double *values, size_t n);

/* Wall clock in milliseconds (monotonic). */
double cli_now_ms(void);

/* Whether a bench case named `name` is wanted: --case fragments only[0 .. n_only) (all for none). */
bool cli_case_wanted(const char *name, const char *const *only, size_t n_only);

/* Sequences read from a JSONL file of {"input_ids": [...]} lines (radixmlp run and generate). */
typedef struct cli_sequences {
    uint32_t *ids;    /* (n_tokens) */
    uint32_t *starts; /* (n_seqs + 1) */
    size_t n_tokens, n_seqs;
} cli_sequences;

/* Reads every line's input_ids (at least one each; "-": stdin) into seqs (the caller frees ids and
 * starts). Returns 0, or -1 after printing an error naming the file and line (seqs then empty). */
int cli_read_jsonl(const char *path, cli_sequences *seqs);

/* What a line of len bytes read by getline holds: 1 when only whitespace (skipped), 0 when text,
 * -1 after printing "radixmlp: WHERE: ..." when it holds a NUL byte (JSON text never does). */
int cli_line_kind(const char *where, const char *line, size_t len);

/* Ends writing f (NAME in messages): flushes it and, unless it is stdout, closes it. Returns 0, or
 * -1 after printing "radixmlp: writing NAME failed: WHY" when a write, the flush or the close
 * failed (a full disk: every command that writes ends with this, so none exits 0 on a lost write). */
int cli_finish_output(FILE *f, const char *name);

int cmd_bench(int argc, char **argv); /* cmd_bench.c: the benchmarks' modes (radixmlp bench) */

#endif
