/*
 * bench_cpu.c: a case of `radixmlp bench` on the CPU (bench_cpu.h). Each forward runs with the
 * library's profile on, so a mode's line says where its time went: GEMMs, attention, elementwise
 * work (norms, RoPE, SwiGLU, residual adds), gathers and scatters (embedding rows, the batch rows
 * of full-space attention), the rest of the forward (its finite check), and the plan's build.
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "bench_cpu.h"
#include "bench_dump.h"
#include "cli.h"

enum { OFF, ON, COMPACT, LAST, MODES };
static const char *const MODE_NAMES[MODES] = {"off", "on", "compact", "last"};

typedef struct run_result {
    double ms, plan_us;
    rmlp_cpu_profile profile; /* of the fastest forward */
    rmlp_plan plan;
} run_result;

/* One plan and forward of `mode` (OFF, ON: rmlp_forward, attention in ctx's space; COMPACT: the
 * whole forward in compact space, out then holding compact rows; LAST: rmlp_forward_last, out
 * holding each sequence's last row), the built-in attention; with repeats, the fastest forward is
 * kept with its profile. */
static int run_once(rmlp_planner *planner, rmlp_context *ctx, const workload *w, double threshold, int mode,
                    float *out, run_result *r) {
    rmlp_plan_params params = rmlp_plan_default_params();
    params.threshold = threshold;
    rmlp_cpu_profile profile = {.struct_size = sizeof profile};
    if (rmlp_plan_build(planner, w->input_ids, w->position_ids, w->n_tokens, w->cu_seqlens, w->n_seqs, &params,
                        &r->plan) != RMLP_OK ||
        rmlp_context_cpu_profile(ctx, true, NULL) != RMLP_OK)
        return -1;
    double start = cli_now_ms();
    rmlp_status status = mode == COMPACT ? rmlp_forward_compact(ctx, &r->plan, NULL, NULL, out)
                         : mode == LAST  ? rmlp_forward_last(ctx, &r->plan, NULL, NULL, out)
                                         : rmlp_forward(ctx, &r->plan, NULL, NULL, out);
    if (status != RMLP_OK) return -1;
    double ms = cli_now_ms() - start;
    if (rmlp_context_cpu_profile(ctx, false, &profile) != RMLP_OK) return -1;
    if (r->ms > 0.0 && r->ms <= ms) return 0;
    r->ms = ms;
    r->plan_us = r->plan.build_us;
    r->profile = profile;
    return 0;
}

/* Pools the on run's output for the dump (host f32). */
static int pool_for_dump(const float *out, const workload *w, uint32_t hidden, float *last, float *mean) {
    return rmlp_pool(out, w->n_tokens, hidden, w->cu_seqlens, w->n_seqs, RMLP_POOLING_LAST, false, last) == RMLP_OK &&
                   rmlp_pool(out, w->n_tokens, hidden, w->cu_seqlens, w->n_seqs, RMLP_POOLING_MEAN, false, mean) ==
                       RMLP_OK
               ? 0
               : -1;
}

/* The GEMM the model runs on bf16 matrices (rmlp_model_cpu_bf16_gemm): "none", "widen", "onednn". */
static const char *bf16_gemm_name(const rmlp_model *model) {
    rmlp_cpu_bf16_gemm kind = RMLP_CPU_BF16_GEMM_NONE;
    rmlp_model_cpu_bf16_gemm(model, &kind, NULL, NULL);
    return kind == RMLP_CPU_BF16_GEMM_WIDEN ? "widen" : kind == RMLP_CPU_BF16_GEMM_ONEDNN ? "onednn" : "none";
}

/* The rest of a forward: its time less its phases. */
static double other_ms(const rmlp_cpu_profile *p) {
    return p->total_ms - p->gemm_ms - p->attention_ms - p->elementwise_ms - p->gather_ms;
}

static void print_profile_json(const run_result r[MODES]) {
    for (int m = 0; m < MODES; m++) {
        const rmlp_cpu_profile *p = &r[m].profile;
        printf(", \"gemm_ms_%s\": %.2f, \"elementwise_ms_%s\": %.2f, \"gather_ms_%s\": %.2f, \"other_ms_%s\": %.2f, "
               "\"plan_us_%s\": %.1f",
               MODE_NAMES[m], p->gemm_ms, MODE_NAMES[m], p->elementwise_ms, MODE_NAMES[m], p->gather_ms, MODE_NAMES[m],
               other_ms(p), MODE_NAMES[m], r[m].plan_us);
    }
}

