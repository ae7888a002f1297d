/*
 * test_forward_last.c: rmlp_forward_last on the CPU, for every fixture in integration_tests/fixtures
 * (transformers' tiny checkpoints: every architecture, windows, RoPE scalings, Gemma's norms):
 *   - its row s equals row cu_seqlens[s + 1] - 1 of rmlp_forward on the same plan and context
 *     within 2e-6 of the largest value (the last layer's GEMMs run on n_seqs rows, not N', and
 *     OpenBLAS's kernels depend on the row count; the test says how many were bit-identical), radix
 *     off and on, attention in full and compact space, built-in and through a host callback;
 *   - it matches transformers' pooled_last within 1e-4, and rmlp_score_pair over its rows (one row a
 *     sequence) matches logits_last;
 *   - through a prefix cache (cold, then the same batch again) it is the cached rmlp_forward's
 *     last rows bit for bit;
 *   - a batch whose sequences repeat (two sequences, one compact last row) gives each its row;
 *   - bad calls (NULL context, plan or out) return RMLP_ERR_INVALID_ARGUMENT naming the argument.
 * Usage: test_forward_last FIXTURES_DIR
 */
#include "model/safetensors.h"
#include "fixtures.h"
#include "test_util.h"

#define TOLERANCE 1e-4
#define SCORE_A 3u
#define SCORE_B 7u

static const char *const fixtures[] = FIXTURE_NAMES;
static size_t bit_identical, compared;

/* The host's attention: the library's own for the layout it is handed. */
static rmlp_status host_attention(void *user_data, const rmlp_attention_args *args) {
    return args->layout == RMLP_ATTENTION_COMPACT ? rmlp_attention_compact(user_data, args)
                                                  : rmlp_attention(user_data, args);
}

/* last (n_seqs, hsz) = rows cu[s + 1] - 1 of out (n_tokens, hsz). */
static void last_rows_of(const float *out, const uint32_t *cu, size_t n_seqs, size_t hsz, float *last) {
    for (size_t s = 0; s < n_seqs; s++) memcpy(last + s * hsz, out + (size_t)(cu[s + 1] - 1) * hsz, hsz * sizeof(float));
}

/* rmlp_forward_last against rmlp_forward's last rows, in one context and plan. */
static void compare_once(const char *what, rmlp_context *ctx, const rmlp_plan *plan, rmlp_attention_fn attention,
                         size_t hsz, float *full, float *want, float *got) {
    size_t n = plan->n_seqs * hsz;
    if (!CHECK(rmlp_forward(ctx, plan, attention, ctx, full) == RMLP_OK, "%s: forward: %s", what, rmlp_last_error()) ||
        !CHECK(rmlp_forward_last(ctx, plan, attention, ctx, got) == RMLP_OK, "%s: forward_last: %s", what,
               rmlp_last_error()))
        return;
    last_rows_of(full, plan->cu_seqlens, plan->n_seqs, hsz, want);
    double ref = 0.0, diff = tu_max_abs_diff(got, want, n, &ref);
    CHECK(diff <= 2e-6 * ref, "%s: forward_last vs forward's last rows: max abs diff %.3g (max |value| %.3g)", what,
          diff, ref);
    compared++;
    bit_identical += diff == 0.0;
}

/* Every way rmlp_forward runs a batch: radix off and on, full and compact space, built-in
 * attention and the callback; then transformers' pooled_last and logits_last. */
