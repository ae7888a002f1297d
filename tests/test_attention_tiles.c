/*
 * test_attention_tiles.c: the grid mapping of the built-in CUDA attention (gpu/attention_tiles.h),
 * on the CPU. Over random varlen batches (empty sequences, lengths at and around multiples of the
 * tile, one long sequence among short ones, and many sequences): every row of every sequence is
 * covered by exactly one tile, each sequence wastes at most one tile, and the grid's size is a
 * function of (n_tokens, n_seqs) only, so a CUDA graph captured on one batch computes every row of
 * any batch with the same counts (the replay case of gpu/CHECKLIST.md).
 */
#include <stdlib.h>

#include "gpu/attention_tiles.h"
#include "test_util.h"

/* Walks the grid over cu_seqlens (n_seqs + 1) as the kernel does; checks coverage and waste. */
static void check_batch(const uint32_t *cu, uint32_t n_seqs, const char *what) {
    size_t n_tokens = cu[n_seqs], tiles = att_grid_tiles(n_tokens, n_seqs);
    unsigned char *covered = calloc(n_tokens ? n_tokens : 1, 1);
    uint32_t *idle = calloc(n_seqs, sizeof *idle);
    int bad_seq = 0;
    for (size_t b = 0; b < tiles; b++) {
        uint32_t s = att_tile_seq(cu, n_seqs, b);
        size_t first = att_first_tile(cu[s], s);
        if (s >= n_seqs || first > b || b >= att_first_tile(cu[s + 1], s + 1)) {
            bad_seq++;
            continue;
        }
        uint32_t len = cu[s + 1] - cu[s], t0 = (uint32_t)(b - first) * ATT_BQ;
        if (t0 >= len) {
            idle[s]++;
            continue;
        }
        for (uint32_t r = t0; r < t0 + ATT_BQ && r < len; r++) covered[cu[s] + r]++;
    }
    CHECK(bad_seq == 0, "%s: %d tiles mapped outside their sequence's range", what, bad_seq);
    size_t uncovered = 0, twice = 0, wasteful = 0;
    for (size_t i = 0; i < n_tokens; i++) uncovered += covered[i] == 0, twice += covered[i] > 1;
    for (uint32_t s = 0; s < n_seqs; s++) wasteful += idle[s] > 1;
    CHECK(uncovered == 0 && twice == 0, "%s: %zu rows not computed, %zu computed twice (n_tokens=%zu, n_seqs=%u)",
          what, uncovered, twice, n_tokens, n_seqs);
    CHECK(wasteful == 0, "%s: %zu sequences have more than one idle tile", what, wasteful);
    free(covered), free(idle);
}

int main(void) {
    static const uint32_t fixed[][6] = {
        {1, 5, 67, 130, 0, 0}, {15, 16, 17, 31, 32, 33}, {0, 0, 0, 0, 0, 1}, {16, 16, 16, 16, 16, 16}, {200, 1, 1, 1, 1, 1}};
    for (size_t f = 0; f < sizeof fixed / sizeof fixed[0]; f++) {
        uint32_t cu[7] = {0};
        for (int s = 0; s < 6; s++) cu[s + 1] = cu[s] + fixed[f][s];
        char what[64];
        snprintf(what, sizeof what, "fixed batch %zu", f);
        check_batch(cu, 6, what);
    }
    uint64_t rng = 0x7a11e5;
    for (int trial = 0; trial < 2000; trial++) {
        uint32_t n_seqs = tu_rand_range(&rng, 1, trial % 10 == 0 ? 3000 : 40);
        uint32_t max_len = trial % 3 == 0 ? 4 : trial % 3 == 1 ? 40 : 700;
        uint32_t *cu = malloc((n_seqs + 1) * sizeof *cu);
        cu[0] = 0;
        for (uint32_t s = 0; s < n_seqs; s++) cu[s + 1] = cu[s] + tu_rand_range(&rng, 0, max_len);
        char what[64];
        snprintf(what, sizeof what, "random batch %d", trial);
        check_batch(cu, n_seqs, what);
        /* The same counts with the tokens moved into one sequence: the grid does not change. */
        uint32_t n_tokens = cu[n_seqs];
        for (uint32_t s = 1; s < n_seqs; s++) cu[s] = 0;
        CHECK_EQ(att_grid_tiles(n_tokens, n_seqs), att_grid_tiles(cu[n_seqs], n_seqs), "%s", what);
        snprintf(what, sizeof what, "random batch %d, one long sequence", trial);
        check_batch(cu, n_seqs, what);
        free(cu);
    }
    return tu_summary();
}
