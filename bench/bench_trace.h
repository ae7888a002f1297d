/*
 * bench_trace.h: `radixmlp bench --trace NAME`: a service's stream of batches through a context
 * without and with the prefix cache, in one run (the two alternate batch by batch, on the same
 * plans), on the CPU. Traces (deterministic):
 *   rerank       Q queries (8) x P passages each (--passages, default 32), every sequence a shared
 *                template + its query + a passage, pairs shuffled across queries, batches of 32
 *   long_prefix  one 2,048-token instruction + documents of 4-12 tokens, batches of 32, 16 batches
 *   no_sharing   random sequences of 64-128 tokens, batches of 32, 8 batches
 * Per trace: batches, tokens, milliseconds and tokens/s without and with the cache, the speedup,
 * the cache's hit rate (hit rows over compact rows looked up), median ms per batch, rows evicted,
 * batches bypassed, and max |without - with| of the outputs (compact rows, last hidden states).
 */
#ifndef RMLP_TOOLS_BENCH_TRACE_H
#define RMLP_TOOLS_BENCH_TRACE_H

#include <stddef.h>

#include "radix_mlp.h"

/* Runs the trace `name` (or every one for "all"); a JSON line per trace with json, else a table
 * row. Returns 0, or 1 after printing why. */
int bench_trace(const char *name, rmlp_model *model, const rmlp_model_config *cfg, unsigned long cache_mb,
                unsigned long passages, int json);

/* Whether `name` is a trace (or "all"). */
int bench_trace_known(const char *name);

#endif
