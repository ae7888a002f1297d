/*
 * test_plan_semantics.c: the published RadixMLP reference cases with their exact maps (worked
 * out by hand below), padding, the gate (TEI's --radix-mlp-threshold semantics) under both rules
 * (this library's on the unpadded count, and TEI's in-tree one on the padded length in single
 * precision), long shared runs split at every interesting offset, planner reuse and reserve, and
 * the default params.
 * Every plan is also checked with plan_verify and, when radix is on, against naive_plan.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "naive_plan.h"
#include "bench/plan_verify.h"
#include "radix_mlp.h"
#include "test_util.h"

#define U(...) ((const uint32_t[]){__VA_ARGS__})
#define NP RMLP_NO_PARENT

static rmlp_planner *planner;

/* A batch and the radix plan it must give (threshold 1.0, no padding); n_tokens = cu[n_seqs]. */
typedef struct plan_case {
    const char *name;
    const uint32_t *ids, *pos, *cu;
    size_t n_seqs, n_compact;
    const uint32_t *fold;    /* (n_compact) */
    const uint32_t *scatter; /* (n_tokens) */
    const uint32_t *parent;  /* (n_compact) */
} plan_case;

enum { REFERENCE_EXAMPLE = 3 }; /* index of "reference example" in cases[] */
static const plan_case cases[] = {
    {"empty batch", NULL, NULL, U(0, 0), 1, 0, NULL, NULL, NULL},
    {"empty batch of 3 empty sequences", NULL, NULL, U(0, 0, 0, 0), 3, 0, NULL, NULL, NULL},
    {"single sequence", U(1, 2, 3), U(0, 1, 2), U(0, 3), 1, 3, U(0, 1, 2), U(0, 1, 2), U(NP, 0, 1)},
    /* seq 1 is a prefix of seq 0; seq 2 starts at position 3 with (5,3), which no row has at offset 0 */
    {"reference example",
     U(1, 2, 3, 4, 5, 6, 7, 1, 2, 3, 5, 6, 7, 8, 9),
     U(0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 5, 6, 7),
     U(0, 7, 10, 15), 3, 12,
     U(0, 1, 2, 3, 4, 5, 6, 10, 11, 12, 13, 14),
     U(0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 7, 8, 9, 10, 11),
     U(NP, 0, 1, 2, 3, 4, 5, NP, 7, 8, 9, 10)},
    {"identical sequences", U(1, 2, 3, 1, 2, 3), U(0, 1, 2, 0, 1, 2), U(0, 3, 6), 2, 3, U(0, 1, 2),
     U(0, 1, 2, 0, 1, 2), U(NP, 0, 1)},
    {"no overlap", U(1, 2, 3, 4), U(0, 1, 0, 1), U(0, 2, 4), 2, 4, U(0, 1, 2, 3), U(0, 1, 2, 3), U(NP, 0, NP, 2)},
    {"partial overlap", U(1, 2, 3, 1, 2, 4), U(0, 1, 2, 0, 1, 2), U(0, 3, 6), 2, 4, U(0, 1, 2, 5),
     U(0, 1, 2, 0, 1, 3), U(NP, 0, 1, 1)},
    {"same tokens at other positions", U(1, 2, 3, 1, 2, 3), U(0, 1, 2, 1, 2, 3), U(0, 3, 6), 2, 6,
     U(0, 1, 2, 3, 4, 5), U(0, 1, 2, 3, 4, 5), U(NP, 0, 1, NP, 3, 4)},
    {"same (token, position) after another prefix", U(7, 1, 1), U(0, 1, 1), U(0, 2, 3), 2, 3, U(0, 1, 2),
     U(0, 1, 2), U(NP, 0, NP)},
    {"same last pair, different parent", U(1, 5, 2, 5), U(0, 1, 0, 1), U(0, 2, 4), 2, 4, U(0, 1, 2, 3),
     U(0, 1, 2, 3), U(NP, 0, NP, 2)},
    {"three sequences", U(1, 2, 3, 4, 1, 2, 5, 6, 1, 2, 3, 7), U(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3),
     U(0, 4, 8, 12), 3, 7, U(0, 1, 2, 3, 6, 7, 11), U(0, 1, 2, 3, 0, 1, 4, 5, 0, 1, 2, 6),
     U(NP, 0, 1, 2, 1, 4, 2)},
    {"prefix first", U(1, 2, 1, 2, 3, 4), U(0, 1, 0, 1, 2, 3), U(0, 2, 6), 2, 4, U(0, 1, 4, 5),
     U(0, 1, 0, 1, 2, 3), U(NP, 0, 1, 2)},
    {"prefix last", U(1, 2, 3, 4, 1, 2), U(0, 1, 2, 3, 0, 1), U(0, 4, 6), 2, 4, U(0, 1, 2, 3),
     U(0, 1, 2, 3, 0, 1), U(NP, 0, 1, 2)},
    {"empty sequences inside", U(1, 2, 1, 3), U(0, 1, 0, 1), U(0, 0, 2, 2, 4, 4), 5, 3, U(0, 1, 3),
     U(0, 1, 0, 2), U(NP, 0, 0)},
    {"one-token sequences", U(5, 5, 5), U(0, 0, 0), U(0, 1, 2, 3), 3, 1, U(0), U(0, 0, 0), U(NP)},
    /* ids and positions are plain data: 0 and 2^32-1 are no sentinels */
    {"extreme ids and positions", U(UINT32_MAX, 0, UINT32_MAX, 0, UINT32_MAX, 1),
     U(UINT32_MAX, 0, UINT32_MAX, 0, UINT32_MAX, 0), U(0, 2, 4, 6), 3, 3, U(0, 1, 5), U(0, 1, 0, 1, 0, 2),
     U(NP, 0, 0)},
    /* splits inside runs, a sequence extending a split tail, a fan-out at offset 1 */
    {"splits and extensions",
     U(1, 2, 3, 4, 1, 2, 3, 5, 1, 2, 6, 1, 2, 3, 4, 7, 1, 9),
     U(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 0, 1, 2, 3, 4, 0, 1),
     U(0, 4, 8, 11, 16, 18), 5, 8,
     U(0, 1, 2, 3, 7, 10, 15, 17),
     U(0, 1, 2, 3, 0, 1, 2, 4, 0, 1, 5, 0, 1, 2, 3, 6, 0, 7),
     U(NP, 0, 1, 2, 2, 1, 3, 0)},
};

