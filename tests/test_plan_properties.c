/*
 * test_plan_properties.c: randomized batches (fixed seeds) with a tiny vocabulary, so paths are
 * shared heavily and at every depth. Each plan must pass plan_verify, equal the naive reference
 * element by element when radix is on, have N' = the number of distinct path prefixes, follow
 * the gate, and be reproducible (same planner twice, fresh planner). A mutation check makes sure
 * plan_verify itself rejects broken plans, so a passing run means something.
 */
#include <stdio.h>
#include <string.h>

#include "naive_plan.h"
#include "bench/plan_verify.h"
#include "radix_mlp.h"
#include "test_util.h"

#define N_SMALL_BATCHES 2000
#define N_FAMILY_BATCHES 1000
#define MAX_REPORTED_BATCHES 10

static rmlp_planner *planner;
static int reported_batches;

static void dump_batch(const tu_batch *b) {
    char buf[512];
    printf("    cu_seqlens [%s]\n", tu_fmt_array(b->cu, b->n_seqs + 1, buf, sizeof buf));
    printf("    input_ids  [%s]\n", tu_fmt_array(b->ids, b->n_tokens, buf, sizeof buf));
    printf("    positions  [%s]\n", tu_fmt_array(b->pos, b->n_tokens, buf, sizeof buf));
}

/* All the checks on one batch; `label` names the batch (seed, shape, params) in failure lines. */
static void check_batch(const char *label, const tu_batch *b, double threshold, uint32_t pad) {
    int failed_before = tu_failed;
    rmlp_plan_params params = tu_params(threshold, pad);
    rmlp_plan plan;
    char why[256];
    rmlp_status status = rmlp_plan_build(planner, b->ids, b->pos, b->n_tokens, b->cu, b->n_seqs, &params, &plan);
    if (!CHECK(status == RMLP_OK, "%s: status %d (%s)", label, status, rmlp_last_error())) goto done;
    CHECK(plan_verify(b->ids, b->pos, b->n_tokens, b->cu, b->n_seqs, pad, &plan, why, sizeof why) == 0,
          "%s: plan_verify: %s", label, why);

    naive_plan ref;
    if (!CHECK(naive_plan_build(b->ids, b->pos, b->n_tokens, b->cu, b->n_seqs, &ref) == 0, "%s: naive", label))
        goto done;
    CHECK_EQ(plan.n_distinct, threshold == 0.0 ? b->n_tokens : ref.n_compact, "%s: n_distinct", label);
    double ratio = b->n_tokens > 0 ? (double)ref.n_compact / (double)b->n_tokens : 1.0;
    int want_radix = threshold >= 1.0 || (threshold > 0.0 && ratio < threshold);
    CHECK_EQ(plan.use_radix, want_radix, "%s: gate (ratio %g)", label, ratio);
    CHECK_EQ(plan.n_compact, want_radix ? ref.n_compact : b->n_tokens, "%s: n_compact", label);
    if (plan.use_radix && plan.n_compact == ref.n_compact) {
        const char *names[5] = {"fold_gather", "scatter", "compact_input_ids", "compact_position_ids",
                                "compact_parent"};
        const uint32_t *got_arrays[5] = {plan.fold_gather, plan.scatter, plan.compact_input_ids,
                                         plan.compact_position_ids, plan.compact_parent};
        const uint32_t *ref_arrays[5] = {ref.fold_gather, ref.scatter, ref.compact_ids, ref.compact_pos,
                                         ref.compact_parent};
        for (int a = 0; a < 5; a++) {
            size_t len = a == 1 ? b->n_tokens : ref.n_compact;
            CHECK(tu_arrays_differ(names[a], got_arrays[a], ref_arrays[a], len, why, sizeof why) == 0,
                  "%s: library vs naive: %s", label, why);
        }
    }
    for (size_t i = 0; i < b->n_tokens; i++)
        if (!CHECK(plan.scatter[i] < plan.n_compact, "%s: scatter[%zu]=%u reaches padding", label, i, plan.scatter[i]))
            break;
    naive_plan_free(&ref);

    /* the same input again, on the same planner and on a fresh one */
    rmlp_plan first = tu_plan_copy(&plan), again;
    status = rmlp_plan_build(planner, b->ids, b->pos, b->n_tokens, b->cu, b->n_seqs, &params, &again);
    CHECK(status == RMLP_OK && tu_plan_diff(&again, &first, why, sizeof why) == 0, "%s: rebuilt on same planner: %s",
          label, status == RMLP_OK ? why : rmlp_last_error());
    rmlp_planner *fresh = NULL;
    if (CHECK(rmlp_planner_create(&fresh) == RMLP_OK, "%s: create", label)) {
        status = rmlp_plan_build(fresh, b->ids, b->pos, b->n_tokens, b->cu, b->n_seqs, &params, &again);
        CHECK(status == RMLP_OK && tu_plan_diff(&again, &first, why, sizeof why) == 0,
              "%s: rebuilt on fresh planner: %s", label, status == RMLP_OK ? why : rmlp_last_error());
    }
    rmlp_planner_free(fresh);
    tu_plan_copy_free(&first);
done:
    if (tu_failed > failed_before && reported_batches++ < MAX_REPORTED_BATCHES) dump_batch(b);
}