static void print_profile_text(const run_result r[MODES]) {
    for (int m = 0; m < MODES; m++) {
        const rmlp_cpu_profile *p = &r[m].profile;
        double t = p->total_ms > 0.0 ? p->total_ms : 1.0;
        printf("  %-8s forward %9.1f ms: gemm %8.1f (%4.1f%%)  attention %8.1f (%4.1f%%)  elementwise %8.1f (%4.1f%%)  "
               "gather %7.1f (%4.1f%%)  other %6.1f  plan %8.3f ms\n",
               MODE_NAMES[m], p->total_ms, p->gemm_ms, 100.0 * p->gemm_ms / t, p->attention_ms,
               100.0 * p->attention_ms / t, p->elementwise_ms, 100.0 * p->elementwise_ms / t, p->gather_ms,
               100.0 * p->gather_ms / t, other_ms(p), r[m].plan_us / 1e3);
    }
}

void bench_cpu_print_header(const bench_args *a) {
    if (a->json) return;
    printf("# cpu, %u threads, %s weight matrices; ms: the fastest of %lu runs of each mode, alternating; below each "
           "case where that forward's time went (rmlp_context_cpu_profile) and the plan's build\n",
           rmlp_cpu_threads(), a->cpu_weights == RMLP_DTYPE_BF16 ? "bf16" : "f32", a->repeat);
    printf("# ms last: rmlp_forward_last, compact attention, only each sequence's last row out: it skips the last "
           "layer's O projection and MLP on all other rows, 1 of L layers' post-attention work, so its gain over "
           "compact is about 1/L of a full-depth model (half the MLP work with --layers 2: not a figure for a real "
           "model; --layers or --model for that)\n");
    printf("%-22s %7s %7s %6s %10s %10s %10s %10s %8s %8s %8s %9s %11s %12s %13s\n", "case", "N", "N'", "ratio",
           "ms off", "ms on", "ms compact", "ms last", "speedup", "spd cmp", "spd last", "predicted", "max|off-on|",
           "max|off-cmp|", "max|off-last|");
}

/* max |off - on| over the batch rows, and max |off - compact| reading compact rows through scatter. */
static void max_diffs(const float *off, const float *on, const float *compact, const uint32_t *scatter, size_t rows,
                      size_t hsz, double *diff, double *diff_compact) {
    *diff = *diff_compact = 0.0;
    for (size_t i = 0; i < rows * hsz; i++) {
        double d = fabs((double)off[i] - on[i]);
        double dc = fabs((double)off[i] - compact[(size_t)scatter[i / hsz] * hsz + i % hsz]);
        *diff = isnan(d) ? INFINITY : (d > *diff ? d : *diff);
        *diff_compact = isnan(dc) ? INFINITY : (dc > *diff_compact ? dc : *diff_compact);
    }
}

/* max |off - last| over each sequence's last row (`last`: n_seqs rows). */
static double max_diff_last(const float *off, const float *last, const workload *w, size_t hsz) {
    double diff = 0.0;
    for (size_t s = 0; s < w->n_seqs; s++)
        for (size_t j = 0; j < hsz; j++) {
            double d = fabs((double)off[((size_t)w->cu_seqlens[s + 1] - 1) * hsz + j] - last[s * hsz + j]);
            diff = isnan(d) ? INFINITY : (d > diff ? d : diff);
        }
    return diff;
}

