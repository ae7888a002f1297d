/*
 * test_forged_plans.c: plans a host built or edited (issue 31). Every model call that takes a plan
 * refuses one whose maps disagree, RMLP_ERR_INVALID_ARGUMENT naming the first bad index, before
 * reading it: a qo_indptr that disagrees with scatter, a wrong in-range scatter entry, a non-causal
 * scatter, a compact row past the batch, a NULL, out-of-range, forward-pointing or inconsistent
 * compact_parent, broken runs, and a library plan whose arrays were edited in place. A refused
 * forged batch leaves a prefix cache as it was: later genuine batches match a context without one.
 * Random one-element mutations of genuine plans: each is refused, or runs with the same output
 * with and without a cache, and the genuine batch after it still matches.
 */
#include <stdio.h>

#include "test_util.h"
#include "tiny_setup.h"

#define CAP 64 /* tokens a context holds */
#define NP RMLP_NO_PARENT

static rmlp_model_config cfg;
static rmlp_context *plain, *cached; /* without and with a prefix cache */
static float *hidden, *out, *q, *kv, *attn;

/* Batch A: [1 2 3 4] and [1 2 5 6 7 8], sharing two rows: 8 compact rows, qo_indptr [0, 4, 8]. */
static const uint32_t ids_a[10] = {1, 2, 3, 4, 1, 2, 5, 6, 7, 8}, pos_a[10] = {0, 1, 2, 3, 0, 1, 2, 3, 4, 5};
static const uint32_t cu_a[3] = {0, 4, 10};

/* A host's copy (planner NULL) of the planner's plan of a batch. */
static rmlp_plan owned_plan(rmlp_planner *planner, const uint32_t *ids, const uint32_t *pos, size_t n,
                            const uint32_t *cu, size_t n_seqs, uint32_t pad) {
    rmlp_plan_params params = tu_params(1.0, pad);
    rmlp_plan plan;
    memset(&plan, 0, sizeof plan);
    CHECK(rmlp_plan_build(planner, ids, pos, n, cu, n_seqs, &params, &plan) == RMLP_OK, "plan: %s",
          rmlp_last_error());
    return tu_plan_copy(&plan);
}

#define W(array) ((uint32_t *)(array)) /* a host may write the plan's arrays */

/* Every call that takes a plan, on `plan`: refused with `want` in the message, which names the call. */
static void expect_refused_everywhere(const char *name, const rmlp_plan *plan, const char *want) {
    float logits[2 * 8], prob[8], pooled[8 * 16];
    static const char *const calls[] = {
        "rmlp_forward", "rmlp_forward_compact", "rmlp_forward", "rmlp_forward_compact", "rmlp_context_set_plan",
        "rmlp_embed", "rmlp_layer_pre_attention", "rmlp_layer_pre_attention_compact", "rmlp_layer_post_attention",
        "rmlp_layer_post_attention_compact", "rmlp_final_norm", "rmlp_final_norm_compact",
        "rmlp_context_pool_compact", "rmlp_score_pair_compact", "rmlp_generate_begin"};
    for (size_t c = 0; c < sizeof calls / sizeof calls[0]; c++) {
        rmlp_status status = RMLP_OK;
        switch (c) {
        case 0: status = rmlp_forward(plain, plan, NULL, NULL, out); break;
        case 1: status = rmlp_forward_compact(plain, plan, NULL, NULL, out); break;
        case 2: status = rmlp_forward(cached, plan, NULL, NULL, out); break;
        case 3: status = rmlp_forward_compact(cached, plan, NULL, NULL, out); break;
        case 4: status = rmlp_context_set_plan(plain, plan); break;
        case 5: status = rmlp_embed(plain, plan, hidden); break;
        case 6: status = rmlp_layer_pre_attention(plain, 0, plan, hidden, q, kv, kv); break;
        case 7: status = rmlp_layer_pre_attention_compact(plain, 1, plan, hidden, q, kv, kv); break;
        case 8: status = rmlp_layer_post_attention(plain, 0, plan, attn, hidden); break;
        case 9: status = rmlp_layer_post_attention_compact(plain, 1, plan, attn, hidden); break;
        case 10: status = rmlp_final_norm(plain, plan, hidden, out); break;
        case 11: status = rmlp_final_norm_compact(plain, plan, hidden, out); break;
        case 12: status = rmlp_context_pool_compact(plain, plan, hidden, RMLP_POOLING_LAST, false, pooled); break;
        case 13: status = rmlp_score_pair_compact(plain, plan, hidden, 1, 2, logits, prob); break;
        default: status = rmlp_generate_begin(cached, plan, NULL, logits); break;
        }
        const char *msg = rmlp_last_error();
        size_t fn_len = strlen(calls[c]);
        if (c == 0) tu_record_bad_input(name, status, msg);
        CHECK(status == RMLP_ERR_INVALID_ARGUMENT && strstr(msg, want) != NULL &&
                  strncmp(msg, calls[c], fn_len) == 0 && msg[fn_len] == ':',
              "%s, %s (cached: %d): status %d, message \"%s\" (want %d, \"%s\")", name, calls[c], c == 2 || c == 3 || c == 14, status, msg,
              RMLP_ERR_INVALID_ARGUMENT, want);
    }
}