/* Reports the first element where got and want differ. */
static void check_array(const char *name, const char *what, const uint32_t *got, const uint32_t *want, size_t n) {
    char got_s[256], want_s[256];
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i]) {
            CHECK(0, "%s: %s[%zu]=%u, want %u\n    got  [%s]\n    want [%s]", name, what, i, got[i], want[i],
                  tu_fmt_array(got, n, got_s, sizeof got_s), tu_fmt_array(want, n, want_s, sizeof want_s));
            return;
        }
    CHECK(1, "%s", name);
}

/* Builds and checks the status and plan_verify; returns 1 when the plan can be inspected. */
static int build(const char *name, rmlp_planner *p, const uint32_t *ids, const uint32_t *pos, const uint32_t *cu,
                 size_t n_seqs, const rmlp_plan_params *params, rmlp_plan *plan) {
    size_t n = cu[n_seqs];
    rmlp_status status = rmlp_plan_build(p, ids, pos, n, cu, n_seqs, params, plan);
    if (!CHECK(status == RMLP_OK, "%s: status %d (%s)", name, status, rmlp_last_error())) return 0;
    char why[256];
    uint32_t pad = params != NULL && params->pad ? params->pad_multiple_of : 0;
    return CHECK(plan_verify(ids, pos, n, cu, n_seqs, pad, plan, why, sizeof why) == 0, "%s: plan_verify: %s", name,
                 why);
}

