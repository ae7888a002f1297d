/*
 * forward_modes.h: one batch through a model in each of the ways a host runs it, for tests that
 * compare two models (or two GEMM paths) way by way: radix off (mode 0), radix on (1), compact
 * space read back through the plan's scatter (2), and through a prefix cache (3); and every
 * transformers fixture through a model the caller loads, against its last_hidden.
 * Header only (it includes test_util.h), in one translation unit per test executable, which links
 * rmlp_test_fixtures and the library's internals (model/safetensors.h).
 */
#ifndef RMLP_TEST_FORWARD_MODES_H
#define RMLP_TEST_FORWARD_MODES_H

#include "fixtures.h"
#include "model/safetensors.h"
#include "test_util.h"

#define FM_MODES 4
static const char *const fm_mode_names[FM_MODES] = {"radix off", "radix on", "compact", "prefix cache"};

/* out (n_tokens, hidden): the batch's forward on model in `mode`, with a context of cap tokens.
 * Returns 0, or -1 after a failed CHECK. */
static inline int fm_forward(rmlp_model *model, const tu_batch *b, int mode, size_t cap, float *out) {
    rmlp_context_params cp = rmlp_context_default_params();
    if (mode == 3) cp.cache_bytes = 8u << 20;
    rmlp_context *ctx = NULL;
    rmlp_planner *planner = NULL;
    rmlp_plan plan;
    rmlp_plan_params pp = tu_params(mode == 0 ? 0.0 : 1.0, mode == 0 ? 0 : 8);
    rmlp_model_config cfg;
    int ok = rmlp_model_get_config(model, &cfg) == RMLP_OK &&
             rmlp_context_create_with_params(model, cap, &cp, &ctx) == RMLP_OK &&
             rmlp_planner_create(&planner) == RMLP_OK &&
             rmlp_plan_build(planner, b->ids, b->pos, b->n_tokens, b->cu, b->n_seqs, &pp, &plan) == RMLP_OK;
    if (ok && mode != 2) ok = rmlp_forward(ctx, &plan, NULL, NULL, out) == RMLP_OK;
    if (ok && mode == 2) {
        float *c = tu_xmalloc((size_t)plan.n_compact_padded * cfg.hidden_size * sizeof(float));
        ok = rmlp_forward_compact(ctx, &plan, NULL, NULL, c) == RMLP_OK;
        for (size_t t = 0; ok && t < b->n_tokens; t++)
            memcpy(out + t * cfg.hidden_size, c + (size_t)plan.scatter[t] * cfg.hidden_size,
                   cfg.hidden_size * sizeof(float));
        free(c);
    }
    CHECK(ok, "forward, %s: %s", fm_mode_names[mode], rmlp_last_error());
    rmlp_planner_free(planner);
    rmlp_context_free(ctx);
    return ok ? 0 : -1;
}

/* For each fixture under dir: the model load(path) returns (NULL: a failed CHECK of the caller's),
 * radix on, its max |out - last_hidden| and the largest |last_hidden| handed to check. */
static inline void fm_each_fixture(const char *dir, rmlp_model *(*load)(const char *path), size_t cap,
                                   void (*check)(const char *name, double diff, double ref)) {
    static const char *const names[] = FIXTURE_NAMES;
    for (size_t f = 0; f < sizeof names / sizeof names[0]; f++) {
        char path[1024], why[1200];
        fixture_batch b;
        snprintf(path, sizeof path, "%s/%s/batch.json", dir, names[f]);
        if (!CHECK(fixture_read_batch(path, &b, why, sizeof why) == 0, "%s", why)) continue;
        snprintf(path, sizeof path, "%s/%s/expected.safetensors", dir, names[f]);
        st_file *expected = NULL;
        CHECK(st_open(path, &expected) == RMLP_OK, "%s: %s", names[f], rmlp_last_error());
        snprintf(path, sizeof path, "%s/%s", dir, names[f]);
        rmlp_model *model = expected ? load(path) : NULL;
        rmlp_model_config cfg;
        const st_tensor *want = expected ? st_find(expected, "last_hidden") : NULL;
        if (model && want && rmlp_model_get_config(model, &cfg) == RMLP_OK) {
            tu_batch tb = {.ids = b.ids, .pos = b.pos, .cu = b.cu, .n_tokens = b.n_tokens, .n_seqs = b.n_seqs};
            size_t n = b.n_tokens * cfg.hidden_size;
            float *out = tu_xmalloc(n * sizeof(float));
            if (CHECK(want->nbytes == n * sizeof(float), "%s: last_hidden size", names[f]) &&
                fm_forward(model, &tb, 1, cap, out) == 0) {
                double ref = 0.0, d = tu_max_abs_diff(out, want->data, n, &ref);
                check(names[f], d, ref);
            }
            free(out);
        }
        rmlp_model_free(model);
        st_close(expected);
        fixture_batch_free(&b);
    }
}

#endif
