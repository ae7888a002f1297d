/*
 * test_decode_split.c: a decode step laid out for FlashInfer's batch decode (gpu/decode_split.h),
 * on the CPU (plain C, in every build), against each row's path as it was drawn (independently of
 * the chains the layout is built from):
 *   - each row's keys are its path's slots, each exactly once, whatever the chain cut (shared
 *     prefixes or per path);
 *   - the chunk size is max(DECODE_SPLIT_MIN_CHUNK, ceil(keys / target)); each row has
 *     ceil(len / chunk) chunks, numbered 0.. in its o_indptr range, with its row as request; the
 *     step at most n_rows + target chunks; the words within decode_split_words's bound;
 *   - exactly the words it needs fit, one fewer does not; a membership past the chains', and a
 *     zero target, are refused; a row without memberships gets no chunk.
 */
#include <stdbool.h>

#include "gpu/decode_split.h"
#include "test_util.h"
#include "decode_steps.h"

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The layout of st with `target` chunks, checked against the rows' paths. */
static void check_split(const decode_step *st, size_t target, const char *what) {
    size_t n = st->n_rows, total = 0;
    for (size_t r = 0; r < n; r++) total += st->path_len[r];
    size_t bound = decode_split_words(n, total, target);
    uint32_t *words = tu_xmalloc((bound + 1) * sizeof(uint32_t));
    decode_split s;
    bool ok = decode_split_build(st->key_indptr, st->keys, st->member_indptr, st->n_chains, st->row_indptr,
                                 st->row_members, n, target, words, bound, &s);
    if (!CHECK(ok, "%s target %zu: refused within its bound (%zu words)", what, target, bound)) {
        free(words);
        return;
    }
    size_t chunk = (total + target - 1) / target;
    if (chunk < DECODE_SPLIT_MIN_CHUNK) chunk = DECODE_SPLIT_MIN_CHUNK;
    CHECK(s.n_rows == n && s.n_keys == total && s.chunk == chunk && s.words <= bound,
          "%s target %zu: rows %u keys %u chunk %u words %zu, want %zu %zu %zu <= %zu", what, target, s.n_rows,
          s.n_keys, s.chunk, s.words, n, total, chunk, bound);
    CHECK(s.n_chunks <= n + target, "%s target %zu: %u chunks > rows + target", what, target, s.n_chunks);
    const uint32_t *kv_indptr = words + s.at_kv_indptr, *kv = words + s.at_kv_indices;
    const uint32_t *request = words + s.at_request, *tile = words + s.at_tile, *o_indptr = words + s.at_o_indptr;
    CHECK(words[s.at_chunk] == s.chunk && kv_indptr[0] == 0 && o_indptr[0] == 0 && o_indptr[n] == s.n_chunks,
          "%s target %zu: chunk word %u, indptr starts %u %u, o_indptr end %u of %u", what, target, words[s.at_chunk],
          kv_indptr[0], o_indptr[0], o_indptr[n], s.n_chunks);
    size_t bad_keys = 0, bad_chunks = 0;
    for (size_t r = 0; r < n; r++) {
        uint32_t len = kv_indptr[r + 1] - kv_indptr[r];
        if (len != st->path_len[r]) {
            bad_keys++;
            continue;
        }
        uint32_t *got = tu_xmalloc(len * 4 + 4), *want = tu_xmalloc(len * 4 + 4);
        memcpy(got, kv + kv_indptr[r], len * 4), memcpy(want, st->paths + r * st->max_path, len * 4);
        qsort(got, len, 4, cmp_u32), qsort(want, len, 4, cmp_u32);
        bad_keys += memcmp(got, want, len * 4) != 0;
        free(got), free(want);
        uint32_t chunks = o_indptr[r + 1] - o_indptr[r];
        bad_chunks += chunks != (len + s.chunk - 1) / s.chunk;
        for (uint32_t b = o_indptr[r]; b < o_indptr[r + 1]; b++)
            bad_chunks += request[b] != r || tile[b] != b - o_indptr[r];
    }
    CHECK(bad_keys == 0, "%s target %zu: %zu rows' keys are not their paths", what, target, bad_keys);
    CHECK(bad_chunks == 0, "%s target %zu: %zu wrong chunk counts or entries", what, target, bad_chunks);
    /* exactly s.words fit; one fewer does not */
    decode_split again;
    CHECK(decode_split_build(st->key_indptr, st->keys, st->member_indptr, st->n_chains, st->row_indptr,
                             st->row_members, n, target, words, s.words, &again) &&
              again.words == s.words,
          "%s target %zu: refused in exactly its %zu words", what, target, s.words);
    CHECK(!decode_split_build(st->key_indptr, st->keys, st->member_indptr, st->n_chains, st->row_indptr,
                              st->row_members, n, target, words, s.words - 1, &again),
          "%s target %zu: taken in %zu words, one fewer than it needs", what, target, s.words - 1);
    free(words);
}

