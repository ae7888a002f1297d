/*
 * gen_fixture.h: the greedy-generation fixtures (integration_tests/fixtures/<name>/generate.json,
 * made by tools/make_generate_fixtures.py from transformers' greedy generate), as test_generate.c
 * and test_gpu_cache.c read them, and the loop both run on them: two generation sessions in lockstep
 * on the greedy ids of the first, the generated ids checked against transformers'; and
 * rmlp_generate_begin's contract with rmlp_context_set_plan, which both check on their backend.
 * Include after test_util.h; link jansson.
 */
#ifndef RMLP_GEN_FIXTURE_H
#define RMLP_GEN_FIXTURE_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define MAX_SEQS 8
#define MAX_LEN 64

typedef struct gen_fixture {
    uint32_t n, max_new, eos[4], n_eos;
    uint32_t prompt[MAX_SEQS][MAX_LEN], prompt_len[MAX_SEQS];
    uint32_t want[MAX_SEQS][MAX_LEN], want_len[MAX_SEQS];
} gen_fixture;

static inline int read_ids(json_t *list, uint32_t *out, uint32_t *n) {
    if (!json_is_array(list) || json_array_size(list) > MAX_LEN) return -1;
    *n = (uint32_t)json_array_size(list);
    for (size_t i = 0; i < *n; i++) out[i] = (uint32_t)json_integer_value(json_array_get(list, i));
    return 0;
}

/* Reads dir/generate.json; -1 when the fixture has none (no LM head). */
static inline int read_fixture(const char *dir, gen_fixture *f) {
    char path[1100];
    snprintf(path, sizeof path, "%s/generate.json", dir);
    json_t *doc = json_load_file(path, 0, NULL);
    if (doc == NULL) return -1;
    json_t *prompts = json_object_get(doc, "prompts"), *gen = json_object_get(doc, "generated");
    json_t *eos = json_object_get(doc, "eos_token_id");
    memset(f, 0, sizeof *f);
    f->max_new = (uint32_t)json_integer_value(json_object_get(doc, "max_new_tokens"));
    f->n = (uint32_t)json_array_size(prompts);
    int bad = f->n == 0 || f->n > MAX_SEQS || json_array_size(gen) != f->n || json_array_size(eos) > 4;
    for (size_t e = 0; !bad && e < json_array_size(eos); e++) f->eos[f->n_eos++] = (uint32_t)json_integer_value(json_array_get(eos, e));
    for (uint32_t s = 0; !bad && s < f->n; s++)
        bad = read_ids(json_array_get(prompts, s), f->prompt[s], &f->prompt_len[s]) != 0 ||
              read_ids(json_array_get(gen, s), f->want[s], &f->want_len[s]) != 0;
    json_decref(doc);
    return bad ? -2 : 0;
}

static inline uint32_t argmax(const float *x, size_t n) {
    uint32_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = (uint32_t)i;
    return best;
}

/* Whether a sequence is done after generating token t as its n_generated-th: an EOS id of the
 * fixture, or its budget (max_new_tokens) reached. */
static inline int gen_done(const gen_fixture *f, uint32_t t, uint32_t n_generated) {
    int eos = 0;
    for (uint32_t e = 0; e < f->n_eos; e++) eos |= t == f->eos[e];
    return eos || n_generated == f->max_new;
}

/* Two begun generation sessions a and b on a fixture's prompts, fed the same tokens. la and lb:
 * (MAX_SEQS, vocab) logits of the active rows, as begin and each step write them. */
typedef struct gen_lockstep {
    const gen_fixture *f;
    rmlp_context *a, *b;
    float *la, *lb;
    size_t vocab;
    uint32_t got[MAX_SEQS][MAX_LEN], got_len[MAX_SEQS]; /* a's greedy ids so far, per sequence */
} gen_lockstep;

/* Runs g's sessions to their end: per step, compare(arg, g, step, i, s) checks active row i
 * (sequence s, its ids before this step's token in got[s]) and returns 0 to stop; then a's greedy
 * token is appended; a sequence done (gen_done) is finished in both sessions, the others step in
 * both. `name` labels the failures. Returns 1 when every call succeeded and compare never stopped. */
static inline int gen_run_lockstep(gen_lockstep *g, const char *name,
                                   int (*compare)(void *arg, const gen_lockstep *g, int step, size_t i, uint32_t s),
                                   void *arg) {
    uint32_t active[MAX_SEQS], tokens[MAX_SEQS];
    size_t n_active = g->f->n;
    int ok = 1;
    for (uint32_t s = 0; s < g->f->n; s++) active[s] = s, g->got_len[s] = 0;
    for (int step = 0; ok && n_active > 0; step++) {
        size_t next = 0;
        for (size_t i = 0; ok && i < n_active; i++) {
            uint32_t s = active[i];
            ok = compare(arg, g, step, i, s);
            uint32_t t = argmax(g->la + i * g->vocab, g->vocab);
            g->got[s][g->got_len[s]++] = t;
            if (gen_done(g->f, t, g->got_len[s])) {
                ok &= CHECK(rmlp_generate_finish(g->a, s) == RMLP_OK && rmlp_generate_finish(g->b, s) == RMLP_OK,
                            "%s: finish %u: %s", name, s, rmlp_last_error());
            } else {
                tokens[next] = t;
                active[next++] = s;
            }
        }
        n_active = next;
        if (ok && n_active > 0)
            ok = CHECK(rmlp_generate_step(g->a, tokens, n_active, g->la) == RMLP_OK &&
                           rmlp_generate_step(g->b, tokens, n_active, g->lb) == RMLP_OK,
                       "%s, step %d: %s", name, step, rmlp_last_error());
    }
    return ok;
}

