/*
 * test_model_fixtures.c: the whole CPU model against Hugging Face transformers. For every
 * fixture in integration_tests/fixtures (tiny random checkpoints saved by transformers, with
 * transformers' own outputs on a batch with shared prefixes):
 *   - rmlp_forward with radix on and off matches last_hidden within 1e-4 (max abs);
 *   - radix on and off agree within 1e-6 relative (and the test reports whether bit-identical);
 *   - pooling (last, mean) matches pooled_last / pooled_mean; reranker logits match logits_last;
 *   - the per-layer entry points with the attention done "by the host" (rmlp_attention called
 *     between them), and rmlp_forward with an attention callback, give rmlp_forward's result
 *     bit for bit.
 * Usage: test_model_fixtures FIXTURES_DIR
 */
#include <math.h>

#include "../model/safetensors.h"
#include "fixtures.h"
#include "test_util.h"

#define TOLERANCE 1e-4
#define SCORE_A 3u
#define SCORE_B 7u

static const char *const fixtures[] = {"qwen3_tiny", "qwen3_bf16", "qwen2_sharded", "llama_tiny",
                                       "qwen3_embedding_noprefix"};

/* Max |a - b| and max |b| over n floats; NaN anywhere gives +inf. */
static double max_abs_diff(const float *a, const float *b, size_t n, double *max_ref) {
    double worst = 0.0, ref = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (isnan(d)) return INFINITY;
        worst = d > worst ? d : worst;
        ref = fabs(b[i]) > ref ? fabs(b[i]) : ref;
    }
    if (max_ref) *max_ref = ref;
    return worst;
}

static void expect_close(const char *name, const char *what, const float *got, const st_tensor *want, size_t n) {
    if (!CHECK(want != NULL && want->dtype == RMLP_DTYPE_F32 && want->nbytes == n * sizeof(float),
               "%s: expected.safetensors has no F32 '%s' of %zu values", name, what, n))
        return;
    double err = max_abs_diff(got, want->data, n, NULL);
    CHECK(err <= TOLERANCE, "%s: %s max abs error %.3g > %.0e", name, what, err, TOLERANCE);
}

/* The host's attention for rmlp_forward: the library's own, called through the callback. */
static rmlp_status host_attention(void *user_data, const rmlp_attention_args *args) {
    return rmlp_attention(user_data, args);
}

/* Embed, layers with rmlp_attention between the halves, final norm: as a host keeping attention does. */
static rmlp_status run_per_layer(rmlp_context *ctx, const rmlp_model_config *cfg, const rmlp_plan *plan,
                                 const fixture_batch *b, float *out) {
    size_t qd = (size_t)cfg->num_attention_heads * cfg->head_dim, kvd = (size_t)cfg->num_key_value_heads * cfg->head_dim;
    float *hidden = tu_xmalloc((size_t)plan->n_compact_padded * cfg->hidden_size * sizeof(float));
    float *q = tu_xmalloc(b->n_tokens * qd * sizeof(float)), *attn = tu_xmalloc(b->n_tokens * qd * sizeof(float));
    float *k = tu_xmalloc(b->n_tokens * kvd * sizeof(float)), *v = tu_xmalloc(b->n_tokens * kvd * sizeof(float));
    rmlp_attention_args args = {.n_tokens = plan->n_tokens, .n_seqs = plan->n_seqs,
                                .n_heads = cfg->num_attention_heads, .n_kv_heads = cfg->num_key_value_heads,
                                .head_dim = cfg->head_dim, .scale = 1.0f / sqrtf((float)cfg->head_dim),
                                .dtype = RMLP_DTYPE_F32, .cu_seqlens = b->cu, .out = attn};
    rmlp_status status = fixture_run_per_layer(ctx, plan, cfg->num_hidden_layers, &args, hidden, q, k, v, out);
    free(hidden), free(q), free(k), free(v), free(attn);
    return status;
}

