/*
 * test_model_fixtures.c: the whole CPU model against Hugging Face transformers. For every
 * fixture in integration_tests/fixtures (tiny random checkpoints saved by transformers, with
 * transformers' own outputs on a batch with shared prefixes; the *_bias ones with every bias
 * flag of config.json on):
 *   - the load uses every tensor of the checkpoint (an empty load report);
 *   - rmlp_forward with radix on and off matches last_hidden within 1e-4 (max abs);
 *   - radix on and off agree within 1e-6 relative (and the test reports whether bit-identical);
 *   - pooling (last, mean) matches pooled_last / pooled_mean; reranker logits match logits_last;
 *   - the per-layer entry points with the attention done "by the host" (rmlp_attention called
 *     between them), and rmlp_forward with an attention callback, give rmlp_forward's result
 *     bit for bit; a host's own attention (naive_attention, from rmlp_attention_args's definition:
 *     its scale, sliding window and soft-cap) through the callback, full and compact, within 1e-5
 *     relative, and told apart when it ignores a window shorter than a sequence;
 *   - attention in compact space (rmlp_forward_compact), radix on and off: its compact rows read
 *     through scatter match last_hidden within 1e-4 and the full-space forward within 1e-6
 *     relative; pooling and scores read through scatter match transformers'; the compact
 *     per-layer calls with rmlp_attention_compact between them, a compact-layout callback (which
 *     checks the layout it is handed) and a context whose attention_space is COMPACT (through
 *     rmlp_forward) give the same bits; AUTO picks compact with radix and full without.
 * Usage: test_model_fixtures FIXTURES_DIR
 */
#include <math.h>

#include "model/safetensors.h"
#include "fixtures.h"
#include "test_util.h"

#define TOLERANCE 1e-4
#define SCORE_A 3u
#define SCORE_B 7u

static const char *const fixtures[] = FIXTURE_NAMES;

static void expect_close(const char *name, const char *what, const float *got, const st_tensor *want, size_t n) {
    if (!CHECK(want != NULL && want->dtype == RMLP_DTYPE_F32 && want->nbytes == n * sizeof(float),
               "%s: expected.safetensors has no F32 '%s' of %zu values", name, what, n))
        return;
    double err = tu_max_abs_diff(got, want->data, n, NULL);
    CHECK(err <= TOLERANCE, "%s: %s max abs error %.3g > %.0e", name, what, err, TOLERANCE);
}

/* The host's attention for rmlp_forward: the library's own, called through the callback. */
static rmlp_status host_attention(void *user_data, const rmlp_attention_args *args) {
    return rmlp_attention(user_data, args);
}

/* A host's own attention, written from the definition of rmlp_attention_args alone (either
 * layout, f32, double accumulation): each query at index p of its sequence sees the keys at
 * max(0, p - sliding_window + 1) .. p (all up to p with no window); scores scale * q.k, soft-capped
 * to softcap * tanh(s / softcap) where softcap > 0, then the softmax. ignore_window: a host that
 * does not apply the window (the test must see its output differ). */
typedef struct naive_host {
    bool ignore_window;
    uint32_t windowed_layers, capped_layers; /* layers it was handed with a window / a soft-cap */
} naive_host;

