/*
 * test_compact_attention.c: the CPU attention in compact space (cpu/attention.c,
 * cpu_compact_attention) against the full-space one on the same batch. For random batches with
 * shared prefixes (deep trees from a small vocabulary, duplicate and empty sequences, sequences
 * that are prefixes of others) and planner-built plans: random compact Q/K/V, scattered to the
 * batch rows for cpu_attention; each compact row's output must equal the full-space output of
 * the row it was folded from (fold_gather), within fp32 rounding of a different sgemm split
 * (1e-5 relative to the largest |value|). Q/K/V are read both from separate buffers and from
 * the columns of one fused qkv buffer (the layer's layout), GQA 4:1 and 1:1, odd head dims. Also
 * the layout's invariants: a sequence's owned rows are the last rows of its path, in order.
 * The flash-style kernel (cpu/attention_flash.h) in both layouts against the same reference (1e-5),
 * bit for bit the same on pools of 1 and 2 threads, and its compact rows within 1e-6 of its own
 * full-space rows. Each case runs plain causal attention and the layer variants of model_ext.h:
 * sliding windows (of 1, 3 and 17 keys: shorter than the shared prefixes of the batches, so a
 * shared prefix longer than the window is covered), a logit soft-cap and another query scale; the
 * reference's window and soft-cap are checked themselves against a naive per-row softmax.
 */
#include <math.h>

#include "cpu/attention_flash.h"
#include "cpu/cpu_ops.h"
#include "test_util.h"

/* qo_indptr (n_seqs + 1): the compact rows whose first occurrence lies in sequence s, from the
 * strictly increasing fold_gather. */
static void owned_ranges(const rmlp_plan *plan, uint32_t *qo_indptr) {
    uint32_t j = 0;
    for (uint32_t s = 0; s <= plan->n_seqs; s++) {
        while (j < plan->n_compact && plan->fold_gather[j] < plan->cu_seqlens[s]) j++;
        qo_indptr[s] = j;
    }
}

static float *random_floats(uint64_t *rng, size_t n) {
    float *x = tu_xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = (float)((double)(tu_rand(rng) >> 11) * 0x1p-53 * 4.0 - 2.0);
    return x;
}

static workers *two_threads; /* a pool of 2 (the calling thread and one worker) */

/* max |got - want| over rows (want row fold[j], or j with fold NULL) and the largest |want|; counts
 * outputs that are not finite. */
static double max_diff(const float *got, const float *want, const uint32_t *fold, size_t rows, size_t qd,
                       double *max_ref, size_t *bad) {
    double err = 0.0;
    *max_ref = 0.0, *bad = 0;
    for (size_t j = 0; j < rows; j++)
        for (size_t d = 0; d < qd; d++) {
            float g = got[j * qd + d], w = want[(size_t)(fold ? fold[j] : j) * qd + d];
            if (!isfinite(g)) (*bad)++;
            if (fabs(g - w) > err) err = fabs(g - w);
            if (fabs(w) > *max_ref) *max_ref = fabs(w);
        }
    return err;
}

/* Outputs written in row nc of out (NaN before the call): the row past the compact rows. */
static size_t written_past(const float *out, size_t nc, size_t qd) {
    size_t touched = 0;
    for (size_t d = 0; d < qd; d++) touched += !isnan(out[nc * qd + d]);
    return touched;
}

/* The flash kernel: full space against cpu_attention's `full`, compact against its own full space,
 * on 1 and 2 threads (bit-identical). */
