/*
 * bench_cpu.h: one case of `radixmlp bench` on the CPU (cmd_bench.c): radix off, on, on with the
 * whole forward in compact space, and "last" (on, attention in compact space, the last layer's
 * post-attention work on each sequence's last row only: rmlp_forward_last), alternating --repeat
 * times, the fastest of each kept, with
 * the built-in attention; per mode the library's profile of that forward (rmlp_context_cpu_profile:
 * GEMMs, attention, elementwise work, gathers and scatters) and the plan's build time.
 */
#ifndef RMLP_BENCH_CPU_H
#define RMLP_BENCH_CPU_H

#include <stdio.h>

#include "bench_args.h"
#include "radix_mlp.h"
#include "workload.h"

/* The header line of the text table (nothing with --json). */
void bench_cpu_print_header(const bench_args *a);

/* Runs and prints the case `name` (its "on" plans at `threshold`); with dump, writes its line there.
 * Returns 0, or 1 after saying why on stderr. */
int bench_cpu_case(const bench_args *a, rmlp_model *model, const rmlp_model_config *cfg, const char *name,
                   double threshold, const workload *w, FILE *dump);

#endif