static rmlp_status naive_attention(void *user_data, const rmlp_attention_args *a) {
    naive_host *h = user_data;
    bool compact = a->layout == RMLP_ATTENTION_COMPACT;
    const float *q = a->q, *k = a->k, *v = a->v;
    float *out = a->out;
    uint32_t hd = a->head_dim, group = a->n_heads / a->n_kv_heads;
    uint32_t window = h->ignore_window ? 0 : a->sliding_window;
    h->windowed_layers += a->sliding_window != 0, h->capped_layers += a->softcap != 0;
    double *w = malloc((a->n_tokens + 1) * sizeof(double));
    for (uint32_t s = 0; s < a->n_seqs; s++) {
        uint32_t start = a->cu_seqlens[s], len = a->cu_seqlens[s + 1] - start;
        uint32_t q0 = compact ? a->qo_indptr[s] : start, nq = compact ? a->qo_indptr[s + 1] - q0 : len;
        for (uint32_t t = 0; t < nq; t++) {
            uint32_t p = len - nq + t, lo = window != 0 && p + 1 > window ? p + 1 - window : 0;
            for (uint32_t head = 0; head < a->n_heads; head++) {
                const float *qr = q + ((size_t)(q0 + t) * a->n_heads + head) * hd;
                size_t kv_head = head / group;
                double max = -INFINITY, sum = 0.0;
                for (uint32_t j = lo; j <= p; j++) {
                    size_t row = compact ? a->kv_indices[start + j] : start + j;
                    const float *kr = k + (row * a->n_kv_heads + kv_head) * hd;
                    double dot = 0.0;
                    for (uint32_t d = 0; d < hd; d++) dot += (double)qr[d] * kr[d];
                    double score = dot * a->scale;
                    if (a->softcap > 0) score = a->softcap * tanh(score / a->softcap);
                    w[j - lo] = score, max = score > max ? score : max;
                }
                for (uint32_t j = lo; j <= p; j++) sum += w[j - lo] = exp(w[j - lo] - max);
                float *o = out + ((size_t)(q0 + t) * a->n_heads + head) * hd;
                for (uint32_t d = 0; d < hd; d++) {
                    double acc = 0.0;
                    for (uint32_t j = lo; j <= p; j++) {
                        size_t row = compact ? a->kv_indices[start + j] : start + j;
                        acc += w[j - lo] * v[(row * a->n_kv_heads + kv_head) * hd + d];
                    }
                    o[d] = (float)(acc / sum);
                }
            }
        }
    }
    free(w);
    return RMLP_OK;
}

/* The naive host attention through the callback (full and compact space) against the built-in
 * forward's output (full: batch rows, compact: compact rows; n values), within 1e-5 relative; a
 * host ignoring the window must be told apart on a model whose window is shorter than a sequence. */
static void test_naive_host(const char *name, rmlp_context *ctx, const rmlp_model_config *cfg, const rmlp_plan *plan,
                            const float *want, size_t n, bool compact) {
    float *got = tu_xmalloc((compact ? plan->n_compact_padded : plan->n_tokens) * (size_t)cfg->hidden_size * 4);
    uint32_t longest = 0;
    for (uint32_t s = 0; s < plan->n_seqs; s++)
        if (plan->cu_seqlens[s + 1] - plan->cu_seqlens[s] > longest) longest = plan->cu_seqlens[s + 1] - plan->cu_seqlens[s];
    for (int ignore = 0; ignore < 2; ignore++) {
        naive_host host = {.ignore_window = ignore};
        rmlp_status status = compact ? rmlp_forward_compact(ctx, plan, naive_attention, &host, got)
                                     : rmlp_forward(ctx, plan, naive_attention, &host, got);
        if (!CHECK(status == RMLP_OK, "%s: naive host attention (%s): %s", name, compact ? "compact" : "full",
                   rmlp_last_error()))
            break;
        double ref = 0.0, diff = tu_max_abs_diff(got, want, n, &ref);
        bool windowed = host.windowed_layers > 0 && longest > cfg->sliding_window;
        if (!ignore) {
            CHECK(diff <= 1e-5 * ref, "%s: naive host attention (%s, %u windowed, %u soft-capped layers) differs from "
                  "the built-in by %.3g (max |value| %.3g)", name, compact ? "compact" : "full", host.windowed_layers,
                  host.capped_layers, diff, ref);
            if (!compact && (host.windowed_layers || host.capped_layers))
                printf("%s: naive host attention with %u windowed, %u soft-capped layers: max abs diff %.3g\n", name,
                       host.windowed_layers, host.capped_layers, diff);
        } else if (windowed) {
            CHECK(diff > 1e-5 * ref, "%s: a host ignoring the window (%s) is not told apart (diff %.3g)", name,
                  compact ? "compact" : "full", diff);
        }
    }
    free(got);
}

