/*
 * serve_cost.c: the cost model of `radixmlp bench --serve --cost model` (serve_cost.h).
 */
#include "serve_cost.h"

#include <math.h>
#include <string.h>

/* Multiply-adds of one row in one layer: the Q, K, V and O projections and the gated MLP. */
static double row_macs(const rmlp_model_config *c) {
    double h = c->hidden_size, q = (double)c->num_attention_heads * c->head_dim;
    double kv = (double)c->num_key_value_heads * c->head_dim;
    return h * (q + 2.0 * kv) + q * h + 3.0 * h * c->intermediate_size;
}

/* Multiply-adds of one score pair in one layer: q.k and the weighted v, every head. */
static double pair_macs(const rmlp_model_config *c) { return 2.0 * c->num_attention_heads * c->head_dim; }

/*
 * The fixed coefficients, microseconds, of the built-in model at its defaults (hidden 256, 3 x 256
 * intermediate, 4 heads of 64, 2 KV heads, 2 layers), one thread: the least-squares fit (relative
 * error) of the measured CPU times of 1,112 batches, those of `radixmlp bench --serve --sweep none`
 * (all four traces, both policies, 64 MB cache) and of its long-query rerank (--trace rerank
 * --queries 64 --query-tokens 200,400 --cache-mb 0), on the 2-vCPU AMD EPYC (Zen 3) VM, rounded:
 * rms error 8.5% per batch, the same for FIFO's batches and prefix batching's (totals 0.98x
 * measured for both). The tokens and sequences of a batch, fitted too, came out at 0.6 us and
 * -22 us, noise. Only the ratios matter to the bench's comparisons: the offered load is a
 * fraction of FIFO's capacity under the same model, so scaling all four scales every time alike.
 */
static const double BASE_US[SERVE_COST_TERMS] = {
    600.0, /* a batch: the calls, the plan's and the cache's set-up, per-layer overheads */
    5.0,   /* a compact row: its lookup in the prefix cache, its output row read back */
    42.0,  /* a row computed: 2 layers of projections and MLP (786,432 multiply-adds a layer) */
    0.032, /* a score pair: 2 layers of attention (512 multiply-adds a layer) */
};

serve_cost_model serve_cost_default(const rmlp_model_config *cfg) {
    rmlp_model_config base = {.hidden_size = 256, .intermediate_size = 768, .num_hidden_layers = 2,
                              .num_attention_heads = 4, .num_key_value_heads = 2, .head_dim = 64};
    double layers = (double)cfg->num_hidden_layers / base.num_hidden_layers;
    serve_cost_model m;
    memcpy(m.us, BASE_US, sizeof m.us);
    m.us[0] *= layers;
    m.us[1] *= (double)cfg->hidden_size / base.hidden_size;
    m.us[2] *= layers * row_macs(cfg) / row_macs(&base);
    m.us[3] *= layers * pair_macs(cfg) / pair_macs(&base);
    return m;
}

double serve_cost_us(const serve_cost_model *m, const serve_cost_terms *t) {
    double us = 0.0;
    for (int i = 0; i < SERVE_COST_TERMS; i++) us += m->us[i] * t->x[i];
    return us;
}

void serve_cost_terms_of(const rmlp_plan *plan, const size_t *cached, serve_cost_terms *t) {
    double rows = 0.0, pairs = 0.0;
    for (uint32_t s = 0; s < plan->n_seqs; s++) {
        double len = plan->cu_seqlens[s + 1] - plan->cu_seqlens[s];
        double owned = plan->qo_indptr ? plan->qo_indptr[s + 1] - plan->qo_indptr[s] : len;
        double start = len - owned; /* its rows before this are an earlier sequence's */
        if (cached != NULL && (double)cached[s] > start) start = (double)(cached[s] < len ? cached[s] : len);
        rows += len - start;
        pairs += (len * (len + 1.0) - start * (start + 1.0)) / 2.0; /* row p attends p + 1 keys */
    }
    *t = (serve_cost_terms){{1.0, plan->n_compact, rows, pairs}};
}

void serve_cost_log_add(serve_cost_log *log, const serve_cost_terms *t, double modelled_us, double measured_us) {
    log->batches++;
    log->modelled_us += modelled_us, log->measured_us += measured_us;
    log->abs_error_us += fabs(modelled_us - measured_us);
    if (!(measured_us > 0.0)) return;
    double w = 1.0 / (measured_us * measured_us);
    for (int i = 0; i < SERVE_COST_TERMS; i++) {
        for (int j = 0; j < SERVE_COST_TERMS; j++) log->xtx[i][j] += w * t->x[i] * t->x[j];
        log->xty[i] += w * t->x[i] * measured_us;
    }
    log->yty += w * measured_us * measured_us;
}

void serve_cost_log_merge(serve_cost_log *into, const serve_cost_log *from) {
    into->batches += from->batches;
    into->modelled_us += from->modelled_us, into->measured_us += from->measured_us;
    into->abs_error_us += from->abs_error_us, into->yty += from->yty;
    for (int i = 0; i < SERVE_COST_TERMS; i++) {
        for (int j = 0; j < SERVE_COST_TERMS; j++) into->xtx[i][j] += from->xtx[i][j];
        into->xty[i] += from->xty[i];
    }
}