int bench_cpu_case(const bench_args *a, rmlp_model *model, const rmlp_model_config *cfg, const char *name,
                   double threshold, const workload *w, FILE *dump) {
    rmlp_context *ctx = NULL, *ctx_last = NULL; /* ctx_last: attention in compact space, for compact and last */
    rmlp_planner *planner = NULL;
    rmlp_context_params last_params = rmlp_context_default_params();
    last_params.attention_space = RMLP_ATTENTION_COMPACT;
    size_t hsz = cfg->hidden_size, pooled = dump ? w->n_seqs * hsz : 0;
    float *out_off = malloc(w->n_tokens * hsz * sizeof(float));
    float *out_on = malloc(w->n_tokens * hsz * sizeof(float));
    float *out_compact = malloc((w->n_tokens + RMLP_MAX_PAD_MULTIPLE) * hsz * sizeof(float));
    float *out_last = malloc((w->n_seqs ? w->n_seqs : 1) * hsz * sizeof(float));
    float *last = dump ? malloc(2 * pooled * sizeof(float)) : NULL;
    run_result r[MODES] = {{0}};
    int rc = out_off && out_on && out_compact && out_last && (!dump || last) &&
                     rmlp_context_create(model, w->n_tokens, &ctx) == RMLP_OK &&
                     rmlp_context_create_with_params(model, w->n_tokens, &last_params, &ctx_last) == RMLP_OK &&
                     rmlp_planner_create(&planner) == RMLP_OK
                 ? 0
                 : 1;
    /* Off, on, last and compact alternate, so a slow spell of a shared machine hits all alike.
     * The compact run's plan is built last, so it stays the planner's current one. Compact and last
     * share a context (one workspace), so their difference is the last layer's pruned rows. */
    for (unsigned long rep = 0; rc == 0 && rep < a->repeat; rep++)
        rc = run_once(planner, ctx, w, 0.0, OFF, out_off, &r[OFF]) == 0 &&
                     run_once(planner, ctx, w, threshold, ON, out_on, &r[ON]) == 0 &&
                     run_once(planner, ctx_last, w, threshold, LAST, out_last, &r[LAST]) == 0 &&
                     run_once(planner, ctx_last, w, threshold, COMPACT, out_compact, &r[COMPACT]) == 0
                 ? 0
                 : 1;
    if (rc == 0 && dump) rc = pool_for_dump(out_on, w, cfg->hidden_size, last, last + pooled) == 0 ? 0 : 1;
    if (rc != 0) {
        fprintf(stderr, "radixmlp: %s: %s\n", name, rmlp_last_error());
    } else {
        double diff, diff_compact;
        max_diffs(out_off, out_on, out_compact, r[COMPACT].plan.scatter, w->n_tokens, hsz, &diff, &diff_compact);
        double diff_last = max_diff_last(out_off, out_last, w, hsz), speedup_last = r[OFF].ms / r[LAST].ms;
        const rmlp_plan *on = &r[ON].plan;
        double f = 1.0 - r[OFF].profile.attention_ms / r[OFF].ms, ratio = (double)w->n_tokens / on->n_compact;
        double predicted = 1.0 / ((1.0 - f) + f / ratio), speedup = r[OFF].ms / r[ON].ms;
        double speedup_compact = r[OFF].ms / r[COMPACT].ms;
        if (a->json) {
            printf("{\"case\": \"%s\", \"threads\": %u, \"weights\": \"%s\", \"bf16_gemm\": \"%s\", \"n_seqs\": %zu, \"n_tokens\": %zu, \"n_compact\": %u, "
                   "\"use_radix\": %s, \"layers\": %lu, \"ms_off\": %.2f, \"ms_on\": %.2f, \"ms_compact\": %.2f, "
                   "\"plan_us\": %.1f, \"speedup\": %.3f, \"speedup_compact\": %.3f, \"attention_ms_off\": %.2f, "
                   "\"attention_ms_on\": %.2f, \"attention_ms_compact\": %.2f, \"f_position_wise\": %.4f, "
                   "\"predicted_speedup\": %.3f, \"max_abs_diff\": %.3g, \"max_abs_diff_compact\": %.3g, "
                   "\"ms_last\": %.2f, \"speedup_last\": %.3f, \"attention_ms_last\": %.2f, \"max_abs_diff_last\": %.3g",
                   name, rmlp_cpu_threads(), a->cpu_weights == RMLP_DTYPE_BF16 ? "bf16" : "f32", bf16_gemm_name(model), w->n_seqs, w->n_tokens, on->n_compact, on->use_radix ? "true" : "false",
                   a->layers, r[OFF].ms, r[ON].ms, r[COMPACT].ms, r[ON].plan_us, speedup, speedup_compact,
                   r[OFF].profile.attention_ms, r[ON].profile.attention_ms, r[COMPACT].profile.attention_ms, f,
                   predicted, diff, diff_compact, r[LAST].ms, speedup_last, r[LAST].profile.attention_ms, diff_last);
            print_profile_json(r);
            printf("}\n");
        } else {
            printf("%-22s %7zu %7u %6.3f %10.1f %10.1f %10.1f %10.1f %7.2fx %7.2fx %7.2fx %8.2fx %11.3g %12.3g %13.3g\n",
                   name, w->n_tokens, on->n_compact, (double)on->n_compact / w->n_tokens, r[OFF].ms, r[ON].ms,
                   r[COMPACT].ms, r[LAST].ms, speedup, speedup_compact, speedup_last, predicted, diff, diff_compact,
                   diff_last);
            print_profile_text(r);
        }
        rc = cli_finish_output(stdout, "standard output") == 0 ? 0 : 1; /* a full disk stops the bench */
        if (rc == 0 && dump) {
            bench_dump_row row = {name, "cpu", "f32", "min", a->layers, cfg->hidden_size, on->n_compact,
                                  r[OFF].ms, r[ON].ms, last, last + pooled};
            rc = bench_dump_write(dump, a->dump_path, w, &row) == 0 ? 0 : 1;
        }
    }
    free(out_off), free(out_on), free(out_compact), free(out_last), free(last);
    rmlp_planner_free(planner);
    rmlp_context_free(ctx);
    rmlp_context_free(ctx_last);
    return rc;
}
