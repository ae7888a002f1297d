/*
 * bench_decode.h: `radixmlp bench --decode`: decode throughput of a generation session on the CPU
 * (rmlp_generate_*), in one run: M sequences sharing a prefix of P tokens, each with a distinct
 * 16-token suffix, then --decode-steps steps (default 16) with fixed pseudo-random tokens, three
 * ways on the same tokens: batched with shared-prefix attention (one M-row step), batched with
 * per-sequence attention, and the M sequences one at a time (a session of one each). Cases: P =
 * 1,024 with M = 1, 8, 32, 64, and P = 2,048 with M = 32. Per case: ms per step and tokens/s of each
 * way, batched over one-at-a-time, attention ms per step with and without shared-prefix attention
 * and their ratio, and attention's share of a batched step. Only the steps are timed (the prefill
 * is not); the cache is cleared between the ways, so no way finds another's rows. With --repeat R
 * the three ways alternate R times and the fastest run of each is kept (a shared machine's slow
 * spells hit all alike).
 */
#ifndef RMLP_TOOLS_BENCH_DECODE_H
#define RMLP_TOOLS_BENCH_DECODE_H

#include <stddef.h>

#include "radix_mlp.h"

/* Runs the cases whose name ("p1024_m32") contains one of only[0 .. n_only) (all for none); a
 * JSON line per case with json, else a table row. Returns 0, or 1 after printing why. */
int bench_decode(rmlp_model *model, const rmlp_model_config *cfg, unsigned long steps, unsigned long repeat,
                 const char *const *only, size_t n_only, int json);

#endif
