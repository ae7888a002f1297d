/*
 * gen_fixture.h: the greedy-generation fixtures (integration_tests/fixtures/<name>/generate.json,
 * made by tools/make_generate_fixtures.py from transformers' greedy generate), as test_generate.c
 * and test_gpu_cache.c read them, and the loop both run on them: two generation sessions in lockstep
 * on the greedy ids of the first, the generated ids checked against transformers'. Include after
 * test_util.h; link jansson.
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

#endif