/* The named forgeries of batch A's plan, each against every call. */
static void test_forged(rmlp_planner *planner) {
    static const struct {
        const char *name, *want;
        int array; /* 0 scatter, 1 fold_gather, 2 compact_parent, 3 qo_indptr, 4 run_start */
        uint32_t at, value;
    } cases[] = {
        {"plan: qo_indptr [0,2,8], scatter's is [0,4,8]", "plan->scatter[0]=0, but row 0 (sequence 0, offset 0) "
         "comes before the last 2 rows", 3, 1, 2},
        {"plan: qo_indptr [0,3,8], scatter's is [0,4,8]", "plan->scatter[0]=0, but row 0 (sequence 0, offset 0) "
         "comes before the last 3 rows", 3, 1, 3},
        {"plan: a wrong in-range scatter entry (another path's row)", "plan->fold_gather[7]=9 but plan->scatter[9]=3",
         0, 9, 3},
        {"plan: a wrong in-range scatter entry (an earlier row of the path)", "plan->compact_parent[0]=RMLP_NO_PARENT, "
         "but row 5 (sequence 1, offset 1) reads compact row 0 after row 4's compact row 0", 0, 5, 0},
        {"plan: a compact id past n_compact in scatter", "plan->scatter[9]=8 is out of range (< 8)", 0, 9, 8},
        {"plan: compact_parent out of range", "plan->compact_parent[5]=1000 is out of range (< n_compact=8)", 2, 5,
         1000},
        {"plan: compact_parent pointing forward", "plan->compact_parent[2]=6 points forward", 2, 2, 6},
        {"plan: compact_parent not the row before's (would poison a prefix cache)", "plan->compact_parent[5]=2, but "
         "row 7 (sequence 1, offset 3) reads compact row 5 after row 6's compact row 4", 2, 5, 2},
        {"plan: a path run that skips compact rows", "plan->scatter[6]=4, but run 1 (rows 4..7) reads consecutive "
         "compact rows, so 2", 4, 2, 7},
        {"plan: a gather row that is not its compact row's first", "plan->fold_gather[3]=1 is not after "
         "fold_gather[2]=2", 1, 3, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rmlp_plan plan = owned_plan(planner, ids_a, pos_a, 10, cu_a, 2, 0);
        if (!CHECK(plan.n_compact == 8 && plan.qo_indptr[1] == 4 && plan.n_runs == 3 && plan.run_start[2] == 6,
                   "batch A's plan: %u compact rows, qo_indptr[1]=%u, %u runs", plan.n_compact, plan.qo_indptr[1],
                   plan.n_runs))
            return;
        uint32_t *arrays[] = {W(plan.scatter), W(plan.fold_gather), W(plan.compact_parent), W(plan.qo_indptr),
                              W(plan.run_start)};
        arrays[cases[c].array][cases[c].at] = cases[c].value;
        expect_refused_everywhere(cases[c].name, &plan, cases[c].want);
        tu_plan_copy_free(&plan);
    }

    /* Whole-plan forgeries. */
    rmlp_plan plan = owned_plan(planner, ids_a, pos_a, 10, cu_a, 2, 0);
    const uint32_t *parents = plan.compact_parent;
    plan.compact_parent = NULL;
    expect_refused_everywhere("plan: compact_parent NULL", &plan, "plan->compact_parent is NULL but n_compact=8");
    plan.compact_parent = parents;
    tu_plan_copy_free(&plan);

    /* A compact row that no batch row reads: padded to 16, the first padding row counted as compact. */
    plan = owned_plan(planner, ids_a, pos_a, 10, cu_a, 2, 16);
    plan.n_compact = 9;
    free(W(plan.qo_indptr)), free(W(plan.run_indptr)), free(W(plan.run_start));
    plan.qo_indptr = plan.run_indptr = plan.run_start = NULL, plan.n_runs = 0; /* a 0.1.0 host's plan */
    expect_refused_everywhere("plan: a compact row past the batch's (n_compact one too many)", &plan,
                              "plan->fold_gather[8]=0 is not after fold_gather[7]=9");
    tu_plan_copy_free(&plan);

    /* Non-causal: row 0 reads compact row 1, first read by row 2 (the rows' paths differ besides). */
    static const uint32_t scatter[3] = {1, 0, 1}, gather[2] = {1, 2}, ids[2] = {3, 4}, pos[2] = {0, 1};
    static const uint32_t parent[2] = {NP, NP}, cu[2] = {0, 3};
    rmlp_plan causal = {.n_tokens = 3, .n_seqs = 1, .n_distinct = 2, .n_compact = 2, .n_compact_padded = 2,
                        .use_radix = true, .fold_gather = gather, .scatter = scatter, .compact_input_ids = ids,
                        .compact_position_ids = pos, .compact_parent = parent, .cu_seqlens = cu};
    expect_refused_everywhere("plan: a non-causal scatter (a row reads a later row's compact row)", &causal,
                              "plan->scatter[0]=1 reads compact row 1, which is gathered from the later row "
                              "fold_gather[1]=2");

    /* A library plan (its planner set, generation current) whose arrays the host changed in place. */
    rmlp_plan_params params = tu_params(1.0, 0);
    rmlp_plan library;
    if (CHECK(rmlp_plan_build(planner, ids_a, pos_a, 10, cu_a, 2, &params, &library) == RMLP_OK, "plan: %s",
              rmlp_last_error())) {
        W(library.compact_parent)[5] = 2;
        expect_refused_everywhere("plan: a library plan whose compact_parent was edited in place", &library,
                                  "plan->compact_parent[5]=2, but row 7");
        W(library.compact_parent)[5] = 4;
        CHECK(rmlp_forward(cached, &library, NULL, NULL, out) == RMLP_OK, "the plan restored: %s", rmlp_last_error());
    }
}

/* Output rows of a forward that hold results: batch rows, or compact rows with `compact` (padding
 * rows are zeros from a cached context, the padding's forward from another). */
static size_t out_rows(const rmlp_plan *plan, bool compact) { return compact ? plan->n_compact : plan->n_tokens; }

/* rmlp_forward (or _compact) of plan on both contexts: both refuse it alike, or both run it to the
 * same output. Returns the status. */
static rmlp_status forward_both(const char *what, const rmlp_plan *plan, bool compact, float *got, float *want) {
    rmlp_status warm = tu_forward(cached, plan, compact, got);
    char warm_msg[512];
    snprintf(warm_msg, sizeof warm_msg, "%s", rmlp_last_error());
    rmlp_status cold = tu_forward(plain, plan, compact, want);
    CHECK(warm == cold, "%s: status %d with the cache (\"%s\"), %d without (\"%s\")", what, warm, warm_msg, cold,
          rmlp_last_error());
    if (warm == RMLP_OK && cold == RMLP_OK) {
        double ref = 0.0, diff = tu_max_abs_diff(got, want, out_rows(plan, compact) * cfg.hidden_size, &ref);
        CHECK(diff <= 1e-5 * (ref > 1.0 ? ref : 1.0), "%s: max |cached - uncached| = %g (outputs up to %g)", what,
              diff, ref);
    }
    return warm;
}

/* Batch B after the forged batch: [1 2 3 6 7] is the path the forged parent claimed for row 7. */
static void test_cache_not_poisoned(rmlp_planner *planner) {
    rmlp_cache_stats before, after;
    CHECK(rmlp_context_cache_clear(cached) == RMLP_OK && rmlp_context_cache_stats(cached, &before) == RMLP_OK,
          "clear: %s", rmlp_last_error());
    rmlp_plan forged = owned_plan(planner, ids_a, pos_a, 10, cu_a, 2, 0);
    W(forged.compact_parent)[5] = 2; /* row 7 (token 6 at 3) claims the path [1 2 3] */
    CHECK(rmlp_forward(cached, &forged, NULL, NULL, out) == RMLP_ERR_INVALID_ARGUMENT, "the forged batch ran: %s",
          rmlp_last_error());
    CHECK(rmlp_context_cache_stats(cached, &after) == RMLP_OK && after.slots_used == 0 &&
              after.batches == before.batches,
          "the refused batch changed the cache: %llu batches (%llu before), %llu slots used",
          (unsigned long long)after.batches, (unsigned long long)before.batches,
          (unsigned long long)after.slots_used);
    static const uint32_t ids_b[9] = {1, 2, 3, 6, 7, 1, 2, 5, 6}, pos_b[9] = {0, 1, 2, 3, 4, 0, 1, 2, 3};
    static const uint32_t cu_b[3] = {0, 5, 9};
    rmlp_plan genuine = owned_plan(planner, ids_b, pos_b, 9, cu_b, 2, 0);
    float *want = tu_xmalloc((size_t)CAP * cfg.hidden_size * sizeof(float));
    forward_both("batch B after the forged batch", &genuine, false, out, want);
    forward_both("batch B again (cached)", &genuine, true, out, want);
    free(want);
    tu_plan_copy_free(&genuine);
    tu_plan_copy_free(&forged);
}

/* Overwrites one random element of one of the plan's maps (which the host owns) with a random
 * value near it or anywhere. Returns the name of the array. */
static const char *mutate(uint64_t *rng, rmlp_plan *p) {
    struct {
        const char *name;
        uint32_t *array;
        uint32_t n;
    } maps[] = {
        {"scatter", W(p->scatter), p->n_tokens},
        {"fold_gather", W(p->fold_gather), p->n_compact_padded},
        {"compact_parent", W(p->compact_parent), p->n_compact_padded},
        {"compact_input_ids", W(p->compact_input_ids), p->n_compact_padded},
        {"compact_position_ids", W(p->compact_position_ids), p->n_compact_padded},
        {"qo_indptr", W(p->qo_indptr), p->n_seqs + 1},
        {"run_indptr", W(p->run_indptr), p->n_seqs + 1},
        {"run_start", W(p->run_start), p->n_runs},
    };
    size_t m = tu_rand_range(rng, 0, sizeof maps / sizeof maps[0] - 1);
    if (maps[m].n == 0) return "nothing";
    uint32_t at = tu_rand_range(rng, 0, maps[m].n - 1), *x = &maps[m].array[at];
    switch (tu_rand_range(rng, 0, 3)) {
    case 0: *x += 1; break;
    case 1: *x -= 1; break;
    case 2: *x = tu_rand_range(rng, 0, p->n_tokens); break;
    default: *x = NP; break;
    }
    return maps[m].name;
}

static void test_random_mutations(rmlp_planner *planner) {
    uint64_t rng = 0xF0B6ED;
    float *got = tu_xmalloc((size_t)CAP * cfg.hidden_size * sizeof(float));
    float *want = tu_xmalloc((size_t)CAP * cfg.hidden_size * sizeof(float));
    size_t refused = 0, ran = 0;
    for (int round = 0; round < 400; round++) {
        tu_batch b = tu_trace_batch(&rng, 4, 12);
        for (uint32_t i = 0; i < b.n_tokens; i++) b.ids[i] %= cfg.vocab_size;
        uint32_t pad = round % 4 == 0 ? 8 : 0;
        rmlp_plan forged = owned_plan(planner, b.ids, b.pos, b.n_tokens, b.cu, b.n_seqs, pad);
        rmlp_plan genuine = tu_plan_copy(&forged);
        char what[160];
        const char *array = mutate(&rng, &forged);
        snprintf(what, sizeof what, "round %d, %s mutated", round, array);
        rmlp_status status = forward_both(what, &forged, round % 2 == 1, got, want);
        status == RMLP_OK ? ran++ : refused++;
        snprintf(what, sizeof what, "round %d: the genuine batch after the %s mutation", round, array);
        CHECK(forward_both(what, &genuine, round % 3 == 0, got, want) == RMLP_OK, "%s: %s", what, rmlp_last_error());
        tu_plan_copy_free(&genuine);
        tu_plan_copy_free(&forged);
        tu_batch_free(&b);
    }
    printf("random mutations: %zu refused, %zu ran (consistent plans of other batches)\n", refused, ran);
    CHECK(refused > 200 && ran > 20, "mutations: %zu refused, %zu ran", refused, ran);
    free(got), free(want);
}

int main(void) {
    rmlp_model_config tiny = {.architecture = RMLP_ARCH_QWEN3, .vocab_size = 1000, .hidden_size = 16,
                              .intermediate_size = 24, .num_hidden_layers = 2, .num_attention_heads = 2,
                              .num_key_value_heads = 1, .head_dim = 8, .max_position_embeddings = 64,
                              .rms_norm_eps = 1e-6, .rope_theta = 1e6, .qk_norm = true, .tie_word_embeddings = true};
    tiny_setup t;
    if (!tiny_setup_open(&t, &tiny, 31, CAP, 1u << 20)) return tu_summary();
    cfg = t.cfg, plain = t.ctx, cached = t.cached;
    rmlp_planner *planner = t.planner;
    size_t rows = CAP + 16, hsz = cfg.hidden_size, qd = (size_t)cfg.num_attention_heads * cfg.head_dim;
    hidden = tu_xmalloc(rows * hsz * sizeof(float)), out = tu_xmalloc(rows * hsz * sizeof(float));
    q = tu_xmalloc(rows * qd * sizeof(float)), attn = tu_xmalloc(rows * qd * sizeof(float));
    kv = tu_xmalloc(rows * qd * sizeof(float));
    test_forged(planner);
    test_cache_not_poisoned(planner);
    test_random_mutations(planner);
    free(hidden), free(out), free(q), free(attn), free(kv);
    tiny_setup_close(&t);
    return tu_summary();
}
