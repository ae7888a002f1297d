/*
 * bench_decode.c: the decode benchmark of bench_decode.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_decode.h"
#include "cli.h"

#define SUFFIX 16

typedef struct decode_case {
    uint32_t prefix, m;
} decode_case;

static const decode_case cases[] = {{1024, 1}, {1024, 8}, {1024, 32}, {1024, 64}, {2048, 32}};

static uint32_t mix(uint64_t x) {
    x = (x ^ (x >> 31)) * 0x7FB5D329728EA185ull;
    x = (x ^ (x >> 27)) * 0x81DADEF4BC2DD44Dull;
    return (uint32_t)(x ^ (x >> 33));
}

/* The token sequence s appends at step t (the same in every way). */
static uint32_t step_token(uint32_t s, uint32_t t, uint32_t vocab) { return mix(((uint64_t)s << 32 | t) + 77) % vocab; }

typedef struct way_result {
    double step_ms, attention_ms; /* totals over the steps */
    unsigned long tokens;
} way_result;

/* One session over sequences first .. first + n of the prompts, `steps` steps; adds its times. */
static int session(rmlp_context *ctx, rmlp_planner *planner, const uint32_t *ids, const uint32_t *pos,
                   uint32_t prompt_len, uint32_t first, uint32_t n, unsigned long steps, bool shared, uint32_t vocab,
                   float *logits, uint32_t *tokens, way_result *r) {
    uint32_t cu[65];
    for (uint32_t s = 0; s <= n; s++) cu[s] = s * prompt_len;
    rmlp_plan_params pp = rmlp_plan_default_params();
    pp.threshold = 1.0;
    rmlp_generate_params gp = rmlp_generate_default_params();
    gp.max_new_tokens = (uint32_t)steps;
    gp.shared_prefix_attention = shared;
    rmlp_plan plan;
    if (rmlp_plan_build(planner, ids + (size_t)first * prompt_len, pos, (size_t)n * prompt_len, cu, n, &pp, &plan) !=
            RMLP_OK ||
        rmlp_generate_begin(ctx, &plan, &gp, logits) != RMLP_OK)
        return -1;
    for (unsigned long t = 0; t < steps; t++) {
        for (uint32_t s = 0; s < n; s++) tokens[s] = step_token(first + s, (uint32_t)t, vocab);
        if (rmlp_generate_step(ctx, tokens, n, logits) != RMLP_OK) return -1;
    }
    rmlp_generate_stats st;
    if (rmlp_generate_get_stats(ctx, &st) != RMLP_OK || rmlp_generate_end(ctx) != RMLP_OK) return -1;
    r->step_ms += st.step_ms, r->attention_ms += st.attention_ms, r->tokens += st.rows;
    return 0;
}