/* Embed, layers with rmlp_attention between the halves, final norm: as a host keeping attention does. */
static rmlp_status run_per_layer(rmlp_context *ctx, const rmlp_model *model, const rmlp_model_config *cfg,
                                 const rmlp_plan *plan, const fixture_batch *b, float *out) {
    size_t qd = (size_t)cfg->num_attention_heads * cfg->head_dim, kvd = (size_t)cfg->num_key_value_heads * cfg->head_dim;
    float *hidden = tu_xmalloc((size_t)plan->n_compact_padded * cfg->hidden_size * sizeof(float));
    float *q = tu_xmalloc(b->n_tokens * qd * sizeof(float)), *attn = tu_xmalloc(b->n_tokens * qd * sizeof(float));
    float *k = tu_xmalloc(b->n_tokens * kvd * sizeof(float)), *v = tu_xmalloc(b->n_tokens * kvd * sizeof(float));
    rmlp_attention_args args = {.n_tokens = plan->n_tokens, .n_seqs = plan->n_seqs,
                                .n_heads = cfg->num_attention_heads, .n_kv_heads = cfg->num_key_value_heads,
                                .head_dim = cfg->head_dim, .dtype = RMLP_DTYPE_F32, .cu_seqlens = b->cu,
                                .out = attn};
    rmlp_status status = fixture_run_per_layer(ctx, model, plan, &args, hidden, q, k, v, out, false);
    free(hidden), free(q), free(k), free(v), free(attn);
    return status;
}

/* The host's attention in the compact layout: checks what it is handed against the plan in
 * user_data's context, then runs the library's compact attention. */
typedef struct compact_host {
    rmlp_context *ctx;
    const rmlp_plan *plan;
    int bad;
} compact_host;

static rmlp_status compact_attention(void *user_data, const rmlp_attention_args *a) {
    compact_host *h = user_data;
    const rmlp_plan *p = h->plan;
    if (a->layout != RMLP_ATTENTION_COMPACT || a->n_compact != p->n_compact || a->n_tokens != p->n_tokens ||
        a->qo_indptr == NULL || a->kv_indptr == NULL || a->kv_indices == NULL ||
        memcmp(a->qo_indptr, p->qo_indptr, (p->n_seqs + 1) * sizeof(uint32_t)) != 0 ||
        memcmp(a->kv_indptr, p->cu_seqlens, (p->n_seqs + 1) * sizeof(uint32_t)) != 0 ||
        memcmp(a->kv_indices, p->scatter, p->n_tokens * sizeof(uint32_t)) != 0 || a->qo_indptr_device != a->qo_indptr)
        h->bad++;
    return rmlp_attention_compact(h->ctx, a);
}

/* Compact rows (n_compact_padded, hsz) read through scatter into batch rows (n_tokens, hsz). */
static float *batch_rows(const float *compact, const rmlp_plan *plan, size_t hsz) {
    float *rows = tu_xmalloc(plan->n_tokens * hsz * sizeof(float));
    for (size_t i = 0; i < plan->n_tokens; i++)
        memcpy(rows + i * hsz, compact + (size_t)plan->scatter[i] * hsz, hsz * sizeof(float));
    return rows;
}