static void check_flash(const rmlp_plan *plan, const uint32_t *qo, const cpu_attention_rows *compact,
                        const float *q, const float *k, const float *v, const float *full, size_t nh, size_t nkv,
                        size_t hd, const layer_attention *la, const char *what) {
    size_t nc = plan->n_compact, nt = plan->n_tokens, qd = nh * hd, kvd = nkv * hd, bad;
    float *scratch = tu_xmalloc(2 * flash_scratch_floats(nh, nkv, hd) * 4);
    float *ff[2] = {tu_xmalloc(nt * qd * 4), tu_xmalloc(nt * qd * 4)};
    float *fc[2] = {tu_xmalloc((nc + 1) * qd * 4), tu_xmalloc((nc + 1) * qd * 4)};
    cpu_attention_rows rows = {q, k, v, NULL, qd, kvd, kvd, qd, 0}, crows = *compact;
    for (int p = 0; p < 2; p++) {
        rows.out = ff[p], crows.out = fc[p];
        for (size_t i = 0; i < (nc + 1) * qd; i++) fc[p][i] = NAN;
        cpu_flash_attention(&rows, plan->cu_seqlens, plan->cu_seqlens, NULL, plan->n_seqs, nh, nkv, hd, la,
                            p ? two_threads : NULL, scratch);
        cpu_flash_attention(&crows, qo, plan->cu_seqlens, plan->scatter, plan->n_seqs, nh, nkv, hd, la,
                            p ? two_threads : NULL, scratch);
    }
    double ref, err = max_diff(ff[0], full, NULL, nt, qd, &ref, &bad);
    CHECK(bad == 0 && err <= 1e-5 * (ref > 1 ? ref : 1), "%s: flash full space: %zu not finite, max |flash - blas| "
          "%.3g (max %.3g)", what, bad, err, ref);
    err = max_diff(fc[0], ff[0], plan->fold_gather, nc, qd, &ref, &bad);
    CHECK(bad == 0 && err <= 1e-6 * (ref > 1 ? ref : 1), "%s: flash compact vs flash full: %zu not finite, max diff "
          "%.3g (max %.3g)", what, bad, err, ref);
    CHECK(memcmp(ff[0], ff[1], nt * qd * 4) == 0 && memcmp(fc[0], fc[1], nc * qd * 4) == 0,
          "%s: flash on 2 threads differs from 1 thread", what);
    CHECK(written_past(fc[0], nc, qd) == 0, "%s: flash wrote past the compact rows", what);
    free(scratch), free(ff[0]), free(ff[1]), free(fc[0]), free(fc[1]);
}

/* Naive attention of batch row i (sequence from row `start`, position p), head h, scored and windowed
 * as la says, into o (hd): the definition, for the reference's window and soft-cap. */
static void naive_row(const float *q, const float *k, const float *v, size_t start, size_t p, size_t h, size_t nh,
                      size_t nkv, size_t hd, const layer_attention *la, double *o) {
    size_t qd = nh * hd, kvd = nkv * hd, g = h / (nh / nkv), lo = la->window && p + 1 > la->window ? p + 1 - la->window : 0;
    double s[512], max = -INFINITY, sum = 0;
    for (size_t j = lo; j <= p; j++) {
        double dot = 0;
        for (size_t d = 0; d < hd; d++) dot += (double)q[(start + p) * qd + h * hd + d] * k[(start + j) * kvd + g * hd + d];
        dot *= la->scale;
        if (la->softcap != 0.0f) dot = tanh(dot / la->softcap) * la->softcap;
        s[j - lo] = dot, max = dot > max ? dot : max;
    }
    for (size_t j = lo; j <= p; j++) sum += s[j - lo] = exp(s[j - lo] - max);
    for (size_t d = 0; d < hd; d++) {
        o[d] = 0;
        for (size_t j = lo; j <= p; j++) o[d] += s[j - lo] / sum * v[(start + j) * kvd + g * hd + d];
    }
}

/* The reference (cpu_attention's `full`) against naive_row on every row of sequences up to 512 rows. */
static void check_reference(const rmlp_plan *plan, const float *q, const float *k, const float *v, const float *full,
                            size_t nh, size_t nkv, size_t hd, const layer_attention *la, const char *what) {
    double worst = 0, o[64];
    for (uint32_t s = 0; s < plan->n_seqs && hd <= 64; s++)
        for (size_t p = 0; p < plan->cu_seqlens[s + 1] - plan->cu_seqlens[s] && p < 512; p++)
            for (size_t h = 0; h < nh; h++) {
                naive_row(q, k, v, plan->cu_seqlens[s], p, h, nh, nkv, hd, la, o);
                for (size_t d = 0; d < hd; d++) {
                    double e = fabs(o[d] - full[(plan->cu_seqlens[s] + p) * nh * hd + h * hd + d]);
                    worst = e > worst ? e : worst;
                }
            }
    CHECK(worst <= 1e-5, "%s: the reference against the naive definition: max diff %.3g", what, worst);
}