static int run_case(rmlp_model *model, const rmlp_model_config *cfg, const decode_case *c, unsigned long steps,
                    unsigned long repeat, int json) {
    uint32_t len = c->prefix + SUFFIX, m = c->m, vocab = cfg->vocab_size;
    size_t n_tokens = (size_t)m * len;
    uint64_t slot = (2ull * cfg->num_hidden_layers * cfg->num_key_value_heads * cfg->head_dim + cfg->hidden_size) * 4;
    rmlp_context_params cp = rmlp_context_default_params();
    cp.cache_bytes = (c->prefix + (uint64_t)m * (SUFFIX + steps) + 64) * slot;
    uint32_t *ids = malloc(n_tokens * sizeof *ids), *pos = malloc(n_tokens * sizeof *pos), *tokens = malloc(m * 4);
    float *logits = malloc((size_t)m * vocab * sizeof(float));
    rmlp_context *ctx = NULL;
    rmlp_planner *planner = NULL;
    int rc = ids && pos && tokens && logits && rmlp_context_create_with_params(model, n_tokens, &cp, &ctx) == RMLP_OK &&
                     rmlp_planner_create(&planner) == RMLP_OK
                 ? 0
                 : -1;
    for (size_t i = 0; rc == 0 && i < n_tokens; i++) {
        uint32_t s = (uint32_t)(i / len), t = (uint32_t)(i % len);
        ids[i] = t < c->prefix ? mix(t + 1) % vocab : mix(((uint64_t)(s + 1) << 40) | t) % vocab;
        pos[i] = t;
    }
    way_result on = {0}, off = {0}, one = {0};
    for (unsigned long rep = 0; rc == 0 && rep < repeat; rep++) { /* the ways alternate; the fastest of each kept */
        way_result r_on = {0}, r_off = {0}, r_one = {0};
        if (rc == 0) rc = rmlp_context_cache_clear(ctx) == RMLP_OK ? 0 : -1;
        if (rc == 0) rc = session(ctx, planner, ids, pos, len, 0, m, steps, true, vocab, logits, tokens, &r_on);
        if (rc == 0) rc = rmlp_context_cache_clear(ctx) == RMLP_OK ? 0 : -1;
        if (rc == 0) rc = session(ctx, planner, ids, pos, len, 0, m, steps, false, vocab, logits, tokens, &r_off);
        if (rc == 0) rc = rmlp_context_cache_clear(ctx) == RMLP_OK ? 0 : -1;
        for (uint32_t s = 0; rc == 0 && s < m; s++) /* one at a time: the prefix is cached after the first */
            rc = session(ctx, planner, ids, pos, len, s, 1, steps, true, vocab, logits, tokens, &r_one);
        if (rep == 0 || r_on.step_ms < on.step_ms) on = r_on;
        if (rep == 0 || r_off.step_ms < off.step_ms) off = r_off;
        if (rep == 0 || r_one.step_ms < one.step_ms) one = r_one;
    }
    if (rc != 0) fprintf(stderr, "radixmlp bench --decode: p%u_m%u: %s\n", c->prefix, m, rmlp_last_error());
    if (rc == 0) {
        double tps_on = 1e3 * on.tokens / on.step_ms, tps_off = 1e3 * off.tokens / off.step_ms;
        double tps_one = 1e3 * one.tokens / one.step_ms;
        if (json)
            printf("{\"case\": \"p%u_m%u\", \"prefix\": %u, \"m\": %u, \"steps\": %lu, \"tokens_per_s_shared\": %.2f, "
                   "\"tokens_per_s_per_seq_attention\": %.2f, \"tokens_per_s_one_at_a_time\": %.2f, "
                   "\"attention_ms_per_step_shared\": %.3f, \"attention_ms_per_step_per_seq\": %.3f, "
                   "\"attention_share_shared\": %.4f, \"attention_share_per_seq\": %.4f}\n",
                   c->prefix, m, c->prefix, m, steps, tps_on, tps_off, tps_one, on.attention_ms / steps, off.attention_ms / steps,
                   on.attention_ms / on.step_ms, off.attention_ms / off.step_ms);
        else
            printf("p%-5u %3u %9.1f %9.1f %9.1f %9.1f %9.1f %8.2fx %9.2f %9.2f %7.2fx %6.0f%% %6.0f%%\n", c->prefix, m,
                   on.step_ms / steps, tps_on, tps_off, tps_one, one.step_ms / steps / m, tps_on / tps_one,
                   on.attention_ms / steps, off.attention_ms / steps, off.attention_ms / on.attention_ms,
                   100 * on.attention_ms / on.step_ms, 100 * off.attention_ms / off.step_ms);
        fflush(stdout);
    }
    rmlp_planner_free(planner);
    rmlp_context_free(ctx);
    free(ids), free(pos), free(tokens), free(logits);
    return rc == 0 ? 0 : 1;
}

int bench_decode(rmlp_model *model, const rmlp_model_config *cfg, unsigned long steps, unsigned long repeat,
                 const char *const *only, size_t n_only, int json) {
    if (!cfg->has_lm_head) {
        fprintf(stderr, "radixmlp bench --decode: the model has no LM head\n");
        return 1;
    }
    if (!json)
        printf("# decode, %u layers, %lu steps, fastest of %lu, prompts: a shared prefix + %d distinct tokens; tok/s of a batched step "
               "with shared-prefix attention (shared), per-sequence attention (per-seq), and M one-at-a-time "
               "sessions (one); attention ms per batched step\n"
               "%-6s %3s %9s %9s %9s %9s %9s %9s %9s %9s %8s %7s %7s\n",
               cfg->num_hidden_layers, steps, repeat, SUFFIX, "prefix", "M", "ms/step", "tok/s sh", "tok/s ps", "tok/s one",
               "ms one", "batch/one", "attn sh", "attn ps", "ps/sh", "att% sh", "att% ps");
    int rc = 0, ran = 0;
    for (size_t k = 0; rc == 0 && k < sizeof cases / sizeof cases[0]; k++) {
        char name[32];
        snprintf(name, sizeof name, "p%u_m%u", cases[k].prefix, cases[k].m);
        int wanted = n_only == 0;
        for (size_t o = 0; o < n_only; o++) wanted |= strstr(name, only[o]) != NULL;
        if (!wanted) continue;
        ran++;
        fprintf(stderr, "radixmlp bench --decode: %s...\n", name);
        rc = run_case(model, cfg, &cases[k], steps, repeat, json);
    }
    if (ran == 0) fprintf(stderr, "radixmlp bench --decode: no case matches the --case names given\n");
    return rc;
}