/* Everything in compact space against the full-space output `full` of plan (radix on or off). */
static void test_compact(const char *name, rmlp_model *model, rmlp_context *ctx, const rmlp_model_config *cfg,
                         const rmlp_plan *plan, const st_file *expected, const float *full, int radix) {
    size_t hsz = cfg->hidden_size, n = plan->n_tokens * hsz, nc = plan->n_compact_padded;
    size_t qd = (size_t)cfg->num_attention_heads * cfg->head_dim, kvd = (size_t)cfg->num_key_value_heads * cfg->head_dim;
    char what[96];
    float *out_c = tu_xmalloc(nc * hsz * sizeof(float)), *again = tu_xmalloc(nc * hsz * sizeof(float));
    if (!CHECK(rmlp_forward_compact(ctx, plan, NULL, NULL, out_c) == RMLP_OK, "%s: forward_compact: %s", name,
               rmlp_last_error()))
        goto done;
    float *rows = batch_rows(out_c, plan, hsz);
    snprintf(what, sizeof what, "last_hidden (compact attention, radix %s)", radix ? "on" : "off");
    expect_close(name, what, rows, st_find(expected, "last_hidden"), n);
    double ref = 0.0, diff = tu_max_abs_diff(rows, full, n, &ref);
    CHECK(diff <= 1e-6 * ref, "%s radix=%d: compact vs full attention differ by %.3g (max |value| %.3g)", name, radix,
          diff, ref);
    printf("%s radix=%d: compact vs full attention: %s (max abs diff %.3g)\n", name, radix,
           diff == 0.0 ? "bit-identical" : "within 2e-6 relative", diff);
    free(rows);
    if (radix) { /* read-outs through scatter: one batch suffices */
        float *pooled = tu_xmalloc(plan->n_seqs * hsz * sizeof(float));
        CHECK(rmlp_context_pool_compact(ctx, plan, out_c, RMLP_POOLING_LAST, false, pooled) == RMLP_OK,
              "%s: pool_compact: %s", name, rmlp_last_error());
        expect_close(name, "pooled_last (compact)", pooled, st_find(expected, "pooled_last"), plan->n_seqs * hsz);
        CHECK(rmlp_context_pool_compact(ctx, plan, out_c, RMLP_POOLING_MEAN, false, pooled) == RMLP_OK,
              "%s: pool_compact: %s", name, rmlp_last_error());
        expect_close(name, "pooled_mean (compact)", pooled, st_find(expected, "pooled_mean"), plan->n_seqs * hsz);
        float *logits = tu_xmalloc(plan->n_seqs * 2 * sizeof(float)), *prob = tu_xmalloc(plan->n_seqs * sizeof(float));
        float *want = tu_xmalloc(plan->n_seqs * 2 * sizeof(float)), *want_prob = tu_xmalloc(plan->n_seqs * sizeof(float));
        rmlp_status got = rmlp_score_pair_compact(ctx, plan, out_c, SCORE_A, SCORE_B, logits, prob);
        rmlp_status ok = rmlp_score_pair(ctx, full, plan->n_tokens, plan->cu_seqlens, plan->n_seqs, SCORE_A, SCORE_B,
                                         want, want_prob);
        CHECK(got == ok, "%s: score_pair_compact status %d, score_pair %d", name, got, ok);
        if (got == RMLP_OK && ok == RMLP_OK)
            CHECK(tu_max_abs_diff(logits, want, plan->n_seqs * 2, NULL) <= TOLERANCE, "%s: compact scores differ", name);
        free(pooled), free(logits), free(prob), free(want), free(want_prob);
    }
    /* per-layer compact calls, as a host keeping attention drives them */
    float *hidden = tu_xmalloc(nc * hsz * sizeof(float)), *q = tu_xmalloc(nc * qd * sizeof(float));
    float *k = tu_xmalloc(nc * kvd * sizeof(float)), *v = tu_xmalloc(nc * kvd * sizeof(float));
    float *attn = tu_xmalloc(nc * qd * sizeof(float));
    rmlp_attention_args args = {.n_tokens = plan->n_tokens, .n_seqs = plan->n_seqs,
                                .n_heads = cfg->num_attention_heads, .n_kv_heads = cfg->num_key_value_heads,
                                .head_dim = cfg->head_dim, .dtype = RMLP_DTYPE_F32,
                                .cu_seqlens = plan->cu_seqlens, .out = attn};
    CHECK(fixture_run_per_layer(ctx, model, plan, &args, hidden, q, k, v, again, true) == RMLP_OK,
          "%s: compact per-layer: %s", name, rmlp_last_error());
    CHECK(memcmp(again, out_c, plan->n_compact * hsz * sizeof(float)) == 0,
          "%s radix=%d: compact per-layer entry points differ from rmlp_forward_compact", name, radix);
    free(hidden), free(q), free(k), free(v), free(attn);
    compact_host host = {ctx, plan, 0};
    if (CHECK(rmlp_forward_compact(ctx, plan, compact_attention, &host, again) == RMLP_OK, "%s: compact callback: %s",
              name, rmlp_last_error())) {
        CHECK(host.bad == 0, "%s: the compact callback was handed a wrong layout %d times", name, host.bad);
        CHECK(memcmp(again, out_c, plan->n_compact * hsz * sizeof(float)) == 0,
              "%s radix=%d: compact attention callback differs from built-in", name, radix);
    }
    test_naive_host(name, ctx, cfg, plan, out_c, plan->n_compact * hsz, true);
    /* the context setting: rmlp_forward in compact space (and AUTO: compact only with radix) */
    for (rmlp_attention_space space = RMLP_ATTENTION_COMPACT; space <= RMLP_ATTENTION_AUTO; space++) {
        rmlp_context_params params = rmlp_context_default_params();
        params.attention_space = space;
        rmlp_context *spaced = NULL;
        float *via = tu_xmalloc(n * sizeof(float)), *want = batch_rows(out_c, plan, hsz);
        if (CHECK(rmlp_context_create_with_params(model, plan->n_tokens, &params, &spaced) == RMLP_OK &&
                      rmlp_forward(spaced, plan, NULL, NULL, via) == RMLP_OK,
                  "%s: context with attention_space %d: %s", name, space, rmlp_last_error()))
            CHECK(memcmp(via, space == RMLP_ATTENTION_AUTO && !plan->use_radix ? full : want, n * sizeof(float)) == 0,
                  "%s radix=%d: rmlp_forward with attention_space %d is not the %s forward", name, radix, space,
                  space == RMLP_ATTENTION_AUTO && !plan->use_radix ? "full" : "compact");
        rmlp_context_free(spaced);
        free(via), free(want);
    }
done:
    free(out_c), free(again);
}