static void test_small_batches(void) {
    static const uint32_t pads[4] = {0, 1, 3, 8};
    static const double thresholds[10] = {1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.5, 0.9};
    for (uint64_t k = 0; k < N_SMALL_BATCHES; k++) {
        uint64_t rng = 0x5eed0000 + k;
        tu_batch_shape shape = {tu_rand_range(&rng, 1, 12), 12, tu_rand_range(&rng, 2, 3), 0, 0};
        shape.random_pos = tu_rand_range(&rng, 0, 9) < 3;
        if (tu_rand_range(&rng, 0, 9) < 3) shape.prefix_len = tu_rand_range(&rng, 1, 8);
        uint32_t pad = pads[tu_rand_range(&rng, 0, 3)];
        double threshold = thresholds[tu_rand_range(&rng, 0, 9)];
        tu_batch b = tu_random_batch(&rng, &shape);
        char label[160];
        snprintf(label, sizeof label, "batch %llu (B=%zu N=%zu vocab %u prefix %u random_pos %d threshold %g pad %u)",
                 (unsigned long long)k, b.n_seqs, b.n_tokens, shape.vocab, shape.prefix_len, shape.random_pos,
                 threshold, pad);
        check_batch(label, &b, threshold, pad);
        tu_batch_free(&b);
    }
}

/* Sequences that copy a random-length start of an earlier sequence (tokens and positions) and
 * then go their own way, sometimes only by a position: long shared runs split at every offset,
 * which the short batches above cannot reach (the radix tree compares runs in blocks of 16). */
static tu_batch family_batch(uint64_t *rng) {
    tu_batch b = {0};
    b.n_seqs = tu_rand_range(rng, 1, 12);
    b.cu = tu_xmalloc((b.n_seqs + 1) * sizeof(uint32_t));
    b.ids = tu_xmalloc(12 * 70 * sizeof(uint32_t));
    b.pos = tu_xmalloc(12 * 70 * sizeof(uint32_t));
    b.cu[0] = 0;
    for (size_t s = 0; s < b.n_seqs; s++) {
        uint32_t start = b.cu[s], len = tu_rand_range(rng, 0, 70), copied = 0;
        size_t parent = tu_rand_range(rng, 0, (uint32_t)s); /* s: no parent */
        if (parent < s && tu_rand_range(rng, 0, 9) < 8) {
            uint32_t parent_len = b.cu[parent + 1] - b.cu[parent];
            copied = tu_rand_range(rng, 0, len < parent_len ? len : parent_len);
            memcpy(b.ids + start, b.ids + b.cu[parent], copied * sizeof(uint32_t));
            memcpy(b.pos + start, b.pos + b.cu[parent], copied * sizeof(uint32_t));
        }
        for (uint32_t k = copied; k < len; k++) {
            b.ids[start + k] = tu_rand_range(rng, 1, 3);
            b.pos[start + k] = k;
        }
        if (copied < len && tu_rand_range(rng, 0, 4) == 0) b.pos[start + copied] += 7; /* differ by position only */
        b.cu[s + 1] = start + len;
    }
    b.n_tokens = b.cu[b.n_seqs];
    return b;
}

static void test_family_batches(void) {
    for (uint64_t k = 0; k < N_FAMILY_BATCHES; k++) {
        uint64_t rng = 0xfa0000 + k;
        tu_batch b = family_batch(&rng);
        uint32_t pad = k % 3 == 0 ? 8 : 0;
        char label[96];
        snprintf(label, sizeof label, "family batch %llu (B=%zu N=%zu pad %u)", (unsigned long long)k, b.n_seqs,
                 b.n_tokens, pad);
        check_batch(label, &b, 1.0, pad);
        tu_batch_free(&b);
    }
}

static void test_large_batches(void) {
    static const tu_batch_shape shapes[4] = {
        {100, 100, 2, 20, 0}, /* ~5000 tokens, a shared prefix, then binary tokens */
        {60, 160, 3, 0, 1},   /* random positions */
        {1, 4000, 2, 0, 0},   /* one long sequence: nothing can be shared */
        {1500, 3, 1000, 1, 0}, /* fan-out: hundreds of children under one node */
    };
    for (int s = 0; s < 4; s++) {
        uint64_t rng = 0xb16b00b5 + (uint64_t)s;
        tu_batch b = tu_random_batch(&rng, &shapes[s]);
        char label[96];
        snprintf(label, sizeof label, "large batch %d (B=%zu N=%zu)", s, b.n_seqs, b.n_tokens);
        check_batch(label, &b, 1.0, s == 0 ? 8 : 0);
        tu_batch_free(&b);
    }
}

