/*
 * test_taken_index.c: batch/taken_index.h (internal: the static build) against a direct scan, on
 * random lcp arrays of 0 to 300 positions marked in random order: after every mark, each position's
 * common prefix with the nearest marked position on either side equals the minimum lcp across the
 * gap found by walking to it.
 */
#include "batch/taken_index.h"
#include "test_util.h"

#define MAX_N 300

/* The common prefix of pos with the nearest marked position on either side, by walking. */
static uint32_t walk(const uint32_t *lcp, const uint8_t *marked, uint32_t n, uint32_t pos) {
    uint32_t best = 0, common = UINT32_MAX;
    for (uint32_t i = pos; i > 0; i--) { /* lcp[i] joins i-1 and i */
        if (lcp[i] < common) common = lcp[i];
        if (marked[i - 1]) {
            best = common;
            break;
        }
    }
    common = UINT32_MAX;
    for (uint32_t i = pos + 1; i < n; i++) {
        if (lcp[i] < common) common = lcp[i];
        if (marked[i]) {
            if (common > best) best = common;
            break;
        }
    }
    return best;
}

int main(void) {
    static uint32_t lcp[MAX_N], counts[MAX_N + 1], lcp_min[2 * MAX_N], order[MAX_N];
    static uint8_t marked[MAX_N];
    uint64_t rng = 7;
    for (int round = 0; round < 300; round++) {
        uint32_t n = round < 4 ? (uint32_t)round : tu_rand_range(&rng, 1, MAX_N);
        for (uint32_t i = 0; i < n; i++) lcp[i] = i == 0 ? 0 : tu_rand_range(&rng, 0, round % 3 ? 40 : 3);
        taken_index t;
        taken_index_reset(&t, counts, lcp_min, lcp, n);
        for (uint32_t i = 0; i < n; i++) order[i] = i, marked[i] = 0;
        for (uint32_t i = n; i > 1; i--) { /* a random order of marks */
            uint32_t j = tu_rand_range(&rng, 0, i - 1), x = order[i - 1];
            order[i - 1] = order[j], order[j] = x;
        }
        uint32_t marks = n < 40 ? n : tu_rand_range(&rng, 0, 40); /* a batch takes few of a queue */
        for (uint32_t k = 0; k <= marks; k++) {
            int bad = 0;
            for (uint32_t pos = 0; pos < n && !bad; pos++) {
                uint32_t got = taken_index_shared(&t, pos), want = walk(lcp, marked, n, pos);
                bad = !CHECK(got == want, "round %d (n %u, %u marked), position %u: %u, want %u", round, n, k, pos, got,
                             want);
            }
            if (k == marks) break;
            taken_index_mark(&t, order[k]);
            marked[order[k]] = 1;
        }
    }
    return tu_summary();
}