static void check_case(uint64_t *rng, const rmlp_plan *plan, size_t nh, size_t nkv, size_t hd, int fused,
                       const layer_attention *la, const char *what) {
    size_t nc = plan->n_compact, nt = plan->n_tokens, qd = nh * hd, kvd = nkv * hd, width = qd + 2 * kvd;
    uint32_t *qo = tu_xmalloc((plan->n_seqs + 1) * sizeof(uint32_t));
    owned_ranges(plan, qo);
    CHECK_EQ(qo[plan->n_seqs], nc, "%s: every compact row is owned by one sequence", what);
    size_t longest = 0, bad_suffix = 0;
    for (uint32_t s = 0; s < plan->n_seqs; s++) {
        size_t len = plan->cu_seqlens[s + 1] - plan->cu_seqlens[s], owned = qo[s + 1] - qo[s];
        if (len > longest) longest = len;
        for (size_t t = 0; t < owned; t++) /* owned row t is path position len - owned + t */
            bad_suffix += plan->scatter[plan->cu_seqlens[s] + len - owned + t] != qo[s] + t;
    }
    CHECK(bad_suffix == 0, "%s: %zu owned rows are not the last rows of their path", what, bad_suffix);

    /* Compact q, k, v (fused: one (nc, width) buffer; else three), and their batch-row copies. */
    float *qkv = random_floats(rng, nc * width);
    float *qc = fused ? qkv : random_floats(rng, nc * qd), *kc = fused ? qkv + qd : random_floats(rng, nc * kvd);
    float *vc = fused ? qkv + qd + kvd : random_floats(rng, nc * kvd);
    size_t qs = fused ? width : qd, ks = fused ? width : kvd;
    float *q = tu_xmalloc(nt * qd * 4), *k = tu_xmalloc(nt * kvd * 4), *v = tu_xmalloc(nt * kvd * 4);
    for (size_t i = 0; i < nt; i++) {
        size_t c = plan->scatter[i];
        memcpy(q + i * qd, qc + c * qs, qd * 4);
        memcpy(k + i * kvd, kc + c * ks, kvd * 4);
        memcpy(v + i * kvd, vc + c * ks, kvd * 4);
    }
    float *scratch = tu_xmalloc(cpu_attention_scratch_floats(longest, hd) * 4);
    float *full = tu_xmalloc(nt * qd * 4), *out = tu_xmalloc((nc + 1) * qd * 4);
    cpu_attention(q, k, v, plan->cu_seqlens, plan->n_seqs, nh, nkv, hd, la, scratch, full);
    check_reference(plan, q, k, v, full, nh, nkv, hd, la, what);
    for (size_t i = 0; i < (nc + 1) * qd; i++) out[i] = NAN; /* row nc: must stay untouched */
    cpu_attention_rows rows = {qc, kc, vc, out, qs, ks, ks, qd, 0};
    cpu_compact_attention(&rows, qo, plan->cu_seqlens, plan->scatter, plan->n_seqs, nh, nkv, hd, la, scratch);
    double max_ref;
    size_t nan;
    double max_err = max_diff(out, full, plan->fold_gather, nc, qd, &max_ref, &nan);
    CHECK(nan == 0 && max_err <= 1e-5 * (max_ref > 1 ? max_ref : 1),
          "%s: %zu unwritten/NaN outputs, max |compact - full| %.3g (max |full| %.3g)", what, nan, max_err, max_ref);
    CHECK(written_past(out, nc, qd) == 0, "%s: wrote past the compact rows", what);
    check_flash(plan, qo, &rows, q, k, v, full, nh, nkv, hd, la, what);
    if (!fused) free(qc), free(kc), free(vc);
    free(qkv), free(q), free(k), free(v), free(scratch), free(full), free(out), free(qo);
}

