/*
 * workload.c: the synthetic batches of workload.h, from a splitmix64 stream so every run
 * of a benchmark or the tool sees the same tokens.
 */
#include <stdlib.h>

#include "workload.h"

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint32_t random_below(uint64_t *state, uint32_t bound) { return (uint32_t)(splitmix64(state) % bound); }

static int workload_alloc(workload *w, size_t n_tokens, size_t n_seqs) {
    w->input_ids = malloc((n_tokens ? n_tokens : 1) * sizeof(uint32_t));
    w->position_ids = malloc((n_tokens ? n_tokens : 1) * sizeof(uint32_t));
    w->cu_seqlens = malloc((n_seqs + 1) * sizeof(uint32_t));
    w->n_tokens = n_tokens;
    w->n_seqs = n_seqs;
    if (w->input_ids && w->position_ids && w->cu_seqlens) return 0;
    workload_free(w);
    return -1;
}

void workload_free(workload *w) {
    free(w->input_ids);
    free(w->position_ids);
    free(w->cu_seqlens);
    *w = (workload){0};
}

int workload_shared_prefix(workload *w, size_t n_seqs, size_t seq_len, size_t prefix_len, uint64_t seed) {
    if (workload_alloc(w, n_seqs * seq_len, n_seqs) != 0) return -1;
    uint64_t state = seed;
    w->cu_seqlens[0] = 0;
    for (size_t s = 0; s < n_seqs; s++) {
        uint32_t *ids = w->input_ids + s * seq_len;
        uint32_t *pos = w->position_ids + s * seq_len;
        for (size_t t = 0; t < seq_len; t++) {
            pos[t] = (uint32_t)t;
            if (t < prefix_len) ids[t] = s == 0 ? random_below(&state, WORKLOAD_VOCAB) : w->input_ids[t];
            else if (t == prefix_len) ids[t] = (uint32_t)(s % WORKLOAD_VOCAB); /* distinct per sequence */
            else ids[t] = random_below(&state, WORKLOAD_VOCAB);
        }
        w->cu_seqlens[s + 1] = (uint32_t)((s + 1) * seq_len);
    }
    return 0;
}

int workload_rerank(workload *w, size_t n_passages, uint64_t seed) {
    uint64_t state = seed;
    size_t query_len = 40 + random_below(&state, 41);
    size_t *passage_len = malloc((n_passages ? n_passages : 1) * sizeof(size_t));
    if (passage_len == NULL) return -1;
    size_t n_tokens = 0;
    for (size_t s = 0; s < n_passages; s++) {
        passage_len[s] = 40 + random_below(&state, 81);
        n_tokens += query_len + passage_len[s];
    }
    if (workload_alloc(w, n_tokens, n_passages) != 0) {
        free(passage_len);
        return -1;
    }
    uint32_t *query = w->input_ids; /* the first sequence's query is the one all share */
    for (size_t t = 0; t < query_len; t++) query[t] = random_below(&state, WORKLOAD_VOCAB);
    size_t row = 0;
    w->cu_seqlens[0] = 0;
    for (size_t s = 0; s < n_passages; s++) {
        size_t len = query_len + passage_len[s];
        for (size_t t = 0; t < len; t++) {
            w->input_ids[row + t] = t < query_len ? query[t] : random_below(&state, WORKLOAD_VOCAB);
            w->position_ids[row + t] = (uint32_t)t;
        }
        row += len;
        w->cu_seqlens[s + 1] = (uint32_t)row;
    }
    free(passage_len);
    return 0;
}