/* The library's radix maps equal the naive reference exactly. */
static void check_naive(const char *name, const uint32_t *ids, const uint32_t *pos, const uint32_t *cu,
                        size_t n_seqs, const rmlp_plan *plan) {
    naive_plan ref;
    size_t n = cu[n_seqs];
    if (!CHECK(naive_plan_build(ids, pos, n, cu, n_seqs, &ref) == 0, "%s: naive_plan_build", name)) return;
    CHECK_EQ(plan->n_distinct, ref.n_compact, "%s: n_distinct vs naive", name);
    if (plan->use_radix && plan->n_compact == ref.n_compact) {
        check_array(name, "fold_gather vs naive", plan->fold_gather, ref.fold_gather, ref.n_compact);
        check_array(name, "scatter vs naive", plan->scatter, ref.scatter, n);
        check_array(name, "compact_input_ids vs naive", plan->compact_input_ids, ref.compact_ids, ref.n_compact);
        check_array(name, "compact_position_ids vs naive", plan->compact_position_ids, ref.compact_pos,
                    ref.n_compact);
        check_array(name, "compact_parent vs naive", plan->compact_parent, ref.compact_parent, ref.n_compact);
    }
    naive_plan_free(&ref);
}

static void test_reference_cases(void) {
    rmlp_plan_params params = tu_params(1.0, 0);
    CHECK(strcmp(cases[REFERENCE_EXAMPLE].name, "reference example") == 0, "REFERENCE_EXAMPLE is \"%s\"",
          cases[REFERENCE_EXAMPLE].name);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const plan_case *k = &cases[c];
        size_t n = k->cu[k->n_seqs];
        rmlp_plan plan;
        if (!build(k->name, planner, k->ids, k->pos, k->cu, k->n_seqs, &params, &plan)) continue;
        CHECK_EQ(plan.n_tokens, n, "%s", k->name);
        CHECK_EQ(plan.n_seqs, k->n_seqs, "%s", k->name);
        CHECK(plan.use_radix, "%s: threshold 1.0 must use radix", k->name);
        CHECK_EQ(plan.n_distinct, k->n_compact, "%s: n_distinct", k->name);
        CHECK_EQ(plan.n_compact, k->n_compact, "%s: n_compact", k->name);
        CHECK_EQ(plan.n_compact_padded, k->n_compact, "%s: n_compact_padded", k->name);
        double ratio = n > 0 ? (double)k->n_compact / (double)n : 1.0;
        CHECK(plan.compact_ratio == ratio, "%s: compact_ratio %g, want %g", k->name, plan.compact_ratio, ratio);
        CHECK(plan.build_us >= 0.0 && isfinite(plan.build_us), "%s: build_us %g", k->name, plan.build_us);
        if (plan.n_compact != k->n_compact) continue;
        check_array(k->name, "fold_gather", plan.fold_gather, k->fold, k->n_compact);
        check_array(k->name, "scatter", plan.scatter, k->scatter, n);
        check_array(k->name, "compact_parent", plan.compact_parent, k->parent, k->n_compact);
        for (size_t j = 0; j < k->n_compact; j++) {
            CHECK_EQ(plan.compact_input_ids[j], k->ids[k->fold[j]], "%s: compact_input_ids[%zu]", k->name, j);
            CHECK_EQ(plan.compact_position_ids[j], k->pos[k->fold[j]], "%s: compact_position_ids[%zu]", k->name, j);
        }
        check_naive(k->name, k->ids, k->pos, k->cu, k->n_seqs, &plan);
    }
    /* the reference example's compact ids and positions, spelled out */
    const plan_case *k = &cases[REFERENCE_EXAMPLE];
    rmlp_plan plan;
    if (build(k->name, planner, k->ids, k->pos, k->cu, k->n_seqs, &params, &plan) && plan.n_compact == 12) {
        check_array(k->name, "compact_input_ids", plan.compact_input_ids, U(1, 2, 3, 4, 5, 6, 7, 5, 6, 7, 8, 9), 12);
        check_array(k->name, "compact_position_ids", plan.compact_position_ids,
                    U(0, 1, 2, 3, 4, 5, 6, 3, 4, 5, 6, 7), 12);
        CHECK(plan.compact_ratio == 12.0 / 15.0, "compact_ratio %g, want 0.8", plan.compact_ratio);
    }
}