/* plan_verify must reject each of these corruptions of a valid plan (each breaks one property). */
static void test_verifier_rejects(void) {
    /* N' = 4: fold [0,1,2,5], scatter [0,1,2,0,1,3,0,0,0,1,3], parent [-,0,1,1]; padded to 8 */
    static const uint32_t ids[11] = {1, 2, 3, 1, 2, 4, 1, 1, 1, 2, 4}, pos[11] = {0, 1, 2, 0, 1, 2, 0, 0, 0, 1, 2};
    static const uint32_t cu[6] = {0, 3, 6, 7, 8, 11};
    static const char *mutations[] = {"scatter to a padding row", "scatter to a compact row of another path",
                                      "fold_gather to a row of another path", "fold_gather to a later occurrence",
                                      "wrong compact token", "wrong compact position", "wrong parent",
                                      "padding row not blank", "n_compact_padded not the next multiple",
                                      "a path held twice (not minimal)", "n_distinct != n_compact",
                                      "wrong compact_ratio", "identity plan claimed as radix", "wrong n_seqs",
                                      "a sequence owning a row first seen in another",
                                      "a run boundary inside consecutive rows", "a sequence's runs given to the next"};
    char why[256];
    rmlp_plan_params radix = tu_params(1.0, 8), identity = tu_params(0.0, 0);
    for (size_t m = 0; m < sizeof mutations / sizeof mutations[0]; m++) {
        int from_identity = m == 12;
        uint32_t pad = from_identity ? 0 : 8;
        rmlp_plan plan;
        rmlp_status status = rmlp_plan_build(planner, ids, pos, 11, cu, 5, from_identity ? &identity : &radix, &plan);
        if (!CHECK(status == RMLP_OK, "mutation base: %s", rmlp_last_error())) return;
        CHECK(plan_verify(ids, pos, 11, cu, 5, pad, &plan, why, sizeof why) == 0, "unmutated plan: %s", why);
        CHECK_EQ(plan.n_compact, from_identity ? 11 : 4, "N' of the mutation batch");
        if (plan.n_compact_padded != (from_identity ? 11u : 8u)) continue;
        rmlp_plan bad = tu_plan_copy(&plan);
        uint32_t *fold = (uint32_t *)bad.fold_gather, *scatter = (uint32_t *)bad.scatter;
        uint32_t *cids = (uint32_t *)bad.compact_input_ids, *cpos = (uint32_t *)bad.compact_position_ids;
        uint32_t *parent = (uint32_t *)bad.compact_parent;
        switch (m) {
        case 0: scatter[4] = 5; break;
        case 1: scatter[7] = 3; break;
        case 2: fold[3] = 6; break;
        case 3: fold[3] = 10; break; /* row 10 has row 5's path: only first occurrence is broken */
        case 4: cids[1] = 9; break;
        case 5: cpos[2] = 7; break;
        case 6: parent[3] = 0; break;
        case 7: cids[6] = 1; break;
        case 8: bad.n_compact_padded = 16; break;
        case 9: /* rows 8..10 get their own copies of compact rows 0, 1, 3: consistent but not minimal */
            bad.n_compact = bad.n_distinct = 7;
            bad.compact_ratio = 7.0 / 11.0;
            for (uint32_t k = 0; k < 3; k++) {
                fold[4 + k] = 8 + k, cids[4 + k] = ids[8 + k], cpos[4 + k] = pos[8 + k], scatter[8 + k] = 4 + k;
                parent[4 + k] = k == 0 ? RMLP_NO_PARENT : 3 + k;
            }
            break;
        case 10: bad.n_distinct = 3; break;
        case 11: bad.compact_ratio = 0.4; break;
        case 12: bad.use_radix = true, bad.n_distinct = 11, bad.compact_ratio = 1.0; break;
        case 13: bad.n_seqs = 4; break;
        /* layout: qo_indptr [0,3,4,4,4,4]; runs start [0 | 3,5 | 6 | 7 | 8,10], run_indptr [0,1,3,4,5,7] */
        case 14: ((uint32_t *)bad.qo_indptr)[1] = 2; break;
        case 15: ((uint32_t *)bad.run_start)[2] = 4; break;
        case 16: ((uint32_t *)bad.run_indptr)[2] = 2; break;
        }
        CHECK(plan_verify(ids, pos, 11, cu, 5, pad, &bad, why, sizeof why) != 0, "plan_verify accepted: %s",
              mutations[m]);
        tu_plan_copy_free(&bad);
    }
}

int main(void) {
    if (rmlp_planner_create(&planner) != RMLP_OK) {
        printf("FAIL: rmlp_planner_create: %s\n", rmlp_last_error());
        return 1;
    }
    test_verifier_rejects();
    test_small_batches();
    test_family_batches();
    test_large_batches();
    rmlp_planner_free(planner);
    return tu_summary();
}
