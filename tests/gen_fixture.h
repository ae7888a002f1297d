/*
 * gen_fixture.h: the greedy-generation fixtures (integration_tests/fixtures/<name>/generate.json,
 * made by tools/make_generate_fixtures.py from transformers' greedy generate), as test_generate.c
 * and test_gpu_cache.c read them. Include after test_util.h; link jansson.
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

#endif