/* Solves a x = b (n x n) by Gaussian elimination with partial pivoting; -1 when singular. */
static int solve(double a[SERVE_COST_TERMS][SERVE_COST_TERMS], double *b, double *x, int n) {
    for (int k = 0; k < n; k++) {
        int pivot = k;
        for (int i = k + 1; i < n; i++)
            if (fabs(a[i][k]) > fabs(a[pivot][k])) pivot = i;
        if (!(fabs(a[pivot][k]) > 1e-6)) return -1; /* the diagonal is 1: a dependent term */
        for (int j = 0; j < n; j++) {
            double t = a[k][j];
            a[k][j] = a[pivot][j], a[pivot][j] = t;
        }
        double t = b[k];
        b[k] = b[pivot], b[pivot] = t;
        for (int i = k + 1; i < n; i++) {
            double f = a[i][k] / a[k][k];
            for (int j = k; j < n; j++) a[i][j] -= f * a[k][j];
            b[i] -= f * b[k];
        }
    }
    for (int k = n; k-- > 0;) {
        double s = b[k];
        for (int j = k + 1; j < n; j++) s -= a[k][j] * x[j];
        x[k] = s / a[k][k];
    }
    return 0;
}

/* The fit on the terms in `use` (a bit each); -1 when they do not determine it. */
static int fit_terms(const serve_cost_log *log, unsigned use, serve_cost_model *fit) {
    /* Scaled to a unit diagonal, so that terms of very different sizes (1 and P) are conditioned
     * alike; a term no batch has is left out at 0. */
    double a[SERVE_COST_TERMS][SERVE_COST_TERMS], b[SERVE_COST_TERMS], x[SERVE_COST_TERMS], scale[SERVE_COST_TERMS];
    int idx[SERVE_COST_TERMS], n = 0;
    for (int i = 0; i < SERVE_COST_TERMS; i++)
        if ((use >> i & 1u) && log->xtx[i][i] > 0.0) idx[n] = i, scale[n] = 1.0 / sqrt(log->xtx[i][i]), n++;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) a[i][j] = log->xtx[idx[i]][idx[j]] * scale[i] * scale[j];
        b[i] = log->xty[idx[i]] * scale[i];
    }
    if (n == 0 || solve(a, b, x, n) != 0) return -1;
    memset(fit, 0, sizeof *fit);
    for (int i = 0; i < n; i++) fit->us[idx[i]] = x[i] * scale[i];
    return 0;
}

int serve_cost_fit(const serve_cost_log *log, serve_cost_model *fit) {
    if (log->batches < 2 * SERVE_COST_TERMS) return -1;
    unsigned all = (1u << SERVE_COST_TERMS) - 1;
    if (fit_terms(log, all, fit) == 0) return 0;
    /* Terms that move together (N' and R without a cache: every compact row is computed): the
     * fit without one of them. */
    for (int i = 1; i < SERVE_COST_TERMS; i++)
        if (fit_terms(log, all & ~(1u << i), fit) == 0) return 0;
    return -1;
}

/* The root mean square of (m's time - measured) / measured over the log's batches, from its sums. */
static double rms_relative(const serve_cost_log *log, const serve_cost_model *m) {
    double ss = log->yty;
    for (int i = 0; i < SERVE_COST_TERMS; i++) {
        ss -= 2.0 * m->us[i] * log->xty[i];
        for (int j = 0; j < SERVE_COST_TERMS; j++) ss += m->us[i] * log->xtx[i][j] * m->us[j];
    }
    return log->batches ? sqrt(ss > 0.0 ? ss / (double)log->batches : 0.0) : 0.0;
}

void serve_cost_describe(char *buf, size_t n, const serve_cost_model *m, const serve_cost_log *log) {
    if (log->batches == 0 || !(log->measured_us > 0.0)) {
        snprintf(buf, n, "no batch measured");
        return;
    }
    snprintf(buf, n, "%.3fx measured, error %.1f%%, rms %.1f%%", log->modelled_us / log->measured_us,
             100.0 * log->abs_error_us / log->measured_us, 100.0 * rms_relative(log, m));
}

static void print_model(FILE *to, const serve_cost_model *m) {
    fprintf(to, "%.0f us + %.2f N' + %.2f R + %.4f P", m->us[0], m->us[1], m->us[2], m->us[3]);
}

void serve_cost_print(FILE *to, const serve_cost_model *m, const serve_cost_log *log) {
    char said[96];
    serve_cost_describe(said, sizeof said, m, log);
    fprintf(to, "# cost model ");
    print_model(to, m);
    fprintf(to, " against the CPU time of the %llu batches run: %s", (unsigned long long)log->batches, said);
    serve_cost_model fit;
    if (serve_cost_fit(log, &fit) == 0) {
        fprintf(to, "; their least-squares fit ");
        print_model(to, &fit);
        fprintf(to, " (rms %.1f%%)", 100.0 * rms_relative(log, &fit));
    }
    fprintf(to, "\n");
}