static void test_random_steps(uint64_t *rng) {
    static const size_t targets[] = {1, 3, 40, 1000};
    static const struct {
        size_t rows;
        uint32_t groups, common, group, own;
    } shapes[] = {{1, 1, 900, 0, 5}, {7, 3, 300, 200, 400}, {40, 3, 60, 20, 30}, {64, 8, 1100, 40, 20}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        for (int shared = 0; shared < 2; shared++) {
            decode_step st;
            decode_step_make(rng, shapes[k].rows, shapes[k].groups, shapes[k].common, shapes[k].group,
                             shapes[k].own, shared, &st);
            char what[96];
            snprintf(what, sizeof what, "%zu rows, %s, %zu chains", st.n_rows, shared ? "shared" : "per path",
                     st.n_chains);
            for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++) check_split(&st, targets[t], what);
            decode_step_free(&st);
        }
}

static void test_refusals(void) {
    /* two chains: keys {5, 6} (members 0, 1) and {7} (member 2); row 0: memberships 0, 2; row 1: 1 */
    uint32_t key_indptr[] = {0, 2, 3}, keys[] = {5, 6, 7}, member_indptr[] = {0, 2, 3};
    uint32_t row_indptr[] = {0, 2, 3}, row_members[] = {0, 2, 1}, words[64];
    decode_split s = {0};
    CHECK(decode_split_build(key_indptr, keys, member_indptr, 2, row_indptr, row_members, 2, 4, words, 64, &s) &&
              s.n_keys == 5 && s.n_chunks == 2 && words[s.at_kv_indices] == 5 && words[s.at_kv_indices + 2] == 7 &&
              words[s.at_kv_indices + 3] == 5,
          "a small step: ok, %u keys, %u chunks", s.n_keys, s.n_chunks);
    uint32_t past[] = {0, 3, 1};
    CHECK(!decode_split_build(key_indptr, keys, member_indptr, 2, row_indptr, past, 2, 4, words, 64, &s),
          "a membership past the chains' is refused");
    CHECK(!decode_split_build(key_indptr, keys, member_indptr, 2, row_indptr, row_members, 2, 0, words, 64, &s),
          "a zero target is refused");
    uint32_t empty_rows[] = {0, 0, 3}, all_members[] = {0, 2, 1}; /* row 0 has no membership */
    CHECK(decode_split_build(key_indptr, keys, member_indptr, 2, empty_rows, all_members, 2, 4, words, 64, &s) &&
              s.n_chunks == 1 && words[s.at_o_indptr] == 0 && words[s.at_o_indptr + 1] == 0 &&
              words[s.at_request] == 1,
          "a row without keys gets no chunk: %u chunks", s.n_chunks);
    CHECK(decode_split_build(key_indptr, keys, member_indptr, 2, row_indptr, row_members, 0, 4, words, 64, &s) &&
              s.n_chunks == 0 && s.words == 3, /* the two indptrs' single words and the chunk size */
          "no rows: no chunks, %zu words", s.words);
}

int main(void) {
    uint64_t rng = 29;
    test_random_steps(&rng);
    test_refusals();
    return tu_summary();
}
