/*
 * serve_slo.h: the most load a batching policy carries with its p99 queue wait under a bound
 * (`radixmlp bench --serve --slo-ms W`): throughput at a latency objective, the open-loop measure of
 * a batcher. The same trace (its unit arrival times scaled by the rate) is served at loads found by
 * bisection; a load is carried when the p99 wait over the whole trace stays at or under the bound.
 * The bisection takes the p99 to grow with the load; on a short trace it may not everywhere, and
 * the search gives the boundary it found: a load carried, and one refused within SERVE_SLO_STEP.
 */
#ifndef RMLP_TOOLS_SERVE_SLO_H
#define RMLP_TOOLS_SERVE_SLO_H

#include "serve_sim.h"

/* Loads are fractions of FIFO's capacity, as --load: a load L runs at L * rate_per_load requests a
 * second. The search spans SERVE_SLO_MIN_LOAD to SERVE_SLO_MAX_LOAD to within SERVE_SLO_STEP. */
#define SERVE_SLO_MIN_LOAD 0.05
#define SERVE_SLO_MAX_LOAD 4.0
#define SERVE_SLO_STEP 0.005

typedef struct serve_slo {
    double load;      /* the highest load found carried: 0 when not even the least one is */
    double refused;   /* the least load found not carried (within SERVE_SLO_STEP above load): 0 when
                       * even SERVE_SLO_MAX_LOAD is carried */
    serve_result at;  /* the run at that load (at the least load when none is carried) */
    unsigned runs;    /* simulations run by the search */
} serve_slo;

/* The highest load at which c (its rate replaced) serves t with p99 wait <= slo_ms. 0, or 1 after
 * printing why. */
int serve_slo_search(const serve_trace *t, rmlp_model *model, uint32_t hidden, serve_config c, double rate_per_load,
                     double slo_ms, serve_slo *out);

#endif