static void test_padding(void) {
    const plan_case *k = &cases[REFERENCE_EXAMPLE]; /* N' = 12 of 15 */
    static const struct {
        uint32_t pad, want;
    } pads[] = {{8, 16}, {1, 12}, {5, 15}, {12, 12}, {3, 12}, {13, 13}, {64, 64}};
    for (size_t t = 0; t < sizeof pads / sizeof pads[0]; t++) {
        rmlp_plan_params params = tu_params(1.0, pads[t].pad);
        rmlp_plan plan;
        char name[64];
        snprintf(name, sizeof name, "reference example, pad %u", pads[t].pad);
        if (!build(name, planner, k->ids, k->pos, k->cu, k->n_seqs, &params, &plan)) continue;
        CHECK_EQ(plan.n_compact, 12, "%s", name);
        CHECK_EQ(plan.n_compact_padded, pads[t].want, "%s", name);
        for (uint32_t j = 12; j < plan.n_compact_padded; j++)
            CHECK(plan.fold_gather[j] == 0 && plan.compact_input_ids[j] == 0 && plan.compact_position_ids[j] == 0 &&
                      plan.compact_parent[j] == NP,
                  "%s: padding row %u: gather %u token %u position %u parent %u", name, j, plan.fold_gather[j],
                  plan.compact_input_ids[j], plan.compact_position_ids[j], plan.compact_parent[j]);
        for (size_t i = 0; i < 15; i++) CHECK(plan.scatter[i] < 12, "%s: scatter[%zu]=%u", name, i, plan.scatter[i]);
        check_array(name, "fold_gather", plan.fold_gather, k->fold, 12);
    }
    rmlp_plan_params params = tu_params(1.0, 8);
    rmlp_plan plan;
    if (build("empty batch, pad 8", planner, NULL, NULL, U(0, 0), 1, &params, &plan)) {
        CHECK_EQ(plan.n_compact, 0, "empty batch, pad 8");
        CHECK_EQ(plan.n_compact_padded, 0, "empty batch, pad 8: N'=0 stays 0");
    }
}

/* Sequences of 10 tokens, the second sharing `shared` tokens with the first: N' = 20 - shared. */
static void two_sequences(uint32_t shared, uint32_t ids[20], uint32_t pos[20]) {
    for (uint32_t k = 0; k < 10; k++) {
        ids[k] = 100 + k;
        ids[10 + k] = k < shared ? 100 + k : 200 + k;
        pos[k] = pos[10 + k] = k;
    }
}

typedef struct gate_case {
    const char *name;
    uint32_t shared; /* of 10, in a 20-token batch */
    int null_params;
    double threshold;
    uint32_t pad;
    int want_radix;
} gate_case;

static const gate_case gates[] = {
    {"threshold 1.0, nothing shared", 0, 0, 1.0, 0, 1},
    {"threshold +inf, nothing shared", 0, 0, INFINITY, 0, 1},
    {"threshold 2.5, nothing shared", 0, 0, 2.5, 0, 1},
    {"threshold 0, much shared", 9, 0, 0.0, 0, 0},
    {"threshold 0, much shared, pad 8", 9, 0, 0.0, 8, 0},
    {"threshold 0.5, ratio 0.6", 8, 0, 0.5, 0, 0},
    {"threshold 0.5, ratio 0.6, pad 8", 8, 0, 0.5, 8, 0},
    {"threshold 0.6, ratio 0.6 (strict)", 8, 0, 0.6, 0, 0},
    {"threshold 0.7, ratio 0.6", 8, 0, 0.7, 0, 1},
    {"threshold 0.7, ratio 0.6, pad 8", 8, 0, 0.7, 8, 1},
    {"threshold 0.99, nothing shared", 0, 0, 0.99, 0, 0},
    {"NULL params, ratio 0.85", 3, 1, 0.85, 0, 0},
    {"NULL params, ratio 0.8", 4, 1, 0.85, 0, 1},
    {"default params, ratio 0.85", 3, 0, RMLP_DEFAULT_THRESHOLD, 0, 0},
    {"default params, ratio 0.8", 4, 0, RMLP_DEFAULT_THRESHOLD, 0, 1},
};