static void test_modes(const char *name, rmlp_model *model, const rmlp_model_config *cfg, const fixture_batch *b,
                       const st_file *expected) {
    size_t hsz = cfg->hidden_size;
    float *full = tu_xmalloc(b->n_tokens * hsz * sizeof(float)), *want = tu_xmalloc(b->n_seqs * hsz * sizeof(float));
    float *got = tu_xmalloc(b->n_seqs * hsz * sizeof(float));
    rmlp_planner *planner = NULL;
    CHECK(rmlp_planner_create(&planner) == RMLP_OK, "%s: planner", name);
    for (int space = 0; planner != NULL && space < 2; space++) {
        rmlp_context_params cp = rmlp_context_default_params();
        cp.attention_space = space ? RMLP_ATTENTION_COMPACT : RMLP_ATTENTION_FULL;
        rmlp_context *ctx = NULL;
        if (!CHECK(rmlp_context_create_with_params(model, b->n_tokens, &cp, &ctx) == RMLP_OK, "%s: context: %s", name,
                   rmlp_last_error()))
            continue;
        for (int radix = 0; radix < 2; radix++) {
            rmlp_plan_params pp = tu_params(radix ? 1.0 : 0.0, radix ? 8 : 0);
            rmlp_plan plan;
            if (!CHECK(rmlp_plan_build(planner, b->ids, b->pos, b->n_tokens, b->cu, b->n_seqs, &pp, &plan) == RMLP_OK,
                       "%s: plan: %s", name, rmlp_last_error()))
                continue;
            for (int host = 0; host < 2; host++) {
                char what[256];
                snprintf(what, sizeof what, "%s (radix %s, %s space, %s attention)", name, radix ? "on" : "off",
                         space ? "compact" : "full", host ? "callback" : "built-in");
                compare_once(what, ctx, &plan, host ? host_attention : NULL, hsz, full, want, got);
            }
            const st_tensor *pooled = st_find(expected, "pooled_last");
            if (CHECK(pooled != NULL && pooled->nbytes == b->n_seqs * hsz * sizeof(float), "%s: pooled_last", name))
                CHECK(tu_max_abs_diff(got, pooled->data, b->n_seqs * hsz, NULL) <= TOLERANCE,
                      "%s radix=%d space=%d: forward_last vs transformers' pooled_last beyond %.0e", name, radix, space,
                      TOLERANCE);
        }
        /* the scores over the last rows, one row a sequence */
        const st_tensor *logits_last = st_find(expected, "logits_last");
        uint32_t *ones = tu_xmalloc((b->n_seqs + 1) * sizeof(uint32_t));
        for (size_t s = 0; s <= b->n_seqs; s++) ones[s] = (uint32_t)s;
        float logits[2 * 64], prob[64];
        if (logits_last != NULL && b->n_seqs <= 64 &&
            CHECK(rmlp_score_pair(ctx, got, b->n_seqs, ones, b->n_seqs, SCORE_A, SCORE_B, logits, prob) == RMLP_OK,
                  "%s: score over the last rows: %s", name, rmlp_last_error())) {
            const float *ref = logits_last->data;
            for (size_t s = 0; s < b->n_seqs; s++)
                CHECK(fabsf(logits[2 * s] - ref[s * cfg->vocab_size + SCORE_A]) <= TOLERANCE &&
                          fabsf(logits[2 * s + 1] - ref[s * cfg->vocab_size + SCORE_B]) <= TOLERANCE,
                      "%s: seq %zu logits (%g, %g) vs transformers'", name, s, logits[2 * s], logits[2 * s + 1]);
        }
        free(ones);
        rmlp_context_free(ctx);
    }
    rmlp_planner_free(planner);
    free(full), free(want), free(got);
}

