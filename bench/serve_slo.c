/*
 * serve_slo.c: the most load a policy carries at a p99 wait bound, by bisection (serve_slo.h).
 */
#include "serve_slo.h"

/* c at `load` over the whole trace into r. 0, or 1 after printing why. */
static int run_at(const serve_trace *t, rmlp_model *model, uint32_t hidden, serve_config c, double rate_per_load,
                  double load, serve_result *r, unsigned *runs) {
    c.rate = load * rate_per_load;
    serve_sim *s = serve_sim_new(t, model, hidden, &c);
    if (s == NULL) return 1;
    int rc = serve_run(&s, 1, r);
    serve_sim_free(s);
    ++*runs;
    return rc;
}

int serve_slo_search(const serve_trace *t, rmlp_model *model, uint32_t hidden, serve_config c, double rate_per_load,
                     double slo_ms, serve_slo *out) {
    *out = (serve_slo){0};
    serve_result r;
    double lo = SERVE_SLO_MIN_LOAD, hi = SERVE_SLO_MAX_LOAD;
    if (run_at(t, model, hidden, c, rate_per_load, lo, &r, &out->runs) != 0) return 1;
    out->at = r;
    if (r.wait_p99_ms > slo_ms) { /* not even the least load */
        out->refused = lo;
        return 0;
    }
    if (run_at(t, model, hidden, c, rate_per_load, hi, &r, &out->runs) != 0) return 1;
    if (r.wait_p99_ms <= slo_ms) {
        out->load = hi, out->at = r;
        return 0;
    }
    while (hi - lo > SERVE_SLO_STEP) { /* lo carried, hi not */
        double mid = 0.5 * (lo + hi);
        if (run_at(t, model, hidden, c, rate_per_load, mid, &r, &out->runs) != 0) return 1;
        if (r.wait_p99_ms <= slo_ms) lo = mid, out->at = r;
        else hi = mid;
    }
    out->load = lo, out->refused = hi;
    return 0;
}