/* Whether a load report says nothing, or only that config.json holds bias flags the architecture
 * does not read (the fixtures with every bias flag on: transformers ignores those too). */
static bool only_unread_bias_flags(const char *report) {
    if (report[0] == '\0') return true;
    const char *names = strstr(report, "ignored as it ignores them:");
    if (strncmp(report, "config.json has ", 16) != 0 || names == NULL || strchr(report, '\n')[1] != '\0') return false;
    for (const char *q = strchr(names, '\''); q != NULL; q = strchr(strchr(q + 1, '\'') + 1, '\''))
        if (strncmp(q, "'attention_bias'", 16) != 0 && strncmp(q, "'mlp_bias'", 10) != 0) return false;
    return true;
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
    const char *report = NULL;
    if (status == RMLP_OK) status = rmlp_model_load_report(model, &report);
    if (status == RMLP_OK) /* transformers uses every tensor of these checkpoints, and so must the library */
        CHECK(report != NULL && only_unread_bias_flags(report), "%s: load report '%s'", name,
              report ? report : "(null)");
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
    double ref = 0.0, diff = tu_max_abs_diff(out[1], out[0], n, &ref);
    /* OpenBLAS's row-count-dependent kernels (docs/backends.md): measured up to 1.0e-6 of the largest
     * value before the fused row passes (cpu/rows.h), up to 1.2e-6 after */
    CHECK(diff <= 2e-6 * ref, "%s: radix on vs off differ by %.3g (max |value| %.3g)", name, diff, ref);
    printf("%s: N=%zu N'=%u, radix on vs off: %s (max abs diff %.3g)\n", name, b.n_tokens, plans[1].n_compact,
           diff == 0.0 ? "bit-identical" : "within 2e-6 relative", diff);

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
    /* radix off too: there the built-in attention reads the fused qkv rows in place (an identity
     * plan), the per-layer calls and the callback get scattered copies: the same values bit for bit */
    for (int radix = 0; radix < 2; radix++) {
        CHECK(run_per_layer(ctx, model, &cfg, &plans[radix], &b, again) == RMLP_OK, "%s radix=%d: per-layer: %s",
              name, radix, rmlp_last_error());
        CHECK(memcmp(again, out[radix], n * sizeof(float)) == 0,
              "%s radix=%d: per-layer entry points differ from rmlp_forward", name, radix);
        if (CHECK(rmlp_forward(ctx, &plans[radix], host_attention, ctx, again) == RMLP_OK, "%s radix=%d: callback: %s",
                  name, radix, rmlp_last_error()))
            CHECK(memcmp(again, out[radix], n * sizeof(float)) == 0,
                  "%s radix=%d: attention callback differs from built-in", name, radix);
    }
    test_naive_host(name, ctx, &cfg, &plans[1], out[1], n, false);

    for (int radix = 0; radix < 2; radix++) test_compact(name, model, ctx, &cfg, &plans[radix], expected, out[radix], radix);

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