static void test_gate(void) {
    for (size_t g = 0; g < sizeof gates / sizeof gates[0]; g++) {
        const gate_case *c = &gates[g];
        uint32_t ids[20], pos[20];
        two_sequences(c->shared, ids, pos);
        rmlp_plan_params params = tu_params(c->threshold, c->pad);
        rmlp_plan plan;
        const uint32_t *cu = U(0, 10, 20);
        if (!build(c->name, planner, ids, pos, cu, 2, c->null_params ? NULL : &params, &plan)) continue;
        uint32_t distinct = 20 - c->shared;
        CHECK_EQ(plan.use_radix, c->want_radix, "%s: use_radix", c->name);
        CHECK_EQ(plan.n_distinct, c->threshold == 0.0 ? 20 : distinct, "%s: n_distinct", c->name);
        double ratio = c->threshold == 0.0 ? 1.0 : distinct / 20.0;
        CHECK(plan.compact_ratio == ratio, "%s: compact_ratio %g, want %g", c->name, plan.compact_ratio, ratio);
        uint32_t n_compact = c->want_radix ? distinct : 20;
        CHECK_EQ(plan.n_compact, n_compact, "%s: n_compact", c->name);
        uint32_t padded = c->want_radix && c->pad > 1 ? (n_compact + c->pad - 1) / c->pad * c->pad : n_compact;
        CHECK_EQ(plan.n_compact_padded, padded, "%s: n_compact_padded", c->name);
        if (!c->want_radix && plan.n_compact == 20)
            for (uint32_t i = 0; i < 20; i++)
                CHECK(plan.fold_gather[i] == i && plan.scatter[i] == i && plan.compact_input_ids[i] == ids[i] &&
                          plan.compact_position_ids[i] == pos[i] &&
                          plan.compact_parent[i] == (i % 10 == 0 ? NP : i - 1),
                      "%s: identity row %u", c->name, i);
    }
}

/* The two rules of the gate side by side, on two sequences of `len` tokens sharing `shared`: where
 * padding, single precision or TEI's 1e-6 cut-off make them disagree, and where they agree. */
typedef struct rule_case {
    const char *name;
    uint32_t len, shared; /* len 0: the empty batch */
    double threshold;
    uint32_t pad;
    int want_distinct, want_tei;    /* use_radix under each rule */
    int tei_skips;                  /* TEI's rule skips the trie (n_distinct = n_tokens) */
} rule_case;

static const rule_case rules[] = {
    /* the example: N=16, N'=13 (0.8125 < 0.85), padded to 16 (1.0) */
    {"N 16, 13 distinct, pad 8, threshold 0.85", 8, 3, 0.85, 8, 1, 0, 0},
    {"N 16, 13 distinct, no pad, threshold 0.85", 8, 3, 0.85, 0, 1, 1, 0},
    {"ratio 0.6, padded 0.8, threshold 0.7", 10, 8, 0.7, 8, 1, 0, 0},
    {"ratio 0.6, padded 0.8, threshold 0.9", 10, 8, 0.9, 8, 1, 1, 0},
    /* TEI turns radix off (without the trie) at thresholds <= 1e-6 (an f32 compare) */
    {"threshold 1e-7", 10, 9, 1e-7, 0, 0, 0, 1},
    {"threshold 1e-6", 10, 9, 1e-6, 0, 0, 0, 1},
    {"threshold 2e-6", 10, 9, 2e-6, 0, 0, 0, 0},
    /* single precision: 0.8500000001 is 0.85f, which 17/20 equals; 0.99999999 is 1.0f */
    {"ratio 0.85, threshold 0.8500000001", 10, 3, 0.8500000001, 0, 1, 0, 0},
    {"nothing shared, threshold 0.99999999", 10, 0, 0.99999999, 0, 0, 1, 0},
    {"threshold 1.0, nothing shared, pad 8", 10, 0, 1.0, 8, 1, 1, 0},
    {"threshold 0", 10, 9, 0.0, 0, 0, 0, 1},
    {"empty batch, threshold 1.0", 0, 0, 1.0, 0, 1, 0, 1},
};