/* Through a prefix cache: the cached forward's last rows, cold and with every row cached. */
static void test_cache(const char *name, rmlp_model *model, const rmlp_model_config *cfg, const fixture_batch *b) {
    size_t hsz = cfg->hidden_size;
    rmlp_context_params cp = rmlp_context_default_params();
    cp.cache_bytes = 8u << 20;
    rmlp_context *ctx[2] = {NULL, NULL}; /* one for rmlp_forward, one for rmlp_forward_last */
    rmlp_planner *planner = NULL;
    rmlp_plan plan;
    rmlp_plan_params pp = tu_params(1.0, 8);
    if (!CHECK(rmlp_context_create_with_params(model, b->n_tokens, &cp, &ctx[0]) == RMLP_OK &&
                   rmlp_context_create_with_params(model, b->n_tokens, &cp, &ctx[1]) == RMLP_OK &&
                   rmlp_planner_create(&planner) == RMLP_OK &&
                   rmlp_plan_build(planner, b->ids, b->pos, b->n_tokens, b->cu, b->n_seqs, &pp, &plan) == RMLP_OK,
               "%s: cache setup: %s", name, rmlp_last_error()))
        goto done;
    float *full = tu_xmalloc(b->n_tokens * hsz * sizeof(float)), *want = tu_xmalloc(b->n_seqs * hsz * sizeof(float));
    float *got = tu_xmalloc(b->n_seqs * hsz * sizeof(float));
    for (int round = 0; round < 2; round++) {
        if (CHECK(rmlp_forward(ctx[0], &plan, NULL, NULL, full) == RMLP_OK &&
                      rmlp_forward_last(ctx[1], &plan, NULL, NULL, got) == RMLP_OK,
                  "%s: cached round %d: %s", name, round, rmlp_last_error())) {
            last_rows_of(full, b->cu, b->n_seqs, hsz, want);
            CHECK(memcmp(got, want, b->n_seqs * hsz * sizeof(float)) == 0,
                  "%s: cached round %d: forward_last differs from the cached forward's last rows", name, round);
        }
    }
    rmlp_cache_stats stats;
    if (CHECK(rmlp_context_cache_stats(ctx[1], &stats) == RMLP_OK, "%s: cache stats", name))
        CHECK(stats.hit_tokens > 0, "%s: the second round found nothing cached", name);
    free(full), free(want), free(got);
done:
    rmlp_planner_free(planner);
    rmlp_context_free(ctx[0]);
    rmlp_context_free(ctx[1]);
}

/* The fixture's first sequence twice, then its second: two sequences end on one compact row. */
static void test_repeated(const char *name, rmlp_model *model, const rmlp_model_config *cfg, const fixture_batch *b) {
    if (b->n_seqs < 2) return;
    size_t hsz = cfg->hidden_size, len0 = b->cu[1], len1 = b->cu[2] - b->cu[1], n = 2 * len0 + len1;
    uint32_t *ids = tu_xmalloc(n * sizeof(uint32_t)), *pos = tu_xmalloc(n * sizeof(uint32_t));
    uint32_t cu[4] = {0, (uint32_t)len0, (uint32_t)(2 * len0), (uint32_t)n};
    for (size_t i = 0; i < n; i++) {
        size_t src = i < 2 * len0 ? i % len0 : len0 + (i - 2 * len0);
        ids[i] = b->ids[src], pos[i] = b->pos[src];
    }
    rmlp_context *ctx = NULL;
    rmlp_planner *planner = NULL;
    rmlp_plan plan;
    rmlp_plan_params pp = tu_params(1.0, 8);
    float *full = tu_xmalloc(n * hsz * sizeof(float)), want[3 * 4096], got[3 * 4096];
    if (CHECK(hsz <= 4096, "%s: hidden %zu", name, hsz) &&
        CHECK(rmlp_context_create(model, n, &ctx) == RMLP_OK && rmlp_planner_create(&planner) == RMLP_OK &&
                  rmlp_plan_build(planner, ids, pos, n, cu, 3, &pp, &plan) == RMLP_OK,
              "%s: repeated setup: %s", name, rmlp_last_error()) &&
        CHECK(plan.scatter[cu[1] - 1] == plan.scatter[cu[2] - 1], "%s: the repeated sequences' last rows differ", name)) {
        compare_once(name, ctx, &plan, NULL, hsz, full, want, got);
        CHECK(memcmp(got, got + hsz, hsz * sizeof(float)) == 0, "%s: the repeated sequences' rows differ", name);
    }
    rmlp_planner_free(planner);
    rmlp_context_free(ctx);
    free(ids), free(pos), free(full);
}

