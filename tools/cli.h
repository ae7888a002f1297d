/*
 * cli.h: what the radixmlp subcommands share: strict number parsing (a bad value is an error
 * naming the flag, never a silent default) and order statistics of timings.
 */
#ifndef RMLP_TOOLS_CLI_H
#define RMLP_TOOLS_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "radix_mlp.h"

/* Whole number in [0, max] into *out; prints "radixmlp: FLAG expects ..." and returns -1 otherwise. */
int cli_parse_ulong(const char *flag, const char *text, unsigned long max, unsigned long *out);
/* Whole number in [1, max] (a count: 0 is an error, said as such). */
int cli_parse_count(const char *flag, const char *text, unsigned long max, unsigned long *out);
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
 * starts). Returns 0, or -1 after printing an error naming the file and line. */
int cli_read_jsonl(const char *path, cli_sequences *seqs);

int cmd_plan(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_bench(int argc, char **argv);

#endif
