/*
 * tiny_setup.h: the setup that the tests of the public API on a random-weight tiny model share
 * (test_cpu_profile, test_forged_plans, test_handles, test_context_threads, test_model_threads,
 * test_batcher_traces): a temporary folder, the checkpoint bench/tiny_model.c writes there, the
 * model loaded from it and its config, and optionally a planner, a context and a context with a
 * prefix cache. tiny_setup_open reports a failing step with one CHECK (rmlp_last_error() in its
 * message) and leaves nothing behind; tiny_setup_close frees what is left and removes the folder.
 *
 * Header only (it includes test_util.h), in one translation unit per test executable; the test
 * links st_writer.c and bench/tiny_model.c.
 */
#ifndef RMLP_TESTS_TINY_SETUP_H
#define RMLP_TESTS_TINY_SETUP_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "st_writer.h"
#include "test_util.h"
#include "bench/tiny_model.h"

typedef struct tiny_setup {
    char *root;              /* the temporary folder holding the checkpoint (stw_mkdtemp) */
    rmlp_model *model;       /* loaded from root with the default params */
    rmlp_model_config cfg;   /* the loaded model's config */
    rmlp_planner *planner;   /* NULL when opened with max_tokens 0 */
    rmlp_context *ctx;       /* max_tokens rows, no prefix cache; NULL when max_tokens is 0 */
    rmlp_context *cached;    /* max_tokens rows with a prefix cache of cache_bytes; NULL when cache_bytes is 0 */
} tiny_setup;

/* Frees the handles still set (contexts, planner, model: a test that freed one itself sets it
 * to NULL first), removes the folder and zeroes *s. */
static inline void tiny_setup_close(tiny_setup *s) {
    rmlp_context_free(s->ctx);
    rmlp_context_free(s->cached);
    rmlp_planner_free(s->planner);
    rmlp_model_free(s->model);
    if (s->root != NULL) stw_rmtree(s->root);
    free(s->root);
    memset(s, 0, sizeof *s);
}

/* Writes the checkpoint of `tiny` from `seed` into a new temporary folder and loads it; with
 * max_tokens > 0 also creates the planner and the context (and with cache_bytes > 0 the cached
 * context). Returns 1, or 0 after a failed CHECK naming the folder and rmlp_last_error(), with
 * everything freed and the folder removed. */
static inline int tiny_setup_open(tiny_setup *s, const rmlp_model_config *tiny, uint64_t seed, size_t max_tokens,
                                  uint64_t cache_bytes) {
    memset(s, 0, sizeof *s);
    s->root = stw_mkdtemp();
    int ok = tiny_model_write(s->root, tiny, seed) == 0 && rmlp_model_load(s->root, NULL, &s->model) == RMLP_OK &&
             rmlp_model_get_config(s->model, &s->cfg) == RMLP_OK;
    if (ok && max_tokens > 0) {
        rmlp_context_params params = rmlp_context_default_params();
        params.cache_bytes = cache_bytes;
        ok = rmlp_planner_create(&s->planner) == RMLP_OK &&
             rmlp_context_create(s->model, max_tokens, &s->ctx) == RMLP_OK &&
             (cache_bytes == 0 ||
              rmlp_context_create_with_params(s->model, max_tokens, &params, &s->cached) == RMLP_OK);
    }
    if (!CHECK(ok, "setup under %s: %s", s->root, rmlp_last_error())) {
        tiny_setup_close(s);
        return 0;
    }
    return 1;
}

#endif
