/*
 * serve_cost.h: what `radixmlp bench --serve` charges a batch (serve_sim.h). `measured`: the CPU
 * time of its real forward (plan, forward, pooling), as before. `model` (--cost model): a time
 * computed from what the batch computes,
 *
 *   t = a + b N' + c R + d P
 *
 * N' the plan's compact rows (each looked up in the prefix cache, and read back from it), R those
 * it computes (not found in the cache), P the attention score pairs of those rows (a row at
 * position p of its path attends p + 1 keys). The batch's tokens N and sequences B add nothing the
 * fit can tell from noise. The coefficients are fixed (serve_cost_default): a run charged by the
 * model depends on nothing measured, so two runs of one command give the same figures, to the
 * last digit, on any machine. The batch still runs for real (the prefix
 * cache is filled by it, and its CPU time is kept), so the bench prints how far the model is from
 * the measured times of the very batches it charged, and the least-squares fit of those times.
 */
#ifndef RMLP_TOOLS_SERVE_COST_H
#define RMLP_TOOLS_SERVE_COST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "radix_mlp.h"

typedef enum serve_cost_kind { SERVE_COST_MEASURED, SERVE_COST_MODEL } serve_cost_kind;

#define SERVE_COST_TERMS 4

/* What a batch computes: 1 (the batch), N', R, P as above. */
typedef struct serve_cost_terms {
    double x[SERVE_COST_TERMS];
} serve_cost_terms;

/* Microseconds per batch, compact row, row computed, score pair. */
typedef struct serve_cost_model {
    double us[SERVE_COST_TERMS];
} serve_cost_model;

/* The fixed coefficients: fitted on the built-in model's defaults (hidden 256, 2 layers), scaled
 * for another shape by its arithmetic (rows computed by the weights a row multiplies, pairs by the
 * query width, compact rows by the hidden size, all but compact rows by the layers). */
serve_cost_model serve_cost_default(const rmlp_model_config *cfg);

double serve_cost_us(const serve_cost_model *m, const serve_cost_terms *t);

/* The terms of a batch from its plan; cached[s] (n_seqs; NULL: none) is how many leading tokens of
 * sequence s the prefix cache held before the forward (rmlp_context_cached_prefix), 0 when the
 * forward bypassed the cache. */
void serve_cost_terms_of(const rmlp_plan *plan, const size_t *cached, serve_cost_terms *t);

/* Batches charged, their modelled and measured times, and the sums of a least-squares fit of the
 * measured times on the terms (relative error: each batch weighted by 1 / measured^2). */
typedef struct serve_cost_log {
    uint64_t batches;
    double modelled_us, measured_us, abs_error_us, yty;
    double xtx[SERVE_COST_TERMS][SERVE_COST_TERMS], xty[SERVE_COST_TERMS];
} serve_cost_log;

void serve_cost_log_add(serve_cost_log *log, const serve_cost_terms *t, double modelled_us, double measured_us);
void serve_cost_log_merge(serve_cost_log *into, const serve_cost_log *from);

/* The fitted coefficients of the log; 0, or -1 when its batches do not determine them. */
int serve_cost_fit(const serve_cost_log *log, serve_cost_model *fit);

/* "1.02x measured, error 4.1%, rms 5.3%" into buf (n): m's times of the log's batches against their
 * measured times (the ratio of the totals; the error summed over batches, over the measured total;
 * the root mean square of the relative error per batch). */
void serve_cost_describe(char *buf, size_t n, const serve_cost_model *m, const serve_cost_log *log);

/* One '#' line: the model m, how far it is from the measured times of the log's batches, and the
 * least-squares fit of those times with its own error. */
void serve_cost_print(FILE *to, const serve_cost_model *m, const serve_cost_log *log);

#endif