static void test_gate_rules(void) {
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++) {
        const rule_case *c = &rules[r];
        uint32_t ids[20], pos[20], n = 2 * c->len, distinct = n - c->shared;
        for (uint32_t k = 0; k < c->len; k++) {
            ids[k] = 100 + k;
            ids[c->len + k] = k < c->shared ? 100 + k : 200 + k;
            pos[k] = pos[c->len + k] = k;
        }
        const uint32_t cu[3] = {0, c->len, n};
        for (int tei = 0; tei < 2; tei++) {
            rmlp_plan_params params = tu_params(c->threshold, c->pad);
            params.gate = tei ? RMLP_GATE_TEI : RMLP_GATE_DISTINCT;
            const char *rule = tei ? "TEI's rule" : "the distinct rule";
            rmlp_plan plan;
            if (!build(c->name, planner, ids, pos, cu, 2, &params, &plan)) continue;
            int want = tei ? c->want_tei : c->want_distinct;
            int skipped = tei ? c->tei_skips : c->threshold == 0.0;
            CHECK_EQ(plan.use_radix, want, "%s, %s: use_radix", c->name, rule);
            CHECK_EQ(plan.n_distinct, skipped ? n : distinct, "%s, %s: n_distinct", c->name, rule);
            uint32_t n_compact = want ? distinct : n;
            CHECK_EQ(plan.n_compact, n_compact, "%s, %s: n_compact", c->name, rule);
            uint32_t padded = want && c->pad > 1 ? (n_compact + c->pad - 1) / c->pad * c->pad : n_compact;
            CHECK_EQ(plan.n_compact_padded, padded, "%s, %s: n_compact_padded", c->name, rule);
        }
    }
}

/* Long runs: a 64-token base, then sequences that follow it and diverge (in the token, or in the
 * position only) at chosen offsets, or stop at chosen offsets; each divergent sequence adds
 * 64 - d rows. Exercises the 16-row block compare and splits at run offsets 0, 1, 15, 16, 17. */
static void test_long_runs(void) {
    enum { L = 64 };
    static const struct {
        uint32_t at;
        int kind; /* 0: new token at `at`, 1: same token but another position at `at`, 2: stops at `at` */
    } seqs[] = {{16, 0}, {16, 2}, {17, 0}, {15, 0}, {1, 0}, {0, 0}, {33, 1}, {40, 2}, {40, 0}, {32, 0},
                {48, 2}, {63, 0}, {20, 1}, {17, 2}, {64, 2}, {31, 0}, {49, 0}};
    size_t n_seqs = 1 + sizeof seqs / sizeof seqs[0];
    uint32_t ids[L * 18], pos[L * 18], cu[19] = {0};
    size_t n = 0, want = L;
    for (size_t s = 0; s < n_seqs; s++) {
        uint32_t at = s == 0 ? L : seqs[s - 1].at, kind = s == 0 ? 2 : (uint32_t)seqs[s - 1].kind;
        uint32_t len = kind == 2 ? at : L;
        for (uint32_t k = 0; k < len; k++, n++) {
            int after = k >= at;
            ids[n] = kind == 0 && after ? 5000 + 100 * (uint32_t)s + k : 1000 + k;
            pos[n] = kind == 1 && k == at ? 999 : k;
        }
        if (kind != 2) want += L - at;
        cu[s + 1] = (uint32_t)n;
    }
    rmlp_plan_params params = tu_params(1.0, 0);
    rmlp_plan plan;
    if (build("long runs", planner, ids, pos, cu, n_seqs, &params, &plan)) {
        CHECK_EQ(plan.n_compact, want, "long runs: N'");
        check_naive("long runs", ids, pos, cu, n_seqs, &plan);
    }

    /* 4 sequences x 300 tokens sharing the first 250: N' = 250 + 4 * 50 */
    static uint32_t big_ids[1200], big_pos[1200];
    uint32_t big_cu[5] = {0, 300, 600, 900, 1200};
    for (uint32_t s = 0; s < 4; s++)
        for (uint32_t k = 0; k < 300; k++) {
            big_ids[300 * s + k] = k < 250 ? 7 + k % 5 : 100000 * (s + 1) + k;
            big_pos[300 * s + k] = k;
        }
    if (build("4x300 sharing 250", planner, big_ids, big_pos, big_cu, 4, &params, &plan)) {
        CHECK_EQ(plan.n_compact, 450, "4x300 sharing 250: N'");
        check_naive("4x300 sharing 250", big_ids, big_pos, big_cu, 4, &plan);
    }
}

