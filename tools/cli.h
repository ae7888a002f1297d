/*
 * cli.h: what the radixmlp subcommands share: strict number parsing (a bad value is an error
 * naming the flag, never a silent default) and order statistics of timings.
 */
#ifndef RMLP_TOOLS_CLI_H
#define RMLP_TOOLS_CLI_H

#include <stddef.h>

/* Whole number in [0, max] into *out; prints "radixmlp: FLAG expects ..." and returns -1 otherwise. */
int cli_parse_ulong(const char *flag, const char *text, unsigned long max, unsigned long *out);
/* Finite number into *out; prints an error and returns -1 otherwise. */
int cli_parse_double(const char *flag, const char *text, double *out);

/* Sorts values[0..n) ascending (n >= 1) and returns the median. */
double cli_sort_median(double *values, size_t n);

/* Wall clock in milliseconds (monotonic). */
double cli_now_ms(void);

int cmd_plan(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_bench(int argc, char **argv);

#endif