int main(void) {
    static const tu_batch_shape shapes[] = {
        {1, 9, 4, 0, 0},    {4, 40, 2, 0, 0},   {8, 70, 3, 30, 0}, {32, 20, 2, 16, 0},
        {6, 150, 50, 90, 0}, {12, 30, 1, 0, 0}, {5, 64, 2, 64, 0},
    };
    static const size_t heads[][3] = {{4, 1, 16}, {2, 2, 12}, {8, 2, 7}};
    /* scale 0 below: 1/sqrt(head_dim); window, soft-cap, rope (unused here) */
    static const layer_attention variants[] = {{0, 0.0f, 0.0f, 0}, {3, 0.0f, 0.0f, 0}, {17, 5.0f, 0.0f, 0},
                                               {1, 0.0f, 0.0f, 0}, {0, 2.0f, 0.3f, 0}};
    static const char *const variant_names[] = {"causal", "window 3", "window 17, softcap 5", "window 1",
                                                "softcap 2, scale 0.3"};
    uint64_t rng = 0xC0FFEE;
    int error = 0;
    if (!CHECK((two_threads = workers_create(2, &error)) != NULL, "pool: error %d", error)) return tu_summary();
    rmlp_planner *planner = NULL;
    if (!CHECK(rmlp_planner_create(&planner) == RMLP_OK, "planner: %s", rmlp_last_error())) return tu_summary();
    rmlp_plan_params params = tu_params(1.0, 0);
    /* By hand: a duplicate (owns nothing), a prefix of another (nothing), a branch, an empty one. */
    static const uint32_t ids[] = {1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2, 3, 1, 2, 7, 8, 9, 9};
    static const uint32_t pos[] = {0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2, 0, 1, 2, 3, 0, 1};
    static const uint32_t cu[] = {0, 5, 10, 13, 17, 17, 19};
    rmlp_plan by_hand;
    if (CHECK(rmlp_plan_build(planner, ids, pos, 19, cu, 6, &params, &by_hand) == RMLP_OK, "plan: %s",
              rmlp_last_error()))
        for (size_t va = 0; va < sizeof variants / sizeof variants[0]; va++)
            for (size_t hh = 0; hh < sizeof heads / sizeof heads[0]; hh++)
                for (int fused = 0; fused < 2; fused++) {
                    layer_attention la = variants[va];
                    if (la.scale == 0.0f) la.scale = 1.0f / sqrtf((float)heads[hh][2]);
                    char what[160];
                    snprintf(what, sizeof what, "duplicate, prefix, branch, %s", variant_names[va]);
                    check_case(&rng, &by_hand, heads[hh][0], heads[hh][1], heads[hh][2], fused, &la, what);
                }
    for (int rep = 0; rep < 6; rep++)
        for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
            tu_batch b = tu_random_batch(&rng, &shapes[sh]);
            rmlp_plan plan;
            if (b.n_tokens == 0 || !CHECK(rmlp_plan_build(planner, b.ids, b.pos, b.n_tokens, b.cu, b.n_seqs, &params,
                                                          &plan) == RMLP_OK,
                                          "plan: %s", rmlp_last_error())) {
                tu_batch_free(&b);
                continue;
            }
            for (size_t hh = 0; hh < sizeof heads / sizeof heads[0]; hh++)
                for (int fused = 0; fused < 2; fused++) {
                    size_t va = (size_t)(rep + sh + hh + fused) % (sizeof variants / sizeof variants[0]);
                    layer_attention la = variants[va];
                    if (la.scale == 0.0f) la.scale = 1.0f / sqrtf((float)heads[hh][2]);
                    char what[200];
                    snprintf(what, sizeof what, "shape %zu rep %d (N=%u N'=%u) heads %zu/%zu hd %zu %s, %s", sh, rep,
                             plan.n_tokens, plan.n_compact, heads[hh][0], heads[hh][1], heads[hh][2],
                             fused ? "fused" : "separate", variant_names[va]);
                    check_case(&rng, &plan, heads[hh][0], heads[hh][1], heads[hh][2], fused, &la, what);
                }
            tu_batch_free(&b);
        }
    rmlp_planner_free(planner);
    workers_destroy(two_threads);
    return tu_summary();
}