/* A planner that has built big, small, big gives what fresh planners give. */
static void test_reuse(void) {
    uint64_t rng = 42;
    tu_batch_shape big_shape = {200, 30, 3, 10, 0}, small_shape = {3, 5, 2, 0, 0};
    tu_batch big = tu_random_batch(&rng, &big_shape), small = tu_random_batch(&rng, &small_shape);
    rmlp_plan_params params = tu_params(1.0, 8);
    const tu_batch *order[3] = {&big, &small, &big};
    const uint32_t *first_scatter = NULL, *first_fold = NULL;
    for (int t = 0; t < 3; t++) {
        const tu_batch *b = order[t];
        rmlp_planner *fresh = NULL;
        if (!CHECK(rmlp_planner_create(&fresh) == RMLP_OK, "create")) break;
        rmlp_plan reused, ref;
        char name[64], why[256];
        snprintf(name, sizeof name, "reuse step %d (%zu tokens)", t, b->n_tokens);
        if (build(name, fresh, b->ids, b->pos, b->cu, b->n_seqs, &params, &ref)) {
            rmlp_plan ref_copy = tu_plan_copy(&ref);
            if (build(name, planner, b->ids, b->pos, b->cu, b->n_seqs, &params, &reused)) {
                CHECK(tu_plan_diff(&reused, &ref_copy, why, sizeof why) == 0, "%s: reused vs fresh: %s", name, why);
                if (t == 0) first_scatter = reused.scatter, first_fold = reused.fold_gather;
                else /* a planner that has seen the big batch builds the next ones without growing */
                    CHECK(reused.scatter == first_scatter && reused.fold_gather == first_fold,
                          "%s: arrays moved after a larger build", name);
            }
            tu_plan_copy_free(&ref_copy);
        }
        rmlp_planner_free(fresh);
    }

    /* after reserve, builds within the reserved size do not move the arrays */
    rmlp_planner *p = NULL;
    if (CHECK(rmlp_planner_create(&p) == RMLP_OK, "create") &&
        CHECK(rmlp_planner_reserve(p, big.n_tokens, big.n_seqs, 8) == RMLP_OK, "reserve: %s", rmlp_last_error())) {
        rmlp_plan first, plan;
        rmlp_plan_params no_pad = tu_params(0.0, 0);
        if (build("reserved, small", p, small.ids, small.pos, small.cu, small.n_seqs, &params, &first)) {
            for (int t = 0; t < 2; t++) {
                const char *name = t == 0 ? "reserved, big, pad 8" : "reserved, big, threshold 0";
                if (!build(name, p, big.ids, big.pos, big.cu, big.n_seqs, t == 0 ? &params : &no_pad, &plan)) continue;
                CHECK(plan.fold_gather == first.fold_gather && plan.scatter == first.scatter &&
                          plan.compact_input_ids == first.compact_input_ids &&
                          plan.compact_position_ids == first.compact_position_ids &&
                          plan.compact_parent == first.compact_parent,
                      "%s: arrays moved after rmlp_planner_reserve(%zu, %zu, 8)", name, big.n_tokens, big.n_seqs);
            }
        }
    }
    rmlp_planner_free(p);
    tu_batch_free(&big);
    tu_batch_free(&small);
}

static void test_default_params(void) {
    rmlp_plan_params d = rmlp_plan_default_params();
    CHECK_EQ(d.struct_size, sizeof(rmlp_plan_params), "default struct_size");
    CHECK(d.pad == false, "default pad is false");
    CHECK_EQ(d.pad_multiple_of, RMLP_DEFAULT_PAD_MULTIPLE, "default pad_multiple_of");
    CHECK_EQ(d.pad_multiple_of, 8, "default pad_multiple_of");
    CHECK(d.threshold == RMLP_DEFAULT_THRESHOLD && d.threshold == 0.85, "default threshold %g", d.threshold);
    CHECK_EQ(d.gate, RMLP_GATE_DISTINCT, "default gate");
}

int main(void) {
    if (rmlp_planner_create(&planner) != RMLP_OK) {
        printf("FAIL: rmlp_planner_create: %s\n", rmlp_last_error());
        return 1;
    }
    test_reference_cases();
    test_padding();
    test_gate();
    test_gate_rules();
    test_long_runs();
    test_reuse();
    test_default_params();
    rmlp_planner_free(planner);
    return tu_summary();
}