static void test_fixture(const char *dir, const char *name) {
    char path[1024];
    char why[1200];
    fixture_batch b;
    snprintf(path, sizeof path, "%s/%s/batch.json", dir, name);
    if (!CHECK(fixture_read_batch(path, &b, why, sizeof why) == 0, "%s", why)) return;
    snprintf(path, sizeof path, "%s/%s/expected.safetensors", dir, name);
    st_file *expected = NULL;
    rmlp_model *model = NULL;
    rmlp_context *ctx = NULL;
    rmlp_planner *planner = NULL;
    rmlp_model_config cfg;
    rmlp_status status = st_open(path, &expected);
    CHECK(status == RMLP_OK, "%s: %s", name, rmlp_last_error());
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (status == RMLP_OK) status = rmlp_model_load(path, NULL, &model);
    CHECK(status == RMLP_OK, "%s: load: %s", name, rmlp_last_error());
    if (status == RMLP_OK) status = rmlp_model_get_config(model, &cfg);
    if (status == RMLP_OK) status = rmlp_context_create(model, b.n_tokens, &ctx);
    if (status == RMLP_OK) status = rmlp_planner_create(&planner);
    if (!CHECK(status == RMLP_OK, "%s: setup: %s", name, rmlp_last_error())) goto done;

    size_t hsz = cfg.hidden_size, n = b.n_tokens * hsz;
    float *out[2], *pooled = tu_xmalloc(b.n_seqs * hsz * sizeof(float));
    rmlp_plan plans[2];
    for (int radix = 0; radix < 2; radix++) {
        rmlp_plan_params params = tu_params(radix ? 1.0 : 0.0, radix ? 8 : 0);
        out[radix] = tu_xmalloc(n * sizeof(float));
        status = rmlp_plan_build(planner, b.ids, b.pos, b.n_tokens, b.cu, b.n_seqs, &params, &plans[radix]);
        if (status == RMLP_OK) plans[radix] = tu_plan_copy(&plans[radix]);
        if (status == RMLP_OK) status = rmlp_forward(ctx, &plans[radix], NULL, NULL, out[radix]);
        CHECK(status == RMLP_OK, "%s radix=%d: forward: %s", name, radix, rmlp_last_error());
        expect_close(name, radix ? "last_hidden (radix on)" : "last_hidden (radix off)", out[radix],
                     st_find(expected, "last_hidden"), n);
    }
    CHECK(plans[1].use_radix && plans[1].n_compact < b.n_tokens, "%s: the batch shares nothing", name);
    double ref = 0.0, diff = max_abs_diff(out[1], out[0], n, &ref);
    CHECK(diff <= 1e-6 * ref, "%s: radix on vs off differ by %.3g (max |value| %.3g)", name, diff, ref);
    printf("%s: N=%zu N'=%u, radix on vs off: %s (max abs diff %.3g)\n", name, b.n_tokens, plans[1].n_compact,
           diff == 0.0 ? "bit-identical" : "within 1e-6 relative", diff);

    CHECK(rmlp_pool(out[1], b.n_tokens, (uint32_t)hsz, b.cu, b.n_seqs, RMLP_POOLING_LAST, false, pooled) == RMLP_OK,
          "%s: pool last: %s", name, rmlp_last_error());
    expect_close(name, "pooled_last", pooled, st_find(expected, "pooled_last"), b.n_seqs * hsz);
    CHECK(rmlp_pool(out[1], b.n_tokens, (uint32_t)hsz, b.cu, b.n_seqs, RMLP_POOLING_MEAN, false, pooled) == RMLP_OK,
          "%s: pool mean: %s", name, rmlp_last_error());
    expect_close(name, "pooled_mean", pooled, st_find(expected, "pooled_mean"), b.n_seqs * hsz);

    const st_tensor *logits_last = st_find(expected, "logits_last");
    float *logits = tu_xmalloc(b.n_seqs * 2 * sizeof(float)), *prob = tu_xmalloc(b.n_seqs * sizeof(float));
    status = rmlp_score_pair(ctx, out[1], b.n_tokens, b.cu, b.n_seqs, SCORE_A, SCORE_B, logits, prob);
    if (logits_last == NULL) {
        CHECK(!cfg.has_lm_head && status == RMLP_ERR_UNSUPPORTED, "%s: no lm_head, score status %d", name, status);
    } else if (CHECK(status == RMLP_OK, "%s: score: %s", name, rmlp_last_error())) {
        const float *want = logits_last->data;
        for (size_t s = 0; s < b.n_seqs; s++) {
            float a = want[s * cfg.vocab_size + SCORE_A], c = want[s * cfg.vocab_size + SCORE_B];
            CHECK(fabsf(logits[2 * s] - a) <= TOLERANCE && fabsf(logits[2 * s + 1] - c) <= TOLERANCE,
                  "%s: seq %zu logits (%g, %g), want (%g, %g)", name, s, logits[2 * s], logits[2 * s + 1], a, c);
            CHECK(fabsf(prob[s] - 1.0f / (1.0f + expf(c - a))) <= 1e-6, "%s: seq %zu prob %g", name, s, prob[s]);
        }
    }

    float *again = tu_xmalloc(n * sizeof(float));
    CHECK(run_per_layer(ctx, &cfg, &plans[1], &b, again) == RMLP_OK, "%s: per-layer: %s", name, rmlp_last_error());
    CHECK(memcmp(again, out[1], n * sizeof(float)) == 0, "%s: per-layer entry points differ from rmlp_forward", name);
    CHECK(rmlp_forward(ctx, &plans[1], host_attention, ctx, again) == RMLP_OK, "%s: callback: %s", name,
          rmlp_last_error());
    CHECK(memcmp(again, out[1], n * sizeof(float)) == 0, "%s: attention callback differs from built-in", name);

    for (int radix = 0; radix < 2; radix++) {
        tu_plan_copy_free(&plans[radix]);
        free(out[radix]);
    }
    free(again), free(pooled), free(logits), free(prob);
done:
    rmlp_planner_free(planner);
    rmlp_context_free(ctx);
    rmlp_model_free(model);
    st_close(expected);
    fixture_batch_free(&b);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_model_fixtures FIXTURES_DIR\n");
        return 2;
    }
    for (size_t f = 0; f < sizeof fixtures / sizeof fixtures[0]; f++) test_fixture(argv[1], fixtures[f]);
    return tu_summary();
}