static void test_fixture(const char *dir, const char *name) {
    char path[1024], why[1200];
    fixture_batch b;
    snprintf(path, sizeof path, "%s/%s/batch.json", dir, name);
    if (!CHECK(fixture_read_batch(path, &b, why, sizeof why) == 0, "%s", why)) return;
    snprintf(path, sizeof path, "%s/%s/expected.safetensors", dir, name);
    st_file *expected = NULL;
    rmlp_model *model = NULL;
    rmlp_model_config cfg;
    CHECK(st_open(path, &expected) == RMLP_OK, "%s: %s", name, rmlp_last_error());
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (expected != NULL &&
        CHECK(rmlp_model_load(path, NULL, &model) == RMLP_OK && rmlp_model_get_config(model, &cfg) == RMLP_OK,
              "%s: load: %s", name, rmlp_last_error())) {
        test_modes(name, model, &cfg, &b, expected);
        test_cache(name, model, &cfg, &b);
        test_repeated(name, model, &cfg, &b);
    }
    rmlp_model_free(model);
    st_close(expected);
    fixture_batch_free(&b);
}

/* NULL arguments: a status naming the argument, never a crash. */
static void test_bad_calls(const char *dir) {
    char path[1024], why[1200];
    fixture_batch b;
    snprintf(path, sizeof path, "%s/qwen3_tiny/batch.json", dir);
    if (!CHECK(fixture_read_batch(path, &b, why, sizeof why) == 0, "%s", why)) return;
    snprintf(path, sizeof path, "%s/qwen3_tiny", dir);
    rmlp_model *model = NULL;
    rmlp_context *ctx = NULL;
    rmlp_planner *planner = NULL;
    rmlp_plan plan;
    rmlp_plan_params pp = tu_params(1.0, 8);
    float out[4096 * 8];
    if (CHECK(rmlp_model_load(path, NULL, &model) == RMLP_OK && rmlp_context_create(model, b.n_tokens, &ctx) == RMLP_OK &&
                  rmlp_planner_create(&planner) == RMLP_OK &&
                  rmlp_plan_build(planner, b.ids, b.pos, b.n_tokens, b.cu, b.n_seqs, &pp, &plan) == RMLP_OK,
              "bad calls: setup: %s", rmlp_last_error())) {
        CHECK(rmlp_forward_last(NULL, &plan, NULL, NULL, out) == RMLP_ERR_INVALID_ARGUMENT &&
                  strstr(rmlp_last_error(), "rmlp_forward_last") != NULL,
              "NULL context: '%s'", rmlp_last_error());
        CHECK(rmlp_forward_last(ctx, NULL, NULL, NULL, out) == RMLP_ERR_INVALID_ARGUMENT &&
                  strstr(rmlp_last_error(), "plan") != NULL,
              "NULL plan: '%s'", rmlp_last_error());
        CHECK(rmlp_forward_last(ctx, &plan, NULL, NULL, NULL) == RMLP_ERR_INVALID_ARGUMENT &&
                  strstr(rmlp_last_error(), "out") != NULL,
              "NULL out: '%s'", rmlp_last_error());
    }
    rmlp_planner_free(planner);
    rmlp_context_free(ctx);
    rmlp_model_free(model);
    fixture_batch_free(&b);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_forward_last FIXTURES_DIR\n");
        return 2;
    }
    for (size_t f = 0; f < sizeof fixtures / sizeof fixtures[0]; f++) test_fixture(argv[1], fixtures[f]);
    test_bad_calls(argv[1]);
    printf("rmlp_forward_last vs rmlp_forward's last rows: %zu of %zu comparisons bit-identical, the rest within 2e-6 "
           "relative\n", bit_identical, compared);
    return tu_summary();
}