/* Checks every sequence's generated ids against transformers'. */
static inline void gen_check_generated(const gen_lockstep *g, const char *name) {
    for (uint32_t s = 0; s < g->f->n; s++) {
        int same = g->got_len[s] == g->f->want_len[s];
        for (uint32_t t = 0; same && t < g->got_len[s]; t++) same = g->got[s][t] == g->f->want[s][t];
        char a[256], b[256];
        CHECK(same, "%s, prompt %u: generated %s, transformers %s", name, s,
              tu_fmt_array(g->got[s], g->got_len[s], a, sizeof a),
              tu_fmt_array(g->f->want[s], g->f->want_len[s], b, sizeof b));
    }
}

/* The plan of sequences seqs[0 .. n) (len[s] <= 2 MAX_LEN tokens each, positions from 0), every
 * shared row merged. */
static inline rmlp_status gen_plan_rows(rmlp_planner *planner, const uint32_t *const *seqs, const uint32_t *len,
                                        uint32_t n, rmlp_plan *plan) {
    static uint32_t ids[MAX_SEQS * MAX_LEN * 2], pos[MAX_SEQS * MAX_LEN * 2], cu[MAX_SEQS + 1];
    cu[0] = 0;
    for (uint32_t s = 0; s < n; s++) {
        for (uint32_t t = 0; t < len[s]; t++) ids[cu[s] + t] = seqs[s][t], pos[cu[s] + t] = t;
        cu[s + 1] = cu[s] + len[s];
    }
    rmlp_plan_params params = tu_params(1.0, 0);
    return rmlp_plan_build(planner, ids, pos, cu[n], cu, n, &params, plan);
}

/* The plan of f's first n prompts (gen_plan_rows). */
static inline rmlp_status gen_plan(rmlp_planner *planner, const gen_fixture *f, uint32_t n, rmlp_plan *plan) {
    const uint32_t *seqs[MAX_SEQS];
    for (uint32_t s = 0; s < n; s++) seqs[s] = f->prompt[s];
    return gen_plan_rows(planner, seqs, f->prompt_len, n, plan);
}

/* rmlp_generate_begin's contract on every backend: the host need not call rmlp_context_set_plan
 * first (CUDA's begin sets the plan itself, replacing the one set, unless it is that one). On ctx,
 * a context with a prefix cache on which no plan was set yet, three sessions over f's prompts, the
 * cache cleared before the second and third: begin with no plan set, with another batch's plan set
 * (the first prompt alone, a copy), and after rmlp_context_set_plan of its own plan; then one step
 * on the first session's greedy tokens. Every call succeeds, and the later sessions' logits are
 * within `limit` of the largest |logit| of the first's (the same rows through the same kernels).
 * The cache is left cleared. */
static inline void gen_check_begin_plan(rmlp_context *ctx, const gen_fixture *f, size_t vocab, double limit,
                                        const char *name) {
    static const char *const how[3] = {"no plan set", "another batch's plan set", "its plan set first"};
    size_t per = 2 * (size_t)f->n * vocab; /* begin's logits, then the step's */
    float *logits[3] = {tu_xmalloc(per * 4), tu_xmalloc(per * 4), tu_xmalloc(per * 4)};
    uint32_t tokens[MAX_SEQS];
    rmlp_planner *planner = NULL;
    rmlp_plan plan, other = {0};
    int ok = CHECK(rmlp_planner_create(&planner) == RMLP_OK && gen_plan(planner, f, 1, &plan) == RMLP_OK,
                   "%s: the first prompt's plan: %s", name, rmlp_last_error());
    if (ok) other = tu_plan_copy(&plan);
    ok = ok && CHECK(gen_plan(planner, f, f->n, &plan) == RMLP_OK, "%s: plan: %s", name, rmlp_last_error());
    rmlp_generate_params gp = rmlp_generate_default_params();
    gp.max_new_tokens = 2;
    double worst = 0.0;
    for (int w = 0; ok && w < 3; w++) {
        rmlp_status status = w == 0 ? RMLP_OK : rmlp_context_cache_clear(ctx);
        if (status == RMLP_OK && w > 0) status = rmlp_context_set_plan(ctx, w == 1 ? &other : &plan);
        if (status == RMLP_OK) status = rmlp_generate_begin(ctx, &plan, &gp, logits[w]);
        for (uint32_t s = 0; w == 0 && s < f->n; s++) tokens[s] = argmax(logits[0] + s * vocab, vocab);
        if (status == RMLP_OK) status = rmlp_generate_step(ctx, tokens, f->n, logits[w] + per / 2);
        char why[512]; /* rmlp_generate_end clears the last error */
        snprintf(why, sizeof why, "%s", rmlp_last_error());
        ok = CHECK(rmlp_generate_end(ctx) == RMLP_OK && status == RMLP_OK, "%s: begin and a step with %s: %s", name,
                   how[w], why);
        double r = 0.0, d = ok && w > 0 ? tu_max_abs_diff(logits[w], logits[0], per, &r) : 0.0;
        ok = ok && CHECK(d <= limit * r, "%s: the logits with %s differ from those with %s by %.3g (largest %.3g)",
                         name, how[w], how[0], d, r);
        worst = r > 0 && d / r > worst ? d / r : worst;
    }
    CHECK(rmlp_context_cache_clear(ctx) == RMLP_OK, "%s: clearing the cache: %s", name, rmlp_last_error());
    if (ok)
        printf("%s: begin needs no rmlp_context_set_plan: with none, another batch's, its own: logits within %.3g\n",
               name, worst);
    if (other.fold_gather != NULL) tu_plan_copy_free(&other);
    rmlp_planner_free(planner);
    for (int w = 0; w < 3; w++) free(logits[w]);
}

#endif
